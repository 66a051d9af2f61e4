//! `cluster` in one process.
//!
//! Only documents in some confirmed pair or exact-duplicate relation (the members) take part:
//! each is found by its rank in a set of one bit a document, which numbers the members in rank
//! order, so union-find runs over the members alone and its smallest element is still the
//! smallest id. It holds one bit and a fraction a document, about 60 bytes a member (place,
//! words, union-find, verdicts, id) plus its id's bytes, the pairs, and one shard's member
//! numbers at a time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, BooleanArray, StringArray};
use arrow_schema::{DataType, Field};

use super::{
    add_confirm_stats, for_each_pair, greedy_roots, largest_hops, remove_tasks, ClusterSummary,
    LargeCluster,
};
use crate::error::Error;
use crate::ids::IdArena;
use crate::index::unionfind::UnionFind;
use crate::io::Output;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    best_of_clusters, count_clusters, keep_key, pair_line, put_cluster_line, ClusterRule,
    ClusterStats, Confirm, GroupCounts, Keep, EXAMPLE_CLUSTERS, EXAMPLE_MEMBERS,
};
use crate::stages::sharded::rank::NO_REP;
use crate::stages::sharded::table::{col, f64s, strings, u32s, u64s, BATCH_ROWS};
use crate::stages::sharded::WorkDir;

/// Pairs read before the first deduplication of what the partitions confirmed.
const DEDUP_PAIRS: usize = 1 << 20;

/// A confirmed pair by ranks: `(a, b, estimate, jaccard)`.
type RankPair = (u64, u64, f64, Option<f64>);

/// Every partition's confirmed pairs, each once. A pair comes from each partition whose
/// buckets hold both its documents, and one component falls into a bucket of most bands: the
/// pairs are deduplicated once there are `first` of them and again whenever they double, so
/// they never hold many more than the distinct ones. Every copy of a pair is the same record
/// (its estimate and Jaccard depend on its documents alone).
struct DistinctPairs {
    pairs: Vec<RankPair>,
    first: usize,
    next: usize,
}

impl DistinctPairs {
    fn new(first: usize) -> Self {
        DistinctPairs {
            pairs: Vec::new(),
            first,
            next: first,
        }
    }

    fn push(&mut self, p: RankPair) {
        self.pairs.push(p);
        if self.pairs.len() >= self.next {
            Self::dedup(&mut self.pairs);
            self.next = (2 * self.pairs.len()).max(self.first);
        }
    }

    fn dedup(pairs: &mut Vec<RankPair>) {
        pairs.sort_unstable_by_key(|p| (p.0, p.1));
        pairs.dedup_by_key(|p| (p.0, p.1));
    }

    /// The pairs, each once, sorted by ranks.
    fn finish(mut self) -> Vec<RankPair> {
        Self::dedup(&mut self.pairs);
        self.pairs
    }
}

