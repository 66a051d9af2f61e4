//! `neardup._neardup`, the native module of the `neardup` Python package: thin wrappers over
//! the `neardup` crate. The Python side (`python/neardup/`) gives them their keyword
//! arguments, docstrings and NumPy arrays; every engine call and every stage runs with the GIL
//! released.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::ArrayStreamReader;
use arrow_array::{make_array, Array, ArrayRef, StructArray};
use arrow_schema::DataType;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyCapsule, PyDict, PyString};

use neardup::engine::gpu::Kernels;
use neardup::engine::{build_engine, Engine, EngineChoice, GpuOptions};
use neardup::io::Fields;
use neardup::ops::DedupOptions;
use neardup::options::Named;
use neardup::progress::ProgressFactory;
use neardup::stages::dedup::{DedupConfig, Keep, KeepChoice, MemoryDocs};
use neardup::stages::sharded::{self, WorkDir};
use neardup::MinHashParams;

pyo3::create_exception!(
    _neardup,
    NeardupError,
    PyException,
    "An error of neardup's, with the message its command line prints."
);

/// The CLI's message for `e`: the error, then each cause it does not already say.
fn message(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !m.contains(&text) {
            m.push_str(&format!("\n  caused by: {text}"));
        }
        src = s.source();
    }
    m
}

fn err(e: neardup::Error) -> PyErr {
    NeardupError::new_err(message(&e))
}

fn engine_err(e: neardup::engine::EngineError) -> PyErr {
    NeardupError::new_err(message(&e))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("a summary is JSON")
}

// ---- Texts in: a list of str, or Arrow strings through the PyCapsule interface ----

/// Texts taken from Python: copies of `str` objects, or Arrow arrays read in place.
enum Texts {
    Owned(Vec<String>),
    Arrow(Vec<ArrayRef>),
}

impl Texts {
    /// Every text, as a slice into the copies or into the Arrow buffers (no copy). `what`
    /// names the argument in errors.
    fn strs(&self, what: &str) -> PyResult<Vec<&str>> {
        match self {
            Texts::Owned(v) => Ok(v.iter().map(String::as_str).collect()),
            Texts::Arrow(arrays) => {
                let mut out = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum());
                for a in arrays {
                    let base = out.len();
                    match a.data_type() {
                        DataType::Utf8 => push_all(a.as_string::<i32>(), &mut out, base, what)?,
                        DataType::LargeUtf8 => {
                            push_all(a.as_string::<i64>(), &mut out, base, what)?
                        }
                        DataType::Utf8View => push_all(a.as_string_view(), &mut out, base, what)?,
                        other => {
                            return Err(PyTypeError::new_err(format!(
                                "{what}: an Arrow array of {other}, not of strings"
                            )))
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

/// Append every string of `a` (a string array of any layout) to `out`; a null is an error naming
/// its row (`base` + its index).
fn push_all<'a, A>(a: A, out: &mut Vec<&'a str>, base: usize, what: &str) -> PyResult<()>
where
    A: arrow_array::ArrayAccessor<Item = &'a str>,
{
    for i in 0..a.len() {
        if a.is_null(i) {
            return Err(PyValueError::new_err(format!(
                "{what}[{}] is null",
                base + i
            )));
        }
        out.push(a.value(i));
    }
    Ok(())
}

fn arrow_err(what: &str, e: arrow_schema::ArrowError) -> PyErr {
    PyValueError::new_err(format!("{what}: cannot import the Arrow data: {e}"))
}

/// A table's column `column` (the stream or array of a table is a struct of its columns).
fn column_of(a: ArrayRef, column: &str, what: &str) -> PyResult<ArrayRef> {
    match a.data_type() {
        DataType::Struct(_) => {
            let s: &StructArray = a.as_struct();
            s.column_by_name(column).cloned().ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{what}: the table has no column {column:?} (columns: {})",
                    s.column_names().join(", ")
                ))
            })
        }
        _ => Ok(a),
    }
}

/// Take `obj`'s texts: Arrow data through `__arrow_c_stream__` or `__arrow_c_array__` (pyarrow,
/// polars, anything that speaks the PyCapsule interface; for a table, its column `column`),
/// else a sequence of `str`.
fn texts_of(obj: &Bound<'_, PyAny>, column: &str, what: &str) -> PyResult<Texts> {
    if obj.hasattr("__arrow_c_stream__")? {
        let cap = obj.call_method0("__arrow_c_stream__")?;
        let cap = cap.cast::<PyCapsule>()?;
        let ptr = cap.pointer_checked(Some(c"arrow_array_stream"))?;
        // SAFETY: the capsule holds a valid stream; `from_raw` moves it out and leaves a
        // released one behind, which the capsule's destructor ignores.
        let reader = unsafe { ArrayStreamReader::from_raw(ptr.as_ptr().cast()) }
            .map_err(|e| arrow_err(what, e))?;
        let mut arrays = Vec::new();
        for a in reader {
            arrays.push(column_of(a.map_err(|e| arrow_err(what, e))?, column, what)?);
        }
        return Ok(Texts::Arrow(arrays));
    }
    if obj.hasattr("__arrow_c_array__")? {
        let pair = obj.call_method0("__arrow_c_array__")?;
        let (schema_cap, array_cap): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract()?;
        let schema_cap = schema_cap.cast::<PyCapsule>()?;
        let array_cap = array_cap.cast::<PyCapsule>()?;
        let sp = schema_cap.pointer_checked(Some(c"arrow_schema"))?;
        let ap = array_cap.pointer_checked(Some(c"arrow_array"))?;
        // SAFETY: valid C data interface structs, moved out of their capsules as above.
        let data = unsafe {
            let schema = FFI_ArrowSchema::from_raw(sp.as_ptr().cast());
            let array = FFI_ArrowArray::from_raw(ap.as_ptr().cast());
            from_ffi(array, &schema)
        }
        .map_err(|e| arrow_err(what, e))?;
        return Ok(Texts::Arrow(vec![column_of(
            make_array(data),
            column,
            what,
        )?]));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is one str: pass a list of texts"
        )));
    }
    let mut out = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let s = item.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}[{i}] is {}, not str",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        out.push(match s.to_cow()? {
            Cow::Borrowed(b) => b.to_string(),
            Cow::Owned(o) => o,
        });
    }
    Ok(Texts::Owned(out))
}

