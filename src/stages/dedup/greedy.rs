//! The greedy survivor rule (SPEC §3): documents in survivor-policy order; each survives unless
//! an already surviving document is its confirmed near duplicate, and a dropped one joins the
//! first such survivor (in policy order), the root and tag of its cluster.
//!
//! Pairs are confirmed lazily: a document is tested only against the survivors ranked before
//! it that share an LSH bucket with it, in policy order, until one is confirmed. So a bucket of
//! near-identical documents costs about one test a member, not one a pair.
//!
//! Exact copies (`--exact`) stand in for each other: only the smallest id of each set of
//! identical documents (its representative) is in the buckets, a copy has its representative's
//! candidates and tests, and copies are confirmed near duplicates of each other.
//!
//! The counts are not the tests run but the rule's, bucket by bucket (as `components` counts
//! them, and as out of core counts them for any number of partitions: a bucket lies whole in
//! one partition): in each bucket, each unit (a representative and its copies) against the
//! bucket's surviving units placed before it, up to and including its root.

use super::confirm::{test_pair, BucketCounts, BucketTables};
use super::{Confirm, ConfirmedPair};
use crate::index::lsh::{memberships, Buckets};

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
    let mut cands: Vec<u32> = Vec::new();
    for &d in policy_order {
        let g = rep(d);
        // Copies are alike, so all of a unit's are matched or none.
        let in_index = matched.get(d as usize).copied().unwrap_or(false);
        cands.clear();
        if kept_copy[g as usize] != NONE {
            cands.push(kept_copy[g as usize]);
        }
        if !in_index {
            for &b in buckets_of(g) {
                cands.extend_from_slice(&survivors[b as usize]);
            }
        }
        cands.sort_unstable_by_key(|&s| place[s as usize]);
        cands.dedup();
        let mut joined = None;
        for &s in &cands {
            let h = rep(s);
            if h == g {
                // An identical copy.
                let jaccard = (confirm == Confirm::Jaccard).then_some(1.0);
                joined = Some((s, f64::NAN, jaccard));
                break;
            }
            if !same_group(g, h) {
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
                for &s in &survivors[b as usize] {
                    if place[s as usize] > cutoff {
                        break;
                    }
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
