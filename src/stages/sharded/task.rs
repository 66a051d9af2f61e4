//! The sharded run as units of work: [`Task`] (one job: sign a shard, a step of `rank`, a
//! group of partitions to confirm, a greedy round's job, a step of `cluster`, apply a shard,
//! the report), [`next_wave`] (the state machine over the work directory: which tasks may
//! run now) and [`Task::run`] (one task, its prologue and epilogue: skip when done, time it,
//! say what it did). A scheduler is a loop over waves; every front end (`neardup stage next`
//! and `stage run`, `neardup.stages.next_wave` and `run`, `neardup.ray`, `dedup --work-dir`)
//! is that loop or one turn of it.
//!
//! A task's text (`sign shard=3`, `confirm partitions=0,4`, `cluster-star round=1 part=2`) is
//! one line: what `stage next` prints and `stage run` reads back. The tasks of one wave are
//! independent of each other; running a task that is done is a no-op, and two runs of one
//! task at once are safe (each stage takes its unit's lock).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{bands, cluster, confirm, gather, greedy, rank, ship, sign};
use super::{WorkDir, MANIFEST};
use crate::engine::Engine;
use crate::error::Error;
use crate::options::Mib;
use crate::progress::ProgressFactory;
use crate::progress::{human_count, per_second};
use crate::stages::dedup::{ClusterRule, DedupSummary};

/// The clusters file's name in `--out`, unless the run names it otherwise.
pub const OUT_CLUSTERS: &str = "clusters.jsonl";
/// The report's name in `--out`, unless the run names it otherwise.
pub const OUT_REPORT: &str = "report.json";

/// One unit of work of a sharded run. Budgets are in MiB.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Task {
    Sign {
        shard: usize,
    },
    /// The whole of `rank` in one process, sorting `memory` MiB of records at once.
    Rank {
        memory: Mib,
    },
    RankSplit {
        shard: usize,
        memory: Mib,
    },
    RankPlan {
        memory: Mib,
    },
    RankSort {
        range: usize,
    },
    RankExact {
        range: usize,
    },
    RankWrite {
        shard: usize,
    },
    RankFinish,
    Bands {
        shard: usize,
    },
    /// The rows of each shard that partition `partition`'s buckets hold (`ship.rs`).
    ConfirmNeeds {
        partition: usize,
    },
    /// Shard `shard`'s texts that the partitions need, read once and shipped to each.
    ConfirmTexts {
        shard: usize,
    },
    /// These partitions, confirmed together (a document is gathered once for all of them);
    /// one whose buckets need more documents than a group holds is confirmed in blocks, two
    /// of them held at a time, sized by `memory`.
    Confirm {
        partitions: Vec<usize>,
        memory: Mib,
    },
    /// Every greedy round still to run, in one process, each partition's job as
    /// `GreedyRound` runs it.
    Greedy {
        memory: Mib,
    },
    /// A partition's job of a greedy round; one whose walks need more documents than a group
    /// holds walks them in blocks, two held at a time, sized by `memory`.
    GreedyRound {
        round: u32,
        partition: usize,
        memory: Mib,
    },
    GreedySettle {
        round: u32,
    },
    /// The whole of `cluster` in one process.
    Cluster,
    ClusterPlan {
        memory: Mib,
    },
    ClusterEdges {
        partition: usize,
    },
    ClusterLocate {
        shard: usize,
    },
    ClusterStar {
        round: u32,
        part: usize,
    },
    ClusterRoots {
        part: usize,
    },
    ClusterAttributes {
        shard: usize,
    },
    ClusterClusters {
        part: usize,
    },
    ClusterVerdicts {
        shard: usize,
    },
    ClusterFinish,
    /// Shard `shard`'s kept records, into the run's `--out` directory.
    Apply {
        shard: usize,
    },
    /// The run's report, into the run's `--out` directory.
    Report,
}

/// A task's kind and its numbers, as its text spells them.
struct Parts<'a> {
    kind: &'a str,
    args: Vec<(&'static str, String)>,
}

