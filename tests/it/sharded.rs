//! The sharded stages give the bytes of in-memory `dedup`: for any split into shards (one
//! empty), any partition count and any valid stage order, through `dedup --work-dir` and
//! through `neardup stage`; a run killed midway and run again gives the same bytes; a work
//! directory of other inputs or parameters, a changed shard and a stage run too early are
//! refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::common::*;

/// A corpus with something of everything: the example's clusters, exact copies and chain; a
/// templated hot bucket with planted near copies; wordless documents; an exact copy and a near
/// copy of the first document at the very end (so clusters cross every split).
pub(crate) fn corpus_lines() -> Vec<String> {
    let mut lines = lines_of(&fixture("example.jsonl"));
    let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    let text = first["text"].as_str().unwrap().to_string();
    for (id, text) in neardup::synth::SyntheticDocs::new(150, 30, 9).with_template(100) {
        lines.push(serde_json::json!({ "id": format!("tpl-{id}"), "text": text }).to_string());
    }
    for (i, t) in ["", "  ", "!!! ...", ""].iter().enumerate() {
        lines.push(serde_json::json!({ "id": format!("empty-{i}"), "text": t }).to_string());
    }
    lines.push(serde_json::json!({ "id": "zz-copy", "text": text }).to_string());
    let near = text.replacen(' ', " x ", 1);
    lines.push(serde_json::json!({ "id": "aa-near", "text": near }).to_string());
    lines
}

/// Split `lines` into `n` shard files (shard `empty`, if any, has none), in order.
pub(crate) fn shards(dir: &Path, lines: &[String], n: usize, empty: Option<usize>) -> Vec<PathBuf> {
    let full: Vec<usize> = (0..n).filter(|&s| Some(s) != empty).collect();
    let per = lines.len().div_ceil(full.len());
    (0..n)
        .map(|s| {
            let p = dir.join(format!("shard-{n}-{s}.jsonl"));
            let body: String = match full.iter().position(|&f| f == s) {
                Some(k) => lines
                    .iter()
                    .skip(k * per)
                    .take(per)
                    .map(|l| format!("{l}\n"))
                    .collect(),
                None => String::new(),
            };
            std::fs::write(&p, body).unwrap();
            p
        })
        .collect()
}

fn strs(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// sha256 of the output, clusters and pairs of in-memory `dedup`, or of `--work-dir` with
/// `partitions`.
pub(crate) fn dedup_hashes(
    dir: &Path,
    tag: &str,
    inputs: &[PathBuf],
    flags: &[&str],
    work: Option<(&Path, usize)>,
) -> [String; 3] {
    let out = dir.join(format!("{tag}.out.jsonl"));
    let cl = dir.join(format!("{tag}.clusters.jsonl"));
    let pairs = dir.join(format!("{tag}.pairs.jsonl"));
    let ins = strs(inputs);
    let mut args: Vec<String> = vec!["dedup".into()];
    args.extend(ins);
    for (o, p) in [("-o", &out), ("--clusters", &cl), ("--pairs", &pairs)] {
        args.push(o.into());
        args.push(p.display().to_string());
    }
    args.extend(flags.iter().map(|f| f.to_string()));
    args.extend(["--engine".into(), "cpu".into()]);
    if let Some((w, r)) = work {
        args.extend([
            "--work-dir".into(),
            w.display().to_string(),
            "--partitions".into(),
            r.to_string(),
        ]);
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    ok(&neardup(&args));
    [sha256(&out), sha256(&cl), sha256(&pairs)]
}

#[test]
fn work_dir_runs_equal_in_memory_dedup_for_any_split() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    for (n, empty) in [(1, None), (2, None), (3, None), (7, Some(4))] {
        let inputs = shards(dir.path(), &lines, n, empty);
        for flags in [&[][..], &["--exact"][..]] {
            let tag = format!("mem-{n}-{}", flags.len());
            let want = dedup_hashes(dir.path(), &tag, &inputs, flags, None);
            for r in [1, 3] {
                let work = dir.path().join(format!("work-{n}-{r}-{}", flags.len()));
                let tag = format!("wd-{n}-{r}-{}", flags.len());
                let got = dedup_hashes(dir.path(), &tag, &inputs, flags, Some((&work, r)));
                assert_eq!(got, want, "{n} shards, {r} partitions, {flags:?}");
            }
        }
    }
}

/// Every confirmation and keep policy, groups among them, give the same bytes and the same
/// report counts, groups and largest clusters out of core.
#[test]
fn every_confirmation_and_policy_gives_the_same_bytes_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = corpus_lines();
    for (i, l) in lines.iter_mut().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["score"] = serde_json::json!((i * 7919 % 101) as f64 / 4.0);
        if i % 5 != 0 {
            v["g"] = serde_json::json!(["a", "b"][i % 2]);
        }
        *l = v.to_string();
    }
    let inputs = shards(dir.path(), &lines, 3, None);
    let grouped = ["--group-field", "g", "--group-missing", "own"];
    let variants: [Vec<&str>; 7] = [
        vec!["--confirm", "estimate"],
        vec!["--confirm", "none", "--exact"],
        vec!["--tag-only", "--exact"],
        vec!["--keep", "longest", "--threshold", "0.7"],
        vec!["--keep", "first", "--tag-only"],
        [&["--keep", "field:score:max", "--exact"][..], &grouped].concat(),
        [&["--keep", "field:score:min", "--tag-only"][..], &grouped].concat(),
    ];
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    for (v, flags) in variants.iter().enumerate() {
        let (mem, wd) = (format!("mem-{v}"), format!("wd-{v}"));
        let mut with_report = flags.clone();
        let report = dir.path().join(format!("{mem}.report.json"));
        let rs = report.display().to_string();
        with_report.extend(["--report", rs.as_str()]);
        let want = dedup_hashes(dir.path(), &mem, &inputs, &with_report, None);
        let work = dir.path().join(format!("work-{v}"));
        let wd_report = dir.path().join(format!("{wd}.report.json"));
        let ws = wd_report.display().to_string();
        *with_report.last_mut().unwrap() = ws.as_str();
        let got = dedup_hashes(dir.path(), &wd, &inputs, &with_report, Some((&work, 2)));
        assert_eq!(got, want, "{flags:?}");
        let (mut a, mut b) = (read(&report), read(&wd_report));
        for r in [&mut a, &mut b] {
            r["counts"]
                .as_object_mut()
                .unwrap()
                .remove("shingle_sets_loaded");
        }
        for key in ["counts", "groups", "largest_clusters", "chaining"] {
            assert_eq!(a[key], b[key], "{flags:?}: {key}");
        }
        if flags.contains(&"g") {
            assert_eq!(a["groups"].as_array().unwrap().len(), 3, "{flags:?}");
        }
        assert!(a["counts"]["clusters"].as_u64().unwrap() > 5, "{flags:?}");
    }
}

/// Run one `neardup stage` command.
fn stage(args: &[&str]) {
    let mut all = vec!["stage"];
    all.extend(args);
    ok(&neardup(&all));
}

