//! Near-dedup (SPEC §3) and the exact-dedup pre-pass: from signatures to clusters, and the
//! two-pass file pipeline that never holds the corpus text in memory.
//!
//! Pass 1 ([`crate::pipeline::scan`]) keeps per document only its id, where it was read, its word
//! count, its signature and (with `--exact`) a 128-bit key of its words. Candidates come from LSH
//! buckets; `jaccard` confirmation re-reads the inputs once for the shingle sets of the
//! documents that sit in some bucket (and only those). Pass 2 re-reads the inputs and streams the
//! survivors (or everyone, tagged) to the output.

use std::collections::HashMap;
use std::time::Instant;

use rayon::prelude::*;

use crate::batch::PackedBatch;
use crate::engine::{CpuEngine, Engine};
use crate::io::{parse_record, write_tagged, Fields, Inputs, Output};
use crate::lsh::{band_buckets, LshParams};
use crate::minhash::{agreement, MinHashParams};
use crate::pipeline::{pipelined, scan, IdArena, ScanStats};
use crate::progress::ProgressFactory;
use crate::text::jaccard_sorted;
use crate::unionfind::UnionFind;
use crate::Error;

/// How candidate pairs are confirmed (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confirm {
    /// Exact Jaccard of the shingle sets (full 64-bit FNV-1a values) `>= threshold`.
    #[default]
    Jaccard,
    /// MinHash estimate `>= threshold` (cheaper, looser).
    Estimate,
    /// Every LSH candidate is a duplicate (as FineWeb).
    None,
}

/// Everything that decides which documents are near duplicates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DedupConfig {
    pub params: MinHashParams,
    pub lsh: LshParams,
    pub threshold: f64,
    pub confirm: Confirm,
    /// Run the exact-dedup pre-pass (identical word sequences, keep the smallest id).
    pub exact: bool,
    /// Write only cluster roots (otherwise everyone, tagged).
    pub drop: bool,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            params: MinHashParams::default(),
            lsh: LshParams::default(),
            threshold: 0.8,
            confirm: Confirm::Jaccard,
            exact: false,
            drop: true,
        }
    }
}

impl DedupConfig {
    pub fn validate(&self) -> Result<(), Error> {
        self.params.validate()?;
        LshParams::new(self.lsh.bands, self.lsh.rows)?;
        self.lsh.check_num_perm(self.params.num_perm)?;
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err(Error::Param(format!(
                "threshold {} is outside (0, 1]",
                self.threshold
            )));
        }
        Ok(())
    }
}

/// Where a document was read: input index and 1-based line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocLoc {
    pub file: u32,
    pub line: u64,
}

/// What pass 1 keeps of a corpus: no text, only what clustering needs.
#[derive(Debug, Default)]
pub struct SignedCorpus {
    pub ids: IdArena,
    pub locs: Vec<DocLoc>,
    pub num_perm: usize,
    /// Row `d` is document `d`'s signature.
    pub sigs: Vec<u32>,
    pub words: Vec<u32>,
    /// With `exact`: a 128-bit key of each document's word sequence.
    pub exact_keys: Vec<u128>,
}

impl SignedCorpus {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn sig(&self, d: usize) -> &[u32] {
        &self.sigs[d * self.num_perm..(d + 1) * self.num_perm]
    }

    /// Bytes the tables hold (their lengths, not their capacities: untouched capacity is not
    /// resident), for the memory guard and the report.
    pub fn heap_bytes(&self) -> usize {
        self.ids.heap_bytes()
            + self.locs.len() * std::mem::size_of::<DocLoc>()
            + self.sigs.len() * 4
            + self.words.len() * 4
            + self.exact_keys.len() * 16
    }
}

/// A confirmed pair: documents `a` and `b` (indices in input order; `a` has the smaller id).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ConfirmedPair {
    pub a: u32,
    pub b: u32,
    pub estimate: f64,
    /// Exact Jaccard, when confirmation computed it.
    pub jaccard: Option<f64>,
}

/// Counts from clustering.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ClusterStats {
    /// LSH buckets with two or more documents (over all bands).
    pub buckets: u64,
    /// Candidate pairs whose confirmation was decided (pairs already joined through earlier
    /// confirmed pairs are not re-checked: they cannot change a cluster).
    pub pairs_checked: u64,
    pub pairs_confirmed: u64,
    pub pairs_rejected: u64,
    pub pairs_already_joined: u64,
    /// Documents whose shingle sets were loaded for `jaccard` confirmation.
    pub sets_loaded: u64,
    pub wordless: u64,
    pub exact_duplicates: u64,
    pub near_duplicates: u64,
    /// Clusters of two or more documents.
    pub clusters: u64,
    pub documents_in_clusters: u64,
    /// Cluster size -> how many clusters have it (sizes 2 and up).
    pub cluster_sizes: std::collections::BTreeMap<u64, u64>,
    /// Ranking the documents by id, and the exact-duplicate pre-pass (`--exact`).
    pub order_seconds: f64,
    /// LSH banding alone.
    pub lsh_seconds: f64,
    /// Confirmation as a whole, `sets_seconds` included.
    pub confirm_seconds: f64,
    /// Of that, loading the shingle sets (`jaccard`: re-reading the input).
    pub sets_seconds: f64,
    pub cluster_seconds: f64,
}

/// The outcome of clustering a corpus.
#[derive(Debug, Clone)]
pub struct Clustering {
    /// For each document (input order), the document index of its cluster's root (the smallest
    /// id in the cluster; a singleton is its own root).
    pub root: Vec<u32>,
    /// For each document, whether the exact pre-pass found an identical document with a smaller
    /// id.
    pub exact_duplicate: Vec<bool>,
    /// Confirmed pairs, sorted by (a, b) in id order.
    pub pairs: Vec<ConfirmedPair>,
    pub stats: ClusterStats,
    /// With exact-Jaccard confirmation: measured LSH candidate rates by true similarity, on a
    /// sample (for the report's S-curve).
    pub similarity_buckets: Vec<SimilarityBucket>,
}

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