// ---- Options ----

/// An option whose values are names, as the library spells them; a `ValueError` naming them
/// otherwise.
fn named<T: Named>(value: &str) -> PyResult<T> {
    T::from_name(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn engine_choice(engine: &str) -> PyResult<EngineChoice> {
    named(engine)
}

fn gpu_kernels(kernels: &str) -> PyResult<Kernels> {
    named(kernels)
}

/// Every shared option's default, as JSON: what `neardup.defaults()` returns.
#[pyfunction]
fn defaults() -> String {
    serde_json::Value::Object(neardup::ops::defaults()).to_string()
}

/// What an engine is built from: calls that ask for the same get the same kind of engine.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EngineKey {
    engine: EngineChoice,
    params: MinHashParams,
    threads: usize,
    kernels: Kernels,
    int64: bool,
}

/// Engines built by earlier calls and idle now, most recently used last. Building an engine
/// costs far more than a call on a small batch (a GPU engine opens its device and compiles its
/// pipelines; a CPU engine starts its threads), and an engine kept keeps its warm buffers; so
/// each call takes a kept engine made for the same options, and gives it back when it
/// succeeds (an engine that failed is dropped: its state is unknown). At most [`KEPT_MAX`] are
/// kept; [`release_engines`] frees them.
struct Kept {
    /// The process the engines were built in.
    pid: u32,
    idle: Vec<(EngineKey, Box<dyn Engine>)>,
}

/// The most idle engines kept between calls.
const KEPT_MAX: usize = 2;

static KEPT: std::sync::Mutex<Option<Kept>> = std::sync::Mutex::new(None);

/// The kept engines of this process (none in a child forked from the process that built them).
fn kept() -> std::sync::MutexGuard<'static, Option<Kept>> {
    let mut k = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if k.as_ref().is_some_and(|k| k.pid != pid) {
        // Not dropped: dropping would join threads and close devices this process never had.
        std::mem::forget(k.take());
    }
    k.get_or_insert_with(|| Kept {
        pid,
        idle: Vec::new(),
    });
    k
}

/// The process that made the first call, or 0 before any.
static CALLER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Run `f` with the GIL released, once this process is known to hold the threads earlier
/// calls started. The engines' work runs on rayon's pools, whose threads start at a process's
/// first call; a process forked after one (Python's `multiprocessing` forks by default on
/// Linux) has none of them, so its work would wait forever for threads that are not there.
/// Such a child gets an error naming the way out instead.
fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> PyResult<T> + Send) -> PyResult<T> {
    use std::sync::atomic::Ordering;
    let pid = std::process::id();
    match CALLER.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {}
        Err(first) if first == pid => {}
        Err(first) => {
            return Err(NeardupError::new_err(format!(
                "this process was forked from process {first} after that one called neardup, \
                 and its worker threads stayed there: start child processes with \
                 multiprocessing's \"spawn\" or \"forkserver\" method \
                 (multiprocessing.get_context(\"spawn\")), or fork before the first call"
            )));
        }
    }
    py.detach(f)
}

