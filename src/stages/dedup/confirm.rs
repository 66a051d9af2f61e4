//! Confirming one LSH bucket on its own: which of its pairs are duplicates, and a spanning forest
//! of them.
//!
//! A bucket's members are taken in id order. Its pairs are visited by their later member, then
//! their earlier one, and a pair is checked only when its two members are not yet joined through
//! the bucket's own confirmed pairs (Kruskal's rule in that order). What a bucket yields depends
//! on the bucket alone, never on the other buckets: buckets are confirmed in parallel, and the
//! union of every bucket's pairs is the same however the buckets are split across partitions,
//! threads or machines. Its components are those of every confirmed pair, because a skipped pair
//! is always already joined.
//!
//! A large bucket under exact-Jaccard confirmation is confirmed by an exact similarity join
//! ([`crate::index::simjoin`]) that finds the same spanning pairs: in a bucket of templated
//! pages most pairs are far below the threshold, and the join proves it without a merge of
//! their shingle sets, nor a visit to each pair.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use super::{Confirm, ConfirmedPair, ShingleSets};
use crate::ids::HashIsKey;
use crate::index::lsh::Buckets;
use crate::index::simjoin::{spanning_forest, spanning_forest_across, Sides};
use crate::index::unionfind::UnionFind;
use crate::sign::minhash::agreement;
use crate::text::jaccard_sorted;

/// Members from which a bucket is confirmed through the similarity join (below, checking
/// every pair costs less than ordering the bucket's tokens).
pub const FILTER_MIN_MEMBERS: usize = 32;

/// What confirming a bucket reads, by document index.
pub struct BucketTables<'a> {
    pub num_perm: usize,
    /// Row `d` is document `d`'s signature.
    pub sigs: &'a [u32],
    /// The shingle sets, for `jaccard` confirmation (every member's).
    pub sets: &'a ShingleSets,
    /// Each document's group; empty without groups.
    pub groups: &'a [u32],
    /// The Jaccards computed so far, by every bucket.
    pub cache: &'a JaccardCache,
}

/// Shards of [`JaccardCache`]: enough that two threads seldom wait for one.
const CACHE_SHARDS: usize = 64;

/// The most Jaccards one shard of [`JaccardCache`] keeps: 2.1 million in all, about 50 MB. The
/// pairs worth keeping are near duplicates, checked again in other bands' buckets; a large
/// bucket is tested about once a member ([`crate::index::simjoin`]), mostly pairs no other
/// bucket asks for.
const CACHE_SHARD_ENTRIES: usize = 1 << 15;

/// The exact Jaccards computed so far, shared by the buckets being confirmed: a pair of near
/// duplicates sits in the buckets of most bands, and each bucket checks it on its own, so a
/// pair's shingle sets are merged once and looked up after. Bounded: once a shard is full, a
/// pair it lacks is computed each time it is asked for. It changes the work, never a result.
pub struct JaccardCache {
    shards: Vec<std::sync::Mutex<HashMap<u64, f64, BuildHasherDefault<HashIsKey>>>>,
    /// Entries a shard keeps at the most.
    shard_entries: usize,
}

impl Default for JaccardCache {
    fn default() -> Self {
        JaccardCache::bounded(CACHE_SHARD_ENTRIES)
    }
}

impl JaccardCache {
    /// A cache whose shards keep at most `shard_entries` Jaccards each.
    fn bounded(shard_entries: usize) -> Self {
        JaccardCache {
            shards: (0..CACHE_SHARDS).map(|_| Default::default()).collect(),
            shard_entries,
        }
    }

    /// The Jaccard of documents `a` and `b`, computed by `compute` the first time (and again
    /// when the cache was full then).
    fn get(&self, a: u32, b: u32, compute: impl FnOnce() -> f64) -> f64 {
        // Mixed, so that both the shard (top bits) and the map (low bits) spread.
        let key = ((a as u64) << 32 | b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let shard = &self.shards[(key >> 58) as usize % CACHE_SHARDS];
        if let Some(&j) = shard.lock().expect("not poisoned").get(&key) {
            return j;
        }
        let j = compute();
        let mut map = shard.lock().expect("not poisoned");
        if map.len() < self.shard_entries {
            map.insert(key, j);
        }
        j
    }

    /// Jaccards kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap().len()).sum()
    }
}