impl Task {
    fn parts(&self) -> Parts<'static> {
        use Task::*;
        let n = |k: &'static str, v: usize| (k, v.to_string());
        let (kind, args) = match self {
            Sign { shard } => ("sign", vec![n("shard", *shard)]),
            Rank { memory } => ("rank", vec![("memory", memory.to_string())]),
            RankSplit { shard, memory } => (
                "rank-split",
                vec![n("shard", *shard), ("memory", memory.to_string())],
            ),
            RankPlan { memory } => ("rank-plan", vec![("memory", memory.to_string())]),
            RankSort { range } => ("rank-sort", vec![n("range", *range)]),
            RankExact { range } => ("rank-exact", vec![n("range", *range)]),
            RankWrite { shard } => ("rank-write", vec![n("shard", *shard)]),
            RankFinish => ("rank-finish", vec![]),
            Bands { shard } => ("bands", vec![n("shard", *shard)]),
            ConfirmNeeds { partition } => ("confirm-needs", vec![n("partition", *partition)]),
            ConfirmTexts { shard } => ("confirm-texts", vec![n("shard", *shard)]),
            Confirm { partitions, memory } => {
                let list: Vec<String> = partitions.iter().map(|p| p.to_string()).collect();
                (
                    "confirm",
                    vec![
                        ("partitions", list.join(",")),
                        ("memory", memory.to_string()),
                    ],
                )
            }
            Greedy { memory } => ("greedy", vec![("memory", memory.to_string())]),
            GreedyRound {
                round,
                partition,
                memory,
            } => (
                "greedy-round",
                vec![
                    ("round", round.to_string()),
                    n("partition", *partition),
                    ("memory", memory.to_string()),
                ],
            ),
            GreedySettle { round } => ("greedy-settle", vec![("round", round.to_string())]),
            Cluster => ("cluster", vec![]),
            ClusterPlan { memory } => ("cluster-plan", vec![("memory", memory.to_string())]),
            ClusterEdges { partition } => ("cluster-edges", vec![n("partition", *partition)]),
            ClusterLocate { shard } => ("cluster-locate", vec![n("shard", *shard)]),
            ClusterStar { round, part } => (
                "cluster-star",
                vec![("round", round.to_string()), n("part", *part)],
            ),
            ClusterRoots { part } => ("cluster-roots", vec![n("part", *part)]),
            ClusterAttributes { shard } => ("cluster-attributes", vec![n("shard", *shard)]),
            ClusterClusters { part } => ("cluster-clusters", vec![n("part", *part)]),
            ClusterVerdicts { shard } => ("cluster-verdicts", vec![n("shard", *shard)]),
            ClusterFinish => ("cluster-finish", vec![]),
            Apply { shard } => ("apply", vec![n("shard", *shard)]),
            Report => ("report", vec![]),
        };
        Parts { kind, args }
    }

    /// The task's kind: `sign`, `rank-sort`, `cluster-star`, ... (its text's first word).
    pub fn kind(&self) -> &'static str {
        self.parts().kind
    }

    /// The stage the task belongs to: `sign`, `rank`, `bands`, `confirm`, `greedy`,
    /// `cluster`, `apply` or `report`.
    pub fn stage(&self) -> &'static str {
        let k = self.kind();
        k.split('-').next().unwrap_or(k)
    }

    /// The task's shard, range, partition or part: what tells it from the other tasks of its
    /// kind in a wave (a confirm group's first partition).
    pub fn index(&self) -> Option<usize> {
        use Task::*;
        match self {
            Sign { shard }
            | RankSplit { shard, .. }
            | RankWrite { shard }
            | Bands { shard }
            | ClusterLocate { shard }
            | ClusterAttributes { shard }
            | ClusterVerdicts { shard }
            | ConfirmTexts { shard }
            | Apply { shard } => Some(*shard),
            RankSort { range } | RankExact { range } => Some(*range),
            Confirm { partitions, .. } => partitions.first().copied(),
            GreedyRound { partition, .. }
            | ClusterEdges { partition }
            | ConfirmNeeds { partition } => Some(*partition),
            ClusterStar { part, .. } | ClusterRoots { part } | ClusterClusters { part } => {
                Some(*part)
            }
            GreedySettle { round } => Some(*round as usize),
            _ => None,
        }
    }

    /// The round of a greedy job or a `cluster-star` task.
    pub fn round(&self) -> Option<u32> {
        match self {
            Task::GreedyRound { round, .. }
            | Task::GreedySettle { round }
            | Task::ClusterStar { round, .. } => Some(*round),
            _ => None,
        }
    }

    /// Whether the task only reads a few small files and writes one (a plan, a finish, the
    /// report): a scheduler may run it where it runs its loop.
    pub fn is_light(&self) -> bool {
        matches!(
            self,
            Task::RankPlan { .. }
                | Task::RankFinish
                | Task::ClusterPlan { .. }
                | Task::ClusterFinish
                | Task::Report
        )
    }
}

/// The numbers a parallel step of `rank` or `cluster` is given: a front end fills what it has
/// (the command line its flags, Python one index for all).
#[derive(Debug, Default, Clone, Copy)]
pub struct StepIndex {
    pub shard: Option<usize>,
    pub range: Option<usize>,
    pub partition: Option<usize>,
    pub part: Option<usize>,
    pub round: Option<u32>,
}