/// Run `f` with an engine for these options: a kept one when there is one, else a new one,
/// kept afterwards when `f` succeeds.
fn with_engine<T>(
    engine: &str,
    params: MinHashParams,
    threads: usize,
    kernels: &str,
    int64: bool,
    f: impl FnOnce(&mut dyn Engine) -> PyResult<T>,
) -> PyResult<T> {
    let key = EngineKey {
        engine: engine_choice(engine)?,
        params,
        threads,
        kernels: gpu_kernels(kernels)?,
        int64,
    };
    let found = {
        let mut k = kept();
        let idle = &mut k.as_mut().expect("made by kept()").idle;
        idle.iter()
            .rposition(|(k, _)| *k == key)
            .map(|i| idle.remove(i).1)
    };
    let mut e = match found {
        Some(e) => e,
        None => {
            let opts = GpuOptions {
                kernels: key.kernels,
                int64,
                ..GpuOptions::default()
            };
            build_engine(key.engine, params, threads, &opts).map_err(err)?
        }
    };
    let r = f(e.as_mut());
    if r.is_ok() {
        let mut k = kept();
        let idle = &mut k.as_mut().expect("made by kept()").idle;
        idle.push((key, e));
        if idle.len() > KEPT_MAX {
            idle.remove(0);
        }
    }
    r
}

/// Free the engines kept between calls; returns how many there were.
#[pyfunction]
fn release_engines(py: Python<'_>) -> usize {
    let idle = std::mem::take(&mut kept().as_mut().expect("made by kept()").idle);
    let n = idle.len();
    py.detach(move || drop(idle));
    n
}

/// The text options (SPEC §1.4) as Python spells them.
fn text_rule(shingle: &str, normalize: &str) -> PyResult<neardup::text::TextRule> {
    Ok(neardup::text::TextRule {
        shingle: named(shingle)?,
        normalize: named(normalize)?,
    })
}

/// The dedup options the Python side passes as a dict (its keyword arguments; a missing or
/// `None` value takes the library's default), resolved: the configuration and the fields
/// records are read by.
fn parse_options(o: &Bound<'_, PyDict>) -> PyResult<(DedupConfig, Fields)> {
    for key in o.keys() {
        let key: String = key.extract()?;
        if !DedupOptions::NAMES.contains(&key.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "unknown option {key:?} (options: {})",
                DedupOptions::NAMES.join(", ")
            )));
        }
    }
    fn get<'py, T: for<'a> FromPyObject<'a, 'py>>(
        o: &Bound<'py, PyDict>,
        key: &str,
        default: T,
    ) -> PyResult<T> {
        match o.get_item(key)? {
            Some(v) if !v.is_none() => v.extract().map_err(|e| {
                PyTypeError::new_err(format!("option {key}: {}", Into::<PyErr>::into(e)))
            }),
            _ => Ok(default),
        }
    }
    fn get_named<T: Named + Copy>(o: &Bound<'_, PyDict>, key: &str, default: T) -> PyResult<T> {
        match o.get_item(key)? {
            Some(v) if !v.is_none() => named(&v.extract::<String>().map_err(|e| {
                PyTypeError::new_err(format!("option {key}: {}", Into::<PyErr>::into(e)))
            })?),
            _ => Ok(default),
        }
    }
    let d = DedupOptions::default();
    let keep = match get(o, "keep", None::<String>)?.as_deref() {
        None => d.keep.clone(),
        // In memory, a policy by value reads `keep_values`, not a field.
        Some("max") => KeepChoice {
            policy: Keep::FieldMax,
            field: None,
        },
        Some("min") => KeepChoice {
            policy: Keep::FieldMin,
            field: None,
        },
        Some(s) => s.parse().map_err(PyValueError::new_err)?,
    };
    let options = DedupOptions {
        k: get(o, "k", d.k)?,
        num_perm: get(o, "num_perm", d.num_perm)?,
        seed: get(o, "seed", d.seed)?,
        shingle: get_named(o, "shingle", d.shingle)?,
        normalize: get_named(o, "normalize", d.normalize)?,
        bands: get(o, "bands", d.bands)?,
        rows: get(o, "rows", d.rows)?,
        threshold: get(o, "threshold", d.threshold)?,
        confirm: get_named(o, "confirm", d.confirm)?,
        exact: get(o, "exact", d.exact)?,
        tag_only: get(o, "tag_only", d.tag_only)?,
        keep,
        group_field: get(o, "group_field", d.group_field.clone())?,
        group_missing: get_named(o, "group_missing", d.group_missing)?,
        id_field: get(o, "id_field", d.id_field.clone())?,
        text_field: get(o, "text_field", d.text_field.clone())?,
        numeric_ids: get(o, "numeric_ids", d.numeric_ids)?,
        cluster: get_named(o, "cluster", d.cluster)?,
    };
    options.resolve().map_err(err)
}

