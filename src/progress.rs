//! Progress bars on stderr (indicatif): one per pass, with documents per second and an ETA when
//! the input size is known. Shown only when stderr is a terminal, unless asked otherwise.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// `--progress`: when to draw bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// When stderr is a terminal.
    #[default]
    Auto,
    /// Always (even into a file or pipe).
    Always,
    /// Never.
    Never,
}

/// Makes the bars for each pass of one run. Bars live in one `MultiProgress`, so a step's
/// spinner and a pass started inside it stack instead of overwriting each other.
#[derive(Debug, Clone)]
pub struct ProgressFactory {
    multi: Option<MultiProgress>,
}

/// A "terminal" for `--progress always` into a file or pipe: each redraw (every bar's line)
/// becomes plain lines on stderr (cursor movements and clearing are dropped), at most one
/// redraw a second; the last redraw held back is written when the bars go away, so the final
/// state always shows.
#[derive(Debug, Default)]
struct LineLog {
    state: std::sync::Mutex<LineLogState>,
}

#[derive(Debug, Default)]
struct LineLogState {
    last: Option<std::time::Instant>,
    /// The redraw being written (indicatif writes a line per bar, then flushes).
    frame: Vec<String>,
    /// The latest redraw not written because it came too soon.
    held: Vec<String>,
}

fn write_lines(lines: &[String]) -> std::io::Result<()> {
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    for l in lines {
        writeln!(e, "{l}")?;
    }
    Ok(())
}

impl indicatif::TermLike for LineLog {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        if !s.trim().is_empty() {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.frame.push(s.to_string());
        }
        Ok(())
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.write_line(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.frame.is_empty() {
            return Ok(());
        }
        let frame = std::mem::take(&mut st.frame);
        if st
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            st.held = frame;
            return Ok(());
        }
        st.last = Some(std::time::Instant::now());
        st.held.clear();
        write_lines(&frame)
    }
}

impl Drop for LineLog {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = write_lines(&st.held);
    }
}

impl ProgressFactory {
    pub fn new(mode: ProgressMode, quiet: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        let enabled = !quiet
            && match mode {
                ProgressMode::Auto => tty,
                ProgressMode::Always => true,
                ProgressMode::Never => false,
            };
        let multi = enabled.then(|| {
            // Stderr is not a terminal but progress was asked for: plain lines, once a second.
            let target = if tty {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::term_like(Box::<LineLog>::default())
            };
            MultiProgress::with_draw_target(target)
        });
        ProgressFactory { multi }
    }

    pub fn hidden() -> Self {
        ProgressFactory { multi: None }
    }

    fn add(&self, total: Option<u64>) -> Option<ProgressBar> {
        self.multi.as_ref().map(|m| {
            m.add(ProgressBar::with_draw_target(
                total,
                ProgressDrawTarget::hidden(),
            ))
        })
    }

    pub fn enabled(&self) -> bool {
        self.multi.is_some()
    }

    /// A bar for a pass over the inputs, advanced by raw bytes read (`total` when known).
    pub fn pass(&self, label: &str, total_bytes: Option<u64>) -> Progress {
        let Some(b) = self.add(total_bytes) else {
            return Progress::hidden();
        };
        let bar = match total_bytes {
            Some(_) => {
                b.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {msg} ETA {eta}",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                );
                b
            }
            None => {
                b.set_style(
                    ProgressStyle::with_template("{prefix:>12} {spinner} {bytes} {msg}")
                        .expect("valid template"),
                );
                b
            }
        };
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar: Some(bar),
            docs: AtomicU64::new(0),
        }
    }

    /// A spinner for a step with no natural size (LSH, clustering).
    pub fn step(&self, label: &str) -> Progress {
        let Some(b) = self.add(None) else {
            return Progress::hidden();
        };
        b.set_style(
            ProgressStyle::with_template("{prefix:>12} {spinner} {msg} {elapsed}")
                .expect("valid template"),
        );
        b.set_prefix(label.to_string());
        b.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar: Some(b),
            docs: AtomicU64::new(0),
        }
    }
}

/// One pass's bar (or nothing).
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    docs: AtomicU64,
}

impl Progress {
    pub fn hidden() -> Self {
        Progress {
            bar: None,
            docs: AtomicU64::new(0),
        }
    }

    pub fn add_bytes(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    pub fn add_docs(&self, n: u64) {
        let total = self.docs.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(b) = &self.bar {
            let secs = b.elapsed().as_secs_f64().max(1e-9);
            b.set_message(format!("{total} docs, {:.0} docs/s", total as f64 / secs));
        }
    }

    pub fn set_message(&self, msg: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_message(msg.into());
        }
    }

    /// Remove the bar (the summary line follows).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
