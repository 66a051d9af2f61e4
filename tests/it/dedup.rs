//! Near-dedup and the exact pre-pass as a library: planted clusters found exactly, borderline
//! pairs apart, the chain, wordless documents, and independence of threads and input order.

use std::collections::{BTreeSet, HashMap};

use neardup::batch::PackedBatch;
use neardup::engine::{CpuEngine, Engine};
use neardup::jsonl::Fields;
use neardup::stages::dedup::{clusters, exact_dedup, near_dedup, Clustering, Confirm, DedupConfig};
use neardup::synth::{planted_corpus, PlantOptions, Planted};
use neardup::MinHashParams;
use serde_json::{json, Map, Value};

fn groups_by_id(docs: &[(String, String)], c: &Clustering) -> BTreeSet<Vec<String>> {
    let mut by_root: HashMap<u32, Vec<String>> = HashMap::new();
    for (d, &r) in c.root.iter().enumerate() {
        by_root.entry(r).or_default().push(docs[d].0.clone());
    }
    by_root
        .into_values()
        .filter(|g| g.len() > 1)
        .map(|mut g| {
            g.sort();
            g
        })
        .collect()
}

fn root_of<'a>(docs: &'a [(String, String)], c: &Clustering, id: &str) -> &'a str {
    let d = docs.iter().position(|(i, _)| i == id).unwrap();
    &docs[c.root[d] as usize].0
}

fn expected_groups(p: &Planted) -> BTreeSet<Vec<String>> {
    let mut g: BTreeSet<Vec<String>> = p
        .clusters
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.sort();
            c
        })
        .collect();
    for (copy, orig) in &p.exact_copies {
        let mut v = vec![copy.clone(), orig.clone()];
        v.sort();
        g.insert(v);
    }
    let mut chain = p.chain.clone().unwrap().to_vec();
    chain.sort();
    g.insert(chain);
    g
}

#[test]
fn planted_clusters_are_found_exactly_for_three_seeds() {
    for seed in [1, 2, 3] {
        let p = planted_corpus(seed, PlantOptions::default());
        let c = clusters(&p.docs, &DedupConfig::default()).unwrap();
        assert_eq!(
            groups_by_id(&p.docs, &c),
            expected_groups(&p),
            "seed {seed}"
        );
        for g in expected_groups(&p) {
            for id in &g {
                assert_eq!(root_of(&p.docs, &c, id), g[0], "root is the smallest id");
            }
        }
        for (a, b, j) in &p.borderline {
            assert!((0.5..=0.6).contains(j));
            assert_ne!(
                root_of(&p.docs, &c, a),
                root_of(&p.docs, &c, b),
                "borderline {a} {b} apart"
            );
        }
        for id in &p.loners {
            assert_eq!(root_of(&p.docs, &c, id), id, "loner {id} stays alone");
        }
    }
}

#[test]
fn the_chain_is_one_cluster_keeping_x() {
    let p = planted_corpus(
        5,
        PlantOptions {
            background: 5,
            clusters: 0,
            exact_copies: 0,
            borderline: 0,
            ..Default::default()
        },
    );
    let [x, y, z] = p.chain.clone().unwrap();
    let sx = neardup::shingles(&text_of(&p, &x), 5);
    let sz = neardup::shingles(&text_of(&p, &z), 5);
    assert!(
        neardup::jaccard(&sx, &sz) < 0.8,
        "x and z are below the threshold"
    );
    let c = clusters(&p.docs, &DedupConfig::default()).unwrap();
    for id in [&x, &y, &z] {
        assert_eq!(root_of(&p.docs, &c, id), x);
    }
    // And with drop on, of the three only x survives.
    let survivors: Vec<&str> = p
        .docs
        .iter()
        .enumerate()
        .filter(|(d, _)| c.is_root(*d))
        .map(|(_, (id, _))| id.as_str())
        .collect();
    assert!(survivors.contains(&x.as_str()));
    assert!(!survivors.contains(&y.as_str()) && !survivors.contains(&z.as_str()));
}

fn text_of(p: &Planted, id: &str) -> String {
    p.docs.iter().find(|(i, _)| i == id).unwrap().1.clone()
}