impl Task {
    /// The task of the parallel step `step` of `stage` (`rank` or `cluster`), as `neardup
    /// stage rank --step STEP` names it; its plan cuts the work for `memory` MiB a task.
    pub fn step(stage: &str, step: &str, at: StepIndex, memory: Mib) -> Result<Task, Error> {
        let need = |what: Option<usize>, flag: &str| {
            what.ok_or_else(|| Error::Param(format!("`{stage} --step {step}` needs --{flag}")))
        };
        use Task::*;
        Ok(match (stage, step) {
            ("rank", "split") => RankSplit {
                shard: need(at.shard, "shard")?,
                memory,
            },
            ("rank", "plan") => RankPlan { memory },
            ("rank", "sort") => RankSort {
                range: need(at.range, "range")?,
            },
            ("rank", "exact") => RankExact {
                range: need(at.range, "range")?,
            },
            ("rank", "write") => RankWrite {
                shard: need(at.shard, "shard")?,
            },
            ("rank", "finish") => RankFinish,
            ("cluster", "plan") => ClusterPlan { memory },
            ("cluster", "edges") => ClusterEdges {
                partition: need(at.partition, "partition")?,
            },
            ("cluster", "locate") => ClusterLocate {
                shard: need(at.shard, "shard")?,
            },
            ("cluster", "star") => ClusterStar {
                part: need(at.part, "part")?,
                round: at
                    .round
                    .ok_or_else(|| Error::Param("`cluster --step star` needs --round".into()))?,
            },
            ("cluster", "roots") => ClusterRoots {
                part: need(at.part, "part")?,
            },
            ("cluster", "attributes") => ClusterAttributes {
                shard: need(at.shard, "shard")?,
            },
            ("cluster", "clusters") => ClusterClusters {
                part: need(at.part, "part")?,
            },
            ("cluster", "verdicts") => ClusterVerdicts {
                shard: need(at.shard, "shard")?,
            },
            ("cluster", "finish") => ClusterFinish,
            _ => {
                return Err(Error::Param(format!(
                    "no {stage} step {step:?}: rank has split, plan, sort, exact, write and \
                     finish; cluster has plan, edges, locate, star, roots, attributes, clusters, \
                     verdicts and finish"
                )))
            }
        })
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.parts();
        f.write_str(p.kind)?;
        for (k, v) in p.args {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

impl FromStr for Task {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: String| {
            Error::Param(format!(
                "not a task: {s:?} ({why}); a task is a line `neardup stage next` printed, such \
                 as `sign shard=0`"
            ))
        };
        let mut words = s.split_whitespace();
        let kind = words.next().ok_or_else(|| bad("empty".into()))?;
        let mut args: Vec<(&str, &str)> = Vec::new();
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| bad(format!("`{w}` is not KEY=VALUE")))?;
            if args.iter().any(|a| a.0 == k) {
                return Err(bad(format!("{k} given twice")));
            }
            args.push((k, v));
        }
        let mut used = 0;
        // Counts the arguments found, so that one left over is refused (an optional one
        // absent counts for nothing).
        let mut get = |key: &str| -> Result<&str, Error> {
            let found = args.iter().find(|a| a.0 == key).map(|a| a.1);
            used += found.is_some() as usize;
            found.ok_or_else(|| bad(format!("{kind} needs {key}=")))
        };
        let num = |key: &str, v: &str| -> Result<usize, Error> {
            v.parse()
                .map_err(|_| bad(format!("{key}={v} is not a whole number")))
        };
        let mib = |v: &str| -> Result<Mib, Error> {
            match v.parse::<u64>() {
                Ok(m) if m >= 1 => Ok(Mib(m)),
                _ => Err(bad(format!(
                    "memory={v} is not a number of MiB, at least 1"
                ))),
            }
        };
        // Without `memory=`, the default (task lines written before they had one).
        let or_default = |got: Result<&str, Error>| -> Result<Mib, Error> {
            match got {
                Ok(m) => mib(m),
                Err(_) => Ok(Mib(crate::options::defaults::TASK_MEMORY_MIB)),
            }
        };
        let round = |v: &str| -> Result<u32, Error> {
            v.parse()
                .map_err(|_| bad(format!("round={v} is not a round number")))
        };
        use Task::*;
        let task = match kind {
            "sign" => Sign {
                shard: num("shard", get("shard")?)?,
            },
            "rank" => Rank {
                memory: mib(get("memory")?)?,
            },
            "rank-split" => RankSplit {
                shard: num("shard", get("shard")?)?,
                memory: mib(get("memory")?)?,
            },
            "rank-plan" => RankPlan {
                memory: mib(get("memory")?)?,
            },
            "rank-sort" => RankSort {
                range: num("range", get("range")?)?,
            },
            "rank-exact" => RankExact {
                range: num("range", get("range")?)?,
            },
            "rank-write" => RankWrite {
                shard: num("shard", get("shard")?)?,
            },
            "rank-finish" => RankFinish,
            "bands" => Bands {
                shard: num("shard", get("shard")?)?,
            },
            "confirm-needs" => ConfirmNeeds {
                partition: num("partition", get("partition")?)?,
            },
            "confirm-texts" => ConfirmTexts {
                shard: num("shard", get("shard")?)?,
            },
            "confirm" => {
                let list = get("partitions")?;
                let partitions = list
                    .split(',')
                    .map(|p| num("partitions", p))
                    .collect::<Result<Vec<_>, _>>()?;
                Confirm {
                    partitions,
                    memory: or_default(get("memory"))?,
                }
            }
            "greedy" => Greedy {
                memory: or_default(get("memory"))?,
            },
            "greedy-round" => GreedyRound {
                round: round(get("round")?)?,
                partition: num("partition", get("partition")?)?,
                memory: or_default(get("memory"))?,
            },
            "greedy-settle" => GreedySettle {
                round: round(get("round")?)?,
            },
            "cluster" => Cluster,
            "cluster-plan" => ClusterPlan {
                memory: mib(get("memory")?)?,
            },
            "cluster-edges" => ClusterEdges {
                partition: num("partition", get("partition")?)?,
            },
            "cluster-locate" => ClusterLocate {
                shard: num("shard", get("shard")?)?,
            },
            "cluster-star" => ClusterStar {
                round: round(get("round")?)?,
                part: num("part", get("part")?)?,
            },
            "cluster-roots" => ClusterRoots {
                part: num("part", get("part")?)?,
            },
            "cluster-attributes" => ClusterAttributes {
                shard: num("shard", get("shard")?)?,
            },
            "cluster-clusters" => ClusterClusters {
                part: num("part", get("part")?)?,
            },
            "cluster-verdicts" => ClusterVerdicts {
                shard: num("shard", get("shard")?)?,
            },
            "cluster-finish" => ClusterFinish,
            "apply" => Apply {
                shard: num("shard", get("shard")?)?,
            },
            "report" => Report,
            other => return Err(bad(format!("no task kind {other:?}"))),
        };
        if used != args.len() {
            let known = task.parts().args;
            if let Some(extra) = args.iter().find(|a| !known.iter().any(|k| k.0 == a.0)) {
                return Err(bad(format!("{kind} takes no {}=", extra.0)));
            }
        }
        Ok(task)
    }
}

