//! `neardup index` and `dedup --against`: new documents checked against an index of documents
//! already kept, compared with a brute-force oracle over every pair, through the real binary.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

type Docs = Vec<(String, String)>;

/// The old corpus A and the new one B: the fixture's documents split in two, B with edited
/// copies of some of A's documents (a word dropped, a word changed), exact copies under new
/// ids, a wordless document and an empty text.
fn corpora() -> (Docs, Docs) {
    let all: Vec<(String, String)> = read_jsonl(&fixture("corpus.jsonl"))
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (i, d) in all.into_iter().enumerate() {
        if i % 2 == 0 {
            a.push(d);
        } else {
            b.push(d);
        }
    }
    for (i, (id, text)) in a.iter().enumerate().step_by(7) {
        let words: Vec<&str> = text.split(' ').collect();
        let edited = match i % 3 {
            0 => words[..words.len() - 1].join(" "),
            1 => format!("{} changed {}", words[0], words[2..].join(" ")),
            _ => text.clone(),
        };
        b.push((format!("new-{id}"), edited));
    }
    b.push(("new-wordless".into(), "... !!! ---".into()));
    b.push(("new-empty".into(), String::new()));
    (a, b)
}

const K: usize = 5;
const NUM_PERM: usize = 128;
const BANDS: usize = 16;
const ROWS: usize = 8;

fn sig(text: &str) -> Vec<u32> {
    neardup::minhash(
        neardup::shingles(text, K),
        &neardup::perm_params(NUM_PERM, 0),
    )
}

/// The oracle: for each document of `new`, the document of `old` it duplicates, if any: over
/// every pair, those sharing a whole band (a wordless document has no bands) whose estimate is at
/// least `threshold` (every such pair with `confirm_none`); the highest estimate wins, ties to the
/// smallest id.
fn oracle(old: &Docs, new: &Docs, threshold: f64, confirm_none: bool) -> Vec<Option<String>> {
    let old_sigs: Vec<Vec<u32>> = old.iter().map(|(_, t)| sig(t)).collect();
    new.iter()
        .map(|(_, t)| {
            let q = sig(t);
            let mut best: Option<(f64, &str)> = None;
            for ((id, _), o) in old.iter().zip(&old_sigs) {
                let wordless = |s: &[u32]| s.iter().all(|&v| v == neardup::P);
                if wordless(&q) || wordless(o) {
                    continue;
                }
                let share_band =
                    (0..BANDS).any(|j| q[j * ROWS..(j + 1) * ROWS] == o[j * ROWS..(j + 1) * ROWS]);
                let est = neardup::estimate(&q, o).unwrap();
                if !share_band || (!confirm_none && est < threshold) {
                    continue;
                }
                if best.is_none_or(|(e, bid)| est > e || (est == e && id.as_str() < bid)) {
                    best = Some((est, id));
                }
            }
            best.map(|(_, id)| id.to_string())
        })
        .collect()
}

/// The corpora in `dir` (`a.jsonl`, `b.jsonl`) and the index of A (`ix`).
fn index_of_a(dir: &Path) -> (Docs, Docs) {
    let (a, b) = corpora();
    write_jsonl(&dir.join("a.jsonl"), &a);
    write_jsonl(&dir.join("b.jsonl"), &b);
    run_ok(&[
        "index",
        "build",
        s(&dir.join("a.jsonl")),
        "-o",
        s(&dir.join("ix")),
    ]);
    (a, b)
}

fn run_ok(args: &[&str]) -> std::process::Output {
    let o = neardup(args);
    ok(&o);
    o
}

