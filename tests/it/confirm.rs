//! Confirmation bucket by bucket: hot buckets of templated documents are joined by the exact
//! prefix filter, and lose no duplicate; the clusters are those of every candidate pair checked
//! by the definition.

use std::collections::HashSet;

use neardup::index::lsh::Lsh;
use neardup::index::unionfind::UnionFind;
use neardup::stages::dedup::{clusters, Confirm, DedupConfig};
use neardup::synth::SyntheticDocs;
use neardup::text::{jaccard, shingles};

/// The oracle: every LSH candidate pair, confirmed by the SPEC's Jaccard of shingle strings;
/// the root of each document (an index into `docs`) by union-find over id order.
fn oracle_roots(docs: &[(String, String)], cfg: &DedupConfig) -> Vec<u32> {
    let sigs = neardup::stages::dedup::sign_texts(docs, cfg).unwrap().0;
    let mut lsh = Lsh::new(cfg.lsh);
    for (d, (id, _)) in docs.iter().enumerate() {
        lsh.insert(id, sigs.sig(d)).unwrap();
    }
    let sets: Vec<HashSet<String>> = docs
        .iter()
        .map(|(_, t)| shingles(t, cfg.params.k))
        .collect();
    let mut order: Vec<usize> = (0..docs.len()).collect();
    order.sort_by(|&a, &b| docs[a].0.cmp(&docs[b].0));
    let mut rank = vec![0u32; docs.len()];
    for (r, &d) in order.iter().enumerate() {
        rank[d] = r as u32;
    }
    let index: std::collections::HashMap<&str, usize> = docs
        .iter()
        .enumerate()
        .map(|(d, (id, _))| (id.as_str(), d))
        .collect();
    let mut uf = UnionFind::new(docs.len());
    for (a, b) in lsh.candidates() {
        let (da, db) = (index[a.as_str()], index[b.as_str()]);
        if jaccard(&sets[da], &sets[db]) >= cfg.threshold {
            uf.union(rank[da], rank[db]);
        }
    }
    (0..docs.len())
        .map(|d| order[uf.find(rank[d]) as usize] as u32)
        .collect()
}

/// Every document begins with the same 100 words and has 15 to 45 of its own, so two of them
/// are at most 0.76 alike; 1 in 20 is a near copy of an earlier one (about 0.9). A fifth of the
/// documents share each band's hot bucket, so checking its pairs one by one would cost over
/// 100 thousand checks.
#[test]
fn a_hot_bucket_is_filtered_and_loses_no_duplicate() {
    let docs: Vec<(String, String)> = SyntheticDocs::new(800, 30, 3).with_template(100).collect();
    let cfg = DedupConfig::default();
    let c = clusters(&docs, &cfg).unwrap();
    assert_eq!(c.root, oracle_roots(&docs, &cfg));
    assert!(c.stats.near_duplicates >= 20, "{:?}", c.stats);
    assert!(c.stats.pairs_filtered > 50_000, "{:?}", c.stats);
    assert!(
        c.stats.pairs_checked < 10 * docs.len() as u64,
        "{:?}",
        c.stats
    );
}

/// The same clusters as the oracle for every confirmation, with and without a template, on
/// shuffled input; the pairs (as ids) do not depend on input order or threads.
#[test]
fn clusters_equal_the_oracle_and_pairs_follow_only_the_ids() {
    for template in [0, 30] {
        let mut docs: Vec<(String, String)> = SyntheticDocs::new(300, 20, 5)
            .with_template(template)
            .collect();
        for confirm in [Confirm::Jaccard, Confirm::Estimate, Confirm::None] {
            let cfg = DedupConfig {
                confirm,
                threshold: 0.7,
                ..Default::default()
            };
            let pairs_by_id = |docs: &[(String, String)], threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let c = pool.install(|| clusters(docs, &cfg)).unwrap();
                let id = |d: u32| docs[d as usize].0.clone();
                let roots: Vec<(String, String)> = (0..docs.len() as u32)
                    .map(|d| (id(d), id(c.root[d as usize])))
                    .collect();
                let pairs: Vec<(String, String, u64)> = c
                    .pairs
                    .iter()
                    .map(|p| (id(p.a), id(p.b), p.estimate.to_bits()))
                    .collect();
                (roots, pairs, c)
            };
            let (roots, pairs, c) = pairs_by_id(&docs, 1);
            if confirm == Confirm::Jaccard {
                let oracle = oracle_roots(&docs, &cfg);
                assert_eq!(c.root, oracle, "template {template}");
            }
            let mut sorted = pairs.clone();
            sorted.sort();
            assert_eq!(pairs, sorted, "pairs are sorted by id");
            neardup::synth::shuffle(&mut docs, &mut neardup::Pcg32::new(template as u64));
            let (mut roots2, pairs2, _) = pairs_by_id(&docs, 2);
            let mut roots = roots;
            roots.sort();
            roots2.sort();
            assert_eq!(roots, roots2, "{confirm:?} template {template}");
            assert_eq!(pairs, pairs2, "{confirm:?} template {template}");
        }
    }
}

/// Every listed pair carries its own MinHash estimate, whichever confirmation decided it (the
/// estimate is written after the buckets, once a pair, except under `estimate`).
#[test]
fn every_pair_carries_its_estimate() {
    let docs: Vec<(String, String)> = SyntheticDocs::new(400, 30, 8).with_template(60).collect();
    for confirm in [Confirm::Jaccard, Confirm::Estimate, Confirm::None] {
        let cfg = DedupConfig {
            confirm,
            threshold: 0.6,
            ..Default::default()
        };
        let (corpus, _) = neardup::stages::dedup::sign_texts(&docs, &cfg).unwrap();
        let c = clusters(&docs, &cfg).unwrap();
        assert!(!c.pairs.is_empty(), "{confirm:?}");
        for p in &c.pairs {
            let (a, b) = (corpus.sig(p.a as usize), corpus.sig(p.b as usize));
            let agree = a.iter().zip(b).filter(|(x, y)| x == y).count();
            assert_eq!(
                p.estimate,
                agree as f64 / a.len() as f64,
                "{confirm:?} {p:?}"
            );
        }
    }
}