/// The measured S-curve: over a seeded sample of the documents whose shingle sets were loaded
/// (those in some LSH bucket), every pair sharing a shingle, bucketed by exact Jaccard, with
/// whether some band of their signatures is equal (an LSH candidate). Deterministic for an
/// input.
fn similarity_sample(
    corpus: &SignedCorpus,
    lsh: LshParams,
    sets: &ShingleSets,
) -> Vec<SimilarityBucket> {
    let mut docs: Vec<u32> = sets.keys().copied().collect();
    docs.sort_unstable();
    if docs.len() > SIM_SAMPLE_DOCS {
        let mut rng = crate::hash::Pcg32::new(0x5eed_5c0e);
        crate::synth::shuffle(&mut docs, &mut rng);
        docs.truncate(SIM_SAMPLE_DOCS);
        docs.sort_unstable();
    }
    let mut index: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, d) in docs.iter().enumerate() {
        for &h in &sets[d] {
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
        let (da, db) = (docs[a as usize] as usize, docs[b as usize] as usize);
        let j = jaccard_sorted(&sets[&(da as u32)], &sets[&(db as u32)]);
        let bi = ((j * 20.0) as usize).min(19);
        let (sa, sb) = (corpus.sig(da), corpus.sig(db));
        let cand = (0..lsh.bands).any(|band| {
            let r = band * lsh.rows..(band + 1) * lsh.rows;
            sa[r.clone()] == sb[r]
        });
        buckets[bi].pairs += 1;
        buckets[bi].candidates += cand as u64;
    }
    buckets
}

impl Clustering {
    /// Is document `d` kept when dropping (it is its cluster's root)?
    pub fn is_root(&self, d: usize) -> bool {
        self.root[d] as usize == d
    }

    /// Clusters of two or more documents: `(root, members)`, members in id order, clusters in
    /// root id order. Needs the corpus ids for ordering.
    pub fn groups(&self, ids: &IdArena) -> Vec<(u32, Vec<u32>)> {
        let mut by_root: HashMap<u32, Vec<u32>> = HashMap::new();
        for (d, &r) in self.root.iter().enumerate() {
            if r as usize != d {
                by_root.entry(r).or_default().push(d as u32);
            }
        }
        let mut out: Vec<(u32, Vec<u32>)> = by_root
            .into_iter()
            .map(|(r, mut m)| {
                m.push(r);
                m.sort_by(|&x, &y| ids.get(x as usize).cmp(ids.get(y as usize)));
                (r, m)
            })
            .collect();
        out.sort_by(|a, b| ids.get(a.0 as usize).cmp(ids.get(b.0 as usize)));
        out
    }
}

/// Shingle sets (sorted 64-bit FNV-1a values) by document index, for `jaccard` confirmation.
pub type ShingleSets = HashMap<u32, Vec<u64>>;