/// `dedup B --against index(A)` keeps exactly the documents of B that survive dedup within B
/// and have no confirmed near duplicate in A; with `--tag-only` each is tagged with its match.
/// The same for A in any order, in one segment or two, in one index or two, with 1 or 2
/// threads, for each confirmation, and on the CPU and GPU engines.
#[test]
fn against_an_index_equals_the_brute_force_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (a, b) = corpora();
    let mut shuffled = a.clone();
    neardup::synth::shuffle(&mut shuffled, &mut neardup::Pcg32::new(7));
    write_jsonl(&p("a.jsonl"), &a);
    write_jsonl(&p("a-shuffled.jsonl"), &shuffled);
    let half = shuffled.len() / 2;
    write_jsonl(&p("a1.jsonl"), &shuffled[..half]);
    write_jsonl(&p("a2.jsonl"), &shuffled[half..]);
    write_jsonl(&p("b.jsonl"), &b);

    // One index, the shuffled one (by each engine), two segments, and two indexes of a
    // segment each.
    run_ok(&[
        "index",
        "build",
        s(&p("a.jsonl")),
        "-o",
        s(&p("ix")),
        "--engine",
        "cpu",
    ]);
    let mut engines = vec!["cpu"];
    for engine in ["cpu", "gpu"] {
        let ix = format!("ix-shuffled-{engine}");
        let o = neardup(&[
            "index",
            "build",
            s(&p("a-shuffled.jsonl")),
            "-o",
            s(&p(&ix)),
            "--engine",
            engine,
        ]);
        if engine == "gpu" {
            if stderr(&o).contains("no GPU adapter")
                && std::env::var("NEARDUP_REQUIRE_GPU").as_deref() != Ok("1")
            {
                eprintln!("\n*** GPU PART SKIPPED: no adapter for `index build --engine gpu`.\n");
                continue;
            }
            engines.push("gpu");
        }
        ok(&o);
    }
    run_ok(&[
        "index",
        "build",
        s(&p("a1.jsonl")),
        "-o",
        s(&p("ix2")),
        "--engine",
        "cpu",
    ]);
    run_ok(&[
        "index",
        "add",
        s(&p("ix2")),
        s(&p("a2.jsonl")),
        "--engine",
        "cpu",
    ]);
    run_ok(&["index", "build", s(&p("a1.jsonl")), "-o", s(&p("ix-a1"))]);
    run_ok(&["index", "build", s(&p("a2.jsonl")), "-o", s(&p("ix-a2"))]);
    let info: serde_json::Value =
        serde_json::from_str(&stdout(&run_ok(&["index", "info", s(&p("ix2"))]))).unwrap();
    assert_eq!(info["documents"], a.len());
    assert_eq!(info["segments"].as_array().unwrap().len(), 2);

    for (confirm, threshold) in [("jaccard", "0.8"), ("estimate", "0.7"), ("none", "0.8")] {
        let want = oracle(&a, &b, threshold.parse().unwrap(), confirm == "none");
        let matched = want.iter().filter(|m| m.is_some()).count();
        assert!(
            matched >= 10,
            "{confirm}: the corpora must test something: {matched}"
        );
        assert!(matched < b.len() / 2, "{confirm}: {matched}");
        // Dedup within B alone, tagged and dropped.
        let b_path = p("b.jsonl");
        let base = |extra: &[&str], out: &str| -> Vec<String> {
            let mut args = vec!["dedup", s(&b_path), "-o", out, "--confirm", confirm];
            args.extend_from_slice(&["--threshold", threshold]);
            args.extend_from_slice(extra);
            run_ok(&args);
            lines_of(Path::new(out))
        };
        let plain = base(&[], s(&p("plain.jsonl")));
        let plain_tagged = base(&["--tag-only"], s(&p("plain-tagged.jsonl")));
        let ids_of = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect()
        };
        let matched_ids: HashSet<&str> = b
            .iter()
            .zip(&want)
            .filter(|(_, m)| m.is_some())
            .map(|((id, _), _)| id.as_str())
            .collect();
        // The kept lines: plain dedup's, byte for byte, less those with a match.
        let want_kept: Vec<&String> = plain
            .iter()
            .zip(ids_of(&plain))
            .filter(|(_, id)| !matched_ids.contains(id.as_str()))
            .map(|(l, _)| l)
            .collect();
        assert!(want_kept.len() < plain.len());
        let mut variants: Vec<(String, Vec<String>)> = vec![
            (
                "one index".into(),
                vec!["--against".into(), s(&p("ix")).into()],
            ),
            (
                "two segments".into(),
                vec!["--against".into(), s(&p("ix2")).into()],
            ),
            (
                "two indexes".into(),
                vec![
                    "--against".into(),
                    s(&p("ix-a1")).into(),
                    "--against".into(),
                    s(&p("ix-a2")).into(),
                ],
            ),
        ];
        for engine in &engines {
            variants.push((
                format!("shuffled, {engine}"),
                vec![
                    "--against".into(),
                    s(&p(&format!("ix-shuffled-{engine}"))).into(),
                    "--engine".into(),
                    engine.to_string(),
                ],
            ));
        }
        for (name, extra) in &variants {
            for threads in ["1", "2"] {
                let what = format!("{confirm}, {name}, {threads} threads");
                let mut args: Vec<&str> = extra.iter().map(String::as_str).collect();
                args.extend_from_slice(&["--threads", threads]);
                let kept = base(&args, s(&p("kept.jsonl")));
                assert_eq!(kept.iter().collect::<Vec<_>>(), want_kept, "{what}");
                args.push("--tag-only");
                let tagged = base(&args, s(&p("tagged.jsonl")));
                assert_eq!(tagged.len(), b.len(), "{what}");
                for ((line, plain_line), m) in tagged.iter().zip(&plain_tagged).zip(&want) {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    let w: serde_json::Value = serde_json::from_str(plain_line).unwrap();
                    assert_eq!(
                        v["meta"]["minhash_cluster"], w["meta"]["minhash_cluster"],
                        "{what}"
                    );
                    assert_eq!(
                        v["meta"]["minhash_index_match"].as_str(),
                        m.as_deref(),
                        "{what}: {}",
                        v["id"]
                    );
                    if m.is_none() {
                        // A document without a match is written as plain dedup writes it.
                        assert_eq!(line, plain_line, "{what}");
                    }
                }
            }
        }
    }
}

