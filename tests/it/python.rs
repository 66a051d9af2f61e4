//! The Python package's tests (`python/tests`, pytest), run with the Python that
//! `NEARDUP_PYTHON` names (`python3` by default), against this build's `neardup` binary.
//!
//! They need that Python to have the package (`pip install .`) and pytest, pyarrow, polars,
//! `ray[data]` and datasets. Without them the test says so loudly and passes;
//! `NEARDUP_REQUIRE_PYTHON=1` (as CI sets) makes that a failure. An installed native module
//! older than the Rust sources is treated the same way: it would test other code than this
//! checkout's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let t = if p.is_dir() {
            newest_source(&p)
        } else if p.extension().is_some_and(|x| x == "rs" || x == "wgsl") {
            e.metadata().and_then(|m| m.modified()).unwrap()
        } else {
            continue;
        };
        newest = newest.max(t);
    }
    newest
}

fn unavailable(why: String) {
    if std::env::var("NEARDUP_REQUIRE_PYTHON").is_ok_and(|v| v == "1") {
        panic!("NEARDUP_REQUIRE_PYTHON=1 but {why}");
    }
    eprintln!("\n*** PYTHON TESTS SKIPPED: {why}.\n");
}

#[test]
fn the_python_package_tests_pass() {
    let python = std::env::var_os("NEARDUP_PYTHON").unwrap_or_else(|| "python3".into());
    let root = crate::common::root();
    let probe = Command::new(&python)
        .args([
            "-c",
            "import neardup, neardup._neardup as m, pytest, pyarrow, polars, ray, datasets; print(m.__file__)",
        ])
        .output();
    let module =
        match probe {
            Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
            Ok(o) => {
                return unavailable(format!(
                "{python:?} cannot import the package and its test dependencies (`pip install . \
                 pytest pyarrow polars 'ray[data]' datasets`): {}",
                String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
            ))
            }
            Err(e) => return unavailable(format!("{python:?} does not run: {e}")),
        };
    let built = std::fs::metadata(&module)
        .and_then(|m| m.modified())
        .unwrap();
    let sources = newest_source(&root.join("src"))
        .max(newest_source(&root.join("python/src")))
        .max(newest_source(&root.join("shaders")));
    if built < sources {
        return unavailable(format!(
            "the installed module {} is older than the Rust sources: `pip install .` again",
            module.display()
        ));
    }
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(&root)
        .env("NEARDUP_BIN", env!("CARGO_BIN_EXE_neardup"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pytest failed:\n{text}");
    eprintln!("{}", text.lines().last().unwrap_or(""));
}
