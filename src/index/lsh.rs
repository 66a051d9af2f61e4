//! LSH banding (SPEC §3): documents whose signatures agree on every row of some band become
//! candidate pairs.
//!
//! Buckets are found by sorting `(digest of band, document)` per band and then checking the
//! full band for equality inside each run of equal digests, so a digest collision can never make
//! a candidate (the SPEC allows a lossy digest only on that condition). Sorting rather than a hash
//! map keeps memory at 16 bytes per document per band being processed and makes the bucket order
//! deterministic.

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::error::Error;
use crate::ids::IdArena;
use crate::ids::IdSet;
use crate::sign::minhash::is_empty_signature;

/// The banding: `bands` bands of `rows` rows; `num_perm` must equal `bands * rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LshParams {
    pub bands: usize,
    pub rows: usize,
}

impl Default for LshParams {
    fn default() -> Self {
        LshParams {
            bands: crate::options::defaults::BANDS,
            rows: crate::options::defaults::ROWS,
        }
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

    /// Each distinct bucket once: the first bucket holding each list of members, with how
    /// many buckets hold it, in bucket order. A cluster of near copies falls into one bucket
    /// in most bands, and what a bucket yields depends on its members alone.
    pub fn distinct(&self) -> Vec<(usize, u64)> {
        let mut times = vec![0u64; self.len()];
        for f in self.firsts() {
            times[f] += 1;
        }
        times
            .into_iter()
            .enumerate()
            .filter(|&(_, t)| t > 0)
            .collect()
    }

    /// For each bucket, the first bucket with the same members (itself, when none before
    /// has them).
    pub fn firsts(&self) -> Vec<usize> {
        use rayon::prelude::*;
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        let mut keyed: Vec<(u64, usize)> = (0..self.len())
            .into_par_iter()
            .map(|i| (hasher.hash_one(self.get(i)), i))
            .collect();
        keyed.par_sort_unstable();
        let mut first: Vec<usize> = (0..self.len()).collect();
        let mut i = 0;
        while i < keyed.len() {
            let mut e = i + 1;
            while e < keyed.len() && keyed[e].0 == keyed[i].0 {
                e += 1;
            }
            // Equal hashes, in bucket order: each belongs to the first with equal members.
            for x in i..e {
                let b = keyed[x].1;
                if let Some(a) = keyed[i..x]
                    .iter()
                    .map(|&(_, a)| a)
                    .find(|&a| first[a] == a && self.get(a) == self.get(b))
                {
                    first[b] = a;
                }
            }
            i = e;
        }
        first
    }

    /// Add `other`'s buckets after these.
    pub fn append(&mut self, other: &Buckets) {
        if other.is_empty() {
            return;
        }
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        let base = self.members.len();
        self.members.extend_from_slice(&other.members);
        self.offsets
            .extend(other.offsets[1..].iter().map(|&o| base + o));
    }

    /// Add a bucket of these members.
    pub fn push(&mut self, group: impl IntoIterator<Item = u32>) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.members.extend(group);
        self.offsets.push(self.members.len());
    }
}

/// The buckets of one run of documents whose band digests are equal: `members` sorted by
/// their band values (`band`), then by `rank`, and cut where the band value changes (two
/// digests may clash). `each` gets every bucket of two or more, its members in rank order.
pub fn split_by_band<'a>(
    members: &mut [u32],
    band: impl Fn(u32) -> &'a [u32],
    rank: impl Fn(u32) -> u64,
    mut each: impl FnMut(&[u32]),
) {
    members.sort_unstable_by(|&x, &y| band(x).cmp(band(y)).then(rank(x).cmp(&rank(y))));
    let mut s = 0;
    while s < members.len() {
        let mut t = s + 1;
        while t < members.len() && band(members[t]) == band(members[s]) {
            t += 1;
        }
        if t - s >= 2 {
            each(&members[s..t]);
        }
        s = t;
    }
}

