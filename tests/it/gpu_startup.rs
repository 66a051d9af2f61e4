//! The GPU engine's start-up and `--engine auto`: the pipeline cache kept, read back, and
//! ignored when damaged, with the signatures unchanged every time; buffers sized for a small
//! input that still sign a larger one; and `auto`, which says what it chose and why, measures
//! once and keeps the measurement.
//!
//! Like the conformance suite, the engine cases need an adapter and fail without one under
//! `NEARDUP_REQUIRE_GPU=1`.

use neardup::engine::gpu::{cache, CacheDir, CacheUse, GpuOptions};
use neardup::engine::{CpuEngine, Engine};
use neardup::MinHashParams;

use crate::common::{gpu_or_skip, neardup, neardup_command, ok, stderr};

fn texts(n: usize, words: usize) -> Vec<String> {
    neardup::synth::SyntheticDocs::new(n, words, 5)
        .map(|(_, t)| t)
        .collect()
}

fn cpu_rows(p: MinHashParams, texts: &[&str]) -> Vec<u32> {
    let mut out = vec![0u32; texts.len() * p.num_perm];
    CpuEngine::new(p, 2)
        .unwrap()
        .sign_texts(texts, &mut out)
        .unwrap();
    out
}

fn gpu_rows(g: &mut dyn Engine, texts: &[&str]) -> Vec<u32> {
    let mut out = vec![0u32; texts.len() * g.params().num_perm];
    g.sign_texts(texts, &mut out).unwrap();
    out
}

/// The files of `dir` whose names start with `prefix`.
fn kept(dir: &std::path::Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn the_pipeline_cache_is_kept_read_back_and_ignored_when_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let p = MinHashParams::new(5, 64, 3).unwrap();
    let docs = texts(300, 40);
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let want = cpu_rows(p, &refs);
    let opts = GpuOptions {
        cache: CacheDir::At(dir.path().to_path_buf()),
        ..GpuOptions::default()
    };
    let Some(mut first) = gpu_or_skip(p, &opts) else {
        return;
    };
    let s = *first.startup();
    for (part, v) in s.steps() {
        assert!(v.is_finite() && v >= 0.0, "{part}: {v}");
    }
    assert!(s.total() > 0.0, "{s}");
    let parts: Vec<&str> = s.steps().iter().map(|p| p.0).collect();
    assert_eq!(
        parts,
        [
            "instance",
            "adapter",
            "device",
            "shaders",
            "pipelines",
            "cache",
            "buffers"
        ]
    );
    assert_eq!(gpu_rows(&mut first, &refs), want, "cold");
    if first.adapter().backend != "Vulkan" {
        // Only Vulkan has an application pipeline cache in wgpu.
        assert_eq!(s.cache_use, CacheUse::None, "{}", first.adapter().backend);
        assert!(kept(dir.path(), "pipelines-").is_empty());
        return;
    }
    assert_eq!(s.cache_use, CacheUse::Cold, "{s}");
    drop(first);
    let files = kept(dir.path(), "pipelines-");
    assert_eq!(files.len(), 1, "{files:?}");
    let file = &files[0];
    let sealed = std::fs::read(file).unwrap();
    assert!(cache::unseal(&sealed).is_some(), "a whole, sealed file");

    let mut warm = gpu_or_skip(p, &opts).unwrap();
    assert_eq!(warm.startup().cache_use, CacheUse::Warm);
    assert_eq!(gpu_rows(&mut warm, &refs), want, "warm");
    drop(warm);

    // A damaged file: never handed to the driver, written anew.
    let mut bad = sealed.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x55;
    std::fs::write(file, &bad).unwrap();
    let mut damaged = gpu_or_skip(p, &opts).unwrap();
    assert_eq!(damaged.startup().cache_use, CacheUse::Damaged);
    assert_eq!(gpu_rows(&mut damaged, &refs), want, "damaged");
    drop(damaged);
    assert!(
        cache::unseal(&std::fs::read(file).unwrap()).is_some(),
        "rewritten"
    );

    // Sealed bytes the driver does not know (another driver's, say): wgpu drops them.
    std::fs::write(file, cache::seal(b"not a pipeline cache of any driver")).unwrap();
    let mut foreign = gpu_or_skip(p, &opts).unwrap();
    assert_eq!(gpu_rows(&mut foreign, &refs), want, "foreign");
    drop(foreign);

    // Other kernels are other pipelines: a file of their own.
    let fused = GpuOptions {
        kernels: neardup::engine::gpu::Kernels::Fused,
        ..opts.clone()
    };
    let mut f = gpu_or_skip(p, &fused).unwrap();
    assert_eq!(f.startup().cache_use, CacheUse::Cold);
    assert_eq!(gpu_rows(&mut f, &refs), want, "fused");
    assert_eq!(kept(dir.path(), "pipelines-").len(), 2);

    // No cache: nothing read.
    let none = GpuOptions {
        cache: CacheDir::Off,
        ..opts
    };
    let g = gpu_or_skip(p, &none).unwrap();
    assert_eq!(g.startup().cache_use, CacheUse::None);
}

