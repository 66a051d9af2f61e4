//! The `neardup` binary: parse the command line, run the command, print the summary. Errors
//! reach the user as one clear message and exit code 1; a reader that closes our stdout early
//! (`| head`) is not an error.

use std::process::ExitCode;

use clap::Parser;

mod bench;
mod cli;
mod progress;

fn main() -> ExitCode {
    neardup::sys::threads::register_current_thread();
    // An interrupted run removes its unfinished outputs (they are hidden temporary files;
    // nothing ever appears under an output's name before the run succeeds).
    let _ = ctrlc::set_handler(|| {
        let done = neardup::io::remove_partial_outputs();
        eprintln!("{}", neardup::io::interrupt_message(&done));
        std::process::exit(130);
    });
    let t0 = std::time::Instant::now();
    let r = cli::run(cli::Cli::parse());
    if std::env::var_os("NEARDUP_DEBUG_STAGES").is_some() {
        debug_resources(t0);
    }
    match r {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("neardup: error: {e}");
            let mut src = e.source();
            while let Some(s) = src {
                let text = s.to_string();
                if !e.to_string().contains(&text) {
                    eprintln!("  caused by: {text}");
                }
                src = s.source();
            }
            // A run that fails after some of its outputs are complete says which.
            if let Some(m) = neardup::io::failure_message(&neardup::io::completed_outputs()) {
                eprintln!("{m}");
            }
            ExitCode::FAILURE
        }
    }
}

/// With `NEARDUP_DEBUG_STAGES`: the whole process's wall seconds, CPU seconds and peak
/// resident memory, on one line (what the device check's table reads; no `time` is needed).
fn debug_resources(t0: std::time::Instant) {
    let cpu = neardup::sys::threads::process_cpu_seconds();
    let rss = neardup::sys::peak_rss_bytes();
    eprintln!(
        "neardup: resources: wall {:.3} s, cpu {} s, peak rss {} MB",
        t0.elapsed().as_secs_f64(),
        cpu.map_or("?".into(), |c| format!("{c:.3}")),
        rss.map_or("?".into(), |r| format!("{:.1}", r as f64 / 1e6)),
    );
}

/// A reader that went away (`| head`) is not a failure of ours.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<neardup::Error>()
            .is_some_and(neardup::Error::is_broken_pipe)
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
