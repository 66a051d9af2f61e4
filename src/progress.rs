//! Progress, as events a front end draws: the library says which pass or step runs and how far
//! it has come; the command line draws bars (indicatif), Python calls a user's callback. With
//! no [`Reporter`], nothing is counted beyond an atomic add.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a progress display shows: a pass over the inputs (advanced by raw bytes read, `total`
/// when known) or a step with no natural size (LSH, clustering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// A pass over the inputs; `total` is their size in bytes when known.
    Pass { total_bytes: Option<u64> },
    /// A step with no natural size.
    Step,
}

/// A front end's progress display: it makes one [`Task`] per pass or step.
pub trait Reporter: Send + Sync {
    /// A pass or step named `label` starts.
    fn start(&self, label: &str, kind: TaskKind) -> Box<dyn Task>;
}

/// One pass's or step's display. Called from any thread, often: keep each call cheap.
pub trait Task: Send + Sync {
    /// `n` more input bytes were read.
    fn add_bytes(&self, n: u64);
    /// Documents done so far (the total, not an increment).
    fn docs(&self, total: u64);
    /// A short note on what the step is doing now.
    fn message(&self, msg: &str);
    /// The pass or step is over (also called when it fails).
    fn finish(&self);
}

/// Makes the [`Progress`] of each pass of one run: a handle on the front end's [`Reporter`],
/// or on none.
#[derive(Clone, Default)]
pub struct ProgressFactory {
    reporter: Option<Arc<dyn Reporter>>,
}

impl std::fmt::Debug for ProgressFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressFactory")
            .field("enabled", &self.enabled())
            .finish()
    }
}

impl ProgressFactory {
    /// Report to `reporter`.
    pub fn new(reporter: Arc<dyn Reporter>) -> Self {
        ProgressFactory {
            reporter: Some(reporter),
        }
    }

    /// Report nothing.
    pub fn hidden() -> Self {
        ProgressFactory { reporter: None }
    }

    pub fn enabled(&self) -> bool {
        self.reporter.is_some()
    }

    fn start(&self, label: &str, kind: TaskKind) -> Progress {
        Progress {
            task: self.reporter.as_ref().map(|r| r.start(label, kind)),
            docs: AtomicU64::new(0),
        }
    }

    /// A pass over the inputs, advanced by raw bytes read (`total_bytes` when known).
    pub fn pass(&self, label: &str, total_bytes: Option<u64>) -> Progress {
        self.start(label, TaskKind::Pass { total_bytes })
    }

    /// A step with no natural size (LSH, clustering).
    pub fn step(&self, label: &str) -> Progress {
        self.start(label, TaskKind::Step)
    }
}

/// One pass's progress (or nothing). Finished when dropped.
pub struct Progress {
    task: Option<Box<dyn Task>>,
    docs: AtomicU64,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("shown", &self.task.is_some())
            .field("docs", &self.docs)
            .finish()
    }
}

impl Progress {
    pub fn hidden() -> Self {
        Progress {
            task: None,
            docs: AtomicU64::new(0),
        }
    }

    pub fn add_bytes(&self, n: u64) {
        if let Some(t) = &self.task {
            t.add_bytes(n);
        }
    }

    pub fn add_docs(&self, n: u64) {
        let total = self.docs.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(t) = &self.task {
            t.docs(total);
        }
    }

    pub fn set_message(&self, msg: impl Into<String>) {
        if let Some(t) = &self.task {
            t.message(&msg.into());
        }
    }

    /// End the pass (the summary line follows).
    pub fn finish(&self) {
        if let Some(t) = &self.task {
            t.finish();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `12.3k` style counts for the summary line.
pub fn human_count(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.2}G", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

/// `n / secs`, and 0 for a run too short to time.
pub fn per_second(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    struct LogTask(Arc<Mutex<Vec<String>>>, String);

    impl Reporter for Log {
        fn start(&self, label: &str, kind: TaskKind) -> Box<dyn Task> {
            self.0
                .lock()
                .unwrap()
                .push(format!("start {label} {kind:?}"));
            Box::new(LogTask(self.0.clone(), label.to_string()))
        }
    }

    impl Task for LogTask {
        fn add_bytes(&self, n: u64) {
            self.0.lock().unwrap().push(format!("{} bytes {n}", self.1));
        }
        fn docs(&self, total: u64) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} docs {total}", self.1));
        }
        fn message(&self, msg: &str) {
            self.0.lock().unwrap().push(format!("{} msg {msg}", self.1));
        }
        fn finish(&self) {
            self.0.lock().unwrap().push(format!("{} finish", self.1));
        }
    }

    #[test]
    fn events_reach_the_reporter_and_documents_are_totals() {
        let log = Log::default();
        let events = log.0.clone();
        let f = ProgressFactory::new(Arc::new(log));
        {
            let p = f.pass("signing", Some(10));
            p.add_bytes(4);
            p.add_docs(2);
            p.add_docs(3);
            p.set_message("half");
            let _s = f.step("lsh");
        }
        assert_eq!(
            *events.lock().unwrap(),
            [
                "start signing Pass { total_bytes: Some(10) }",
                "signing bytes 4",
                "signing docs 2",
                "signing docs 5",
                "signing msg half",
                "start lsh Step",
                "lsh finish",
                "signing finish",
            ]
        );
    }

    #[test]
    fn hidden_progress_counts_nothing_anywhere() {
        let f = ProgressFactory::hidden();
        assert!(!f.enabled());
        let p = f.pass("x", None);
        p.add_docs(1);
        p.finish();
    }
}