/// The work of confirming buckets, pair by pair (a pair in two buckets counts in each).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BucketCounts {
    /// Pairs whose estimate or Jaccard was computed.
    pub checked: u64,
    /// Of those, at or above the threshold.
    pub confirmed: u64,
    pub rejected: u64,
    /// Pairs skipped because the bucket had joined their members already.
    pub already_joined: u64,
    /// Pairs of two groups (`--group-field`): never duplicates.
    pub other_group: u64,
    /// Pairs that the prefix filter proved below the threshold, never checked.
    pub filtered: u64,
}

impl std::ops::AddAssign for BucketCounts {
    fn add_assign(&mut self, o: Self) {
        self.checked += o.checked;
        self.confirmed += o.confirmed;
        self.rejected += o.rejected;
        self.already_joined += o.already_joined;
        self.other_group += o.other_group;
        self.filtered += o.filtered;
    }
}

impl BucketCounts {
    /// The work of `t` buckets like this one.
    pub fn times(self, t: u64) -> Self {
        BucketCounts {
            checked: self.checked * t,
            confirmed: self.confirmed * t,
            rejected: self.rejected * t,
            already_joined: self.already_joined * t,
            other_group: self.other_group * t,
            filtered: self.filtered * t,
        }
    }
}

fn pairs_of(n: usize) -> u64 {
    (n as u64) * (n as u64).saturating_sub(1) / 2
}

/// The MinHash estimate of two signatures of `num_perm` entries.
pub(crate) fn estimate(a: &[u32], b: &[u32], num_perm: usize) -> f64 {
    agreement(a, b) as f64 / num_perm as f64
}

/// Write the estimate of every pair that [`confirm_bucket`] left without one (all but under
/// `estimate` confirmation): once a pair, after the buckets' pairs are merged, rather than once
/// a bucket.
pub fn fill_estimates(pairs: &mut [ConfirmedPair], sigs: &[u32], num_perm: usize) {
    use rayon::prelude::*;
    let sig = |d: u32| &sigs[d as usize * num_perm..(d as usize + 1) * num_perm];
    pairs.par_iter_mut().for_each(|p| {
        if p.estimate.is_nan() {
            p.estimate = estimate(sig(p.a), sig(p.b), num_perm);
        }
    });
}

/// The confirmation's test of documents `a` and `b` (groups aside): whether they are near
/// duplicates, the estimate (NaN unless confirmation is by estimate: it is written for the
/// distinct pairs alone, afterwards, by [`fill_estimates`]) and the Jaccard when computed.
pub(crate) fn test_pair(
    tables: &BucketTables,
    confirm: Confirm,
    threshold: f64,
    a: u32,
    b: u32,
) -> (bool, f64, Option<f64>) {
    let p = tables.num_perm;
    let sig = |d: u32| &tables.sigs[d as usize * p..(d as usize + 1) * p];
    match confirm {
        Confirm::None => (true, f64::NAN, None),
        Confirm::Estimate => {
            let est = estimate(sig(a), sig(b), p);
            (est >= threshold, est, None)
        }
        Confirm::Jaccard => {
            let j = tables
                .cache
                .get(a, b, || jaccard_sorted(&tables.sets[&a], &tables.sets[&b]));
            (j >= threshold, f64::NAN, Some(j))
        }
    }
}

/// Confirm one bucket: `members` are document indices in id order. Its spanning pairs are
/// appended to `out` (`a` the earlier in id order; the estimate NaN unless confirmation is by
/// estimate, see [`fill_estimates`]), its work added to `counts`.
pub fn confirm_bucket(
    members: &[u32],
    tables: &BucketTables,
    confirm: Confirm,
    threshold: f64,
    out: &mut Vec<ConfirmedPair>,
    counts: &mut BucketCounts,
) {
    let run = Run {
        tables,
        confirm,
        threshold,
        filter_min: FILTER_MIN_MEMBERS,
        small_max: SMALL_BUCKET,
    };
    run.bucket(members, out, counts);
}

