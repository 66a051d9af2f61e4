//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The fixtures directory of this repository.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// Run the real `neardup` binary.
pub fn neardup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .output()
        .expect("the neardup binary runs")
}

/// Run it with stdin from a file.
pub fn neardup_stdin(args: &[&str], stdin: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .stdin(std::fs::File::open(stdin).expect("stdin file"))
        .output()
        .expect("the neardup binary runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Assert success, showing stderr otherwise.
pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "neardup failed ({:?}):\n{}",
        o.status,
        stderr(o)
    );
}

/// Write JSONL records `(id, text)` to a file.
pub fn write_jsonl(path: &Path, docs: &[(String, String)]) {
    let mut s = String::new();
    for (id, text) in docs {
        s.push_str(&serde_json::json!({"id": id, "text": text}).to_string());
        s.push('\n');
    }
    std::fs::write(path, s).unwrap();
}

/// sha256 of a file, hex.
pub fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{:x}", Sha256::digest(bytes))
}

/// Every file in a directory (names), sorted.
pub fn dir_entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The lines of a text file.
pub fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The records of a JSONL file.
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    lines_of(path)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `neardup synth DOCS -o PATH --words WORDS` (the seeded synthetic corpus), which must succeed.
pub fn synth(path: &Path, docs: usize, words: usize) {
    ok(&neardup(&[
        "synth",
        &docs.to_string(),
        "-o",
        path.to_str().unwrap(),
        "--words",
        &words.to_string(),
    ]));
}