impl Serialize for Task {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Task {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How [`next_wave`] cuts the run into tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waves {
    /// `rank`, the greedy rounds and `cluster` as their parallel steps (`true`), or each as
    /// one task in one process.
    pub steps: bool,
    /// What a task of `confirm`, and of `rank` or `cluster` when they run as steps, holds at
    /// most.
    pub task_memory: Mib,
    /// Id records the one-process `rank` sorts at once.
    pub sort_memory: Mib,
    /// How many tasks confirm the partitions, each a group of them (0: one per partition).
    pub confirm_tasks: usize,
}

impl Default for Waves {
    fn default() -> Self {
        use crate::options::defaults::{SORT_MEMORY_MIB, TASK_MEMORY_MIB};
        Waves {
            steps: true,
            task_memory: Mib(TASK_MEMORY_MIB),
            sort_memory: Mib(SORT_MEMORY_MIB),
            confirm_tasks: 0,
        }
    }
}

/// The tasks that may run now, in any order or all at once: empty once the run is complete.
/// Without an `--out` directory (`dedup --work-dir`, or `stage init` without `--out`) the run
/// ends with `cluster`: its caller applies the shards where it likes.
pub fn next_wave(work: &WorkDir, how: &Waves) -> Result<Vec<Task>, Error> {
    let shards = 0..work.shards();
    let parts = 0..work.partitions();
    let clustered = cluster::summary_if_done(work)?.is_some();
    let greedy = work.config().cluster == ClusterRule::Greedy;
    let confirmed = clustered || {
        let mut all = true;
        for p in parts.clone() {
            all &= work.table_done(&work.pairs_file(p))?;
        }
        all
    };
    let ranked = confirmed || rank::tasks::ranked(work)?;
    if !ranked {
        let mut wave = Vec::new();
        for s in shards.clone() {
            if !work.table_done(&work.sign_file(s))? {
                wave.push(Task::Sign { shard: s });
            }
        }
        if !wave.is_empty() {
            return Ok(wave);
        }
        return rank_wave(work, how);
    }
    if !confirmed {
        let mut wave = Vec::new();
        for s in shards.clone() {
            if !bands::banded(work, s)? {
                wave.push(Task::Bands { shard: s });
            }
        }
        if !wave.is_empty() {
            return Ok(wave);
        }
        let mut left = Vec::new();
        for p in parts.clone() {
            if !work.table_done(&work.pairs_file(p))? {
                left.push(p);
            }
        }
        if how.steps {
            // Each shard read once for every confirm group, not once by each.
            let mut wave = Vec::new();
            for &p in &left {
                if !ship::needs_done(work, p)? {
                    wave.push(Task::ConfirmNeeds { partition: p });
                }
            }
            if !wave.is_empty() {
                return Ok(wave);
            }
            for s in shards.clone() {
                if !ship::texts_done(work, s)? {
                    wave.push(Task::ConfirmTexts { shard: s });
                }
            }
            if !wave.is_empty() {
                return Ok(wave);
            }
        }
        let tasks = match how.confirm_tasks {
            0 => left.len(),
            n => n.min(left.len()),
        };
        return Ok((0..tasks)
            .map(|g| Task::Confirm {
                partitions: left.iter().copied().skip(g).step_by(tasks).collect(),
                memory: how.task_memory,
            })
            .collect());
    }
    if !clustered && greedy && greedy::converged(work)?.is_none() {
        if !how.steps {
            return Ok(vec![Task::Greedy {
                memory: how.task_memory,
            }]);
        }
        let mut r = 0;
        while greedy::round_summary(work, r)?.is_some() {
            r += 1;
        }
        let mut wave = Vec::new();
        if r > 0 {
            for p in parts.clone() {
                if !greedy::part_done(work, r, p)? {
                    wave.push(Task::GreedyRound {
                        round: r,
                        partition: p,
                        memory: how.task_memory,
                    });
                }
            }
        }
        if wave.is_empty() {
            wave.push(Task::GreedySettle { round: r });
        }
        return Ok(wave);
    }
    let Some(out) = &work.manifest.out else {
        if !clustered {
            return cluster_wave(work, how, clustered);
        }
        return Ok(Vec::new());
    };
    if !clustered || !delivered(work, "cluster")? {
        return cluster_wave(work, how, clustered);
    }
    let mut wave = Vec::new();
    for s in shards {
        if !delivered(work, &format!("apply-{s:05}"))? {
            wave.push(Task::Apply { shard: s });
        }
    }
    if wave.is_empty() && out.report.is_some() && !delivered(work, "report")? {
        wave.push(Task::Report);
    }
    Ok(wave)
}

/// The error of a loop over waves that got the wave it just ran again: its tasks ran and left
/// the work directory as it was (a file of it unreadable or removed behind the run's back).
pub fn no_progress(work: &WorkDir, wave: &[Task]) -> Error {
    Error::Work {
        path: work.root().display().to_string(),
        msg: format!(
            "the tasks {} ran and are due again: something in the work directory is not as \
             they left it; start again in an empty work directory",
            wave.iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The wave of `rank`, once every shard is signed.
fn rank_wave(work: &WorkDir, how: &Waves) -> Result<Vec<Task>, Error> {
    if !how.steps {
        return Ok(vec![Task::Rank {
            memory: how.sort_memory,
        }]);
    }
    let mut wave = Vec::new();
    for s in 0..work.shards() {
        if !rank::tasks::split_done(work, s)? {
            wave.push(Task::RankSplit {
                shard: s,
                memory: how.task_memory,
            });
        }
    }
    if !wave.is_empty() {
        return Ok(wave);
    }
    let Some(plan) = rank::tasks::plan_if_made(work)? else {
        return Ok(vec![Task::RankPlan {
            memory: how.task_memory,
        }]);
    };
    for r in 0..plan.ranges {
        if !rank::tasks::sort_done(work, r)? {
            wave.push(Task::RankSort { range: r });
        }
    }
    if wave.is_empty() && work.config().exact {
        for r in 0..plan.ranges {
            if !rank::tasks::exact_done(work, r)? {
                wave.push(Task::RankExact { range: r });
            }
        }
    }
    if wave.is_empty() {
        for s in 0..work.shards() {
            if !work.table_done(&work.rank_file(s))? {
                wave.push(Task::RankWrite { shard: s });
            }
        }
    }
    if wave.is_empty() {
        wave.push(Task::RankFinish);
    }
    Ok(wave)
}

/// The wave of `cluster`, once every partition is confirmed (and the greedy rounds over).
fn cluster_wave(work: &WorkDir, how: &Waves, clustered: bool) -> Result<Vec<Task>, Error> {
    if !how.steps {
        return Ok(vec![Task::Cluster]);
    }
    if clustered {
        // Only the copy into `--out` is left: `finish` skips the stage and copies.
        return Ok(vec![Task::ClusterFinish]);
    }
    let Some(plan) = cluster::tasks::plan_if_made(work)? else {
        return Ok(vec![Task::ClusterPlan {
            memory: how.task_memory,
        }]);
    };
    let done = |name: String| cluster::tasks::step_done(work, &name);
    let mut wave = Vec::new();
    let shards = 0..work.shards();
    let parts = 0..plan.parts;
    for p in 0..work.partitions() {
        if !done(format!("edges-{p:05}"))? {
            wave.push(Task::ClusterEdges { partition: p });
        }
    }
    if !wave.is_empty() {
        return Ok(wave);
    }
    for s in shards.clone() {
        if !done(format!("locate-{s:05}"))? {
            wave.push(Task::ClusterLocate { shard: s });
        }
    }
    if !wave.is_empty() {
        return Ok(wave);
    }
    let mut r = 0;
    loop {
        for k in parts.clone() {
            if !done(format!("star-{r:04}-{k:05}"))? {
                wave.push(Task::ClusterStar { round: r, part: k });
            }
        }
        if !wave.is_empty() {
            return Ok(wave);
        }
        match cluster::tasks::round_done(work, r)? {
            Some(true) => break,
            _ => r += 1,
        }
    }
    type Step = (&'static str, fn(usize) -> Task, bool);
    let steps: [Step; 3] = [
        ("roots", |k| Task::ClusterRoots { part: k }, false),
        ("attributes", |s| Task::ClusterAttributes { shard: s }, true),
        ("clusters", |k| Task::ClusterClusters { part: k }, false),
    ];
    for (name, task, per_shard) in steps {
        let range = if per_shard {
            shards.clone()
        } else {
            parts.clone()
        };
        for i in range {
            if !done(format!("{name}-{i:05}"))? {
                wave.push(task(i));
            }
        }
        if !wave.is_empty() {
            return Ok(wave);
        }
    }
    // `verdicts` writes the shard's table of the stage, not a step summary.
    for s in shards {
        if !work.table_done(&work.cluster_file(s))? {
            wave.push(Task::ClusterVerdicts { shard: s });
        }
    }
    if wave.is_empty() {
        wave.push(Task::ClusterFinish);
    }
    Ok(wave)
}

/// Where a `sign` task gets its engine.
pub trait Engines {
    /// The engine for shard `shard` of `work` (built for its size, or one kept from before).
    fn engine(&mut self, work: &WorkDir, shard: usize) -> Result<&mut dyn Engine, Error>;
}

/// One engine, given, for every shard.
pub struct GivenEngine<'a>(pub &'a mut dyn Engine);

impl Engines for GivenEngine<'_> {
    fn engine(&mut self, _: &WorkDir, _: usize) -> Result<&mut dyn Engine, Error> {
        Ok(&mut *self.0)
    }
}

/// No engine: for a front end that runs no `sign` task.
pub struct NoEngine;

impl Engines for NoEngine {
    fn engine(&mut self, _: &WorkDir, _: usize) -> Result<&mut dyn Engine, Error> {
        Err(Error::Param("a sign task needs an engine here".into()))
    }
}

/// Writes a run's reports (`report::write_stage_reports`, which sits above the stages):
/// `(work, paths, output, seconds)`.
pub type ReportWriter = fn(&WorkDir, &[String], &str, Option<f64>) -> Result<DedupSummary, Error>;

/// What a task may need beside the work directory.
pub struct TaskEnv<'a> {
    pub engines: &'a mut dyn Engines,
    pub progress: &'a ProgressFactory,
    /// For the `report` task.
    pub reports: Option<ReportWriter>,
    /// Where `cluster` and `cluster-finish` copy the clusters and pairs files: `None`, into
    /// the run's `--out` directory (the clusters file only).
    pub copies: Option<(Option<String>, Option<String>)>,
}

/// What one line of a task's account says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// Work done now.
    Ran(String),
    /// Done before: nothing to do.
    Skipped(String),
    /// Neither: a note (a greedy round past the last, ...).
    Note(String),
}

impl Said {
    /// The line under a command's name, `seconds` after it started: `neardup stage {line}`.
    pub fn line(&self, seconds: f64) -> String {
        match self {
            Said::Ran(s) => format!("{s}; {seconds:.2} s"),
            Said::Skipped(s) => format!("{s}: done already, skipped"),
            Said::Note(s) => s.clone(),
        }
    }
}

/// What a task did.
#[derive(Debug, Clone)]
pub struct TaskReport {
    pub task: Task,
    pub said: Vec<Said>,
    pub seconds: f64,
    /// The stage's summary as JSON when it ran now (`null` when it was done), a list of them
    /// for a confirm group; a plan's count of ranges or parts; the greedy rounds' `rounds_now`
    /// and `last`; a finished `cluster`'s summary whether it ran now or before.
    pub result: serde_json::Value,
}

impl TaskReport {
    /// Whether any of it ran now.
    pub fn ran(&self) -> bool {
        self.said.iter().any(|s| matches!(s, Said::Ran(_)))
    }

