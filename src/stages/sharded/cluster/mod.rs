//! Stage 5, over all partitions: union-find over every partition's confirmed pairs (and the
//! exact duplicates) by rank, so each root is its cluster's smallest id; who survives under the
//! keep policy. Per shard out: `tag` (the root's id, null for a document in no cluster),
//! `survives`, and where a `--tag-only` run's policy may keep another than the root, `survivor`
//! (the id of the document that survives, null likewise); beside them the clusters and pairs
//! files as `dedup --clusters/--pairs` write them, and the counts.
//!
//! Its two forms write the same files: [`job`], one process, and [`tasks`], parallel tasks that
//! hold a part of the members each. What both read and write is here.

pub mod job;
pub mod tasks;

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::table::{f64s, u64s};
use super::WorkDir;
use crate::error::Error;
use crate::stages::dedup::{largest_cluster_hops, ClusterRule, ClusterStats, GroupCounts};

/// One of the largest clusters, for the report: its members' places, so `apply` can take the
/// beginnings of their texts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LargeCluster {
    pub root: String,
    pub size: usize,
    /// `(shard, row, id)` of the first members in id order.
    pub members: Vec<(usize, u64, String)>,
}

/// What `cluster` found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterSummary {
    pub stats: ClusterStats,
    pub largest: Vec<LargeCluster>,
    /// With a group field: each group's counts.
    pub groups: Vec<GroupCounts>,
    /// Documents written by a run that drops (all of them with `--tag-only`).
    pub documents_written: u64,
    /// Bytes of the arrays per document and per member.
    pub table_bytes: u64,
    /// The checksums ([`crate::io::checksum`]) of the clusters and pairs files, checked as
    /// they are copied out.
    #[serde(default)]
    pub clusters_checksum: String,
    #[serde(default)]
    pub pairs_checksum: String,
    /// Under the greedy rule, the rounds it took (0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rounds: u32,
    /// The largest cluster's size and diameter in hops, as a report's `chaining` has them.
    #[serde(default)]
    pub largest_cluster: u64,
    #[serde(default)]
    pub largest_cluster_diameter: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The greedy rule's clusters over the members (numbered in rank order; `rank_of` their
/// ranks): each member's root and the pairs that join members to roots, by ranks, sorted.
/// `exact` holds `(copy, representative)` by ranks, `dropped` each dropped unit's
/// `(representative, root, estimate, Jaccard)`, and `place(i)` is member `i`'s place in the
/// survivor policy's order. A unit's copies share its verdict: a dropped unit's all join its
/// root; a surviving unit's lead (its best copy) is the root of the others, their pairs
/// identical (estimate 1, and Jaccard 1 when `jaccard`).
#[allow(clippy::type_complexity)]
pub(super) fn greedy_roots(
    m: usize,
    rank_of: &[u64],
    exact: &[(u64, u64)],
    dropped: &[(u64, u64, f64, Option<f64>)],
    index: impl Fn(u64) -> u32,
    place: impl Fn(usize) -> super::greedy::Place,
    jaccard: bool,
) -> (Vec<u32>, Vec<(u64, u64, f64, Option<f64>)>) {
    // Each member's unit (its representative) and each unit's lead.
    let mut unit: Vec<u32> = (0..m as u32).collect();
    for &(r, e) in exact {
        unit[index(r) as usize] = index(e);
    }
    let mut lead: Vec<u32> = (0..m as u32).collect();
    for (i, &u) in unit.iter().enumerate() {
        let u = u as usize;
        if place(i) < place(lead[u] as usize) {
            lead[u] = i as u32;
        }
    }
    let mut verdict: HashMap<u32, (u64, f64, Option<f64>)> = HashMap::new();
    for &(u, r, est, jac) in dropped {
        verdict.insert(index(u), (r, est, jac));
    }
    let mut root = vec![0u32; m];
    let mut pairs = Vec::new();
    let ordered = |a: u64, b: u64| (a.min(b), a.max(b));
    for i in 0..m {
        let u = unit[i];
        match verdict.get(&u) {
            Some(&(r, est, jac)) => {
                root[i] = index(r);
                let (a, b) = ordered(r, rank_of[i]);
                pairs.push((a, b, est, jac));
            }
            None => {
                let l = lead[u as usize];
                root[i] = l;
                if l as usize != i {
                    let (a, b) = ordered(rank_of[l as usize], rank_of[i]);
                    pairs.push((a, b, 1.0, jaccard.then_some(1.0)));
                }
            }
        }
    }
    pairs.sort_unstable_by_key(|p| (p.0, p.1));
    (root, pairs)
}

impl WorkDir {
    /// The clusters file `cluster` writes (as `dedup --clusters`).
    pub fn clusters_jsonl(&self) -> PathBuf {
        self.root().join("cluster").join("clusters.jsonl")
    }

    /// Each dropped document and its cluster's survivor (their indices over all shards, u64
    /// each), for a report's chaining count (a keyed row file).
    pub(super) fn chaining_file(&self) -> PathBuf {
        self.root().join("cluster").join("chaining.rows")
    }

    /// The pairs file `cluster` writes (as `dedup --pairs`).
    pub fn pairs_jsonl(&self) -> PathBuf {
        self.root().join("cluster").join("pairs.jsonl")
    }
}

