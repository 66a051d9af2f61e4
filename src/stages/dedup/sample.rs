//! The measured S-curve: candidate rates by exact Jaccard on a sample, for reports.

use std::collections::HashMap;

use super::*;
use crate::index::lsh::LshParams;
use crate::text::jaccard_sorted;

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
        crate::synth::shuffle(&mut docs, &mut rng);
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
    sig: impl Fn(usize) -> &'a [u32],
    lsh: LshParams,
) -> Vec<SimilarityBucket> {
    let mut index: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        for &h in set.iter() {
            index.entry(h).or_default().push(i as u32);
        }
    }
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut keys: Vec<u64> = index.keys().copied().collect();
    keys.sort_unstable();
    for h in keys {
        let list = &index[&h];
        // A shingle in hundreds of sampled documents (boilerplate) adds little but pairs.
        if list.len() > 64 {
            continue;
        }
        for (x, &a) in list.iter().enumerate() {
            for &b in &list[x + 1..] {
                pairs.push((a, b));
            }
        }
        if pairs.len() > 4 * SIM_SAMPLE_PAIRS {
            break;
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs.truncate(SIM_SAMPLE_PAIRS);
    let mut buckets: Vec<SimilarityBucket> = (0..20)
        .map(|i| SimilarityBucket {
            lo: i as f64 / 20.0,
            hi: (i + 1) as f64 / 20.0,
            pairs: 0,
            candidates: 0,
        })
        .collect();
    for (a, b) in pairs {
        let (a, b) = (a as usize, b as usize);
        let j = jaccard_sorted(sets[a], sets[b]);
        let bi = ((j * 20.0) as usize).min(19);
        let (sa, sb) = (sig(a), sig(b));
        let cand = (0..lsh.bands).any(|band| {
            let r = band * lsh.rows..(band + 1) * lsh.rows;
            sa[r.clone()] == sb[r]
        });
        buckets[bi].pairs += 1;
        buckets[bi].candidates += cand as u64;
    }
    buckets
}
