//! The greedy survivor rule (SPEC §3): documents in survivor-policy order; each survives unless
//! an already surviving document is its confirmed near duplicate, and a dropped one joins the
//! first such survivor (in policy order), the root and tag of its cluster.
//!
//! Pairs are confirmed lazily: a document is tested only against the survivors ranked before
//! it that share an LSH bucket with it, in policy order, until one is confirmed. So a bucket of
//! near-identical documents costs about one test a member, not one a pair. Under exact Jaccard,
//! the survivors are indexed by their prefixes ([`PrefixIndex`]), and only those that the
//! filters leave are tested: a bucket of templated pages holds thousands of survivors, few of
//! them within reach of any one page.
//!
//! Exact copies (`--exact`) stand in for each other: only the smallest id of each set of
//! identical documents (its representative) is in the buckets, a copy has its representative's
//! candidates and tests, and copies are confirmed near duplicates of each other.
//!
//! The counts are not the tests run but the rule's, bucket by bucket (as `components` counts
//! them, and as out of core counts them for any number of partitions: a bucket lies whole in
//! one partition): in each bucket, each unit (a representative and its copies) against the
//! bucket's surviving units placed before it, up to and including its root.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::confirm::{test_pair, BucketCounts, BucketTables};
use super::{Confirm, ConfirmedPair};
use crate::index::lsh::{memberships, shares_bucket, Buckets};
use crate::index::simjoin::PrefixIndex;

/// Survivors a document's buckets hold from which its candidates come from the prefix index:
/// below, testing them in order costs less than the index, whose first use counts the tokens
/// of every bucketed document.
pub(crate) const INDEX_FROM: usize = 256;

/// What the rule decided: each document's root (itself when it survives) and the pair that
/// joined each dropped document to its root.
pub(crate) struct Greedy {
    pub root: Vec<u32>,
    pub pairs: Vec<ConfirmedPair>,
    pub counts: BucketCounts,
}

/// Run the rule over `n` documents visited in `policy_order`. `rep[d]` is the representative
/// of `d`'s exact copies (`d` itself without `--exact`); only representatives are bucket
/// members. `matched[d]` (empty: none): `d` has a confirmed near duplicate in an `--against`
/// index, whose documents are kept before every new one: it is dropped for it (by the
/// caller), so it is no other unit's survivor (its exact copies still join it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn greedy(
    n: usize,
    policy_order: &[u32],
    rep: impl Fn(u32) -> u32,
    buckets: &Buckets,
    tables: &BucketTables,
    confirm: Confirm,
    threshold: f64,
    matched: &[bool],
) -> Greedy {
    let rule = Rule {
        confirm,
        threshold,
        index_from: INDEX_FROM,
    };
    rule.run(n, policy_order, rep, buckets, tables, matched)
}

/// The rule's settings.
struct Rule {
    confirm: Confirm,
    threshold: f64,
    /// Survivors from which a document's candidates come from the prefix index.
    index_from: usize,
}

