//! Exact set-similarity join inside one LSH bucket: the spanning forest of its pairs at or
//! above a Jaccard threshold, found without comparing every pair.
//!
//! A bucket of templated pages holds thousands of documents that share a long boilerplate:
//! most of its pairs are well below the threshold, and those above it are often a clique.
//! Checking every pair is quadratic in the bucket; so is listing the pairs of a clique. The
//! join here costs what the answer costs.
//!
//! - **Prefix filter** (AllPairs, PPJoin): the bucket's tokens are ordered rarest first; a set
//!   of `l` tokens that reaches Jaccard `t` with any set shares at least `ceil(t l)` tokens with
//!   it, so two such sets share a token among the first `l - ceil(t l) + 1` of each (the
//!   *prefix*). A template's tokens, the most frequent, fall to the end of every prefix.
//! - **Size and position, by group**: a set is indexed under each prefix token in the group of
//!   sets with its size and the token's position in it. For sets of sizes `la`, `lb` the pair
//!   needs `o >= t / (1 + t) * (la + lb)` shared tokens, and when the token is the first they
//!   share, at most `1 + min` of what follows it in either can be shared. A group that cannot
//!   reach that is passed over whole: a template's shared tokens sit at the same positions in
//!   every page of one length, so a bucket of templated pages has a few groups per token.
//! - **Joined blocks**: only one pair per member and earlier set of joined members is wanted
//!   (the forest, not every pair), so within a group, runs of entries already joined to one
//!   another are stepped over as one block, and a member's candidates are tested set by set,
//!   in member order, until one is confirmed.
//!
//! Every filter is exact: each pair whose Jaccard, as [`jaccard_sorted`](crate::text::jaccard_sorted)
//! computes it, is at least the threshold reaches the test. The threshold is shaded down by
//! one part in 10^9 in the filters, so a ratio that rounds up to the threshold is kept too.
//! The tests compare the forest with Kruskal's rule over every pair.

use crate::index::unionfind::UnionFind;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasherDefault;

use crate::ids::HashIsKey;

/// The threshold the filters use: a hair below the one asked for, never above.
fn shaded(threshold: f64) -> f64 {
    threshold * (1.0 - 1e-9)
}

/// `ceil(x)` of a bound computed from a shaded threshold, at least 1: the shading keeps an
/// exact whole number from rounding up past itself.
fn least(x: f64) -> usize {
    (x.ceil() as usize).max(1)
}

/// The least overlap that a set of `len` tokens needs with any set to reach Jaccard `t`
/// (`ceil(t * len)`, at least 1).
fn least_overlap(t: f64, len: usize) -> usize {
    least(t * len as f64)
}

/// The least overlap that sets of `lx` and `ly` tokens need to reach Jaccard `t`:
/// `o / (lx + ly - o) >= t`, i.e. `o >= t / (1 + t) * (lx + ly)`; at least 1.
fn pair_overlap(t: f64, lx: usize, ly: usize) -> usize {
    least(t / (1.0 + t) * (lx + ly) as f64)
}

/// Can sets of these sizes reach Jaccard `t` at all (`|small| >= t |large|`)?
fn sizes_fit(t: f64, lx: usize, ly: usize) -> bool {
    let (small, large) = if lx <= ly { (lx, ly) } else { (ly, lx) };
    small as f64 >= t * large as f64
}

/// The prefix of a set of `len` tokens: how many of its rarest tokens a partner must share.
fn prefix_len(t: f64, len: usize) -> usize {
    len + 1 - least_overlap(t, len).min(len)
}

/// How [`spanning_forest`] settled a bucket's pairs; the three add up to every pair.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ForestCounts {
    /// Pairs given to the exact test.
    pub tested: u64,
    /// Pairs never tested because their members were joined already, through pairs confirmed
    /// before them.
    pub joined: u64,
    /// Pairs that the filters proved below the threshold.
    pub filtered: u64,
}

