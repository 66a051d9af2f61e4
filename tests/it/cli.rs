//! The `neardup` binary end to end: every command on the fixtures, the file formats, compressed
//! inputs, stdin and stdout.

use std::io::Write;
use std::path::Path;

use crate::common::*;
use serde_json::Value;

fn truth(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

#[test]
fn dedup_on_the_planted_corpus_drops_exactly_the_planted_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let cl = dir.path().join("clusters.jsonl");
    let pairs = dir.path().join("pairs.jsonl");
    let rep = dir.path().join("report.json");
    let o = neardup(&[
        "dedup",
        fixture("corpus.jsonl").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--clusters",
        cl.to_str().unwrap(),
        "--pairs",
        pairs.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
        "--engine",
        "cpu",
        "--exact",
    ]);
    ok(&o);
    let t = truth("corpus.truth.json");
    let planted_near: usize = t["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_array().unwrap().len() - 1)
        .sum::<usize>()
        + 2;
    let planted_exact = t["exact_copies"].as_array().unwrap().len();
    let input = read_jsonl(&fixture("corpus.jsonl"));
    let kept = read_jsonl(&out);
    assert_eq!(kept.len(), input.len() - planted_near - planted_exact);
    // Every kept record is its own root, in input order.
    for r in &kept {
        assert_eq!(r["meta"]["minhash_cluster"], r["id"]);
    }
    let ids_in: Vec<&Value> = input.iter().map(|r| &r["id"]).collect();
    let pos: Vec<usize> = kept
        .iter()
        .map(|r| ids_in.iter().position(|i| *i == &r["id"]).unwrap())
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "input order kept");
    // Clusters file: the planted groups, roots the smallest id.
    let clusters = read_jsonl(&cl);
    assert_eq!(
        clusters.len(),
        t["clusters"].as_array().unwrap().len() + planted_exact + 1
    );
    for c in &clusters {
        let m: Vec<&str> = c["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(c["root"].as_str().unwrap(), *m.iter().min().unwrap());
        assert_eq!(c["size"].as_u64().unwrap() as usize, m.len());
    }
    // Pairs file: every pair explained with estimate and exact Jaccard >= threshold.
    for p in read_jsonl(&pairs) {
        assert!(p["a"].as_str().unwrap() < p["b"].as_str().unwrap());
        assert!(p["jaccard"].as_f64().unwrap() >= 0.8);
        assert!(p["estimate"].as_f64().is_some());
    }
    // Report and summary.
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    assert_eq!(r["contract"], "neardup-minhash-v1");
    assert_eq!(r["counts"]["documents_read"], input.len());
    assert_eq!(r["counts"]["exact_duplicates_dropped"], planted_exact);
    assert_eq!(r["counts"]["near_duplicates_dropped"], planted_near);
    assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0);
    // Every stage timed on its own; loading the sets is part of confirming.
    let st = &r["stages"];
    let secs = |k: &str| {
        st[k]["seconds"]
            .as_f64()
            .unwrap_or_else(|| panic!("stage {k}"))
    };
    let parts: f64 = ["signatures", "order", "lsh", "confirm", "cluster", "write"]
        .iter()
        .map(|k| secs(k))
        .sum();
    assert!(parts <= r["seconds"].as_f64().unwrap() + 1e-3, "{st}");
    let load = st["confirm"]["load_sets_seconds"].as_f64().unwrap();
    assert!(load > 0.0 && load <= secs("confirm"), "{st}");
    // A corpus this small keeps its sets from the signing pass.
    assert_eq!(st["confirm"]["sets_from_signing"], true, "{st}");
    let err = stderr(&o);
    for part in [
        format!("{} documents read", input.len()),
        format!("{planted_exact} exact duplicates dropped"),
        format!("{planted_near} near duplicates dropped"),
        "clusters".into(),
        " s,".into(),
        "docs/s".into(),
    ] {
        assert!(err.contains(&part), "summary lacks {part:?}: {err}");
    }
    // Each command's summary says only what applies to it.
    assert!(!err.contains("contaminated"), "{err}");
}

