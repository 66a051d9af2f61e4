//! `neardup dedup`: near-dedup files, with clusters, pairs and reports.

use super::*;
use neardup::options::Mib;

pub(super) fn run(a: DedupArgs) -> Result<ExitCode> {
    let (cfg, fields) = a.resolve()?;
    #[cfg(not(feature = "parquet"))]
    if a.work_dir.is_some() {
        return Err(sharded_missing("--work-dir").into());
    }
    a.check_paths()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = a.input.open(a.work_dir.is_none())?;
    let gpu = a.engine.gpu_options_for(inputs.total_bytes())?;
    let mut engine = build_engine(a.engine.engine, cfg.params, 0, &gpu)?;
    let info = engine.info();
    warn_software(&a.run, &info);
    let outs = neardup::stages::dedup::DedupOutputs {
        output: a.output.clone(),
        clusters: a.clusters.clone(),
        pairs: a.pairs.clone(),
        measure: !a.report.is_empty(),
        against: a.against.clone(),
        update_index: a.update_index,
        removed: a.removed.clone(),
    };
    let s = match &a.work_dir {
        #[cfg(not(feature = "parquet"))]
        Some(_) => unreachable!("refused above"),
        #[cfg(feature = "parquet")]
        Some(dir) => neardup::stages::sharded::run_sharded(
            dir,
            &a.input.inputs,
            &fields,
            &cfg,
            &a.sharded(),
            engine.as_mut(),
            &outs,
            &progress,
        )?,
        None => neardup::stages::dedup::run_dedup(
            &inputs,
            &fields,
            &cfg,
            engine.as_mut(),
            &outs,
            &progress,
            a.max_memory
                .map(|m| Mib(m).bytes() as u64)
                .or_else(neardup::sys::default_memory_limit),
        )?,
    };
    let secs = t0.elapsed().as_secs_f64();
    let docs = s.scan.documents as f64;
    let names: Vec<String> = (0..inputs.len())
        .map(|i| inputs.name(i).to_string())
        .collect();
    neardup::report::write_dedup_reports(
        &a.report, &s, &cfg, &fields, &names, &a.output, &info, secs,
    )?;
    // Only what applies: exact duplicates with --exact; "tagged" rather than "dropped" with
    // --tag-only.
    let verb = if cfg.drop { "dropped" } else { "tagged" };
    let exact = if cfg.exact {
        format!("{} exact duplicates {verb}, ", s.cluster.exact_duplicates)
    } else {
        String::new()
    };
    // With --against: what the indexes matched, and what was added.
    let against = match &s.against {
        Some(x) => {
            let added = if a.update_index {
                format!(", {} added to the index", x.added)
            } else {
                String::new()
            };
            let of = if x.indexes.len() == 1 {
                "the index"
            } else {
                "the indexes"
            };
            format!("{} duplicates of {of} {verb}{added}, ", x.matched)
        }
        None => String::new(),
    };
    // The bars' last state (written when they go) comes before the summary.
    drop(progress);
    say(
        &a.run,
        format!(
            "neardup dedup: {} documents read, {exact}{against}{} near duplicates {verb}, {} \
             clusters, {} written; {:.2} s, {} docs/s, {} shingles/s [{}]",
            s.scan.documents,
            s.cluster.near_duplicates,
            s.cluster.clusters,
            s.documents_written,
            secs,
            human_count(per_second(docs, secs)),
            human_count(per_second(s.scan.shingles as f64, s.scan.seconds)),
            info.summary()
        ),
    );
    Ok(ExitCode::SUCCESS)
}
