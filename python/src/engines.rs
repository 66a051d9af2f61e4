//! Engines kept from one call to the next, and the GIL released around the library's work.

use super::*;

/// What an engine is built from: calls that ask for the same get the same kind of engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EngineKey {
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
pub(crate) struct Kept {
    /// The process the engines were built in.
    pid: u32,
    idle: Vec<(EngineKey, Box<dyn Engine>)>,
}

/// The most idle engines kept between calls.
pub(crate) const KEPT_MAX: usize = 2;

pub(crate) static KEPT: std::sync::Mutex<Option<Kept>> = std::sync::Mutex::new(None);

/// The kept engines of this process (none in a child forked from the process that built them).
pub(crate) fn kept() -> std::sync::MutexGuard<'static, Option<Kept>> {
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
pub(crate) static CALLER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Run `f` with the GIL released, once this process is known to hold the threads earlier
/// calls started. The engines' work runs on rayon's pools, whose threads start at a process's
/// first call; a process forked after one (Python's `multiprocessing` forks by default on
/// Linux) has none of them, so its work would wait forever for threads that are not there.
/// Such a child gets an error naming the way out instead.
pub(crate) fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> PyResult<T> + Send,
) -> PyResult<T> {
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
pub(crate) fn with_engine<T>(
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
pub(crate) fn release_engines(py: Python<'_>) -> usize {
    let idle = std::mem::take(&mut kept().as_mut().expect("made by kept()").idle);
    let n = idle.len();
    py.detach(move || drop(idle));
    n
}
