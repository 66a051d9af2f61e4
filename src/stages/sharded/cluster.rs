//! Stage 5, over all partitions: union-find over every partition's confirmed pairs (and the
//! exact duplicates) by rank, so each root is its cluster's smallest id; who survives under the
//! keep policy. Per shard out: `tag` (the root's id, null for a document in no cluster),
//! `survives`, and where a `--tag-only` run's policy may keep another than the root, `survivor`
//! (the id of the document that survives, null likewise); beside them the clusters and pairs files as `dedup --clusters/--pairs` write
//! them, and the counts.
//!
//! It holds about 25 bytes a document (rank, place in id order, union-find parent, root, words,
//! verdicts) plus the pairs and the ids of the documents in clusters.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, BooleanArray, StringArray};
use arrow_schema::{DataType, Field};
use serde::{Deserialize, Serialize};

use super::rank::NO_REP;
use super::table::{col, f64s, strings, u32s, u64s, BATCH_ROWS};
use super::WorkDir;
use crate::index::unionfind::UnionFind;
use crate::io::Output;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    cluster_line, count_clusters, pair_line, survivors, ClusterStats, GroupCounts, SignedCorpus,
    EXAMPLE_CLUSTERS, EXAMPLE_MEMBERS,
};
use crate::Error;

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
    /// Bytes of the per-document arrays.
    pub table_bytes: u64,
}

impl WorkDir {
    /// The clusters file `cluster` writes (as `dedup --clusters`).
    pub fn clusters_jsonl(&self) -> PathBuf {
        self.root().join("cluster").join("clusters.jsonl")
    }

    /// The pairs file `cluster` writes (as `dedup --pairs`).
    pub fn pairs_jsonl(&self) -> PathBuf {
        self.root().join("cluster").join("pairs.jsonl")
    }
}

