//! What a corpus builder decides after "which documents are near duplicates": which copy
//! survives (`--keep`) and dedup within groups (`--group-field`), through the real binary, for
//! JSONL and Parquet.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `fixtures/corpus.jsonl` with a `quality` (a value with ties) and a `dump` (three groups),
/// in the order given by `order` (indices into the fixture's lines).
fn corpus_with_fields(order: &[usize]) -> Vec<serde_json::Value> {
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(fixture("corpus.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    order
        .iter()
        .map(|&i| {
            let mut v = lines[i].clone();
            v["quality"] = ((i * 7919) % 5).into();
            v["dump"] = format!("CC-{}", i % 3).into();
            v
        })
        .collect()
}

fn write_lines(path: &Path, recs: &[serde_json::Value]) {
    let mut t = String::new();
    for r in recs {
        t.push_str(&r.to_string());
        t.push('\n');
    }
    std::fs::write(path, t).unwrap();
}

/// The same records as Parquet: id, text, quality (float), dump.
fn records_as_parquet(path: &Path, recs: &[serde_json::Value]) {
    let col = |k: &str| -> Vec<String> {
        recs.iter()
            .map(|r| r[k].as_str().unwrap().to_string())
            .collect()
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("quality", DataType::Float64, true),
        Field::new("dump", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(col("id"))) as ArrayRef,
            Arc::new(StringArray::from(col("text"))),
            Arc::new(Float64Array::from_iter_values(
                recs.iter().map(|r| r["quality"].as_f64().unwrap()),
            )),
            Arc::new(StringArray::from(col("dump"))),
        ],
    )
    .unwrap();
    write_parquet(path, &batch, 1 << 20);
}

/// Ids of a JSONL output, and each one's tag.
fn kept(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_string(),
                v["meta"]["minhash_cluster"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Clusters of a `--clusters` file: root -> members.
fn clusters(path: &Path) -> BTreeMap<String, Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["root"].as_str().unwrap().to_string(),
                v["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

/// The survivor each policy should choose, computed from the clusters and the records.
fn expected_survivors(
    recs: &[serde_json::Value],
    clusters: &BTreeMap<String, Vec<String>>,
    policy: &str,
) -> BTreeSet<String> {
    let pos: BTreeMap<&str, usize> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| (r["id"].as_str().unwrap(), i))
        .collect();
    let words = |id: &str| neardup::text::Words::new(recs[pos[id]]["text"].as_str().unwrap()).len();
    let quality = |id: &str| recs[pos[id]]["quality"].as_f64().unwrap();
    let in_cluster: BTreeSet<&String> = clusters.values().flatten().collect();
    let mut out: BTreeSet<String> = recs
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .filter(|id| !in_cluster.contains(id))
        .collect();
    for members in clusters.values() {
        // Members are in id order, so a strict comparison leaves ties to the smallest id.
        let mut best = &members[0];
        for m in &members[1..] {
            let better = match policy {
                "smallest-id" => false,
                "first" => pos[m.as_str()] < pos[best.as_str()],
                "longest" => words(m) > words(best),
                "field:quality:max" => quality(m) > quality(best),
                "field:quality:min" => quality(m) < quality(best),
                _ => unreachable!(),
            };
            if better {
                best = m;
            }
        }
        out.insert(best.clone());
    }
    out
}

/// Every policy keeps the document it names, ties to the smallest id, and the tag stays the
/// root; the result does not depend on input order (but `first`, by its definition) or on
/// threads, for JSONL and Parquet alike.
#[test]
fn every_keep_policy_and_its_ties() {
    let dir = tempfile::tempdir().unwrap();
    let n = 301;
    let forward: Vec<usize> = (0..n).collect();
    let shuffled: Vec<usize> = (0..n).map(|i| (i * 97) % n).collect();
    let mut ties_seen = 0;
    for policy in [
        "smallest-id",
        "first",
        "longest",
        "field:quality:max",
        "field:quality:min",
    ] {
        let mut results = Vec::new();
        for (name, order) in [("f", &forward), ("s", &shuffled)] {
            let recs = corpus_with_fields(order);
            let jsonl = dir.path().join(format!("{name}.jsonl"));
            let pq = dir.path().join(format!("{name}.parquet"));
            write_lines(&jsonl, &recs);
            records_as_parquet(&pq, &recs);
            for (input, threads) in [(&jsonl, "1"), (&jsonl, "2"), (&pq, "2")] {
                let out = dir.path().join("out.jsonl");
                let cl = dir.path().join("c.jsonl");
                ok(&neardup(&[
                    "dedup",
                    s(input),
                    "-o",
                    s(&out),
                    "--clusters",
                    s(&cl),
                    "--keep",
                    policy,
                    "--threads",
                    threads,
                ]));
                let got = kept(&out);
                let cs = clusters(&cl);
                let want = expected_survivors(&recs, &cs, policy);
                assert_eq!(
                    got.keys().cloned().collect::<BTreeSet<_>>(),
                    want,
                    "{policy} {name}"
                );
                for (id, tag) in &got {
                    let root = cs
                        .iter()
                        .find(|(_, m)| m.contains(id))
                        .map_or(id, |(r, _)| r);
                    assert_eq!(tag, root, "the tag stays the root ({policy})");
                }
                if policy.starts_with("field") || (policy == "first" && name == "s") {
                    assert_ne!(
                        want,
                        expected_survivors(&recs, &cs, "smallest-id"),
                        "{policy} changes a survivor"
                    );
                }
                if policy == "field:quality:max" {
                    ties_seen += cs
                        .values()
                        .filter(|m| {
                            let q: Vec<f64> = m
                                .iter()
                                .map(|id| {
                                    recs.iter().find(|r| r["id"] == id.as_str()).unwrap()["quality"]
                                        .as_f64()
                                        .unwrap()
                                })
                                .collect();
                            let max = q.iter().cloned().fold(f64::MIN, f64::max);
                            q.iter().filter(|&&x| x == max).count() > 1
                        })
                        .count();
                }
                // A tagging run names each record's survivor where the policy may keep
                // another than the root: the one record of its tag that dropping keeps.
                let tagged = dir.path().join("tagged.jsonl");
                ok(&neardup(&[
                    "dedup",
                    s(input),
                    "-o",
                    s(&tagged),
                    "--keep",
                    policy,
                    "--threads",
                    threads,
                    "--tag-only",
                ]));
                let survivor_of_tag: BTreeMap<&str, &str> = got
                    .iter()
                    .map(|(id, tag)| (tag.as_str(), id.as_str()))
                    .collect();
                for r in read_jsonl(&tagged) {
                    let survivor = r["meta"].get("minhash_survivor");
                    if policy == "smallest-id" {
                        assert!(survivor.is_none(), "{r}");
                    } else {
                        let tag = r["meta"]["minhash_cluster"].as_str().unwrap();
                        assert_eq!(survivor.unwrap(), survivor_of_tag[tag], "{policy}: {r}");
                    }
                }
                results.push((name, got));
            }
        }
        if policy != "first" {
            for r in &results[1..] {
                assert_eq!(
                    r.1, results[0].1,
                    "{policy}: the same survivors in any order"
                );
            }
        }
    }
    assert!(ties_seen > 0, "the corpus exercises ties");
}

/// `--group-field`: one run gives each group the output of running that group on its own, for
/// JSONL and Parquet; the report counts each group.
#[test]
fn groups_dedup_as_if_run_alone() {
    let dir = tempfile::tempdir().unwrap();
    let recs = corpus_with_fields(&(0..301).collect::<Vec<_>>());
    let jsonl = dir.path().join("all.jsonl");
    let pq = dir.path().join("all.parquet");
    write_lines(&jsonl, &recs);
    records_as_parquet(&pq, &recs);
    let mut alone_kept = BTreeMap::new();
    let mut alone_clusters = BTreeMap::new();
    for g in 0..3 {
        let part: Vec<serde_json::Value> = recs
            .iter()
            .filter(|r| r["dump"] == format!("CC-{g}").as_str())
            .cloned()
            .collect();
        let input = dir.path().join(format!("g{g}.jsonl"));
        write_lines(&input, &part);
        let (out, cl) = (dir.path().join("o.jsonl"), dir.path().join("c.jsonl"));
        ok(&neardup(&[
            "dedup",
            s(&input),
            "-o",
            s(&out),
            "--clusters",
            s(&cl),
            "--exact",
        ]));
        alone_kept.extend(kept(&out));
        alone_clusters.extend(clusters(&cl));
    }
    let (out, cl, report) = (
        dir.path().join("o.jsonl"),
        dir.path().join("c.jsonl"),
        dir.path().join("r.json"),
    );
    ok(&neardup(&[
        "dedup",
        s(&jsonl),
        "-o",
        s(&out),
        "--clusters",
        s(&cl),
        "--exact",
    ]));
    let across = kept(&out);
    assert!(
        across.len() < alone_kept.len(),
        "dedup across groups drops more"
    );
    for input in [&jsonl, &pq] {
        ok(&neardup(&[
            "dedup",
            s(input),
            "-o",
            s(&out),
            "--clusters",
            s(&cl),
            "--exact",
            "--group-field",
            "dump",
            "--report",
            s(&report),
        ]));
        assert_eq!(kept(&out), alone_kept, "{}", input.display());
        assert_eq!(clusters(&cl), alone_clusters, "{}", input.display());
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let groups = r["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0]["group"], "CC-0");
        let docs: u64 = groups
            .iter()
            .map(|g| g["documents"].as_u64().unwrap())
            .sum();
        let written: u64 = groups
            .iter()
            .map(|g| g["documents_written"].as_u64().unwrap())
            .sum();
        assert_eq!((docs, written), (301, alone_kept.len() as u64));
        assert!(r["counts"]["pairs_other_group"].as_u64().unwrap() > 0);
        assert_eq!(r["parameters"]["group_field"], "dump");
        // The key counts docs/FORMATS.md states.
        let keys = |v: &serde_json::Value| v.as_object().unwrap().len();
        assert_eq!(
            (keys(&r), keys(&r["parameters"]), keys(&r["counts"])),
            (17, 19, 21)
        );
    }
}

/// Missing, null or mistyped policy fields: a clear error naming the document, exit 1, no
/// output; `--group-missing own` puts documents without the group in a group of their own.
#[test]
fn bad_policy_fields_and_group_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let input = dir.path().join("in.jsonl");
    let t = "one two three four five six seven eight nine ten eleven twelve";
    std::fs::write(
        &input,
        format!(
            "{{\"id\":\"a\",\"text\":\"{t}\",\"q\":1,\"g\":\"x\"}}\n{{\"id\":\"b\",\"text\":\"{t}\",\"q\":\"high\"}}\n"
        ),
    )
    .unwrap();
    let fails = |args: &[&str], needles: &[&str]| {
        let mut a = vec!["dedup", s(&input), "-o", s(&out)];
        a.extend_from_slice(args);
        let o = neardup(&a);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        for n in needles {
            assert!(
                stderr(&o).contains(n),
                "{args:?}: {} lacks {n:?}",
                stderr(&o)
            );
        }
        assert!(!out.exists());
    };
    fails(
        &["--keep", "field:q:max"],
        &["in.jsonl:2", "field `q` is a string", "needs a number"],
    );
    fails(
        &["--keep", "field:nope:min"],
        &["in.jsonl:1", "field `nope` is missing"],
    );
    let o = neardup(&["dedup", s(&input), "-o", s(&out), "--keep", "longest:x"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(stderr(&o).contains("not a policy"), "{}", stderr(&o));
    fails(
        &["--group-field", "g"],
        &["in.jsonl:2", "field `g` is missing", "--group-missing own"],
    );
    // `own`: b has no group, so it is not a's duplicate.
    ok(&neardup(&[
        "dedup",
        s(&input),
        "-o",
        s(&out),
        "--group-field",
        "g",
        "--group-missing",
        "own",
    ]));
    assert_eq!(kept(&out).len(), 2);
    ok(&neardup(&["dedup", s(&input), "-o", s(&out)]));
    assert_eq!(kept(&out).len(), 1);
    std::fs::remove_file(&out).unwrap();

    // Parquet: a null keep value and a non-numeric keep column.
    let pq = dir.path().join("in.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("q", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
            Arc::new(StringArray::from(vec![t, t])),
            Arc::new(Float64Array::from(vec![Some(1.0), None])),
        ],
    )
    .unwrap();
    write_parquet(&pq, &batch, 1 << 20);
    let o = neardup(&["dedup", s(&pq), "-o", s(&out), "--keep", "field:q:max"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("row 1 (row group 0): field `q` is null"),
        "{}",
        stderr(&o)
    );
    let o = neardup(&["dedup", s(&pq), "-o", s(&out), "--keep", "field:text:max"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("needs a numeric column"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

/// Two near copies, the short one with the smaller id and low quality: each policy keeps the
/// one it names, and equal keys go to the smallest id.
#[test]
fn the_short_copy_and_the_long_copy() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let out = dir.path().join("out.jsonl");
    let t = "the harbour wall was rebuilt in stone after the storm of that winter and the \
             fishing boats came back to the old quay within a year of the work";
    let recs = [
        serde_json::json!({"id": "z-long", "text": format!("{t} and more"), "quality": 0.9}),
        serde_json::json!({"id": "b-short", "text": t, "quality": 0.1}),
        serde_json::json!({"id": "m-tie", "text": t, "quality": 0.1}),
    ];
    write_lines(&input, &recs);
    for (policy, want) in [
        ("smallest-id", "b-short"),
        ("first", "z-long"),
        ("longest", "z-long"),
        ("field:quality:max", "z-long"),
        // b-short and m-tie tie at 0.1: the smaller id.
        ("field:quality:min", "b-short"),
    ] {
        ok(&neardup(&[
            "dedup",
            s(&input),
            "-o",
            s(&out),
            "--keep",
            policy,
        ]));
        let got = kept(&out);
        assert_eq!(got.keys().collect::<Vec<_>>(), [want], "{policy}");
        assert_eq!(
            got[want], "b-short",
            "the tag is the root whatever survives"
        );
        // Tagging, every record names the survivor (but under the root policy, where the tag
        // does): in JSONL `meta`, and in a Parquet column beside the cluster's.
        let pq = dir.path().join("out.parquet");
        for o in [&out, &pq] {
            ok(&neardup(&[
                "dedup",
                s(&input),
                "-o",
                s(o),
                "--keep",
                policy,
                "--tag-only",
            ]));
        }
        let survivors: Vec<Option<String>> = read_jsonl(&out)
            .iter()
            .map(|r| {
                r["meta"]
                    .get("minhash_survivor")
                    .map(|v| v.as_str().unwrap().to_string())
            })
            .collect();
        let (_, column) = parquet_string_column(&pq, "minhash_survivor");
        if policy == "smallest-id" {
            assert_eq!(survivors, [None, None, None]);
            assert!(column.is_none());
        } else {
            assert_eq!(survivors, vec![Some(want.to_string()); 3], "{policy}");
            assert_eq!(column.unwrap(), survivors, "{policy}");
        }
    }
}
