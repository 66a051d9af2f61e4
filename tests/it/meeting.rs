//! Where runs meet: two runs making one work directory at once, a shard edited between stages,
//! stage jobs started in other directories, named pipes and process substitutions as inputs,
//! and a FIFO where a lock file goes. Each is a correct result or an error naming the cause,
//! never a hang or a result computed from something else.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Wait for `child` at most `limit`; kill it and fail past that (a hang is the defect).
fn wait_within(mut child: std::process::Child, limit: Duration, what: &str) -> Output {
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("{what} still ran after {limit:?}: {}", stderr(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start both commands before waiting for either (so they meet), and check that exactly one
/// succeeded: the outputs, and which one.
fn one_of_two(args: [Vec<&str>; 2], trial: usize) -> (Vec<Output>, usize) {
    let kids: Vec<_> = args.iter().map(|a| spawn(a)).collect();
    let outs: Vec<Output> = kids
        .into_iter()
        .map(|k| wait_within(k, Duration::from_secs(60), args[0][0]))
        .collect();
    let good: Vec<usize> = (0..2).filter(|&i| outs[i].status.success()).collect();
    assert_eq!(
        good.len(),
        1,
        "trial {trial}: exactly one may succeed: {} / {}",
        stderr(&outs[0]),
        stderr(&outs[1])
    );
    (outs, good[0])
}

fn spawn(args: &[&str]) -> std::process::Child {
    neardup_command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_inits_of_one_new_work_directory_leave_one_manifest_and_refuse_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.jsonl");
    synth(&shard, 50, 20);
    let mut wins = [0usize; 2];
    for trial in 0..24 {
        let w = dir.path().join(format!("w{trial}"));
        let seeds = ["1", "2"];
        let (outs, won) = one_of_two(
            [0, 1].map(|i| vec!["stage", "init", s(&w), s(&shard), "--seed", seeds[i]]),
            trial,
        );
        let lost = 1 - won;
        wins[won] += 1;
        assert_eq!(outs[lost].status.code(), Some(1));
        assert!(
            stderr(&outs[lost]).contains("made for other inputs or parameters"),
            "trial {trial}: {}",
            stderr(&outs[lost])
        );
        // The manifest in place is the winner's.
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(w.join("manifest.json")).unwrap()).unwrap();
        let seed = m["config"]["params"]["seed"].as_u64().unwrap();
        assert_eq!(seed.to_string(), seeds[won], "trial {trial}");
        let left: Vec<String> = dir_entries(&w)
            .into_iter()
            .filter(|e| e.ends_with(".partial"))
            .collect();
        assert!(left.is_empty(), "trial {trial}: {left:?}");
    }
    assert_eq!(wins.iter().sum::<usize>(), 24);
}

#[test]
fn two_dedup_work_dir_runs_with_other_parameters_never_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.jsonl");
    synth(&shard, 60, 20);
    for trial in 0..8 {
        let w = dir.path().join(format!("w{trial}"));
        let outs: Vec<PathBuf> = (0..2)
            .map(|i| dir.path().join(format!("out-{trial}-{i}.jsonl")))
            .collect();
        let kids: Vec<_> = ["0.8", "0.5"]
            .iter()
            .zip(&outs)
            .map(|(t, o)| {
                spawn(&[
                    "dedup",
                    s(&shard),
                    "-o",
                    s(o),
                    "--threshold",
                    t,
                    "--work-dir",
                    s(&w),
                    "--engine",
                    "cpu",
                ])
            })
            .collect();
        let res: Vec<Output> = kids
            .into_iter()
            .map(|k| wait_within(k, Duration::from_secs(120), "dedup --work-dir"))
            .collect();
        let good = res.iter().filter(|o| o.status.success()).count();
        assert!(
            good <= 1,
            "trial {trial}: both ran, one with the other's parameters: {} / {}",
            stderr(&res[0]),
            stderr(&res[1])
        );
        for (o, path) in res.iter().zip(&outs) {
            if !o.status.success() {
                assert!(
                    !path.exists(),
                    "trial {trial}: a refused run wrote its output"
                );
            }
        }
    }
}

/// Shard 0 of a run whose shards are past the fingerprint's reach (its first and last MiB):
/// filler documents around a planted pair of near duplicates in the middle of the file. The
/// planted pair's first line's index.
fn big_shards(dir: &Path) -> (Vec<PathBuf>, usize) {
    let mut lines: Vec<String> = neardup::synth::SyntheticDocs::new(2000, 300, 4)
        .map(|(id, text)| serde_json::json!({ "id": format!("f{id}"), "text": text }).to_string())
        .collect();
    let twin: String = (0..200)
        .map(|i| format!("planted{} ", i * 7 % 199))
        .collect::<String>();
    let mid = lines.len() / 2;
    lines.insert(
        mid,
        serde_json::json!({ "id": "p-a", "text": format!("{twin}end") }).to_string(),
    );
    lines.insert(
        mid + 1,
        serde_json::json!({ "id": "p-b", "text": format!("{twin}fin") }).to_string(),
    );
    let s0 = dir.join("s0.jsonl");
    std::fs::write(&s0, lines.join("\n") + "\n").unwrap();
    assert!(std::fs::metadata(&s0).unwrap().len() > 3 << 20);
    let s1 = dir.join("s1.jsonl");
    synth(&s1, 40, 30);
    (vec![s0, s1], mid)
}

#[test]
fn a_shard_edited_mid_file_after_sign_stops_confirm_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, mid) = big_shards(dir.path());
    let w = dir.path().join("w");
    let stage = |args: &[&str]| {
        let mut v = vec!["stage"];
        v.extend_from_slice(args);
        let o = neardup(&v);
        ok(&o);
        o
    };
    // Two runs: one whose confirm job reads the shards, one whose texts are shipped first.
    let shipped = dir.path().join("w-shipped");
    for w in [&w, &shipped] {
        stage(&[
            "init",
            s(w),
            s(&shards[0]),
            s(&shards[1]),
            "--partitions",
            "1",
        ]);
        for i in ["0", "1"] {
            stage(&["sign", s(w), "--shard", i, "--engine", "cpu"]);
        }
        stage(&["rank", s(w)]);
        for i in ["0", "1"] {
            stage(&["bands", s(w), "--shard", i]);
        }
    }
    // The planted document's text, edited in place: same length, same size, first and last
    // MiB untouched, so the fingerprint still matches.
    let body = std::fs::read_to_string(&shards[0]).unwrap();
    let mut lines: Vec<String> = body.lines().map(str::to_string).collect();
    assert!(lines[mid + 1].contains("\"p-b\""));
    lines[mid + 1] = lines[mid + 1].replace("planted", "plonted");
    let edited = lines.join("\n") + "\n";
    assert_eq!(edited.len(), body.len());
    std::fs::write(&shards[0], &edited).unwrap();
    for task in [
        "confirm-needs partition=0",
        "confirm-texts shard=0",
        "confirm-texts shard=1",
    ] {
        stage(&["run", s(&shipped), task]);
    }
    for o in [
        neardup(&["stage", "confirm", s(&w), "--partition", "0"]),
        neardup(&["stage", "run", s(&shipped), "confirm partitions=0"]),
    ] {
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(s(&shards[0])) && err.contains("shard 0 changed since `sign`"),
            "{err}"
        );
        assert!(err.contains(&format!("document {}", mid + 2)), "{err}");
    }
    for w in [&w, &shipped] {
        assert!(!w.join("pairs").join("0000.parquet").exists());
    }
}

