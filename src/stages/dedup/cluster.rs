//! Clustering a signed corpus: LSH candidates, confirmation, union-find over id ranks.

use std::collections::HashMap;
use std::time::Instant;

use rayon::prelude::*;

use super::*;
use crate::error::Error;
use crate::ids::IdArena;
use crate::ids::{id_order, DocLoc};
use crate::index::lsh::band_buckets;
use crate::index::unionfind::UnionFind;
use crate::progress::ProgressFactory;

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
    /// With `--keep field:NAME`: each document's value of the field.
    pub keep_values: Vec<f64>,
    /// With `--group-field`: each document's group, an index into `group_names`.
    pub groups: Vec<u32>,
    /// The groups' names, in order of first appearance (`None`: the documents without the
    /// field, with `--group-missing own`).
    pub group_names: Vec<Option<String>>,
    /// With `--against` under `--cluster greedy`: whether each document has a confirmed near
    /// duplicate in an index (empty: none has).
    pub index_matched: Vec<bool>,
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
            + self.keep_values.len() * 8
            + self.groups.len() * 4
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
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct ClusterStats {
    /// LSH buckets with two or more documents (over all bands).
    pub buckets: u64,
    /// Candidate pairs whose estimate or Jaccard was computed, bucket by bucket (a pair in two
    /// buckets may be checked in each; see [`confirm_bucket`]).
    pub pairs_checked: u64,
    /// Distinct confirmed pairs: the spanning pairs of every bucket (the `--pairs` file).
    pub pairs_confirmed: u64,
    /// Checks below the threshold.
    pub pairs_rejected: u64,
    /// Pairs of a bucket skipped because the bucket had joined them already.
    pub pairs_already_joined: u64,
    /// Candidate pairs of two groups (`--group-field`), never duplicates.
    pub pairs_other_group: u64,
    /// Pairs of a bucket that the exact prefix filter proved below the threshold.
    pub pairs_filtered: u64,
    /// Documents whose shingle sets were loaded for `jaccard` confirmation.
    pub sets_loaded: u64,
    /// Whether those sets were kept from the signing pass (else read from the inputs again).
    #[serde(default)]
    pub sets_from_signing: bool,
    pub wordless: u64,
    pub exact_duplicates: u64,
    pub near_duplicates: u64,
    /// Clusters of two or more documents.
    pub clusters: u64,
    pub documents_in_clusters: u64,
    /// Cluster size -> how many clusters have it (sizes 2 and up).
    pub cluster_sizes: std::collections::BTreeMap<u64, u64>,
    /// What chaining did (measured for reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaining: Option<Chaining>,
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

/// What chaining does to a run's clusters: documents dropped with no surviving near duplicate
/// (under `components`, dropped by a chain alone; none under `greedy`), and the largest
/// cluster's size and length in hops.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Chaining {
    /// Dropped (or, with `--tag-only`, not the survivor) documents of which no surviving
    /// document is a confirmed near duplicate.
    pub dropped_without_kept_duplicate: u64,
    pub largest_cluster: u64,
    /// The largest cluster's diameter in hops over the pairs the run confirmed (its `--pairs`)
    /// and its exact copies. Exact up to [`EXACT_DIAMETER_MEMBERS`] members; past that a double
    /// sweep of breadth-first searches (exact when those pairs form a tree, a lower bound
    /// otherwise). Of two largest clusters, the one whose root has the smaller id.
    pub largest_cluster_diameter: u64,
}

/// The outcome of clustering a corpus.
#[derive(Debug, Clone)]
pub struct Clustering {
    /// For each document (input order), the document index of its cluster's root (the smallest
    /// id in the cluster; a singleton is its own root).
    pub root: Vec<u32>,
    /// For each document, whether it survives a dropping run: every document in no cluster,
    /// and of each cluster the one the keep policy chooses (by default the root).
    pub survives: Vec<bool>,
    /// For each document, whether the exact pre-pass found an identical document with a smaller
    /// id.
    pub exact_duplicate: Vec<bool>,
    /// Every bucket's spanning pairs ([`confirm_bucket`]), each once, sorted by (a, b) in id
    /// order.
    pub pairs: Vec<ConfirmedPair>,
    pub stats: ClusterStats,
    /// With exact-Jaccard confirmation: measured LSH candidate rates by true similarity, on a
    /// sample (for the report's S-curve).
    pub similarity_buckets: Vec<SimilarityBucket>,
}