// ---- Signatures and in-memory dedup ----

/// Signatures of `texts` as native-endian u32 rows in a bytearray; with the row count and the
/// engine's description.
#[pyfunction]
#[pyo3(signature = (texts, *, k, num_perm, seed, shingle, normalize, engine, threads, column, gpu_kernels, gpu_int64))]
#[allow(clippy::too_many_arguments)]
fn signatures<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    k: usize,
    num_perm: usize,
    seed: u64,
    shingle: &str,
    normalize: &str,
    engine: &str,
    threads: usize,
    column: &str,
    gpu_kernels: &str,
    gpu_int64: bool,
) -> PyResult<(Bound<'py, PyByteArray>, usize, String)> {
    let params = MinHashParams::new(k, num_perm, seed)
        .map_err(err)?
        .with_rule(text_rule(shingle, normalize)?);
    let t = texts_of(texts, column, "texts")?;
    let strs = t.strs("texts")?;
    let n = strs.len();
    let (out, info) = detached(py, || -> PyResult<(Vec<u32>, String)> {
        with_engine(engine, params, threads, gpu_kernels, gpu_int64, |e| {
            let mut out = vec![0u32; n * num_perm];
            e.sign_texts(&strs, &mut out).map_err(engine_err)?;
            Ok((out, e.info().summary()))
        })
    })?;
    Ok((PyByteArray::new(py, bytemuck::cast_slice(&out)), n, info))
}

/// A Python callable as the library's progress reporter: called as `progress(stage, done,
/// total, docs)` (bytes done, the total when known, documents so far) at most ten times a
/// second per stage, and once more when the stage ends. The first exception it raises is kept
/// and raised once the run is over.
struct PyProgress {
    callback: Py<PyAny>,
    error: Arc<Mutex<Option<PyErr>>>,
}

struct PyTask {
    callback: Py<PyAny>,
    error: Arc<Mutex<Option<PyErr>>>,
    stage: String,
    total: Option<u64>,
    done: AtomicU64,
    docs: AtomicU64,
    last: Mutex<Option<Instant>>,
    ended: AtomicBool,
}

impl neardup::progress::Reporter for PyProgress {
    fn start(
        &self,
        label: &str,
        kind: neardup::progress::TaskKind,
    ) -> Box<dyn neardup::progress::Task> {
        let total = match kind {
            neardup::progress::TaskKind::Pass { total_bytes } => total_bytes,
            neardup::progress::TaskKind::Step => None,
        };
        let task = PyTask {
            callback: Python::attach(|py| self.callback.clone_ref(py)),
            error: self.error.clone(),
            stage: label.to_string(),
            total,
            done: AtomicU64::new(0),
            docs: AtomicU64::new(0),
            last: Mutex::new(None),
            ended: AtomicBool::new(false),
        };
        task.report(true);
        Box::new(task)
    }
}

impl PyTask {
    fn report(&self, now: bool) {
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if !now && last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
                return;
            }
            *last = Some(Instant::now());
        }
        let (done, docs) = (
            self.done.load(Ordering::Relaxed),
            self.docs.load(Ordering::Relaxed),
        );
        Python::attach(|py| {
            if let Err(e) = self
                .callback
                .call1(py, (self.stage.as_str(), done, self.total, docs))
            {
                let mut first = self.error.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(e);
            }
        });
    }
}

impl neardup::progress::Task for PyTask {
    fn add_bytes(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.report(false);
    }
    fn docs(&self, total: u64) {
        self.docs.store(total, Ordering::Relaxed);
        self.report(false);
    }
    fn message(&self, _: &str) {}
    fn finish(&self) {
        // Called again when the pass is dropped: report the end once.
        if !self.ended.swap(true, Ordering::Relaxed) {
            self.report(true);
        }
    }
}