/// Sets of one size indexed under one token at one position, in the order indexed: `ends[k]`
/// closes a run of entries from `k` known to be joined to one another ([`spanning_forest`]).
struct Group {
    len: u32,
    at: u32,
    /// The next group under the same token.
    sibling: u32,
    members: Vec<u32>,
    ends: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Group {
    /// The end of the block of entries from `k` that are joined to entry `k` (each of which
    /// stays joined: components only grow), compressed for the next walk.
    fn block_end(&mut self, k: usize, uf: &mut UnionFind) -> usize {
        let root = uf.find(self.members[k]);
        let mut e = self.ends[k] as usize;
        while e < self.members.len() && uf.find(self.members[e]) == root {
            e = self.ends[e] as usize;
        }
        self.ends[k] = e as u32;
        e
    }
}

/// A token in the rarest-first order: how many sets hold it (at most; 255 for any more), then
/// its value.
pub type Key = (u8, u64);

/// How many sets hold each token, counted in a sketch: two saturating counters a token, of
/// which the smaller bounds its count from above (others' tokens only add to a counter). The
/// order needs no exact count, only one order for every set, and a count of 1 is exact: a
/// token only one set holds pairs nothing, so it is neither indexed nor looked up, yet keeps
/// its place in each prefix.
#[derive(Clone)]
struct Rarity {
    counts: Vec<u8>,
    shift: u32,
}

impl Rarity {
    fn new(sets: &[&[u64]]) -> Self {
        let total: usize = sets.iter().map(|s| s.len()).sum();
        // Four counters a token or more, so that few tokens that one set holds look shared; at
        // most 16 MiB of them: a bucket of templated pages holds far fewer distinct tokens
        // than tokens, and where a token only looks shared, it is indexed for nothing.
        let bits = (total.max(1) * 4).next_power_of_two().trailing_zeros();
        Rarity::sized(sets, bits.clamp(12, 24))
    }

    /// With `2^bits` counters.
    fn sized(sets: &[&[u64]], bits: u32) -> Self {
        let mut rarity = Rarity {
            counts: vec![0; 1 << bits],
            shift: 64 - bits,
        };
        for set in sets {
            for &v in *set {
                let (a, b) = rarity.slots(v);
                rarity.counts[a] = rarity.counts[a].saturating_add(1);
                rarity.counts[b] = rarity.counts[b].saturating_add(1);
            }
        }
        rarity
    }

    fn slots(&self, v: u64) -> (usize, usize) {
        (
            (v.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize,
            (v.wrapping_mul(0xc2b2_ae3d_27d4_eb4f) >> self.shift) as usize,
        )
    }

    fn key(&self, v: u64) -> Key {
        let (a, b) = self.slots(v);
        (self.counts[a].min(self.counts[b]), v)
    }

    /// The first `n` of `set`'s tokens in rarity order into `out`.
    fn prefix(&self, set: &[u64], n: usize, out: &mut Vec<Key>) {
        out.clear();
        out.extend(set.iter().map(|&v| self.key(v)));
        if n < out.len() {
            out.select_nth_unstable(n);
            out.truncate(n);
        }
        out.sort_unstable();
    }
}

/// The key of the map from a token to its first group: the token, mixed (one to one), so that
/// the map's buckets spread.
fn mixed(v: u64) -> u64 {
    v.wrapping_mul(0xd6e8_feb8_6659_fd93).rotate_left(32)
}

/// Sets indexed under their prefix tokens, each in the group of its size and the token's
/// position, for finding the earlier sets that may reach the threshold with a new one.
pub struct PrefixIndex {
    t: f64,
    rarity: Rarity,
    /// The first group of each token indexed, by its [`mixed`] value.
    head: HashMap<u64, u32, BuildHasherDefault<HashIsKey>>,
    groups: Vec<Group>,
}

impl PrefixIndex {
    /// An empty index for `threshold` (in `(0, 1]`), over the tokens of `sets`: every set
    /// later indexed or looked up is one of them.
    pub fn new<'a>(threshold: f64, sets: impl Iterator<Item = &'a [u64]>) -> Self {
        let sets: Vec<&[u64]> = sets.collect();
        PrefixIndex {
            t: shaded(threshold),
            rarity: Rarity::new(&sets),
            head: HashMap::default(),
            groups: Vec::new(),
        }
    }

