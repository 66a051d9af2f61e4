//! `neardup bench`: per-stage timings of the engines.

use super::*;

pub(super) fn run(a: BenchArgs) -> Result<ExitCode> {
    let progress = setup(&a.run)?;
    let r = crate::bench::run(&a.config()?, &progress)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        out!("{}", crate::bench::render(&r));
    }
    Ok(ExitCode::SUCCESS)
}