/// Cluster a signed corpus. `name_of(file)` names inputs in error messages; `load_sets` is
/// called (once, only for `jaccard` confirmation and only when some bucket exists) with a mask of
/// the documents whose shingle sets are needed. With `measure`, the S-curve is also measured
/// on a sample (for reports; about a tenth of a second).
pub fn cluster_corpus(
    corpus: &SignedCorpus,
    cfg: &DedupConfig,
    name_of: &dyn Fn(u32) -> String,
    load_sets: impl FnOnce(&[bool]) -> Result<ShingleSets, Error>,
    progress: &ProgressFactory,
    measure: bool,
) -> Result<Clustering, Error> {
    cfg.validate()?;
    let n = corpus.len();
    let mut stats = ClusterStats::default();
    let t_order = Instant::now();
    let step = progress.step("clustering");

    // Rank documents by id: union-find over ranks makes the root the smallest id.
    let order = id_order(&corpus.ids, &corpus.locs, name_of)?;
    let mut rank = vec![0u32; n];
    for (r, &d) in order.iter().enumerate() {
        rank[d as usize] = r as u32;
    }
    stats.wordless = corpus.words.iter().filter(|&&w| w == 0).count() as u64;

    // Exact pre-pass: identical word sequences (never wordless ones) keep the smallest id.
    let mut exact_rep: Vec<u32> = Vec::new();
    let mut exact_duplicate = vec![false; n];
    if cfg.exact {
        step.set_message("exact duplicates");
        let mut keyed: Vec<(u128, u32)> = (0..n)
            .filter(|&d| corpus.words[d] > 0)
            .map(|d| (corpus.exact_keys[d], rank[d]))
            .collect();
        keyed.par_sort_unstable();
        exact_rep = (0..n as u32).collect();
        let mut i = 0;
        while i < keyed.len() {
            let mut e = i + 1;
            while e < keyed.len() && keyed[e].0 == keyed[i].0 {
                e += 1;
            }
            let rep = order[keyed[i].1 as usize];
            for &(_, r) in &keyed[i + 1..e] {
                let d = order[r as usize];
                exact_duplicate[d as usize] = true;
                exact_rep[d as usize] = rep;
            }
            i = e;
        }
        stats.exact_duplicates = exact_duplicate.iter().filter(|&&x| x).count() as u64;
    }

    stats.order_seconds = t_order.elapsed().as_secs_f64();
    let t_lsh = Instant::now();
    step.set_message("LSH buckets");
    let buckets = band_buckets(&corpus.sigs, corpus.num_perm, cfg.lsh, |d| {
        corpus.words[d] > 0 && !exact_duplicate[d]
    });
    stats.buckets = buckets.len() as u64;
    stats.lsh_seconds = t_lsh.elapsed().as_secs_f64();

    let t_confirm = Instant::now();
    let sets = if cfg.confirm == Confirm::Jaccard && !buckets.is_empty() {
        let mut needed = vec![false; n];
        for &d in &buckets.members {
            needed[d as usize] = true;
        }
        step.set_message("loading shingle sets");
        let s = load_sets(&needed)?;
        stats.sets_loaded = s.len() as u64;
        stats.sets_seconds = t_confirm.elapsed().as_secs_f64();
        s
    } else {
        ShingleSets::new()
    };

    step.set_message("confirming pairs");
    let mut uf = UnionFind::new(n);
    let mut pairs = Vec::new();
    let mut ranks_buf: Vec<u32> = Vec::new();
    for bucket in buckets.iter() {
        ranks_buf.clear();
        ranks_buf.extend(bucket.iter().map(|&d| rank[d as usize]));
        ranks_buf.sort_unstable();
        for i in 0..ranks_buf.len() {
            for j in i + 1..ranks_buf.len() {
                let (ra, rb) = (ranks_buf[i], ranks_buf[j]);
                if uf.connected(ra, rb) {
                    stats.pairs_already_joined += 1;
                    continue;
                }
                stats.pairs_checked += 1;
                let (a, b) = (order[ra as usize], order[rb as usize]);
                let est = agreement(corpus.sig(a as usize), corpus.sig(b as usize)) as f64
                    / corpus.num_perm as f64;
                let (ok, jac) = match cfg.confirm {
                    Confirm::None => (true, None),
                    Confirm::Estimate => (est >= cfg.threshold, None),
                    Confirm::Jaccard => {
                        let j = jaccard_sorted(&sets[&a], &sets[&b]);
                        (j >= cfg.threshold, Some(j))
                    }
                };
                if ok {
                    uf.union(ra, rb);
                    stats.pairs_confirmed += 1;
                    pairs.push(ConfirmedPair {
                        a,
                        b,
                        estimate: est,
                        jaccard: jac,
                    });
                } else {
                    stats.pairs_rejected += 1;
                }
            }
        }
    }
    let similarity_buckets = if sets.is_empty() || !measure {
        Vec::new()
    } else {
        similarity_sample(corpus, cfg.lsh, &sets)
    };
    drop(sets);
    stats.confirm_seconds = t_confirm.elapsed().as_secs_f64();

    let t_cluster = Instant::now();
    step.set_message("clusters");
    if cfg.exact {
        for d in 0..n {
            if exact_duplicate[d] {
                uf.union(rank[d], rank[exact_rep[d] as usize]);
            }
        }
    }
    let root: Vec<u32> = (0..n).map(|d| order[uf.find(rank[d]) as usize]).collect();
    let mut size: HashMap<u32, u64> = HashMap::new();
    for (d, &r) in root.iter().enumerate() {
        if r as usize != d {
            *size.entry(r).or_insert(1) += 1;
        }
    }
    stats.clusters = size.len() as u64;
    stats.documents_in_clusters = size.values().sum();
    for &s in size.values() {
        *stats.cluster_sizes.entry(s).or_default() += 1;
    }
    let non_roots = root
        .iter()
        .enumerate()
        .filter(|&(d, &r)| r as usize != d)
        .count() as u64;
    stats.near_duplicates = non_roots - stats.exact_duplicates;
    pairs.sort_by(|x, y| {
        rank[x.a as usize]
            .cmp(&rank[y.a as usize])
            .then(rank[x.b as usize].cmp(&rank[y.b as usize]))
    });
    stats.cluster_seconds = t_cluster.elapsed().as_secs_f64();
    Ok(Clustering {
        root,
        exact_duplicate,
        pairs,
        stats,
        similarity_buckets,
    })
}

/// Documents in id order (ids compare as UTF-8 bytes), or the error naming a repeated id with
/// two places it was read. Of several repeats it names the one [`UniqueIds`] names as the
/// documents arrive (so `dedup` and `signatures` name the same one): the repeat met first in
/// input order, with the earliest document that had its id.
pub fn id_order(
    ids: &IdArena,
    locs: &[DocLoc],
    name_of: &dyn Fn(u32) -> String,
) -> Result<Vec<u32>, Error> {
    let mut order: Vec<u32> = (0..ids.len() as u32).collect();
    order.par_sort_unstable_by(|&a, &b| {
        ids.get_bytes(a as usize)
            .cmp(ids.get_bytes(b as usize))
            .then(a.cmp(&b))
    });
    // Equal ids sit together, in input order; a pair of neighbours is the first two
    // documents of its id only when the one before them has another id.
    let same = |x: u32, y: u32| ids.get_bytes(x as usize) == ids.get_bytes(y as usize);
    let mut first_repeat: Option<(u32, u32)> = None;
    for (i, w) in order.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        if same(a, b)
            && (i == 0 || !same(order[i - 1], a))
            && first_repeat.is_none_or(|(_, second)| b < second)
        {
            first_repeat = Some((a, b));
        }
    }
    match first_repeat {
        Some((a, b)) => Err(duplicate_id(ids, locs, name_of, a as usize, b as usize)),
        None => Ok(order),
    }
}

/// The error for documents `a` and `b` sharing an id, naming where each was read.
fn duplicate_id(
    ids: &IdArena,
    locs: &[DocLoc],
    name_of: &dyn Fn(u32) -> String,
    a: usize,
    b: usize,
) -> Error {
    let loc = |d: usize| {
        let l = locs[d];
        format!("{}:{}", name_of(l.file), l.line)
    };
    Error::DuplicateId {
        id: ids.get(a).to_string(),
        first: loc(a),
        second: loc(b),
    }
}