    /// The report as JSON: `{"task", "ran", "seconds", "lines", "result"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let lines: Vec<String> = self.said.iter().map(|s| s.line(self.seconds)).collect();
        serde_json::json!({
            "task": self.task.to_string(),
            "ran": self.ran(),
            "seconds": self.seconds,
            "lines": lines,
            "result": self.result,
        })
    }
}

fn json<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("a summary is JSON")
}

impl Task {
    /// Run the task (a no-op when it is done).
    pub fn run(&self, work: &WorkDir, env: &mut TaskEnv) -> Result<TaskReport, Error> {
        let t0 = Instant::now();
        let (said, result) = self.work(work, env)?;
        Ok(TaskReport {
            task: self.clone(),
            said,
            seconds: t0.elapsed().as_secs_f64(),
            result,
        })
    }

    fn work(
        &self,
        w: &WorkDir,
        env: &mut TaskEnv,
    ) -> Result<(Vec<Said>, serde_json::Value), Error> {
        use serde_json::Value;
        use Task::*;
        let one = |ran: bool, what: String| {
            vec![if ran {
                Said::Ran(what)
            } else {
                Said::Skipped(what)
            }]
        };
        let progress = env.progress;
        Ok(match self {
            Sign { shard } => {
                w.check_shard(*shard)?;
                let e = env.engines.engine(w, *shard)?;
                match sign::sign(w, *shard, e, progress)? {
                    Some(s) => {
                        let line = format!(
                            "sign: shard {shard}, {} documents, {} shingles/s [{}]",
                            s.documents,
                            human_count(per_second(s.shingles as f64, s.seconds)),
                            e.info().summary()
                        );
                        (vec![Said::Ran(line)], json(&s))
                    }
                    None => (one(false, format!("sign: shard {shard}")), Value::Null),
                }
            }
            Rank { memory } => match rank::job::rank_within(w, progress, memory.bytes())? {
                Some(s) => (vec![Said::Ran(ranked(&s, "bucket"))], json(&s)),
                None => (one(false, "rank".into()), Value::Null),
            },
            RankSplit { shard, memory } => match rank::tasks::split(w, *shard, memory.bytes())? {
                Some(x) => (
                    one(
                        true,
                        format!("rank split: shard {shard}, {} documents", x.rows),
                    ),
                    json(&x),
                ),
                None => (
                    one(false, format!("rank split: shard {shard}")),
                    Value::Null,
                ),
            },
            RankPlan { memory } => {
                let asked = memory.bytes();
                let (p, how) = rank::tasks::plan_status(w, asked)?;
                let ranges = format!(
                    "{} {}: run `--step sort --range R` for R in 0 to {}",
                    p.ranges,
                    if p.ranges == 1 { "range" } else { "ranges" },
                    p.ranges - 1
                );
                (
                    plan_line("rank", ranges, how, p.budget, asked),
                    json(&p.ranges),
                )
            }
            RankSort { range } => match rank::tasks::sort(w, *range)? {
                Some(n) => (
                    one(true, format!("rank sort: range {range}, {n} documents")),
                    json(&n),
                ),
                None => (one(false, format!("rank sort: range {range}")), Value::Null),
            },
            RankExact { range } => match rank::tasks::exact(w, *range)? {
                Some(n) => (
                    one(
                        true,
                        format!("rank exact: range {range}, {n} exact duplicates"),
                    ),
                    json(&n),
                ),
                None => (
                    one(false, format!("rank exact: range {range}")),
                    Value::Null,
                ),
            },
            RankWrite { shard } => {
                let ran = rank::tasks::write(w, *shard)?;
                (one(ran, format!("rank write: shard {shard}")), json(&ran))
            }
            RankFinish => match rank::tasks::finish(w)? {
                Some(s) => (vec![Said::Ran(ranked(&s, "range"))], json(&s)),
                None => (one(false, "rank".into()), Value::Null),
            },
            Bands { shard } => {
                let ran = bands::bands(w, *shard)?;
                (one(ran, format!("bands: shard {shard}")), json(&ran))
            }
            ConfirmNeeds { partition } => match confirm::needs(w, *partition, progress)? {
                Some(s) => (
                    one(
                        true,
                        format!(
                            "confirm needs: partition {partition}, {} documents",
                            s.documents
                        ),
                    ),
                    json(&s),
                ),
                None => (
                    one(false, format!("confirm needs: partition {partition}")),
                    Value::Null,
                ),
            },
            ConfirmTexts { shard } => match gather::ship_texts(w, *shard, progress)? {
                Some(s) => (
                    one(
                        true,
                        format!(
                            "confirm texts: shard {shard}, {} documents, {} texts shipped",
                            s.documents, s.written
                        ),
                    ),
                    json(&s),
                ),
                None => (
                    one(false, format!("confirm texts: shard {shard}")),
                    Value::Null,
                ),
            },
            Confirm { partitions, memory } => {
                let all = confirm::confirm_within(
                    w,
                    partitions,
                    confirm::GROUP_DOCS,
                    confirm::block_bytes(*memory),
                    progress,
                )?;
                let mut said = Vec::new();
                for (p, s) in partitions.iter().zip(&all) {
                    said.push(match s {
                        Some(s) => Said::Ran(format!(
                            "confirm: partition {p}, {} buckets, {} pairs checked, {} confirmed",
                            s.buckets, s.counts.checked, s.counts.confirmed
                        )),
                        None => Said::Skipped(format!("confirm: partition {p}")),
                    });
                }
                (said, json(&all))
            }
            Greedy { memory } => {
                need_greedy(w)?;
                let ran = greedy::jobs::rounds_within(
                    w,
                    confirm::GROUP_DOCS,
                    confirm::block_bytes(*memory),
                    progress,
                )?;
                let line = format!("greedy: {ran} rounds settled now, every unit decided");
                let last = greedy::converged(w)?;
                let v = serde_json::json!({ "rounds_now": ran, "last": last });
                (vec![Said::Ran(line)], v)
            }
            GreedyRound {
                round,
                partition,
                memory,
            } => {
                if let Some(past) = past_last_round(w, *round)? {
                    return Ok((vec![past], Value::Null));
                }
                let job = greedy::jobs::round_within(
                    w,
                    *round,
                    *partition,
                    confirm::GROUP_DOCS,
                    confirm::block_bytes(*memory),
                    progress,
                )?;
                match job {
                    Some(s) => (
                        one(
                            true,
                            format!(
                                "greedy: round {round}, partition {partition}, {} undecided \
                                 units, {} pairs checked",
                                s.undecided, s.counts.checked
                            ),
                        ),
                        json(&s),
                    ),
                    None => (
                        one(
                            false,
                            format!("greedy: round {round}, partition {partition}"),
                        ),
                        Value::Null,
                    ),
                }
            }
            GreedySettle { round } => {
                if let Some(past) = past_last_round(w, *round)? {
                    return Ok((vec![past], Value::Null));
                }
                let s = match greedy::settle(w, *round, progress)? {
                    Some(s) => s,
                    None => greedy::round_summary(w, *round)?.expect("settled"),
                };
                let next = if s.undecided == 0 {
                    "every unit decided: run `neardup stage cluster`".to_string()
                } else {
                    format!("run round {} next", round + 1)
                };
                let line = format!(
                    "greedy: round {round} settled, {} undecided; {next}",
                    s.undecided
                );
                (vec![Said::Ran(line)], json(&s))
            }
            Cluster => {
                let (clusters, pairs) = copies(w, env)?;
                let ran =
                    super::deliver::cluster_to(w, clusters.as_deref(), pairs.as_deref(), progress)?;
                delivered_copies(w, env, [&clusters, &pairs])?;
                clustered_line(w, ran)?
            }
            ClusterPlan { memory } => {
                let asked = memory.bytes();
                let (p, how) = cluster::tasks::plan_status(w, asked)?;
                let parts = format!(
                    "{} {}: run `--step star --round R --part K` for K in 0 to {}",
                    p.parts,
                    if p.parts == 1 { "part" } else { "parts" },
                    p.parts - 1
                );
                (
                    plan_line("cluster", parts, how, p.budget, asked),
                    json(&p.parts),
                )
            }
            ClusterEdges { partition } => {
                let ran = cluster::tasks::edges(w, *partition)?;
                (
                    one(ran, format!("cluster edges: partition {partition}")),
                    json(&ran),
                )
            }
            ClusterLocate { shard } => {
                let ran = cluster::tasks::locate(w, *shard)?;
                (
                    one(ran, format!("cluster locate: shard {shard}")),
                    json(&ran),
                )
            }
            ClusterStar { round, part } => {
                let r = *round;
                let star = cluster::tasks::star(w, r, *part)?;
                let mut said = one(
                    star.is_some(),
                    format!("cluster star: round {r}, part {part}"),
                );
                match cluster::tasks::round_done(w, r)? {
                    Some(true) => said.push(Said::Ran(format!(
                        "cluster star: round {r} found the components: run `--step roots` next"
                    ))),
                    Some(false) => said.push(Said::Ran(format!(
                        "cluster star: round {r} done in every part: run round {} next",
                        r + 1
                    ))),
                    None => {}
                }
                (said, json(&star))
            }
            ClusterRoots { part } => {
                let ran = cluster::tasks::roots(w, *part)?;
                (one(ran, format!("cluster roots: part {part}")), json(&ran))
            }
            ClusterAttributes { shard } => {
                let ran = cluster::tasks::attributes(w, *shard)?;
                (
                    one(ran, format!("cluster attributes: shard {shard}")),
                    json(&ran),
                )
            }
            ClusterClusters { part } => {
                let ran = cluster::tasks::clusters(w, *part)?;
                (
                    one(ran, format!("cluster clusters: part {part}")),
                    json(&ran),
                )
            }
            ClusterVerdicts { shard } => {
                let ran = cluster::tasks::verdicts(w, *shard)?;
                (
                    one(ran, format!("cluster verdicts: shard {shard}")),
                    json(&ran),
                )
            }
            ClusterFinish => {
                let (clusters, pairs) = copies(w, env)?;
                let ran =
                    super::deliver::cluster_finish_to(w, clusters.as_deref(), pairs.as_deref())?;
                delivered_copies(w, env, [&clusters, &pairs])?;
                clustered_line(w, ran)?
            }
            Apply { shard } => {
                w.check_shard(*shard)?;
                let out = w.out_path(*shard)?;
                let name = format!("apply-{shard:05}");
                if delivered(w, &name)? {
                    return Ok((one(false, format!("apply: shard {shard}")), Value::Null));
                }
                let out = out.display().to_string();
                let s = super::deliver::apply_to(w, *shard, &out, progress)?;
                deliver(w, &name, &[Path::new(&out)])?;
                let line = format!("apply: shard {shard}, {} written to {out}", s.written);
                (vec![Said::Ran(line)], json(&s))
            }
            Report => {
                let dir = w.need_out()?;
                let out = w.manifest.out.as_ref().expect("need_out");
                let Some(name) = &out.report else {
                    return Err(Error::Param(format!(
                        "this run writes no report (none named for --out {})",
                        out.dir
                    )));
                };
                if delivered(w, "report")? {
                    return Ok((one(false, "report".into()), Value::Null));
                }
                let write = env.reports.ok_or_else(|| {
                    Error::Param("the report task needs a report writer here".into())
                })?;
                let path = dir.join(name).display().to_string();
                let s = write(w, std::slice::from_ref(&path), &out.dir, None)?;
                deliver(w, "report", &[Path::new(&path)])?;
                (
                    vec![Said::Ran(format!("report: {path}"))],
                    run_counts(w, &s)?,
                )
            }
        })
    }
}