/// Run `f` detached with the progress of a call given `progress=` (or none); the callback's
/// first exception, if any, is raised once `f` is over.
fn detached_with_progress<T: Send>(
    py: Python<'_>,
    progress: Option<Py<PyAny>>,
    f: impl FnOnce(&ProgressFactory) -> PyResult<T> + Send,
) -> PyResult<T> {
    let (factory, callback_error) = progress_of(progress);
    let out = detached(py, || f(&factory));
    drop(factory);
    if let Some(e) = callback_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        return Err(e);
    }
    out
}

/// The progress of a call given `progress=` (or none), and where its callback's first
/// exception goes.
fn progress_of(callback: Option<Py<PyAny>>) -> (ProgressFactory, Arc<Mutex<Option<PyErr>>>) {
    let error = Arc::new(Mutex::new(None));
    let factory = match callback {
        Some(callback) => ProgressFactory::new(Arc::new(PyProgress {
            callback,
            error: error.clone(),
        })),
        None => ProgressFactory::hidden(),
    };
    (factory, error)
}

/// In-memory dedup: each document's root (document index, native-endian u32) and survival (a
/// byte per document), whether it is an exact duplicate, and the counts as JSON.
#[pyfunction]
#[pyo3(signature = (ids, texts, options, *, keep_values, groups, engine, threads, gpu_kernels, gpu_int64, progress = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn dedup<'py>(
    py: Python<'py>,
    ids: &Bound<'py, PyAny>,
    texts: &Bound<'py, PyAny>,
    options: &Bound<'py, PyDict>,
    keep_values: Option<Vec<Option<f64>>>,
    groups: Option<Vec<Option<String>>>,
    engine: &str,
    threads: usize,
    gpu_kernels: &str,
    gpu_int64: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<(
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    String,
    String,
)> {
    let (cfg, _) = parse_options(options)?;
    let id_t = texts_of(ids, "id", "ids")?;
    let text_t = texts_of(texts, "text", "texts")?;
    let id_s = id_t.strs("ids")?;
    let text_s = text_t.strs("texts")?;
    let group_s: Option<Vec<Option<&str>>> = groups
        .as_ref()
        .map(|g| g.iter().map(|x| x.as_deref()).collect());
    let (c, info) = detached_with_progress(py, progress, |progress| -> PyResult<_> {
        let docs = MemoryDocs {
            ids: &id_s,
            texts: &text_s,
            keep_values: keep_values.as_deref(),
            groups: group_s.as_deref(),
        };
        with_engine(engine, cfg.params, threads, gpu_kernels, gpu_int64, |e| {
            let c = neardup::stages::dedup::cluster_docs_with_progress(&docs, &cfg, e, progress)
                .map_err(err)?;
            Ok((c, e.info().summary()))
        })
    })?;
    let survives: Vec<u8> = c.survives.iter().map(|&b| b as u8).collect();
    let exact: Vec<u8> = c.exact_duplicate.iter().map(|&b| b as u8).collect();
    Ok((
        PyByteArray::new(py, bytemuck::cast_slice(&c.root)),
        PyByteArray::new(py, &survives),
        PyByteArray::new(py, &exact),
        json(&c.stats),
        info,
    ))
}

// ---- The sharded stages over a work directory ----

fn open(dir: &std::path::Path) -> PyResult<WorkDir> {
    WorkDir::open(dir).map_err(err)
}

/// Make (or reopen, when made for the same run) the work directory; returns (shards,
/// partitions).
#[pyfunction]
#[pyo3(signature = (work_dir, inputs, partitions, options, against, out = None, out_clusters = None, out_pairs = None, out_report = None))]
#[allow(clippy::too_many_arguments)]
fn stage_init(
    py: Python<'_>,
    work_dir: PathBuf,
    inputs: Vec<String>,
    partitions: usize,
    options: &Bound<'_, PyDict>,
    against: Vec<PathBuf>,
    out: Option<PathBuf>,
    out_clusters: Option<String>,
    out_pairs: Option<String>,
    out_report: Option<String>,
) -> PyResult<(usize, usize)> {
    let (cfg, fields) = parse_options(options)?;
    let out = out.map(|dir| sharded::OutDir {
        dir: dir.display().to_string(),
        clusters: out_clusters,
        pairs: out_pairs,
        report: out_report,
    });
    detached(py, || {
        let w = sharded::init(&work_dir, &inputs, cfg, fields, partitions, &against, out)
            .map_err(err)?;
        Ok((w.shards(), w.partitions()))
    })
}