/// Refuses a repeated id as the documents arrive, when no order of the ids is needed
/// (`signatures`): each id's 64-bit hash goes into a table, and only ids with equal hashes are
/// compared. The check runs on the thread that writes the rows, beside the workers signing the
/// next chunks; sorting all the hashes after the last chunk kept both cores on it for 2.5 ms of
/// a 0.2 s run, with no chunk left to sign. Of several repeats, the one met first in input
/// order is named, with the earliest document that had its id, and the run stops there.
pub struct UniqueIds {
    ids: IdArena,
    locs: Vec<DocLoc>,
    set: IdSet,
}

impl Default for UniqueIds {
    fn default() -> Self {
        UniqueIds::with_set(IdSet::default())
    }
}

impl UniqueIds {
    fn with_set(set: IdSet) -> Self {
        UniqueIds {
            ids: IdArena::default(),
            locs: Vec::new(),
            set,
        }
    }

    /// Room for about `docs` more documents whose ids hold about `id_bytes` bytes in all (an
    /// estimate). The lists get a quarter more, since room never used is never touched; the
    /// table gets no more, since its entries land anywhere in it and touch every page. Room
    /// the system will not give is left to grow as needed.
    pub fn reserve(&mut self, docs: usize, id_bytes: usize) {
        let more = |n: usize| n.saturating_add(n / 4);
        self.ids.try_reserve(more(docs), more(id_bytes));
        let _ = self.locs.try_reserve(more(docs));
        self.set.try_reserve(docs);
    }

    /// No document yet.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Add the next documents' ids and where each was read (as many as ids); an error names
    /// the first repeat among them and the earliest document with its id.
    pub fn extend(
        &mut self,
        ids: &IdArena,
        locs: impl IntoIterator<Item = DocLoc>,
        name_of: &dyn Fn(u32) -> String,
    ) -> Result<(), Error> {
        let from = self.ids.len();
        self.ids.extend_from(ids);
        self.locs.extend(locs);
        assert_eq!(self.locs.len(), self.ids.len(), "a location per id");
        for b in from..self.ids.len() {
            if let Some(a) = self.set.insert(&self.ids, b) {
                return Err(duplicate_id(&self.ids, &self.locs, name_of, a, b));
            }
        }
        Ok(())
    }
}

/// The ids of an [`IdArena`] already seen, found by their bytes while each is stored only
/// once, in the arena: each id's 64-bit hash goes into a table with the first id that had it,
/// and only ids with equal hashes are compared.
#[derive(Clone)]
pub(crate) struct IdSet {
    /// The id hash, and its seed: drawn per set, so that no corpus can be made whose ids all
    /// land in a few slots of the table (what is found does not depend on it).
    hash: fn(&[u8], u64) -> u64,
    seed: u64,
    /// Each hash, and the first id with it.
    first: HashMap<u64, u32, std::hash::BuildHasherDefault<HashIsKey>>,
    /// Ids whose hash an earlier id with other bytes had, in the order added: a 64-bit
    /// collision, which real ids never show (the tests force it).
    clashes: Vec<u32>,
}

impl Default for IdSet {
    fn default() -> Self {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u64);
        IdSet::with_hash(xxhash_rust::xxh3::xxh3_64_with_seed, seed)
    }
}

impl std::fmt::Debug for IdSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdSet")
            .field("hashes", &self.first.len())
            .field("clashes", &self.clashes.len())
            .finish()
    }
}

impl IdSet {
    /// A set hashing ids with `hash(bytes, seed)` (the tests pass one that collides).
    pub(crate) fn with_hash(hash: fn(&[u8], u64) -> u64, seed: u64) -> Self {
        IdSet {
            hash,
            seed,
            first: HashMap::default(),
            clashes: Vec::new(),
        }
    }

    /// Room for `ids` more, where the system gives it.
    pub(crate) fn try_reserve(&mut self, ids: usize) {
        let _ = self.first.try_reserve(ids);
    }

    /// Add id `b` of `ids`, unless an id added before has the same bytes: then that one's index,
    /// and `b` is not added. Every id added must stay in `ids` at its index.
    pub(crate) fn insert(&mut self, ids: &IdArena, b: usize) -> Option<usize> {
        let id = ids.get_bytes(b);
        let b = u32::try_from(b).expect("at most 2^32 ids");
        let a = match self.first.entry((self.hash)(id, self.seed)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(b);
                return None;
            }
            std::collections::hash_map::Entry::Occupied(o) => *o.get() as usize,
        };
        let earlier = std::iter::once(a)
            .chain(self.clashes.iter().map(|&c| c as usize))
            .find(|&e| ids.get_bytes(e) == id);
        if earlier.is_none() {
            self.clashes.push(b);
        }
        earlier
    }
}

/// A hasher for keys that are already uniform (seeded) 64-bit hashes: the key is its own hash.
#[derive(Default)]
pub(crate) struct HashIsKey(u64);

impl std::hash::Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys are hashed");
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Sign in-memory documents `(id, text)` with the CPU engine (on the current rayon pool).
pub fn sign_texts<I: AsRef<str>, T: AsRef<str>>(
    docs: &[(I, T)],
    cfg: &DedupConfig,
) -> Result<(SignedCorpus, PackedBatch), Error> {
    cfg.validate()?;
    let mut engine = CpuEngine::new(cfg.params, 0)?;
    sign_texts_with(docs, cfg, &mut engine)
}

