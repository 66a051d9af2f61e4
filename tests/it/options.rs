//! Numeric options checked at the door: every value out of an option's range is refused with a
//! message that names the range and exit 1 (or clap's exit 2 for a value that does not parse),
//! before any work starts; no value panics or runs away.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// A work directory with a tiny corpus and a tiny protected file.
struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Self {
        let d = Dir {
            dir: tempfile::tempdir().unwrap(),
        };
        let docs: Vec<(String, String)> = (0..3)
            .map(|i| {
                (
                    format!("d{i}"),
                    "one two three four five six seven eight nine ten eleven twelve thirteen"
                        .to_string(),
                )
            })
            .collect();
        write_jsonl(&d.path("in.jsonl"), &docs);
        std::fs::write(
            d.path("eval.jsonl"),
            "{\"q\":\"one two three four five six seven eight nine\"}\n",
        )
        .unwrap();
        d
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }
}

/// Run `neardup args`, with a soft open-file limit of `nofile` when given, stdout
/// closed at once when `close_stdout` (a writer to `-` then ends at its first flush), killed
/// after `limit`: `None` when it ran past it.
fn run_limited(
    args: &[String],
    nofile: Option<u32>,
    close_stdout: bool,
    limit: Duration,
) -> Option<Output> {
    let bin = neardup_command().get_program().to_owned();
    let mut c = match nofile {
        Some(n) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -S -n {n} && exec \"$0\" \"$@\""))
                .arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    c.args(args)
        .env("XDG_RUNTIME_DIR", runtime_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("the neardup binary runs");
    if close_stdout {
        drop(child.stdout.take());
    }
    // stderr is read on a thread so a chatty child never blocks on a full pipe.
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).ok();
        v
    });
    let mut out_pipe = child.stdout.take();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            std::io::Read::read_to_end(p, &mut v).ok();
        }
        v
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = reader.join().unwrap();
    let stdout = out_reader.join().unwrap();
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

use crate::common::refused_with as refused;

/// Boundary values of every kind: small, powers of two and their neighbours, the ends of the
/// integer types and past them, negative, not a number, infinite, past f64.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "-0",
    "0.5",
    "1e-320",
    "NaN",
    "inf",
    "-inf",
    "1e309",
];