#[test]
fn stage_jobs_started_elsewhere_read_the_shards_init_named() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("here");
    let data = here.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let lines = lines_of(&fixture("example.jsonl"));
    let half = lines.len() / 2;
    for (i, part) in [&lines[..half], &lines[half..]].iter().enumerate() {
        std::fs::write(data.join(format!("s{i}.jsonl")), part.join("\n") + "\n").unwrap();
    }
    // A decoy at the same relative path from the jobs' directory: read it and the result
    // differs (or the shard is called changed).
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("data")).unwrap();
    for i in 0..2 {
        std::fs::write(
            elsewhere.join(format!("data/s{i}.jsonl")),
            "{\"id\":\"decoy\",\"text\":\"decoy\"}\n",
        )
        .unwrap();
    }
    let w = dir.path().join("w");
    let run_in = |cwd: &Path, args: &[&str]| {
        let o = neardup_command()
            .current_dir(cwd)
            .args(args)
            .output()
            .unwrap();
        ok(&o);
    };
    run_in(
        &here,
        &[
            "stage",
            "init",
            s(&w),
            "data/s0.jsonl",
            "data/s1.jsonl",
            "--partitions",
            "1",
        ],
    );
    for i in ["0", "1"] {
        run_in(
            &elsewhere,
            &["stage", "sign", s(&w), "--shard", i, "--engine", "cpu"],
        );
    }
    run_in(&elsewhere, &["stage", "rank", s(&w)]);
    for i in ["0", "1"] {
        run_in(&elsewhere, &["stage", "bands", s(&w), "--shard", i]);
    }
    run_in(&elsewhere, &["stage", "confirm", s(&w), "--partition", "0"]);
    run_in(&elsewhere, &["stage", "cluster", s(&w)]);
    let mut joined = Vec::new();
    for i in 0..2 {
        let out = dir.path().join(format!("o{i}.jsonl"));
        run_in(
            &elsewhere,
            &[
                "stage",
                "apply",
                s(&w),
                "--shard",
                &i.to_string(),
                "-o",
                s(&out),
            ],
        );
        joined.extend(std::fs::read(&out).unwrap());
    }
    let mem = dir.path().join("mem.jsonl");
    let o = neardup_command()
        .current_dir(&here)
        .args([
            "dedup",
            "data/s0.jsonl",
            "data/s1.jsonl",
            "-o",
            s(&mem),
            "--engine",
            "cpu",
        ])
        .output()
        .unwrap();
    ok(&o);
    assert_eq!(joined, std::fs::read(&mem).unwrap());
    // The manifest keeps the paths as given, and where they are read from.
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["shards"][0]["path"], "data/s0.jsonl");
    assert_eq!(
        Path::new(m["base"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        here.canonicalize().unwrap()
    );
}

/// `bash -c SCRIPT` with the binary as `$N`, within a time limit.
fn bash(script: &str, limit: Duration) -> Output {
    let bin = std::env::var_os("NEARDUP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_neardup")));
    let child = Command::new("bash")
        .args(["-c", script])
        .env("N", bin)
        .env("XDG_RUNTIME_DIR", runtime_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_within(child, limit, script)
}

