//! `neardup stage`: one stage of the sharded dedup, over a work directory.

use neardup::stages::dedup::ClusterRule;
use neardup::stages::sharded::rank_tasks::Planned;
use neardup::stages::sharded::{
    bands, cluster_tasks, confirm, greedy, rank, rank_tasks, run, sign, WorkDir,
};

use super::*;

pub(super) fn run(a: StageArgs) -> Result<ExitCode> {
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let done = |what: String| {
        say(
            &a.run,
            format!("neardup stage {what}; {:.2} s", t0.elapsed().as_secs_f64()),
        )
    };
    let skipped = |what: String| {
        say(
            &a.run,
            format!("neardup stage {what}: done already, skipped"),
        )
    };
    match a.stage {
        Stage::Init {
            dir,
            input,
            cluster,
            partitions,
            against,
        } => {
            let (cfg, fields) = cluster.options(&input).resolve()?;
            let w = run::init(&dir, &input.inputs, cfg, fields, partitions, &against)?;
            done(format!(
                "init: {} shards, {} partitions in {}",
                w.shards(),
                w.partitions(),
                dir.display()
            ));
        }
        Stage::Sign { dir, shard, engine } => {
            let w = WorkDir::open(&dir)?;
            let bytes = (shard < w.shards())
                .then(|| std::fs::metadata(w.manifest.shard_path(shard)).ok())
                .flatten()
                .map(|m| m.len());
            let gpu = engine.gpu_options_for(bytes)?;
            let mut e = build_engine(engine.engine, w.config().params, 0, &gpu)?;
            warn_software(&a.run, &e.info());
            match sign::sign(&w, shard, e.as_mut(), &progress)? {
                Some(s) => done(format!(
                    "sign: shard {shard}, {} documents, {} shingles/s [{}]",
                    s.documents,
                    human_count(per_second(s.shingles as f64, s.seconds)),
                    e.info().summary()
                )),
                None => skipped(format!("sign: shard {shard}")),
            }
        }
        Stage::Rank {
            dir,
            step: Some(step),
            shard,
            range,
            task_memory,
            ..
        } => {
            let w = WorkDir::open(&dir)?;
            let budget = mib(task_memory);
            rank_step(&w, step, shard, range, budget, done, skipped)?;
        }
        Stage::Rank {
            dir, sort_memory, ..
        } => {
            let w = WorkDir::open(&dir)?;
            let budget = mib(sort_memory);
            match rank::rank_within(&w, &progress, budget)? {
                Some(s) => done(ranked(&s, "bucket")),
                None => skipped("rank".into()),
            }
        }
        Stage::Bands { dir, shard } => {
            let w = WorkDir::open(&dir)?;
            if bands::bands(&w, shard)? {
                done(format!("bands: shard {shard}"));
            } else {
                skipped(format!("bands: shard {shard}"));
            }
        }
        Stage::Confirm { dir, partition } => {
            let w = WorkDir::open(&dir)?;
            let all = confirm::confirm_together(&w, &partition, confirm::GROUP_DOCS, &progress)?;
            for (p, s) in partition.iter().zip(all) {
                match s {
                    Some(s) => done(format!(
                        "confirm: partition {p}, {} buckets, {} pairs checked, {} confirmed",
                        s.buckets, s.counts.checked, s.counts.confirmed
                    )),
                    None => skipped(format!("confirm: partition {p}")),
                }
            }
        }
        Stage::Greedy {
            dir,
            round,
            partition,
        } => {
            let w = WorkDir::open(&dir)?;
            if w.config().cluster != ClusterRule::Greedy {
                return Err(neardup::Error::Param(
                    "this work directory's run joins components (`--cluster components`): it \
                     has no greedy rounds; run `neardup stage cluster`"
                        .into(),
                )
                .into());
            }
            if let (Some(r), Some(last)) = (round, greedy::converged(&w)?) {
                if r > last {
                    // A scheduler's job for a round that never comes: nothing to run.
                    say(
                        &a.run,
                        format!("neardup stage greedy: {}", greedy::past_the_last(r, last)),
                    );
                    return Ok(ExitCode::SUCCESS);
                }
            }
            match (round, partition.is_empty()) {
                (None, _) => {
                    let ran = greedy::rounds(&w, &progress)?;
                    done(format!(
                        "greedy: {ran} rounds settled now, every unit decided"
                    ));
                }
                (Some(r), false) => {
                    for p in partition {
                        match greedy::round(&w, r, p, &progress)? {
                            Some(s) => done(format!(
                                "greedy: round {r}, partition {p}, {} undecided units, {} pairs \
                                 checked",
                                s.undecided, s.counts.checked
                            )),
                            None => skipped(format!("greedy: round {r}, partition {p}")),
                        }
                    }
                }
                (Some(r), true) => {
                    let s = match greedy::settle(&w, r, &progress)? {
                        Some(s) => s,
                        None => greedy::round_summary(&w, r)?.expect("settled"),
                    };
                    let next = if s.undecided == 0 {
                        "every unit decided: run `neardup stage cluster`".to_string()
                    } else {
                        format!("run round {} next", r + 1)
                    };
                    done(format!(
                        "greedy: round {r} settled, {} undecided; {next}",
                        s.undecided
                    ));
                }
            }
        }
        Stage::Cluster {
            dir,
            clusters,
            pairs,
            step: Some(step),
            partition,
            shard,
            part,
            round,
            task_memory,
        } => {
            let w = WorkDir::open(&dir)?;
            let budget = mib(task_memory);
            let job = ClusterJob {
                partition,
                shard,
                part,
                round,
                clusters: clusters.as_deref(),
                pairs: pairs.as_deref(),
            };
            cluster_step(&w, step, job, budget, done, skipped)?;
        }
        Stage::Cluster {
            dir,
            clusters,
            pairs,
            ..
        } => {
            let w = WorkDir::open(&dir)?;
            let ran = run::cluster_to(&w, clusters.as_deref(), pairs.as_deref(), &progress)?;
            match ran {
                Some(s) => done(format!(
                    "cluster: {} near duplicates, {} clusters, {} documents written",
                    s.stats.near_duplicates, s.stats.clusters, s.documents_written
                )),
                None => skipped("cluster".into()),
            }
        }
        Stage::Apply { dir, shard, output } => {
            let w = WorkDir::open(&dir)?;
            let s = run::apply_to(&w, shard, &output, &progress)?;
            done(format!(
                "apply: shard {shard}, {} written to {output}",
                s.written
            ));
        }
        Stage::Report {
            dir,
            report,
            output,
            seconds,
        } => {
            let w = WorkDir::open(&dir)?;
            neardup::report::write_stage_reports(&w, &report, &output, seconds)?;
            done(format!("report: {}", report.join(", ")));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One parallel job of `rank` (`--step`).
fn rank_step(
    w: &WorkDir,
    step: RankStep,
    shard: Option<usize>,
    range: Option<usize>,
    budget: usize,
    done: impl Fn(String),
    skipped: impl Fn(String),
) -> Result<()> {
    let need = |what: Option<usize>, flag: &str| {
        what.ok_or_else(|| {
            neardup::Error::Param(format!("`rank --step {}` needs {flag}", step_name(step)))
        })
    };
    match step {
        RankStep::Split => {
            let s = need(shard, "--shard")?;
            match rank_tasks::split(w, s, budget)? {
                Some(x) => done(format!("rank split: shard {s}, {} documents", x.rows)),
                None => skipped(format!("rank split: shard {s}")),
            }
        }
        RankStep::Plan => {
            let (p, how) = rank_tasks::plan_status(w, budget)?;
            let ranges = format!(
                "{} {}: run `--step sort --range R` for R in 0 to {}",
                p.ranges,
                if p.ranges == 1 { "range" } else { "ranges" },
                p.ranges - 1
            );
            match plan_line("rank", ranges, how, p.budget, budget) {
                (line, true) => skipped(line),
                (line, false) => done(line),
            }
        }
        RankStep::Sort => {
            let r = need(range, "--range")?;
            match rank_tasks::sort(w, r)? {
                Some(n) => done(format!("rank sort: range {r}, {n} documents")),
                None => skipped(format!("rank sort: range {r}")),
            }
        }
        RankStep::Exact => {
            let r = need(range, "--range")?;
            match rank_tasks::exact(w, r)? {
                Some(n) => done(format!("rank exact: range {r}, {n} exact duplicates")),
                None => skipped(format!("rank exact: range {r}")),
            }
        }
        RankStep::Write => {
            let s = need(shard, "--shard")?;
            if rank_tasks::write(w, s)? {
                done(format!("rank write: shard {s}"));
            } else {
                skipped(format!("rank write: shard {s}"));
            }
        }
        RankStep::Finish => match rank_tasks::finish(w)? {
            Some(s) => done(ranked(&s, "range")),
            None => skipped("rank".into()),
        },
    }
    Ok(())
}

fn step_name(step: RankStep) -> &'static str {
    match step {
        RankStep::Split => "split",
        RankStep::Plan => "plan",
        RankStep::Sort => "sort",
        RankStep::Exact => "exact",
        RankStep::Write => "write",
        RankStep::Finish => "finish",
    }
}

/// The indices and outputs a `cluster --step` job was given.
struct ClusterJob<'a> {
    partition: Option<usize>,
    shard: Option<usize>,
    part: Option<usize>,
    round: Option<u32>,
    clusters: Option<&'a str>,
    pairs: Option<&'a str>,
}

/// One parallel job of `cluster` (`--step`).
fn cluster_step(
    w: &WorkDir,
    step: ClusterStep,
    job: ClusterJob,
    budget: usize,
    done: impl Fn(String),
    skipped: impl Fn(String),
) -> Result<()> {
    let name = format!("{step:?}").to_lowercase();
    let need = |what: Option<usize>, flag: &str| {
        what.ok_or_else(|| neardup::Error::Param(format!("`cluster --step {name}` needs {flag}")))
    };
    let report = |ran: bool, what: String| {
        if ran {
            done(format!("cluster {what}"))
        } else {
            skipped(format!("cluster {what}"))
        }
    };
    match step {
        ClusterStep::Plan => {
            let (p, how) = cluster_tasks::plan_status(w, budget)?;
            let parts = format!(
                "{} {}: run `--step star --round R --part K` for K in 0 to {}",
                p.parts,
                if p.parts == 1 { "part" } else { "parts" },
                p.parts - 1
            );
            match plan_line("cluster", parts, how, p.budget, budget) {
                (line, true) => skipped(line),
                (line, false) => done(line),
            }
        }
        ClusterStep::Edges => {
            let p = need(job.partition, "--partition")?;
            report(cluster_tasks::edges(w, p)?, format!("edges: partition {p}"));
        }
        ClusterStep::Locate => {
            let s = need(job.shard, "--shard")?;
            report(cluster_tasks::locate(w, s)?, format!("locate: shard {s}"));
        }
        ClusterStep::Star => {
            let k = need(job.part, "--part")?;
            let r = job.round.ok_or_else(|| {
                neardup::Error::Param("`cluster --step star` needs --round".into())
            })?;
            match cluster_tasks::star(w, r, k)? {
                Some(_) => done(format!("cluster star: round {r}, part {k}")),
                None => skipped(format!("cluster star: round {r}, part {k}")),
            }
            match cluster_tasks::round_done(w, r)? {
                Some(true) => done(format!(
                    "cluster star: round {r} found the components: run `--step roots` next"
                )),
                Some(false) => done(format!(
                    "cluster star: round {r} done in every part: run round {} next",
                    r + 1
                )),
                None => {}
            }
        }
        ClusterStep::Roots => {
            let k = need(job.part, "--part")?;
            report(cluster_tasks::roots(w, k)?, format!("roots: part {k}"));
        }
        ClusterStep::Attributes => {
            let s = need(job.shard, "--shard")?;
            report(
                cluster_tasks::attributes(w, s)?,
                format!("attributes: shard {s}"),
            );
        }
        ClusterStep::Clusters => {
            let k = need(job.part, "--part")?;
            report(
                cluster_tasks::clusters(w, k)?,
                format!("clusters: part {k}"),
            );
        }
        ClusterStep::Verdicts => {
            let s = need(job.shard, "--shard")?;
            report(
                cluster_tasks::verdicts(w, s)?,
                format!("verdicts: shard {s}"),
            );
        }
        ClusterStep::Finish => match run::cluster_finish_to(w, job.clusters, job.pairs)? {
            Some(s) => done(format!(
                "cluster: {} near duplicates, {} clusters, {} documents written",
                s.stats.near_duplicates, s.stats.clusters, s.documents_written
            )),
            None => skipped("cluster".into()),
        },
    }
    Ok(())
}

/// Bytes from MiB.
fn mib(m: u64) -> usize {
    usize::try_from(m.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

/// The summary line of a finished `rank`, sorted in buckets (`unit`) of id ranges.
fn ranked(s: &rank::RankSummary, unit: &str) -> String {
    format!(
        "rank: {} documents in {} shards, {} exact duplicates, sorted in {} {unit}{}",
        s.rows.iter().sum::<u64>(),
        s.rows.len(),
        s.exact_duplicates,
        s.buckets,
        if s.buckets == 1 { "" } else { "s" }
    )
}

/// What a `plan` step says (and whether it skipped): the plan made now, the plan made before
/// (for `planned` bytes a task; it stands, whatever is `asked` now), or the stage finished.
fn plan_line(
    stage: &str,
    plan: String,
    how: Planned,
    planned: u64,
    asked: usize,
) -> (String, bool) {
    match how {
        Planned::Now => (format!("{stage} plan: {plan}"), false),
        Planned::Done => (format!("{stage} plan: {stage} is finished"), true),
        Planned::Before => {
            let other = match planned == asked as u64 {
                true => String::new(),
                false => format!(", not the {} asked now", asked >> 20),
            };
            let line = format!(
                "{stage} plan: {plan} (planned before, for --task-memory {}{other}: that plan \
                 stands)",
                planned >> 20
            );
            (line, false)
        }
    }
}
