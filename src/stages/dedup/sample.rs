//! The measured S-curve: candidate rates by exact Jaccard on a sample, for reports.

use super::*;
use crate::index::lsh::LshParams;
use crate::text::jaccard_sorted;
use rayon::prelude::*;

/// Pairs whose exact Jaccard lies in `[lo, hi)`, and how many of them LSH made candidates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SimilarityBucket {
    pub lo: f64,
    pub hi: f64,
    pub pairs: u64,
    pub candidates: u64,
}

/// Documents sampled for the measured S-curve, and pairs examined at most.
const SIM_SAMPLE_DOCS: usize = 2000;
const SIM_SAMPLE_PAIRS: usize = 200_000;

/// The documents the measured S-curve looks at: of `docs` (those in some LSH bucket, by
/// document index), a seeded choice of at most [`SIM_SAMPLE_DOCS`], ascending. Deterministic
/// for a set of documents, however they were found.
pub(crate) fn sample_docs(mut docs: Vec<u64>) -> Vec<u64> {
    docs.sort_unstable();
    if docs.len() > SIM_SAMPLE_DOCS {
        let mut rng = crate::hash::Pcg32::new(0x5eed_5c0e);
        crate::hash::shuffle(&mut docs, &mut rng);
        docs.truncate(SIM_SAMPLE_DOCS);
        docs.sort_unstable();
    }
    docs
}

/// The measured S-curve: over a seeded sample of the documents whose shingle sets were loaded
/// (those in some LSH bucket), every pair sharing a shingle, bucketed by exact Jaccard, with
/// whether some band of their signatures is equal (an LSH candidate). Deterministic for an
/// input.
pub(super) fn similarity_sample(
    corpus: &SignedCorpus,
    lsh: LshParams,
    sets: &ShingleSets,
) -> Vec<SimilarityBucket> {
    let docs = sample_docs(sets.keys().map(|&d| d as u64).collect());
    let sampled: Vec<&[u64]> = docs.iter().map(|&d| sets[&(d as u32)].as_slice()).collect();
    similarity_curve(&sampled, |i| corpus.sig(docs[i] as usize), lsh)
}

/// The S-curve over sampled documents: `sets[i]` and `sig(i)` are sample `i`'s shingle set
/// and signature.
pub(crate) fn similarity_curve<'a>(
    sets: &[&[u64]],
    sig: impl Fn(usize) -> &'a [u32] + Sync,
    lsh: LshParams,
) -> Vec<SimilarityBucket> {
    // Every (shingle, sample) once, in shingle order and then sample order: each run of one
    // shingle lists the samples that hold it.
    let mut index: Vec<(u64, u32)> = sets
        .iter()
        .enumerate()
        .flat_map(|(i, set)| set.iter().map(move |&h| (h, i as u32)))
        .collect();
    index.par_sort_unstable();
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for run in index.chunk_by(|x, y| x.0 == y.0) {
        // A shingle in hundreds of sampled documents (boilerplate) adds little but pairs.
        if run.len() > 64 {
            continue;
        }
        for (x, &(_, a)) in run.iter().enumerate() {
            for &(_, b) in &run[x + 1..] {
                pairs.push((a, b));
            }
        }
        if pairs.len() > 4 * SIM_SAMPLE_PAIRS {
            break;
        }
    }
    pairs.par_sort_unstable();
    pairs.dedup();
    pairs.truncate(SIM_SAMPLE_PAIRS);
    // Counts per twentieth of Jaccard, summed over threads (integer sums: the same for any
    // split of the pairs).
    let counts = pairs
        .par_iter()
        .fold(
            || [(0u64, 0u64); 20],
            |mut acc, &(a, b)| {
                let (a, b) = (a as usize, b as usize);
                let j = jaccard_sorted(sets[a], sets[b]);
                let bi = ((j * 20.0) as usize).min(19);
                let (sa, sb) = (sig(a), sig(b));
                let cand = (0..lsh.bands).any(|band| {
                    let r = band * lsh.rows..(band + 1) * lsh.rows;
                    sa[r.clone()] == sb[r]
                });
                acc[bi].0 += 1;
                acc[bi].1 += cand as u64;
                acc
            },
        )
        .reduce(
            || [(0u64, 0u64); 20],
            |mut x, y| {
                for (a, b) in x.iter_mut().zip(y) {
                    a.0 += b.0;
                    a.1 += b.1;
                }
                x
            },
        );
    counts
        .iter()
        .enumerate()
        .map(|(i, &(pairs, candidates))| SimilarityBucket {
            lo: i as f64 / 20.0,
            hi: (i + 1) as f64 / 20.0,
            pairs,
            candidates,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair sharing a shingle held by at most 64 samples, counted one pair at a time.
    fn naive_curve(sets: &[Vec<u64>], sigs: &[Vec<u32>], lsh: LshParams) -> Vec<(u64, u64)> {
        let held = |h: u64| sets.iter().filter(|s| s.contains(&h)).count();
        let mut counts = vec![(0u64, 0u64); 20];
        for a in 0..sets.len() {
            for b in a + 1..sets.len() {
                if !sets[a]
                    .iter()
                    .any(|&h| sets[b].contains(&h) && held(h) <= 64)
                {
                    continue;
                }
                let j = jaccard_sorted(&sets[a], &sets[b]);
                let bi = ((j * 20.0) as usize).min(19);
                let cand = (0..lsh.bands).any(|band| {
                    let r = band * lsh.rows..(band + 1) * lsh.rows;
                    sigs[a][r.clone()] == sigs[b][r]
                });
                counts[bi].0 += 1;
                counts[bi].1 += cand as u64;
            }
        }
        counts
    }

    #[test]
    fn the_curve_counts_each_pair_sharing_a_rare_shingle_once() {
        let mut rng = crate::hash::Pcg32::new(7);
        let lsh = LshParams { bands: 4, rows: 2 };
        // 100 samples over 300 shingle values, each with shingle 0 (held by all: boilerplate,
        // which alone makes no pair); signatures of values 0..3, so bands often agree.
        let mut sets = Vec::new();
        let mut sigs = Vec::new();
        for _ in 0..100 {
            let mut s: Vec<u64> = (0..1 + rng.next_u32() % 12)
                .map(|_| 1 + (rng.next_u32() % 300) as u64)
                .collect();
            s.push(0);
            s.sort_unstable();
            s.dedup();
            sets.push(s);
            sigs.push((0..8).map(|_| rng.next_u32() % 3).collect::<Vec<u32>>());
        }
        let refs: Vec<&[u64]> = sets.iter().map(|s| s.as_slice()).collect();
        let got: Vec<(u64, u64)> = similarity_curve(&refs, |i| &sigs[i], lsh)
            .iter()
            .map(|b| (b.pairs, b.candidates))
            .collect();
        let want = naive_curve(&sets, &sigs, lsh);
        assert_eq!(got, want);
        assert!(want.iter().map(|c| c.0).sum::<u64>() > 100, "{want:?}");
        assert!(want.iter().map(|c| c.1).sum::<u64>() > 0, "{want:?}");
    }
}