impl Rule {
    fn run(
        &self,
        n: usize,
        policy_order: &[u32],
        rep: impl Fn(u32) -> u32,
        buckets: &Buckets,
        tables: &BucketTables,
        matched: &[bool],
    ) -> Greedy {
        let Rule {
            confirm,
            threshold,
            index_from,
        } = *self;
        // Each representative's buckets.
        let (starts, of_doc) = memberships(n, (0..buckets.len()).map(|b| buckets.get(b)));
        let buckets_of = |g: u32| &of_doc[starts[g as usize]..starts[g as usize + 1]];

        let mut place = vec![0u32; n];
        for (i, &d) in policy_order.iter().enumerate() {
            place[d as usize] = i as u32;
        }
        const NONE: u32 = u32::MAX;
        let mut root = vec![NONE; n];
        // Each bucket's survivors, in policy order (appended as they are decided).
        let mut survivors: Vec<Vec<u32>> = vec![Vec::new(); buckets.len()];
        // The surviving copy of each representative, if one survives.
        let mut kept_copy = vec![NONE; n];
        let mut pairs = Vec::new();
        let mut counts = BucketCounts::default();
        // The units counted already: a unit is counted once, when its first copy is decided.
        let mut counted = vec![false; n];
        let same_group = |a: u32, b: u32| {
            tables.groups.is_empty() || tables.groups[a as usize] == tables.groups[b as usize]
        };
        // Under exact Jaccard, once a document's buckets hold `index_from` survivors, every
        // survivor with a set by prefix, in place order: those before then at once, the others
        // as they survive.
        let mut index: Option<PrefixIndex> = None;
        let mut survived: Vec<u32> = Vec::new();
        // A representative's set when it has one (under exact Jaccard, when it is in a bucket)
        // and it is not empty.
        let indexed_set = |g: u32| {
            (!buckets_of(g).is_empty())
                .then(|| tables.sets.get(&g))
                .flatten()
                .map(Vec::as_slice)
                .filter(|s| !s.is_empty())
        };
        let (mut prefix, mut viable) = (Vec::new(), Vec::new());
        // The candidates, last first; or, merging the index's groups, `heads`: (the next
        // survivor's place, group, next survivor), and at most the kept copy in `cands`.
        let mut cands: Vec<u32> = Vec::new();
        let mut heads: BinaryHeap<Reverse<(u32, u32, usize)>> = BinaryHeap::new();
        for &d in policy_order {
            let g = rep(d);
            // Copies are alike, so all of a unit's are matched or none.
            let in_index = matched.get(d as usize).copied().unwrap_or(false);
            cands.clear();
            heads.clear();
            if kept_copy[g as usize] != NONE {
                cands.push(kept_copy[g as usize]);
            }
            let held: usize = buckets_of(g)
                .iter()
                .map(|&b| survivors[b as usize].len())
                .sum();
            let mut merging = false;
            match indexed_set(g) {
                _ if in_index => {}
                Some(set) if confirm == Confirm::Jaccard && held >= index_from => {
                    let index = index.get_or_insert_with(|| {
                        let mut index =
                            PrefixIndex::new(threshold, tables.sets.values().map(|s| s.as_slice()));
                        for &s in &survived {
                            let set = indexed_set(rep(s)).expect("indexed survivors have sets");
                            index.prefix(set, &mut prefix);
                            index.insert(&prefix, set.len(), s);
                        }
                        index
                    });
                    merging = true;
                    index.prefix(set, &mut prefix);
                    index.viable_groups(&prefix, set.len(), &mut viable);
                    for &vg in &viable {
                        let first = index.members(vg)[0];
                        heads.push(Reverse((place[first as usize], vg, 0)));
                    }
                }
                _ => {
                    for &b in buckets_of(g) {
                        cands.extend_from_slice(&survivors[b as usize]);
                    }
                    cands.sort_unstable_by_key(|&s| place[s as usize]);
                    cands.dedup();
                    cands.reverse();
                }
            }
            // The next candidate in place order (the same one may come twice in a row).
            let mut next = || -> Option<u32> {
                let (Some(index), true) = (&index, merging) else {
                    return cands.pop();
                };
                let copy = cands.last().map(|&s| place[s as usize]);
                let head = heads.peek().map(|h| h.0 .0);
                if copy.is_some() && head.is_none_or(|h| copy <= Some(h)) {
                    return cands.pop();
                }
                let Reverse((_, vg, k)) = heads.pop()?;
                let list = index.members(vg);
                if k + 1 < list.len() {
                    heads.push(Reverse((place[list[k + 1] as usize], vg, k + 1)));
                }
                Some(list[k])
            };
            let mut joined = None;
            let mut last = NONE;
            while let Some(s) = next() {
                if s == last {
                    continue;
                }
                last = s;
                let h = rep(s);
                if h == g {
                    // An identical copy.
                    let jaccard = (confirm == Confirm::Jaccard).then_some(1.0);
                    joined = Some((s, f64::NAN, jaccard));
                    break;
                }
                if !same_group(g, h) || (merging && !shares_bucket(buckets_of(g), buckets_of(h))) {
                    continue;
                }
                let (a, b) = (g.min(h), g.max(h));
                let (ok, est, jaccard) = test_pair(tables, confirm, threshold, a, b);
                if ok {
                    joined = Some((s, est, jaccard));
                    break;
                }
            }
            // The unit's counts, once, when its first copy is decided: every survivor placed
            // before it is decided, and `survivors[b]` is in place order.
            if !in_index && !std::mem::replace(&mut counted[g as usize], true) {
                let cutoff = joined.map_or(place[d as usize], |(s, ..)| place[s as usize]);
                for &b in buckets_of(g) {
                    let bucket = &survivors[b as usize];
                    // In place order: those up to the cutoff are a prefix.
                    let upto = bucket.partition_point(|&s| place[s as usize] <= cutoff);
                    if tables.groups.is_empty() {
                        let confirmed =
                            (upto > 0 && place[bucket[upto - 1] as usize] == cutoff) as u64;
                        counts.checked += upto as u64;
                        counts.confirmed += confirmed;
                        counts.rejected += upto as u64 - confirmed;
                        continue;
                    }
                    for &s in &bucket[..upto] {
                        if !same_group(g, rep(s)) {
                            counts.other_group += 1;
                            continue;
                        }
                        counts.checked += 1;
                        if place[s as usize] == cutoff {
                            counts.confirmed += 1;
                        } else {
                            counts.rejected += 1;
                        }
                    }
                }
            }
            match joined {
                Some((s, estimate, jaccard)) => {
                    root[d as usize] = s;
                    pairs.push(ConfirmedPair {
                        a: s,
                        b: d,
                        estimate,
                        jaccard,
                    });
                }
                None => {
                    root[d as usize] = d;
                    kept_copy[g as usize] = d;
                    if !in_index {
                        for &b in buckets_of(g) {
                            survivors[b as usize].push(d);
                        }
                        if let Some(set) = indexed_set(g).filter(|_| confirm == Confirm::Jaccard) {
                            match index.as_mut() {
                                Some(index) => {
                                    index.prefix(set, &mut prefix);
                                    index.insert(&prefix, set.len(), d);
                                }
                                None => survived.push(d),
                            }
                        }
                    }
                }
            }
        }
        debug_assert!(root.iter().all(|&r| r != NONE), "every document decided");
        Greedy {
            root,
            pairs,
            counts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::dedup::JaccardCache;

    /// Templated sets (a shared template, a few tokens of each set's own, near copies now and
    /// then) in random buckets: the survivors looked up in the prefix index, from the first
    /// document on, give the very roots, pairs and counts of going through them all.
    #[test]
    fn the_index_changes_the_work_not_the_rule() {
        let mut rng = crate::hash::Pcg32::new(21);
        for round in 0..30u64 {
            let sets = crate::stages::dedup::templated_shingle_sets(&mut rng, 150);
            let n = sets.len();
            // A few buckets, each a random half of the documents, and some pairs.
            let mut members = Vec::new();
            let mut offsets = vec![0];
            for _ in 0..1 + rng.below(4) {
                members.extend((0..n as u32).filter(|_| rng.below(2) == 0));
                offsets.push(members.len());
            }
            for _ in 0..rng.below(10) {
                let (a, b) = (rng.below(n as u32), rng.below(n as u32));
                if a != b {
                    members.extend([a.min(b), a.max(b)]);
                    offsets.push(members.len());
                }
            }
            let buckets = Buckets { members, offsets };
            let mut policy: Vec<u32> = (0..n as u32).collect();
            crate::hash::shuffle(&mut policy, &mut rng);
            let cache = JaccardCache::default();
            let tables = BucketTables {
                num_perm: 1,
                sigs: &vec![0u32; n],
                sets: &sets,
                groups: &[],
                cache: &cache,
            };
            for threshold in [0.5, 0.8, 0.9] {
                let run = |index_from| {
                    let rule = Rule {
                        confirm: Confirm::Jaccard,
                        threshold,
                        index_from,
                    };
                    let g = rule.run(n, &policy, |d| d, &buckets, &tables, &[]);
                    let pairs: Vec<(u32, u32, Option<f64>)> =
                        g.pairs.iter().map(|p| (p.a, p.b, p.jaccard)).collect();
                    (g.root, pairs, g.counts)
                };
                assert_eq!(run(0), run(usize::MAX), "round {round}, t {threshold}");
            }
        }
    }
}