/// [`confirm_bucket`] under `jaccard` for members on two sides whose own forests are known
/// (`sides`, by positions in `members`): only pairs across the sides are tested, and the pairs
/// appended are the forest's pairs across them ([`spanning_forest_across`]). A pair of two
/// groups is never confirmed.
pub fn confirm_bucket_across(
    members: &[u32],
    sides: Sides,
    tables: &BucketTables,
    threshold: f64,
    out: &mut Vec<ConfirmedPair>,
    counts: &mut BucketCounts,
) {
    let run = Run {
        tables,
        confirm: Confirm::Jaccard,
        threshold,
        filter_min: FILTER_MIN_MEMBERS,
        small_max: SMALL_BUCKET,
    };
    let sets: Vec<&[u64]> = members.iter().map(|d| tables.sets[d].as_slice()).collect();
    let mut other_group = 0;
    let forest = spanning_forest_across(&sets, sides, threshold, |a, b| {
        let (a, b) = (members[a as usize], members[b as usize]);
        if !tables.groups.is_empty() && tables.groups[a as usize] != tables.groups[b as usize] {
            other_group += 1;
            return false;
        }
        run.test(a, b, out, counts)
    });
    counts.checked += forest.tested - other_group;
    counts.other_group += other_group;
    counts.already_joined += forest.joined;
    counts.filtered += forest.filtered;
}

/// Confirm each distinct bucket of `buckets` once, in parallel: a bucket's pairs depend on
/// its members alone, so a list of members that several bands bucket alike is confirmed once,
/// its work counted for each. `order` puts a bucket's members (a copy) in the order
/// [`confirm_bucket`] takes. Returns every bucket's pairs and their work.
pub fn confirm_distinct(
    buckets: &Buckets,
    order: impl Fn(&mut [u32]) + Sync,
    tables: &BucketTables,
    confirm: Confirm,
    threshold: f64,
) -> (Vec<ConfirmedPair>, BucketCounts) {
    use rayon::prelude::*;
    buckets
        .distinct()
        .into_par_iter()
        .fold(
            || (Vec::new(), BucketCounts::default(), Vec::new()),
            |(mut pairs, mut counts, mut members), (i, times)| {
                members.clear();
                members.extend_from_slice(buckets.get(i));
                order(&mut members);
                let mut once = BucketCounts::default();
                confirm_bucket(&members, tables, confirm, threshold, &mut pairs, &mut once);
                counts += once.times(times);
                (pairs, counts, members)
            },
        )
        .map(|(pairs, counts, _)| (pairs, counts))
        .reduce(
            || (Vec::new(), BucketCounts::default()),
            |(mut pa, mut ca), (pb, cb)| {
                pa.extend(pb);
                ca += cb;
                (pa, ca)
            },
        )
}

/// One bucket's confirmation settings.
struct Run<'a> {
    tables: &'a BucketTables<'a>,
    confirm: Confirm,
    threshold: f64,
    /// Members from which the similarity join confirms the bucket.
    filter_min: usize,
    /// Members up to which the bucket's pairs are visited by [`Run::small`] (at most
    /// [`SMALL_BUCKET`]).
    small_max: usize,
}

impl Run<'_> {
    /// Test members `a` and `b` (`a` the earlier) and record the outcome: the pair appended
    /// to `out` and counted confirmed, or counted rejected. Returns whether confirmed.
    fn test(
        &self,
        a: u32,
        b: u32,
        out: &mut Vec<ConfirmedPair>,
        counts: &mut BucketCounts,
    ) -> bool {
        let (ok, estimate, jaccard) = test_pair(self.tables, self.confirm, self.threshold, a, b);
        if ok {
            counts.confirmed += 1;
            out.push(ConfirmedPair {
                a,
                b,
                estimate,
                jaccard,
            });
        } else {
            counts.rejected += 1;
        }
        ok
    }

    fn bucket(&self, members: &[u32], out: &mut Vec<ConfirmedPair>, counts: &mut BucketCounts) {
        let tables = self.tables;
        if tables.groups.is_empty() {
            self.group(members, out, counts);
            return;
        }
        // Each group's members apart, in id order; pairs across groups are never duplicates.
        let mut by_group: Vec<(u32, u32)> = members
            .iter()
            .map(|&d| (tables.groups[d as usize], d))
            .collect();
        by_group.sort_by_key(|&(g, _)| g);
        counts.other_group += pairs_of(members.len());
        let mut group: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < by_group.len() {
            group.clear();
            let g = by_group[i].0;
            while i < by_group.len() && by_group[i].0 == g {
                group.push(by_group[i].1);
                i += 1;
            }
            counts.other_group -= pairs_of(group.len());
            self.group(&group, out, counts);
        }
    }

    /// [`confirm_bucket`] for members of one group.
    fn group(&self, members: &[u32], out: &mut Vec<ConfirmedPair>, counts: &mut BucketCounts) {
        let Run {
            tables,
            confirm,
            threshold,
            filter_min,
            ..
        } = *self;
        let m = members.len();
        if m < 2 {
            return;
        }
        if confirm == Confirm::Jaccard && m >= filter_min {
            let sets: Vec<&[u64]> = members.iter().map(|d| tables.sets[d].as_slice()).collect();
            let forest = spanning_forest(&sets, threshold, |a, b| {
                self.test(members[a as usize], members[b as usize], out, counts)
            });
            counts.checked += forest.tested;
            counts.already_joined += forest.joined;
            counts.filtered += forest.filtered;
            return;
        }
        if m <= self.small_max {
            self.small(members, out, counts);
            return;
        }
        let mut uf = Joined::new(m);
        // Check the pair of members at positions `a < b`; join them when confirmed.
        let mut check = |a: usize, b: usize, uf: &mut Joined, counts: &mut BucketCounts| {
            if uf.connected(a as u32, b as u32) {
                counts.already_joined += 1;
                return;
            }
            counts.checked += 1;
            if self.test(members[a], members[b], out, counts) {
                uf.union(a as u32, b as u32);
            }
        };
        for b in 1..m {
            uf.scan(b, counts, |a, uf, counts| check(a, b, uf, counts));
        }
    }
}