#[test]
fn candidates_below_threshold_are_not_merged() {
    // J = 4/6 on k = 3: a candidate for some bandings, never a duplicate at 0.8.
    let docs = vec![
        ("a".to_string(), "the cat sat on the mat today".to_string()),
        ("b".to_string(), "the cat sat on the mat again".to_string()),
    ];
    let base = DedupConfig {
        params: MinHashParams::new(3, 128, 0).unwrap(),
        ..Default::default()
    };
    // 128 bands of 1 row: every pair sharing a single minimum is a candidate.
    let loose = DedupConfig {
        lsh: neardup::LshParams::new(128, 1).unwrap(),
        ..base
    };
    for confirm in [Confirm::Jaccard, Confirm::Estimate] {
        let c = clusters(&docs, &DedupConfig { confirm, ..loose }).unwrap();
        assert!(
            c.stats.pairs_checked >= 1,
            "{confirm:?}: the pair was a candidate"
        );
        assert_eq!(c.stats.pairs_confirmed, 0, "{confirm:?}");
        assert_eq!(c.root, [0, 1]);
    }
    // confirm = none takes every candidate.
    let c = clusters(
        &docs,
        &DedupConfig {
            confirm: Confirm::None,
            ..loose
        },
    )
    .unwrap();
    assert_eq!(c.root, [0, 0]);
    // At threshold 0.6 exact Jaccard 0.667 passes.
    let c = clusters(
        &docs,
        &DedupConfig {
            threshold: 0.6,
            ..loose
        },
    )
    .unwrap();
    assert_eq!(c.root, [0, 0]);
    assert_eq!(c.pairs[0].jaccard, Some(4.0 / 6.0));
}