/// The largest cluster of `root` and its diameter ([`largest_cluster_hops`]) over its pairs
/// and exact relations (by ranks; `index` numbers a member, `rank` gives a number's rank).
pub(super) fn largest_hops(
    root: &[u32],
    rank: impl Fn(usize) -> u64,
    index: impl Fn(u64) -> u32,
    pairs: &[(u64, u64, f64, Option<f64>)],
    exact: &[(u64, u64)],
) -> (u64, u64) {
    largest_cluster_hops(root, rank, |big, edge| {
        let links = pairs
            .iter()
            .map(|p| (p.0, p.1))
            .chain(exact.iter().copied());
        for (x, y) in links {
            let (a, b) = (index(x), index(y));
            if root[a as usize] == big {
                edge(a, b);
            }
        }
    })
}

/// Add every partition's `confirm` counts and times to `stats`.
/// Under the greedy rule its tests are those of round 0, which the report does not count
/// ([`super::greedy::final_counts`] does).
pub(super) fn add_confirm_stats(work: &WorkDir, stats: &mut ClusterStats) -> Result<(), Error> {
    let greedy = work.config().cluster == ClusterRule::Greedy;
    for p in 0..work.partitions() {
        let cs = super::confirm::summary(work, p)?;
        stats.buckets += cs.buckets;
        if !greedy {
            stats.pairs_checked += cs.counts.checked;
            stats.pairs_rejected += cs.counts.rejected;
            stats.pairs_other_group += cs.counts.other_group;
        }
        stats.pairs_already_joined += cs.counts.already_joined;
        stats.pairs_filtered += cs.counts.filtered;
        stats.sets_loaded += cs.sets_loaded;
        stats.confirm_seconds += cs.seconds;
        stats.sets_seconds += cs.sets_seconds;
    }
    Ok(())
}

/// Call `f(a, b, estimate, jaccard)` with each confirmed pair of partition `p` (ranks), each
/// checked to lie in a corpus of `n` documents.
pub(super) fn for_each_pair(
    work: &WorkDir,
    p: usize,
    n: u64,
    mut f: impl FnMut(u64, u64, f64, Option<f64>),
) -> Result<(), Error> {
    let cols = ["rank_a", "rank_b", "estimate", "jaccard"];
    let file = work.pairs_file(p);
    for batch in work.open_table(&file, "confirm", &cols)? {
        let batch = batch?;
        let (a, b) = (u64s(&batch, "rank_a"), u64s(&batch, "rank_b"));
        let est = f64s(&batch, "estimate");
        let jac = batch.column_by_name("jaccard").expect("a projected column");
        let jac = arrow_array::cast::AsArray::as_primitive::<arrow_array::types::Float64Type>(
            jac.as_ref(),
        );
        for i in 0..batch.num_rows() {
            if a[i] >= n || b[i] >= n {
                return Err(Error::Work {
                    path: file.display().to_string(),
                    msg: format!(
                        "a pair of ranks {} and {} in a corpus of {n} documents; confirm \
                         partition {p} again",
                        a[i], b[i]
                    ),
                });
            }
            let j = (!arrow_array::Array::is_null(jac, i)).then(|| jac.value(i));
            f(a[i], b[i], est[i], j);
        }
    }
    Ok(())
}

/// The stage's summary once it is done, `None` before.
pub(super) fn summary_if_done(work: &WorkDir) -> Result<Option<ClusterSummary>, Error> {
    work.read_json(&work.cluster_summary())
}

/// The summary of a finished `cluster`.
pub fn summary(work: &WorkDir) -> Result<ClusterSummary, Error> {
    work.need_json(&work.cluster_summary(), "cluster")
}

/// Remove the task files (`cluster/tasks/`), then the directory if that leaves it empty:
/// nothing else in it is neardup's to delete.
pub(super) fn remove_tasks(work: &WorkDir) -> Result<(), Error> {
    super::remove_own_files(&work.root().join("cluster").join("tasks"), is_task_name)
}

/// Whether `name` is the name of a task file: `plan.json`, or `STEP-NNNNN.json` and
/// `STEP-NNNNN.OUTPUT` (`star-RRRR-NNNNN` for a round).
fn is_task_name(name: &str) -> bool {
    if name == "plan.json" {
        return true;
    }
    let Some((stem, ext)) = name.split_once('.') else {
        return false;
    };
    let outputs = [
        "json", "edges", "pairs", "places", "exact", "requests", "links", "members", "verdicts",
        "lines", "chaining",
    ];
    if !outputs.contains(&ext) {
        return false;
    }
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    match stem.split_once('-') {
        Some(("star", rest)) => rest
            .split_once('-')
            .is_some_and(|(r, k)| digits(r, 4) && digits(k, 5)),
        Some(("edges" | "locate" | "roots" | "attributes" | "clusters", n)) => digits(n, 5),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_task_files_are_task_names() {
        for n in [
            "plan.json",
            "edges-00001.json",
            "edges-00001.pairs",
            "star-0003-00002.edges",
            "locate-00000.places",
            "clusters-00004.verdicts",
        ] {
            assert!(is_task_name(n), "{n}");
        }
        for n in [
            "mine.json",
            "edges-1.json",
            "star-3-00002.edges",
            "clusters-00004.txt",
            "notes",
        ] {
            assert!(!is_task_name(n), "{n}");
        }
    }
}
