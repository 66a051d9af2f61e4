//! What a run tells its user besides its outputs: the JSON reports' typed schema ([`json`]),
//! the HTML pages ([`html`]), and the numbers of the summary line.

pub mod html;
pub mod json;

pub use crate::progress::{human_count, per_second};

/// Is `path` an HTML page's name (`.html` or `.htm`)? Any other report is JSON.
pub fn is_html(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.ends_with(".html") || p.ends_with(".htm")
}

/// Write a dedup run's reports: a page for each name in `paths` that [`is_html`], the JSON
/// report for the others; each appears atomically.
#[allow(clippy::too_many_arguments)]
pub fn write_dedup_reports(
    paths: &[String],
    s: &crate::stages::dedup::DedupSummary,
    cfg: &crate::stages::dedup::DedupConfig,
    fields: &crate::io::Fields,
    inputs: &[String],
    output: &str,
    engine: &crate::engine::EngineInfo,
    seconds: f64,
) -> Result<(), crate::error::Error> {
    if paths.is_empty() {
        return Ok(());
    }
    let report = json::DedupReport::new(s, cfg, fields, inputs, output, engine, seconds);
    for path in paths {
        let body = if is_html(path) {
            html::dedup_page(s, cfg, inputs, &engine.to_string())
        } else {
            format!(
                "{}\n",
                serde_json::to_string_pretty(&report).expect("a report is JSON")
            )
        };
        crate::io::write_file_atomic(path, body.as_bytes())?;
    }
    Ok(())
}

#[cfg(feature = "parquet")]
/// Write the reports of a run whose every stage is done: JSON, or a page for each name in
/// `paths` ending in `.html`, as `dedup --report` writes them; `output` is what they name as
/// the output, `seconds` the run's wall time (`None`: the stages' own times, summed). Returns
/// the summary they were made from.
pub fn write_stage_reports(
    work: &crate::stages::sharded::WorkDir,
    paths: &[String],
    output: &str,
    seconds: Option<f64>,
) -> Result<crate::stages::dedup::DedupSummary, crate::error::Error> {
    use crate::stages::sharded::summary::{dedup_summary, engine_info};
    let named: Vec<crate::io::NamedPath> = paths.iter().map(|p| ("--report", p.as_str())).collect();
    work.check_outputs(("report", "report"), &named)?;
    let progress = crate::progress::ProgressFactory::hidden();
    let mut s = dedup_summary(work, 0.0, !paths.is_empty(), &progress)?;
    let secs = seconds.unwrap_or(s.scan.seconds + s.write_seconds);
    s.seconds = secs;
    let names: Vec<String> = work
        .manifest
        .shards
        .iter()
        .map(|e| e.path.clone())
        .collect();
    let info = engine_info(work)?;
    write_dedup_reports(
        paths,
        &s,
        work.config(),
        work.fields(),
        &names,
        output,
        &info,
        secs,
    )?;
    Ok(s)
}
