//! `neardup stage init`, and `neardup dedup --work-dir`: every wave of tasks
//! ([`next_wave`](super::task::next_wave)) in one process, out of core, each finished task
//! skipped when the run is repeated; the outputs and the report as in-memory `dedup` makes
//! them.

use std::path::Path;
use std::time::Instant;

use super::deliver::copy_out;
use super::{apply, cluster, Manifest, WorkDir};
use crate::engine::Engine;
use crate::error::Error;
use crate::io::{Fields, Output};
use crate::options::ShardedOptions;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{record_tags, DedupConfig, DedupOutputs, DedupSummary};
use crate::stages::sink::RecordSink;

/// The `init` stage: make the work directory for a run over `inputs` (each a shard) in
/// `partitions` partitions, checked against the indexes of `against`, its outputs going into
/// `out` when given ([`Manifest::with_out`]); or reopen it when it was made for the same run.
pub fn init(
    dir: &Path,
    inputs: &[String],
    cfg: DedupConfig,
    fields: Fields,
    partitions: usize,
    against: &[std::path::PathBuf],
    out: Option<super::OutDir>,
) -> Result<WorkDir, Error> {
    let mut m = Manifest::new(inputs, cfg, fields, partitions)?.with_against(against)?;
    if let Some(out) = out {
        m = m.with_out(out)?;
    }
    WorkDir::init(dir, m)
}

/// Run `dedup` over `inputs` (the shards, one per file) through the work directory `dir`
/// with `sharded`'s partitions, `rank` sorting its `sort_memory` of id records at once: every
/// wave of tasks ([`next_wave`](super::next_wave), each stage one task in this process), then
/// every shard applied into the one output. Outputs appear only when the run succeeds.
#[allow(clippy::too_many_arguments)]
pub fn run_sharded(
    dir: &Path,
    inputs: &[String],
    fields: &Fields,
    cfg: &DedupConfig,
    sharded: &ShardedOptions,
    engine: &mut dyn Engine,
    outs: &DedupOutputs,
    progress: &ProgressFactory,
) -> Result<DedupSummary, Error> {
    use super::task::{GivenEngine, Task, TaskEnv, Waves};
    let t0 = Instant::now();
    if outs.update_index {
        return Err(Error::Param(
            "--update-index runs in memory only; out of core, add the outputs to the index \
             afterwards with `neardup index add INDEX OUT...`"
                .into(),
        ));
    }
    let work = init(
        dir,
        inputs,
        *cfg,
        fields.clone(),
        sharded.partitions,
        &outs.against,
        None,
    )?;
    // Every output first, so a bad path fails before the work.
    let all = work.inputs(&(0..work.shards()).collect::<Vec<_>>())?;
    let tags = record_tags(cfg, !work.manifest.against.is_empty());
    let mut out = RecordSink::create(&outs.output, &all, &tags)?;
    drop(all);
    let mut clusters_out = outs.clusters.as_deref().map(Output::create).transpose()?;
    let mut pairs_out = outs.pairs.as_deref().map(Output::create).transpose()?;
    let mut removed_out = outs
        .removed
        .as_deref()
        .map(crate::stages::removed::RemovedWriter::create)
        .transpose()?;

    let how = Waves {
        steps: false,
        sort_memory: sharded.sort_memory,
        task_memory: sharded.task_memory,
        confirm_tasks: 1,
    };
    let mut engines = GivenEngine(engine);
    let mut env = TaskEnv {
        engines: &mut engines,
        progress,
        reports: None,
        copies: Some((None, None)),
    };
    let mut bands_seconds = 0.0;
    let mut last = Vec::new();
    loop {
        let wave = super::task::next_wave(&work, &how)?;
        if wave.is_empty() {
            break;
        }
        if wave == last {
            return Err(super::task::no_progress(&work, &wave));
        }
        let t = Instant::now();
        for task in &wave {
            task.run(&work, &mut env)?;
        }
        if matches!(wave[0], Task::Bands { .. }) {
            bands_seconds += t.elapsed().as_secs_f64();
        }
        last = wave;
    }
    for s in 0..work.shards() {
        apply::apply_listing_removed(&work, s, &mut out, removed_out.as_mut(), progress)?;
    }
    let clustered = cluster::summary(&work)?;
    if let Some(o) = clusters_out.as_mut() {
        copy_out(&work.clusters_jsonl(), o, &clustered.clusters_checksum)?;
    }
    if let Some(o) = pairs_out.as_mut() {
        copy_out(&work.pairs_jsonl(), o, &clustered.pairs_checksum)?;
    }
    out.finish()?;
    if let Some(o) = clusters_out {
        o.finish()?;
    }
    if let Some(o) = pairs_out {
        o.finish()?;
    }
    if let Some(o) = removed_out {
        o.finish()?;
    }
    let mut summary =
        super::summary::dedup_summary(&work, t0.elapsed().as_secs_f64(), outs.measure, progress)?;
    summary.cluster.lsh_seconds = bands_seconds;
    Ok(summary)
}