/// Cluster the confirmed pairs of every partition. Returns the summary, or `None` when
/// clustered already.
pub fn cluster(
    work: &WorkDir,
    progress: &ProgressFactory,
) -> Result<Option<ClusterSummary>, Error> {
    if work
        .read_json::<ClusterSummary>(&work.cluster_summary())?
        .is_some()
    {
        return Ok(None);
    }
    let cfg = work.config();
    let step = progress.step("cluster");
    let rs = super::rank::summary(work)?;
    let mut offsets = vec![0usize];
    for &r in &rs.rows {
        offsets.push(offsets.last().unwrap() + r as usize);
    }
    let n = *offsets.last().unwrap();
    let grouped = work.fields().group.is_some();

    step.set_message("reading ranks");
    let mut rank = vec![0u32; n];
    let mut exact_rep: Vec<u64> = Vec::new();
    let mut group: Vec<u32> = Vec::new();
    let mut words: Vec<u32> = Vec::with_capacity(n);
    let mut keep_values: Vec<f64> = Vec::new();
    for (s, &first) in offsets.iter().enumerate().take(work.shards()) {
        let mut cols = vec!["rank"];
        if cfg.exact {
            cols.push("exact_rep");
        }
        if grouped {
            cols.push("group");
        }
        let mut d = first;
        for batch in work.open_table(&work.rank_file(s), "rank", &cols)? {
            let batch = batch?;
            for &r in u64s(&batch, "rank") {
                rank[d] = r as u32;
                d += 1;
            }
            if cfg.exact {
                exact_rep.extend_from_slice(u64s(&batch, "exact_rep"));
            }
            if grouped {
                group.extend_from_slice(u32s(&batch, "group"));
            }
        }
        let mut cols = vec!["words"];
        let keep = work.fields().keep.is_some();
        if keep {
            cols.push("keep");
        }
        for batch in work.open_table(&work.sign_file(s), "sign", &cols)? {
            let batch = batch?;
            words.extend_from_slice(u32s(&batch, "words"));
            if keep {
                keep_values.extend_from_slice(f64s(&batch, "keep"));
            }
        }
    }
    let mut order = vec![0u32; n];
    for (d, &r) in rank.iter().enumerate() {
        order[r as usize] = d as u32;
    }

    step.set_message("reading pairs");
    let mut stats = ClusterStats {
        order_seconds: rs.seconds,
        wordless: rs.wordless,
        exact_duplicates: rs.exact_duplicates,
        ..Default::default()
    };
    let mut pairs: Vec<(u64, u64, f64, Option<f64>)> = Vec::new();
    for p in 0..work.partitions() {
        let cs = super::confirm::summary(work, p)?;
        stats.buckets += cs.buckets;
        stats.pairs_checked += cs.counts.checked;
        stats.pairs_rejected += cs.counts.rejected;
        stats.pairs_already_joined += cs.counts.already_joined;
        stats.pairs_other_group += cs.counts.other_group;
        stats.pairs_filtered += cs.counts.filtered;
        stats.sets_loaded += cs.sets_loaded;
        stats.confirm_seconds += cs.seconds;
        stats.sets_seconds += cs.sets_seconds;
        let cols = ["rank_a", "rank_b", "estimate", "jaccard"];
        for batch in work.open_table(&work.pairs_file(p), "confirm", &cols)? {
            let batch = batch?;
            let (a, b) = (u64s(&batch, "rank_a"), u64s(&batch, "rank_b"));
            let est = f64s(&batch, "estimate");
            let jac = batch.column_by_name("jaccard").expect("a projected column");
            let jac = arrow_array::cast::AsArray::as_primitive::<arrow_array::types::Float64Type>(
                jac.as_ref(),
            );
            for i in 0..batch.num_rows() {
                let j = (!arrow_array::Array::is_null(jac, i)).then(|| jac.value(i));
                pairs.push((a[i], b[i], est[i], j));
            }
        }
    }
    let t_cluster = Instant::now();
    step.set_message("clusters");
    pairs.sort_unstable_by_key(|p| (p.0, p.1));
    pairs.dedup_by_key(|p| (p.0, p.1));
    stats.pairs_confirmed = pairs.len() as u64;
    let mut uf = UnionFind::new(n);
    for p in &pairs {
        uf.union(p.0 as u32, p.1 as u32);
    }
    for (d, &rep) in exact_rep.iter().enumerate() {
        if rep != NO_REP {
            uf.union(rank[d], rep as u32);
        }
    }
    let root: Vec<u32> = (0..n).map(|d| order[uf.find(rank[d]) as usize]).collect();
    drop(uf);
    count_clusters(&root, &mut stats);
    let mut in_cluster = vec![false; n];
    for (d, &r) in root.iter().enumerate() {
        if r as usize != d {
            in_cluster[d] = true;
            in_cluster[r as usize] = true;
        }
    }
    let corpus = SignedCorpus {
        words,
        keep_values,
        ..Default::default()
    };
    let survives = survivors(&corpus, &root, &rank, cfg.keep)?;

    // The ids of the documents in clusters, and where each is.
    step.set_message("reading ids");
    let mut ids: HashMap<u32, String> = HashMap::new();
    let shard_of = |d: usize| offsets.partition_point(|&o| o <= d) - 1;
    for (s, &first) in offsets.iter().enumerate().take(work.shards()) {
        let mut d = first;
        for batch in work.open_table(&work.sign_file(s), "sign", &["id"])? {
            let batch = batch?;
            let id = strings(&batch, "id");
            for i in 0..batch.num_rows() {
                if in_cluster[d] {
                    ids.insert(d as u32, id.value(i).to_string());
                }
                d += 1;
            }
        }
    }
    let id = |d: u32| ids[&d].as_str();

    // Clusters by root in id order, members in id order: as `dedup --clusters`.
    let mut by_root: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (r, &d) in order.iter().enumerate() {
        if in_cluster[d as usize] {
            by_root
                .entry(rank[root[d as usize] as usize])
                .or_default()
                .push(r as u32);
        }
    }
    let dir = work.clusters_jsonl();
    let dir = dir.parent().expect("a file in the work directory");
    std::fs::create_dir_all(dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
    let mut out = Output::create(&work.clusters_jsonl().display().to_string())?;
    for members in by_root.values() {
        let names: Vec<&str> = members.iter().map(|&r| id(order[r as usize])).collect();
        out.write_all(cluster_line(names[0], &names).as_bytes())?;
    }
    out.finish()?;
    let mut out = Output::create(&work.pairs_jsonl().display().to_string())?;
    for &(a, b, est, jac) in &pairs {
        let line = pair_line(id(order[a as usize]), id(order[b as usize]), est, jac);
        out.write_all(line.as_bytes())?;
    }
    out.finish()?;

    let mut largest: Vec<&Vec<u32>> = by_root.values().collect();
    largest.sort_by_key(|m| std::cmp::Reverse(m.len()));
    largest.truncate(EXAMPLE_CLUSTERS);
    let largest = largest
        .into_iter()
        .map(|m| LargeCluster {
            root: id(order[m[0] as usize]).to_string(),
            size: m.len(),
            members: m
                .iter()
                .take(EXAMPLE_MEMBERS)
                .map(|&r| {
                    let d = order[r as usize] as usize;
                    let s = shard_of(d);
                    (s, (d - offsets[s]) as u64, id(d as u32).to_string())
                })
                .collect(),
        })
        .collect();

    let written = |d: usize| !cfg.drop || survives[d];
    let mut groups: Vec<GroupCounts> = rs
        .groups
        .iter()
        .map(|g| GroupCounts {
            group: g.clone(),
            ..Default::default()
        })
        .collect();
    for (d, &g) in group.iter().enumerate() {
        let c = &mut groups[g as usize];
        c.documents += 1;
        if in_cluster[d] && root[d] as usize == d {
            c.clusters += 1;
        }
        if written(d) {
            c.documents_written += 1;
        }
    }

    step.set_message("writing verdicts");
    let mut columns = vec![
        Field::new("tag", DataType::Utf8, true),
        col("survives", DataType::Boolean),
    ];
    // The survivor's id, where a tagging run's keep policy may choose another than the root.
    let survivor_of_root: HashMap<u32, u32> = if cfg.tags_survivor() {
        columns.push(Field::new("survivor", DataType::Utf8, true));
        (0..n)
            .filter(|&d| in_cluster[d] && survives[d])
            .map(|d| (root[d], d as u32))
            .collect()
    } else {
        HashMap::new()
    };
    for s in 0..work.shards() {
        let mut w = work.create_table(&work.cluster_file(s), columns.clone(), &[])?;
        let (from, to) = (offsets[s], offsets[s + 1]);
        let mut at = from;
        loop {
            let end = (at + BATCH_ROWS).min(to);
            let tags = (at..end).map(|d| in_cluster[d].then(|| id(root[d])));
            let mut cols: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter(tags)),
                Arc::new(BooleanArray::from(survives[at..end].to_vec())),
            ];
            if cfg.tags_survivor() {
                let survivor =
                    (at..end).map(|d| in_cluster[d].then(|| id(survivor_of_root[&root[d]])));
                cols.push(Arc::new(StringArray::from_iter(survivor)));
            }
            if end == to {
                w.write_then_finish(cols)?;
                break;
            }
            w.write(cols)?;
            at = end;
        }
    }
    stats.cluster_seconds = t_cluster.elapsed().as_secs_f64();
    let summary = ClusterSummary {
        stats,
        largest,
        groups,
        documents_written: (0..n).filter(|&d| written(d)).count() as u64,
        table_bytes: n as u64 * 25,
    };
    work.write_json(&work.cluster_summary(), &summary)?;
    Ok(Some(summary))
}

/// The summary of a finished `cluster`.
pub fn summary(work: &WorkDir) -> Result<ClusterSummary, Error> {
    work.need_json(&work.cluster_summary(), "cluster")
}