/// The stages one by one, each kind in a shuffled order, as independent jobs would run them.
pub(crate) fn run_stages(
    work: &Path,
    inputs: &[PathBuf],
    r: usize,
    flags: &[&str],
    seed: u64,
) -> [String; 3] {
    let w = work.display().to_string();
    let mut rng = neardup::Pcg32::new(seed);
    let shuffled = |n: usize, rng: &mut neardup::Pcg32| {
        let mut v: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        neardup::synth::shuffle(&mut v, rng);
        v
    };
    let ins = strs(inputs);
    let rs = r.to_string();
    let mut init = vec!["init", w.as_str()];
    init.extend(ins.iter().map(|s| s.as_str()));
    init.extend(["--partitions", rs.as_str()]);
    init.extend(flags);
    stage(&init);
    for s in shuffled(inputs.len(), &mut rng) {
        stage(&["sign", &w, "--shard", &s, "--engine", "cpu"]);
    }
    if seed % 3 == 1 {
        // 2^44 MiB is 2^64 bytes: past any byte count, so all in one bucket, not none.
        let o = neardup(&[
            "stage",
            "rank",
            &w,
            "--sort-memory",
            &(1u64 << 44).to_string(),
        ]);
        ok(&o);
        assert!(stderr(&o).contains("sorted in 1 bucket"), "{}", stderr(&o));
    } else {
        stage(&["rank", &w]);
    }
    for s in shuffled(inputs.len(), &mut rng) {
        stage(&["bands", &w, "--shard", &s]);
    }
    let parts = shuffled(r, &mut rng);
    if seed.is_multiple_of(2) {
        // Every partition in one job, confirmed together.
        let mut args = vec!["confirm", w.as_str(), "--partition"];
        args.extend(parts.iter().map(|p| p.as_str()));
        stage(&args);
    } else {
        for p in parts {
            stage(&["confirm", &w, "--partition", &p]);
        }
    }
    if flags.contains(&"greedy") {
        // Round after round: each partition's job in a shuffled order, then the settling.
        for round in 0.. {
            if round > 0 {
                for p in shuffled(r, &mut rng) {
                    stage(&[
                        "greedy",
                        &w,
                        "--round",
                        &round.to_string(),
                        "--partition",
                        &p,
                    ]);
                }
            }
            let o = neardup(&["stage", "greedy", &w, "--round", &round.to_string()]);
            ok(&o);
            if stderr(&o).contains(", 0 undecided;") {
                break;
            }
            assert!(round < 100, "{}", stderr(&o));
        }
    }
    let cl = work.with_extension("clusters.jsonl");
    let pairs = work.with_extension("pairs.jsonl");
    let (c, p) = (cl.display().to_string(), pairs.display().to_string());
    stage(&["cluster", &w, "--clusters", &c, "--pairs", &p]);
    let mut out = Vec::new();
    for s in shuffled(inputs.len(), &mut rng) {
        let part = work.with_extension(format!("out-{s}.jsonl"));
        stage(&[
            "apply",
            &w,
            "--shard",
            &s,
            "-o",
            &part.display().to_string(),
        ]);
    }
    for s in 0..inputs.len() {
        out.extend(std::fs::read(work.with_extension(format!("out-{s}.jsonl"))).unwrap());
    }
    let whole = work.with_extension("out.jsonl");
    std::fs::write(&whole, out).unwrap();
    [sha256(&whole), sha256(&cl), sha256(&pairs)]
}

/// A run's report as far as it does not depend on timing or on how the run was cut: its
/// counts (but the shingle sets loaded, once per partition that needs them out of core),
/// parameters, largest clusters, contract and measured S-curve.
pub(crate) fn comparable_report(p: &Path) -> serde_json::Value {
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    r["counts"]
        .as_object_mut()
        .unwrap()
        .remove("shingle_sets_loaded");
    let keys = [
        "counts",
        "parameters",
        "largest_clusters",
        "contract",
        "similarity_buckets",
    ];
    serde_json::Value::Object(
        keys.iter()
            .map(|k| (k.to_string(), r[*k].clone()))
            .collect(),
    )
}

#[test]
fn stage_commands_in_shuffled_orders_equal_in_memory_dedup() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    for (n, empty, r, seed) in [(3, None, 2, 1), (7, Some(0), 3, 2)] {
        let inputs = shards(dir.path(), &lines, n, empty);
        let want = dedup_hashes(dir.path(), &format!("mem-{n}"), &inputs, &["--exact"], None);
        let work = dir.path().join(format!("stages-{n}"));
        let got = run_stages(&work, &inputs, r, &["--exact"], seed);
        assert_eq!(got, want, "{n} shards, {r} partitions");
        // The run's report, from the stages' files, says what in-memory dedup's says.
        let mem_report = dir.path().join(format!("mem-{n}.report.json"));
        let mut args = vec!["dedup".to_string()];
        args.extend(strs(&inputs));
        let sink = dir.path().join(format!("mem-{n}.reported.jsonl"));
        args.extend(["-o".into(), sink.display().to_string()]);
        args.extend(["--exact", "--engine", "cpu", "--report"].map(String::from));
        args.push(mem_report.display().to_string());
        ok(&neardup(
            &args.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        ));
        let stage_report = dir.path().join(format!("stages-{n}.report.json"));
        let (w, rep) = (
            work.display().to_string(),
            stage_report.display().to_string(),
        );
        stage(&["report", &w, "--report", &rep, "--seconds", "2.5"]);
        // `dedup --work-dir` reports the same.
        let wd_report = dir.path().join(format!("wd-{n}.report.json"));
        let wd = dir.path().join(format!("wd-{n}"));
        let mut wd_args = args.clone();
        *wd_args.last_mut().unwrap() = wd_report.display().to_string();
        wd_args.extend(["--work-dir".into(), wd.display().to_string()]);
        ok(&neardup(
            &wd_args.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        ));
        let a = comparable_report(&mem_report);
        assert_eq!(
            a,
            comparable_report(&stage_report),
            "{n} shards: the stage report"
        );
        assert_eq!(
            a,
            comparable_report(&wd_report),
            "{n} shards: the --work-dir report"
        );
        let b: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stage_report).unwrap()).unwrap();
        // The measured S-curve: sampled pairs, the near copies among them candidates.
        let curve = a["similarity_buckets"].as_array().unwrap();
        let sum = |k: &str| curve.iter().map(|x| x[k].as_u64().unwrap()).sum::<u64>();
        assert!(sum("pairs") > 0 && sum("candidates") > 0, "{curve:?}");
        assert_eq!(b["seconds"], 2.5);
        assert_eq!(b["engine"]["kind"], "cpu");
        // Every stage again: each is skipped, and the bytes stay.
        let again = run_stages(&work, &inputs, r, &["--exact"], seed + 10);
        assert_eq!(again, want);
    }
}