/// Sign in-memory documents with the given engine.
pub fn sign_texts_with<I: AsRef<str>, T: AsRef<str>>(
    docs: &[(I, T)],
    cfg: &DedupConfig,
    engine: &mut dyn Engine,
) -> Result<(SignedCorpus, PackedBatch), Error> {
    let texts: Vec<&str> = docs.iter().map(|(_, t)| t.as_ref()).collect();
    let batch = PackedBatch::from_texts(&texts);
    let sigs = engine.sign_vec(&batch)?;
    let mut corpus = SignedCorpus {
        num_perm: cfg.params.num_perm,
        sigs,
        ..Default::default()
    };
    for (i, (id, _)) in docs.iter().enumerate() {
        corpus.ids.push(id.as_ref());
        corpus.locs.push(DocLoc {
            file: 0,
            line: i as u64 + 1,
        });
        corpus.words.push(batch.doc_words(i).len() as u32);
        if cfg.exact {
            corpus
                .exact_keys
                .push(xxhash_rust::xxh3::xxh3_128(batch.doc_bytes(i)));
        }
    }
    Ok((corpus, batch))
}

/// Shingle sets of the documents of `batch` that `needed` marks.
fn sets_from_batch(batch: &PackedBatch, k: usize, needed: &[bool]) -> ShingleSets {
    (0..batch.num_docs())
        .into_par_iter()
        .filter(|&d| needed[d])
        .map(|d| (d as u32, batch_shingle_set(batch, d, k)))
        .collect()
}

fn batch_shingle_set(batch: &PackedBatch, d: usize, k: usize) -> Vec<u64> {
    let r = batch.doc_words(d);
    crate::text::fnv_set(&batch.bytes, &batch.word_start[r.start..r.end + 1], k)
}

/// Cluster in-memory documents `(id, text)`: the library form of `neardup dedup`.
pub fn clusters<I: AsRef<str>, T: AsRef<str>>(
    docs: &[(I, T)],
    cfg: &DedupConfig,
) -> Result<Clustering, Error> {
    let (corpus, batch) = sign_texts(docs, cfg)?;
    let k = cfg.params.k;
    cluster_corpus(
        &corpus,
        cfg,
        &|_| "<memory>".to_string(),
        |needed| Ok(sets_from_batch(&batch, k, needed)),
        &ProgressFactory::hidden(),
        false,
    )
}

/// The near-dedup stage over in-memory JSON records: every record gets `meta.minhash_cluster`
/// (its root id); with `cfg.drop` only roots are returned. Order and all other fields are kept.
/// A repeated id is an error before anything is returned.
pub fn near_dedup(
    records: Vec<serde_json::Map<String, serde_json::Value>>,
    fields: &Fields,
    cfg: &DedupConfig,
) -> Result<(Vec<serde_json::Map<String, serde_json::Value>>, Clustering), Error> {
    let docs = records_id_text(&records, fields)?;
    let c = clusters(&docs, cfg)?;
    let ids: Vec<String> = docs.into_iter().map(|(i, _)| i).collect();
    let mut out = Vec::new();
    for (d, mut rec) in records.into_iter().enumerate() {
        if cfg.drop && !c.is_root(d) {
            continue;
        }
        let root = ids[c.root[d] as usize].clone();
        match rec.get_mut("meta") {
            Some(serde_json::Value::Object(m)) => {
                m.insert("minhash_cluster".into(), root.into());
            }
            None => {
                let mut m = serde_json::Map::new();
                m.insert("minhash_cluster".into(), root.into());
                rec.insert("meta".into(), m.into());
            }
            Some(other) => {
                return Err(Error::Field {
                    path: "<memory>".into(),
                    line: d as u64 + 1,
                    field: "meta".into(),
                    msg: format!("is {}, it must be an object", crate::io::json_kind(other)),
                })
            }
        }
        out.push(rec);
    }
    Ok((out, c))
}

/// The exact-dedup stage over in-memory records: of the records whose word sequences are
/// identical, only the one with the smallest id is kept (wordless records are all kept). Returns
/// the kept records in input order and how many were dropped.
pub fn exact_dedup(
    records: Vec<serde_json::Map<String, serde_json::Value>>,
    fields: &Fields,
) -> Result<(Vec<serde_json::Map<String, serde_json::Value>>, usize), Error> {
    let docs = records_id_text(&records, fields)?;
    let mut best: HashMap<u128, usize> = HashMap::new();
    let mut seen_ids: HashMap<&str, usize> = HashMap::new();
    let mut words = crate::text::Words::default();
    let mut keys = Vec::with_capacity(docs.len());
    for (d, (id, text)) in docs.iter().enumerate() {
        if let Some(first) = seen_ids.insert(id.as_str(), d) {
            return Err(Error::DuplicateId {
                id: id.clone(),
                first: format!("<memory>:{}", first + 1),
                second: format!("<memory>:{}", d + 1),
            });
        }
        words.reset(text);
        if words.is_empty() {
            keys.push(None);
            continue;
        }
        let key = xxhash_rust::xxh3::xxh3_128(&words.bytes);
        keys.push(Some(key));
        let e = best.entry(key).or_insert(d);
        if docs[d].0 < docs[*e].0 {
            *e = d;
        }
    }
    let mut dropped = 0;
    let kept = records
        .into_iter()
        .enumerate()
        .filter(|(d, _)| match keys[*d] {
            Some(k) if best[&k] != *d => {
                dropped += 1;
                false
            }
            _ => true,
        })
        .map(|(_, r)| r)
        .collect();
    Ok((kept, dropped))
}

fn records_id_text(
    records: &[serde_json::Map<String, serde_json::Value>],
    fields: &Fields,
) -> Result<Vec<(String, String)>, Error> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let line = serde_json::to_vec(r).expect("a map serializes");
            let rec = crate::io::parse_record(&line, fields, "<memory>", i as u64 + 1)?;
            Ok((rec.id.into_owned(), rec.text.into_owned()))
        })
        .collect()
}