/// The sizes a sub-batch gets for an input, at every boundary: never past the cap, never below
/// 1 MiB nor past 8 MiB, a power of two covering a twelfth of the input (on a software
/// adapter, whose buffers are the process's memory: a 24th, at most 4 MiB).
#[test]
fn sub_batches_are_sized_by_the_input() {
    use neardup::engine::gpu::batch_bytes_for;
    let mib = 1usize << 20;
    let cap = 32 * mib;
    assert_eq!(batch_bytes_for(cap, None, false), cap);
    assert_eq!(batch_bytes_for(cap, None, true), cap);
    // (input, hardware, software)
    for (input, want, soft) in [
        (0u64, mib, mib),
        (1, mib, mib),
        (12 * mib as u64, mib, mib),
        (12 * mib as u64 + 12, 2 * mib, mib),
        (24 * mib as u64, 2 * mib, mib),
        (24 * mib as u64 + 24, 4 * mib, 2 * mib),
        (40_000_000, 4 * mib, 2 * mib),
        (12 * 4 * mib as u64, 4 * mib, 2 * mib),
        (12 * 4 * mib as u64 + 12, 8 * mib, 2 * mib),
        (24 * 2 * mib as u64 + 24, 8 * mib, 4 * mib),
        (12 * 8 * mib as u64, 8 * mib, 4 * mib),
        (12 * 8 * mib as u64 + 12, 8 * mib, 4 * mib),
        (u64::MAX, 8 * mib, 4 * mib),
    ] {
        assert_eq!(
            batch_bytes_for(cap, Some(input), false),
            want,
            "input {input}"
        );
        assert_eq!(
            batch_bytes_for(cap, Some(input), true),
            soft,
            "software, input {input}"
        );
    }
    assert_eq!(
        batch_bytes_for(mib / 2, Some(1 << 40), false),
        mib / 2,
        "the cap wins"
    );
    assert_eq!(neardup::engine::gpu::INPUT_SIZED_MAX, 8 * mib);
    assert_eq!(neardup::engine::gpu::SOFTWARE_SIZED_MAX, 4 * mib);
}

/// An engine sized for a small input signs a much larger one exactly, in more sub-batches.
#[test]
fn an_engine_sized_for_a_small_input_signs_a_larger_one() {
    let p = MinHashParams::new(5, 128, 9).unwrap();
    let opts = GpuOptions {
        input_bytes: Some(1),
        cache: CacheDir::Off,
        ..GpuOptions::default()
    };
    let Some(mut g) = gpu_or_skip(p, &opts) else {
        return;
    };
    assert_eq!(g.limits().max_bytes, 1 << 20);
    assert!(g.limits().max_docs <= 1 << 12, "{:?}", g.limits());
    // 6,000 short documents: more than a sub-batch's documents, and about 3 MB of text.
    let docs = texts(6000, 80);
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    assert!(refs.iter().map(|t| t.len()).sum::<usize>() > 2 << 20);
    assert_eq!(gpu_rows(&mut g, &refs), cpu_rows(p, &refs));
    assert!(g.sub_batches() >= 3, "{}", g.sub_batches());
}