/// A run killed (SIGKILL, nothing cleaned up) at several points, then run again to the end:
/// the same bytes as a run never stopped.
#[test]
fn a_run_killed_midway_and_run_again_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    synth(&big, 20_000, 120);
    let lines = lines_of(&big);
    let inputs = shards(dir.path(), &lines, 4, None);
    let want = dedup_hashes(dir.path(), "mem", &inputs, &[], None);
    let mut interrupted = 0;
    for (i, ms) in [30u64, 120, 250, 400].iter().enumerate() {
        let work = dir.path().join(format!("work-{i}"));
        let out = dir.path().join(format!("killed-{i}.jsonl"));
        let mut args: Vec<String> = vec!["dedup".into()];
        args.extend(strs(&inputs));
        args.extend(["-o".into(), out.display().to_string()]);
        args.extend(["--work-dir".into(), work.display().to_string()]);
        args.extend(["--partitions".into(), "3".into(), "-q".into()]);
        let mut child = neardup_command().args(&args).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(*ms));
        let _ = child.kill();
        let _ = child.wait();
        if !work.join("cluster/summary.json").exists() {
            interrupted += 1;
        }
        let got = dedup_hashes(
            dir.path(),
            &format!("rerun-{i}"),
            &inputs,
            &[],
            Some((&work, 3)),
        );
        assert_eq!(got, want, "killed after {ms} ms");
    }
    assert!(
        interrupted >= 2,
        "only {interrupted} runs were stopped before the end"
    );
}

