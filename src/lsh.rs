//! LSH banding (SPEC §3): documents whose signatures agree on every row of some band become
//! candidate pairs.
//!
//! Buckets are found by sorting `(digest of band, document)` per band and then checking the
//! full band for equality inside each run of equal digests, so a digest collision can never make
//! a candidate (the SPEC allows a lossy digest only on that condition). Sorting rather than a hash
//! map keeps memory at 16 bytes per document per band being processed and makes the bucket order
//! deterministic.

use std::collections::HashMap;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::minhash::is_empty_signature;
use crate::Error;

/// The banding: `bands` bands of `rows` rows; `num_perm` must equal `bands * rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LshParams {
    pub bands: usize,
    pub rows: usize,
}

impl Default for LshParams {
    fn default() -> Self {
        LshParams { bands: 16, rows: 8 }
    }
}

impl LshParams {
    /// Checked constructor: both at least 1.
    pub fn new(bands: usize, rows: usize) -> Result<Self, Error> {
        if bands == 0 || rows == 0 {
            return Err(Error::Param(format!(
                "bands ({bands}) and rows ({rows}) must both be at least 1"
            )));
        }
        Ok(LshParams { bands, rows })
    }

    /// Check that signatures of `num_perm` entries can be banded this way.
    pub fn check_num_perm(&self, num_perm: usize) -> Result<(), Error> {
        if self.bands * self.rows != num_perm {
            return Err(Error::Param(format!(
                "num_perm ({num_perm}) must equal bands x rows ({} x {} = {})",
                self.bands,
                self.rows,
                self.bands * self.rows
            )));
        }
        Ok(())
    }

    /// The threshold reported for this configuration, `(1/bands)^(1/rows)`.
    pub fn threshold(&self) -> f64 {
        (1.0 / self.bands as f64).powf(1.0 / self.rows as f64)
    }

    /// `p(s) = 1 - (1 - s^rows)^bands`: the chance that a pair of Jaccard `s` becomes a candidate.
    pub fn probability(&self, s: f64) -> f64 {
        1.0 - (1.0 - s.powi(self.rows as i32)).powi(self.bands as i32)
    }

    /// The exact similarity at which `p(s) = 0.5`: `(1 - 0.5^(1/bands))^(1/rows)`.
    pub fn half_point(&self) -> f64 {
        (1.0 - 0.5f64.powf(1.0 / self.bands as f64)).powf(1.0 / self.rows as f64)
    }
}

/// Groups of documents that share a band, all bands together. Bucket `i` is
/// `members[offsets[i]..offsets[i+1]]`, each with at least two documents in ascending order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Buckets {
    pub members: Vec<u32>,
    pub offsets: Vec<usize>,
}

impl Buckets {
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> &[u32] {
        &self.members[self.offsets[i]..self.offsets[i + 1]]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u32]> {
        (0..self.len()).map(move |i| self.get(i))
    }

    fn push(&mut self, group: impl IntoIterator<Item = u32>) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.members.extend(group);
        self.offsets.push(self.members.len());
    }
}