#[test]
fn tag_only_keeps_everyone_and_meta_is_created_or_extended() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(&inp, concat!(
        "{\"id\":\"b\",\"text\":\"the cat sat on the mat today and then went home\",\"meta\":{\"src\":\"x\"},\"n\":1}\n",
        "{\"z\":0,\"id\":\"a\",\"text\":\"The cat sat on the mat today, and then went home!\"}\n",
        "{\"id\":\"c\",\"text\":\"\"}\n",
    )).unwrap();
    let out = dir.path().join("out.jsonl");
    ok(&neardup(&[
        "dedup",
        inp.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--tag-only",
        "--engine",
        "cpu",
    ]));
    let got = std::fs::read_to_string(&out).unwrap();
    assert_eq!(got, concat!(
        "{\"id\":\"b\",\"text\":\"the cat sat on the mat today and then went home\",\"meta\":{\"src\":\"x\",\"minhash_cluster\":\"a\"},\"n\":1}\n",
        "{\"z\":0,\"id\":\"a\",\"text\":\"The cat sat on the mat today, and then went home!\",\"meta\":{\"minhash_cluster\":\"a\"}}\n",
        "{\"id\":\"c\",\"text\":\"\",\"meta\":{\"minhash_cluster\":\"c\"}}\n",
    ));
}

#[test]
fn signatures_npy_and_tsv_agree_with_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(&inp, "{\"id\":\"hand\",\"text\":\"the cat sat on the mat today\"}\n{\"id\":\"tab\\there\",\"text\":\"\"}\n").unwrap();
    let npy = dir.path().join("s.npy");
    ok(&neardup(&[
        "signatures",
        inp.to_str().unwrap(),
        "-o",
        npy.to_str().unwrap(),
        "--k",
        "3",
        "--num-perm",
        "8",
        "--engine",
        "cpu",
    ]));
    let bytes = std::fs::read(&npy).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let hl = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!((10 + hl) % 64, 0, "npy data is 64-byte aligned");
    let header = std::str::from_utf8(&bytes[10..10 + hl]).unwrap();
    assert!(
        header.contains("'descr': '<u4'") && header.contains("'shape': (2, 8)"),
        "{header}"
    );
    let vals: Vec<u32> = bytes[10 + hl..]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        vals[..8],
        [552187696, 459811629, 319030451, 188954223, 27324258, 536562966, 642288193, 451063373]
    );
    assert_eq!(vals[8..], [2147483647; 8]);
    let ids = std::fs::read_to_string(dir.path().join("s.npy.ids")).unwrap();
    assert_eq!(ids, "\"hand\"\n\"tab\\there\"\n");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("s.npy.meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["contract"], "neardup-minhash-v1");
    assert_eq!(meta["k"], 3);
    assert_eq!(meta["num_perm"], 8);
    assert_eq!(meta["documents"], 2);

    let tsv = dir.path().join("s.tsv");
    ok(&neardup(&[
        "signatures",
        inp.to_str().unwrap(),
        "-o",
        tsv.to_str().unwrap(),
        "--format",
        "tsv",
        "--k",
        "3",
        "--num-perm",
        "8",
        "--engine",
        "cpu",
    ]));
    let t = std::fs::read_to_string(&tsv).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "#neardup-signatures contract=neardup-minhash-v1 k=3 num_perm=8 seed=0"
    );
    assert_eq!(
        lines[1],
        "hand\t552187696,459811629,319030451,188954223,27324258,536562966,642288193,451063373"
    );
    assert_eq!(lines[2], "\"tab\\there\"\t2147483647,2147483647,2147483647,2147483647,2147483647,2147483647,2147483647,2147483647");
    // Both files read back to the same thing.
    let a = neardup::io::sigfile::read_signatures(npy.to_str().unwrap()).unwrap();
    let b = neardup::io::sigfile::read_signatures(tsv.to_str().unwrap()).unwrap();
    assert_eq!(a.ids, b.ids);
    assert_eq!(a.sigs, b.sigs);
    assert!(a
        .expect_params(&neardup::MinHashParams::new(3, 8, 0).unwrap(), "s.npy")
        .is_ok());
    assert!(a
        .expect_params(&neardup::MinHashParams::new(5, 8, 0).unwrap(), "s.npy")
        .is_err());
}

#[test]
fn scurve_prints_the_table_and_thresholds() {
    let o = neardup(&["scurve", "--bands", "16", "--rows", "8"]);
    ok(&o);
    let s = stdout(&o);
    assert!(s.contains("threshold (1/b)^(1/r) = 0.7071"), "{s}");
    assert!(s.contains("0.6736"), "{s}");
    assert!(s.contains("  0.80    0.9470"), "{s}");
    assert!(s.contains("  0.50    0.0607"), "{s}");
    assert_eq!(
        s.lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .count(),
        21
    );
}