#[test]
fn other_parameters_other_inputs_and_early_stages_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    let inputs = shards(dir.path(), &lines, 2, None);
    let ins = strs(&inputs);
    let w = dir.path().join("work");
    let ws = w.display().to_string();
    let init = |extra: &[&str]| {
        let mut a = vec![
            "stage",
            "init",
            ws.as_str(),
            ins[0].as_str(),
            ins[1].as_str(),
        ];
        a.extend(extra);
        neardup(&a)
    };
    ok(&init(&["--threshold", "0.8"]));
    // Another threshold, another banding, other inputs: refused, naming what differs.
    for (extra, named) in [
        (&["--threshold", "0.7"][..], "config.threshold"),
        (&["--bands", "32", "--rows", "4"][..], "config.lsh.bands"),
        (&["--partitions", "3"][..], "partitions"),
    ] {
        let o = init(extra);
        assert!(!o.status.success(), "{extra:?}");
        assert!(stderr(&o).contains(named), "{extra:?}: {}", stderr(&o));
    }
    let o = neardup(&["stage", "init", &ws, &ins[1], &ins[0]]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("shards[0].path"), "{}", stderr(&o));
    // A sort budget of nothing, or without a work directory.
    let o = neardup(&["stage", "rank", &ws, "--sort-memory", "0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--sort-memory"), "{}", stderr(&o));
    let o = neardup(&["dedup", &ins[0], "-o", &ws, "--sort-memory", "8"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--work-dir"), "{}", stderr(&o));
    // A stage before the stages it needs.
    let o = neardup(&["stage", "rank", &ws]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("run `neardup stage sign` first"),
        "{}",
        stderr(&o)
    );
    ok(&neardup(&[
        "stage", "sign", &ws, "--shard", "0", "--engine", "cpu",
    ]));
    let o = neardup(&["stage", "sign", &ws, "--shard", "2"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("shard 2 does not exist"),
        "{}",
        stderr(&o)
    );
    // A shard changed after the work directory was made.
    let mut body = std::fs::read(&inputs[1]).unwrap();
    body.extend_from_slice(b"{\"id\":\"late\",\"text\":\"a late document\"}\n");
    std::fs::write(&inputs[1], body).unwrap();
    let o = neardup(&["stage", "sign", &ws, "--shard", "1", "--engine", "cpu"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("shard 1 changed"), "{}", stderr(&o));
    // A stage file of another work directory is not mixed in.
    let other = dir.path().join("other");
    let os = other.display().to_string();
    ok(&neardup(&[
        "stage",
        "init",
        &os,
        &ins[0],
        &ins[1],
        "--threshold",
        "0.9",
    ]));
    std::fs::create_dir_all(other.join("sign")).unwrap();
    std::fs::copy(
        w.join("sign/00000.parquet"),
        other.join("sign/00000.parquet"),
    )
    .unwrap();
    let o = neardup(&["stage", "sign", &os, "--shard", "0", "--engine", "cpu"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("made for another manifest"),
        "{}",
        stderr(&o)
    );
    // Nor is a band row file of another work directory, or one cut short.
    let third = dir.path().join("third");
    let sink = dir.path().join("third.jsonl");
    ok(&neardup(&[
        "dedup",
        &ins[0],
        &ins[1],
        "-o",
        &sink.display().to_string(),
        "--work-dir",
        &third.display().to_string(),
        "--engine",
        "cpu",
    ]));
    let rows = std::fs::read(third.join("bands/00000-0000.rows")).unwrap();
    assert!(rows.len() > 32 + 16, "{} bytes", rows.len());
    std::fs::create_dir_all(other.join("bands")).unwrap();
    let theirs = other.join("bands/00000-0000.rows");
    for (bytes, named) in [
        (&rows[..], "made for another manifest"),
        (&rows[..rows.len() - 3], "no checksum trailer (cut short"),
        (&rows[..20], "too short for a file of neardup's"),
    ] {
        std::fs::write(&theirs, bytes).unwrap();
        let o = neardup(&["stage", "bands", &os, "--shard", "0"]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(named), "{named}: {}", stderr(&o));
    }
    // A work directory of the first layout (signatures in `sign`, no layout in its manifest).
    let m = other.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    assert_eq!(manifest["layout"], 4);
    manifest.as_object_mut().unwrap().remove("layout");
    std::fs::write(&m, manifest.to_string()).unwrap();
    let o = neardup(&["stage", "rank", &os]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("layout 1"), "{}", stderr(&o));
}

#[test]
fn a_repeated_id_across_shards_names_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(
        &a,
        "{\"id\":\"x\",\"text\":\"one two\"}\n{\"id\":\"y\",\"text\":\"t\"}\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "{\"id\":\"z\",\"text\":\"t\"}\n{\"id\":\"x\",\"text\":\"three\"}\n",
    )
    .unwrap();
    let w = dir.path().join("work");
    let out = dir.path().join("out.jsonl");
    let o = neardup(&[
        "dedup",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--work-dir",
        w.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("a.jsonl:1") && e.contains("b.jsonl:2"), "{e}");
    assert!(!out.exists());
}

/// One million documents: in memory, `dedup` holds every signature (512 bytes each); through a
/// work directory of 8 partitions it holds, at its peak, one shard's band rows being written
/// (`bands`) or one partition's (`confirm`), well under in-memory's peak (0.2 of it in
/// docs/BENCHMARKS.md). `rank`, given 8 MiB, sorts the million ids in id-range buckets.
#[test]
fn a_million_documents_out_of_core_take_well_under_the_memory_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = neardup::synth::SyntheticDocs::new(1_000_000, 30, 4)
        .map(|(id, text)| serde_json::json!({ "id": id, "text": text }).to_string())
        .collect();
    let inputs = shards(dir.path(), &lines, 4, None);
    drop(lines);
    let peak = |tag: &str, work: Option<&Path>| -> (u64, String) {
        let report = dir.path().join(format!("{tag}.json"));
        let out = dir.path().join(format!("{tag}.jsonl"));
        let mut args: Vec<String> = vec!["dedup".into()];
        args.extend(strs(&inputs));
        args.extend(["-o".into(), out.display().to_string()]);
        args.extend(["--report".into(), report.display().to_string()]);
        args.extend(["--confirm".into(), "estimate".into(), "-q".into()]);
        if let Some(w) = work {
            args.extend(["--work-dir".into(), w.display().to_string()]);
            args.extend(["--sort-memory".into(), "8".into()]);
        }
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ok(&neardup(&args));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        if let Some(w) = work {
            let ranked: serde_json::Value =
                serde_json::from_slice(&std::fs::read(w.join("rank/summary.json")).unwrap())
                    .unwrap();
            let buckets = ranked["summary"]["buckets"].as_u64().unwrap();
            assert!(buckets > 1, "{buckets} bucket(s) in 8 MiB");
        }
        let digest = sha256(&out);
        // The corpus, its output and the work directory together take a gigabyte or more:
        // only the inputs outlive a run.
        std::fs::remove_file(&out).unwrap();
        if let Some(w) = work {
            std::fs::remove_dir_all(w).unwrap();
        }
        (r["peak_rss_bytes"].as_u64().unwrap(), digest)
    };
    let (in_memory, want) = peak("mem", None);
    let (out_of_core, got) = peak("wd", Some(&dir.path().join("work")));
    assert_eq!(got, want);
    assert!(
        out_of_core * 3 < in_memory * 2,
        "peak RSS {out_of_core} out of core against {in_memory} in memory"
    );
}

/// A plain shard with CRLF line ends, blank lines and no final newline, beside a gzipped one:
/// `confirm` reads just the needed lines of the plain shards (where `sign` kept them) and
/// parses the gzipped one whole, and the bytes are in-memory `dedup`'s.
#[test]
fn crlf_blank_lines_and_gzip_shards_give_the_same_bytes_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    let third = lines.len() / 3;
    let crlf = dir.path().join("a.jsonl");
    let mut body = String::from("\r\n");
    for l in &lines[..third] {
        body.push_str(l);
        body.push_str("\r\n  \r\n");
    }
    body.truncate(body.trim_end().len());
    std::fs::write(&crlf, body).unwrap();
    let gz = dir.path().join("b.jsonl.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    for l in &lines[third..2 * third] {
        writeln!(e, "{l}").unwrap();
    }
    e.finish().unwrap();
    let plain = dir.path().join("c.jsonl");
    std::fs::write(&plain, lines[2 * third..].join("\n")).unwrap();
    let inputs = [crlf, gz, plain];
    for flags in [&[][..], &["--confirm", "estimate"][..]] {
        let want = dedup_hashes(dir.path(), "mem", &inputs, flags, None);
        let work = dir.path().join(format!("work-{}", flags.len()));
        let got = dedup_hashes(dir.path(), "wd", &inputs, flags, Some((&work, 3)));
        assert_eq!(got, want, "{flags:?}");
        let kept: Vec<bool> = (0..3)
            .map(|s| work.join(format!("sign/{s:05}.lines")).exists())
            .collect();
        assert_eq!(kept, [true, false, true]);
    }
}

/// A Parquet shard in, Parquet out: `--work-dir` writes the bytes in-memory `dedup` writes; an id
/// repeated across two Parquet shards is named with its row.
#[test]
fn parquet_shards_give_the_same_parquet_output_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let fineweb = root().join("testdata/parquet/fineweb-sample.parquet");
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    std::fs::copy(&fineweb, &a).unwrap();
    std::fs::copy(&fineweb, &b).unwrap();
    let run = |tag: &str, inputs: &[&Path], flags: &[&str], work: Option<&Path>| {
        let out = dir.path().join(format!("{tag}.parquet"));
        let cl = dir.path().join(format!("{tag}.clusters.jsonl"));
        let mut args: Vec<String> = vec!["dedup".into()];
        args.extend(inputs.iter().map(|p| p.display().to_string()));
        args.extend(["-o".into(), out.display().to_string()]);
        args.extend(["--clusters".into(), cl.display().to_string()]);
        args.extend(flags.iter().map(|f| f.to_string()));
        if let Some(w) = work {
            args.extend(["--work-dir".into(), w.display().to_string()]);
            args.extend(["--partitions".into(), "3".into()]);
        }
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ok(&neardup(&args));
        (sha256(&out), sha256(&cl))
    };
    let flags = ["--engine", "cpu", "--threshold", "0.5", "--exact"];
    let want = run("mem", &[&a], &flags, None);
    let got = run("wd", &[&a], &flags, Some(&dir.path().join("w1")));
    assert_eq!(got, want);
    let o = neardup(&[
        "dedup",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        dir.path().join("x.parquet").to_str().unwrap(),
        "--work-dir",
        dir.path().join("w2").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("repeated id"), "{}", stderr(&o));
    assert!(stderr(&o).contains("b.parquet row"), "{}", stderr(&o));
}

/// Shards signed on the GPU engine, their bucketed documents signed again on the CPU engine in
/// `confirm`: the bytes of in-memory `dedup` on the CPU engine.
#[test]
fn shards_signed_on_the_gpu_give_the_same_bytes_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    let inputs = shards(dir.path(), &lines, 3, None);
    let want = dedup_hashes(dir.path(), "mem", &inputs, &["--exact"], None);
    let work = dir.path().join("work");
    let files: Vec<PathBuf> = ["out.jsonl", "clusters.jsonl", "pairs.jsonl"]
        .iter()
        .map(|f| dir.path().join(format!("gpu.{f}")))
        .collect();
    let mut args: Vec<String> = vec!["dedup".into()];
    args.extend(strs(&inputs));
    for (flag, f) in ["-o", "--clusters", "--pairs"].iter().zip(&files) {
        args.extend([flag.to_string(), f.display().to_string()]);
    }
    args.extend(["--exact", "--engine", "gpu", "--partitions", "2"].map(String::from));
    args.extend(["--work-dir".into(), work.display().to_string()]);
    let o = neardup(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    if !o.status.success() {
        assert!(
            std::env::var("NEARDUP_REQUIRE_GPU").is_err(),
            "NEARDUP_REQUIRE_GPU is set but dedup --engine gpu failed: {}",
            stderr(&o)
        );
        return;
    }
    let signed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("sign/00000.json")).unwrap())
            .unwrap();
    assert_eq!(signed["summary"]["engine_kind"], "gpu", "{signed}");
    let got = [sha256(&files[0]), sha256(&files[1]), sha256(&files[2])];
    assert_eq!(got, want);
}

/// Partitions confirmed together, in groups of any size (each gathering its documents once),
/// give the pairs of each confirmed on its own, and the same clusters.
#[test]
fn partitions_confirmed_together_give_the_pairs_of_each_alone() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{confirm, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    let inputs = shards(dir.path(), &lines, 3, None);
    let ins = strs(&inputs);
    let mut got: Vec<(String, String, Vec<confirm::ConfirmSummary>)> = Vec::new();
    // (most documents a group holds, block bytes): with one document a group, a partition is
    // confirmed in blocks; with 1 byte, a block holds one document, with 20,000 about ten.
    let runs = [
        (0, u64::MAX),
        (1, u64::MAX),
        (40, u64::MAX),
        (usize::MAX, u64::MAX),
        (1, 1),
        (1, 20_000),
    ];
    for confirmation in ["jaccard", "estimate"] {
        got.clear();
        for (k, (max_docs, block_bytes)) in runs.into_iter().enumerate() {
            let w = dir.path().join(format!("work-{confirmation}-{k}"));
            let ws = w.display().to_string();
            let mut init = vec!["init", ws.as_str()];
            init.extend(ins.iter().map(|s| s.as_str()));
            init.extend(["--partitions", "4", "--confirm", confirmation]);
            stage(&init);
            for s in ["0", "1", "2"] {
                stage(&["sign", &ws, "--shard", s, "--engine", "cpu"]);
            }
            stage(&["rank", &ws]);
            for s in ["0", "1", "2"] {
                stage(&["bands", &ws, "--shard", s]);
            }
            if max_docs == 0 {
                for p in ["0", "1", "2", "3"] {
                    stage(&["confirm", &ws, "--partition", p]);
                }
            } else {
                let work = WorkDir::open(&w).unwrap();
                let done = confirm::confirm_within(
                    &work,
                    &[0, 1, 2, 3],
                    max_docs,
                    block_bytes,
                    &ProgressFactory::hidden(),
                )
                .unwrap();
                assert!(done.iter().all(|d| d.is_some()));
            }
            let pairs = w.with_extension("pairs.jsonl").display().to_string();
            let cl = w.with_extension("clusters.jsonl").display().to_string();
            stage(&["cluster", &ws, "--pairs", &pairs, "--clusters", &cl]);
            let mut counts = Vec::new();
            for p in 0..4 {
                let mut s = confirm::summary(&WorkDir::open(&w).unwrap(), p).unwrap();
                (s.seconds, s.sets_seconds) = (0.0, 0.0);
                if block_bytes != u64::MAX {
                    // The work of blocks. Under `jaccard` a pair of a bucket is tested at most
                    // once (within a block, with that block alone); under `estimate` a pair
                    // within a block is tested again with each other block.
                    let whole = got[0].2[p].counts;
                    if confirmation == "jaccard" {
                        let pairs = whole.checked
                            + whole.already_joined
                            + whole.filtered
                            + whole.other_group;
                        assert!(s.counts.checked <= pairs, "partition {p}: {:?}", s.counts);
                    } else {
                        assert!(s.counts.checked >= whole.checked, "partition {p}");
                    }
                    s.counts = whole;
                }
                counts.push(s);
            }
            let pairs_text = std::fs::read_to_string(&pairs).unwrap();
            assert!(pairs_text.lines().count() > 10, "{pairs_text}");
            got.push((sha256(Path::new(&pairs)), sha256(Path::new(&cl)), counts));
        }
        for (g, run) in got[1..].iter().zip(&runs[1..]) {
            assert_eq!(g.0, got[0].0, "{confirmation} {run:?}");
            assert_eq!(g.1, got[0].1, "{confirmation} {run:?}");
            let json = |c: &[confirm::ConfirmSummary]| serde_json::to_string(c).unwrap();
            assert_eq!(json(&g.2), json(&got[0].2), "{confirmation} {run:?}");
        }
    }
}

/// `rank` writes the same files whatever it may hold at once: with every record in memory, and
/// with buckets of a few documents each split by id range (exact duplicates, groups and a
/// wordless document among them), the rank files and the output are the same bytes.
#[test]
fn ranks_sorted_in_id_range_buckets_equal_ranks_sorted_at_once() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{rank, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let mut lines = corpus_lines();
    for (i, l) in lines.iter_mut().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        if i % 7 != 0 {
            v["g"] = serde_json::json!(format!("g{}", i % 3));
        }
        *l = v.to_string();
    }
    let inputs = shards(dir.path(), &lines, 3, Some(1));
    let ins = strs(&inputs);
    let flags = ["--exact", "--group-field", "g", "--group-missing", "own"];
    let want = dedup_hashes(dir.path(), "mem", &inputs, &flags, None);
    let mut got = Vec::new();
    for (k, budget) in [usize::MAX, 1 << 20, 2000, 1].into_iter().enumerate() {
        let w = dir.path().join(format!("work-{k}"));
        let ws = w.display().to_string();
        let mut init = vec!["init", ws.as_str()];
        init.extend(ins.iter().map(|s| s.as_str()));
        init.extend(["--partitions", "2"]);
        init.extend(flags);
        stage(&init);
        for s in ["0", "1", "2"] {
            stage(&["sign", &ws, "--shard", s, "--engine", "cpu"]);
        }
        let work = WorkDir::open(&w).unwrap();
        let s = rank::job::rank_within(&work, &ProgressFactory::hidden(), budget)
            .unwrap()
            .unwrap();
        assert!(s.exact_duplicates >= 2 && s.wordless >= 3, "{s:?}");
        assert_eq!(s.groups.len(), 4, "{s:?}");
        match budget {
            usize::MAX | 1048576 => assert_eq!(s.buckets, 1),
            // Buckets of about 2000 bytes, or of the documents of one id.
            2000 => assert!(s.buckets > 10 && s.buckets < lines.len() / 2, "{s:?}"),
            _ => assert!(s.buckets > lines.len() / 2, "{s:?}"),
        }
        assert!(!w.join("rank").join("spill").exists());
        let ranks: Vec<String> = (0..3).map(|s| sha256(&work.rank_file(s))).collect();
        for s in ["0", "1", "2"] {
            stage(&["bands", &ws, "--shard", s]);
        }
        stage(&["confirm", &ws, "--partition", "0", "1"]);
        let cl = w.with_extension("clusters.jsonl");
        let pairs = w.with_extension("pairs.jsonl");
        let (c, p) = (cl.display().to_string(), pairs.display().to_string());
        stage(&["cluster", &ws, "--clusters", &c, "--pairs", &p]);
        let mut out = Vec::new();
        for s in 0..3 {
            let part = w.with_extension(format!("out-{s}.jsonl"));
            let ss = s.to_string();
            stage(&[
                "apply",
                &ws,
                "--shard",
                &ss,
                "-o",
                &part.display().to_string(),
            ]);
            out.extend(std::fs::read(part).unwrap());
        }
        let whole = w.with_extension("out.jsonl");
        std::fs::write(&whole, out).unwrap();
        assert_eq!(
            [sha256(&whole), sha256(&cl), sha256(&pairs)],
            want,
            "budget {budget}"
        );
        got.push(ranks);
    }
    for g in &got[1..] {
        assert_eq!(g, &got[0]);
    }
}

