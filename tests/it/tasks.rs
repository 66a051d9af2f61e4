//! The sharded run as tasks: a scheduler's loop over `neardup stage next` and `stage run`,
//! one task at a time or eight at once (each task twice, so two runs of one task meet), on
//! JSONL and Parquet shards, under both clustering rules, writes the outputs, clusters and
//! report of `neardup dedup`; a task done is skipped, a file of `--out` removed is written
//! again, and bad task lines and `--out` directories are refused.

use std::path::{Path, PathBuf};
use std::process::Child;

use crate::common::*;
use crate::sharded::{comparable_report, corpus_lines, shards};

/// The tasks `stage next` prints now.
fn next(work: &Path) -> Vec<String> {
    let o = neardup(&[
        "stage",
        "next",
        work.to_str().unwrap(),
        "--task-memory",
        "1",
    ]);
    ok(&o);
    stdout(&o).lines().map(String::from).collect()
}

/// Run one task as a child process.
fn spawn(work: &Path, task: &str) -> Child {
    neardup_command()
        .args([
            "stage",
            "run",
            work.to_str().unwrap(),
            task,
            "--engine",
            "cpu",
            "-q",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the neardup binary runs")
}

/// The scheduler's loop: every wave's tasks, `at_once` at a time (each twice when more than
/// one runs at once, in a shuffled order). Returns the waves' first tasks.
fn run_loop(work: &Path, at_once: usize, seed: u64) -> Vec<String> {
    let mut rng = neardup::Pcg32::new(seed);
    let mut firsts = Vec::new();
    let mut last: Vec<String> = Vec::new();
    loop {
        let wave = next(work);
        if wave.is_empty() {
            return firsts;
        }
        assert_ne!(wave, last, "the wave ran and is due again");
        assert!(firsts.len() < 200, "the waves never end: {firsts:?}");
        firsts.push(wave[0].clone());
        let mut jobs: Vec<String> = wave.clone();
        if at_once > 1 {
            jobs.extend(wave.iter().cloned());
            neardup::synth::shuffle(&mut jobs, &mut rng);
        }
        for chunk in jobs.chunks(at_once) {
            let children: Vec<(String, Child)> =
                chunk.iter().map(|t| (t.clone(), spawn(work, t))).collect();
            for (t, c) in children {
                let o = c.wait_with_output().unwrap();
                assert!(
                    o.status.success(),
                    "{t}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        last = wave;
    }
}

/// `stage init W SHARDS --out OUT` with `flags`.
fn init(work: &Path, inputs: &[PathBuf], out: &Path, flags: &[&str]) {
    let mut args = vec!["stage", "init", work.to_str().unwrap()];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--out", out.to_str().unwrap(), "--partitions", "3", "-q"]);
    args.extend(flags);
    ok(&neardup(&args));
}

/// `dedup` over `inputs` into `dir/NAME.*`: its output, clusters and report.
fn dedup(dir: &Path, name: &str, inputs: &[PathBuf], ext: &str, flags: &[&str]) -> [PathBuf; 3] {
    let files = [
        dir.join(format!("{name}.out.{ext}")),
        dir.join(format!("{name}.clusters.jsonl")),
        dir.join(format!("{name}.report.json")),
    ];
    let mut args: Vec<&str> = vec!["dedup"];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    args.extend(["-o", files[0].to_str().unwrap()]);
    args.extend(["--clusters", files[1].to_str().unwrap()]);
    args.extend(["--report", files[2].to_str().unwrap(), "--engine", "cpu"]);
    args.extend(flags);
    ok(&neardup(&args));
    files
}

/// The run's clusters and report in `out` are those of `dedup` (`want`, as [`dedup`] gives
/// them), report timings aside.
fn same_clusters_and_report(out: &Path, want: &[PathBuf; 3], tag: &str) {
    assert_eq!(
        sha256(&out.join("clusters.jsonl")),
        sha256(&want[1]),
        "{tag}: the clusters"
    );
    assert_eq!(
        comparable_report(&out.join("report.json")),
        comparable_report(&want[2]),
        "{tag}: the report"
    );
}

#[test]
fn the_task_loop_writes_what_dedup_writes_one_or_eight_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines();
    let inputs = shards(dir.path(), &lines, 4, Some(2));
    for (rule, flags) in [
        ("components", &["--exact"][..]),
        ("greedy", &["--cluster", "greedy", "--keep", "longest"][..]),
    ] {
        let want = dedup(dir.path(), rule, &inputs, "jsonl", flags);
        for at_once in [1, 8] {
            let tag = format!("{rule}-{at_once}");
            let work = dir.path().join(format!("work-{tag}"));
            let out = dir.path().join(format!("out-{tag}"));
            // A file of an earlier run where this run's output goes is not taken as this run's.
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join(inputs[1].file_name().unwrap()), "stale\n").unwrap();
            std::fs::write(out.join("clusters.jsonl"), "stale\n").unwrap();
            init(&work, &inputs, &out, flags);
            let firsts = run_loop(&work, at_once, at_once as u64);
            let kinds: Vec<&str> = firsts
                .iter()
                .map(|t| t.split(' ').next().unwrap())
                .collect();
            assert!(
                kinds.contains(&"rank-sort") && kinds.contains(&"cluster-star"),
                "{kinds:?}"
            );
            assert_eq!(
                kinds.contains(&"greedy-settle"),
                rule == "greedy",
                "{kinds:?}"
            );
            let got: Vec<u8> = inputs
                .iter()
                .flat_map(|p| std::fs::read(out.join(p.file_name().unwrap())).unwrap())
                .collect();
            assert!(
                got == std::fs::read(&want[0]).unwrap(),
                "{tag}: the outputs"
            );
            same_clusters_and_report(&out, &want, &tag);
            let mut names = dir_entries(&out);
            names.sort();
            let mut expect: Vec<String> = inputs
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .chain(["clusters.jsonl".into(), "report.json".into()])
                .collect();
            expect.sort();
            assert_eq!(names, expect);
        }
    }
}

#[test]
fn a_done_task_is_skipped_and_a_removed_output_is_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = shards(dir.path(), &corpus_lines(), 3, None);
    let want = dedup(dir.path(), "mem", &inputs, "jsonl", &[]);
    let (work, out) = (dir.path().join("work"), dir.path().join("out"));
    init(&work, &inputs, &out, &[]);
    let w = work.to_str().unwrap();
    // Before its turn, a task says what it waits for.
    let o = neardup(&["stage", "run", w, "bands shard=0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not there yet"), "{}", stderr(&o));
    run_loop(&work, 1, 0);
    assert!(next(&work).is_empty());
    let o = neardup(&["stage", "run", w, "sign shard=1", "--engine", "cpu"]);
    ok(&o);
    assert!(
        stderr(&o).contains("neardup stage sign: shard 1: done already, skipped"),
        "{}",
        stderr(&o)
    );
    let o = neardup(&["stage", "run", w, "apply shard=0"]);
    ok(&o);
    assert!(
        stderr(&o).contains("apply: shard 0: done already"),
        "{}",
        stderr(&o)
    );
    // An output removed (or replaced) after the run: that one task is due again.
    let gone = out.join(inputs[2].file_name().unwrap());
    std::fs::remove_file(&gone).unwrap();
    std::fs::write(out.join("clusters.jsonl"), "edited\n").unwrap();
    assert_eq!(next(&work), ["cluster-finish"]);
    run_loop(&work, 1, 0);
    let got: Vec<u8> = inputs
        .iter()
        .flat_map(|p| std::fs::read(out.join(p.file_name().unwrap())).unwrap())
        .collect();
    assert!(got == std::fs::read(&want[0]).unwrap());
    assert_eq!(sha256(&out.join("clusters.jsonl")), sha256(&want[1]));
}

#[test]
fn a_parquet_shard_through_the_loop_gives_the_parquet_of_dedup() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("fineweb.parquet");
    std::fs::copy(
        root().join("testdata/parquet/fineweb-sample.parquet"),
        &shard,
    )
    .unwrap();
    let flags = ["--threshold", "0.5", "--exact"];
    let want = dedup(
        dir.path(),
        "mem",
        std::slice::from_ref(&shard),
        "parquet",
        &flags,
    );
    let (work, out) = (dir.path().join("work"), dir.path().join("out"));
    init(&work, std::slice::from_ref(&shard), &out, &flags);
    run_loop(&work, 8, 3);
    assert_eq!(sha256(&out.join("fineweb.parquet")), sha256(&want[0]));
    assert_eq!(sha256(&out.join("clusters.jsonl")), sha256(&want[1]));
}

/// Run the tasks of `wave` one by one, each to success.
fn run_wave(work: &Path, wave: &[String]) {
    for t in wave {
        let o = spawn(work, t).wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{t}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn confirm_reads_no_shard_once_their_texts_are_shipped() {
    let dir = tempfile::tempdir().unwrap();
    // Compressed shards: read whole, so each confirm group would read every one of them.
    let inputs: Vec<PathBuf> = shards(dir.path(), &corpus_lines(), 3, None)
        .into_iter()
        .map(|p| {
            let z = p.with_extension("jsonl.zst");
            let plain = std::fs::read(&p).unwrap();
            std::fs::write(&z, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
            z
        })
        .collect();
    let flags = ["--confirm", "jaccard"];
    let want = dedup(dir.path(), "mem", &inputs, "jsonl.zst", &flags);
    let (work, out) = (dir.path().join("work"), dir.path().join("out"));
    init(&work, &inputs, &out, &flags);
    let mut kinds = Vec::new();
    let wave = loop {
        let wave = next(&work);
        let kind = wave[0].split(' ').next().unwrap().to_string();
        if kind == "confirm" {
            break wave;
        }
        if kinds.last() != Some(&kind) {
            kinds.push(kind);
        }
        run_wave(&work, &wave);
    };
    assert!(
        kinds.ends_with(&[
            "bands".into(),
            "confirm-needs".into(),
            "confirm-texts".into()
        ]),
        "{kinds:?}"
    );
    // A shipped file damaged: refused by name.
    let texts = work.join("ship/shipped-00001-0002.rows");
    let good = std::fs::read(&texts).unwrap();
    let mut bad = good.clone();
    bad[40] ^= 1;
    std::fs::write(&texts, &bad).unwrap();
    let o = neardup(&[
        "stage",
        "run",
        work.to_str().unwrap(),
        "confirm partitions=2",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("shipped-00001-0002.rows"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&texts, &good).unwrap();
    // The shards, the band rows and each shard's ranks and recorded band digests away while
    // the partitions are confirmed: the shipped documents and the buckets' rows that
    // `confirm-needs` kept are all it reads.
    let mut away: Vec<(PathBuf, PathBuf)> = inputs
        .iter()
        .map(|p| (p.clone(), p.with_extension("away")))
        .collect();
    away.push((work.join("bands"), dir.path().join("bands.away")));
    for s in 0..inputs.len() {
        for file in [format!("rank/{s:05}.parquet"), format!("sign/{s:05}.dig")] {
            let at = work.join(&file);
            assert!(at.exists(), "{file}");
            away.push((at, dir.path().join(file.replace('/', "-"))));
        }
    }
    for (p, a) in &away {
        std::fs::rename(p, a).unwrap();
    }
    run_wave(&work, &wave);
    for (p, a) in &away {
        std::fs::rename(a, p).unwrap();
    }
    run_loop(&work, 1, 0);
    let got: Vec<u8> = inputs
        .iter()
        .flat_map(|p| {
            zstd::decode_all(&std::fs::read(out.join(p.file_name().unwrap())).unwrap()[..]).unwrap()
        })
        .collect();
    assert!(got == zstd::decode_all(&std::fs::read(&want[0]).unwrap()[..]).unwrap());
    same_clusters_and_report(&out, &want, "shipped");
}

/// Records of Parquet files, in order, as JSONL: every record of `files` tagged (`--tag-only`)
/// by one run over all of them, so equal records give equal lines.
fn parquet_records(dir: &Path, name: &str, files: &[PathBuf]) -> Vec<u8> {
    let out = dir.join(format!("{name}.records.jsonl"));
    let mut args: Vec<&str> = vec!["dedup"];
    args.extend(files.iter().map(|p| p.to_str().unwrap()));
    args.extend([
        "-o",
        out.to_str().unwrap(),
        "--tag-only",
        "--engine",
        "cpu",
        "-q",
    ]);
    ok(&neardup(&args));
    std::fs::read(out).unwrap()
}

#[test]
fn parquet_shards_through_the_loop_give_the_records_of_dedup() {
    let dir = tempfile::tempdir().unwrap();
    // Three Parquet shards, each a JSONL shard written as Parquet (tagged, so every record).
    let jsonl = shards(dir.path(), &corpus_lines(), 3, None);
    let inputs: Vec<PathBuf> = jsonl
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shard = dir.path().join(format!("part-{i}.parquet"));
            let args = [
                p.to_str().unwrap(),
                "-o",
                shard.to_str().unwrap(),
                "--tag-only",
            ];
            ok(&neardup(
                &[&["dedup"][..], &args, &["--engine", "cpu", "-q"]].concat(),
            ));
            shard
        })
        .collect();
    for (rule, flags) in [
        ("components", &["--exact"][..]),
        ("greedy", &["--cluster", "greedy"][..]),
    ] {
        let want = dedup(dir.path(), rule, &inputs, "parquet", flags);
        let want_records = parquet_records(dir.path(), &format!("{rule}-want"), &want[..1]);
        for at_once in [1, 8] {
            let tag = format!("{rule}-{at_once}");
            let work = dir.path().join(format!("work-{tag}"));
            let out = dir.path().join(format!("out-{tag}"));
            init(&work, &inputs, &out, flags);
            run_loop(&work, at_once, 5 + at_once as u64);
            let outs: Vec<PathBuf> = inputs
                .iter()
                .map(|p| out.join(p.file_name().unwrap()))
                .collect();
            assert!(
                parquet_records(dir.path(), &tag, &outs) == want_records,
                "{tag}: the records"
            );
            same_clusters_and_report(&out, &want, &tag);
        }
    }
}

#[test]
fn bad_task_lines_and_out_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = shards(dir.path(), &corpus_lines(), 2, None);
    let (work, out) = (dir.path().join("work"), dir.path().join("out"));
    init(&work, &inputs, &out, &[]);
    let w = work.to_str().unwrap();
    refused_with(
        &["stage", "run", w, "sing shard=0"],
        &["not a task", "no task kind"],
    );
    refused_with(
        &["stage", "run", w, "sign shard=9"],
        &["shard 9 does not exist"],
    );
    refused_with(&["stage", "run", w, "sign"], &["sign needs shard="]);
    // Without --out, the run has no place for its tasks' outputs.
    let plain = dir.path().join("plain");
    let mut args = vec!["stage", "init", plain.to_str().unwrap()];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    ok(&neardup(&args));
    refused_with(
        &["stage", "next", plain.to_str().unwrap()],
        &["made without --out"],
    );
    // Two shards of one name, a shard named like the run's own file, --out holding a shard.
    let other = dir.path().join("sub");
    std::fs::create_dir_all(&other).unwrap();
    let twin = other.join(inputs[0].file_name().unwrap());
    std::fs::copy(&inputs[0], &twin).unwrap();
    let o2 = dir.path().join("o2");
    let (a, b) = (inputs[0].to_str().unwrap(), twin.to_str().unwrap());
    refused_with(
        &[
            "stage",
            "init",
            dir.path().join("w2").to_str().unwrap(),
            a,
            b,
            "--out",
            o2.to_str().unwrap(),
        ],
        &["are both named", "takes the shard's file name"],
    );
    let named = dir.path().join("clusters.jsonl");
    std::fs::copy(&inputs[0], &named).unwrap();
    refused_with(
        &[
            "stage",
            "init",
            dir.path().join("w3").to_str().unwrap(),
            named.to_str().unwrap(),
            "--out",
            o2.to_str().unwrap(),
        ],
        &["are both named clusters.jsonl"],
    );
    refused_with(
        &[
            "stage",
            "init",
            dir.path().join("w4").to_str().unwrap(),
            a,
            "--out",
            dir.path().to_str().unwrap(),
        ],
        &["holds the shard", "would replace it"],
    );
    // A work directory made with another --out is another run.
    let w5 = dir.path().join("w5");
    init(&w5, &inputs, &out, &[]);
    refused_with(
        &[
            "stage",
            "init",
            w5.to_str().unwrap(),
            inputs[0].to_str().unwrap(),
            inputs[1].to_str().unwrap(),
            "--partitions",
            "3",
            "--out",
            o2.to_str().unwrap(),
        ],
        &["other inputs or parameters", "out.dir"],
    );
}