impl Clustering {
    /// Is document `d` its cluster's root (the smallest id)?
    pub fn is_root(&self, d: usize) -> bool {
        self.root[d] as usize == d
    }

    /// Is document `d` kept when dropping (see [`Clustering::survives`])?
    pub fn keeps(&self, d: usize) -> bool {
        self.survives[d]
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

/// Which documents survive a dropping run: those in no cluster, and of each cluster the best
/// by `keep`, ties to the smallest id (`rank`: each document's place in id order).
pub(crate) fn survivors(
    corpus: &SignedCorpus,
    root: &[u32],
    rank: &[u32],
    keep: Keep,
) -> Result<Vec<bool>, Error> {
    if keep == Keep::SmallestId {
        return Ok((0..root.len()).map(|d| root[d] as usize == d).collect());
    }
    let key = policy_key(corpus, keep)?;
    Ok(best_of_clusters(root, key, |d| rank[d] as u64))
}

/// How `keep` values each document of `corpus` (larger is better); an error when a field
/// policy lacks the field's values.
fn policy_key(
    corpus: &SignedCorpus,
    keep: Keep,
) -> Result<impl Fn(usize) -> f64 + Sync + '_, Error> {
    if matches!(keep, Keep::FieldMax | Keep::FieldMin) && corpus.keep_values.len() != corpus.len() {
        return Err(Error::Param(
            "--keep field:NAME needs each document's value of the field".into(),
        ));
    }
    Ok(move |d: usize| {
        let value = corpus.keep_values.get(d).copied().unwrap_or(0.0);
        keep_key(keep, corpus.words[d], value, d as u64)
    })
}

/// Every document in survivor-policy order: best by `keep` first, ties (and `smallest-id`) in
/// id order (`order`: the documents in id order, `rank` each one's place there).
pub(crate) fn policy_order(
    corpus: &SignedCorpus,
    order: &[u32],
    rank: &[u32],
    keep: Keep,
) -> Result<Vec<u32>, Error> {
    if keep == Keep::SmallestId {
        return Ok(order.to_vec());
    }
    let key = policy_key(corpus, keep)?;
    let mut out = order.to_vec();
    out.par_sort_by(|&a, &b| {
        key(b as usize)
            .total_cmp(&key(a as usize))
            .then(rank[a as usize].cmp(&rank[b as usize]))
    });
    Ok(out)
}

/// How `keep` values a document (larger is better) from its words, its value of the keep
/// field and its position in input order.
pub(crate) fn keep_key(keep: Keep, words: u32, value: f64, position: u64) -> f64 {
    match keep {
        Keep::SmallestId => 0.0,
        Keep::First => -(position as f64),
        Keep::Longest => words as f64,
        Keep::FieldMax => value,
        Keep::FieldMin => -value,
    }
}

/// Of each set of elements with one `root`, the best by `key` (ties to the smaller `rank`)
/// marked true.
pub(crate) fn best_of_clusters(
    root: &[u32],
    key: impl Fn(usize) -> f64,
    rank: impl Fn(usize) -> u64,
) -> Vec<bool> {
    let better = |a: usize, b: usize| match key(a).total_cmp(&key(b)) {
        std::cmp::Ordering::Equal => rank(a) < rank(b),
        o => o == std::cmp::Ordering::Greater,
    };
    let mut best: HashMap<u32, u32> = HashMap::new();
    for (d, &r) in root.iter().enumerate() {
        let cur = best.entry(r).or_insert(d as u32);
        if better(d, *cur as usize) {
            *cur = d as u32;
        }
    }
    (0..root.len())
        .map(|d| best[&root[d]] as usize == d)
        .collect()
}

/// The cluster counts of `stats` from each document's root (`exact_duplicates` already set).
pub(crate) fn count_clusters(root: &[u32], stats: &mut ClusterStats) {
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
    let non_roots: u64 = size.values().map(|s| s - 1).sum();
    stats.near_duplicates = non_roots - stats.exact_duplicates;
}

/// Shingle sets (sorted 64-bit FNV-1a values) by document index, for `jaccard` confirmation.
pub type ShingleSets = HashMap<u32, Vec<u64>>;

/// For tests: up to `max_n` templated sets ([`crate::index::simjoin::templated_sets`]), a
/// template of 20 to 59 tokens, keyed by document number.
#[cfg(test)]
pub(crate) fn templated_shingle_sets(rng: &mut crate::hash::Pcg32, max_n: u32) -> ShingleSets {
    let n = 2 + rng.below(max_n - 1) as usize;
    let template = 20 + rng.below(40) as u64;
    crate::index::simjoin::templated_sets(rng, n, template)
        .into_iter()
        .enumerate()
        .map(|(d, v)| (d as u32, v))
        .collect()
}

/// Cluster a signed corpus. `place_of(loc)` names documents' places in error messages; `load_sets` is
/// called (once, only for `jaccard` confirmation and only when some bucket exists) with a mask of
/// the documents whose shingle sets are needed. With `measure`, the S-curve is also measured
/// on a sample (for reports; it adds to the time of confirmation: docs/BENCHMARKS.md).
pub fn cluster_corpus(
    corpus: &SignedCorpus,
    cfg: &DedupConfig,
    place_of: &dyn Fn(DocLoc) -> String,
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
    let order = id_order(&corpus.ids, &corpus.locs, place_of)?;
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
        // Keyed by group too: copies in two groups are not duplicates.
        let group = |d: usize| corpus.groups.get(d).copied().unwrap_or(0);
        let mut keyed: Vec<(u128, u32, u32)> = (0..n)
            .filter(|&d| corpus.words[d] > 0)
            .map(|d| (corpus.exact_keys[d], group(d), rank[d]))
            .collect();
        keyed.par_sort_unstable();
        exact_rep = (0..n as u32).collect();
        let mut i = 0;
        while i < keyed.len() {
            let mut e = i + 1;
            while e < keyed.len() && keyed[e].0 == keyed[i].0 && keyed[e].1 == keyed[i].1 {
                e += 1;
            }
            let rep = order[keyed[i].2 as usize];
            for &(_, _, r) in &keyed[i + 1..e] {
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
    let tables = BucketTables {
        num_perm: corpus.num_perm,
        sigs: &corpus.sigs,
        sets: &sets,
        cache: &JaccardCache::default(),
        groups: &corpus.groups,
    };
    // Each document's exact-copy representative (itself without `--exact`).
    let rep = |d: u32| if cfg.exact { exact_rep[d as usize] } else { d };
    let (mut pairs, counts, greedy_root) = if cfg.cluster == ClusterRule::Greedy {
        let policy = policy_order(corpus, &order, &rank, cfg.keep)?;
        let g = greedy::greedy(
            n,
            &policy,
            rep,
            &buckets,
            &tables,
            cfg.confirm,
            cfg.threshold,
            &corpus.index_matched,
        );
        let mut pairs = g.pairs;
        for p in &mut pairs {
            if rank[p.a as usize] > rank[p.b as usize] {
                std::mem::swap(&mut p.a, &mut p.b);
            }
        }
        (pairs, g.counts, Some(g.root))
    } else {
        // Each bucket on its own (see `confirm`), in parallel; then the union of their pairs.
        let (pairs, counts) = confirm_distinct(
            &buckets,
            |m| m.sort_unstable_by_key(|&d| rank[d as usize]),
            &tables,
            cfg.confirm,
            cfg.threshold,
        );
        (pairs, counts, None)
    };
    pairs.par_sort_unstable_by_key(|p| (rank[p.a as usize], rank[p.b as usize]));
    pairs.dedup_by_key(|p| (p.a, p.b));
    fill_estimates(&mut pairs, &corpus.sigs, corpus.num_perm);
    stats.pairs_checked = counts.checked;
    stats.pairs_confirmed = pairs.len() as u64;
    stats.pairs_rejected = counts.rejected;
    stats.pairs_already_joined = counts.already_joined;
    stats.pairs_other_group = counts.other_group;
    stats.pairs_filtered = counts.filtered;
    let similarity_buckets = if sets.is_empty() || !measure {
        Vec::new()
    } else {
        similarity_sample(corpus, cfg.lsh, &sets)
    };
    stats.confirm_seconds = t_confirm.elapsed().as_secs_f64();

    let t_cluster = Instant::now();
    step.set_message("clusters");
    let (root, survives) = match greedy_root {
        Some(root) => {
            let survives = (0..n).map(|d| root[d] as usize == d).collect();
            (root, survives)
        }
        None => {
            let mut uf = UnionFind::new(n);
            for p in &pairs {
                uf.union(rank[p.a as usize], rank[p.b as usize]);
            }
            if cfg.exact {
                for d in 0..n {
                    if exact_duplicate[d] {
                        uf.union(rank[d], rank[exact_rep[d] as usize]);
                    }
                }
            }
            let root: Vec<u32> = (0..n).map(|d| order[uf.find(rank[d]) as usize]).collect();
            let survives = survivors(corpus, &root, &rank, cfg.keep)?;
            (root, survives)
        }
    };
    count_clusters(&root, &mut stats);
    if measure {
        stats.chaining = Some(chaining(
            corpus, cfg, &tables, &root, &survives, &pairs, &rank, rep,
        ));
    }
    drop(sets);
    stats.cluster_seconds = t_cluster.elapsed().as_secs_f64();
    Ok(Clustering {
        survives,
        root,
        exact_duplicate,
        pairs,
        stats,
        similarity_buckets,
    })
}

/// The largest cluster (most members, then the root with the smallest id: `rank(d)` is `d`'s
/// place in id order) of the clusters `root` makes, and its diameter in hops over the edges
/// `edges(root, add)` adds for it: `(0, 0)` without a cluster. Exact up to
/// [`EXACT_DIAMETER_MEMBERS`] members; past that a double sweep of breadth-first searches.
pub(crate) fn largest_cluster_hops(
    root: &[u32],
    rank: impl Fn(usize) -> u64,
    edges: impl FnOnce(u32, &mut dyn FnMut(u32, u32)),
) -> (u64, u64) {
    let mut size: HashMap<u32, u64> = HashMap::new();
    for (d, &r) in root.iter().enumerate() {
        if r as usize != d {
            *size.entry(r).or_insert(1) += 1;
        }
    }
    let Some((&big, &largest)) = size.iter().max_by(|a, b| {
        a.1.cmp(b.1)
            .then(rank(*b.0 as usize).cmp(&rank(*a.0 as usize)))
    }) else {
        return (0, 0);
    };
    // The cluster's graph as arrays (its nodes sorted, each one's neighbours a run of one
    // array): a few bytes a member and an edge, where maps of lists cost a hundred or more.
    let mut links: Vec<(u32, u32)> = Vec::new();
    edges(big, &mut |a, b| {
        links.push((a, b));
        links.push((b, a));
    });
    links.sort_unstable();
    let mut nodes: Vec<u32> = links.iter().map(|l| l.0).collect();
    nodes.dedup();
    let at = |x: u32| nodes.binary_search(&x).ok();
    let mut first = Vec::with_capacity(nodes.len() + 1);
    let mut next: Vec<u32> = Vec::with_capacity(links.len());
    for (i, &(a, b)) in links.iter().enumerate() {
        if i == 0 || links[i - 1].0 != a {
            first.push(next.len());
        }
        next.push(at(b).expect("both ends are nodes") as u32);
    }
    first.push(next.len());
    drop(links);
    let mut dist = vec![u32::MAX; nodes.len()];
    let mut queue: Vec<u32> = Vec::with_capacity(nodes.len());
    // The farthest node from `from` (the smallest rank among the farthest) and its distance.
    let mut farthest = |from: u32| -> (u32, u64) {
        let Some(start) = at(from) else {
            return (from, 0);
        };
        dist.fill(u32::MAX);
        queue.clear();
        dist[start] = 0;
        queue.push(start as u32);
        let mut far = (from, 0u64);
        let mut head = 0;
        while head < queue.len() {
            let x = queue[head] as usize;
            head += 1;
            let (node, dx) = (nodes[x], dist[x]);
            if dx as u64 > far.1
                || (dx as u64 == far.1 && rank(node as usize) < rank(far.0 as usize))
            {
                far = (node, dx as u64);
            }
            for &y in &next[first[x]..first[x + 1]] {
                if dist[y as usize] == u32::MAX {
                    dist[y as usize] = dx + 1;
                    queue.push(y);
                }
            }
        }
        far
    };
    // Exact (a search from every member) up to `EXACT_DIAMETER_MEMBERS`; past it a double
    // sweep, which is exact on a tree and a lower bound otherwise.
    let diameter = if largest <= EXACT_DIAMETER_MEMBERS {
        let mut best = 0;
        for &x in nodes.iter() {
            best = best.max(farthest(x).1);
        }
        best
    } else {
        let (end, _) = farthest(big);
        farthest(end).1
    };
    (largest, diameter)
}

/// The largest cluster size whose diameter [`Chaining`] computes exactly.
pub const EXACT_DIAMETER_MEMBERS: u64 = 1024;

/// [`Chaining`] of a clustering (`rep`: each document's exact-copy representative).
#[allow(clippy::too_many_arguments)]
fn chaining(
    corpus: &SignedCorpus,
    cfg: &DedupConfig,
    tables: &BucketTables,
    root: &[u32],
    survives: &[bool],
    pairs: &[ConfirmedPair],
    rank: &[u32],
    rep: impl Fn(u32) -> u32 + Sync,
) -> Chaining {
    let n = root.len();
    let mut survivor: HashMap<u32, u32> = HashMap::new();
    for d in 0..n {
        if survives[d] {
            survivor.insert(root[d], d as u32);
        }
    }
    let rows = cfg.lsh.rows;
    let candidates = |a: u32, b: u32| {
        let (sa, sb) = (corpus.sig(a as usize), corpus.sig(b as usize));
        (0..cfg.lsh.bands).any(|j| sa[j * rows..(j + 1) * rows] == sb[j * rows..(j + 1) * rows])
    };
    let has_set = |d: u32| cfg.confirm != Confirm::Jaccard || tables.sets.contains_key(&d);
    // A confirmed pair is never of two clusters, so only a document's own survivor can be its
    // surviving near duplicate.
    let dropped_without_kept_duplicate = (0..n)
        .into_par_iter()
        .filter(|&d| !survives[d])
        .filter(|&d| {
            let Some(&s) = survivor.get(&root[d]) else {
                return true;
            };
            let (g, h) = (rep(d as u32), rep(s));
            if g == h {
                return false;
            }
            if !candidates(g, h) || !has_set(g) || !has_set(h) {
                return true;
            }
            let same_group =
                corpus.groups.is_empty() || corpus.groups[g as usize] == corpus.groups[h as usize];
            !(same_group && test_pair(tables, cfg.confirm, cfg.threshold, g.min(h), g.max(h)).0)
        })
        .count() as u64;
    let (largest_cluster, largest_cluster_diameter) = largest_cluster_hops(
        root,
        |d| rank[d] as u64,
        |big, edge| {
            for p in pairs.iter().filter(|p| root[p.a as usize] == big) {
                edge(p.a, p.b);
            }
            for d in 0..n as u32 {
                if root[d as usize] == big && rep(d) != d {
                    edge(d, rep(d));
                }
            }
        },
    );
    Chaining {
        dropped_without_kept_duplicate,
        largest_cluster,
        largest_cluster_diameter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// [`largest_cluster_hops`] by maps of lists and of distances: the oracle.
    fn naive_hops(root: &[u32], rank: &[u64], links: &[(u32, u32)]) -> (u64, u64) {
        let mut size: HashMap<u32, u64> = HashMap::new();
        for (d, &r) in root.iter().enumerate() {
            if r as usize != d {
                *size.entry(r).or_insert(1) += 1;
            }
        }
        let Some((&big, &largest)) = size.iter().max_by(|a, b| {
            a.1.cmp(b.1)
                .then(rank[*b.0 as usize].cmp(&rank[*a.0 as usize]))
        }) else {
            return (0, 0);
        };
        let mut adj: HashMap<u32, Vec<u32>> = HashMap::new();
        for &(a, b) in links.iter().filter(|l| root[l.0 as usize] == big) {
            adj.entry(a).or_default().push(b);
            adj.entry(b).or_default().push(a);
        }
        let farthest = |from: u32| -> (u32, u64) {
            let mut dist: HashMap<u32, u64> = HashMap::from([(from, 0)]);
            let mut queue = std::collections::VecDeque::from([from]);
            let mut far = (from, 0);
            while let Some(x) = queue.pop_front() {
                let dx = dist[&x];
                if dx > far.1 || (dx == far.1 && rank[x as usize] < rank[far.0 as usize]) {
                    far = (x, dx);
                }
                for &y in adj.get(&x).map(Vec::as_slice).unwrap_or(&[]) {
                    dist.entry(y).or_insert_with(|| {
                        queue.push_back(y);
                        dx + 1
                    });
                }
            }
            far
        };
        let diameter = if largest <= EXACT_DIAMETER_MEMBERS {
            adj.keys().map(|&x| farthest(x).1).max().unwrap_or(0)
        } else {
            farthest(farthest(big).0).1
        };
        (largest, diameter)
    }

    /// A graph of `n` nodes from `links`, their ranks a permutation shuffled by `seed`, and each
    /// node's root the smallest rank of its component.
    fn check(n: usize, links: &[(u32, u32)], seed: u64) {
        let mut rank: Vec<u64> = (0..n as u64).collect();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            rank.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut uf = UnionFind::new(n);
        for &(a, b) in links {
            uf.union(a, b);
        }
        let mut best: HashMap<u32, u32> = HashMap::new();
        for d in 0..n as u32 {
            let e = best.entry(uf.find(d)).or_insert(d);
            if rank[d as usize] < rank[*e as usize] {
                *e = d;
            }
        }
        let root: Vec<u32> = (0..n as u32).map(|d| best[&uf.find(d)]).collect();
        let got = largest_cluster_hops(
            &root,
            |d| rank[d],
            |big, edge| {
                for &(a, b) in links.iter().filter(|l| root[l.0 as usize] == big) {
                    edge(a, b);
                }
            },
        );
        assert_eq!(got, naive_hops(&root, &rank, links));
    }

    proptest! {
        #[test]
        fn hops_agree_with_maps_of_lists(
            n in 1usize..40,
            raw in proptest::collection::vec((0u32..40, 0u32..40), 0..80),
            seed in any::<u64>(),
        ) {
            let links: Vec<(u32, u32)> =
                raw.into_iter().map(|(a, b)| (a % n as u32, b % n as u32)).collect();
            check(n, &links, seed);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn hops_by_double_sweep_agree_with_maps_of_lists(
            n in 1025usize..1200,
            chords in proptest::collection::vec((0u32..1200, 0u32..1200), 0..300),
            seed in any::<u64>(),
        ) {
            // A chain makes one cluster past the exact size; chords give it cycles and ties.
            let mut links: Vec<(u32, u32)> = (1..n as u32).map(|i| (i - 1, i)).collect();
            links.extend(chords.into_iter().map(|(a, b)| (a % n as u32, b % n as u32)));
            check(n, &links, seed);
        }
    }

    #[test]
    fn hops_past_the_exact_size_agree_with_maps_of_lists() {
        // Chains, a cycle and random chords around 2^10 members: the double sweep.
        for n in [1023usize, 1024, 1025, 1026, 1500] {
            let chain: Vec<(u32, u32)> = (1..n as u32).map(|i| (i - 1, i)).collect();
            check(n, &chain, n as u64);
            let mut more = chain.clone();
            more.push((n as u32 - 1, 0));
            for i in 0..n as u32 / 10 {
                more.push((i * 7 % n as u32, i * 13 % n as u32));
            }
            check(n, &more, 7 * n as u64);
        }
        // No cluster at all, and one of two.
        check(3, &[], 1);
        check(3, &[(2, 1)], 1);
    }
}