/// Where `cluster` copies its files to: where the front end asked, else into `--out`.
fn copies(w: &WorkDir, env: &TaskEnv) -> Result<(Option<String>, Option<String>), Error> {
    if let Some(c) = &env.copies {
        return Ok(c.clone());
    }
    let (Some(dir), Some(out)) = (w.out_dir(), &w.manifest.out) else {
        return Ok((None, None));
    };
    let at = |n: &Option<String>| n.as_ref().map(|n| dir.join(n).display().to_string());
    Ok((at(&out.clusters), at(&out.pairs)))
}

/// Mark the files `cluster` copied into `--out` as delivered.
fn delivered_copies(w: &WorkDir, env: &TaskEnv, files: [&Option<String>; 2]) -> Result<(), Error> {
    if env.copies.is_none() && w.manifest.out.is_some() {
        let paths: Vec<&Path> = files.into_iter().flatten().map(Path::new).collect();
        deliver(w, "cluster", &paths)?;
    }
    Ok(())
}

/// A finished run's main counts, as the `report` task returns them: documents read and
/// written, near and exact duplicates, clusters, seconds and the engine.
pub fn run_counts(w: &WorkDir, s: &DedupSummary) -> Result<serde_json::Value, Error> {
    Ok(serde_json::json!({
        "documents_read": s.scan.documents,
        "documents_written": s.documents_written,
        "near_duplicates": s.cluster.near_duplicates,
        "exact_duplicates": s.cluster.exact_duplicates,
        "clusters": s.cluster.clusters,
        "seconds": s.seconds,
        "engine": super::summary::engine_info(w)?.to_string(),
    }))
}