/// Members up to which a bucket's pairs are visited one by one, over a union-find on the
/// stack: most buckets of real text hold a few members, and [`Joined`]'s runs would cost more
/// to build than the steps they save.
const SMALL_BUCKET: usize = 64;

impl Run<'_> {
    /// [`Run::group`] for at most [`SMALL_BUCKET`] members: the same pairs in the same order
    /// (each earlier member of each member, a pair checked unless joined already).
    fn small(&self, members: &[u32], out: &mut Vec<ConfirmedPair>, counts: &mut BucketCounts) {
        let m = members.len();
        debug_assert!(m <= SMALL_BUCKET);
        let mut parent = [0u8; SMALL_BUCKET];
        for (i, p) in parent.iter_mut().enumerate().take(m) {
            *p = i as u8;
        }
        let find = |parent: &[u8; SMALL_BUCKET], mut x: u8| {
            while parent[x as usize] != x {
                x = parent[x as usize];
            }
            x
        };
        for b in 1..m {
            for a in 0..b {
                let (ra, rb) = (find(&parent, a as u8), find(&parent, b as u8));
                if ra == rb {
                    counts.already_joined += 1;
                    continue;
                }
                counts.checked += 1;
                if self.test(members[a], members[b], out, counts) {
                    // The smaller root stays, so `find` walks at most one step a union.
                    parent[ra.max(rb) as usize] = ra.min(rb);
                }
            }
        }
    }
}

/// Union-find over a bucket's members (their positions) that also keeps each set of two or
/// more as runs of consecutive positions, so that a scan of a member's earlier ones steps over
/// a whole run already joined to it: in a bucket of `n` near duplicates each member's scan
/// costs a test and a step, where visiting every earlier member would cost `n^2 / 2` in all.
struct Joined {
    uf: UnionFind,
    /// Each root's runs, `start -> end` (exclusive), disjoint and not touching; a singleton's
    /// are implicit.
    runs: HashMap<u32, BTreeMap<u32, u32>>,
}

impl Joined {
    fn new(m: usize) -> Self {
        Joined {
            uf: UnionFind::new(m),
            runs: HashMap::new(),
        }
    }

    fn connected(&mut self, a: u32, b: u32) -> bool {
        self.uf.connected(a, b)
    }

    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.uf.find(a), self.uf.find(b));
        if ra == rb {
            return;
        }
        self.uf.union(ra, rb);
        let root = self.uf.find(ra);
        let take = |runs: &mut HashMap<u32, BTreeMap<u32, u32>>, r: u32| {
            runs.remove(&r)
                .unwrap_or_else(|| BTreeMap::from([(r, r + 1)]))
        };
        let (x, y) = (take(&mut self.runs, ra), take(&mut self.runs, rb));
        // The smaller into the larger: each run moves O(log n) times.
        let (mut big, small) = if x.len() >= y.len() { (x, y) } else { (y, x) };
        for (s, e) in small {
            insert_run(&mut big, s, e);
        }
        self.runs.insert(root, big);
    }

    /// Visit the positions `a < b` that are not joined to `b`, in order, with `visit(a, ..)`
    /// (which may join them); runs of positions joined to `b` are counted as already joined.
    fn scan(
        &mut self,
        b: usize,
        counts: &mut BucketCounts,
        mut visit: impl FnMut(usize, &mut Joined, &mut BucketCounts),
    ) {
        let mut a = 0;
        while a < b {
            let rb = self.uf.find(b as u32);
            if self.uf.find(a as u32) == rb {
                let end = self.runs[&rb]
                    .range(..=a as u32)
                    .next_back()
                    .map_or(a as u32 + 1, |(_, &e)| e) as usize;
                let end = end.min(b);
                counts.already_joined += (end - a) as u64;
                a = end;
                continue;
            }
            visit(a, self, counts);
            a += 1;
        }
    }
}