/// The buckets of the signature matrix `sigs` (`num_perm` entries a row; row `d` is document
/// `d`), over the documents for which `eligible(d)` holds. Band `j` of a document is rows
/// `j*rows .. (j+1)*rows`. Buckets come band by band, within a band in digest order.
pub fn band_buckets(
    sigs: &[u32],
    num_perm: usize,
    params: LshParams,
    eligible: impl Fn(usize) -> bool + Sync,
) -> Buckets {
    assert_eq!(params.bands * params.rows, num_perm);
    let docs = sigs.len().checked_div(num_perm).unwrap_or(0);
    let band_of = |d: usize, j: usize| -> &[u32] {
        let off = d * num_perm + j * params.rows;
        &sigs[off..off + params.rows]
    };
    // One band per task, as many bands at a time as there are threads (each holds 16 bytes per
    // document while it sorts); their buckets are joined in band order, so the result does not
    // depend on the thread count.
    let one_band = |j: usize| -> Buckets {
        let mut out = Buckets::default();
        let mut keys: Vec<(u64, u32)> = (0..docs)
            .filter(|&d| eligible(d))
            .map(|d| {
                let band: &[u8] = bytemuck::cast_slice(band_of(d, j));
                (xxh3_64_with_seed(band, j as u64), d as u32)
            })
            .collect();
        keys.sort_unstable();
        let mut i = 0;
        while i < keys.len() {
            let mut e = i + 1;
            while e < keys.len() && keys[e].0 == keys[i].0 {
                e += 1;
            }
            if e - i >= 2 {
                // Equal digests: split by the full band. A stable sort keeps documents ascending
                // inside each group of equal bands.
                let mut run: Vec<u32> = keys[i..e].iter().map(|&(_, d)| d).collect();
                run.sort_by(|&x, &y| band_of(x as usize, j).cmp(band_of(y as usize, j)));
                let mut s = 0;
                while s < run.len() {
                    let mut t = s + 1;
                    while t < run.len()
                        && band_of(run[t] as usize, j) == band_of(run[s] as usize, j)
                    {
                        t += 1;
                    }
                    if t - s >= 2 {
                        out.push(run[s..t].iter().copied());
                    }
                    s = t;
                }
            }
            i = e;
        }
        out
    };
    let mut out = Buckets::default();
    let step = rayon::current_num_threads().max(1);
    for first in (0..params.bands).step_by(step) {
        let group: Vec<Buckets> = (first..(first + step).min(params.bands))
            .into_par_iter()
            .map(one_band)
            .collect();
        for g in group {
            for i in 0..g.len() {
                out.push(g.get(i).iter().copied());
            }
        }
    }
    if out.offsets.is_empty() {
        out.offsets.push(0);
    }
    out
}

/// An LSH index over named signatures, for library users who want the candidate pairs
/// themselves. (The `dedup` pipeline uses [`band_buckets`] directly over its signature matrix.)
#[derive(Debug, Clone)]
pub struct Lsh {
    params: LshParams,
    ids: Vec<String>,
    seen: HashMap<String, usize>,
    sigs: Vec<u32>,
    indexed: Vec<bool>,
}

impl Lsh {
    pub fn new(params: LshParams) -> Self {
        Lsh {
            params,
            ids: Vec::new(),
            seen: HashMap::new(),
            sigs: Vec::new(),
            indexed: Vec::new(),
        }
    }

    pub fn params(&self) -> LshParams {
        self.params
    }

    /// See [`LshParams::threshold`].
    pub fn threshold(&self) -> f64 {
        self.params.threshold()
    }

    /// See [`LshParams::probability`].
    pub fn probability(&self, s: f64) -> f64 {
        self.params.probability(s)
    }

    /// Add a document. Errors on a repeated id or a signature whose length is not
    /// `bands * rows`. A signature that is all `P` (a wordless text) is remembered (so its id
    /// cannot be reused) but not indexed: it is nobody's duplicate.
    pub fn insert(&mut self, id: &str, sig: &[u32]) -> Result<(), Error> {
        let n = self.params.bands * self.params.rows;
        if sig.len() != n {
            return Err(Error::Lsh(format!(
                "signature of {id:?} has {} entries, this index takes {} ({} bands x {} rows)",
                sig.len(),
                n,
                self.params.bands,
                self.params.rows
            )));
        }
        if self.seen.contains_key(id) {
            return Err(Error::Lsh(format!("id {id:?} was inserted already")));
        }
        self.seen.insert(id.to_string(), self.ids.len());
        self.ids.push(id.to_string());
        self.sigs.extend_from_slice(sig);
        self.indexed.push(!is_empty_signature(sig));
        Ok(())
    }

    /// Number of documents inserted (indexed or not).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Every candidate pair, unique, the smaller id first, sorted (ids compare as strings).
    pub fn candidates(&self) -> Vec<(String, String)> {
        let n = self.params.bands * self.params.rows;
        let buckets = band_buckets(&self.sigs, n, self.params, |d| self.indexed[d]);
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for b in buckets.iter() {
            for (i, &x) in b.iter().enumerate() {
                for &y in &b[i + 1..] {
                    let (a, c) = (self.ids[x as usize].as_str(), self.ids[y as usize].as_str());
                    pairs.push(if a < c { (a, c) } else { (c, a) });
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }
}
