//! `neardup stage`: one task or stage of the sharded dedup, over a work directory. Each verb
//! names a [`Task`] of the library's, which runs it and says what it did; `next` prints the
//! tasks that may run now.

use neardup::stages::sharded::task::{Engines, Said, TaskEnv, Waves};
use neardup::stages::sharded::{self, next_wave, OutDir, StepIndex, Task, WorkDir};

use super::*;

pub(super) fn run(a: StageArgs) -> Result<ExitCode> {
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let tell = |said: &[Said]| {
        for s in said {
            let line = s.line(t0.elapsed().as_secs_f64());
            say(&a.run, format!("neardup stage {line}"));
        }
    };
    let no_engine = None;
    // The tasks a verb names, the engine its `sign` task uses, and where `cluster` copies its
    // files (`None`: into the run's --out).
    let mut removed_out: Option<String> = None;
    let (dir, tasks, engine, copies) = match a.stage {
        Stage::Init {
            dir,
            input,
            cluster,
            partitions,
            against,
            out,
        } => {
            let (cfg, fields) = cluster.options(&input).resolve()?;
            let w = sharded::init(
                &dir,
                &input.inputs,
                cfg,
                fields,
                partitions,
                &against,
                out.as_deref().map(OutDir::new),
            )?;
            let into = match &out {
                Some(o) => format!(", outputs into {}", o.display()),
                None => String::new(),
            };
            tell(&[Said::Ran(format!(
                "init: {} shards, {} partitions in {}{into}",
                w.shards(),
                w.partitions(),
                dir.display()
            ))]);
            return Ok(ExitCode::SUCCESS);
        }
        Stage::Next {
            dir,
            task_memory,
            confirm_tasks,
        } => {
            let w = WorkDir::open(&dir)?;
            w.need_out()?;
            let how = Waves {
                task_memory,
                confirm_tasks: confirm_tasks.map_or(0, |n| n as usize),
                ..Waves::default()
            };
            let mut out = String::new();
            for t in next_wave(&w, &how)? {
                out.push_str(&format!("{t}\n"));
            }
            use std::io::Write;
            std::io::stdout()
                .write_all(out.as_bytes())
                .context("writing the tasks to standard output")?;
            return Ok(ExitCode::SUCCESS);
        }
        Stage::Run { dir, task, engine } => {
            let t: Task = task.parse()?;
            (dir, vec![t], Some(engine), None)
        }
        Stage::Sign { dir, shard, engine } => (dir, vec![Task::Sign { shard }], Some(engine), None),
        Stage::Rank {
            dir,
            sort_memory,
            step,
            shard,
            range,
            task_memory,
        } => {
            let t = match step {
                None => Task::Rank {
                    memory: sort_memory,
                },
                Some(step) => {
                    let at = StepIndex {
                        shard,
                        range,
                        ..Default::default()
                    };
                    Task::step("rank", &name_of(step), at, task_memory)?
                }
            };
            (dir, vec![t], no_engine, None)
        }
        Stage::Bands { dir, shard } => (dir, vec![Task::Bands { shard }], no_engine, None),
        Stage::Confirm {
            dir,
            partition,
            task_memory,
        } => {
            let t = Task::Confirm {
                partitions: partition,
                memory: task_memory,
            };
            (dir, vec![t], no_engine, None)
        }
        Stage::Greedy {
            dir,
            round,
            partition,
            task_memory,
        } => {
            let tasks = match (round, partition.is_empty()) {
                (None, _) => vec![Task::Greedy {
                    memory: task_memory,
                }],
                (Some(round), true) => vec![Task::GreedySettle { round }],
                (Some(round), false) => partition
                    .into_iter()
                    .map(|partition| Task::GreedyRound {
                        round,
                        partition,
                        memory: task_memory,
                    })
                    .collect(),
            };
            (dir, tasks, no_engine, None)
        }
        Stage::Cluster {
            dir,
            clusters,
            pairs,
            removed,
            step,
            partition,
            shard,
            part,
            round,
            task_memory,
        } => {
            if removed.is_some() && !matches!(step, None | Some(ClusterStep::Finish)) {
                return Err(neardup::Error::Param(
                    "--removed is written once the stage is done: without --step, or with \
                     --step finish"
                        .into(),
                )
                .into());
            }
            removed_out = removed;
            let t = match step {
                None => Task::Cluster,
                Some(step) => {
                    let at = StepIndex {
                        partition,
                        shard,
                        part,
                        round,
                        ..Default::default()
                    };
                    Task::step("cluster", &name_of(step), at, task_memory)?
                }
            };
            (dir, vec![t], no_engine, Some((clusters, pairs)))
        }
        Stage::Apply { dir, shard, output } => {
            let w = WorkDir::open(&dir)?;
            let s = sharded::apply_to(&w, shard, &output, &progress)?;
            tell(&[Said::Ran(format!(
                "apply: shard {shard}, {} written to {output}",
                s.written
            ))]);
            return Ok(ExitCode::SUCCESS);
        }
        Stage::Report {
            dir,
            report,
            output,
            seconds,
        } => {
            let w = WorkDir::open(&dir)?;
            neardup::report::write_stage_reports(&w, &report, &output, seconds)?;
            tell(&[Said::Ran(format!("report: {}", report.join(", ")))]);
            return Ok(ExitCode::SUCCESS);
        }
    };
    let w = WorkDir::open(&dir)?;
    let mut engines = CliEngines {
        args: engine.as_ref(),
        run: &a.run,
        built: None,
    };
    let mut env = TaskEnv {
        engines: &mut engines,
        progress: &progress,
        reports: Some(neardup::report::write_stage_reports),
        copies,
    };
    for t in tasks {
        let r = t.run(&w, &mut env)?;
        tell(&r.said);
        if r.said.iter().any(|s| matches!(s, Said::Note(_))) {
            // A note ends the verb (a greedy round past the last: none of its jobs is due).
            break;
        }
    }
    if let Some(path) = removed_out {
        let n = sharded::apply::write_removed(&w, &path)?;
        tell(&[Said::Ran(format!(
            "removed: {n} documents listed in {path}"
        ))]);
    }
    Ok(ExitCode::SUCCESS)
}

/// The engine of a `sign` task: built on the first, for the shard's size, and kept.
struct CliEngines<'a> {
    args: Option<&'a EngineArgs>,
    run: &'a RunArgs,
    built: Option<Box<dyn Engine>>,
}

impl Engines for CliEngines<'_> {
    fn engine(&mut self, w: &WorkDir, shard: usize) -> Result<&mut dyn Engine, neardup::Error> {
        let Some(args) = self.args else {
            return Err(neardup::Error::Param(
                "only `stage sign` and `stage run` sign".into(),
            ));
        };
        if self.built.is_none() {
            let bytes = std::fs::metadata(w.manifest.shard_path(shard))
                .ok()
                .map(|m| m.len());
            let gpu = args.gpu_options_for(bytes)?;
            let e = build_engine(args.engine, w.config().params, 0, &gpu)?;
            warn_software(self.run, &e.info());
            self.built = Some(e);
        }
        Ok(self.built.as_deref_mut().expect("built above"))
    }
}

/// A step's name, as `--step` spells it.
fn name_of(step: impl std::fmt::Debug) -> String {
    format!("{step:?}").to_lowercase()
}