    /// An empty index over the same tokens, in the same order.
    fn empty_like(&self) -> Self {
        PrefixIndex {
            t: self.t,
            rarity: self.rarity.clone(),
            head: HashMap::default(),
            groups: Vec::new(),
        }
    }

    /// The prefix of `set` (sorted ascending, without repeats, not empty) into `out`: what
    /// [`PrefixIndex::viable_groups`] and [`PrefixIndex::insert`] take.
    pub fn prefix(&self, set: &[u64], out: &mut Vec<Key>) {
        self.rarity.prefix(set, prefix_len(self.t, set.len()), out);
    }

    /// Each group that may hold a set reaching the threshold with a set of `len` tokens whose
    /// prefix is `prefix`, into `out`: one under a token of it, where the sizes and the
    /// token's positions leave room for enough overlap. A set may be in several.
    pub fn viable_groups(&self, prefix: &[Key], len: usize, out: &mut Vec<u32>) {
        let t = self.t;
        out.clear();
        for (i, &(held, w)) in prefix.iter().enumerate() {
            if held == 1 {
                continue;
            }
            let mut g = self.head.get(&mixed(w)).copied().unwrap_or(NONE);
            while g != NONE {
                let group = &self.groups[g as usize];
                let (la, j) = (group.len as usize, group.at as usize);
                if sizes_fit(t, la, len)
                    && 1 + (len - i - 1).min(la - j - 1) >= pair_overlap(t, la, len)
                {
                    out.push(g);
                }
                g = group.sibling;
            }
        }
    }

    /// Every indexed set that may reach the threshold with the set of `len` tokens whose
    /// prefix is `prefix`, appended to `out` (a set may come more than once); `groups` is
    /// scratch.
    pub fn candidates(
        &self,
        prefix: &[Key],
        len: usize,
        groups: &mut Vec<u32>,
        out: &mut Vec<u32>,
    ) {
        self.viable_groups(prefix, len, groups);
        for &g in groups.iter() {
            out.extend_from_slice(self.members(g));
        }
    }

    /// The sets of group `g` (from [`PrefixIndex::viable_groups`]), in the order indexed.
    pub fn members(&self, g: u32) -> &[u32] {
        &self.groups[g as usize].members
    }

    /// Index `member`, a set of `len` tokens whose prefix is `prefix`.
    pub fn insert(&mut self, prefix: &[Key], len: usize, member: u32) {
        for (i, &(held, w)) in prefix.iter().enumerate() {
            if held == 1 {
                continue;
            }
            let (len, at) = (len as u32, i as u32);
            let first = self.head.entry(mixed(w)).or_insert(NONE);
            let mut g = *first;
            while g != NONE
                && (self.groups[g as usize].len, self.groups[g as usize].at) != (len, at)
            {
                g = self.groups[g as usize].sibling;
            }
            if g == NONE {
                g = self.groups.len() as u32;
                self.groups.push(Group {
                    len,
                    at,
                    sibling: *first,
                    members: Vec::new(),
                    ends: Vec::new(),
                });
                *first = g;
            }
            let group = &mut self.groups[g as usize];
            group.members.push(member);
            group.ends.push(group.members.len() as u32);
        }
    }
}

/// The spanning forest of the pairs of `sets` (each sorted ascending, without repeats) whose
/// Jaccard is at least `threshold` (in `(0, 1]`), as Kruskal's rule finds it when it visits
/// the pairs by their later member, then their earlier one, and tests a pair only when its
/// members are not joined yet. That is: for each member `b`, and each set of earlier members
/// joined so far and not to `b`, the pair of `b` and that set's first member that `test`
/// confirms.
///
/// `test(a, b)` (`a < b`, places in `sets`) is the exact test, called only for pairs that the
/// filters could not rule out and whose members are not joined; it returns whether the pair is
/// confirmed (its Jaccard is at least `threshold`), and the forest grows by it. An empty set
/// pairs with nothing.
pub fn spanning_forest(
    sets: &[&[u64]],
    threshold: f64,
    test: impl FnMut(u32, u32) -> bool,
) -> ForestCounts {
    forest(sets, None, threshold, test)
}

/// Sets on two sides whose own forests are known: what [`spanning_forest_across`] joins.
#[derive(Clone, Copy)]
pub struct Sides<'a> {
    /// Whether each set is on the second side.
    pub second: &'a [bool],
    /// Each side's own spanning forest ([`spanning_forest`] of its sets alone, in the same
    /// order), as pairs `(a, b)`, `a < b`, places in the sets: sorted by `b`, then `a`.
    pub known: &'a [(u32, u32)],
}

