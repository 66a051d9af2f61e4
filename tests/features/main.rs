//! What each build's feature set does: the JSONL path gives the same bytes in every build, and
//! what a build leaves out (`gpu`, `parquet`) is an error naming the feature, with no output
//! written. Runs in the default build and in `--no-default-features`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn neardup(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .expect("the neardup binary runs")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// Refused, naming `feature`, with nothing at `output`.
fn refused_for(feature: &str, args: &[&str], output: &Path) {
    let o = neardup(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.contains(&format!("`{feature}` feature")),
        "{args:?} does not name the feature: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!output.exists(), "{args:?} wrote {}", output.display());
}

/// FNV-1a 64 of a file's bytes: enough to pin an output without a hashing dependency.
fn digest(path: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in &std::fs::read(path).unwrap() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[test]
fn jsonl_dedup_gives_the_same_bytes_in_every_build() {
    let dir = tempfile::tempdir().unwrap();
    let example = root().join("fixtures/example.jsonl");
    let (out, clusters) = (dir.path().join("out.jsonl"), dir.path().join("c.jsonl"));
    let o = neardup(&[
        "dedup",
        example.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "--engine",
        "cpu",
        "--threads",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The default build's bytes for the bundled example.
    assert_eq!(
        (digest(&out), digest(&clusters)),
        (EXAMPLE_OUT.to_string(), EXAMPLE_CLUSTERS.to_string())
    );
}

const EXAMPLE_OUT: &str = "822d24939f132c00";
const EXAMPLE_CLUSTERS: &str = "89e5c38c2f8033c1";

#[test]
fn a_parquet_input_or_output_names_the_parquet_feature() {
    let dir = tempfile::tempdir().unwrap();
    let pq = root().join("testdata/parquet/fineweb-sample.parquet");
    let example = root().join("fixtures/example.jsonl");
    let out = dir.path().join("out.jsonl");
    let outpq = dir.path().join("out.parquet");
    let work = dir.path().join("work");
    let sigs = dir.path().join("s.parquet");
    let removed = dir.path().join("removed.parquet");
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (
            vec![
                "dedup",
                example.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--removed",
                removed.to_str().unwrap(),
            ],
            &removed,
        ),
        (
            vec!["dedup", pq.to_str().unwrap(), "-o", out.to_str().unwrap()],
            &out,
        ),
        (
            vec![
                "dedup",
                example.to_str().unwrap(),
                "-o",
                outpq.to_str().unwrap(),
            ],
            &outpq,
        ),
        (
            vec![
                "dedup",
                example.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--work-dir",
                work.to_str().unwrap(),
            ],
            &out,
        ),
        (
            vec![
                "stage",
                "init",
                work.to_str().unwrap(),
                example.to_str().unwrap(),
            ],
            &work,
        ),
        (
            vec![
                "signatures",
                example.to_str().unwrap(),
                "-o",
                sigs.to_str().unwrap(),
                "--format",
                "parquet",
            ],
            &sigs,
        ),
    ];
    for (args, output) in cases {
        if cfg!(feature = "parquet") {
            continue;
        }
        refused_for("parquet", &args, output);
    }
}

#[test]
fn the_gpu_engine_names_the_gpu_feature() {
    if cfg!(feature = "gpu") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let example = root().join("fixtures/example.jsonl");
    let out = dir.path().join("out.jsonl");
    let e = example.to_str().unwrap();
    let o = out.to_str().unwrap();
    refused_for("gpu", &["dedup", e, "-o", o, "--engine", "gpu"], &out);
    refused_for("gpu", &["devices"], &out);
    // `auto` is the CPU engine here: a build without a GPU engine still runs by default.
    let r = neardup(&["dedup", e, "-o", o]);
    assert!(r.status.success(), "{}", text(&r.stderr));
}
