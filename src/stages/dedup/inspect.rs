//! `neardup inspect`: why two texts are, or are not, near duplicates.

use super::*;
use crate::error::Error;

/// Everything `neardup inspect` says about a pair of documents.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PairReport {
    /// Words, or characters under `--shingle char` (the units shingles are made of).
    pub words: [usize; 2],
    /// Distinct shingles of each.
    pub shingles: [usize; 2],
    pub shared_shingles: usize,
    /// Exact Jaccard of the shingle sets (SPEC §3).
    pub jaccard: f64,
    /// MinHash estimate from the signatures.
    pub estimate: f64,
    /// Bands whose rows are all equal (any one makes the pair an LSH candidate).
    pub colliding_bands: Vec<usize>,
    pub candidate: bool,
    /// Shared shingles, sorted, at most `show`.
    pub shared: Vec<String>,
}

/// Explain why two texts are, or are not, near duplicates.
pub fn inspect_pair(a: &str, b: &str, cfg: &DedupConfig, show: usize) -> Result<PairReport, Error> {
    cfg.validate()?;
    let k = cfg.params.k;
    let rule = cfg.params.rule();
    let (sa, sb) = (
        crate::text::shingles_with(a, k, rule),
        crate::text::shingles_with(b, k, rule),
    );
    let mut shared: Vec<String> = sa.intersection(&sb).cloned().collect();
    shared.sort();
    let perms = cfg.params.perms();
    let (ga, gb) = (
        crate::sign::minhash::minhash(&sa, &perms),
        crate::sign::minhash::minhash(&sb, &perms),
    );
    let r = cfg.lsh.rows;
    let empty = |s: &[u32]| crate::sign::minhash::is_empty_signature(s);
    let colliding_bands: Vec<usize> = if empty(&ga) || empty(&gb) {
        Vec::new()
    } else {
        (0..cfg.lsh.bands)
            .filter(|&j| ga[j * r..(j + 1) * r] == gb[j * r..(j + 1) * r])
            .collect()
    };
    Ok(PairReport {
        words: [
            crate::text::Words::with_rule(a, rule).len(),
            crate::text::Words::with_rule(b, rule).len(),
        ],
        shingles: [sa.len(), sb.len()],
        shared_shingles: shared.len(),
        jaccard: crate::text::jaccard(&sa, &sb),
        estimate: crate::sign::minhash::estimate(&ga, &gb)?,
        candidate: !colliding_bands.is_empty(),
        colliding_bands,
        shared: shared.into_iter().take(show).collect(),
    })
}
