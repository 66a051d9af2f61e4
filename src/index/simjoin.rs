//! Exact set-similarity join inside one LSH bucket: the pairs of sets that can reach a Jaccard
//! threshold, found without comparing every pair.
//!
//! A bucket of templated pages (thousands of documents that share a long boilerplate) holds
//! mostly pairs well below the threshold, and checking one costs a merge of two shingle sets.
//! Prefix filtering (AllPairs, PPJoin) finds the pairs worth checking. Order the bucket's tokens
//! rarest first; a pair with overlap `o` shares a token among the first `|x| - o + 1` tokens of
//! each side. Jaccard `>= t` needs `o >= t/(1+t) * (|x| + |y|)`, so when the sets are visited by
//! size, each set needs to be indexed by only its first `|x| - ceil(2t/(1+t) |x|) + 1` tokens
//! (PPJoin's index prefix): a template's shared tokens, the most frequent, stay out of the
//! index. The size filter (`|small| >= t |large|`) and the positional filter (the overlap found
//! so far plus what is left of either set must reach the needed overlap) drop more.
//!
//! Every filter is exact: each pair whose Jaccard, as [`jaccard_sorted`](crate::text::jaccard_sorted)
//! computes it, is at least the threshold is among the candidates. The tests compare against
//! every pair. The threshold is shaded down by one part in 10^9 in the filters, so a ratio that
//! rounds up to the threshold is kept too.

/// The threshold the filters use: a hair below the one asked for, never above.
fn shaded(threshold: f64) -> f64 {
    threshold * (1.0 - 1e-9)
}

/// The least overlap that a set of `len` tokens needs with any set to reach Jaccard `t`
/// (`ceil(t * len)`, taken one lower where floating point might round it up), at least 1.
fn least_overlap(t: f64, len: usize) -> usize {
    ((t * len as f64).floor() as usize).max(1)
}

/// The least overlap that sets of `lx` and `ly` tokens need to reach Jaccard `t`:
/// `o / (lx + ly - o) >= t`, i.e. `o >= t / (1 + t) * (lx + ly)`; floored, at least 1.
fn pair_overlap(t: f64, lx: usize, ly: usize) -> usize {
    ((t / (1.0 + t) * (lx + ly) as f64).floor() as usize).max(1)
}

/// Can sets of these sizes reach Jaccard `t` at all (`|small| >= t |large|`)?
fn sizes_fit(t: f64, lx: usize, ly: usize) -> bool {
    let (small, large) = if lx <= ly { (lx, ly) } else { (ly, lx) };
    small as f64 >= t * large as f64
}

/// For each of `sets` (each sorted ascending, without repeats), the most tokens it can share
/// with any other of them: its size less its private tokens (those no other set holds). A
/// bucket of templated pages shares the template and little else, so this bounds a pair
/// without merging the two sets ([`may_reach`]).
pub fn shareable(sets: &[&[u64]]) -> Vec<usize> {
    let mut all: Vec<u64> = sets.iter().flat_map(|s| s.iter().copied()).collect();
    all.sort_unstable();
    let mut private: Vec<u64> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let mut e = i + 1;
        while e < all.len() && all[e] == all[i] {
            e += 1;
        }
        if e - i == 1 {
            private.push(all[i]);
        }
        i = e;
    }
    drop(all);
    sets.iter()
        .map(|s| {
            s.len()
                - s.iter()
                    .filter(|v| private.binary_search(v).is_ok())
                    .count()
        })
        .collect()
}

/// Can sets of `lx` and `ly` tokens that share at most `most` tokens reach Jaccard `threshold`?
/// Exact: `false` only where the Jaccard is surely below it.
pub fn may_reach(threshold: f64, lx: usize, ly: usize, most: usize) -> bool {
    let t = shaded(threshold);
    sizes_fit(t, lx, ly) && most >= pair_overlap(t, lx, ly)
}