#[test]
fn wordless_documents_are_never_clustered_or_collapsed() {
    let docs: Vec<(String, String)> = ["", "!!!", "  ", "— …", ""]
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("e{i}"), t.to_string()))
        .collect();
    for exact in [false, true] {
        for confirm in [Confirm::Jaccard, Confirm::Estimate, Confirm::None] {
            let c = clusters(
                &docs,
                &DedupConfig {
                    exact,
                    confirm,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(c.root, [0, 1, 2, 3, 4], "exact={exact} confirm={confirm:?}");
            assert_eq!(c.stats.wordless, 5);
        }
    }
}

#[test]
fn signatures_are_identical_for_1_2_and_3_threads_and_any_batch_split() {
    let p = planted_corpus(9, PlantOptions::default());
    let texts: Vec<&str> = p.docs.iter().map(|(_, t)| t.as_str()).collect();
    let params = MinHashParams::default();
    let whole = PackedBatch::from_texts(&texts);
    let reference = CpuEngine::new(params, 1).unwrap().sign_vec(&whole).unwrap();
    for threads in [2, 3] {
        let got = CpuEngine::new(params, threads)
            .unwrap()
            .sign_vec(&whole)
            .unwrap();
        assert_eq!(got, reference, "{threads} threads");
    }
    for split in [1, 7, 64, 65, 1000] {
        let mut got = Vec::new();
        let mut e = CpuEngine::new(params, 2).unwrap();
        for part in texts.chunks(split) {
            got.extend(e.sign_vec(&PackedBatch::from_texts(part)).unwrap());
        }
        assert_eq!(got, reference, "batches of {split}");
    }
}

#[test]
fn clusters_do_not_depend_on_input_order() {
    let p = planted_corpus(4, PlantOptions::default());
    let cfg = DedupConfig {
        exact: true,
        ..Default::default()
    };
    let c = clusters(&p.docs, &cfg).unwrap();
    let mut rev = p.docs.clone();
    rev.reverse();
    let cr = clusters(&rev, &cfg).unwrap();
    assert_eq!(groups_by_id(&p.docs, &c), groups_by_id(&rev, &cr));
    let roots = |docs: &[(String, String)], c: &Clustering| -> BTreeSet<(String, String)> {
        docs.iter()
            .enumerate()
            .map(|(d, (id, _))| (id.clone(), docs[c.root[d] as usize].0.clone()))
            .collect()
    };
    assert_eq!(roots(&p.docs, &c), roots(&rev, &cr));
    let pairs = |docs: &[(String, String)], c: &Clustering| -> Vec<(String, String)> {
        c.pairs
            .iter()
            .map(|p| (docs[p.a as usize].0.clone(), docs[p.b as usize].0.clone()))
            .collect()
    };
    assert_eq!(pairs(&p.docs, &c), pairs(&rev, &cr));
}

fn records(p: &Planted) -> Vec<Map<String, Value>> {
    p.docs
        .iter()
        .enumerate()
        .map(|(i, (id, text))| {
            let mut m = Map::new();
            m.insert("url".into(), json!(format!("https://example.org/{i}")));
            m.insert("id".into(), json!(id));
            m.insert("text".into(), json!(text));
            if i % 3 == 0 {
                m.insert("meta".into(), json!({"source": "crawl", "n": i}));
            }
            m.insert("z_last".into(), json!([i, {"deep": true}]));
            m
        })
        .collect()
}

#[test]
fn near_dedup_tags_keeps_order_and_fields() {
    let p = planted_corpus(2, PlantOptions::default());
    let recs = records(&p);
    let fields = Fields::default();
    let tag_only = DedupConfig {
        drop: false,
        ..Default::default()
    };
    let (out, c) = near_dedup(recs.clone(), &fields, &tag_only).unwrap();
    assert_eq!(out.len(), recs.len());
    for (d, (o, r)) in out.iter().zip(&recs).enumerate() {
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        let mut want: Vec<&str> = r.keys().map(String::as_str).collect();
        if !r.contains_key("meta") {
            want.push("meta");
        }
        assert_eq!(
            keys, want,
            "fields keep their order; meta is added last when absent"
        );
        for (k, v) in r {
            if k != "meta" {
                assert_eq!(&o[k], v, "field {k} kept");
            }
        }
        let root = &p.docs[c.root[d] as usize].0;
        assert_eq!(o["meta"]["minhash_cluster"], json!(root));
        if let Some(m) = r.get("meta") {
            assert_eq!(
                o["meta"]["source"], m["source"],
                "existing meta fields kept"
            );
        }
    }
    // With drop on: only roots, in input order.
    let (kept, c2) = near_dedup(recs.clone(), &fields, &DedupConfig::default()).unwrap();
    let want: Vec<&Value> = recs
        .iter()
        .enumerate()
        .filter(|(d, _)| c2.is_root(*d))
        .map(|(_, r)| &r["id"])
        .collect();
    let got: Vec<&Value> = kept.iter().map(|r| &r["id"]).collect();
    assert_eq!(got, want);
    assert_eq!(kept.len() + c2.stats.near_duplicates as usize, recs.len());
}

/// The in-memory stage reads the keep and group fields as a file run does: of two near copies
/// the one of higher `quality` survives, and copies in two groups are not duplicates.
#[test]
fn near_dedup_reads_the_keep_and_group_fields() {
    let text = "the quick brown fox jumps over the lazy dog near the river bank today";
    let rec = |id: &str, text: &str, quality: f64, dump: &str| {
        json!({"id": id, "text": text, "quality": quality, "dump": dump})
            .as_object()
            .unwrap()
            .clone()
    };
    let recs = vec![
        rec("b-short", text, 0.1, "A"),
        rec("z-long", &format!("{text} again"), 0.9, "A"),
        rec("c-other", text, 0.5, "B"),
    ];
    let fields = Fields {
        keep: Some("quality".into()),
        group: Some("dump".into()),
        ..Default::default()
    };
    let cfg = DedupConfig {
        keep: neardup::stages::dedup::Keep::FieldMax,
        threshold: 0.5,
        ..Default::default()
    };
    let (kept, c) = near_dedup(recs.clone(), &fields, &cfg).unwrap();
    let ids: Vec<&str> = kept.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["z-long", "c-other"]);
    assert_eq!(kept[0]["meta"]["minhash_cluster"], "b-short");
    assert_eq!(c.stats.near_duplicates, 1);
    // A missing keep value is named.
    let mut bad = recs;
    bad[1].remove("quality");
    let e = near_dedup(bad, &fields, &cfg).unwrap_err().to_string();
    assert!(e.contains("<memory>:2") && e.contains("quality"), "{e}");
}

#[test]
fn repeated_ids_are_an_error_before_any_output() {
    let mut p = planted_corpus(
        2,
        PlantOptions {
            background: 3,
            clusters: 1,
            exact_copies: 0,
            borderline: 0,
            ..Default::default()
        },
    );
    let dup_id = p.docs[0].0.clone();
    p.docs
        .push((dup_id.clone(), "some other text entirely".into()));
    let e = clusters(&p.docs, &DedupConfig::default()).unwrap_err();
    assert!(e.to_string().contains(&format!("{dup_id:?}")), "{e}");
    let e = near_dedup(records(&p), &Fields::default(), &DedupConfig::default()).unwrap_err();
    assert!(matches!(e, neardup::Error::DuplicateId { .. }), "{e}");
}