/// Where `neardup dedup` writes besides its main output.
#[derive(Debug, Clone, Default)]
pub struct DedupOutputs {
    pub output: String,
    pub clusters: Option<String>,
    pub pairs: Option<String>,
    /// A report will be written: measure the S-curve on a sample.
    pub measure: bool,
}

/// Everything a `dedup` run reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DedupSummary {
    pub scan: ScanStats,
    pub cluster: ClusterStats,
    /// Measured LSH candidate rates by true similarity (exact-Jaccard confirmation only).
    pub similarity_buckets: Vec<SimilarityBucket>,
    /// The largest clusters, with the beginnings of a few members.
    pub examples: Vec<ClusterExample>,
    pub documents_written: u64,
    pub write_seconds: f64,
    pub seconds: f64,
    /// Heap bytes of the pass-1 tables (ids, signatures, counts).
    pub table_bytes: u64,
}

/// A cluster shown in the report: its root, size, and the first members (id, beginning of
/// text).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterExample {
    pub root: String,
    pub size: usize,
    pub members: Vec<(String, String)>,
}

/// Clusters shown in reports, and members shown of each.
const EXAMPLE_CLUSTERS: usize = 5;
const EXAMPLE_MEMBERS: usize = 4;
/// Characters of each shown member's text.
const SNIPPET_CHARS: usize = 400;