/// Each of the elements `0 .. n`'s buckets, inverted from `buckets` (each a list of elements,
/// numbered in order): element `e`'s are `of[at[e]..at[e + 1]]`, ascending. Returns `(at, of)`.
pub fn memberships<'a>(
    n: usize,
    buckets: impl Iterator<Item = &'a [u32]> + Clone,
) -> (Vec<usize>, Vec<u32>) {
    let mut at = vec![0usize; n + 1];
    for b in buckets.clone() {
        for &e in b {
            at[e as usize + 1] += 1;
        }
    }
    for i in 0..n {
        at[i + 1] += at[i];
    }
    let mut fill = at.clone();
    let mut of = vec![0u32; at[n]];
    for (k, b) in buckets.enumerate() {
        for &e in b {
            of[fill[e as usize]] = k as u32;
            fill[e as usize] += 1;
        }
    }
    (at, of)
}

/// The digest that finds band `j`'s buckets (and, in the sharded stages, its partition): equal
/// bands have equal digests; equal digests are checked band against band.
pub fn band_digest(band: &[u32], j: usize) -> u64 {
    xxh3_64_with_seed(bytemuck::cast_slice(band), j as u64)
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
            .map(|d| (band_digest(band_of(d, j), j), d as u32))
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
            out.append(&g);
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
    /// Each id once: the set finds a repeat by its bytes in the arena.
    ids: IdArena,
    seen: IdSet,
    sigs: Vec<u32>,
    indexed: Vec<bool>,
}