/// The tasks that may run now (`neardup stage next`), as their text; empty once the run is
/// complete. `steps=False` runs `rank`, the greedy rounds and `cluster` each as one task.
#[pyfunction]
#[pyo3(signature = (work_dir, task_memory, confirm_tasks, steps = true))]
fn stage_next(
    py: Python<'_>,
    work_dir: PathBuf,
    task_memory: u64,
    confirm_tasks: usize,
    steps: bool,
) -> PyResult<Vec<String>> {
    task_budget(task_memory)?;
    detached(py, || {
        let w = open(&work_dir)?;
        let how = sharded::Waves {
            steps,
            task_memory,
            confirm_tasks,
            ..sharded::Waves::default()
        };
        let wave = sharded::next_wave(&w, &how).map_err(err)?;
        Ok(wave.iter().map(|t| t.to_string()).collect())
    })
}

/// What a task's text names: `(kind, stage, index, round, light)`.
type TaskInfo = (String, String, Option<usize>, Option<u32>, bool);

/// What a task's text names ([`TaskInfo`]).
#[pyfunction]
fn stage_task(task: &str) -> PyResult<TaskInfo> {
    let t: sharded::Task = task.parse().map_err(err)?;
    Ok((
        t.kind().to_string(),
        t.stage().to_string(),
        t.index(),
        t.round(),
        t.is_light(),
    ))
}

/// Run one task (`neardup stage run`); returns its report as JSON (`TaskReport::to_json`).
#[pyfunction]
#[pyo3(signature = (work_dir, task, engine, threads, gpu_kernels, gpu_int64, clusters = None, pairs = None, progress = None))]
#[allow(clippy::too_many_arguments)]
fn stage_run(
    py: Python<'_>,
    work_dir: PathBuf,
    task: &str,
    engine: &str,
    threads: usize,
    gpu_kernels: &str,
    gpu_int64: bool,
    clusters: Option<String>,
    pairs: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    use sharded::task::{GivenEngine, NoEngine, TaskEnv};
    let t: sharded::Task = task.parse().map_err(err)?;
    // Paths given for the clusters and pairs files replace the copy into the run's --out.
    let copies = (clusters.is_some() || pairs.is_some()).then_some((clusters, pairs));
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let run = |engines: &mut dyn sharded::task::Engines| {
            let mut env = TaskEnv {
                engines,
                progress,
                reports: Some(neardup::report::write_stage_reports),
                copies: copies.clone(),
            };
            t.run(&w, &mut env).map_err(err)
        };
        let r = match t {
            sharded::Task::Sign { .. } => {
                let params = w.config().params;
                with_engine(engine, params, threads, gpu_kernels, gpu_int64, |e| {
                    run(&mut GivenEngine(e))
                })?
            }
            _ => run(&mut NoEngine)?,
        };
        Ok(r.to_json().to_string())
    })
}

/// A work directory's (shards, partitions).
#[pyfunction]
fn stage_shape(work_dir: PathBuf) -> PyResult<(usize, usize)> {
    let w = open(&work_dir)?;
    Ok((w.shards(), w.partitions()))
}

#[pyfunction]
#[pyo3(signature = (work_dir, shard, engine, threads, gpu_kernels, gpu_int64, progress = None))]
#[allow(clippy::too_many_arguments)]
fn stage_sign(
    py: Python<'_>,
    work_dir: PathBuf,
    shard: usize,
    engine: &str,
    threads: usize,
    gpu_kernels: &str,
    gpu_int64: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let params = w.config().params;
        let s = with_engine(engine, params, threads, gpu_kernels, gpu_int64, |e| {
            sharded::sign::sign(&w, shard, e, progress).map_err(err)
        })?;
        Ok(s.map(|s| json(&s)))
    })
}

#[pyfunction]
#[pyo3(signature = (work_dir, sort_memory, progress = None))]
fn stage_rank(
    py: Python<'_>,
    work_dir: PathBuf,
    sort_memory: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    if sort_memory == 0 {
        return Err(PyValueError::new_err(
            "sort_memory must be at least 1 (MiB)",
        ));
    }
    let budget = usize::try_from(sort_memory.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::rank::rank_within(&w, progress, budget).map_err(err)?;
        Ok(s.map(|s| json(&s)))
    })
}

/// The bytes a task may hold, from `task_memory=` (MiB, at least 1).
fn task_budget(task_memory: u64) -> PyResult<usize> {
    if task_memory == 0 {
        return Err(PyValueError::new_err(
            "task_memory must be at least 1 (MiB)",
        ));
    }
    Ok(usize::try_from(task_memory.saturating_mul(1 << 20)).unwrap_or(usize::MAX))
}

