//! The command line: raw arguments ([`args`]) validated into the library's configs, and one
//! file per command that runs it and prints what it has to say.

mod args;
mod bench;
mod compare;
mod decontam;
mod dedup;
mod devices;
mod index;
mod inspect;
mod scurve;
mod signatures;
#[cfg(feature = "parquet")]
mod stage;
mod synth;
mod tune;
mod verify;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;

pub use args::*;
use neardup::engine::{build_engine, CpuEngine, Engine, GpuEngine};
use neardup::io::sigfile;
use neardup::progress::ProgressFactory;
use neardup::report::human_count;
use neardup::report::per_second;
use neardup::{corpus, pipeline};

/// Run one command.
pub fn run(mut cli: Cli) -> Result<ExitCode> {
    cli.check()?;
    cli.expand_inputs()?;
    match cli.command {
        Command::Dedup(a) => dedup::run(a),
        Command::Decontam(a) => decontam::run(a),
        Command::Signatures(a) => signatures::run(a),
        Command::Scurve(a) => scurve::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Devices(a) => devices::run(a),
        Command::Synth(a) => synth::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Inspect(a) => inspect::run(a),
        #[cfg(feature = "parquet")]
        Command::Stage(a) => stage::run(a),
        #[cfg(not(feature = "parquet"))]
        Command::Stage(_) => Err(sharded_missing("neardup stage").into()),
        Command::Index(a) => index::run(a),
    }
}

/// What the sharded path says in a build without the `parquet` feature (its stage tables are
/// Parquet files).
#[cfg(not(feature = "parquet"))]
fn sharded_missing(what: &str) -> neardup::Error {
    neardup::Error::Feature {
        feature: "parquet",
        what: format!("{what} (the sharded stages keep their tables in Parquet files)"),
    }
}

/// Size the global rayon pool (parsing, tokenizing, LSH) to `--threads`.
fn setup(run: &RunArgs) -> Result<ProgressFactory> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(run.threads)
        .start_handler(|_| neardup::sys::threads::register_current_thread())
        .build_global()
        .context("starting the thread pool")?;
    Ok(crate::progress::factory(run.progress, run.quiet))
}

/// A line on stderr, unless `--quiet`.
fn say(run: &RunArgs, line: impl AsRef<str>) {
    if !run.quiet {
        eprintln!("{}", line.as_ref());
    }
}

/// Say plainly when the GPU engine runs on a software adapter (asked for with `--engine gpu`):
/// its bits are right, its speed is the CPU's under another name.
fn warn_software(run: &RunArgs, info: &neardup::engine::EngineInfo) {
    if info.kind == "gpu" && info.detail.ends_with(", software") {
        say(
            run,
            format!(
                "neardup: note: the GPU engine runs on a software adapter ({}): the results are \
                 exact, but it is no faster than the CPU engine",
                info.detail
            ),
        );
    }
}

/// Reports named `*.html` / `*.htm` are pages; anything else is JSON.
use neardup::report::is_html;

/// `print!` to stdout that returns the write's error instead of panicking, so a reader that
/// goes away (`| head`) ends the command quietly (see `main`).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($t)*)?
    }};
}

/// `println!` that returns the write's error (see [`out!`]).
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($t)*)?
    }};
}

use {out, outln};