/// `--update-index` adds exactly the run's survivors, as a new segment, after the outputs: the
/// same new corpus checked again finds every survivor in the index and keeps nothing. The
/// report and the summary line say what matched and what was added.
#[test]
fn update_index_adds_the_survivors() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (a, b) = index_of_a(dir.path());
    let o = run_ok(&[
        "dedup",
        s(&p("b.jsonl")),
        "-o",
        s(&p("kept.jsonl")),
        "--against",
        s(&p("ix")),
        "--update-index",
        "--report",
        s(&p("r.json")),
    ]);
    let kept = read_jsonl(&p("kept.jsonl"));
    let want = oracle(&a, &b, 0.8, false);
    let matched = want.iter().filter(|m| m.is_some()).count();
    let line = stderr(&o);
    assert!(
        line.contains(&format!(
            "{matched} duplicates of the index dropped, {} added to the index",
            kept.len()
        )),
        "{line}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("r.json")).unwrap()).unwrap();
    assert_eq!(r["against"]["matched"], matched, "{r}");
    assert_eq!(r["against"]["added"], kept.len(), "{r}");
    assert_eq!(r["against"]["confirm"], "estimate", "{r}");
    assert_eq!(r["against"]["indexes"][0]["documents"], a.len(), "{r}");
    assert_eq!(r["counts"]["documents_written"], kept.len(), "{r}");
    let info: serde_json::Value =
        serde_json::from_str(&stdout(&run_ok(&["index", "info", s(&p("ix"))]))).unwrap();
    assert_eq!(info["documents"], a.len() + kept.len());
    assert_eq!(info["segments"].as_array().unwrap().len(), 2);

    run_ok(&[
        "dedup",
        s(&p("b.jsonl")),
        "-o",
        s(&p("again.jsonl")),
        "--against",
        s(&p("ix")),
        "--tag-only",
    ]);
    // Every earlier survivor now matches itself, but for the wordless ones: they are nobody's
    // duplicate, in the index or out.
    let again: BTreeMap<String, serde_json::Value> = read_jsonl(&p("again.jsonl"))
        .into_iter()
        .map(|v| (v["id"].as_str().unwrap().to_string(), v))
        .collect();
    let wordless =
        |v: &serde_json::Value| neardup::shingles(v["text"].as_str().unwrap(), K).is_empty();
    let mut left_over = Vec::new();
    for k in &kept {
        let id = k["id"].as_str().unwrap();
        let m = again[id]["meta"].get("minhash_index_match");
        if wordless(k) {
            assert!(m.is_none(), "{id}");
            left_over.push(id.to_string());
        } else {
            assert_eq!(m.unwrap(), id, "{id}");
        }
    }
    assert!(
        left_over.len() >= 2 && left_over.len() < 10,
        "{left_over:?}"
    );
    run_ok(&[
        "dedup",
        s(&p("b.jsonl")),
        "-o",
        s(&p("none-left.jsonl")),
        "--against",
        s(&p("ix")),
    ]);
    let left: Vec<String> = read_jsonl(&p("none-left.jsonl"))
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, left_over);
}