/// A finished `cluster`'s line and summary (`ran`: whether it ran now).
fn clustered_line(
    w: &WorkDir,
    ran: Option<cluster::ClusterSummary>,
) -> Result<(Vec<Said>, serde_json::Value), Error> {
    Ok(match ran {
        Some(s) => (
            vec![Said::Ran(format!(
                "cluster: {} near duplicates, {} clusters, {} documents written",
                s.stats.near_duplicates, s.stats.clusters, s.documents_written
            ))],
            json(&s),
        ),
        None => (
            vec![Said::Skipped("cluster".into())],
            json(&cluster::summary(w)?),
        ),
    })
}

/// Refuse greedy rounds in a run that joins components.
fn need_greedy(w: &WorkDir) -> Result<(), Error> {
    if w.config().cluster != ClusterRule::Greedy {
        return Err(Error::Param(
            "this work directory's run joins components (`--cluster components`): it has no \
             greedy rounds; run `neardup stage cluster`"
                .into(),
        ));
    }
    Ok(())
}

/// The note for a greedy round past the one that decided every unit (a scheduler's job for a
/// round that never comes: nothing to run).
fn past_last_round(w: &WorkDir, round: u32) -> Result<Option<Said>, Error> {
    need_greedy(w)?;
    Ok(match greedy::converged(w)? {
        Some(last) if round > last => Some(Said::Note(format!(
            "greedy: {}",
            greedy::past_the_last(round, last)
        ))),
        _ => None,
    })
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

/// What a `plan` step says: the plan made now, the plan made before (for `planned` bytes a
/// task; it stands, whatever is `asked` now), or the stage finished.
fn plan_line(
    stage: &str,
    plan: String,
    how: rank::tasks::Planned,
    planned: u64,
    asked: usize,
) -> Vec<Said> {
    use rank::tasks::Planned;
    vec![match how {
        Planned::Now => Said::Ran(format!("{stage} plan: {plan}")),
        Planned::Done => Said::Skipped(format!("{stage} plan: {stage} is finished")),
        Planned::Before => {
            let other = match planned == asked as u64 {
                true => String::new(),
                false => format!(", not the {} asked now", asked >> 20),
            };
            Said::Ran(format!(
                "{stage} plan: {plan} (planned before, for --task-memory {}{other}: that plan \
                 stands)",
                planned >> 20
            ))
        }
    }]
}

/// What a task delivered into `--out`: each file and its length when it landed.
#[derive(Debug, Serialize, Deserialize)]
struct Delivered {
    files: Vec<(String, u64)>,
}

fn delivered_file(w: &WorkDir, name: &str) -> PathBuf {
    w.root().join("delivered").join(format!("{name}.json"))
}

/// Whether the task `name` delivered its files into `--out`, and they are still there as it
/// left them (a file an earlier run left in the same place is not this run's).
fn delivered(w: &WorkDir, name: &str) -> Result<bool, Error> {
    let Some(d) = w.read_json::<Delivered>(&delivered_file(w, name))? else {
        return Ok(false);
    };
    Ok(d.files.iter().all(|(path, bytes)| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == *bytes)
    }))
}