/// `rank` as parallel tasks (split per shard, plan, sort and exact per range, write per shard,
/// finish) writes the rank files and summary of `rank` in one process, for any task budget:
/// one range, a few, or a few ids each; steps run again are skipped, and the task files are gone
/// once it finishes.
#[test]
fn rank_as_tasks_writes_the_files_of_rank_in_one_process() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{rank, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let mut lines = corpus_lines();
    for (i, l) in lines.iter_mut().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        if i % 7 != 0 {
            v["g"] = serde_json::json!(format!("g{}", (i * 5) % 3));
        }
        *l = v.to_string();
    }
    let inputs = shards(dir.path(), &lines, 4, Some(2));
    let ins = strs(&inputs);
    let flags = ["--exact", "--group-field", "g", "--group-missing", "own"];
    let signed = |name: &str| {
        let w = dir.path().join(name);
        let ws = w.display().to_string();
        let mut init = vec!["init", ws.as_str()];
        init.extend(ins.iter().map(|s| s.as_str()));
        init.extend(flags);
        stage(&init);
        for s in 0..4 {
            stage(&["sign", &ws, "--shard", &s.to_string(), "--engine", "cpu"]);
        }
        WorkDir::open(&w).unwrap()
    };
    let one = signed("one");
    let want = rank::job::rank_within(&one, &ProgressFactory::hidden(), usize::MAX)
        .unwrap()
        .unwrap();
    let want_files: Vec<Vec<u8>> = (0..4)
        .map(|s| std::fs::read(one.rank_file(s)).unwrap())
        .collect();
    for (k, budget) in [usize::MAX, 6000, 500].into_iter().enumerate() {
        let work = signed(&format!("tasks-{k}"));
        for s in (0..4).rev() {
            assert!(rank::tasks::split(&work, s, budget).unwrap().is_some());
            assert!(rank::tasks::split(&work, s, budget).unwrap().is_none());
        }
        let plan = rank::tasks::plan(&work, budget).unwrap();
        match budget {
            usize::MAX => assert_eq!(plan.ranges, 1),
            6000 => assert!(plan.ranges > 3 && plan.ranges < 30, "{plan:?}"),
            // Runs of a few records each, and ranges of about two each.
            _ => assert!(plan.ranges > lines.len() / 4, "{plan:?}"),
        }
        // A plan made already stands, whatever budget is asked for later.
        assert_eq!(
            rank::tasks::plan(&work, 1 << 30).unwrap().ranges,
            plan.ranges
        );
        for r in (0..plan.ranges).rev() {
            assert!(rank::tasks::sort(&work, r).unwrap().is_some());
        }
        let dups: u64 = (0..plan.ranges)
            .map(|r| rank::tasks::exact(&work, r).unwrap().unwrap())
            .sum();
        assert_eq!(dups, want.exact_duplicates);
        for s in 0..4 {
            assert!(rank::tasks::write(&work, s).unwrap());
            assert!(!rank::tasks::write(&work, s).unwrap());
        }
        let got = rank::tasks::finish(&work).unwrap().unwrap();
        assert!(rank::tasks::finish(&work).unwrap().is_none());
        assert_eq!(
            (&got.rows, got.exact_duplicates, got.wordless, &got.groups),
            (
                &want.rows,
                want.exact_duplicates,
                want.wordless,
                &want.groups
            ),
            "budget {budget}"
        );
        assert_eq!(got.buckets, plan.ranges);
        for (s, want) in want_files.iter().enumerate() {
            assert!(
                &std::fs::read(work.rank_file(s)).unwrap() == want,
                "budget {budget}, shard {s}"
            );
        }
        assert!(!work.root().join("rank").join("tasks").exists());
        // Every step is done now, the single form too.
        assert!(rank::tasks::split(&work, 0, budget).unwrap().is_none());
        assert!(rank::job::rank(&work, &ProgressFactory::hidden())
            .unwrap()
            .is_none());
    }
}