/// An index this run cannot write to (immutable here, read-only for a user; root writes
/// through a mode) is refused by `--update-index` before any output appears, not after.
#[test]
fn update_index_into_an_unwritable_index_is_refused_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    index_of_a(dir.path());
    let ix = p("ix");
    // `chattr +i` holds even for root; where the file system has no such attribute the
    // directory's mode does it for anyone else.
    let immutable = std::process::Command::new("chattr")
        .args(["+i", s(&ix)])
        .status()
        .is_ok_and(|st| st.success());
    struct Undo(std::path::PathBuf, bool);
    impl Drop for Undo {
        fn drop(&mut self) {
            if self.1 {
                let _ = std::process::Command::new("chattr")
                    .args(["-i", self.0.to_str().unwrap()])
                    .status();
            }
        }
    }
    let _undo = Undo(ix.clone(), immutable);
    if !immutable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ix, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::write(ix.join("probe"), b"").is_ok() {
            // Root, on a file system without the attribute: nothing makes it read-only.
            eprintln!("\n*** TEST SKIPPED: no way to make an index read-only here\n");
            return;
        }
    }
    let out = p("kept.jsonl");
    let o = neardup(&[
        "dedup",
        s(&p("b.jsonl")),
        "-o",
        s(&out),
        "--against",
        s(&ix),
        "--update-index",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(s(&ix)) && stderr(&o).contains("--update-index cannot add to it"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

/// Parquet in and out: with `--tag-only`, the match is a `minhash_index_match` column beside
/// `minhash_cluster`; dropping, the output has the inputs' columns and the cluster tag only.
#[test]
fn parquet_outputs_carry_the_index_match() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (a, b) = index_of_a(dir.path());
    run_ok(&[
        "dedup",
        s(&p("b.jsonl")),
        "-o",
        s(&p("b.parquet")),
        "--tag-only",
    ]);
    let want = oracle(&a, &b, 0.8, false);
    for (out, tag_only) in [("tagged.parquet", true), ("kept.parquet", false)] {
        let (input, output, ix) = (p("b.parquet"), p(out), p("ix"));
        let mut args = vec!["dedup", s(&input), "-o", s(&output), "--against", s(&ix)];
        if tag_only {
            args.push("--tag-only");
        }
        run_ok(&args);
        let (names, got) = parquet_string_column(&p(out), "minhash_index_match");
        if !tag_only {
            assert_eq!(names, ["id", "text", "minhash_cluster"]);
            continue;
        }
        assert_eq!(
            names,
            ["id", "text", "minhash_cluster", "minhash_index_match"]
        );
        assert_eq!(got.unwrap(), want);
    }
}

/// Every bad index or combination is refused with its reason, before any output appears, and
/// leaves the index as it was; a build that fails leaves no index behind.
#[test]
fn bad_indexes_and_combinations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    index_of_a(dir.path());
    let manifest = std::fs::read(p("ix/index.json")).unwrap();
    let out = p("out.jsonl");
    let refused = |args: &[&str], why: &str| {
        let o = neardup(args);
        assert!(!o.status.success(), "{args:?} must fail");
        assert!(stderr(&o).contains(why), "{args:?}: {}", stderr(&o));
        assert!(!out.exists(), "{args:?}: no output");
        assert_eq!(
            std::fs::read(p("ix/index.json")).unwrap(),
            manifest,
            "{args:?}"
        );
    };
    let dedup = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["dedup", s(&p("b.jsonl")), "-o", s(&out)]
            .iter()
            .map(|x| x.to_string())
            .collect();
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let call = |v: &[String], why: &str| {
        let args: Vec<&str> = v.iter().map(String::as_str).collect();
        refused(&args, why);
    };
    call(
        &dedup(&["--against", s(&p("ix")), "--k", "4"]),
        "k 5 (this run: 4)",
    );
    call(
        &dedup(&["--against", s(&p("ix")), "--num-perm", "64", "--bands", "8"]),
        "num_perm 128 (this run: 64), bands 16 (this run: 8);",
    );
    call(
        &dedup(&["--against", s(&p("ix")), "--seed", "3"]),
        "seed 0 (this run: 3)",
    );
    call(&dedup(&["--against", s(&p("nope"))]), "not an index");
    call(
        &dedup(&["--against", s(&p("ix")), "--group-field", "id"]),
        "--group-field cannot be combined with --against",
    );
    call(
        &dedup(&[
            "--against",
            s(&p("ix")),
            "--against",
            s(&p("ix")),
            "--update-index",
        ]),
        "--update-index adds the survivors to one index",
    );
    call(&dedup(&["--update-index"]), "--against");
    call(
        &dedup(&[
            "--against",
            s(&p("ix")),
            "--update-index",
            "--work-dir",
            s(&p("w")),
        ]),
        "--update-index runs in memory only",
    );
    // An output onto the index's manifest, or anywhere in the index, is refused.
    refused(
        &[
            "dedup",
            s(&p("b.jsonl")),
            "-o",
            s(&p("ix/index.json")),
            "--against",
            s(&p("ix")),
        ],
        "is in the index",
    );
    // Building over an index, or into a directory with other files, is refused.
    refused(
        &["index", "build", s(&p("b.jsonl")), "-o", s(&p("ix"))],
        "already an index",
    );
    std::fs::create_dir(p("full")).unwrap();
    std::fs::write(p("full/x"), "x").unwrap();
    refused(
        &["index", "build", s(&p("b.jsonl")), "-o", s(&p("full"))],
        "not empty",
    );
    assert_eq!(dir_entries(&p("full")), ["x"]);
    // Adding with other parameters: they come from the index, so only the banding of a
    // hand-edited manifest can differ; a damaged manifest is named.
    refused(
        &["index", "add", s(&p("nope")), s(&p("b.jsonl"))],
        "not an index",
    );
    // A build whose input is bad leaves no index, and a repeated id is named.
    std::fs::write(
        p("bad.jsonl"),
        "{\"id\":\"x\",\"text\":\"a b c\"}\nnot json\n",
    )
    .unwrap();
    refused(
        &["index", "build", s(&p("bad.jsonl")), "-o", s(&p("ix-bad"))],
        "bad.jsonl:2",
    );
    assert!(!p("ix-bad").exists());
    std::fs::write(
        p("rep.jsonl"),
        "{\"id\":\"x\",\"text\":\"a\"}\n{\"id\":\"x\",\"text\":\"b\"}\n",
    )
    .unwrap();
    refused(
        &["index", "build", s(&p("rep.jsonl")), "-o", s(&p("ix-rep"))],
        "repeated id \"x\"",
    );
    assert!(!p("ix-rep").exists());
    // An add with a bad input leaves the index as it was.
    refused(
        &["index", "add", s(&p("ix")), s(&p("bad.jsonl"))],
        "bad.jsonl:2",
    );
    // A truncated segment is found when the index is opened.
    let seg = p("ix/seg-000001.ndx");
    let bytes = std::fs::read(&seg).unwrap();
    std::fs::write(&seg, &bytes[..bytes.len() - 8]).unwrap();
    call(&dedup(&["--against", s(&p("ix"))]), "truncated or damaged");
    std::fs::write(&seg, &bytes).unwrap();
    // A manifest of another contract version, or of another format, is refused, naming both;
    // the manifest is left as it is (edited here, so compared with the edit).
    let text = String::from_utf8(manifest.clone()).unwrap();
    for (from, to, why) in [
        (
            "neardup-minhash-v1",
            "neardup-minhash-v0",
            "contract neardup-minhash-v0 (this neardup: neardup-minhash-v1)",
        ),
        (
            "neardup-index-1",
            "neardup-index-9",
            "this neardup reads \"neardup-index-1\"",
        ),
    ] {
        let edited = text.replace(from, to);
        std::fs::write(p("ix/index.json"), &edited).unwrap();
        let args = dedup(&["--against", s(&p("ix"))]);
        let o = neardup(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!o.status.success());
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(!out.exists());
        assert_eq!(std::fs::read_to_string(p("ix/index.json")).unwrap(), edited);
    }
}

/// Out of core, `--against` gives in-memory `--against`'s bytes, report counts included; the
/// stages see the index as it was when the work directory was made, whatever is added to it
/// meanwhile.
#[test]
fn out_of_core_runs_check_against_the_index_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (a, b) = corpora();
    write_jsonl(&p("a.jsonl"), &a);
    let third = b.len().div_ceil(3);
    let shards: Vec<String> = (0..3)
        .map(|i| {
            let path = p(&format!("b{i}.jsonl"));
            write_jsonl(
                &path,
                &b[(i * third).min(b.len())..((i + 1) * third).min(b.len())],
            );
            s(&path).to_string()
        })
        .collect();
    run_ok(&["index", "build", s(&p("a.jsonl")), "-o", s(&p("ix"))]);
    for (v, flags) in [
        &[][..],
        &["--tag-only"][..],
        &["--tag-only", "--keep", "longest", "--confirm", "estimate"][..],
    ]
    .iter()
    .enumerate()
    {
        let run = |out: &str, report: &str, work: Option<String>| {
            let mut args: Vec<String> = vec!["dedup".into()];
            args.extend(shards.iter().cloned());
            args.extend(["-o".into(), s(&p(out)).into(), "--report".into()]);
            args.extend([s(&p(report)).into(), "--against".into(), s(&p("ix")).into()]);
            args.extend(flags.iter().map(|f| f.to_string()));
            if let Some(w) = work {
                args.extend(["--work-dir".into(), w, "--partitions".into(), "2".into()]);
            }
            run_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        };
        run(&format!("mem-{v}.jsonl"), "mem.json", None);
        run(
            &format!("wd-{v}.jsonl"),
            "wd.json",
            Some(s(&p(&format!("w{v}"))).into()),
        );
        assert_eq!(
            sha256(&p(&format!("mem-{v}.jsonl"))),
            sha256(&p(&format!("wd-{v}.jsonl"))),
            "{flags:?}"
        );
        let report = |n: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(p(n)).unwrap()).unwrap()
        };
        let (mem, wd) = (report("mem.json"), report("wd.json"));
        assert_eq!(
            mem["against"]["matched"], wd["against"]["matched"],
            "{flags:?}"
        );
        assert_eq!(mem["against"]["candidates"], wd["against"]["candidates"]);
        assert_eq!(
            mem["counts"]["documents_written"],
            wd["counts"]["documents_written"]
        );
        assert!(mem["against"]["matched"].as_u64().unwrap() >= 10);
    }
    // The stages one by one, with a segment added to the index between `init` and `apply`:
    // `apply` still sees the index as recorded, so the output is the same.
    let w = p("staged");
    let stage = |args: &[&str]| {
        let mut v = vec!["stage"];
        v.extend_from_slice(args);
        run_ok(&v);
    };
    let mut init = vec!["init", s(&w)];
    init.extend(shards.iter().map(String::as_str));
    let ix = p("ix");
    init.extend_from_slice(&["--partitions", "2", "--against", s(&ix)]);
    stage(&init);
    for i in ["0", "1", "2"] {
        stage(&["sign", s(&w), "--shard", i]);
    }
    stage(&["rank", s(&w)]);
    for i in ["0", "1", "2"] {
        stage(&["bands", s(&w), "--shard", i]);
    }
    for q in ["0", "1"] {
        stage(&["confirm", s(&w), "--partition", q]);
    }
    stage(&["cluster", s(&w)]);
    run_ok(&["index", "add", s(&p("ix")), &shards[0]]);
    let mut joined = Vec::new();
    for i in 0..3 {
        let out = p(&format!("staged-{i}.jsonl"));
        stage(&["apply", s(&w), "--shard", &i.to_string(), "-o", s(&out)]);
        joined.extend(std::fs::read(&out).unwrap());
    }
    assert_eq!(joined, std::fs::read(p("mem-0.jsonl")).unwrap());
    // An index rebuilt at the same path (as many segments, other documents) is not the index
    // the work directory recorded: `apply` names it and writes nothing.
    std::fs::remove_dir_all(&ix).unwrap();
    run_ok(&["index", "build", &shards[1], &shards[2], "-o", s(&ix)]);
    run_ok(&["index", "add", s(&ix), &shards[0]]);
    let redo = p("staged-redo.jsonl");
    let o = neardup(&["stage", "apply", s(&w), "--shard", "1", "-o", s(&redo)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(s(&ix)) && stderr(&o).contains("rebuilt or replaced"),
        "{}",
        stderr(&o)
    );
    assert!(!redo.exists());
    // A work directory made for the index as it was is refused for the index as it is now.
    let o = neardup(&[
        "dedup",
        &shards[0],
        &shards[1],
        &shards[2],
        "-o",
        s(&p("again.jsonl")),
        "--against",
        s(&p("ix")),
        "--work-dir",
        s(&p("w0")),
        "--partitions",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("segments: 1 there, 2 here"),
        "{}",
        stderr(&o)
    );
}