impl Lsh {
    pub fn new(params: LshParams) -> Self {
        Lsh {
            params,
            ids: IdArena::default(),
            seen: IdSet::default(),
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
        self.ids.push(id);
        if self.seen.insert(&self.ids, self.ids.len() - 1).is_some() {
            self.ids.pop();
            return Err(Error::Lsh(format!("id {id:?} was inserted already")));
        }
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
        // Pairs of documents first: integers sort and dedup cheaply, and ids are unique, so
        // a pair of documents is a pair of ids.
        let mut docs: Vec<(u32, u32)> = Vec::new();
        for b in buckets.iter() {
            for (i, &x) in b.iter().enumerate() {
                docs.extend(b[i + 1..].iter().map(|&y| (x.min(y), x.max(y))));
            }
        }
        docs.par_sort_unstable();
        docs.dedup();
        // Then in id order (byte order is `str` order).
        let mut pairs: Vec<(&[u8], &[u8], u32, u32)> = docs
            .into_iter()
            .map(|(x, y)| {
                let (a, c) = (
                    self.ids.get_bytes(x as usize),
                    self.ids.get_bytes(y as usize),
                );
                if a < c {
                    (a, c, x, y)
                } else {
                    (c, a, y, x)
                }
            })
            .collect();
        pairs.par_sort_unstable();
        pairs
            .into_iter()
            .map(|(_, _, x, y)| {
                let id = |d: u32| self.ids.get(d as usize).to_string();
                (id(x), id(y))
            })
            .collect()
    }
}

/// Do two ascending lists of buckets share one?
pub fn shares_bucket(x: &[u32], y: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets drawn from a few member lists (so most repeat): each distinct list is named
    /// once, by its first bucket, with the count of buckets holding it.
    #[test]
    fn distinct_buckets_are_named_once_with_their_count() {
        let mut rng = crate::hash::Pcg32::new(3);
        for round in 0..50 {
            let lists: Vec<Vec<u32>> = (0..1 + rng.below(6))
                .map(|_| {
                    let mut v: Vec<u32> = (0..2 + rng.below(4)).map(|_| rng.below(8)).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                })
                .collect();
            let mut buckets = Buckets::default();
            let n = rng.below(40) as usize;
            let drawn: Vec<&Vec<u32>> = (0..n)
                .map(|_| &lists[rng.below(lists.len() as u32) as usize])
                .collect();
            for l in &drawn {
                buckets.push(l.iter().copied());
            }
            let mut want: Vec<(usize, u64)> = Vec::new();
            for (i, l) in drawn.iter().enumerate() {
                match drawn[..i].iter().position(|e| e == l) {
                    Some(first) => want.iter_mut().find(|w| w.0 == first).unwrap().1 += 1,
                    None => want.push((i, 1)),
                }
            }
            assert_eq!(buckets.distinct(), want, "round {round}");
            let firsts: Vec<usize> = drawn
                .iter()
                .map(|l| drawn.iter().position(|e| e == l).unwrap())
                .collect();
            assert_eq!(buckets.firsts(), firsts, "round {round}");
        }
        assert_eq!(Buckets::default().distinct(), []);
        assert!(Buckets::default().firsts().is_empty());
    }

    /// Buckets are the runs of equal band values with two or more members, each in rank
    /// order, for every size from none up (band values of 1 and 2 rows).
    #[test]
    fn a_run_splits_into_buckets_of_equal_band_values_in_rank_order() {
        let mut rng = crate::hash::Pcg32::new(5);
        for n in [0u32, 1, 2, 3, 7, 40] {
            for rows in [1usize, 2] {
                let bands: Vec<Vec<u32>> = (0..n)
                    .map(|_| (0..rows).map(|_| rng.below(3)).collect())
                    .collect();
                let rank: Vec<u64> = (0..n).map(|d| (d as u64 * 7919) % 101).collect();
                let mut members: Vec<u32> = (0..n).rev().collect();
                let mut got: Vec<Vec<u32>> = Vec::new();
                split_by_band(
                    &mut members,
                    |d| &bands[d as usize],
                    |d| rank[d as usize],
                    |b| got.push(b.to_vec()),
                );
                let mut want: Vec<Vec<u32>> = Vec::new();
                let mut values: Vec<&Vec<u32>> = bands.iter().collect();
                values.sort();
                values.dedup();
                for v in values {
                    let mut b: Vec<u32> = (0..n).filter(|&d| &bands[d as usize] == v).collect();
                    b.sort_by_key(|&d| rank[d as usize]);
                    if b.len() >= 2 {
                        want.push(b);
                    }
                }
                assert_eq!(got, want, "{n} documents, {rows} rows");
            }
        }
    }

    #[test]
    fn appended_buckets_follow_the_first_ones() {
        let of = |lists: &[&[u32]]| {
            let mut b = Buckets::default();
            for l in lists {
                b.push(l.iter().copied());
            }
            b
        };
        let lists: [&[&[u32]]; 4] = [&[], &[&[]], &[&[1, 2]], &[&[3, 4, 5], &[], &[6, 7]]];
        for a in lists {
            for b in lists {
                let mut got = of(a);
                got.append(&of(b));
                let mut want = of(a);
                for l in b {
                    want.push(l.iter().copied());
                }
                assert_eq!(
                    got.iter().collect::<Vec<_>>(),
                    want.iter().collect::<Vec<_>>()
                );
                assert_eq!(got.len(), a.len() + b.len());
            }
        }
        let mut empty = Buckets::default();
        empty.append(&Buckets::default());
        assert!(empty.is_empty());
    }

    #[test]
    fn memberships_invert_the_buckets() {
        let buckets: Vec<Vec<u32>> = vec![vec![0, 3], vec![3, 1, 4], vec![], vec![4, 0]];
        let (at, of) = memberships(6, buckets.iter().map(|b| b.as_slice()));
        let of_e = |e: usize| of[at[e]..at[e + 1]].to_vec();
        assert_eq!(
            (0..6).map(of_e).collect::<Vec<_>>(),
            [vec![0, 3], vec![1], vec![], vec![0, 1], vec![1, 3], vec![]]
        );
    }

    /// With an id hash that collides on purpose (the id's length), distinct ids that share a
    /// hash are all taken and a repeat of any of them is refused; a refused insert leaves
    /// nothing behind, so the next document's pairs name it, not the refused repeat.
    #[test]
    fn colliding_id_hashes_neither_hide_a_repeat_nor_make_one_up() {
        let mut l = Lsh::new(LshParams::new(2, 1).unwrap());
        l.seen = IdSet::with_hash(|b, _| b.len() as u64, 0);
        for id in ["ab", "cd", "ef"] {
            l.insert(id, &[1, 2]).unwrap();
        }
        for id in ["ab", "cd", "ef"] {
            assert!(l.insert(id, &[3, 4]).is_err(), "{id}");
        }
        assert_eq!(l.len(), 3);
        l.insert("gh", &[1, 9]).unwrap();
        // The index shows its ids as strings, each once.
        let shown = format!("{l:?}");
        assert!(
            shown.contains(r#"ids: ["ab", "cd", "ef", "gh"]"#),
            "{shown}"
        );
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|&(a, b)| (a.into(), b.into())).collect()
        };
        assert_eq!(
            l.candidates(),
            pairs(&[
                ("ab", "cd"),
                ("ab", "ef"),
                ("ab", "gh"),
                ("cd", "ef"),
                ("cd", "gh"),
                ("ef", "gh")
            ])
        );
    }
}
