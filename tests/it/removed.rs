//! `--removed`: the documents a dropping run removes, as Parquet (`id`, `root`, `survivor`),
//! are exactly those missing from its output, in input order, each with its cluster's root and
//! the kept document it duplicates; the same bytes in memory, out of core and from
//! `stage cluster`; with `--against`, an index match names the indexed document.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::sharded::{corpus_lines, shards};
use neardup::stages::dedup::INDEX_TAG;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The three columns of a `--removed` file, row by row.
fn removed_rows(path: &Path) -> Vec<[String; 3]> {
    let col = |name| {
        let (names, v) = parquet_string_column(path, name);
        assert_eq!(names, ["id", "root", "survivor"]);
        v.unwrap()
            .into_iter()
            .map(|x| x.expect("no nulls"))
            .collect::<Vec<_>>()
    };
    let (id, root, survivor) = (col("id"), col("root"), col("survivor"));
    (0..id.len())
        .map(|i| [id[i].clone(), root[i].clone(), survivor[i].clone()])
        .collect()
}

/// What `--removed` must hold for a run with `flags` over `inputs`, from its tagged output
/// (`--tag-only`) and its dropping output.
fn expected(dir: &Path, inputs: &[PathBuf], flags: &[&str]) -> Vec<[String; 3]> {
    let tagged = dir.join("tagged.jsonl");
    let kept = dir.join("kept.jsonl");
    let mut args = vec!["dedup"];
    args.extend(inputs.iter().map(|p| s(p)));
    args.extend(flags);
    let mut a = args.clone();
    a.extend(["-o", s(&tagged), "--tag-only"]);
    ok(&neardup(&a));
    let mut a = args.clone();
    a.extend(["-o", s(&kept)]);
    ok(&neardup(&a));
    let kept: std::collections::HashSet<String> = read_jsonl(&kept)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let records = read_jsonl(&tagged);
    let tag = |r: &serde_json::Value| r["meta"]["minhash_cluster"].as_str().unwrap().to_string();
    let survivor_of: HashMap<String, String> = records
        .iter()
        .filter(|r| kept.contains(r["id"].as_str().unwrap()))
        .map(|r| (tag(r), r["id"].as_str().unwrap().to_string()))
        .collect();
    records
        .iter()
        .filter(|r| !kept.contains(r["id"].as_str().unwrap()))
        .map(|r| {
            // A cluster whose survivor an index matched has no kept member: its survivor is
            // its root (these runs keep the smallest id).
            let survivor = match r["meta"][INDEX_TAG].as_str() {
                Some(m) => m.to_string(),
                None => survivor_of.get(&tag(r)).cloned().unwrap_or_else(|| tag(r)),
            };
            [r["id"].as_str().unwrap().to_string(), tag(r), survivor]
        })
        .collect()
}

#[test]
fn removed_lists_what_the_output_lacks_with_root_and_survivor() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = shards(dir.path(), &corpus_lines(), 3, Some(1));
    for flags in [
        &["--exact"][..],
        &["--keep", "longest"],
        &["--cluster", "greedy", "--keep", "longest"],
    ] {
        let want = expected(dir.path(), &inputs, flags);
        assert!(want.len() > 50, "{flags:?}: {}", want.len());
        let run = |name: &str, extra: &[&str]| {
            let removed = dir.path().join(format!("{name}.parquet"));
            let mut args = vec!["dedup"];
            args.extend(inputs.iter().map(|p| s(p)));
            args.extend(flags);
            let out = dir.path().join(format!("{name}.jsonl"));
            args.extend(["-o", s(&out), "--engine", "cpu", "--removed", s(&removed)]);
            args.extend(extra);
            ok(&neardup(&args));
            removed
        };
        let mem = run("mem", &[]);
        assert_eq!(removed_rows(&mem), want, "{flags:?}");
        let work = dir.path().join(format!("work-{}", flags.len()));
        let sharded = run("sharded", &["--work-dir", s(&work), "--partitions", "2"]);
        assert_eq!(
            std::fs::read(&sharded).unwrap(),
            std::fs::read(&mem).unwrap()
        );
        // From the stage, after the run's cluster stage is done.
        let from_stage = dir.path().join("stage.parquet");
        ok(&neardup(&[
            "stage",
            "cluster",
            s(&work),
            "--removed",
            s(&from_stage),
            "-q",
        ]));
        assert_eq!(removed_rows(&from_stage), want, "{flags:?}: stage cluster");
        assert!(std::fs::read(&from_stage).unwrap() == std::fs::read(&mem).unwrap());
    }
    refused_with(
        &[
            "stage",
            "cluster",
            "/nonexistent",
            "--step",
            "edges",
            "--partition",
            "0",
            "--removed",
            "/tmp/x.parquet",
        ],
        &["--removed is written once the stage is done"],
    );
}

#[test]
fn an_index_match_names_the_indexed_document() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    let old = dir.path().join("old.jsonl");
    std::fs::write(&old, lines[..200].join("\n") + "\n").unwrap();
    let ix = dir.path().join("ix");
    ok(&neardup(&["index", "build", s(&old), "-o", s(&ix), "-q"]));
    let new = dir.path().join("new.jsonl");
    let renamed: Vec<String> = lines
        .iter()
        .map(|l| l.replacen("\"id\":\"", "\"id\":\"new-", 1))
        .collect();
    std::fs::write(&new, renamed.join("\n") + "\n").unwrap();
    let inputs = vec![new];
    let want = expected(dir.path(), &inputs, &["--against", s(&ix)]);
    assert!(
        want.iter().any(|r| r[2].starts_with("doc-")),
        "index matches name old ids"
    );
    let removed = dir.path().join("r.parquet");
    ok(&neardup(&[
        "dedup",
        s(&inputs[0]),
        "-o",
        s(&dir.path().join("o.jsonl")),
        "--against",
        s(&ix),
        "--removed",
        s(&removed),
        "-q",
    ]));
    assert_eq!(removed_rows(&removed), want);
}