/// Every pair of `sets` (each sorted ascending, without repeats) whose Jaccard may be at least
/// `threshold` (in `(0, 1]`), as `(i, j)` with `i < j`, sorted. An empty set pairs with
/// nothing.
///
/// Returns `None` as soon as more than `max_pairs` candidates are found: the bucket is dense with
/// similar sets, and checking its pairs in order (where pairs already joined are skipped) is
/// cheaper than listing them.
pub fn candidate_pairs(
    sets: &[&[u64]],
    threshold: f64,
    max_pairs: usize,
) -> Option<Vec<(u32, u32)>> {
    let t = shaded(threshold);
    let m = sets.len();
    // Frequency of each token in the bucket; rarest first, ties by value.
    let mut all: Vec<u64> = sets.iter().flat_map(|s| s.iter().copied()).collect();
    all.sort_unstable();
    let mut tokens: Vec<u64> = Vec::new();
    let mut freq: Vec<u32> = Vec::new();
    for &v in &all {
        if tokens.last() == Some(&v) {
            *freq.last_mut().unwrap() += 1;
        } else {
            tokens.push(v);
            freq.push(1);
        }
    }
    drop(all);
    let mut by_rarity: Vec<u32> = (0..tokens.len() as u32).collect();
    by_rarity.sort_unstable_by_key(|&i| (freq[i as usize], tokens[i as usize]));
    let mut order_of = vec![0u32; tokens.len()];
    for (o, &i) in by_rarity.iter().enumerate() {
        order_of[i as usize] = o as u32;
    }
    drop(by_rarity);

    // Visit sets by size (then index), so that each needs only its index prefix indexed.
    let mut visit: Vec<u32> = (0..m as u32)
        .filter(|&i| !sets[i as usize].is_empty())
        .collect();
    visit.sort_unstable_by_key(|&i| (sets[i as usize].len(), i));

    let index_t = 2.0 * t / (1.0 + t);
    let mut index: Vec<Vec<(u32, u32)>> = vec![Vec::new(); tokens.len()];
    // Overlap found so far with each indexed set; -1: pruned for the set being probed.
    let mut acc: Vec<i32> = vec![0; m];
    let mut touched: Vec<u32> = Vec::new();
    let mut prefix: Vec<u32> = Vec::new();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &x in &visit {
        let set = sets[x as usize];
        let lx = set.len();
        // The set's tokens in rarity order; only a prefix is needed.
        prefix.clear();
        prefix.extend(set.iter().map(|v| {
            // Every token of every set is in `tokens`.
            let at = tokens.binary_search(v).unwrap_or_else(|_| unreachable!());
            order_of[at]
        }));
        prefix.sort_unstable();
        let probe_len = lx - least_overlap(t, lx) + 1;
        let index_len = (lx - least_overlap(index_t, lx) + 1).min(probe_len);
        touched.clear();
        for (i, &w) in prefix[..probe_len].iter().enumerate() {
            for &(y, j) in &index[w as usize] {
                let a = acc[y as usize];
                if a < 0 {
                    continue;
                }
                let ly = sets[y as usize].len();
                if a == 0 {
                    touched.push(y);
                    if !sizes_fit(t, lx, ly) {
                        acc[y as usize] = -1;
                        continue;
                    }
                }
                let left = (lx - i - 1).min(ly - j as usize - 1);
                if a as usize + 1 + left >= pair_overlap(t, lx, ly) {
                    acc[y as usize] = a + 1;
                } else {
                    acc[y as usize] = -1;
                }
            }
        }
        for &y in &touched {
            if acc[y as usize] > 0 {
                out.push((y.min(x), y.max(x)));
                if out.len() > max_pairs {
                    return None;
                }
            }
            acc[y as usize] = 0;
        }
        for (i, &w) in prefix[..index_len].iter().enumerate() {
            index[w as usize].push((x, i as u32));
        }
    }
    out.sort_unstable();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::jaccard_sorted;

    /// The bound never rules out a pair at or above the threshold, and rules out the pairs of
    /// a template with a few private tokens each.
    #[test]
    fn the_shareable_bound_is_exact() {
        let mut rng = crate::hash::Pcg32::new(5);
        for _ in 0..200 {
            let m = 2 + rng.below(12) as usize;
            let sets: Vec<Vec<u64>> = (0..m)
                .map(|_| set((0..1 + rng.below(40)).map(|_| rng.below(60) as u64)))
                .collect();
            let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
            let most = shareable(&refs);
            for t in [0.3, 0.5, 0.8, 1.0] {
                for j in 0..m {
                    for i in 0..j {
                        if jaccard_sorted(&sets[i], &sets[j]) >= t {
                            let bound = most[i].min(most[j]);
                            assert!(may_reach(t, sets[i].len(), sets[j].len(), bound), "t {t}");
                        }
                    }
                }
            }
        }
        // 56 template tokens and 10 private ones each: Jaccard 56 / 76 < 0.8, ruled out.
        let template = |d: u64| set((0..56).chain((0..10).map(|w| 1000 + d * 100 + w)));
        let sets = [template(1), template(2), template(3)];
        let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
        assert_eq!(shareable(&refs), [56, 56, 56]);
        assert!(!may_reach(0.8, 66, 66, 56));
        assert!(may_reach(0.7, 66, 66, 56));
    }

    /// The oracle: every pair, compared.
    fn naive(sets: &[Vec<u64>], t: f64) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for j in 0..sets.len() {
            for i in 0..j {
                if !sets[i].is_empty() && jaccard_sorted(&sets[i], &sets[j]) >= t {
                    out.push((i as u32, j as u32));
                }
            }
        }
        out
    }

    fn check(sets: &[Vec<u64>], t: f64) -> Vec<(u32, u32)> {
        let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
        let got = candidate_pairs(&refs, t, usize::MAX).unwrap();
        for p in naive(sets, t) {
            assert!(got.binary_search(&p).is_ok(), "missed {p:?} at t = {t}");
        }
        got
    }

    fn set(range: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut v: Vec<u64> = range.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Pairs exactly at the threshold, for thresholds and sizes where `t * n` is a whole number
    /// and where it is not: the filters keep each.
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
                let sets = vec![a, b];
                let got = check(&sets, j);
                assert_eq!(got, vec![(0, 1)], "n {n} shared {shared}");
            }
        }
    }

    /// A template shared by every set, plus a few tokens of each set's own, and planted pairs
    /// that share their own tokens too: only the planted pairs remain, without one missed.
    #[test]
    fn a_template_bucket_leaves_only_the_planted_pairs() {
        let m = 400u64;
        let mut sets: Vec<Vec<u64>> = (0..m)
            .map(|d| set((0..56).chain((0..10).map(|w| 1_000_000 + d * 100 + w))))
            .collect();
        for d in (0..m).step_by(40) {
            // A near copy of set d: its own tokens, one changed.
            let mut own: Vec<u64> = (0..10).map(|w| 1_000_000 + d * 100 + w).collect();
            own[0] = 9_000_000 + d;
            sets[(d + 7) as usize] = set((0..56).chain(own));
        }
        let got = check(&sets, 0.8);
        let planted: Vec<(u32, u32)> = (0..m as u32).step_by(40).map(|d| (d, d + 7)).collect();
        assert_eq!(got, planted);
    }

    /// Random sets over a small universe, so that many pairs sit near any threshold.
    #[test]
    fn random_sets_lose_no_pair() {
        let mut rng = crate::hash::Pcg32::new(7);
        for round in 0..60 {
            let universe = 8 + rng.below(60) as u64;
            let m = 2 + rng.below(40) as usize;
            let sets: Vec<Vec<u64>> = (0..m)
                .map(|_| {
                    let len = rng.below(universe as u32 + 1) as usize;
                    set((0..len).map(|_| rng.below(universe as u32) as u64))
                })
                .collect();
            for t in [0.05, 0.3, 0.5, 2.0 / 3.0, 0.7, 0.8, 0.9, 0.95, 1.0] {
                let got = check(&sets, t);
                assert!(got.windows(2).all(|w| w[0] < w[1]), "round {round}");
            }
        }
    }

    #[test]
    fn too_many_candidates_give_up() {
        let sets: Vec<Vec<u64>> = (0..50).map(|_| set(0..20)).collect();
        let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
        assert_eq!(candidate_pairs(&refs, 0.8, 1224), None);
        assert_eq!(candidate_pairs(&refs, 0.8, 1225).unwrap().len(), 1225);
    }

    #[test]
    fn empty_sets_pair_with_nothing() {
        let sets = vec![vec![], vec![], set(0..3), set(0..3)];
        assert_eq!(check(&sets, 0.5), vec![(2, 3)]);
    }
}
