//! The output bytes of `dedup` and `signatures` are the same (sha256) across thread counts,
//! input order, input splits, engines and repeated runs; signatures made under other parameters
//! are refused, never compared.

use std::path::{Path, PathBuf};

use crate::common::*;

/// Run dedup (with clusters) and signatures (npy and tsv); return the sha256 of every output.
fn run_all(dir: &Path, tag: &str, inputs: &[&Path], extra: &[&str]) -> Vec<(String, String)> {
    run_with(dir, tag, inputs, extra, &[])
}

fn run_with(
    dir: &Path,
    tag: &str,
    inputs: &[&Path],
    extra: &[&str],
    dedup_only: &[&str],
) -> Vec<(String, String)> {
    let mut hashes = Vec::new();
    let ins: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    let out = dir.join(format!("{tag}.jsonl"));
    let cl = dir.join(format!("{tag}.clusters.jsonl"));
    let pairs = dir.join(format!("{tag}.pairs.jsonl"));
    let mut args = vec!["dedup"];
    args.extend(&ins);
    args.extend([
        "-o",
        out.to_str().unwrap(),
        "--clusters",
        cl.to_str().unwrap(),
        "--pairs",
        pairs.to_str().unwrap(),
        "--exact",
    ]);
    args.extend(extra);
    args.extend(dedup_only);
    ok(&neardup(&args));
    hashes.push(("dedup".to_string(), sha256(&out)));
    hashes.push(("clusters".to_string(), sha256(&cl)));
    hashes.push(("pairs".to_string(), sha256(&pairs)));
    for fmt in ["npy", "tsv"] {
        let s = dir.join(format!("{tag}.{fmt}"));
        let mut args = vec!["signatures"];
        args.extend(&ins);
        args.extend(["-o", s.to_str().unwrap(), "--format", fmt]);
        args.extend(extra);
        ok(&neardup(&args));
        hashes.push((fmt.to_string(), sha256(&s)));
    }
    hashes
}

#[test]
fn threads_and_repeated_runs_give_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("example.jsonl");
    let base = run_all(
        dir.path(),
        "t1",
        &[&input],
        &["--threads", "1", "--engine", "cpu"],
    );
    for t in ["2", "4"] {
        let got = run_all(
            dir.path(),
            &format!("t{t}"),
            &[&input],
            &["--threads", t, "--engine", "cpu"],
        );
        assert_eq!(got, base, "{t} threads");
    }
    let again = run_all(
        dir.path(),
        "again",
        &[&input],
        &["--threads", "1", "--engine", "cpu"],
    );
    assert_eq!(again, base, "a repeated run");
}

#[test]
fn splitting_the_input_into_several_files_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("example.jsonl");
    let lines = lines_of(&input);
    let cut = [0, 7, 150, 151, lines.len()];
    let parts: Vec<PathBuf> = cut
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let p = dir.path().join(format!("part{i}.jsonl"));
            std::fs::write(&p, lines[w[0]..w[1]].join("\n") + "\n").unwrap();
            p
        })
        .collect();
    let part_refs: Vec<&Path> = parts.iter().map(|p| p.as_path()).collect();
    let whole = run_all(dir.path(), "whole", &[&input], &["--engine", "cpu"]);
    let split = run_all(dir.path(), "split", &part_refs, &["--engine", "cpu"]);
    assert_eq!(split, whole);
}