/// One parallel job of `rank` (`neardup stage rank --step`): its result as JSON (`null` when
/// done already).
#[pyfunction]
#[pyo3(signature = (work_dir, step, index = None, task_memory = 1024))]
fn stage_rank_step(
    py: Python<'_>,
    work_dir: PathBuf,
    step: &str,
    index: Option<usize>,
    task_memory: u64,
) -> PyResult<String> {
    use sharded::rank_tasks;
    let budget = task_budget(task_memory)?;
    let step = step.to_string();
    let need = move |what: &str| {
        index.ok_or_else(|| PyValueError::new_err(format!("rank step {what:?} needs an index")))
    };
    let need = &need;
    detached(py, move || {
        let w = open(&work_dir)?;
        let v = match step.as_str() {
            "split" => serde_json::json!(rank_tasks::split(&w, need("split")?, budget)
                .map_err(err)?
                .is_some()),
            "plan" => serde_json::json!(rank_tasks::plan(&w, budget).map_err(err)?.ranges),
            "sort" => {
                serde_json::json!(rank_tasks::sort(&w, need("sort")?).map_err(err)?.is_some())
            }
            "exact" => {
                serde_json::json!(rank_tasks::exact(&w, need("exact")?)
                    .map_err(err)?
                    .is_some())
            }
            "write" => serde_json::json!(rank_tasks::write(&w, need("write")?).map_err(err)?),
            "finish" => serde_json::to_value(rank_tasks::finish(&w).map_err(err)?)
                .expect("a summary is JSON"),
            other => {
                return Err(PyValueError::new_err(format!(
                    "no rank step {other:?}: split, plan, sort, exact, write or finish"
                )))
            }
        };
        Ok(v.to_string())
    })
}

#[pyfunction]
fn stage_bands(py: Python<'_>, work_dir: PathBuf, shard: usize) -> PyResult<bool> {
    detached(py, || {
        sharded::bands::bands(&open(&work_dir)?, shard).map_err(err)
    })
}

#[pyfunction]
#[pyo3(signature = (work_dir, partition, progress = None))]
fn stage_confirm(
    py: Python<'_>,
    work_dir: PathBuf,
    partition: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::confirm::confirm(&w, partition, progress).map_err(err)?;
        Ok(s.map(|s| json(&s)))
    })
}

/// Confirm several partitions in one job, their documents gathered once a group.
#[pyfunction]
#[pyo3(signature = (work_dir, partitions, progress = None))]
fn stage_confirm_group(
    py: Python<'_>,
    work_dir: PathBuf,
    partitions: Vec<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<Option<String>>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let done = sharded::confirm::confirm_together(
            &w,
            &partitions,
            sharded::confirm::GROUP_DOCS,
            progress,
        )
        .map_err(err)?;
        Ok(done.into_iter().map(|s| s.map(|s| json(&s))).collect())
    })
}

/// Under `--cluster greedy`: partition `partition`'s job of round `round` (1 on). Returns its
/// summary as JSON, or `None` when it ran already.
#[pyfunction]
#[pyo3(signature = (work_dir, round, partition, progress = None))]
fn stage_greedy_round(
    py: Python<'_>,
    work_dir: PathBuf,
    round: u32,
    partition: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::greedy::round(&w, round, partition, progress).map_err(err)?;
        Ok(s.map(|s| json(&s)))
    })
}

/// Under `--cluster greedy`: settle round `round` once its partitions' jobs ran. Returns its
/// summary as JSON (whether settled now or before).
#[pyfunction]
#[pyo3(signature = (work_dir, round, progress = None))]
fn stage_greedy_settle(
    py: Python<'_>,
    work_dir: PathBuf,
    round: u32,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        sharded::greedy::settle(&w, round, progress).map_err(err)?;
        let s = sharded::greedy::round_summary(&w, round).map_err(err)?;
        Ok(json(&s.expect("settled")))
    })
}

/// Cluster, then copy the clusters and pairs files where asked (whether or not the stage ran
/// now). Returns the stage's summary as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, clusters=None, pairs=None, progress=None))]
fn stage_cluster(
    py: Python<'_>,
    work_dir: PathBuf,
    clusters: Option<String>,
    pairs: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        sharded::cluster_to(&w, clusters.as_deref(), pairs.as_deref(), progress).map_err(err)?;
        Ok(json(&sharded::cluster::summary(&w).map_err(err)?))
    })
}

