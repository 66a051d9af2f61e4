//! `neardup decontam`: drop documents that share an n-gram with protected files.

use super::*;

pub(super) fn run(a: DecontamArgs) -> Result<ExitCode> {
    a.check_paths()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    // A Parquet output of JSONL reads the inputs once more for their columns: stdin is spooled.
    let inputs = a
        .input
        .open(neardup::io::format::is_parquet_name(&a.output))?;
    let mut grams = neardup::stages::decontam::ProtectedSet::new(a.n)?
        .with_short_items(a.protect_short)
        .with_joined_fields(a.join_fields)
        .with_task_field(a.task_field.clone());
    for p in &a.protected {
        grams.add_file(p)?;
    }
    let load = t0.elapsed().as_secs_f64();
    let opts = neardup::stages::decontam::DecontamOptions {
        min_score: a.min_score,
        tag: a.mode == DecontamMode::Tag,
    };
    let mut s = neardup::stages::decontam::run_decontam(
        &inputs, &fields, &grams, &a.output, &opts, &progress,
    )?;
    s.load_seconds = load;
    let secs = t0.elapsed().as_secs_f64();
    if !a.report.is_empty() {
        let names: Vec<String> = (0..inputs.len())
            .map(|i| inputs.name(i).to_string())
            .collect();
        let report =
            neardup::report::json::DecontamReport::new(&s, &fields, &names, &a.output, secs);
        for path in &a.report {
            let body = if is_html(path) {
                neardup::report::html::decontam_page(&s, &names)
            } else {
                format!("{}\n", serde_json::to_string_pretty(&report)?)
            };
            neardup::io::write_file_atomic(path, body.as_bytes())?;
        }
    }
    // The bars' last state (written when they go) comes before the summary.
    drop(progress);
    if !a.run.quiet {
        for f in grams.jsonl_by_content() {
            eprintln!(
                "neardup: warning: protected file {f} is read as one whole text (only a name \
                 ending in .jsonl, .jsonl.gz or .jsonl.zst makes each value a text of its own), \
                 but its first line is a JSON object: rename it .jsonl to protect each value"
            );
        }
    }
    if let Some(w) = grams.short_texts_warning() {
        // A run that protects nothing says so even under --quiet: it is close to an error.
        if grams.is_empty() || !a.run.quiet {
            eprintln!("neardup: {w}");
        }
    }
    say(
        &a.run,
        format!(
            "neardup decontam: {} documents read, {} contaminated{}, {} written; {} protected \
             {}-grams{} from {} files; {:.2} s, {} docs/s",
            s.documents,
            s.contaminated,
            if opts.tag { " (tagged)" } else { "" },
            s.documents_written,
            s.protected_ngrams,
            a.n,
            match s.protected_whole {
                0 => String::new(),
                w => format!(" and {w} short texts protected whole"),
            },
            s.files.len(),
            secs,
            human_count(per_second(s.documents as f64, secs))
        ),
    );
    Ok(ExitCode::SUCCESS)
}