/// The first `n` characters of `text`, with `…` when cut.
fn snippet(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The whole `neardup dedup` on files: pass 1, clustering, pass 2. Outputs appear only when the
/// run succeeds.
pub fn run_dedup(
    inputs: &Inputs,
    fields: &Fields,
    cfg: &DedupConfig,
    engine: &mut dyn Engine,
    outs: &DedupOutputs,
    progress: &ProgressFactory,
    memory_limit: Option<u64>,
) -> Result<DedupSummary, Error> {
    cfg.validate()?;
    if engine.params() != &cfg.params {
        return Err(Error::Param(
            "the engine was built with other parameters than the dedup config".into(),
        ));
    }
    let t0 = Instant::now();
    // Create every output first, so a bad path fails before the work.
    let mut out = Output::create(&outs.output)?;
    let mut clusters_out = outs.clusters.as_deref().map(Output::create).transpose()?;
    let mut pairs_out = outs.pairs.as_deref().map(Output::create).transpose()?;

    let num_perm = cfg.params.num_perm;
    let mut corpus = SignedCorpus {
        num_perm,
        ..Default::default()
    };
    let per_doc_bytes = crate::report::bytes_per_document(num_perm, cfg.exact);
    let scan_stats = {
        let bar = progress.pass("signatures", inputs.total_bytes());
        scan(inputs, fields, engine, cfg.exact, &bar, |sc| {
            corpus.ids.extend_from(&sc.ids);
            corpus.locs.extend(sc.lines.iter().map(|&line| DocLoc {
                file: sc.file_index as u32,
                line,
            }));
            corpus.sigs.extend_from_slice(&sc.sigs);
            corpus.words.extend_from_slice(&sc.words);
            corpus.exact_keys.extend_from_slice(&sc.exact_keys);
            if let Some(limit) = memory_limit {
                let projected = corpus.heap_bytes() as u64;
                if projected > limit {
                    return Err(Error::Memory(format!(
                        "after {} documents the signature tables hold {} MiB, over the memory \
                         limit of {} MiB (--max-memory; by default 3/4 of the memory available); \
                         each document costs about {} bytes at num_perm {}: raise --max-memory, \
                         lower --num-perm, or split the corpus; no output was written",
                        corpus.len(),
                        projected >> 20,
                        limit >> 20,
                        per_doc_bytes,
                        num_perm
                    )));
                }
            }
            Ok(())
        })
    };
    let name_of = |f: u32| inputs.name(f as usize).to_string();
    let scan_stats = scan_stats.map_err(|e| {
        // `signatures` checks ids as the chunks arrive, so of a repeated id in the chunks
        // before this error and the error, it names the repeat; name the same here. (Which
        // comes first is chunk by chunk: a repeat in the failing chunk itself is not seen, by
        // either command, and chunks are cut alike only for the same engine.)
        id_order(&corpus.ids, &corpus.locs, &name_of)
            .err()
            .unwrap_or(e)
    })?;
    let k = cfg.params.k;
    let sets_budget = memory_limit.map(|l| l.saturating_sub(corpus.heap_bytes() as u64));
    let clustering = cluster_corpus(
        &corpus,
        cfg,
        &name_of,
        |needed| load_shingle_sets(inputs, fields, k, needed, progress, sets_budget),
        progress,
        outs.measure,
    )?;

    // Pass 2: stream the records out.
    let t_write = Instant::now();
    // The largest clusters, for the report: their first members' texts are read in pass 2.
    let groups = clustering.groups(&corpus.ids);
    let mut largest: Vec<&(u32, Vec<u32>)> = groups.iter().collect();
    largest.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    largest.truncate(EXAMPLE_CLUSTERS);
    let wanted: std::collections::HashSet<u32> = largest
        .iter()
        .flat_map(|(_, m)| m.iter().take(EXAMPLE_MEMBERS).copied())
        .collect();
    let mut snippets = HashMap::new();
    let pass_two = PassTwo {
        inputs,
        fields,
        corpus: &corpus,
        clustering: &clustering,
        drop: cfg.drop,
    };
    let written = write_pass(&pass_two, &mut out, progress, &wanted, &mut snippets)?;
    let examples = largest
        .iter()
        .map(|(root, members)| ClusterExample {
            root: corpus.ids.get(*root as usize).to_string(),
            size: members.len(),
            members: members
                .iter()
                .take(EXAMPLE_MEMBERS)
                .map(|&m| {
                    (
                        corpus.ids.get(m as usize).to_string(),
                        snippets.get(&m).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        })
        .collect();
    if let Some(o) = clusters_out.as_mut() {
        for (root, members) in clustering.groups(&corpus.ids) {
            let line = serde_json::json!({
                "root": corpus.ids.get(root as usize),
                "members": members.iter().map(|&m| corpus.ids.get(m as usize)).collect::<Vec<_>>(),
                "size": members.len(),
            });
            o.write_all(format!("{line}\n").as_bytes())?;
        }
    }
    if let Some(o) = pairs_out.as_mut() {
        for p in &clustering.pairs {
            let mut line = serde_json::json!({
                "a": corpus.ids.get(p.a as usize),
                "b": corpus.ids.get(p.b as usize),
                "estimate": p.estimate,
            });
            if let Some(j) = p.jaccard {
                line["jaccard"] = j.into();
            }
            o.write_all(format!("{line}\n").as_bytes())?;
        }
    }
    out.finish()?;
    if let Some(o) = clusters_out {
        o.finish()?;
    }
    if let Some(o) = pairs_out {
        o.finish()?;
    }
    Ok(DedupSummary {
        table_bytes: corpus.heap_bytes() as u64,
        scan: scan_stats,
        cluster: clustering.stats,
        similarity_buckets: clustering.similarity_buckets,
        examples,
        documents_written: written,
        write_seconds: t_write.elapsed().as_secs_f64(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The extra pass for `jaccard` confirmation: shingle sets of the marked documents only.
fn load_shingle_sets(
    inputs: &Inputs,
    fields: &Fields,
    k: usize,
    needed: &[bool],
    progress: &ProgressFactory,
    budget: Option<u64>,
) -> Result<ShingleSets, Error> {
    let bar = progress.pass("shingle sets", inputs.total_bytes());
    let next_doc = std::sync::atomic::AtomicUsize::new(0);
    let mut sets = ShingleSets::new();
    let mut held = 0u64;
    pipelined(
        inputs,
        crate::pipeline::DEFAULT_CHUNK_BYTES,
        &bar,
        |chunk, name| {
            // Chunks are prepared one at a time, in input order, so a running count gives
            // each line its document index.
            let base = next_doc.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            let found: Result<Vec<(u32, Vec<u64>)>, Error> = (0..chunk.len())
                .into_par_iter()
                .filter(|&i| needed.get(base + i).copied().unwrap_or(false))
                .map(|i| {
                    let rec =
                        crate::io::parse_record(chunk.line(i), fields, name, chunk.line_no(i))?;
                    let w = crate::text::Words::new(&rec.text);
                    Ok(((base + i) as u32, crate::text::shingle_fnv_set(&w, k)))
                })
                .collect();
            found
        },
        |found| {
            // A set costs its values plus a map entry.
            held += found
                .iter()
                .map(|(_, v)| v.len() as u64 * 8 + 64)
                .sum::<u64>();
            if let Some(b) = budget {
                if held > b {
                    return Err(Error::Memory(format!(
                        "the shingle sets for exact-Jaccard confirmation ({} documents in LSH \
                         buckets) need more than the {} MiB left under the memory limit; use \
                         --confirm estimate (no sets), raise --max-memory, or split the corpus; \
                         no output was written",
                        needed.iter().filter(|&&x| x).count(),
                        b >> 20
                    )));
                }
            }
            sets.extend(found);
            Ok(())
        },
    )?;
    Ok(sets)
}

/// Pass 2: re-read every record and write the kept ones with `meta.minhash_cluster`.
/// What pass 2 reads from: the inputs again, and pass 1's results.
struct PassTwo<'a> {
    inputs: &'a Inputs,
    fields: &'a Fields,
    corpus: &'a SignedCorpus,
    clustering: &'a Clustering,
    drop: bool,
}

/// Pass 2: every kept record out, tagged; the beginnings of the `wanted` documents into
/// `snippets` (for the report).
fn write_pass(
    p2: &PassTwo,
    out: &mut Output,
    progress: &ProgressFactory,
    wanted: &std::collections::HashSet<u32>,
    snippets: &mut HashMap<u32, String>,
) -> Result<u64, Error> {
    let PassTwo {
        inputs,
        fields,
        corpus,
        clustering,
        drop,
    } = *p2;
    let bar = progress.pass("writing", inputs.total_bytes());
    let next_doc = std::sync::atomic::AtomicUsize::new(0);
    let mut written = 0u64;
    pipelined(
        inputs,
        crate::pipeline::DEFAULT_CHUNK_BYTES,
        &bar,
        |chunk, name| {
            let base = next_doc.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            if base + chunk.len() > corpus.len() {
                return Err(Error::Param(format!(
                    "{name} changed between passes: it now has more records than when it was \
                     first read"
                )));
            }
            let pieces: Vec<Result<(Vec<u8>, u64), Error>> = (0..chunk.len())
                .collect::<Vec<_>>()
                .par_chunks(256)
                .map(|idx| {
                    // Room for the lines and their tags, so the buffer never grows.
                    let bytes: usize = idx.iter().map(|&i| chunk.line(i).len() + 1).sum();
                    let mut buf = crate::io::spare_buffer(bytes + idx.len() * 96);
                    let mut n = 0;
                    for &i in idx {
                        let d = base + i;
                        if drop && !clustering.is_root(d) {
                            continue;
                        }
                        let root = corpus.ids.get(clustering.root[d] as usize);
                        write_tagged(
                            &mut buf,
                            chunk.line(i),
                            "minhash_cluster",
                            root,
                            name,
                            chunk.line_no(i),
                        )?;
                        n += 1;
                    }
                    Ok((buf, n))
                })
                .collect();
            // The beginnings of the documents the report shows.
            let mut found = Vec::new();
            for i in 0..chunk.len() {
                let d = (base + i) as u32;
                if wanted.contains(&d) {
                    let rec = parse_record(chunk.line(i), fields, name, chunk.line_no(i))?;
                    found.push((d, snippet(&rec.text, SNIPPET_CHARS)));
                }
            }
            Ok((pieces, chunk.len(), found))
        },
        |(pieces, lines, found)| {
            for p in pieces {
                let (buf, n) = p?;
                out.write_all(&buf)?;
                crate::io::recycle_buffer(buf);
                written += n;
            }
            snippets.extend(found);
            bar.add_docs(lines as u64);
            Ok(())
        },
    )?;
    if next_doc.into_inner() != corpus.len() {
        return Err(Error::Param(
            "an input changed between passes: it has fewer records than when it was first read"
                .into(),
        ));
    }
    Ok(written)
}

/// Everything `neardup inspect` says about a pair of documents.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PairReport {
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
    let (sa, sb) = (crate::text::shingles(a, k), crate::text::shingles(b, k));
    let mut shared: Vec<String> = sa.intersection(&sb).cloned().collect();
    shared.sort();
    let perms = cfg.params.perms();
    let (ga, gb) = (
        crate::minhash::minhash(&sa, &perms),
        crate::minhash::minhash(&sb, &perms),
    );
    let r = cfg.lsh.rows;
    let empty = |s: &[u32]| crate::minhash::is_empty_signature(s);
    let colliding_bands: Vec<usize> = if empty(&ga) || empty(&gb) {
        Vec::new()
    } else {
        (0..cfg.lsh.bands)
            .filter(|&j| ga[j * r..(j + 1) * r] == gb[j * r..(j + 1) * r])
            .collect()
    };
    Ok(PairReport {
        words: [crate::text::words(a).len(), crate::text::words(b).len()],
        shingles: [sa.len(), sb.len()],
        shared_shingles: shared.len(),
        jaccard: crate::text::jaccard(&sa, &sb),
        estimate: crate::minhash::estimate(&ga, &gb)?,
        candidate: !colliding_bands.is_empty(),
        colliding_bands,
        shared: shared.into_iter().take(show).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a hash that collides on purpose (the id's length), ids that share a hash but
    /// differ pass, and a repeat is still found against the earliest document with its id,
    /// whether that is the first with the hash or a later one that clashed with it.
    #[test]
    fn colliding_hashes_neither_hide_a_repeat_nor_make_one_up() {
        let names = |f: u32| format!("f{f}");
        let run = |ids: &[&str]| {
            let mut u = UniqueIds::with_set(IdSet::with_hash(|b, _| b.len() as u64, 0));
            let mut a = IdArena::default();
            ids.iter().for_each(|i| a.push(i));
            let locs = (1..=ids.len() as u64).map(|line| DocLoc { file: 0, line });
            u.extend(&a, locs, &names).map(|()| u.set.clashes.len())
        };
        assert_eq!(run(&["ab", "cd", "ef", "g"]).unwrap(), 2);
        for (ids, first, second) in [
            (&["ab", "cd", "ab"][..], 1, 3),
            (&["ab", "cd", "ef", "cd"], 2, 4),
            (&["x", "ab", "cd", "ef", "ef", "cd"], 4, 5),
        ] {
            match run(ids).unwrap_err() {
                Error::DuplicateId {
                    first: f,
                    second: s,
                    ..
                } => {
                    assert_eq!(
                        (f, s),
                        (format!("f0:{first}"), format!("f0:{second}")),
                        "{ids:?}"
                    )
                }
                other => panic!("{other}"),
            }
        }
    }

    /// An arena of these ids, and where each was read: one a line of file 0.
    fn ids_of(picks: &[&str]) -> (IdArena, Vec<DocLoc>) {
        let mut a = IdArena::default();
        picks.iter().for_each(|p| a.push(p));
        let locs = (1..=picks.len() as u64)
            .map(|line| DocLoc { file: 0, line })
            .collect();
        (a, locs)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// `id_order` (what `dedup` checks after its first pass) and `UniqueIds` (what
        /// `signatures` checks as the documents arrive) name the same repeat of the same ids,
        /// or pass both: ids drawn from a small alphabet, so that most lists repeat several
        /// ids, in any order.
        #[test]
        fn the_sorted_and_the_streaming_check_name_the_same_repeat(
            picks in proptest::collection::vec(0u8..8, 0..12)
        ) {
            let names = |f: u32| format!("f{f}");
            let describe = |r: Result<(), Error>| r.map_err(|e| e.to_string());
            let picks: Vec<String> = picks.iter().map(|p| format!("id{p}")).collect();
            let (a, locs) = ids_of(&picks.iter().map(String::as_str).collect::<Vec<_>>());
            let sorted = describe(id_order(&a, &locs, &names).map(|_| ()));
            let mut u = UniqueIds::default();
            let streamed = describe(u.extend(&a, locs.iter().copied(), &names));
            proptest::prop_assert_eq!(&sorted, &streamed);
            // And through the hash-collision path: every id here has the same length, so with
            // the length as hash every repeat is found among the clashes.
            let mut u = UniqueIds::with_set(IdSet::with_hash(|b, _| b.len() as u64, 0));
            let clashing = describe(u.extend(&a, locs.iter().copied(), &names));
            proptest::prop_assert_eq!(&sorted, &clashing);
        }
    }

    /// The case that told them apart: "b" repeats before "a" does, and "a" sorts first.
    #[test]
    fn id_order_names_the_repeat_met_first_not_the_id_that_sorts_first() {
        let (a, locs) = ids_of(&["b", "a", "b", "a"]);
        let e = id_order(&a, &locs, &|f| format!("f{f}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"b\": at f0:1 and again at f0:3"), "{e}");
    }
}