/// Shards longer than a `write` or `locate` job's window of rows (65,536 at the smallest
/// budget) are read and written a window at a time, in the same bytes.
#[test]
fn rank_files_of_long_shards_are_written_a_window_at_a_time() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{rank, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("c.jsonl");
    ok(&neardup(&[
        "synth",
        "140000",
        "--words",
        "4",
        "-o",
        corpus.to_str().unwrap(),
        "-q",
    ]));
    let mut lines = lines_of(&corpus);
    // Exact copies across the windows and shards.
    for i in [5usize, 70_000, 100_000] {
        let mut v: serde_json::Value = serde_json::from_str(&lines[i]).unwrap();
        v["id"] = serde_json::json!(format!("copy-{i}"));
        lines.push(v.to_string());
    }
    let inputs = shards(dir.path(), &lines, 2, None);
    let ready = |name: &str| {
        let w = dir.path().join(name);
        let ws = w.display().to_string();
        let mut init = vec!["init", ws.as_str(), "--exact"];
        let ins = strs(&inputs);
        init.extend(ins.iter().map(|s| s.as_str()));
        stage(&init);
        for s in ["0", "1"] {
            stage(&["sign", &ws, "--shard", s, "--engine", "cpu"]);
        }
        WorkDir::open(&w).unwrap()
    };
    let one = ready("one");
    rank::job::rank(&one, &ProgressFactory::hidden())
        .unwrap()
        .unwrap();
    let work = ready("tasks");
    for s in 0..2 {
        rank::tasks::split(&work, s, 1 << 20).unwrap();
    }
    let plan = rank::tasks::plan(&work, 1 << 20).unwrap();
    assert!(plan.ranges > 1, "{plan:?}");
    for r in 0..plan.ranges {
        rank::tasks::sort(&work, r).unwrap();
    }
    for r in 0..plan.ranges {
        rank::tasks::exact(&work, r).unwrap();
    }
    for s in 0..2 {
        assert!(rank::tasks::write(&work, s).unwrap());
        assert_eq!(
            sha256(&work.rank_file(s)),
            sha256(&one.rank_file(s)),
            "shard {s}"
        );
    }
    assert!(
        rank::tasks::finish(&work)
            .unwrap()
            .unwrap()
            .exact_duplicates
            >= 3
    );
    // `cluster`'s locate jobs read such shards a window of rows at a time too.
    use neardup::stages::sharded::cluster;
    for w in [&one, &work] {
        let ws = w.root().display().to_string();
        for s in ["0", "1"] {
            stage(&["bands", &ws, "--shard", s]);
        }
        stage(&[
            "confirm",
            &ws,
            "--partition",
            "0",
            "1",
            "2",
            "3",
            "4",
            "5",
            "6",
            "7",
        ]);
    }
    cluster::job::cluster(&one, &ProgressFactory::hidden())
        .unwrap()
        .unwrap();
    let plan = cluster::tasks::plan(&work, 1 << 20).unwrap();
    assert!(plan.parts >= 2, "{plan:?}");
    for p in 0..8 {
        cluster::tasks::edges(&work, p).unwrap();
    }
    for s in 0..2 {
        cluster::tasks::locate(&work, s).unwrap();
    }
    cluster::tasks::stars(&work).unwrap();
    for k in 0..plan.parts {
        cluster::tasks::roots(&work, k).unwrap();
    }
    for s in 0..2 {
        cluster::tasks::attributes(&work, s).unwrap();
    }
    for k in 0..plan.parts {
        cluster::tasks::clusters(&work, k).unwrap();
    }
    for s in 0..2 {
        cluster::tasks::verdicts(&work, s).unwrap();
    }
    let got = cluster::tasks::finish(&work).unwrap().unwrap();
    assert!(got.stats.exact_duplicates >= 3);
    for s in 0..2 {
        assert_eq!(
            sha256(&work.cluster_file(s)),
            sha256(&one.cluster_file(s)),
            "shard {s}"
        );
    }
    assert_eq!(
        sha256(&work.clusters_jsonl()),
        sha256(&one.clusters_jsonl())
    );
}