/// Each numeric option of several commands over [`VALUES`]: every run ends within its time
/// limit with exit 0, 1 or 2 (a result, a refusal or a usage error), never a panic (101), a
/// signal or a hang. The runs that a value lets through work on three tiny documents.
#[test]
fn no_numeric_value_panics_or_hangs() {
    let d = Dir::new();
    let (inp, out, eval) = (d.s("in.jsonl"), d.s("out.jsonl"), d.s("eval.jsonl"));
    let dedup = |extra: &[&str]| {
        let mut v = strings(&["dedup", &inp, "-o", &out, "--engine", "cpu", "-q"]);
        v.extend(strings(extra));
        v
    };
    // A case: its name, the arguments before the value (the flag last) and after it, the soft
    // open-file limit to run under, and whether stdout is closed at once.
    type Case = (Vec<String>, Vec<String>, Option<u32>, bool);
    let mut cases: Vec<(String, Case)> = Vec::new();
    let mut add = |name: &str, before: Vec<String>, after: Vec<String>, nofile, close| {
        cases.push((name.to_string(), (before, after, nofile, close)));
    };
    for flag in [
        "--k",
        "--num-perm",
        "--bands",
        "--rows",
        "--seed",
        "--threshold",
        "--max-memory",
        "--threads",
        "--gpu-timeout",
        "--gpu-batch-mib",
    ] {
        add(flag, dedup(&[flag]), vec![], None, false);
    }
    // `@WORK` becomes a work directory of each run's own.
    let wd = "@WORK".to_string();
    for flag in ["--partitions", "--sort-memory", "--task-memory"] {
        // Under a limit of 256 open files: any count of partitions let through is small.
        add(
            flag,
            dedup(&["--work-dir", &wd, flag]),
            vec![],
            Some(256),
            false,
        );
    }
    add(
        "stage init --partitions",
        strings(&["stage", "init", &wd, &inp, "--partitions"]),
        vec![],
        Some(256),
        false,
    );
    for flag in ["--n", "--protect-short", "--min-score", "--threads"] {
        add(
            flag,
            strings(&[
                "decontam",
                &inp,
                "--protected",
                &eval,
                "-o",
                &out,
                "-q",
                flag,
            ]),
            vec![],
            None,
            false,
        );
    }
    // synth to a closed stdout: a run let through ends at its first write.
    add(
        "synth N",
        strings(&["synth"]),
        strings(&["-o", "-", "--words", "3"]),
        None,
        true,
    );
    for flag in ["--words", "--template", "--seed"] {
        add(
            flag,
            strings(&["synth", "3", "-o", "-", flag]),
            vec![],
            None,
            true,
        );
    }
    for flag in [
        "--threshold",
        "--num-perm",
        "--recall",
        "--fp-weight",
        "--fn-weight",
    ] {
        let mut before = strings(&["tune", "--confirm", "estimate"]);
        if flag != "--threshold" {
            before.extend(strings(&["--threshold", "0.8"]));
        }
        before.push(flag.to_string());
        add(flag, before, vec![], None, false);
    }
    for flag in ["--bands", "--rows"] {
        add(flag, strings(&["scurve", flag]), vec![], None, false);
    }
    for flag in ["--k", "--threshold", "--show"] {
        add(
            flag,
            strings(&["inspect", "d0", "d1", &inp, flag]),
            vec![],
            None,
            false,
        );
    }
    for flag in ["--synthetic", "--synthetic-words", "--repeat"] {
        add(
            flag,
            strings(&["bench", "--engine", "cpu", "--json", flag]),
            // The others small, so that a value let through is quick.
            match flag {
                "--synthetic" => strings(&["--synthetic-words", "1", "--repeat", "1"]),
                "--synthetic-words" => strings(&["--synthetic", "2", "--repeat", "1"]),
                _ => strings(&["--synthetic", "2", "--synthetic-words", "2"]),
            },
            None,
            false,
        );
    }

    // Values let through whose runs are long by design (many synthetic documents to sign in
    // memory, or repeated): left out.
    let skip = |name: &str, value: &str| {
        matches!(name, "--synthetic" | "--repeat" | "--synthetic-words")
            && ["65535", "65536"].contains(&value)
    };
    let mut work: Vec<(Vec<String>, Option<u32>, bool)> = Vec::new();
    for (name, (before, after, nofile, close)) in cases {
        for v in VALUES.iter().filter(|v| !skip(&name, v)) {
            let mut args = before.clone();
            args.push(v.to_string());
            args.extend(after.iter().cloned());
            let own = d.s(&format!("work-{}", work.len()));
            for a in args.iter_mut().filter(|a| *a == "@WORK") {
                a.clone_from(&own);
            }
            work.push((args, nofile, close));
        }
    }
    let t0 = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((args, nofile, close)) = work.get(i) else {
                    break;
                };
                let o = run_limited(args, *nofile, *close, Duration::from_secs(20));
                let bad = match &o {
                    None => Some("ran past 20 s".to_string()),
                    Some(o) => {
                        let err = stderr(o);
                        match o.status.code() {
                            Some(0..=2) if !err.contains("panicked") => None,
                            code => Some(format!("exit {code:?} ({:?}): {err}", o.status)),
                        }
                    }
                };
                if let Some(b) = bad {
                    failures.lock().unwrap().push(format!("{args:?}: {b}"));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        work.len(),
        failures.join("\n")
    );
    eprintln!(
        "{} runs over {} values in {:.1} s",
        work.len(),
        VALUES.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// `synth --words`, `--template` and N have ceilings: the largest word counts once panicked
/// (an empty range to draw from, a capacity overflow), and N is bounded too.
#[test]
fn synth_refuses_word_counts_and_documents_past_their_ceilings() {
    let d = Dir::new();
    let out = d.s("s.jsonl");
    for flag in ["--words", "--template"] {
        for v in ["18446744073709551615", "4294967295", "1000001"] {
            refused(
                &["synth", "10", "-o", &out, flag, v],
                &[&format!("{flag} {v}"), "0..=1000000"],
            );
        }
    }
    refused(
        &["synth", "18446744073709551615", "-o", &out],
        &["0..=10000000000"],
    );
    assert!(!Path::new(&out).exists());
    // The ceilings themselves are accepted: a document of a million words, after a template
    // of a million.
    let o = run_limited(
        &strings(&[
            "synth",
            "1",
            "-o",
            &out,
            "--words",
            "1000000",
            "--template",
            "1000000",
        ]),
        None,
        false,
        Duration::from_secs(60),
    )
    .expect("finishes");
    ok(&o);
    let words = read_jsonl(Path::new(&out))[0]["text"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .count();
    assert!((1_500_000..=2_500_001).contains(&words), "{words}");
}

/// `--threads` is at most 8 per core this run may use, and 16 anywhere; a larger value once
/// started that many threads. The message names the limit and the cores. Commands whose
/// threads flag is global to their subcommands refuse it too.
#[test]
fn threads_are_limited_by_the_cores() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = (8 * cores).max(16);
    let d = Dir::new();
    let (inp, out) = (d.s("in.jsonl"), d.s("out.jsonl"));
    let over = (limit + 1).to_string();
    let needles = [
        format!("--threads {over}"),
        format!("limit of {limit} threads"),
        format!("{cores} cores"),
    ];
    let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
    for args in [
        &[
            "dedup",
            &inp,
            "-o",
            &out,
            "--engine",
            "cpu",
            "--threads",
            &over,
        ][..],
        &[
            "decontam",
            &inp,
            "--protected",
            &inp,
            "-o",
            &out,
            "--threads",
            &over,
        ],
        &[
            "signatures",
            &inp,
            "-o",
            &out,
            "--engine",
            "cpu",
            "--threads",
            &over,
        ],
        &["stage", "init", &d.s("w"), &inp, "--threads", &over],
        &["index", "info", &d.s("ix"), "--threads", &over],
        &["dedup", &inp, "-o", &out, "--threads", "100000"],
    ] {
        if args.contains(&"100000") {
            refused(args, &["--threads 100000", needles[1]]);
        } else {
            refused(args, &needles);
        }
    }
    assert!(!Path::new(&out).exists());
    assert!(!d.path("w").exists());
    // The limit itself, and 0 (one per core), are accepted.
    let lim = limit.to_string();
    for t in [lim.as_str(), "0"] {
        ok(&neardup(&[
            "dedup",
            &inp,
            "-o",
            &out,
            "--engine",
            "cpu",
            "--threads",
            t,
        ]));
    }
}

/// Floats must be finite numbers in their ranges: `tune`'s weights once took NaN.
#[test]
fn floats_must_be_finite_and_in_range() {
    let tune = |extra: &[&str], needles: &[&str]| {
        let mut a = vec!["tune", "--threshold", "0.8", "--confirm", "estimate"];
        a.extend_from_slice(extra);
        refused(&a, needles);
    };
    for flag in ["--fp-weight", "--fn-weight"] {
        for v in ["NaN", "inf", "1e309", "-0.5"] {
            tune(
                &[&format!("{flag}={v}")],
                &["weights must be finite and at least 0"],
            );
        }
    }
    tune(&["--fp-weight", "0", "--fn-weight", "0"], &["not both 0"]);
    for v in ["NaN", "inf", "0", "1", "1.5"] {
        refused(&["tune", "--threshold", v], &["outside (0, 1)"]);
    }
    for v in ["NaN", "0", "1.01"] {
        refused(
            &["tune", "--threshold", "0.8", "--recall", v],
            &["--recall", "outside (0, 1]"],
        );
    }
    let d = Dir::new();
    let (inp, out, eval) = (d.s("in.jsonl"), d.s("out.jsonl"), d.s("eval.jsonl"));
    for v in ["NaN", "inf", "1e309", "0", "-1"] {
        refused(
            &[
                "dedup",
                &inp,
                "-o",
                &out,
                "--engine",
                "cpu",
                &format!("--threshold={v}"),
            ],
            &["outside (0, 1]"],
        );
        refused(
            &[
                "decontam",
                &inp,
                "--protected",
                &eval,
                "-o",
                &out,
                &format!("--min-score={v}"),
            ],
            &["--min-score", "outside (0, 1]"],
        );
    }
    // --gpu-timeout is checked whichever engine runs; past 1e6 seconds it once panicked when
    // the GPU engine made a Duration of it.
    for v in ["NaN", "inf", "1e300", "0", "-1", "1000001"] {
        refused(
            &[
                "dedup",
                &inp,
                "-o",
                &out,
                "--engine",
                "cpu",
                &format!("--gpu-timeout={v}"),
            ],
            &[
                "--gpu-timeout",
                "positive number of seconds, at most 1000000",
            ],
        );
    }
    refused(
        &[
            "stage",
            "report",
            &d.s("w"),
            "--report",
            &d.s("r.json"),
            "--seconds",
            "NaN",
        ],
        &["--seconds NaN", "finite"],
    );
    assert!(!Path::new(&out).exists());
}

/// Sizes are at least 1 (and `--max-memory` at most 2^40 MiB, where its bytes would wrap);
/// widths at most 2^20, where `--bands x --rows` once overflowed and `tune --num-perm` ran
/// for ever.
#[test]
fn sizes_are_at_least_one_and_widths_bounded() {
    let d = Dir::new();
    let (inp, out) = (d.s("in.jsonl"), d.s("out.jsonl"));
    let dedup = |extra: &[&str], needles: &[&str]| {
        let mut a = vec!["dedup", inp.as_str(), "-o", out.as_str(), "--engine", "cpu"];
        a.extend_from_slice(extra);
        refused(&a, needles);
    };
    dedup(
        &["--max-memory", "0"],
        &["--max-memory 0", "1..=1099511627776"],
    );
    dedup(
        &["--max-memory", "18446744073709551615"],
        &["1..=1099511627776"],
    );
    dedup(
        &["--gpu-batch-mib", "0"],
        &["--gpu-batch-mib 0", "1..=4096"],
    );
    dedup(
        &["--bands", "9223372036854775808", "--rows", "2"],
        &["--bands 9223372036854775808", "1048576"],
    );
    dedup(&["--rows", "18446744073709551615"], &["--rows", "1048576"]);
    dedup(&["--k", "1048577"], &["--k 1048577", "1048576"]);
    refused(
        &[
            "tune",
            "--threshold",
            "0.8",
            "--num-perm",
            "18446744073709551615",
        ],
        &["--num-perm", "1..=1048576"],
    );
    refused(
        &["scurve", "--bands", "18446744073709551615", "--rows", "1"],
        &["--bands", "1048576"],
    );
    refused(
        &[
            "decontam",
            &inp,
            "--protected",
            &inp,
            "-o",
            &out,
            "--n",
            "1048577",
        ],
        &["--n 1048577", "1048576"],
    );
    refused(
        &["bench", "--synthetic", "0", "--engine", "cpu"],
        &["--synthetic 0", "1..=1000000000"],
    );
    refused(
        &[
            "bench",
            "--synthetic",
            "2",
            "--repeat",
            "0",
            "--engine",
            "cpu",
        ],
        &["--repeat 0", "1..=1000"],
    );
    assert!(!Path::new(&out).exists());
    // The sort budget was already a usage error at 0.
    let o = neardup(&[
        "dedup",
        &inp,
        "-o",
        &out,
        "--work-dir",
        &d.s("w"),
        "--sort-memory",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// More partitions than the open-file limit lets `bands` write at once (one file each, and a
/// margin of 64) are refused before any work, with a message that names the limit and says
/// that `ulimit -n` raises it; as many as it allows pass. Both `dedup --work-dir` and
/// `stage init`; without --work-dir the default count is not checked.
#[test]
fn partitions_past_the_open_file_limit_are_refused_at_the_door() {
    let d = Dir::new();
    let (inp, out) = (d.s("in.jsonl"), d.s("out.jsonl"));
    let wd = d.s("work");
    let run = |args: &[&str]| {
        run_limited(&strings(args), Some(256), false, Duration::from_secs(60)).expect("finishes")
    };
    let dedup = |partitions: &'static str| {
        let w = ["--work-dir", wd.as_str(), "--partitions", partitions];
        let mut a = vec!["dedup", inp.as_str(), "-o", out.as_str(), "--engine", "cpu"];
        a.extend(w);
        a
    };
    for args in [
        &dedup("1000000")[..],
        &dedup("193"),
        &["stage", "init", &wd, &inp, "--partitions", "193"],
    ] {
        let o = run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        for needle in [
            "--partitions",
            "limit of 256 open files",
            "ulimit -n",
            "at most 192 partitions",
        ] {
            assert!(err.contains(needle), "{args:?} lacks {needle:?}: {err}");
        }
        // Where the hard limit allows, the message gives the command that raises the soft one.
        let hard = neardup::sys::open_file_limits().and_then(|(_, h)| h);
        if args.contains(&"193") && hard.is_none_or(|h| h >= 257) {
            assert!(err.contains("raise it with `ulimit -n 257`"), "{err}");
        }
        assert!(
            !Path::new(&wd).exists(),
            "{args:?}: the work directory was made"
        );
        assert!(!Path::new(&out).exists());
    }
    // The most the limit allows runs, and the outputs are those of a run in memory.
    let o = run(&[
        "dedup",
        &inp,
        "-o",
        &out,
        "--engine",
        "cpu",
        "--work-dir",
        &wd,
        "--partitions",
        "192",
    ]);
    ok(&o);
    let mem = d.s("mem.jsonl");
    ok(&neardup(&["dedup", &inp, "-o", &mem, "--engine", "cpu"]));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&mem).unwrap());
    // In memory, --partitions is not read: a limit below the default's needs is no matter.
    let o = run_limited(
        &strings(&["dedup", &inp, "-o", &mem, "--engine", "cpu"]),
        Some(70),
        false,
        Duration::from_secs(60),
    )
    .expect("finishes");
    ok(&o);
}