/// [`spanning_forest`] of sets on two sides, given each side's own forest: only pairs across
/// the sides are looked up and tested, and the pairs `test` confirms are the forest's pairs
/// across the sides (the known pairs keep their places in the order, so the forest of the
/// known pairs and those is the forest of every pair). A pair within a side that the known
/// forest lacks is never needed: its members are joined by known pairs that come before it.
/// The counts are of the pairs across the sides.
pub fn spanning_forest_across(
    sets: &[&[u64]],
    sides: Sides,
    threshold: f64,
    test: impl FnMut(u32, u32) -> bool,
) -> ForestCounts {
    assert_eq!(sides.second.len(), sets.len());
    debug_assert!(sides
        .known
        .windows(2)
        .all(|w| (w[0].1, w[0].0) < (w[1].1, w[1].0)));
    debug_assert!(sides
        .known
        .iter()
        .all(|&(a, b)| a < b && sides.second[a as usize] == sides.second[b as usize]));
    forest(sets, Some(sides), threshold, test)
}

/// [`spanning_forest`], or with `sides`, [`spanning_forest_across`]: a member looks up the
/// earlier members of the other side (or of its own, without sides), and a known pair joins
/// its members when no pair tested before it has.
fn forest(
    sets: &[&[u64]],
    sides: Option<Sides>,
    threshold: f64,
    mut test: impl FnMut(u32, u32) -> bool,
) -> ForestCounts {
    let m = sets.len();
    assert!(m < NONE as usize, "a bucket is limited to 2^32 - 1 members");
    let side = |x: u32| sides.map_or(0, |s| s.second[x as usize] as usize);
    let known = sides.map_or(&[][..], |s| s.known);
    // One index a side, in one token order.
    let mut index = vec![PrefixIndex::new(threshold, sets.iter().copied())];
    if sides.is_some() {
        index.push(index[0].empty_like());
    }
    let mut counts = ForestCounts::default();
    let mut uf = UnionFind::new(m);
    // Members of each root's set, on each side.
    let mut size: Vec<[u32; 2]> = (0..m as u32)
        .map(|x| if side(x) == 0 { [1, 0] } else { [0, 1] })
        .collect();
    // Members so far on each side.
    let mut seen = [0u64; 2];
    let (mut prefix, mut viable) = (Vec::new(), Vec::new());
    // The candidates' blocks: (root, next entry's member, group, next entry, end).
    let mut blocks: Vec<(u32, u32, u32, u32, u32)> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
    let mut rejected: Vec<u32> = Vec::new();
    // Each set joined to `b` by a known pair: its root and that pair's earlier member.
    let mut stops: Vec<(u32, u32)> = Vec::new();
    let mut next_known = 0;
    for b in 0..m as u32 {
        let own = side(b);
        let from = if sides.is_some() { 1 - own } else { own };
        stops.clear();
        while next_known < known.len() && known[next_known].1 == b {
            let a = known[next_known].0;
            stops.push((uf.find(a), a));
            next_known += 1;
        }
        // The earliest known pair of each set.
        stops.sort_unstable();
        stops.dedup_by_key(|s| s.0);
        let lb = sets[b as usize].len();
        let (mut tested, mut confirmed) = (0u64, 0u64);
        rejected.clear();
        if lb > 0 {
            index[from].prefix(sets[b as usize], &mut prefix);
            // The blocks of the groups that may hold a partner.
            blocks.clear();
            index[from].viable_groups(&prefix, lb, &mut viable);
            for &gid in &viable {
                let group = &mut index[from].groups[gid as usize];
                let mut k = 0;
                while k < group.members.len() {
                    let e = group.block_end(k, &mut uf);
                    let first = group.members[k];
                    blocks.push((uf.find(first), first, gid, k as u32, e as u32));
                    k = e;
                }
            }
            // Set by set, its candidates in member order until one is confirmed, or until
            // the set's known pair, which comes before any later candidate.
            blocks.sort_unstable();
            let mut s = 0;
            while s < blocks.len() {
                let root = blocks[s].0;
                let mut e = s + 1;
                while e < blocks.len() && blocks[e].0 == root {
                    e += 1;
                }
                let stop = stops
                    .binary_search_by_key(&root, |s| s.0)
                    .map_or(NONE, |i| stops[i].1);
                heap.clear();
                heap.extend((s..e).map(|x| Reverse((blocks[x].1, x as u32))));
                let mut last = NONE;
                while let Some(Reverse((a, x))) = heap.pop() {
                    if a > stop {
                        break;
                    }
                    let group = &index[from].groups[blocks[x as usize].2 as usize];
                    let block = &mut blocks[x as usize];
                    block.3 += 1;
                    if block.3 < block.4 {
                        block.1 = group.members[block.3 as usize];
                        heap.push(Reverse((block.1, x)));
                    }
                    if a == last {
                        continue;
                    }
                    last = a;
                    tested += 1;
                    if test(a, b) {
                        join(&mut uf, &mut size, a, b);
                        confirmed += 1;
                        break;
                    }
                    rejected.push(a);
                }
                s = e;
            }
        }
        for &(_, a) in &stops {
            if uf.find(a) != uf.find(b) {
                join(&mut uf, &mut size, a, b);
            }
        }
        let rb = uf.find(b);
        let rejected_joined = rejected.iter().filter(|&&a| uf.find(a) == rb).count() as u64;
        let others = size[rb as usize][from] as u64 - u64::from(from == own);
        let joined = others - confirmed - rejected_joined;
        counts.tested += tested;
        counts.joined += joined;
        counts.filtered += seen[from] - tested - joined;
        seen[own] += 1;
        if lb > 0 {
            index[own].insert(&prefix, lb, b);
        }
    }
    counts
}