/// The summary line of a command: its last stderr line.
fn summary(o: &std::process::Output) -> String {
    stderr(o)
        .lines()
        .rfind(|l| l.starts_with("neardup "))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn auto_says_what_it_chose_and_why_in_the_summary_and_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let input = crate::common::fixture("example.jsonl");
    let input = input.to_str().unwrap();
    let o = neardup(&[
        "dedup",
        input,
        "-o",
        &d("out.jsonl"),
        "--report",
        &d("report.json"),
    ]);
    ok(&o);
    let line = summary(&o);
    assert!(line.contains("; auto chose cpu: "), "{line}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d("report.json")).unwrap()).unwrap();
    let why = report["engine"]["auto"].as_str().unwrap();
    assert!(why.starts_with("auto chose cpu: "), "{why}");
    assert!(line.ends_with(&format!("; {why}]")), "{line}\n{why}");
    assert_eq!(report["engine"]["kind"], "cpu");
    // An engine asked for by name has no such reason.
    let o = neardup(&[
        "dedup",
        input,
        "-o",
        &d("cpu.jsonl"),
        "--engine",
        "cpu",
        "--report",
        &d("cpu.json"),
    ]);
    ok(&o);
    assert!(!summary(&o).contains("auto chose"), "{}", summary(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d("cpu.json")).unwrap()).unwrap();
    assert!(report["engine"].get("auto").is_none(), "{report}");
    assert_eq!(
        std::fs::read(d("out.jsonl")).unwrap(),
        std::fs::read(d("cpu.jsonl")).unwrap()
    );
}

/// Where a GPU takes part (a software one here, by `NEARDUP_AUTO_SOFTWARE=1`), `auto` signs a
/// sample with both engines, keeps the measurement, reads it back on the next run, measures
/// again when the kept file is damaged, and its signatures are the CPU engine's either way.
#[test]
fn auto_measures_once_keeps_it_and_measures_again_when_it_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let cache = dir.path().join("cache");
    // 5 MB: more than one CPU thread signs in a GPU's start-up.
    ok(&neardup(&[
        "synth",
        "2500",
        "--words",
        "300",
        "-o",
        &d("in.jsonl"),
    ]));
    let run = |out: &str| {
        let o = neardup_command()
            .env("NEARDUP_CACHE_DIR", &cache)
            .env("NEARDUP_AUTO_SOFTWARE", "1")
            .args([
                "signatures",
                &d("in.jsonl"),
                "-o",
                &d(out),
                "--format",
                "tsv",
                "--threads",
                "1",
            ])
            .output()
            .unwrap();
        ok(&o);
        summary(&o)
    };
    let first = run("a.tsv");
    if first.contains("wgpu found no hardware GPU adapter") {
        // No adapter at all, not even a software one.
        assert!(
            std::env::var("NEARDUP_REQUIRE_GPU").map_or(true, |v| v != "1"),
            "NEARDUP_REQUIRE_GPU=1 but auto found no adapter: {first}"
        );
        return;
    }
    assert!(first.contains("; auto chose "), "{first}");
    assert!(first.contains("(measured now)"), "{first}");
    let files = kept(&cache, "auto-");
    assert_eq!(files.len(), 1, "{files:?}");
    let second = run("b.tsv");
    assert!(second.contains("(measured before, kept in "), "{second}");
    std::fs::write(&files[0], b"{\"key\": 1").unwrap();
    let third = run("c.tsv");
    assert!(third.contains("(measured now)"), "{third}");
    let o = neardup(&[
        "signatures",
        &d("in.jsonl"),
        "-o",
        &d("cpu.tsv"),
        "--format",
        "tsv",
        "--engine",
        "cpu",
    ]);
    ok(&o);
    let want = std::fs::read(d("cpu.tsv")).unwrap();
    for f in ["a.tsv", "b.tsv", "c.tsv"] {
        assert!(std::fs::read(d(f)).unwrap() == want, "{f}");
    }
}

/// `NEARDUP_DEBUG_STAGES` shows the start-up step by step.
#[test]
fn the_debug_line_shows_the_start_up_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.tsv");
    let o = neardup_command()
        .env("NEARDUP_DEBUG_STAGES", "1")
        .args([
            "signatures",
            crate::common::fixture("example.jsonl").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--format",
            "tsv",
            "--engine",
            "gpu",
        ])
        .output()
        .unwrap();
    if !o.status.success() && std::env::var("NEARDUP_REQUIRE_GPU").map_or(true, |v| v != "1") {
        eprintln!("\n*** GPU TEST SKIPPED: {}", stderr(&o));
        return;
    }
    ok(&o);
    let e = stderr(&o);
    let line = e
        .lines()
        .find(|l| l.contains("start-up"))
        .unwrap_or_else(|| panic!("{e}"));
    for (part, _) in neardup::engine::gpu::StartupSeconds::default().steps() {
        assert!(line.contains(part), "{part}: {line}");
    }
}