#[test]
fn exact_then_near_drops_exactly_the_planted_duplicates_and_counts_add_up() {
    let p = planted_corpus(3, PlantOptions::default());
    let planted_near: usize = p.clusters.iter().map(|c| c.len() - 1).sum::<usize>() + 2; // + chain y, z
    let planted_exact = p.exact_copies.len();
    // The two library stages one after the other.
    let (after_exact, exact_dropped) = exact_dedup(records(&p), &Fields::default()).unwrap();
    assert_eq!(exact_dropped, planted_exact);
    let (after_near, c) = near_dedup(
        after_exact.clone(),
        &Fields::default(),
        &DedupConfig::default(),
    )
    .unwrap();
    let near_dropped = after_exact.len() - after_near.len();
    assert_eq!(near_dropped, planted_near);
    assert_eq!(c.stats.near_duplicates as usize, planted_near);
    assert_eq!(
        exact_dropped + near_dropped,
        p.docs.len() - after_near.len()
    );
    // The fused pipeline (--exact) counts the same.
    let c = clusters(
        &p.docs,
        &DedupConfig {
            exact: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(c.stats.exact_duplicates as usize, planted_exact);
    assert_eq!(c.stats.near_duplicates as usize, planted_near);
    let survivors = (0..p.docs.len()).filter(|&d| c.is_root(d)).count();
    assert_eq!(survivors + planted_exact + planted_near, p.docs.len());
    // The copies that were dropped are exactly the planted ones (the original has the smaller id
    // or the copy does: whichever is smaller survives).
    for (copy, orig) in &p.exact_copies {
        let keep = copy.min(orig);
        let drop = copy.max(orig);
        let dd = p.docs.iter().position(|(i, _)| i == drop).unwrap();
        assert!(c.exact_duplicate[dd]);
        assert_eq!(root_of(&p.docs, &c, drop), root_of(&p.docs, &c, keep));
    }
}

#[test]
fn repeated_ids_are_found_by_hash_and_the_first_repeat_in_input_order_is_named() {
    use neardup::ids::IdArena;
    use neardup::ids::{id_order, DocLoc, UniqueIds};
    let names = |l: neardup::ids::DocLoc| format!("f{}:{}", l.file, l.line);
    let arena = |ids: &[&str]| {
        let mut a = IdArena::default();
        ids.iter().for_each(|i| a.push(i));
        a
    };
    let locs = |n: usize| -> Vec<DocLoc> {
        (0..n)
            .map(|i| DocLoc {
                file: 0,
                line: i as u64 + 1,
            })
            .collect()
    };
    // No repeats, many ids (some equal prefixes, the empty-ish and the long).
    let many: Vec<String> = (0..5000)
        .map(|i| format!("doc-{i}"))
        .chain(["x".repeat(300)])
        .collect();
    let refs: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    let mut u = UniqueIds::default();
    u.extend(&arena(&refs), locs(refs.len()), &names).unwrap();
    // Chunk by chunk, against the ids of the chunks before.
    u.extend(&arena(&["doc-5000"]), [DocLoc { file: 1, line: 1 }], &names)
        .unwrap();
    let in_file2 = (1..=2).map(|line| DocLoc { file: 2, line });
    match u.extend(&arena(&["new", "doc-17"]), in_file2, &names) {
        Err(neardup::Error::DuplicateId { id, first, second }) => assert_eq!(
            (id.as_str(), first.as_str(), second.as_str()),
            ("doc-17", "f0:18", "f2:2")
        ),
        other => panic!("{other:?}"),
    }
    // "b" repeats at line 4 and "a" at line 5: line 4 is met first, though "a" sorts first.
    // id_order (dedup's check) names the same repeat.
    let ids = ["b", "a", "c", "b", "a", "a"];
    let e = UniqueIds::default()
        .extend(&arena(&ids), locs(6), &names)
        .unwrap_err();
    match &e {
        neardup::Error::DuplicateId { id, first, second } => {
            assert_eq!(
                (id.as_str(), first.as_str(), second.as_str()),
                ("b", "f0:1", "f0:4")
            )
        }
        other => panic!("{other}"),
    }
    let sorted = id_order(&arena(&ids), &locs(6), &names).unwrap_err();
    assert_eq!(sorted.to_string(), e.to_string());
}