/// Cluster the confirmed pairs of every partition. Returns the summary, or `None` when
/// clustered already.
pub fn cluster(
    work: &WorkDir,
    progress: &ProgressFactory,
) -> Result<Option<ClusterSummary>, Error> {
    let _lock = work.lock("cluster")?;
    work.remove_partials("cluster", "")?;
    if work
        .read_json::<ClusterSummary>(&work.cluster_summary())?
        .is_some()
    {
        return Ok(None);
    }
    let cfg = work.config();
    let step = progress.step("cluster");
    let rs = crate::stages::sharded::rank::summary(work)?;
    let mut offsets = vec![0u64];
    for &r in &rs.rows {
        offsets.push(offsets.last().unwrap() + r);
    }
    let n = *offsets.last().unwrap();
    let grouped = work.fields().group.is_some();
    let keep_field = work.fields().keep.is_some();

    step.set_message("reading pairs");
    let mut stats = ClusterStats {
        order_seconds: rs.seconds,
        wordless: rs.wordless,
        exact_duplicates: rs.exact_duplicates,
        ..Default::default()
    };
    add_confirm_stats(work, &mut stats)?;
    let mut pairs = DistinctPairs::new(DEDUP_PAIRS);
    for p in 0..work.partitions() {
        for_each_pair(work, p, n, |a, b, est, j| pairs.push((a, b, est, j)))?;
    }
    let t_cluster = Instant::now();
    let mut pairs = pairs.finish();
    stats.pairs_confirmed = pairs.len() as u64;

    // The members: documents in a pair or an exact-duplicate relation; under the greedy rule,
    // the dropped units and their roots.
    step.set_message("reading exact duplicates");
    let mut members = RankSet::new(n);
    for p in &pairs {
        members.insert(p.0);
        members.insert(p.1);
    }
    let greedy = cfg.cluster == ClusterRule::Greedy;
    // `(unit, root, estimate, jaccard)` by ranks, of each dropped unit.
    let mut dropped: Vec<(u64, u64, f64, Option<f64>)> = Vec::new();
    let mut rounds = 0;
    if greedy {
        step.set_message("reading the greedy rounds' verdicts");
        let (last, _) = crate::stages::sharded::greedy::verdicts(work, |v| {
            if v.dropped() {
                if v.rank >= n || v.root >= n {
                    return Err(Error::Work {
                        path: work.root().display().to_string(),
                        msg: format!(
                            "a verdict of ranks {} and {} in a corpus of {n} documents: run the \
                             greedy rounds again in an empty work directory",
                            v.rank, v.root
                        ),
                    });
                }
                members.insert(v.rank);
                members.insert(v.root);
                dropped.push((v.rank, v.root, v.estimate, v.jaccard));
            }
            Ok(())
        })?;
        rounds = last + 1;
        // Not the rounds' tests (they depend on the partitions) but the rule's, as in memory.
        let counts = crate::stages::sharded::greedy::final_counts(work)?;
        stats.pairs_checked += counts.checked;
        stats.pairs_rejected += counts.rejected;
        stats.pairs_other_group += counts.other_group;
    }
    let mut exact: Vec<(u64, u64)> = Vec::new();
    if cfg.exact {
        for s in 0..work.shards() {
            for batch in work.open_table(&work.rank_file(s), "rank", &["rank", "exact_rep"])? {
                let batch = batch?;
                let (rank, rep) = (u64s(&batch, "rank"), u64s(&batch, "exact_rep"));
                for (&r, &e) in rank.iter().zip(rep) {
                    if e != NO_REP {
                        members.insert(r);
                        members.insert(e);
                        exact.push((r, e));
                    }
                }
            }
        }
    }
    members.seal();
    let m = members.len();
    if m > u32::MAX as u64 {
        return Err(Error::Param(format!(
            "{m} documents in clusters: `cluster` numbers them with 32 bits; split the corpus \
             into runs with at most {} documents in clusters",
            u32::MAX
        )));
    }
    let m = m as usize;

    // Each member's place, words, keep value, group and id; each group's documents.
    let mut doc = vec![0u64; m];
    let mut words = vec![0u32; m];
    let mut value = vec![0f64; if keep_field { m } else { 0 }];
    let mut member_group = vec![0u32; if grouped { m } else { 0 }];
    let mut ids = IdArena::default();
    let mut id_at = vec![0u32; m];
    let mut group_docs = vec![0u64; rs.groups.len()];
    for (s, &base) in offsets[..work.shards()].iter().enumerate() {
        step.set_message(format!("reading members, shard {s}"));
        let (slot, groups) = shard_slots(work, s, &members, grouped)?;
        for (&g, &i) in groups.iter().zip(&slot) {
            group_docs[g as usize] += 1;
            if i != NOT_MEMBER {
                member_group[i as usize] = g;
            }
        }
        let mut cols = vec!["id", "words"];
        if keep_field {
            cols.push("keep");
        }
        let mut row = 0usize;
        for batch in work.open_table(&work.sign_file(s), "sign", &cols)? {
            let batch = batch?;
            let id = strings(&batch, "id");
            let w = u32s(&batch, "words");
            let kv = if keep_field {
                f64s(&batch, "keep")
            } else {
                &[]
            };
            for k in 0..batch.num_rows() {
                let i = slot[row + k];
                if i != NOT_MEMBER {
                    let i = i as usize;
                    doc[i] = base + (row + k) as u64;
                    words[i] = w[k];
                    if keep_field {
                        value[i] = kv[k];
                    }
                    id_at[i] = ids.len() as u32;
                    ids.push(id.value(k));
                }
            }
            row += batch.num_rows();
        }
    }
    let id = |i: u32| ids.get(id_at[i as usize] as usize);

    step.set_message("clusters");
    let index = |r: u64| members.index(r).expect("a member") as u32;
    let root: Vec<u32> = if greedy {
        let rank_of = members.ranks();
        let (root, greedy_pairs) = greedy_roots(
            m,
            &rank_of,
            &exact,
            &dropped,
            index,
            |i| {
                let v = value.get(i).copied().unwrap_or(0.0);
                crate::stages::sharded::greedy::place(
                    keep_key(cfg.keep, words[i], v, doc[i]),
                    rank_of[i],
                )
            },
            cfg.confirm == Confirm::Jaccard,
        );
        pairs = greedy_pairs;
        stats.pairs_confirmed = pairs.len() as u64;
        root
    } else {
        let mut uf = UnionFind::new(m);
        for p in &pairs {
            uf.union(index(p.0), index(p.1));
        }
        for &(r, e) in &exact {
            uf.union(index(r), index(e));
        }
        // Members are numbered in rank order, so each root is its cluster's smallest id.
        (0..m as u32).map(|i| uf.find(i)).collect()
    };
    drop(dropped);
    count_clusters(&root, &mut stats);
    let (largest_cluster, largest_cluster_diameter) =
        largest_hops(&root, |i| i as u64, index, &pairs, &exact);
    // Each member's exact-copy representative, for the chaining rows below.
    let mut unit: Vec<u32> = (0..m as u32).collect();
    for &(r, e) in &exact {
        unit[index(r) as usize] = index(e);
    }
    drop(exact);
    let survives = if greedy {
        (0..m).map(|i| root[i] as usize == i).collect()
    } else if cfg.keep == Keep::SmallestId {
        (0..m).map(|i| root[i] as usize == i).collect()
    } else {
        let v = |i: usize| value.get(i).copied().unwrap_or(0.0);
        best_of_clusters(
            &root,
            |i| keep_key(cfg.keep, words[i], v(i), doc[i]),
            |i| i as u64,
        )
    };

    // Clusters by root in id order, members in id order: as `dedup --clusters`.
    let mut by_root: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (i, &r) in root.iter().enumerate() {
        by_root.entry(r).or_default().push(i as u32);
    }
    let dir = work.clusters_jsonl();
    let dir = dir.parent().expect("a file in the work directory");
    std::fs::create_dir_all(dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
    let mut out = Output::with_checksum(&work.clusters_jsonl().display().to_string())?;
    let mut line = Vec::new();
    for (&r, members) in &by_root {
        line.clear();
        put_cluster_line(&mut line, id(r), members.iter().map(|&i| id(i)));
        out.write_all(&line)?;
    }
    let (clusters_checksum, _) = out.checksum().expect("kept");
    out.finish()?;
    let mut out = Output::with_checksum(&work.pairs_jsonl().display().to_string())?;
    for &(a, b, est, jac) in &pairs {
        let line = pair_line(id(index(a)), id(index(b)), est, jac);
        out.write_all(line.as_bytes())?;
    }
    let (pairs_checksum, _) = out.checksum().expect("kept");
    out.finish()?;

    let shard_of = |d: u64| offsets.partition_point(|&o| o <= d) - 1;
    let mut largest: Vec<(&u32, &Vec<u32>)> = by_root.iter().collect();
    largest.sort_by_key(|(_, m)| std::cmp::Reverse(m.len()));
    largest.truncate(EXAMPLE_CLUSTERS);
    let largest = largest
        .into_iter()
        .map(|(&r, ms)| LargeCluster {
            root: id(r).to_string(),
            size: ms.len(),
            members: ms
                .iter()
                .take(EXAMPLE_MEMBERS)
                .map(|&i| {
                    let d = doc[i as usize];
                    let s = shard_of(d);
                    (s, d - offsets[s], id(i).to_string())
                })
                .collect(),
        })
        .collect();

    // Every document outside the members is written; of the members, those that survive or
    // all of them when tagging.
    let written = |i: usize| !cfg.drop || survives[i];
    let mut groups: Vec<GroupCounts> = rs
        .groups
        .iter()
        .zip(&group_docs)
        .map(|(g, &docs)| GroupCounts {
            group: g.clone(),
            documents: docs,
            documents_written: docs,
            ..Default::default()
        })
        .collect();
    for (i, &g) in member_group.iter().enumerate() {
        let c = &mut groups[g as usize];
        if root[i] as usize == i {
            c.clusters += 1;
        }
        if !written(i) {
            c.documents_written -= 1;
        }
    }
    let documents_written = n - (0..m).filter(|&i| !written(i)).count() as u64;

    // For a report's chaining count: each dropped member and its cluster's survivor, unless
    // they are identical copies or a confirmed pair already (a report tests the others).
    // Under the greedy rule every dropped document joined a confirmed surviving near
    // duplicate, so there is none to test.
    let mut w = work.create_keyed(&work.chaining_file())?;
    if !greedy {
        let mut survivor: HashMap<u32, u32> = HashMap::new();
        for i in (0..m).filter(|&i| survives[i]) {
            survivor.insert(root[i], i as u32);
        }
        // `pairs` are sorted by ranks, and members are numbered in rank order.
        let confirmed = |a: u32, b: u32| {
            pairs
                .binary_search_by_key(&(a, b), |p| (index(p.0), index(p.1)))
                .is_ok()
        };
        for i in (0..m).filter(|&i| !survives[i]) {
            let s = survivor[&root[i]] as usize;
            let (a, b) = (unit[i].min(unit[s]), unit[i].max(unit[s]));
            if a != b && !confirmed(a, b) {
                w.values(&[doc[i], doc[s]])?;
            }
        }
    }
    w.finish()?;

    let mut columns = vec![
        Field::new("tag", DataType::Utf8, true),
        col("survives", DataType::Boolean),
    ];
    // The survivor's id, where the keep policy may choose another than the root.
    let survivor_of_root: HashMap<u32, u32> = if cfg.records_survivor() {
        columns.push(Field::new("survivor", DataType::Utf8, true));
        (0..m)
            .filter(|&i| survives[i])
            .map(|i| (root[i], i as u32))
            .collect()
    } else {
        HashMap::new()
    };
    for s in 0..work.shards() {
        step.set_message(format!("writing verdicts, shard {s}"));
        let (slot, _) = shard_slots(work, s, &members, false)?;
        let member = |k: usize| (slot[k] != NOT_MEMBER).then_some(slot[k]);
        let mut w = work.create_table(&work.cluster_file(s), columns.clone(), &[])?;
        let rows = slot.len();
        let mut at = 0;
        loop {
            let end = (at + BATCH_ROWS).min(rows);
            let tags = (at..end).map(|k| member(k).map(|i| id(root[i as usize])));
            let survive = (at..end).map(|k| member(k).is_none_or(|i| survives[i as usize]));
            let mut cols: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter(tags)),
                Arc::new(BooleanArray::from(survive.collect::<Vec<bool>>())),
            ];
            if cfg.records_survivor() {
                let survivor =
                    (at..end).map(|k| member(k).map(|i| id(survivor_of_root[&root[i as usize]])));
                cols.push(Arc::new(StringArray::from_iter(survivor)));
            }
            if end == rows {
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
        documents_written,
        table_bytes: members.heap_bytes() + m as u64 * 60 + ids.bytes_len() as u64,
        clusters_checksum,
        pairs_checksum,
        rounds,
        largest_cluster,
        largest_cluster_diameter,
    };
    work.write_json(&work.cluster_summary(), &summary)?;
    // Whatever cluster jobs left: the stage is done.
    remove_tasks(work)?;
    Ok(Some(summary))
}

/// A shard document that is no member.
const NOT_MEMBER: u32 = u32::MAX;

/// Each document of shard `s`: its member number or [`NOT_MEMBER`]; and with `grouped`, its
/// group.
fn shard_slots(
    work: &WorkDir,
    s: usize,
    members: &RankSet,
    grouped: bool,
) -> Result<(Vec<u32>, Vec<u32>), Error> {
    let mut cols = vec!["rank"];
    if grouped {
        cols.push("group");
    }
    let (mut slot, mut group) = (Vec::new(), Vec::new());
    for batch in work.open_table(&work.rank_file(s), "rank", &cols)? {
        let batch = batch?;
        slot.extend(
            u64s(&batch, "rank")
                .iter()
                .map(|&r| members.index(r).map_or(NOT_MEMBER, |i| i as u32)),
        );
        if grouped {
            group.extend_from_slice(u32s(&batch, "group"));
        }
    }
    Ok((slot, group))
}

/// A set of ranks `0 .. n` as one bit each, with the count of members before every 512 ranks,
/// so that a member's number (its place among the members in rank order) takes one lookup.
struct RankSet {
    bits: Vec<u64>,
    /// Members before each block of 8 words; filled by `seal`.
    before: Vec<u64>,
}

impl RankSet {
    fn new(n: u64) -> Self {
        RankSet {
            bits: vec![0; n.div_ceil(64) as usize],
            before: Vec::new(),
        }
    }

    fn insert(&mut self, r: u64) {
        self.bits[(r / 64) as usize] |= 1 << (r % 64);
    }

    /// Count the members of each block, after the last `insert`.
    fn seal(&mut self) {
        let mut total = 0;
        self.before = self
            .bits
            .chunks(8)
            .map(|block| {
                let at = total;
                total += block.iter().map(|w| w.count_ones() as u64).sum::<u64>();
                at
            })
            .collect();
        self.before.push(total);
    }

    /// Members in all (after `seal`).
    fn len(&self) -> u64 {
        self.before.last().copied().unwrap_or(0)
    }

    /// The number of member `r` (after `seal`), or `None` when `r` is no member.
    fn index(&self, r: u64) -> Option<u64> {
        let w = (r / 64) as usize;
        let bit = 1u64 << (r % 64);
        if self.bits[w] & bit == 0 {
            return None;
        }
        let block = w / 8;
        let whole: u64 = self.bits[block * 8..w]
            .iter()
            .map(|x| x.count_ones() as u64)
            .sum();
        Some(self.before[block] + whole + (self.bits[w] & (bit - 1)).count_ones() as u64)
    }

    /// The members' ranks, in order (after `seal`).
    fn ranks(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len() as usize);
        for (w, &bits) in self.bits.iter().enumerate() {
            let mut b = bits;
            while b != 0 {
                out.push(w as u64 * 64 + b.trailing_zeros() as u64);
                b &= b - 1;
            }
        }
        out
    }

    fn heap_bytes(&self) -> u64 {
        (self.bits.len() + self.before.len()) as u64 * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_each_kept_once_whenever_they_are_deduplicated() {
        // Runs of pairs with repeats within and across runs, as partitions give them.
        let mut rng = crate::hash::Pcg32::new(7);
        for first in [1, 2, 3, 4, 7, 64, usize::MAX] {
            for len in [0usize, 1, 2, 5, 100, 1000] {
                let stream: Vec<RankPair> = (0..len)
                    .map(|_| {
                        let (a, b) = (rng.below(30) as u64, rng.below(30) as u64);
                        (a, b, (a * 31 + b) as f64, Some(b as f64))
                    })
                    .collect();
                let mut got = DistinctPairs::new(first);
                for &p in &stream {
                    got.push(p);
                    // Never many more than the distinct pairs held.
                    assert!(got.pairs.len() <= (2 * 900).max(first), "{first} {len}");
                }
                let mut want = stream.clone();
                want.sort_by_key(|p| (p.0, p.1));
                want.dedup_by_key(|p| (p.0, p.1));
                let key = |v: &[RankPair]| -> Vec<(u64, u64, u64, Option<u64>)> {
                    v.iter()
                        .map(|p| (p.0, p.1, p.2.to_bits(), p.3.map(f64::to_bits)))
                        .collect()
                };
                assert_eq!(key(&got.finish()), key(&want), "first {first}, {len} pairs");
            }
        }
    }

    #[test]
    fn members_are_numbered_in_rank_order_across_words_and_blocks() {
        for n in [0u64, 1, 63, 64, 65, 511, 512, 513, 1025, 5000] {
            let picks: Vec<u64> = [0, 1, 62, 63, 64, 65, 511, 512, 513, 1023, 1024, 4999]
                .into_iter()
                .chain((0..n).filter(|r| r % 37 == 5))
                .filter(|&r| r < n)
                .collect();
            let mut set = RankSet::new(n);
            for &r in &picks {
                set.insert(r);
            }
            set.seal();
            let mut sorted = picks.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(set.len(), sorted.len() as u64, "n {n}");
            for r in 0..n {
                let want = sorted.binary_search(&r).ok().map(|i| i as u64);
                assert_eq!(set.index(r), want, "n {n}, rank {r}");
            }
        }
    }
}