#[test]
fn named_pipes_and_process_substitutions_read_like_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = s(dir.path());
    let example = fixture("example.jsonl");
    let ex = s(&example);
    let protected = fixture("protected.jsonl");
    let pr = s(&protected);
    let limit = Duration::from_secs(60);
    // Each command on the file, then on `<(cat FILE)` and on a FIFO a writer fills: the same
    // bytes out.
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "dedup",
            format!("dedup {{IN}} -o {d}/{{T}}.out --engine cpu"),
            "out",
        ),
        (
            "decontam",
            format!("decontam {{IN}} --protected {pr} -o {d}/{{T}}.out"),
            "out",
        ),
        (
            "signatures",
            format!("signatures {{IN}} -o {d}/{{T}}.out --engine cpu"),
            "out",
        ),
        (
            "index",
            format!("index build {{IN}} -o {d}/{{T}}.out"),
            "dir",
        ),
    ];
    for (name, cmd, kind) in &cases {
        let file_cmd = cmd
            .replace("{IN}", ex)
            .replace("{T}", &format!("{name}-file"));
        let o = bash(&format!("\"$N\" {file_cmd}"), limit);
        ok(&o);
        let sub_cmd = cmd
            .replace("{IN}", &format!("<(cat {ex})"))
            .replace("{T}", &format!("{name}-sub"));
        let o = bash(&format!("\"$N\" {sub_cmd}"), limit);
        ok(&o);
        let fifo = dir.path().join(format!("{name}.fifo"));
        let fifo_cmd = cmd
            .replace("{IN}", s(&fifo))
            .replace("{T}", &format!("{name}-fifo"));
        let o = bash(
            &format!(
                "mkfifo {f} && (cat {ex} > {f} 2>/dev/null &) && \"$N\" {fifo_cmd}",
                f = s(&fifo)
            ),
            limit,
        );
        ok(&o);
        let at = |t: &str| dir.path().join(format!("{name}-{t}.out"));
        if *kind == "out" {
            let want = std::fs::read(at("file")).unwrap();
            assert_eq!(std::fs::read(at("sub")).unwrap(), want, "{name}");
            assert_eq!(std::fs::read(at("fifo")).unwrap(), want, "{name}");
        } else {
            let docs = |t: &str| -> serde_json::Value {
                let m: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(at(t).join("index.json")).unwrap())
                        .unwrap();
                m["documents"].clone()
            };
            assert_eq!(docs("sub"), docs("file"));
            assert_eq!(docs("fifo"), docs("file"));
        }
    }
    // A shard is read by several jobs: a pipe is refused before the work directory is made.
    let o = bash(&format!("\"$N\" stage init {d}/w <(cat {ex})"), limit);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    assert!(!dir.path().join("w").join("manifest.json").exists());
}

#[test]
fn a_fifo_where_a_lock_goes_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.jsonl");
    synth(&shard, 20, 20);
    let w = dir.path().join("w");
    ok(&neardup(&["stage", "init", s(&w), s(&shard)]));
    let locks = w.join("lock");
    std::fs::create_dir_all(&locks).unwrap();
    let o = bash(
        &format!(
            "mkfifo {l}/sign-00000 && \"$N\" stage sign {w} --shard 0 --engine cpu",
            l = s(&locks),
            w = s(&w)
        ),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
}

#[test]
fn two_index_builds_into_one_new_directory_leave_one_index() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    synth(&a, 120, 30);
    write_jsonl(
        &b,
        &(0..40)
            .map(|i| {
                (
                    format!("b{i}"),
                    format!("other words for document {i} of b"),
                )
            })
            .collect::<Vec<_>>(),
    );
    for trial in 0..16 {
        let ix = dir.path().join(format!("ix{trial}"));
        let (outs, won) = one_of_two(
            [&a, &b].map(|p| vec!["index", "build", s(p), "-o", s(&ix)]),
            trial,
        );
        let lost = &outs[1 - won];
        assert_eq!(lost.status.code(), Some(1), "{}", stderr(lost));
        assert!(
            stderr(lost).contains(s(&ix))
                && (stderr(lost).contains("already an index")
                    || stderr(lost).contains("not empty")),
            "trial {trial}: {}",
            stderr(lost)
        );
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ix.join("index.json")).unwrap()).unwrap();
        assert_eq!(m["segments"].as_array().unwrap().len(), 1, "trial {trial}");
        assert_eq!(m["documents"], [120, 40][won], "trial {trial}");
        let partial: Vec<String> = dir_entries(&ix)
            .into_iter()
            .filter(|e| e.ends_with(".partial"))
            .collect();
        assert!(partial.is_empty(), "trial {trial}: {partial:?}");
    }
}