#[test]
fn shuffled_input_keeps_survivors_and_roots_and_follows_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("example.jsonl");
    let mut lines = lines_of(&input);
    let mut rng = neardup::Pcg32::new(31);
    neardup::synth::shuffle(&mut lines, &mut rng);
    let shuffled = dir.path().join("shuffled.jsonl");
    std::fs::write(&shuffled, lines.join("\n") + "\n").unwrap();
    run_with(
        dir.path(),
        "a",
        &[&input],
        &["--engine", "cpu"],
        &["--tag-only"],
    );
    run_with(
        dir.path(),
        "b",
        &[&shuffled],
        &["--engine", "cpu"],
        &["--tag-only"],
    );
    // The clusters file is ordered by root, the pairs file by id: identical bytes.
    for f in ["clusters", "pairs"] {
        assert_eq!(
            sha256(&dir.path().join(format!("a.{f}.jsonl"))),
            sha256(&dir.path().join(format!("b.{f}.jsonl"))),
            "{f}"
        );
    }
    // Every record keeps its root; the output follows the input's order.
    let parse = |p: &Path| -> Vec<(String, String)> {
        read_jsonl(p)
            .iter()
            .map(|v| {
                (
                    v["id"].as_str().unwrap().to_string(),
                    v["meta"]["minhash_cluster"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let a = parse(&dir.path().join("a.jsonl"));
    let b = parse(&dir.path().join("b.jsonl"));
    let order_b: Vec<String> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        b.iter().map(|(i, _)| i.clone()).collect::<Vec<_>>(),
        order_b
    );
    let mut a_sorted = a.clone();
    let mut b_sorted = b.clone();
    a_sorted.sort();
    b_sorted.sort();
    assert_eq!(a_sorted, b_sorted);
}

#[test]
fn cpu_and_gpu_engines_give_identical_bytes() {
    let Some(probe) =
        crate::common::gpu_or_skip(neardup::MinHashParams::default(), &Default::default())
    else {
        return;
    };
    drop(probe);
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("example.jsonl");
    let cpu = run_all(dir.path(), "cpu", &[&input], &["--engine", "cpu"]);
    let gpu = run_all(dir.path(), "gpu", &[&input], &["--engine", "gpu"]);
    // The npy metadata names the engine; the arrays themselves must match.
    assert_eq!(cpu[..2], gpu[..2], "dedup output and clusters");
    assert_eq!(cpu[3], gpu[3], "tsv signatures");
    let a = neardup::io::sigfile::read_signatures(dir.path().join("cpu.npy").to_str().unwrap())
        .unwrap();
    let b = neardup::io::sigfile::read_signatures(dir.path().join("gpu.npy").to_str().unwrap())
        .unwrap();
    assert_eq!((a.ids, a.sigs), (b.ids, b.sigs));
}

#[test]
fn signatures_from_other_parameters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("decontam_probes.jsonl");
    let make = |name: &str, extra: &[&str]| -> String {
        let p = dir.path().join(name);
        let mut args = vec![
            "signatures",
            input.to_str().unwrap(),
            "-o",
            p.to_str().unwrap(),
            "--engine",
            "cpu",
        ];
        args.extend(extra);
        ok(&neardup(&args));
        p.to_str().unwrap().to_string()
    };
    let a = make("a.npy", &[]);
    let b = make("b.tsv", &["--format", "tsv"]);
    let seed1 = make("c.npy", &["--seed", "1"]);
    let k3 = make("d.tsv", &["--format", "tsv", "--k", "3"]);
    // Same parameters, two formats: equal.
    let o = neardup(&["compare", &a, &b]);
    ok(&o);
    assert!(stdout(&o).contains("mismatches: 0"), "{}", stdout(&o));
    // Other seed, other k, or a parameter the caller requires: an error, not a comparison.
    for (x, y, extra, needle) in [
        (&a, &seed1, vec![], "seed=1"),
        (&b, &k3, vec![], "k=3"),
        (&a, &b, vec!["--num-perm", "64"], "num_perm=64"),
    ] {
        let mut args = vec!["compare", x.as_str(), y.as_str()];
        args.extend(extra);
        let o = neardup(&args);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            stderr(&o).contains("not comparable") && stderr(&o).contains(needle),
            "{}",
            stderr(&o)
        );
    }
    // A signature file from another contract version is refused when read.
    let tsv = std::fs::read_to_string(&b)
        .unwrap()
        .replace("neardup-minhash-v1", "neardup-minhash-v0");
    let old = dir.path().join("old.tsv");
    std::fs::write(&old, tsv).unwrap();
    let o = neardup(&["compare", &b, old.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("contract"), "{}", stderr(&o));
    // A changed value is a mismatch with exit 1.
    let mut t = std::fs::read_to_string(&b).unwrap();
    let pos = t.find('\t').unwrap() + 1;
    t.replace_range(
        pos..pos + 1,
        if &t[pos..pos + 1] == "1" { "2" } else { "1" },
    );
    let changed = dir.path().join("changed.tsv");
    std::fs::write(&changed, t).unwrap();
    let o = neardup(&["compare", &b, changed.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("mismatch: id"), "{}", stdout(&o));
    // A row repeated under the same id, or an ids file that does not match its rows: an error
    // naming the file, not a miscount (or a panic) in the comparison.
    let t = std::fs::read_to_string(&b).unwrap();
    let first_row = t.lines().nth(1).unwrap();
    let repeated = dir.path().join("repeated.tsv");
    std::fs::write(&repeated, format!("{t}{first_row}\n")).unwrap();
    let o = neardup(&["compare", &b, repeated.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("repeated.tsv") && stderr(&o).contains("more than once"),
        "{}",
        stderr(&o)
    );
    let ids = format!("{a}.ids");
    let mut extra = std::fs::read_to_string(&ids).unwrap();
    extra.push_str("\"one-more\"\n");
    std::fs::write(&ids, extra).unwrap();
    let o = neardup(&["compare", &a, &b]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("ids for"), "{}", stderr(&o));
}

#[test]
fn many_chunks_in_flight_keep_input_order() {
    // A corpus of many 2 MiB chunks, signed several at a time: the output must still follow the
    // input, byte for byte the same as one thread's.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    synth(&big, 30000, 120);
    assert!(
        std::fs::metadata(&big).unwrap().len() > 8 << 20,
        "several chunks"
    );
    let one = run_all(
        dir.path(),
        "one",
        &[&big],
        &["--threads", "1", "--engine", "cpu"],
    );
    let two = run_all(
        dir.path(),
        "two",
        &[&big],
        &["--threads", "2", "--engine", "cpu"],
    );
    assert_eq!(one, two);
    let ids: Vec<String> = lines_of(&dir.path().join("two.tsv"))
        .iter()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let want: Vec<String> = (0..30000).map(|i| format!("syn-{i:09}")).collect();
    assert_eq!(ids, want);
}
