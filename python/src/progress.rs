//! A Python callable as the library's progress reporter.

use super::*;

/// A Python callable as the library's progress reporter: called as `progress(stage, done,
/// total, docs)` (bytes done, the total when known, documents so far) at most ten times a
/// second per stage, and once more when the stage ends. The first exception it raises is kept
/// and raised once the run is over.
pub(crate) struct PyProgress {
    callback: Py<PyAny>,
    error: Arc<Mutex<Option<PyErr>>>,
}

pub(crate) struct PyTask {
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
pub(crate) fn detached_with_progress<T: Send>(
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
pub(crate) fn progress_of(
    callback: Option<Py<PyAny>>,
) -> (ProgressFactory, Arc<Mutex<Option<PyErr>>>) {
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