/// Join the sets of `a` and `b`, their sizes summed at the root that stays (the smaller).
fn join(uf: &mut UnionFind, size: &mut [[u32; 2]], a: u32, b: u32) {
    let (ra, rb) = (uf.find(a), uf.find(b));
    uf.union(ra, rb);
    let (x, y) = (size[ra as usize], size[rb as usize]);
    size[ra.min(rb) as usize] = [x[0] + y[0], x[1] + y[1]];
}

/// Templated sets for tests: `n` sets of the tokens `0..template` and 2 to 13 tokens of their
/// own; one in five a near copy of an earlier set (its own tokens, with token 0 changed).
#[cfg(test)]
pub(crate) fn templated_sets(
    rng: &mut crate::hash::Pcg32,
    n: usize,
    template: u64,
) -> Vec<Vec<u64>> {
    let mut sets: Vec<Vec<u64>> = Vec::new();
    for d in 0..n as u64 {
        let base = if d > 0 && rng.below(5) == 0 {
            rng.below(d as u32) as u64
        } else {
            d
        };
        let mut v: Vec<u64> = (0..template)
            .chain((0..2 + rng.below(12) as u64).map(|w| 1_000_000 + base * 100 + w))
            .collect();
        if base != d {
            v[0] = 5_000_000 + d;
        }
        v.sort_unstable();
        v.dedup();
        sets.push(v);
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::jaccard_sorted;

    /// The oracle: Kruskal's rule over every pair, by later member then earlier, each pair not
    /// joined yet tested. The forest's pairs, and the pairs tested.
    fn every_pair(sets: &[Vec<u64>], t: f64) -> (Vec<(u32, u32)>, u64) {
        let mut uf = UnionFind::new(sets.len());
        let (mut forest, mut tested) = (Vec::new(), 0);
        for b in 0..sets.len() as u32 {
            for a in 0..b {
                if uf.connected(a, b) {
                    continue;
                }
                tested += 1;
                if jaccard_sorted(&sets[a as usize], &sets[b as usize]) >= t {
                    uf.union(a, b);
                    forest.push((a, b));
                }
            }
        }
        (forest, tested)
    }

    /// The forest, checked against the oracle; the counts add up to every pair.
    fn check(sets: &[Vec<u64>], t: f64) -> (Vec<(u32, u32)>, ForestCounts) {
        let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
        let mut forest = Vec::new();
        let counts = spanning_forest(&refs, t, |a, b| {
            assert!(a < b);
            let ok = jaccard_sorted(&sets[a as usize], &sets[b as usize]) >= t;
            if ok {
                forest.push((a, b));
            }
            ok
        });
        forest.sort_unstable_by_key(|&(a, b)| (b, a));
        let (want, tested) = every_pair(sets, t);
        assert_eq!(forest, want, "t = {t}");
        let m = sets.len() as u64;
        assert_eq!(
            counts.tested + counts.joined + counts.filtered,
            m * m.saturating_sub(1) / 2,
            "t = {t}"
        );
        assert!(counts.tested <= tested, "t = {t}");
        (forest, counts)
    }

    fn set(range: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut v: Vec<u64> = range.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Every overlap that reaches the threshold as `jaccard_sorted` computes it passes the
    /// bounds, for every pair of sizes up to 120 and thresholds whose products are whole
    /// numbers and are not.
    #[test]
    fn the_bounds_keep_every_pair_at_the_threshold() {
        for threshold in [
            0.05,
            0.3,
            0.5,
            0.6,
            2.0 / 3.0,
            0.7,
            0.75,
            0.8,
            0.85,
            0.9,
            0.95,
            1.0,
        ] {
            let t = shaded(threshold);
            for lx in 1..=120usize {
                for ly in 1..=120usize {
                    for o in 1..=lx.min(ly) {
                        let j = o as f64 / (lx + ly - o) as f64;
                        if j < threshold {
                            continue;
                        }
                        assert!(sizes_fit(t, lx, ly), "{threshold} {lx} {ly} {o}");
                        assert!(o >= pair_overlap(t, lx, ly), "{threshold} {lx} {ly} {o}");
                        assert!(o >= least_overlap(t, lx), "{threshold} {lx} {ly} {o}");
                    }
                }
            }
        }
    }

    /// The bounds are tight: a pair one token short of the threshold is ruled out by them.
    #[test]
    fn the_bounds_are_the_least_overlaps() {
        // 56 shared of 61 and 66 tokens: 56 / 71 < 0.8, and 57 are needed.
        assert_eq!(pair_overlap(shaded(0.8), 61, 66), 57);
        // 0.8 * 60 is 48 exactly: the shading keeps it from rounding to 49.
        assert_eq!(least_overlap(shaded(0.8), 60), 48);
        assert_eq!(prefix_len(shaded(0.8), 60), 13);
        assert_eq!(prefix_len(shaded(0.8), 71), 15);
        assert_eq!(prefix_len(shaded(1.0), 10), 1);
    }

    /// Pairs exactly at the threshold, for thresholds and sizes where `t * n` is a whole number
    /// and where it is not: each is in the forest.
    #[test]
    fn pairs_at_the_threshold_are_kept() {
        for n in 1..=40u64 {
            for shared in 0..=n {
                let a = set(0..n);
                let b = set((0..shared).chain(1000..1000 + n - shared));
                let j = jaccard_sorted(&a, &b);
                if j == 0.0 {
                    continue;
                }
                let (forest, _) = check(&[a, b], j);
                assert_eq!(forest, vec![(0, 1)], "n {n} shared {shared}");
            }
        }
    }

    /// A template shared by every set, a few tokens of each set's own (5 to 15), and planted
    /// near copies: pages with few own tokens are near duplicates of one another, the others
    /// only of their copies. The forest is the oracle's, with a fraction of its tests.
    #[test]
    fn a_template_bucket_costs_its_forest() {
        let mut rng = crate::hash::Pcg32::new(3);
        let m = 600u64;
        let own = |d: u64, n: u64| (0..n).map(move |w| 1_000_000 + d * 100 + w);
        let mut sets: Vec<Vec<u64>> = Vec::new();
        for d in 0..m {
            let n = 5 + rng.below(11) as u64;
            if d >= 20 && rng.below(20) == 0 {
                // A near copy of an earlier page: its own tokens, one changed.
                let base = rng.below(d as u32) as usize;
                let mut v = sets[base].clone();
                let at = rng.below(v.len() as u32) as usize;
                if v[at] >= 1_000_000 {
                    v[at] = 9_000_000 + d;
                }
                sets.push(set(v));
            } else {
                sets.push(set((0..56).chain(own(d, n))));
            }
        }
        let (forest, counts) = check(&sets, 0.8);
        assert!(forest.len() > 100, "{}", forest.len());
        let (_, oracle_tested) = every_pair(&sets, 0.8);
        assert!(
            counts.tested * 20 < oracle_tested,
            "{} of {oracle_tested}",
            counts.tested
        );
    }

    /// Random sets over a small universe, so that many pairs sit near any threshold, and
    /// families of near copies, so that sets join in many orders.
    /// `m` random sets: of values below `universe` (`uniform`), or each one of `families`
    /// 30-value families with fewer than `edits` values replaced.
    fn random_sets(
        rng: &mut crate::hash::Pcg32,
        m: usize,
        universe: u64,
        uniform: bool,
        families: u32,
        edits: u32,
    ) -> Vec<Vec<u64>> {
        (0..m)
            .map(|_| {
                if uniform {
                    let len = rng.below(universe as u32 + 1) as usize;
                    set((0..len).map(|_| rng.below(universe as u32) as u64))
                } else {
                    let family = rng.below(families) as u64;
                    let mut v: Vec<u64> = (0..30).map(|w| family * 100 + w).collect();
                    for _ in 0..rng.below(edits) {
                        let at = rng.below(30) as usize;
                        v[at] = 10_000 + rng.below(universe as u32) as u64;
                    }
                    set(v)
                }
            })
            .collect()
    }

    #[test]
    fn random_sets_give_the_oracles_forest() {
        let mut rng = crate::hash::Pcg32::new(7);
        for round in 0..80 {
            let universe = 8 + rng.below(60) as u64;
            let m = 2 + rng.below(60) as usize;
            let sets = random_sets(&mut rng, m, universe, round % 2 == 0, 4, 10);
            for t in [0.05, 0.3, 0.5, 2.0 / 3.0, 0.7, 0.8, 0.9, 0.95, 1.0] {
                check(&sets, t);
            }
        }
    }

    /// Kruskal's rule over `pairs` (by later member, then earlier): the forest they span.
    fn kruskal(m: usize, mut pairs: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
        pairs.sort_unstable_by_key(|&(a, b)| (b, a));
        let mut uf = UnionFind::new(m);
        pairs.retain(|&(a, b)| uf.union(a, b));
        pairs
    }

    /// Sets split between two sides at random: each side's own forest, then the pairs across
    /// found from them, span the oracle's forest of every pair; the counts add up to the pairs
    /// across, and no pair within a side is tested.
    #[test]
    fn the_forest_across_two_sides_joins_their_own_forests() {
        let mut rng = crate::hash::Pcg32::new(11);
        let mut across_seen = 0;
        for round in 0..120 {
            let universe = 8 + rng.below(60) as u64;
            let m = 2 + rng.below(70) as usize;
            let sets = if round % 3 == 2 {
                templated_sets(&mut rng, m, 40)
            } else {
                random_sets(&mut rng, m, universe, round % 3 == 0, 3, 8)
            };
            let second: Vec<bool> = (0..m).map(|_| rng.below(2) == 1).collect();
            let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
            for t in [0.3, 0.5, 0.7, 0.8, 0.9, 1.0] {
                // Each side's forest, by its own sets alone, in places of all of them.
                let mut known = Vec::new();
                for side in [false, true] {
                    let at: Vec<u32> = (0..m as u32)
                        .filter(|&x| second[x as usize] == side)
                        .collect();
                    let own: Vec<&[u64]> = at.iter().map(|&x| refs[x as usize]).collect();
                    spanning_forest(&own, t, |a, b| {
                        let (a, b) = (at[a as usize], at[b as usize]);
                        let ok = jaccard_sorted(&sets[a as usize], &sets[b as usize]) >= t;
                        if ok {
                            known.push((a, b));
                        }
                        ok
                    });
                }
                known.sort_unstable_by_key(|&(a, b)| (b, a));
                let mut found = Vec::new();
                let sides = Sides {
                    second: &second,
                    known: &known,
                };
                let counts = spanning_forest_across(&refs, sides, t, |a, b| {
                    assert!(a < b);
                    assert_ne!(
                        second[a as usize], second[b as usize],
                        "a pair within a side"
                    );
                    let ok = jaccard_sorted(&sets[a as usize], &sets[b as usize]) >= t;
                    if ok {
                        found.push((a, b));
                    }
                    ok
                });
                across_seen += found.len();
                let cross: u64 = {
                    let ones = second.iter().filter(|&&x| x).count() as u64;
                    let pairs = m as u64 * (m as u64 - 1) / 2;
                    pairs
                        - ones * ones.saturating_sub(1) / 2
                        - (m as u64 - ones) * (m as u64 - ones).saturating_sub(1) / 2
                };
                assert_eq!(
                    counts.tested + counts.joined + counts.filtered,
                    cross,
                    "t = {t}"
                );
                let want = every_pair(&sets, t).0;
                // Every pair confirmed across joins two sets: the forest has it.
                assert!(found.iter().all(|p| want.contains(p)), "t = {t}");
                let spanned = kruskal(m, known.iter().chain(&found).copied().collect());
                assert_eq!(spanned, want, "round {round}, t = {t}");
            }
        }
        assert!(across_seen > 100, "{across_seen}");
    }

    /// Each count bounds the sets that hold the token from above (255 standing for more), and a
    /// count of 1 is exact, however crowded the counters.
    #[test]
    fn the_sketch_bounds_each_count_and_one_is_exact() {
        let mut rng = crate::hash::Pcg32::new(9);
        let sets: Vec<Vec<u64>> = (0..400)
            .map(|_| set((0..1 + rng.below(60)).map(|_| rng.below(5000) as u64 * 7919)))
            .collect();
        let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
        let mut held = std::collections::HashMap::new();
        for s in &sets {
            for &v in s {
                *held.entry(v).or_insert(0u32) += 1;
            }
        }
        for bits in [4, 8, 12, 16] {
            let rarity = Rarity::sized(&refs, bits);
            let mut singles = 0;
            for (&v, &n) in &held {
                let (count, _) = rarity.key(v);
                assert!(
                    count as u32 >= n.min(255),
                    "bits {bits}: {v} held {n}, counted {count}"
                );
                if count == 1 {
                    assert_eq!(n, 1, "bits {bits}");
                    singles += 1;
                }
            }
            if bits == 16 {
                assert!(singles > 0);
            }
        }
    }

    #[test]
    fn empty_sets_pair_with_nothing() {
        let sets = vec![vec![], vec![], set(0..3), set(0..3), vec![]];
        let (forest, counts) = check(&sets, 0.5);
        assert_eq!(forest, vec![(2, 3)]);
        assert_eq!(counts.tested, 1);
    }
}