#[test]
fn decontam_reports_per_file_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("clean.jsonl");
    let rep = dir.path().join("rep.json");
    let o = neardup(&[
        "decontam",
        fixture("decontam_probes.jsonl").to_str().unwrap(),
        "--protected",
        fixture("protected.jsonl").to_str().unwrap(),
        fixture("protected.txt").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ]);
    ok(&o);
    let truth = truth("decontam_probes.truth.json");
    let want_clean: Vec<&str> = truth
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["contaminated"].as_bool().unwrap())
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let got: Vec<String> = read_jsonl(&out)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want_clean);
    // Lines are written unchanged.
    let input = std::fs::read_to_string(fixture("decontam_probes.jsonl")).unwrap();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        assert!(input.lines().any(|l| l == line));
    }
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let files = r["protected_files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["documents_caught"], 3);
    assert_eq!(files[1]["documents_caught"], 1);
    assert_eq!(files[1]["evidence"][0]["id"], "leak-last-window");
    assert_eq!(
        files[1]["evidence"][0]["ngram"]
            .as_str()
            .unwrap()
            .split(' ')
            .count(),
        13
    );
    assert!(stderr(&o).contains("4 contaminated"), "{}", stderr(&o));
}

#[test]
fn compressed_inputs_stdin_and_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let plain = std::fs::read(fixture("corpus.jsonl")).unwrap();
    let gz = dir.path().join("c.jsonl.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(&plain).unwrap();
    e.finish().unwrap();
    let zst = dir.path().join("c.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
    // `dedup` of `inp` into `out` on the CPU engine, with `extra` flags and environment.
    let dedup = |inp: &Path, out: &Path, extra: &[&str], env: &[(&str, &str)]| {
        let o = crate::common::neardup_command()
            .args(["dedup", inp.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .args(["--engine", "cpu"])
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        ok(&o);
    };
    let reference = dir.path().join("ref.jsonl");
    dedup(&fixture("corpus.jsonl"), &reference, &[], &[]);
    for inp in [&gz, &zst] {
        let out = dir.path().join("o.jsonl");
        dedup(inp, &out, &[], &[]);
        assert_eq!(sha256(&out), sha256(&reference), "{}", inp.display());
    }
    // A plain file read with read(2) instead of mapped: the same output.
    let out = dir.path().join("o-read.jsonl");
    dedup(&fixture("corpus.jsonl"), &out, &["--no-mmap"], &[]);
    assert_eq!(sha256(&out), sha256(&reference));
    // And so through the environment, in any of the usual spellings of "on".
    for on in ["1", "true", "yes"] {
        dedup(
            &fixture("corpus.jsonl"),
            &out,
            &[],
            &[("NEARDUP_NO_MMAP", on)],
        );
        assert_eq!(sha256(&out), sha256(&reference), "NEARDUP_NO_MMAP={on}");
    }
    // stdin in, stdout out.
    let o = neardup_stdin(
        &["dedup", "-", "-o", "-", "--engine", "cpu"],
        &fixture("corpus.jsonl"),
    );
    ok(&o);
    assert_eq!(o.stdout, std::fs::read(&reference).unwrap());
    // Compressed output by extension.
    let outz = dir.path().join("o.jsonl.zst");
    ok(&neardup(&[
        "dedup",
        gz.to_str().unwrap(),
        "-o",
        outz.to_str().unwrap(),
        "--engine",
        "cpu",
    ]));
    assert_eq!(
        zstd::decode_all(&std::fs::read(&outz).unwrap()[..]).unwrap(),
        std::fs::read(&reference).unwrap()
    );
}

#[test]
fn ids_must_be_unique_across_inputs_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(
        &a,
        "{\"id\":\"x\",\"text\":\"one two\"}\n{\"id\":\"y\",\"text\":\"three\"}\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "{\"id\":\"z\",\"text\":\"four\"}\n{\"id\":\"x\",\"text\":\"five\"}\n",
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let o = neardup(&[
        "dedup",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--engine",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("\"x\"") && e.contains("a.jsonl:1") && e.contains("b.jsonl:2"),
        "{e}"
    );
    assert_eq!(
        dir_entries(dir.path()),
        ["a.jsonl", "b.jsonl"],
        "no output, not even a partial one"
    );
}

/// The signature matrix is renamed into place last: when a sidecar cannot be (here a
/// directory sits at its name), the run fails and leaves no matrix and no temporary file.
#[test]
fn signatures_whose_sidecar_fails_leave_no_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::copy(fixture("corpus.jsonl"), &input).unwrap();
    let out = dir.path().join("out.npy");
    std::fs::create_dir(dir.path().join("out.npy.meta.json")).unwrap();
    std::fs::write(dir.path().join("out.npy.meta.json").join("x"), "").unwrap();
    let o = neardup(&[
        "signatures",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("out.npy.meta.json"), "{}", stderr(&o));
    assert_eq!(dir_entries(dir.path()), ["in.jsonl", "out.npy.meta.json"]);
}

#[test]
fn help_has_an_example_for_every_command() {
    for cmd in [
        "dedup",
        "decontam",
        "signatures",
        "scurve",
        "verify",
        "bench",
        "devices",
        "synth",
    ] {
        let o = neardup(&[cmd, "--help"]);
        ok(&o);
        assert!(
            stdout(&o).contains("Example"),
            "{cmd} --help has no example"
        );
    }
    let o = neardup(&["--help"]);
    assert!(stdout(&o).contains("Exit codes"));
}

#[test]
fn threads_and_input_order_do_not_change_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let input = std::fs::read_to_string(fixture("corpus.jsonl")).unwrap();
    let mut lines: Vec<&str> = input.lines().collect();
    lines.reverse();
    let rev = dir.path().join("rev.jsonl");
    std::fs::write(&rev, lines.join("\n") + "\n").unwrap();
    let run = |inp: &std::path::Path, threads: &str, tag: &str| {
        let out = dir.path().join(format!("out-{tag}.jsonl"));
        let cl = dir.path().join(format!("cl-{tag}.jsonl"));
        ok(&neardup(&[
            "dedup",
            inp.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--clusters",
            cl.to_str().unwrap(),
            "--threads",
            threads,
            "--engine",
            "cpu",
        ]));
        (sha256(&out), sha256(&cl), read_jsonl(&out))
    };
    let (o1, c1, _) = run(&fixture("corpus.jsonl"), "1", "t1");
    for t in ["2", "3"] {
        let (o, c, _) = run(&fixture("corpus.jsonl"), t, &format!("t{t}"));
        assert_eq!((o, c), (o1.clone(), c1.clone()), "{t} threads");
    }
    // Reversed input: the same clusters and survivors; the output follows the input order.
    let (_, cr, kept_rev) = run(&rev, "2", "rev");
    assert_eq!(cr, c1);
    let (_, _, kept) = run(&fixture("corpus.jsonl"), "2", "fwd");
    let mut a: Vec<String> = kept
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let b: Vec<String> = kept_rev
        .iter()
        .rev()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(a, b);
    a.sort();
    assert!(!a.is_empty());
}

#[test]
fn output_records_keep_their_values_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    // Numbers beyond f64, exponents, escapes, spacing and nested meta fields all survive.
    let lines = [
        r#"{"id": "a", "big": 123456789012345678901234567890, "f": 1.0e5, "s": "caf\u00e9 \"q\"", "text": "one two three"}"#,
        r#"{"id":"b","meta":{"x":1.50,"keep":[1,2]},"text":"four five six","tail":-0.0}"#,
        r#"{"text":"seven","id":"c","meta":{}}"#,
    ];
    std::fs::write(&inp, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out.jsonl");
    ok(&neardup(&[
        "dedup",
        inp.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--tag-only",
        "--engine",
        "cpu",
    ]));
    let got = std::fs::read_to_string(&out).unwrap();
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(
        got[0],
        r#"{"id": "a", "big": 123456789012345678901234567890, "f": 1.0e5, "s": "caf\u00e9 \"q\"", "text": "one two three","meta":{"minhash_cluster":"a"}}"#
    );
    assert_eq!(
        got[1],
        r#"{"id":"b","meta":{"x":1.50,"keep":[1,2],"minhash_cluster":"b"},"text":"four five six","tail":-0.0}"#
    );
    assert_eq!(
        got[2],
        r#"{"text":"seven","id":"c","meta":{"minhash_cluster":"c"}}"#
    );
    // meta that is not an object is an error naming the field.
    std::fs::write(&inp, "{\"id\":\"a\",\"text\":\"x\",\"meta\":3}\n").unwrap();
    let o = neardup(&[
        "dedup",
        inp.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--tag-only",
        "--engine",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("in.jsonl:1") && stderr(&o).contains("field `meta`"),
        "{}",
        stderr(&o)
    );
}

/// The stderr line that starts with `neardup CMD:`.
fn summary_of(o: &std::process::Output, cmd: &str) -> String {
    let err = stderr(o);
    err.lines()
        .find(|l| l.starts_with(&format!("neardup {cmd}:")))
        .unwrap_or_else(|| panic!("no summary line: {err}"))
        .to_string()
}

#[test]
fn each_summary_says_only_what_applies_to_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let example = fixture("example.jsonl");
    let example = example.to_str().unwrap();
    let out = dir.path().join("o.jsonl");
    let out = out.to_str().unwrap();
    let dedup = |extra: &[&str]| {
        let mut v = vec!["dedup", example, "-o", out, "--engine", "cpu"];
        v.extend_from_slice(extra);
        let o = neardup(&v);
        ok(&o);
        summary_of(&o, "dedup")
    };
    let plain = dedup(&[]);
    assert!(
        plain.contains("483 documents read, 92 near duplicates dropped, 56 clusters, 391 written"),
        "{plain}"
    );
    assert!(
        !plain.contains("exact") && !plain.contains("contaminated"),
        "{plain}"
    );
    let exact = dedup(&["--exact"]);
    assert!(exact.contains("exact duplicates dropped, "), "{exact}");
    let tagged = dedup(&["--tag-only"]);
    assert!(
        tagged.contains("92 near duplicates tagged, 56 clusters, 483 written"),
        "{tagged}"
    );
    assert!(!tagged.contains("dropped"), "{tagged}");

    let o = neardup(&[
        "decontam",
        example,
        "--protected",
        fixture("protected.jsonl").to_str().unwrap(),
        "-o",
        out,
    ]);
    ok(&o);
    let d = summary_of(&o, "decontam");
    assert!(
        d.contains("documents read, ") && d.contains(" contaminated, "),
        "{d}"
    );
    for word in ["near duplicates", "exact duplicates", "clusters"] {
        assert!(!d.contains(word), "{d}");
    }

    let sig = dir.path().join("s.tsv");
    let o = neardup(&[
        "signatures",
        example,
        "-o",
        sig.to_str().unwrap(),
        "--format",
        "tsv",
        "--engine",
        "cpu",
    ]);
    ok(&o);
    let s = summary_of(&o, "signatures");
    assert!(
        s.contains("483 documents read, ") && s.contains(" shingles; "),
        "{s}"
    );
    for word in ["duplicates", "clusters", "contaminated"] {
        assert!(!s.contains(word), "{s}");
    }
}

#[test]
fn synth_prints_a_summary_unless_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.jsonl");
    let out = out.to_str().unwrap();
    let o = neardup(&["synth", "25", "-o", out, "--words", "8"]);
    ok(&o);
    assert!(
        summary_of(&o, "synth")
            .starts_with(&format!("neardup synth: 25 documents written to {out}; ")),
        "{}",
        stderr(&o)
    );
    let o = neardup(&["synth", "25", "-o", out, "--words", "8", "-q"]);
    ok(&o);
    assert_eq!(stderr(&o), "");
    assert_eq!(lines_of(Path::new(out)).len(), 25);
}

/// `decontam IN --protected PROT -o OUT --report REP EXTRA...`, which must succeed.
fn decontam_with_report(
    inp: &Path,
    prot: &Path,
    out: &Path,
    rep: &Path,
    extra: &[&str],
) -> std::process::Output {
    let mut v = vec![
        "decontam",
        inp.to_str().unwrap(),
        "--protected",
        prot.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ];
    v.extend_from_slice(extra);
    let o = neardup(&v);
    ok(&o);
    o
}

#[test]
fn decontam_warns_when_protected_items_are_too_short_to_protect_anything() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(
        &inp,
        "{\"id\":\"a\",\"text\":\"what is the capital of france\"}\n",
    )
    .unwrap();
    let short = dir.path().join("short.jsonl");
    std::fs::write(
        &short,
        "{\"q\":\"what is the capital of france\",\"a\":\"paris\"}\n{\"q\":\"two plus two\"}\n",
    )
    .unwrap();
    let out = dir.path().join("o.jsonl");
    let rep = dir.path().join("r.json");
    let run = |extra: &[&str]| stderr(&decontam_with_report(&inp, &short, &out, &rep, extra));
    // Three texts, all shorter than 8 words (the least protected whole by default): nothing
    // is protected, said loudly, even --quiet.
    for quiet in [&[][..], &["--quiet"][..]] {
        let err = run(quiet);
        assert!(err.contains("NOTHING IS PROTECTED"), "{err}");
        assert!(
            err.contains("3 of their 3 texts are shorter than 8 words"),
            "{err}"
        );
    }
    // With short items off, the same in n-grams.
    let err = run(&["--protect-short", "off", "--quiet"]);
    assert!(err.contains("NOTHING IS PROTECTED"), "{err}");
    assert!(
        err.contains("3 of their 3 texts are shorter than 13 words"),
        "{err}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    assert_eq!(r["protected_files"][0]["texts_too_short"], 3);
    assert_eq!(r["counts"]["protected_ngrams"], 0);
    // With --n 3, two texts protect and one ("paris") does not: a note, not the warning.
    let err = run(&["--n", "3"]);
    assert!(!err.contains("NOTHING IS PROTECTED"), "{err}");
    assert!(
        err.contains("note: 1 of the 3 protected texts are shorter than 3 words"),
        "{err}"
    );
    assert!(err.contains("1 contaminated"), "{err}");
    // Items long enough: no word about it.
    let err = run(&["--n", "1"]);
    assert!(!err.contains("shorter than"), "{err}");
}

/// Protected items of 8 to 12 words (all shorter than the 13-word n-grams) are protected whole
/// by default (SPEC §4): a document holding one is caught, with no warning. `--protect-short
/// off` gives the strict n-gram rule: nothing is caught, and the run says loudly that nothing is
/// protected.
#[test]
fn decontam_protects_short_items_whole_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(
        &inp,
        concat!(
            "{\"id\":\"leak\",\"text\":\"Quiz: Which River Flows North Through Cairo Into The ",
            "Mediterranean? The Nile.\"}\n",
            "{\"id\":\"clean\",\"text\":\"a river flows north through a valley\"}\n",
        ),
    )
    .unwrap();
    let prot = dir.path().join("eval.jsonl");
    std::fs::write(
        &prot,
        concat!(
            // 10 and 8 words.
            "{\"id\":\"q1\",\"q\":\"which river flows north through cairo into the mediterranean\"}\n",
            "{\"id\":\"q2\",\"q\":\"name the largest moon of the planet saturn\"}\n",
        ),
    )
    .unwrap();
    let out = dir.path().join("o.jsonl");
    let rep = dir.path().join("r.json");
    let run = |extra: &[&str]| {
        let o = decontam_with_report(&inp, &prot, &out, &rep, extra);
        let kept: Vec<String> = read_jsonl(&out)
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        (kept, stderr(&o), r)
    };
    let (kept, err, r) = run(&[]);
    assert_eq!(kept, ["clean"], "{err}");
    assert!(err.contains("1 contaminated"), "{err}");
    assert!(!err.contains("NOTHING IS PROTECTED"), "{err}");
    assert!(!err.contains("shorter than"), "{err}");
    assert_eq!(r["parameters"]["protect_short"], 8);
    assert_eq!(r["protected_files"][0]["texts_protected_whole"], 2);
    // Items protected whole are counted as such, not as 13-grams.
    assert_eq!(r["counts"]["protected_ngrams"], 0);
    assert_eq!(r["counts"]["protected_whole"], 2);
    assert!(
        err.contains("0 protected 13-grams and 2 short texts protected whole from 1 files"),
        "{err}"
    );
    // A minimum not below n protects nothing whole, and the advice says so rather than
    // naming the flag that was given as the remedy.
    let (_, err, r) = run(&["--protect-short", "13"]);
    assert!(
        err.contains("--protect-short 13 is not below --n 13"),
        "{err}"
    );
    assert!(r["counts"].get("protected_whole").is_none());
    for off in ["off", "OFF", "0"] {
        let (kept, err, r) = run(&["--protect-short", off]);
        assert_eq!(kept, ["leak", "clean"], "{err}");
        assert!(err.contains("0 contaminated"), "{err}");
        assert!(err.contains("NOTHING IS PROTECTED"), "{err}");
        assert!(
            err.contains("2 of their 2 texts are shorter than 13 words"),
            "{err}"
        );
        assert_eq!(r["parameters"]["protect_short"], 0);
        assert_eq!(r["protected_files"][0]["texts_too_short"], 2);
        assert!(err.contains("--protect-short off turned that off"), "{err}");
    }
    // A value that is neither a number nor `off` is a usage error.
    let o = neardup(&[
        "decontam",
        inp.to_str().unwrap(),
        "--protected",
        prot.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--protect-short",
        "no",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn gpu_messages_say_what_to_do_where_the_user_is() {
    // No Metal adapter exists off Apple machines: a way to have no adapter at all.
    if cfg!(target_os = "macos") {
        return;
    }
    let example = fixture("example.jsonl");
    let example = example.to_str().unwrap();
    let o = neardup(&["verify", example, "--backend", "metal"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("no GPU adapter found"), "{err}");
    assert!(
        err.contains("verify compares the GPU engine with the CPU engine"),
        "{err}"
    );
    assert!(
        err.contains("neardup signatures IN... -o OUT --engine cpu"),
        "{err}"
    );
    assert!(
        !err.contains("or use --engine cpu"),
        "verify has no --engine: {err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let sig = dir.path().join("s.npy");
    let o = neardup(&[
        "signatures",
        example,
        "-o",
        sig.to_str().unwrap(),
        "--engine",
        "gpu",
        "--backend",
        "metal",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("or use --engine cpu"), "{}", stderr(&o));
}

#[test]
fn bench_times_a_software_adapter_only_when_asked_and_names_it() {
    let o = neardup(&["bench", "--synthetic", "300", "--repeat", "1", "--json"]);
    ok(&o);
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let engines: Vec<&str> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["engine"].as_str().unwrap())
        .collect();
    assert!(engines.iter().any(|e| e.starts_with("cpu")), "{engines:?}");
    assert!(
        !engines.iter().any(|e| e.contains("software")),
        "the default never times a software adapter: {engines:?}"
    );
    // Asked for, it runs and is named as what it is.
    let o = neardup(&[
        "bench",
        "--synthetic",
        "300",
        "--repeat",
        "1",
        "--engine",
        "gpu",
    ]);
    if !o.status.success() {
        assert!(
            std::env::var("NEARDUP_REQUIRE_GPU").is_err(),
            "NEARDUP_REQUIRE_GPU is set but bench --engine gpu failed: {}",
            stderr(&o)
        );
        return;
    }
    let out = stdout(&o);
    let software = out.contains("llvmpipe") || out.contains("lavapipe");
    if software {
        assert!(
            out.contains("is a software adapter (it runs on the CPU)"),
            "{out}"
        );
    }
}

#[test]
fn the_tests_give_mesa_a_runtime_directory() {
    // `devices` starts every adapter wgpu can find; Mesa's drivers complain on stderr about a
    // missing or invalid XDG_RUNTIME_DIR each time, unless the tests give them one.
    let c = neardup_command();
    let dir = c
        .get_envs()
        .find(|(k, _)| *k == "XDG_RUNTIME_DIR")
        .and_then(|(_, v)| v)
        .expect("the tests' neardup runs with a runtime directory");
    assert!(std::path::Path::new(dir).is_dir());
    let o = neardup(&["devices"]);
    ok(&o);
    assert!(!stderr(&o).contains("XDG_RUNTIME_DIR"), "{}", stderr(&o));
}

/// `neardup devices --json`, or `None` (with a loud note) where no adapter exists and none is
/// required.
fn adapters_or_skip() -> Option<Vec<Value>> {
    let o = neardup(&["devices", "--json"]);
    ok(&o);
    let list: Vec<Value> = serde_json::from_str(&stdout(&o)).unwrap();
    if list.is_empty() {
        assert!(
            std::env::var("NEARDUP_REQUIRE_GPU").is_err(),
            "NEARDUP_REQUIRE_GPU is set but `devices` lists no adapter"
        );
        eprintln!("\n*** GPU TEST SKIPPED: no adapter\n");
        return None;
    }
    Some(list)
}

#[test]
fn devices_lists_the_features_that_matter() {
    let Some(list) = adapters_or_skip() else {
        return;
    };
    for d in &list {
        assert!(d["shader_int64"].is_boolean(), "{d}");
        assert!(d["timestamp_query"].is_boolean(), "{d}");
    }
    let o = neardup(&["devices"]);
    assert!(
        stdout(&o).contains("features: 64-bit shader integers "),
        "{}",
        stdout(&o)
    );
}

#[test]
fn adapter_picks_one_gpu_by_index_or_name_and_says_when_it_is_software() {
    let Some(list) = adapters_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let example = fixture("example.jsonl");
    let sigs = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec![
            "signatures",
            example.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--format",
            "tsv",
        ];
        args.extend_from_slice(extra);
        (neardup(&args), out)
    };
    let (o, cpu) = sigs("cpu.tsv", &["--engine", "cpu"]);
    ok(&o);
    let body = |p: &std::path::Path| {
        // The header names the engine; the rows must match.
        let t = std::fs::read_to_string(p).unwrap();
        t.lines().skip(1).map(String::from).collect::<Vec<_>>()
    };
    for (i, d) in list.iter().enumerate() {
        let (o, out) = sigs(
            &format!("gpu{i}.tsv"),
            &["--engine", "gpu", "--adapter", &i.to_string()],
        );
        ok(&o);
        let err = stderr(&o);
        let name = d["name"].as_str().unwrap();
        assert!(err.contains(name), "adapter {i} is {name}: {err}");
        assert_eq!(
            err.contains("runs on a software adapter"),
            d["software"].as_bool().unwrap(),
            "{err}"
        );
        assert_eq!(body(&out), body(&cpu), "adapter {i}: {name}");
        // Native 64-bit shader integers: the same rows where the adapter has them, else a
        // clear error and no output.
        let (o, out) = sigs(
            &format!("gpu{i}-int64.tsv"),
            &[
                "--engine",
                "gpu",
                "--adapter",
                &i.to_string(),
                "--gpu-int64",
            ],
        );
        if d["shader_int64"].as_bool().unwrap() {
            ok(&o);
            assert!(
                stderr(&o).contains("native 64-bit integers"),
                "{}",
                stderr(&o)
            );
            assert_eq!(body(&out), body(&cpu), "adapter {i}: {name}, --gpu-int64");
        } else {
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            assert!(
                stderr(&o).contains("no 64-bit shader integers"),
                "{}",
                stderr(&o)
            );
            assert!(!out.exists());
        }
    }
    // A name part that matches exactly one adapter picks it; in any case.
    let first = list[0]["name"].as_str().unwrap();
    if list.iter().filter(|d| d["name"] == first).count() == 1 {
        let (o, _) = sigs(
            "byname.tsv",
            &["--engine", "gpu", "--adapter", &first.to_uppercase()],
        );
        ok(&o);
    }
    let n = list.len().to_string();
    for (bad, needle) in [
        (n.as_str(), "there is no adapter"),
        ("no-such-gpu", "names no adapter"),
    ] {
        let (o, out) = sigs("bad.tsv", &["--engine", "gpu", "--adapter", bad]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("[0] "),
            "the adapters are listed: {}",
            stderr(&o)
        );
        assert!(!out.exists());
    }
    // Every sub-batch size gives the same signatures.
    let (o, small) = sigs("small.tsv", &["--engine", "gpu", "--gpu-batch-mib", "1"]);
    ok(&o);
    assert_eq!(body(&small), body(&cpu));
    // So do the fused kernels, which the summary line names.
    let (o, fused) = sigs("fused.tsv", &["--engine", "gpu", "--gpu-kernels", "fused"]);
    ok(&o);
    assert!(stderr(&o).contains("fused kernels"), "{}", stderr(&o));
    assert_eq!(body(&fused), body(&cpu));
    let (o, _) = sigs("t.tsv", &["--engine", "gpu", "--gpu-kernels", "merged"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let (o, _) = sigs("t.tsv", &["--engine", "gpu", "--gpu-batch-mib", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--gpu-batch-mib 0"), "{}", stderr(&o));
    let (o, _) = sigs("t.tsv", &["--engine", "gpu", "--gpu-timeout", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--gpu-timeout 0"), "{}", stderr(&o));
}

/// A directory input is the data files under it, sorted by path, hidden ones skipped: the
/// output is the one the files named in that order give, in memory and out of core; `--glob`
/// picks files by their path below the directory.
#[test]
fn a_directory_input_is_its_data_files_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let lines = lines_of(&fixture("example.jsonl"));
    let snap = dir.path().join("snap");
    let parts = [
        "data/b/train-1.jsonl",
        "data/a/train-0.jsonl",
        "data/a/test-0.jsonl",
    ];
    for (i, rel) in parts.iter().enumerate() {
        let p = snap.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let chunk: Vec<&str> = lines
            .iter()
            .skip(i)
            .step_by(3)
            .map(|s| s.as_str())
            .collect();
        std::fs::write(&p, chunk.join("\n") + "\n").unwrap();
    }
    // Not data, or hidden: never read (a broken line would fail the run).
    std::fs::write(snap.join("README.md"), "# a dataset card\n").unwrap();
    std::fs::create_dir_all(snap.join(".cache")).unwrap();
    std::fs::write(snap.join(".cache/x.jsonl"), "not json\n").unwrap();
    let sorted = [
        "data/a/test-0.jsonl",
        "data/a/train-0.jsonl",
        "data/b/train-1.jsonl",
    ];
    let files: Vec<String> = sorted
        .iter()
        .map(|r| snap.join(r).display().to_string())
        .collect();
    let s = snap.to_str().unwrap();
    let run = |name: &str, inputs: &[&str], extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec!["dedup"];
        args.extend_from_slice(inputs);
        args.extend_from_slice(&["-o", out.to_str().unwrap(), "--engine", "cpu"]);
        args.extend_from_slice(extra);
        ok(&neardup(&args));
        std::fs::read(&out).unwrap()
    };
    let want = run(
        "want.jsonl",
        &files.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(run("dir.jsonl", &[s], &[]), want);
    let work = dir.path().join("work");
    assert_eq!(
        run(
            "sharded.jsonl",
            &[s],
            &["--work-dir", work.to_str().unwrap()]
        ),
        want
    );
    let train: Vec<&str> = files[1..].iter().map(|f| f.as_str()).collect();
    assert_eq!(
        run("glob.jsonl", &[s], &["--glob", "data/*/train-*.jsonl"]),
        run("train.jsonl", &train, &[])
    );
    refused_with(
        &["dedup", s, "-o", "/dev/null", "--glob", "*.csv"],
        &["input directory", "matches --glob \"*.csv\""],
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    refused_with(
        &["dedup", empty.to_str().unwrap(), "-o", "/dev/null"],
        &["input directory", "no data file"],
    );
}