/// Add the run `s..e` to `runs`, merged with the runs it touches.
fn insert_run(runs: &mut BTreeMap<u32, u32>, mut s: u32, mut e: u32) {
    if let Some((&ps, &pe)) = runs.range(..=s).next_back() {
        if pe >= s {
            s = ps;
            e = e.max(pe);
            runs.remove(&ps);
        }
    }
    while let Some((&ns, &ne)) = runs.range(s..).next() {
        if ns > e {
            break;
        }
        e = e.max(ne);
        runs.remove(&ns);
    }
    runs.insert(s, e);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The old loop: every earlier member of every member, in order, each pair checked unless
    /// already joined.
    fn every_pair_in_order(
        members: &[u32],
        tables: &BucketTables,
        confirm: Confirm,
        threshold: f64,
    ) -> (Vec<(u32, u32)>, BucketCounts) {
        let mut uf = UnionFind::new(members.len());
        let (mut pairs, mut counts) = (Vec::new(), BucketCounts::default());
        for b in 1..members.len() {
            for a in 0..b {
                if uf.connected(a as u32, b as u32) {
                    counts.already_joined += 1;
                    continue;
                }
                counts.checked += 1;
                let (da, db) = (members[a], members[b]);
                if test_pair(tables, confirm, threshold, da, db).0 {
                    uf.union(a as u32, b as u32);
                    counts.confirmed += 1;
                    pairs.push((da, db));
                } else {
                    counts.rejected += 1;
                }
            }
        }
        (pairs, counts)
    }

    /// Buckets of near copies (one set joined early), chains, blocks and random sets, under
    /// each confirmation: stepping over joined runs confirms the very pairs, and counts the
    /// same work, as visiting every earlier member.
    #[test]
    fn stepping_over_joined_runs_changes_nothing() {
        let mut rng = crate::hash::Pcg32::new(5);
        for round in 0..60u64 {
            let m = 2 + rng.below(150) as usize;
            let kind = round % 4;
            let mut sets = ShingleSets::new();
            for d in 0..m as u64 {
                let family = match kind {
                    0 => 0,                             // all near copies
                    1 => d / 3,                         // blocks
                    2 => d / (1 + rng.below(6) as u64), // uneven runs
                    _ => rng.below(4) as u64,           // interleaved families
                };
                let mut v: Vec<u64> = (0..40).map(|w| family * 1000 + w).collect();
                for _ in 0..rng.below(8) {
                    let at = rng.below(40) as usize;
                    v[at] = 1_000_000 + rng.below(1_000_000) as u64;
                }
                v.sort_unstable();
                v.dedup();
                sets.insert(d as u32, v);
            }
            let sigs: Vec<u32> = (0..m * 4)
                .map(|i| (i % 7) as u32 % (1 + rng.below(3)))
                .collect();
            let cache = JaccardCache::default();
            let tables = BucketTables {
                num_perm: 4,
                sigs: &sigs,
                sets: &sets,
                groups: &[],
                cache: &cache,
            };
            // Members in a shuffled order: positions are not document numbers.
            let mut members: Vec<u32> = (0..m as u32).collect();
            for i in (1..m).rev() {
                members.swap(i, rng.below(i as u32 + 1) as usize);
            }
            for confirm in [Confirm::Jaccard, Confirm::Estimate, Confirm::None] {
                for threshold in [0.5, 0.8] {
                    let want = every_pair_in_order(&members, &tables, confirm, threshold);
                    // Runs stepped over, and (up to its size) the small buckets' loop.
                    for small_max in [0, SMALL_BUCKET] {
                        let mut pairs = Vec::new();
                        let mut counts = BucketCounts::default();
                        Run {
                            tables: &tables,
                            confirm,
                            threshold,
                            filter_min: usize::MAX,
                            small_max,
                        }
                        .bucket(&members, &mut pairs, &mut counts);
                        let pairs: Vec<(u32, u32)> = pairs.iter().map(|p| (p.a, p.b)).collect();
                        assert_eq!(
                            (pairs, counts),
                            want,
                            "round {round}, {confirm:?}, {threshold}, small {small_max}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn runs_merge_when_they_touch_or_overlap() {
        let mut runs = BTreeMap::new();
        for (s, e) in [
            (5, 6),
            (7, 8),
            (6, 7),
            (0, 2),
            (3, 4),
            (2, 3),
            (10, 12),
            (9, 11),
        ] {
            insert_run(&mut runs, s, e);
        }
        assert_eq!(
            runs.into_iter().collect::<Vec<_>>(),
            [(0, 4), (5, 8), (9, 12)]
        );
    }

    /// A full cache keeps what it has, stops growing, and still answers every pair.
    #[test]
    fn a_full_cache_answers_and_stops_growing() {
        let cache = JaccardCache::bounded(2);
        let mut computed = 0;
        for round in 0..2 {
            for a in 0..100u32 {
                let j = cache.get(a, a + 1, || {
                    computed += 1;
                    a as f64 / 100.0
                });
                assert_eq!(j, a as f64 / 100.0, "round {round}");
            }
        }
        assert!(cache.len() <= 2 * CACHE_SHARDS, "{}", cache.len());
        // The kept pairs were answered from the cache in the second round, the rest computed.
        assert_eq!(computed, 200 - cache.len());
    }

    /// Buckets of templated sets with planted near copies, and of random sets: the similarity
    /// join yields the very pairs of checking every pair in order, with fewer checks.
    #[test]
    fn the_filter_changes_the_work_not_the_pairs() {
        let mut rng = crate::hash::Pcg32::new(11);
        for round in 0..40u64 {
            let m = 2 + rng.below(120) as usize;
            let template = rng.below(60) as u64;
            let own = 1 + rng.below(20) as u64;
            let mut sets = ShingleSets::new();
            for d in 0..m as u64 {
                // A near copy of an earlier set now and then: its own tokens, one changed.
                let base = if d > 0 && rng.below(4) == 0 {
                    rng.below(d as u32) as u64
                } else {
                    d
                };
                let mut v: Vec<u64> = (0..template)
                    .chain((0..own).map(|w| 1_000_000 + base * 1000 + w))
                    .collect();
                if base != d {
                    v[template as usize] = 2_000_000 + d;
                }
                v.sort_unstable();
                sets.insert(d as u32, v);
            }
            let groups: Vec<u32> = if round % 3 == 0 {
                (0..m).map(|_| rng.below(2)).collect()
            } else {
                Vec::new()
            };
            let cache = JaccardCache::default();
            let tables = BucketTables {
                num_perm: 1,
                sigs: &vec![0u32; m],
                sets: &sets,
                groups: &groups,
                cache: &cache,
            };
            let members: Vec<u32> = (0..m as u32).collect();
            for threshold in [0.5, 0.8, 0.9] {
                let run = |filter_min| {
                    let mut pairs = Vec::new();
                    let mut counts = BucketCounts::default();
                    Run {
                        tables: &tables,
                        confirm: Confirm::Jaccard,
                        threshold,
                        filter_min,
                        small_max: SMALL_BUCKET,
                    }
                    .bucket(&members, &mut pairs, &mut counts);
                    let pairs: Vec<(u32, u32)> = pairs.iter().map(|p| (p.a, p.b)).collect();
                    (pairs, counts)
                };
                let (every, c_every) = run(usize::MAX);
                assert_eq!(c_every.filtered, 0);
                let total = |c: BucketCounts| c.checked + c.already_joined + c.filtered;
                let (joined, c_joined) = run(2);
                assert_eq!(every, joined, "round {round} t {threshold}");
                assert_eq!(total(c_every), total(c_joined));
                assert_eq!(c_every.other_group, c_joined.other_group);
                assert_eq!(
                    c_every.checked - c_every.rejected,
                    c_joined.checked - c_joined.rejected
                );
                assert!(c_joined.checked <= c_every.checked);
            }
        }
    }
}