/// The command line runs the same steps: `--task-memory 1` on this corpus cuts several ranges,
/// and a step whose result is gone, or whose file was edited, is an error naming it.
#[test]
fn rank_steps_from_the_command_line_and_a_dropped_result_fails() {
    use neardup::stages::sharded::WorkDir;
    let dir = tempfile::tempdir().unwrap();
    let mut lines = corpus_lines();
    for i in 0..9000 {
        lines.push(
            serde_json::json!({"id": format!("pad-{i:05}"), "text": format!("w{i} a b c")})
                .to_string(),
        );
    }
    let inputs = shards(dir.path(), &lines, 3, None);
    let ins = strs(&inputs);
    let want = dir.path().join("one");
    let w = dir.path().join("tasks");
    let mut hashes = Vec::new();
    for w in [&want, &w] {
        let ws = w.display().to_string();
        let mut init = vec!["init", ws.as_str()];
        init.extend(ins.iter().map(|s| s.as_str()));
        init.push("--exact");
        stage(&init);
        for s in ["0", "1", "2"] {
            stage(&["sign", &ws, "--shard", s, "--engine", "cpu"]);
        }
    }
    stage(&["rank", want.to_str().unwrap()]);
    let ws = w.display().to_string();
    let step = |args: &[&str]| {
        let mut all = vec!["stage", "rank", ws.as_str(), "--task-memory", "1", "--step"];
        all.extend(args);
        neardup(&all)
    };
    for s in ["0", "1", "2"] {
        ok(&step(&["split", "--shard", s]));
    }
    let o = step(&["plan"]);
    ok(&o);
    let work = WorkDir::open(&w).unwrap();
    let ranges = neardup::stages::sharded::rank::tasks::read_plan(&work)
        .unwrap()
        .ranges;
    assert!(ranges >= 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{ranges} ranges")),
        "{}",
        stderr(&o)
    );
    for r in 0..ranges {
        ok(&step(&["sort", "--range", &r.to_string()]));
    }
    // A sort's result dropped: the exact and write steps that need it say which step to run.
    let tasks = w.join("rank").join("tasks");
    let sort1 = tasks.join("sort-00001.json");
    let kept = std::fs::read(&sort1).unwrap();
    std::fs::remove_file(&sort1).unwrap();
    let o = step(&["exact", "--range", "0"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--step sort --range 1"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&sort1, &kept).unwrap();
    // An edited task file is refused by name.
    let ranks = tasks.join("sort-00000.ranks");
    let mut bytes = std::fs::read(&ranks).unwrap();
    bytes[9] ^= 1;
    let good = std::fs::read(&ranks).unwrap();
    std::fs::write(&ranks, &bytes).unwrap();
    for r in 0..ranges {
        ok(&step(&["exact", "--range", &r.to_string()]));
    }
    let o = step(&["write", "--shard", "0"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("sort-00000.ranks") && stderr(&o).contains("checksum"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&ranks, &good).unwrap();
    // Finish before every shard is written names the missing step.
    let o = step(&["finish"]);
    assert!(
        stderr(&o).contains("--step write --shard 0"),
        "{}",
        stderr(&o)
    );
    for s in ["0", "1", "2"] {
        ok(&step(&["write", "--shard", s]));
    }
    let o = step(&["finish"]);
    ok(&o);
    assert!(
        stderr(&o).contains(&format!("sorted in {ranges} ranges")),
        "{}",
        stderr(&o)
    );
    for root in [&want, &w] {
        let work = WorkDir::open(root).unwrap();
        hashes.push(
            (0..3)
                .map(|s| sha256(&work.rank_file(s)))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(hashes[0], hashes[1]);
    let o = step(&["sort"]);
    assert!(
        !o.status.success() && stderr(&o).contains("--range"),
        "{}",
        stderr(&o)
    );
}

/// A corpus whose clusters are long chains (a window of words moved one word at a time), one
/// giant star (a template with a few words of its own), many small ones, and documents in
/// none; ids hashed, so ranks follow no chain.
fn graph_lines() -> Vec<String> {
    let mut lines = corpus_lines();
    let word = |i: u64| format!("w{}", (i.wrapping_mul(2654435761)) % 100_000);
    for c in 0..3u64 {
        for i in 0..150u64 {
            let text: Vec<String> = (i..i + 60).map(|w| word(w + c * 1_000_000)).collect();
            let id = format!("{:016x}", xxhash(c * 1000 + i));
            lines.push(serde_json::json!({ "id": id, "text": text.join(" ") }).to_string());
        }
    }
    let template: Vec<String> = (0..80).map(|w| word(w + 5_000_000)).collect();
    for i in 0..200u64 {
        let text = format!("{} own{} own{}", template.join(" "), i, i % 7);
        let id = format!("t{:08x}", xxhash(10_000 + i) as u32);
        lines.push(serde_json::json!({ "id": id, "text": text, "g": i % 3 }).to_string());
    }
    for (i, l) in lines.iter_mut().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["n"] = serde_json::json!((i * 7) % 13);
        *l = v.to_string();
    }
    lines
}

fn xxhash(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

/// `cluster` as parallel steps, for each part count the budget gives and each policy (the
/// greedy rule's included), writes the files of `cluster` in one process: every shard's cluster file, the clusters and pairs
/// files, the chaining rows and the summary (but its seconds).
#[test]
fn cluster_as_steps_writes_the_files_of_cluster_in_one_process() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{cluster, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let lines = graph_lines();
    let inputs = shards(dir.path(), &lines, 4, Some(1));
    let ins = strs(&inputs);
    let configs: [&[&str]; 5] = [
        &["--exact"],
        &["--cluster", "greedy", "--exact", "--keep", "longest"],
        &["--cluster", "greedy", "--tag-only"],
        &["--tag-only", "--keep", "field:n:max"],
        &[
            "--exact",
            "--keep",
            "longest",
            "--threshold",
            "0.7",
            "--group-field",
            "g",
            "--group-missing",
            "own",
        ],
    ];
    for (c, flags) in configs.iter().enumerate() {
        let ready = |name: &str| {
            let w = dir.path().join(format!("{name}-{c}"));
            let ws = w.display().to_string();
            let mut init = vec!["init", ws.as_str(), "--partitions", "3"];
            init.extend(ins.iter().map(|s| s.as_str()));
            init.extend(flags.iter());
            stage(&init);
            for s in 0..4 {
                stage(&["sign", &ws, "--shard", &s.to_string(), "--engine", "cpu"]);
            }
            stage(&["rank", &ws]);
            for s in 0..4 {
                stage(&["bands", &ws, "--shard", &s.to_string()]);
            }
            stage(&["confirm", &ws, "--partition", "0", "1", "2"]);
            if flags.contains(&"greedy") {
                stage(&["greedy", &ws]);
            }
            WorkDir::open(&w).unwrap()
        };
        let one = ready("one");
        let want = cluster::job::cluster(&one, &ProgressFactory::hidden())
            .unwrap()
            .unwrap();
        assert!(want.largest_cluster >= 150, "{:?}", want.largest_cluster);
        let files = |w: &WorkDir| -> Vec<String> {
            let mut f: Vec<PathBuf> = (0..4).map(|s| w.cluster_file(s)).collect();
            f.extend([
                w.clusters_jsonl(),
                w.pairs_jsonl(),
                w.root().join("cluster/chaining.rows"),
            ]);
            f.iter().map(|p| sha256(p)).collect()
        };
        let strip = |s: &cluster::ClusterSummary| {
            let mut v = serde_json::to_value(s).unwrap();
            for k in [
                "order_seconds",
                "confirm_seconds",
                "sets_seconds",
                "cluster_seconds",
            ] {
                v["stats"][k] = serde_json::Value::Null;
            }
            v
        };
        for budget in [usize::MAX, 400_000, 60_000] {
            let w = ready(&format!("steps-{budget}"));
            let plan = cluster::tasks::plan(&w, budget).unwrap();
            // The greedy rule's fewer edges ask for fewer parts.
            match budget {
                usize::MAX => assert_eq!(plan.parts, 1),
                400_000 => assert!(plan.parts < 100, "{plan:?}"),
                _ => assert!(plan.parts >= 3 && plan.parts < 100, "{plan:?}"),
            }
            for p in (0..3).rev() {
                assert!(cluster::tasks::edges(&w, p).unwrap());
                assert!(!cluster::tasks::edges(&w, p).unwrap());
            }
            for s in 0..4 {
                assert!(cluster::tasks::locate(&w, s).unwrap());
            }
            let rounds = cluster::tasks::stars(&w).unwrap();
            // Chains need rounds; the greedy rule's edges may be stars at once.
            assert!((1..40).contains(&rounds), "{rounds} rounds");
            assert!(c != 0 || rounds >= 2, "{rounds} rounds");
            for k in 0..plan.parts {
                assert!(cluster::tasks::roots(&w, k).unwrap());
            }
            for s in (0..4).rev() {
                assert!(cluster::tasks::attributes(&w, s).unwrap());
            }
            for k in 0..plan.parts {
                assert!(cluster::tasks::clusters(&w, k).unwrap());
            }
            for s in 0..4 {
                assert!(cluster::tasks::verdicts(&w, s).unwrap());
                assert!(!cluster::tasks::verdicts(&w, s).unwrap());
            }
            let got = cluster::tasks::finish(&w).unwrap().unwrap();
            assert!(cluster::tasks::finish(&w).unwrap().is_none());
            assert_eq!(strip(&got), strip(&want), "{flags:?}, budget {budget}");
            assert_eq!(files(&w), files(&one), "{flags:?}, budget {budget}");
            assert!(!w.root().join("cluster").join("tasks").exists());
        }
    }
}

/// The command line runs the same steps; a dropped round result fails naming the job to run
/// again.
#[test]
fn cluster_steps_from_the_command_line_and_a_dropped_round_fails() {
    let dir = tempfile::tempdir().unwrap();
    let lines = graph_lines();
    let inputs = shards(dir.path(), &lines, 2, None);
    let ins = strs(&inputs);
    let want = dir.path().join("want");
    let w = dir.path().join("work");
    for w in [&want, &w] {
        let ws = w.display().to_string();
        let mut init = vec!["init", ws.as_str(), "--partitions", "2", "--exact"];
        init.extend(ins.iter().map(|s| s.as_str()));
        stage(&init);
        for s in ["0", "1"] {
            stage(&["sign", &ws, "--shard", s, "--engine", "cpu"]);
        }
        stage(&["rank", &ws]);
        for s in ["0", "1"] {
            stage(&["bands", &ws, "--shard", s]);
        }
        stage(&["confirm", &ws, "--partition", "0", "1"]);
    }
    let want_cl = dir.path().join("want.clusters.jsonl");
    stage(&[
        "cluster",
        want.to_str().unwrap(),
        "--clusters",
        want_cl.to_str().unwrap(),
    ]);
    let ws = w.display().to_string();
    let step = |args: &[&str]| {
        let mut all = vec!["stage", "cluster", ws.as_str(), "--step"];
        all.extend(args);
        neardup(&all)
    };
    ok(&step(&["plan", "--task-memory", "1"]));
    for p in ["0", "1"] {
        ok(&step(&["edges", "--partition", p]));
    }
    for s in ["0", "1"] {
        ok(&step(&["locate", "--shard", s]));
    }
    let parts = neardup::stages::sharded::cluster::tasks::read_plan(
        &neardup::stages::sharded::WorkDir::open(&w).unwrap(),
    )
    .unwrap()
    .parts;
    let mut r = 0;
    loop {
        let mut last = None;
        for k in 0..parts {
            last = Some(step(&[
                "star",
                "--round",
                &r.to_string(),
                "--part",
                &k.to_string(),
            ]));
            ok(last.as_ref().unwrap());
        }
        let said = stderr(last.as_ref().unwrap());
        if said.contains("found the components") {
            break;
        }
        assert!(
            said.contains(&format!("run round {} next", r + 1)),
            "{said}"
        );
        r += 1;
        assert!(r < 40);
    }
    assert!(r >= 1);
    // A round's result dropped: the roots step names the job to run again.
    let tasks = w.join("cluster").join("tasks");
    let dropped = tasks.join(format!("star-{:04}-00000.json", r - 1));
    let kept = std::fs::read(&dropped).unwrap();
    std::fs::remove_file(&dropped).unwrap();
    let o = step(&["roots", "--part", "0"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("--round {}", r - 1)),
        "{}",
        stderr(&o)
    );
    std::fs::write(&dropped, kept).unwrap();
    for k in 0..parts {
        ok(&step(&["roots", "--part", &k.to_string()]));
    }
    for s in ["0", "1"] {
        ok(&step(&["attributes", "--shard", s]));
    }
    for k in 0..parts {
        ok(&step(&["clusters", "--part", &k.to_string()]));
    }
    let o = step(&["finish"]);
    assert!(
        stderr(&o).contains("--step verdicts --shard 0"),
        "{}",
        stderr(&o)
    );
    for s in ["0", "1"] {
        ok(&step(&["verdicts", "--shard", s]));
    }
    let cl = dir.path().join("clusters.jsonl");
    ok(&step(&["finish", "--clusters", cl.to_str().unwrap()]));
    assert_eq!(
        std::fs::read(&cl).unwrap(),
        std::fs::read(&want_cl).unwrap()
    );
    for s in 0..2 {
        let f = format!("cluster/{s:05}.parquet");
        assert_eq!(sha256(&w.join(&f)), sha256(&want.join(&f)));
    }
}

/// Of several repeated ids, each in another id-range bucket, `rank` names the one met first
/// in input order, with both places, whatever its budget.
#[test]
fn the_first_repeated_id_is_named_whatever_the_rank_budget() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{rank, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let mut a = String::new();
    let mut b = String::new();
    for i in 0..200 {
        a.push_str(&format!("{{\"id\":\"d{i:03}\",\"text\":\"w{i} x y\"}}\n"));
    }
    // Repeats of ids from far apart ranges; "d150" is the one met first.
    for id in ["n1", "d150", "n2", "d010", "d199", "n3"] {
        b.push_str(&format!("{{\"id\":\"{id}\",\"text\":\"z\"}}\n"));
    }
    let (pa, pb) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    for (k, budget) in [usize::MAX, 500, 1].into_iter().enumerate() {
        let w = dir.path().join(format!("work-{k}"));
        let ws = w.display().to_string();
        stage(&["init", &ws, pa.to_str().unwrap(), pb.to_str().unwrap()]);
        for s in ["0", "1"] {
            stage(&["sign", &ws, "--shard", s, "--engine", "cpu"]);
        }
        let work = WorkDir::open(&w).unwrap();
        let e = rank::job::rank_within(&work, &ProgressFactory::hidden(), budget)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("d150") && e.contains("a.jsonl:151") && e.contains("b.jsonl:2"),
            "budget {budget}: {e}"
        );
        assert!(!w.join("rank").join("spill").exists());
        assert!(!work.rank_summary().exists());
    }
}
