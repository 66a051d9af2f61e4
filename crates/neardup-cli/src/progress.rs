//! Progress bars on stderr (indicatif): the command line's [`Reporter`], one bar per pass, with
//! documents per second and an ETA when the input size is known. Shown only when stderr is a
//! terminal, unless asked otherwise.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use neardup::progress::{ProgressFactory, Reporter, Task, TaskKind};

/// `--progress`: when to draw bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProgressMode {
    /// When stderr is a terminal.
    #[default]
    Auto,
    /// Always (even into a file or pipe).
    Always,
    /// Never.
    Never,
}

/// Draws the bars of one run. Bars live in one `MultiProgress`, so a step's spinner and a pass
/// started inside it stack instead of overwriting each other.
#[derive(Debug, Clone)]
struct Bars {
    multi: MultiProgress,
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

/// The progress of a run with `--progress mode` (and `--quiet`): bars on stderr, or nothing.
pub fn factory(mode: ProgressMode, quiet: bool) -> ProgressFactory {
    let tty = std::io::stderr().is_terminal();
    let enabled = !quiet
        && match mode {
            ProgressMode::Auto => tty,
            ProgressMode::Always => true,
            ProgressMode::Never => false,
        };
    if !enabled {
        return ProgressFactory::hidden();
    }
    // Stderr is not a terminal but progress was asked for: plain lines, once a second.
    let target = if tty {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::term_like(Box::<LineLog>::default())
    };
    ProgressFactory::new(Arc::new(Bars {
        multi: MultiProgress::with_draw_target(target),
    }))
}

impl Reporter for Bars {
    fn start(&self, label: &str, kind: TaskKind) -> Box<dyn Task> {
        let total = match kind {
            TaskKind::Pass { total_bytes } => total_bytes,
            TaskKind::Step => None,
        };
        let b = self.multi.add(ProgressBar::with_draw_target(
            total,
            ProgressDrawTarget::hidden(),
        ));
        let template = match kind {
            TaskKind::Pass {
                total_bytes: Some(_),
            } => "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {msg} ETA {eta}",
            TaskKind::Pass { total_bytes: None } => "{prefix:>12} {spinner} {bytes} {msg}",
            TaskKind::Step => "{prefix:>12} {spinner} {msg} {elapsed}",
        };
        b.set_style(
            ProgressStyle::with_template(template)
                .expect("valid template")
                .progress_chars("=> "),
        );
        b.set_prefix(label.to_string());
        b.enable_steady_tick(Duration::from_millis(200));
        Box::new(Bar(b))
    }
}

/// One pass's bar.
struct Bar(ProgressBar);

impl Task for Bar {
    fn add_bytes(&self, n: u64) {
        self.0.inc(n);
    }
    fn docs(&self, total: u64) {
        let secs = self.0.elapsed().as_secs_f64().max(1e-9);
        self.0
            .set_message(format!("{total} docs, {:.0} docs/s", total as f64 / secs));
    }
    fn message(&self, msg: &str) {
        self.0.set_message(msg.to_string());
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