/// One parallel job of `cluster` (`neardup stage cluster --step`): its result as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, step, index = None, round = None, task_memory = 1024, clusters = None, pairs = None))]
#[allow(clippy::too_many_arguments)]
fn stage_cluster_step(
    py: Python<'_>,
    work_dir: PathBuf,
    step: &str,
    index: Option<usize>,
    round: Option<u32>,
    task_memory: u64,
    clusters: Option<String>,
    pairs: Option<String>,
) -> PyResult<String> {
    use sharded::cluster_tasks as ct;
    let budget = task_budget(task_memory)?;
    let step = step.to_string();
    let need = move |what: &str| {
        index.ok_or_else(|| PyValueError::new_err(format!("cluster step {what:?} needs an index")))
    };
    let need = &need;
    let round = move || round.ok_or_else(|| PyValueError::new_err("this cluster step needs round"));
    detached(py, move || {
        let w = open(&work_dir)?;
        use serde_json::json;
        let v = match step.as_str() {
            "plan" => json!(ct::plan(&w, budget).map_err(err)?.parts),
            "edges" => json!(ct::edges(&w, need("edges")?).map_err(err)?),
            "locate" => json!(ct::locate(&w, need("locate")?).map_err(err)?),
            "star" => json!(ct::star(&w, round()?, need("star")?).map_err(err)?),
            "converged" => json!(ct::round_done(&w, round()?).map_err(err)?),
            "roots" => json!(ct::roots(&w, need("roots")?).map_err(err)?),
            "attributes" => json!(ct::attributes(&w, need("attributes")?).map_err(err)?),
            "clusters" => json!(ct::clusters(&w, need("clusters")?).map_err(err)?),
            "verdicts" => json!(ct::verdicts(&w, need("verdicts")?).map_err(err)?),
            "finish" => {
                sharded::cluster_finish_to(&w, clusters.as_deref(), pairs.as_deref())
                    .map_err(err)?;
                serde_json::to_value(sharded::cluster::summary(&w).map_err(err)?)
                    .expect("a summary is JSON")
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "no cluster step {other:?}: plan, edges, locate, star, converged, roots, \
                     attributes, clusters, verdicts or finish"
                )))
            }
        };
        Ok(v.to_string())
    })
}

/// Write shard `shard`'s kept records to `output` (atomically); returns the summary as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, shard, output, progress = None))]
fn stage_apply(
    py: Python<'_>,
    work_dir: PathBuf,
    shard: usize,
    output: String,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::apply_to(&w, shard, &output, progress).map_err(err)?;
        Ok(json(&s))
    })
}

/// Write the run's reports (JSON, or a page for `.html`) once every shard is applied; returns
/// the run's summary as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, reports, output, seconds=None))]
fn stage_report(
    py: Python<'_>,
    work_dir: PathBuf,
    reports: Vec<String>,
    output: String,
    seconds: Option<f64>,
) -> PyResult<String> {
    detached(py, || {
        let w = open(&work_dir)?;
        let s =
            neardup::report::write_stage_reports(&w, &reports, &output, seconds).map_err(err)?;
        Ok(sharded::task::run_counts(&w, &s).map_err(err)?.to_string())
    })
}

#[pymodule]
fn _neardup(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NeardupError", m.py().get_type::<NeardupError>())?;
    m.add("CONTRACT_VERSION", neardup::CONTRACT_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_function(wrap_pyfunction!(signatures, m)?)?;
    m.add_function(wrap_pyfunction!(dedup, m)?)?;
    m.add_function(wrap_pyfunction!(release_engines, m)?)?;
    m.add_function(wrap_pyfunction!(stage_init, m)?)?;
    m.add_function(wrap_pyfunction!(stage_shape, m)?)?;
    m.add_function(wrap_pyfunction!(stage_next, m)?)?;
    m.add_function(wrap_pyfunction!(stage_task, m)?)?;
    m.add_function(wrap_pyfunction!(stage_run, m)?)?;
    m.add_function(wrap_pyfunction!(stage_sign, m)?)?;
    m.add_function(wrap_pyfunction!(stage_rank, m)?)?;
    m.add_function(wrap_pyfunction!(stage_rank_step, m)?)?;
    m.add_function(wrap_pyfunction!(stage_cluster_step, m)?)?;
    m.add_function(wrap_pyfunction!(stage_bands, m)?)?;
    m.add_function(wrap_pyfunction!(stage_confirm, m)?)?;
    m.add_function(wrap_pyfunction!(stage_confirm_group, m)?)?;
    m.add_function(wrap_pyfunction!(stage_greedy_round, m)?)?;
    m.add_function(wrap_pyfunction!(stage_greedy_settle, m)?)?;
    m.add_function(wrap_pyfunction!(stage_cluster, m)?)?;
    m.add_function(wrap_pyfunction!(stage_apply, m)?)?;
    m.add_function(wrap_pyfunction!(stage_report, m)?)?;
    Ok(())
}
