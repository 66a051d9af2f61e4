//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root: `NEARDUP_ROOT` when set (a test binary built on one machine and
/// run from a checkout elsewhere, as the device check does), else where it was built.
pub fn root() -> PathBuf {
    std::env::var_os("NEARDUP_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}

/// The fixtures directory of this repository.
pub fn fixture(name: &str) -> PathBuf {
    root().join("fixtures").join(name)
}

/// A runtime directory for Mesa: without `XDG_RUNTIME_DIR`, every Vulkan instance it starts
/// prints `XDG_RUNTIME_DIR is invalid` on stderr. The caller's own value wins.
pub fn runtime_dir() -> std::ffi::OsString {
    static DIR: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("XDG_RUNTIME_DIR").unwrap_or_else(|| {
            let d = std::env::temp_dir().join(format!("neardup-tests-xdg-{}", std::process::id()));
            std::fs::create_dir_all(&d).expect("a runtime directory");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
            }
            d.into_os_string()
        })
    })
    .clone()
}

/// A cache directory of this test process's for the GPU engine's pipelines and `auto`'s
/// measurements, so the tests neither read nor change the user's own (`NEARDUP_CACHE_DIR`).
/// The caller's own value wins.
pub fn cache_dir() -> std::ffi::OsString {
    static DIR: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("NEARDUP_CACHE_DIR").unwrap_or_else(|| {
            let d =
                std::env::temp_dir().join(format!("neardup-tests-cache-{}", std::process::id()));
            d.into_os_string()
        })
    })
    .clone()
}

/// Give this process a runtime directory before it starts an adapter in-process (see
/// [`runtime_dir`]), and a cache directory of its own ([`cache_dir`]).
pub fn set_runtime_dir() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            // SAFETY: set once, before this test binary starts any adapter; Rust's own
            // environment reads take the same lock.
            unsafe { std::env::set_var("XDG_RUNTIME_DIR", runtime_dir()) };
        }
        if std::env::var_os("NEARDUP_CACHE_DIR").is_none() {
            // SAFETY: as above.
            unsafe { std::env::set_var("NEARDUP_CACHE_DIR", cache_dir()) };
        }
    });
}

/// The real `neardup` binary, with a runtime directory for Mesa.
pub fn neardup_command() -> Command {
    let bin = std::env::var_os("NEARDUP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_neardup")));
    let mut c = Command::new(bin);
    c.env("XDG_RUNTIME_DIR", runtime_dir());
    c.env("NEARDUP_CACHE_DIR", cache_dir());
    c
}

/// Run the real `neardup` binary.
pub fn neardup(args: &[&str]) -> Output {
    neardup_command()
        .args(args)
        .output()
        .expect("the neardup binary runs")
}

/// Run it with stdin from a file.
pub fn neardup_stdin(args: &[&str], stdin: &Path) -> Output {
    neardup_command()
        .args(args)
        .stdin(std::fs::File::open(stdin).expect("stdin file"))
        .output()
        .expect("the neardup binary runs")
}

/// The GPU engine on any adapter, or `None` with a loud note when there is none; a failure
/// instead when `NEARDUP_REQUIRE_GPU=1` (as CI sets). Native 64-bit integers
/// (`GpuOptions::int64`) on an adapter without them are skipped the same way, and fail under
/// `NEARDUP_REQUIRE_GPU_INT64=1` (CI's llvmpipe has them).
pub fn gpu_or_skip(
    p: neardup::MinHashParams,
    opts: &neardup::engine::gpu::GpuOptions,
) -> Option<neardup::GpuEngine> {
    set_runtime_dir();
    match neardup::GpuEngine::new(p, opts) {
        Ok(e) => Some(e),
        Err(e) if e.to_string().contains("no 64-bit shader integers") => {
            if std::env::var("NEARDUP_REQUIRE_GPU_INT64").is_ok_and(|v| v == "1") {
                panic!("NEARDUP_REQUIRE_GPU_INT64=1 but the adapter has none: {e}");
            }
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n*** GPU TEST SKIPPED: {e}\n*** (NEARDUP_REQUIRE_GPU_INT64=1 makes this a failure)\n"
            );
            None
        }
        Err(e) => {
            if std::env::var("NEARDUP_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("NEARDUP_REQUIRE_GPU=1 but no GPU engine could be built: {e}");
            }
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n*** GPU TEST SKIPPED: no adapter ({e}).\n*** Install a Vulkan driver \
                 (apt-get install mesa-vulkan-drivers libvulkan1) or set NEARDUP_REQUIRE_GPU=1 \
                 to make this a failure.\n"
            );
            None
        }
    }
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

/// Write `batch` as Parquet, `rows_per_group` rows to a row group.
pub fn write_parquet(path: &Path, batch: &arrow_array::RecordBatch, rows_per_group: usize) {
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        .build();
    let f = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// The column names of a Parquet file and, for the string column `name` when there is one,
/// its values over all rows (null as `None`).
pub fn parquet_string_column(
    path: &Path,
    name: &str,
) -> (Vec<String>, Option<Vec<Option<String>>>) {
    use arrow_array::Array;
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    let names: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut values: Option<Vec<Option<String>>> = names.iter().any(|n| n == name).then(Vec::new);
    for batch in builder.build().unwrap() {
        let batch = batch.unwrap();
        if let Some(v) = values.as_mut() {
            let col = arrow_array::cast::AsArray::as_string::<i32>(
                batch.column_by_name(name).unwrap().as_ref(),
            );
            v.extend((0..col.len()).map(|i| col.is_valid(i).then(|| col.value(i).to_string())));
        }
    }
    (names, values)
}

/// Run, and expect exit 1 with every needle in the message (which starts as every error
/// does); the message.
pub fn refused_with(args: &[&str], needles: &[&str]) -> String {
    let o = neardup(args);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected exit 1 for {args:?}, got {:?}: {err}",
        o.status
    );
    assert!(err.starts_with("neardup: error:"), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "message for {args:?} lacks {n:?}: {err}");
    }
    err
}