/// Record that the task `name` delivered `paths` into `--out`.
fn deliver(w: &WorkDir, name: &str, paths: &[&Path]) -> Result<(), Error> {
    let mut files = Vec::new();
    for p in paths {
        let bytes = std::fs::metadata(p)
            .map_err(|e| Error::io(&p.display().to_string(), e))?
            .len();
        files.push((crate::io::paths::location(p).display().to_string(), bytes));
    }
    w.write_json(&delivered_file(w, name), &Delivered { files })
}

impl WorkDir {
    /// The run's `--out` directory, when `init` was given one (resolved like a shard's path).
    pub fn out_dir(&self) -> Option<PathBuf> {
        self.manifest
            .out
            .as_ref()
            .map(|o| self.manifest.resolve(&o.dir))
    }

    /// [`WorkDir::out_dir`], or an error saying the run was made without one.
    pub fn need_out(&self) -> Result<PathBuf, Error> {
        self.out_dir().ok_or_else(|| Error::Work {
            path: self.root().join(MANIFEST).display().to_string(),
            msg: "made without --out: the apply and report tasks write into the run's --out \
                  directory; run `neardup stage apply` and `stage report` with their paths \
                  instead"
                .into(),
        })
    }

    /// Where the `apply` task writes shard `shard`'s output: the shard's file name, in
    /// `--out`.
    pub fn out_path(&self, shard: usize) -> Result<PathBuf, Error> {
        let out = self.need_out()?;
        Ok(out.join(super::out_name(&self.manifest.shards[shard].path)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Task> {
        use Task::*;
        vec![
            Sign { shard: 0 },
            Rank { memory: Mib(256) },
            RankSplit {
                shard: 3,
                memory: Mib(1),
            },
            RankPlan { memory: Mib(1024) },
            RankSort { range: 7 },
            RankExact { range: 0 },
            RankWrite { shard: 12 },
            RankFinish,
            Bands { shard: 99_999 },
            ConfirmNeeds { partition: 7 },
            ConfirmTexts { shard: 12 },
            Confirm {
                partitions: vec![0, 4, 8],
                memory: Mib(256),
            },
            Confirm {
                partitions: vec![65_535],
                memory: Mib(1),
            },
            Greedy { memory: Mib(256) },
            GreedyRound {
                round: 2,
                partition: 1,
                memory: Mib(1024),
            },
            GreedySettle { round: 0 },
            Cluster,
            ClusterPlan { memory: Mib(1) },
            ClusterEdges { partition: 5 },
            ClusterLocate { shard: 1 },
            ClusterStar {
                round: 4_294_967_295,
                part: 3,
            },
            ClusterRoots { part: 0 },
            ClusterAttributes { shard: 2 },
            ClusterClusters { part: 1 },
            ClusterVerdicts { shard: 2 },
            ClusterFinish,
            Apply { shard: usize::MAX },
            Report,
        ]
    }

    #[test]
    fn every_task_reads_back_from_its_text() {
        for t in every_kind() {
            let text = t.to_string();
            assert_eq!(text.parse::<Task>().unwrap(), t, "{text}");
            assert!(!text.contains('\n') && !text.contains('\''), "{text}");
            assert!(text.starts_with(t.kind()), "{text}");
            let j = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Task>(&j).unwrap(), t);
        }
    }

    #[test]
    fn every_step_is_the_task_of_its_name() {
        let all = StepIndex {
            shard: Some(1),
            range: Some(2),
            partition: Some(3),
            part: Some(4),
            round: Some(5),
        };
        let steps = [
            ("rank", "split plan sort exact write finish"),
            (
                "cluster",
                "plan edges locate star roots attributes clusters verdicts finish",
            ),
        ];
        for (stage, names) in steps {
            for step in names.split(' ') {
                let t = Task::step(stage, step, all, Mib(7)).unwrap();
                assert_eq!(t.kind(), format!("{stage}-{step}"));
                assert_eq!(t.to_string().parse::<Task>().unwrap(), t);
                if !t.is_light() {
                    let none = Task::step(stage, step, StepIndex::default(), Mib(7));
                    let e = none.unwrap_err().to_string();
                    assert!(
                        e.contains(&format!("`{stage} --step {step}` needs --")),
                        "{e}"
                    );
                }
            }
        }
        let e = Task::step("rank", "star", all, Mib(7))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no rank step \"star\""), "{e}");
    }

    #[test]
    fn arguments_read_in_any_order_with_any_spaces() {
        let t: Task = "  cluster-star   part=3 round=1 ".parse().unwrap();
        assert_eq!(t, Task::ClusterStar { round: 1, part: 3 });
        assert_eq!(t.stage(), "cluster");
        assert_eq!((t.index(), t.round()), (Some(3), Some(1)));
    }

    /// Lines of the tasks that took their memory later, written before they did.
    #[test]
    fn lines_without_memory_take_the_default() {
        let memory = Mib(crate::options::defaults::TASK_MEMORY_MIB);
        for (line, task) in [
            (
                "confirm partitions=1,2",
                Task::Confirm {
                    partitions: vec![1, 2],
                    memory,
                },
            ),
            ("greedy", Task::Greedy { memory }),
            (
                "greedy-round round=2 partition=1",
                Task::GreedyRound {
                    round: 2,
                    partition: 1,
                    memory,
                },
            ),
        ] {
            assert_eq!(line.parse::<Task>().unwrap(), task, "{line}");
        }
    }

    #[test]
    fn bad_task_lines_are_refused_by_what_is_wrong() {
        for (line, why) in [
            ("", "empty"),
            ("sing shard=0", "no task kind \"sing\""),
            ("sign", "sign needs shard="),
            ("sign shard=x", "shard=x is not a whole number"),
            ("sign shard=-1", "shard=-1 is not a whole number"),
            ("sign shard=1 shard=2", "shard given twice"),
            ("sign shard=1 range=2", "sign takes no range="),
            ("sign 1", "`1` is not KEY=VALUE"),
            ("rank-plan memory=0", "memory=0 is not a number of MiB"),
            ("greedy memory=x", "memory=x is not a number of MiB"),
            (
                "greedy-round round=1 partition=0 extra=1",
                "greedy-round takes no extra=",
            ),
            ("report extra=1", "report takes no extra="),
            (
                "confirm partitions=1,,2",
                "partitions= is not a whole number",
            ),
            ("cluster-star round=1", "cluster-star needs part="),
        ] {
            let e = line.parse::<Task>().unwrap_err().to_string();
            assert!(e.contains(why), "{line:?}: {e}");
            assert!(e.contains("neardup stage next"), "{e}");
        }
    }
}
