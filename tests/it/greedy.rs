//! `--cluster greedy` against an independent oracle: signatures and banding by hand, every pair
//! tested by brute force, and the rule of SPEC §3 applied by hand in policy order. Generated
//! corpora with templated pages, chains, stars, cliques, exact copies, wordless documents,
//! ties in the keep value and groups; the in-memory API and the command line.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use neardup::engine::CpuEngine;
use neardup::stages::dedup::{cluster_docs, ClusterRule, Confirm, DedupConfig, Keep, MemoryDocs};
use neardup::{LshParams, MinHashParams, Pcg32};

use crate::common::*;

/// A generated corpus: ids (not in input order), texts, keep values (with ties), groups.
struct Corpus {
    ids: Vec<String>,
    texts: Vec<String>,
    values: Vec<Option<f64>>,
    groups: Vec<Option<String>>,
}

fn corpus(seed: u64, grouped: bool) -> Corpus {
    let mut rng = Pcg32::new(seed * 7 + 1);
    let mut pick = |n: u32| rng.next_u32() % n;
    let word = |i: u32| format!("w{i}");
    let mut texts: Vec<String> = Vec::new();
    let mutate = |t: &str, changes: u32, pick: &mut dyn FnMut(u32) -> u32| -> String {
        let mut w: Vec<String> = t.split(' ').map(String::from).collect();
        for _ in 0..changes {
            let at = pick(w.len() as u32) as usize;
            w[at] = format!("w{}", 40 + pick(200));
        }
        w.join(" ")
    };
    // Templated pages: one boilerplate, and a few words of each page's own; the pages with
    // the fewest own words are near duplicates of one another, the rest of none. Buckets of
    // dozens of members, most of them survivors.
    let template: Vec<String> = (0..24).map(|i| word(300 + i)).collect();
    for page in 0..(30 + pick(30)) {
        let own: Vec<String> = (0..2 + pick(8)).map(|w| format!("p{page}x{w}")).collect();
        texts.push(
            template
                .iter()
                .chain(&own)
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    for _family in 0..(6 + pick(5)) {
        let len = 12 + pick(10);
        let base: Vec<String> = (0..len).map(|_| word(pick(40))).collect();
        let base = base.join(" ");
        match pick(4) {
            // A chain: each a small edit of the one before.
            0 => {
                let mut t = base;
                for _ in 0..(3 + pick(5)) {
                    texts.push(t.clone());
                    t = mutate(&t, 1 + pick(2), &mut pick);
                }
            }
            // A star: edits of one centre.
            1 => {
                texts.push(base.clone());
                for _ in 0..(2 + pick(5)) {
                    texts.push(mutate(&base, 1 + pick(3), &mut pick));
                }
            }
            // A clique: one-word edits.
            2 => {
                for _ in 0..(2 + pick(4)) {
                    texts.push(mutate(&base, 1, &mut pick));
                }
            }
            // Exact copies, and one edit.
            _ => {
                for _ in 0..(2 + pick(3)) {
                    texts.push(base.clone());
                }
                texts.push(mutate(&base, 1, &mut pick));
            }
        }
    }
    texts.push(String::new());
    texts.push("   ".into());
    // Shuffled, so input order is not id order.
    for i in (1..texts.len()).rev() {
        texts.swap(i, pick(i as u32 + 1) as usize);
    }
    let n = texts.len();
    let mut ids: Vec<String> = (0..n)
        .map(|i| format!("d{:03}", (i * 37 + 11) % 1000))
        .collect();
    let mut seen = HashSet::new();
    ids.retain(|i| seen.insert(i.clone()));
    assert_eq!(ids.len(), n);
    let values = (0..n).map(|_| Some(f64::from(pick(3)))).collect();
    let groups = (0..n)
        .map(|_| grouped.then(|| ["a", "b"][pick(2) as usize].to_string()))
        .collect();
    Corpus {
        ids,
        texts,
        values,
        groups,
    }
}

/// The confirmed relation by brute force: LSH candidates by hand (some band equal), then the
/// confirmation's test, within a group.
fn confirmed_relation(c: &Corpus, cfg: &DedupConfig) -> impl Fn(usize, usize) -> bool {
    let k = cfg.params.k;
    let perms = neardup::perm_params(cfg.params.num_perm, cfg.params.seed);
    let sets: Vec<HashSet<String>> = c.texts.iter().map(|t| neardup::shingles(t, k)).collect();
    let sigs: Vec<Vec<u32>> = sets.iter().map(|s| neardup::minhash(s, &perms)).collect();
    let wordless: Vec<bool> = c
        .texts
        .iter()
        .map(|t| neardup::words(t).is_empty())
        .collect();
    let groups = c.groups.clone();
    let (bands, rows) = (cfg.lsh.bands, cfg.lsh.rows);
    let (confirm, threshold) = (cfg.confirm, cfg.threshold);
    move |a: usize, b: usize| {
        let candidates = !wordless[a]
            && !wordless[b]
            && (0..bands)
                .any(|j| sigs[a][j * rows..(j + 1) * rows] == sigs[b][j * rows..(j + 1) * rows]);
        if !candidates || groups[a] != groups[b] {
            return false;
        }
        match confirm {
            Confirm::Jaccard => neardup::jaccard(&sets[a], &sets[b]) >= threshold,
            Confirm::Estimate => neardup::estimate(&sigs[a], &sigs[b]).unwrap() >= threshold,
            Confirm::None => true,
        }
    }
}

/// The rule by hand: each document's root (an index; itself when it survives).
fn oracle(c: &Corpus, cfg: &DedupConfig) -> Vec<usize> {
    let n = c.texts.len();
    let confirmed = confirmed_relation(c, cfg);
    let value = |d: usize| c.values[d].unwrap();
    let words = |d: usize| neardup::words(&c.texts[d]).len() as f64;
    let key = |d: usize| match cfg.keep {
        Keep::SmallestId => 0.0,
        Keep::First => -(d as f64),
        Keep::Longest => words(d),
        Keep::FieldMax => value(d),
        Keep::FieldMin => -value(d),
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(c.ids[a].cmp(&c.ids[b])));
    let mut survivors: Vec<usize> = Vec::new();
    let mut root = vec![usize::MAX; n];
    for &d in &order {
        match survivors.iter().find(|&&s| confirmed(s, d)) {
            Some(&s) => root[d] = s,
            None => {
                root[d] = d;
                survivors.push(d);
            }
        }
    }
    root
}

fn config(keep: Keep, confirm: Confirm, exact: bool) -> DedupConfig {
    DedupConfig {
        params: MinHashParams::new(2, 64, 5).unwrap(),
        lsh: LshParams::new(16, 4).unwrap(),
        threshold: 0.6,
        confirm,
        exact,
        keep,
        cluster: ClusterRule::Greedy,
        ..Default::default()
    }
}

/// The corpus clustered in memory, through the library's API.
fn clustered(c: &Corpus, cfg: &DedupConfig) -> neardup::Clustering {
    let ids: Vec<&str> = c.ids.iter().map(String::as_str).collect();
    let texts: Vec<&str> = c.texts.iter().map(String::as_str).collect();
    let groups: Vec<Option<&str>> = c.groups.iter().map(|g| g.as_deref()).collect();
    let docs = MemoryDocs {
        ids: &ids,
        texts: &texts,
        keep_values: matches!(cfg.keep, Keep::FieldMax | Keep::FieldMin).then_some(&c.values[..]),
        groups: c.groups[0].is_some().then_some(&groups[..]),
    };
    let mut engine = CpuEngine::new(cfg.params, 1).unwrap();
    cluster_docs(&docs, cfg, &mut engine).unwrap()
}

fn greedy_roots(c: &Corpus, cfg: &DedupConfig) -> Vec<usize> {
    let ids = &c.ids;
    let got = clustered(c, cfg);
    for d in 0..ids.len() {
        assert_eq!(
            got.survives[d],
            got.root[d] as usize == d,
            "the root survives"
        );
    }
    got.root.iter().map(|&r| r as usize).collect()
}

#[test]
fn greedy_equals_the_rule_by_hand() {
    let mut dropped = 0;
    let mut chained = 0;
    for seed in 0..24u64 {
        let c = corpus(seed, seed % 3 == 2);
        let keep = [
            Keep::SmallestId,
            Keep::FieldMax,
            Keep::Longest,
            Keep::First,
            Keep::FieldMin,
        ][seed as usize % 5];
        let confirm = [
            Confirm::Jaccard,
            Confirm::Jaccard,
            Confirm::Estimate,
            Confirm::None,
        ][seed as usize % 4];
        let want = oracle(&c, &config(keep, confirm, false));
        for exact in [false, true] {
            let cfg = config(keep, confirm, exact);
            let got = greedy_roots(&c, &cfg);
            let name = |d: usize| c.ids[d].as_str();
            for d in 0..want.len() {
                assert_eq!(
                    name(got[d]),
                    name(want[d]),
                    "seed {seed}, {keep:?}, {confirm:?}, exact {exact}: the root of {} ({:?})",
                    name(d),
                    c.texts[d]
                );
            }
        }
        dropped += (0..want.len()).filter(|&d| want[d] != d).count();
        // Components would also drop documents whose only near duplicates are dropped.
        let comp = DedupConfig {
            cluster: ClusterRule::Components,
            ..config(keep, confirm, false)
        };
        let comp_survivors = clustered(&c, &comp).survives;
        chained += comp_survivors.iter().filter(|&&s| !s).count();
    }
    // The corpora exercise the rule: many dropped, and components drops more (chains).
    assert!(dropped > 100, "{dropped} dropped");
    assert!(
        chained > dropped,
        "components dropped {chained}, greedy {dropped}"
    );
}

/// A chain A ~ B ~ C with A !~ C: components drops B and C, greedy only B.
#[test]
fn a_chain_keeps_its_far_end() {
    let dir = tempfile::tempdir().unwrap();
    let a = "one two three four five six seven eight nine ten";
    let b = "one two three four five six seven eight xx yy";
    let c = "one two three four five six zz qq xx yy";
    let (ja, jc) = (
        neardup::jaccard(&neardup::shingles(a, 1), &neardup::shingles(b, 1)),
        neardup::jaccard(&neardup::shingles(a, 1), &neardup::shingles(c, 1)),
    );
    assert!(ja >= 0.6 && jc < 0.6, "{ja} {jc}");
    let input = dir.path().join("in.jsonl");
    write_jsonl(
        &input,
        &[
            ("a".into(), a.into()),
            ("b".into(), b.into()),
            ("c".into(), c.into()),
        ],
    );
    let run = |rule: &str| {
        let out = dir.path().join(format!("{rule}.jsonl"));
        let clusters = dir.path().join(format!("{rule}.clusters.jsonl"));
        let report = dir.path().join(format!("{rule}.report.json"));
        ok(&neardup(&[
            "dedup",
            "--report",
            report.to_str().unwrap(),
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--clusters",
            clusters.to_str().unwrap(),
            "--k",
            "1",
            "--threshold",
            "0.6",
            "--bands",
            "64",
            "--rows",
            "2",
            "--cluster",
            rule,
            "-q",
        ]));
        let kept: Vec<String> = read_jsonl(&out)
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        (kept, lines_of(&clusters))
    };
    let (kept, clusters) = run("components");
    assert_eq!(kept, ["a"]);
    assert_eq!(
        clusters,
        [r#"{"root":"a","members":["a","b","c"],"size":3}"#]
    );
    let (kept, clusters) = run("greedy");
    assert_eq!(kept, ["a", "c"]);
    assert_eq!(clusters, [r#"{"root":"a","members":["a","b"],"size":2}"#]);
}

/// `config()`'s parameters on the command line.
const PARAMS: [&str; 12] = [
    "--k",
    "2",
    "--num-perm",
    "64",
    "--seed",
    "5",
    "--bands",
    "16",
    "--rows",
    "4",
    "--threshold",
    "0.6",
];

/// The corpus as JSONL lines: `id`, `text`, the keep value `v` and, when grouped, `g`.
fn jsonl_lines(c: &Corpus) -> Vec<String> {
    (0..c.texts.len())
        .map(|d| {
            let mut v = serde_json::json!({
                "id": c.ids[d],
                "text": c.texts[d],
                "v": c.values[d],
            });
            if let Some(g) = &c.groups[d] {
                v["g"] = serde_json::json!(g);
            }
            v.to_string()
        })
        .collect()
}

/// The command line's flags for `config(keep, confirm, exact)` over `jsonl_lines`.
fn flags(keep: Keep, confirm: Confirm, exact: bool, grouped: bool) -> Vec<&'static str> {
    let mut f = vec!["--cluster", "greedy"];
    f.extend(PARAMS);
    f.extend([
        "--keep",
        match keep {
            Keep::SmallestId => "smallest-id",
            Keep::First => "first",
            Keep::Longest => "longest",
            Keep::FieldMax => "field:v:max",
            Keep::FieldMin => "field:v:min",
        },
        "--confirm",
        match confirm {
            Confirm::Jaccard => "jaccard",
            Confirm::Estimate => "estimate",
            Confirm::None => "none",
        },
    ]);
    if exact {
        f.push("--exact");
    }
    if grouped {
        f.extend(["--group-field", "g"]);
    }
    f
}

/// Out of core, in any number of shards and partitions, and stage by stage with the rounds'
/// jobs in shuffled orders, greedy writes the bytes in-memory greedy writes; the corpora need
/// several rounds.
#[test]
fn greedy_out_of_core_equals_greedy_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut most_rounds = 0;
    for seed in 0..12u64 {
        let grouped = seed % 3 == 2;
        let c = corpus(seed, grouped);
        let keep = [
            Keep::FieldMax,
            Keep::SmallestId,
            Keep::First,
            Keep::Longest,
            Keep::FieldMin,
        ][seed as usize % 5];
        let confirm = [Confirm::Jaccard, Confirm::Estimate, Confirm::None][seed as usize % 3];
        let exact = seed % 2 == 0;
        let f = flags(keep, confirm, exact, grouped);
        let lines = jsonl_lines(&c);
        let sub = dir.path().join(format!("seed-{seed}"));
        std::fs::create_dir(&sub).unwrap();
        let one = crate::sharded::shards(&sub, &lines, 1, None);
        let seven = crate::sharded::shards(&sub, &lines, 7, Some(3));
        let want = crate::sharded::dedup_hashes(&sub, "mem", &one, &f, None);
        for (inputs, parts) in [(&one, 1), (&seven, 8), (&one, 64)] {
            let work = sub.join(format!("work-{}-{parts}", inputs.len()));
            let tag = format!("wd-{}-{parts}", inputs.len());
            let got = crate::sharded::dedup_hashes(&sub, &tag, inputs, &f, Some((&work, parts)));
            assert_eq!(
                got,
                want,
                "seed {seed}, {f:?}, {} shards, {parts} partitions",
                inputs.len()
            );
            let rounds = std::fs::read_dir(work.join("greedy"))
                .unwrap()
                .filter(|e| {
                    let n = e.as_ref().unwrap().file_name();
                    let n = n.to_string_lossy();
                    n.len() == "00000.json".len() && n.ends_with(".json")
                })
                .count();
            most_rounds = most_rounds.max(rounds);
        }
        let staged = crate::sharded::run_stages(&sub.join("stages"), &seven, 5, &f, seed);
        assert_eq!(staged, want, "seed {seed}, {f:?}, stage by stage");
    }
    assert!(most_rounds >= 3, "{most_rounds} rounds at most");
}

/// The rounds' files (each partition's buckets and answers, each round's verdicts) are the
/// same bytes with one thread and with several.
#[test]
fn the_rounds_files_do_not_depend_on_threads() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..4u64)
        .flat_map(|s| jsonl_lines(&corpus(s, false)))
        .collect();
    // Ids unique over the corpora put together.
    let lines: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"] = serde_json::json!(format!("{}-{i}", v["id"].as_str().unwrap()));
            v.to_string()
        })
        .collect();
    let inputs = crate::sharded::shards(dir.path(), &lines, 2, None);
    let f = flags(Keep::Longest, Confirm::Jaccard, true, false);
    let files = |threads: &str| {
        let work = dir.path().join(format!("work-{threads}"));
        let w = work.to_str().unwrap();
        let mut init = vec!["stage", "init", w];
        init.extend(inputs.iter().map(|p| p.to_str().unwrap()));
        init.extend(["--partitions", "3"]);
        init.extend(f.iter().copied());
        ok(&neardup(&init));
        for s in ["0", "1"] {
            ok(&neardup(&[
                "stage",
                "sign",
                w,
                "--shard",
                s,
                "--threads",
                threads,
            ]));
        }
        ok(&neardup(&["stage", "rank", w, "--threads", threads]));
        for s in ["0", "1"] {
            ok(&neardup(&[
                "stage",
                "bands",
                w,
                "--shard",
                s,
                "--threads",
                threads,
            ]));
        }
        ok(&neardup(&[
            "stage",
            "confirm",
            w,
            "--partition",
            "0",
            "1",
            "2",
            "--threads",
            threads,
        ]));
        ok(&neardup(&["stage", "greedy", w, "--threads", threads]));
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(work.join("greedy"))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".json"))
            .map(|e| {
                let bytes = std::fs::read(e.path()).unwrap();
                (e.file_name().to_string_lossy().into_owned(), bytes)
            })
            .collect();
        out.sort();
        out
    };
    let one = files("1");
    assert!(one.iter().any(|(n, _)| n.ends_with(".buckets")), "{one:?}");
    assert_eq!(files("2"), one);
}

#[test]
fn the_default_is_components() {
    assert_eq!(DedupConfig::default().cluster, ClusterRule::Components);
}

/// The result depends on the documents and the flags only: input order and threads change
/// no byte of the clusters and pairs files, nor the set of records kept.
#[test]
fn greedy_ignores_input_order_and_threads() {
    let dir = tempfile::tempdir().unwrap();
    let lines = lines_of(&fixture("example.jsonl"));
    let mut shuffled = lines.clone();
    let mut rng = Pcg32::new(3);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.next_u32() as usize % (i + 1));
    }
    let moved = dir.path().join("shuffled.jsonl");
    std::fs::write(&moved, shuffled.join("\n") + "\n").unwrap();
    let run = |input: &std::path::Path, threads: &str, name: &str| {
        let p = |s: &str| dir.path().join(format!("{name}.{s}"));
        ok(&neardup(&[
            "dedup",
            input.to_str().unwrap(),
            "-o",
            p("out.jsonl").to_str().unwrap(),
            "--clusters",
            p("clusters.jsonl").to_str().unwrap(),
            "--pairs",
            p("pairs.jsonl").to_str().unwrap(),
            "--cluster",
            "greedy",
            "--keep",
            "longest",
            "--threads",
            threads,
            "-q",
        ]));
        let mut kept = lines_of(&p("out.jsonl"));
        kept.sort();
        (
            kept,
            lines_of(&p("clusters.jsonl")),
            lines_of(&p("pairs.jsonl")),
        )
    };
    let base = run(&fixture("example.jsonl"), "1", "base");
    assert!(!base.1.is_empty() && !base.2.is_empty());
    assert_eq!(run(&fixture("example.jsonl"), "2", "two"), base);
    assert_eq!(run(&moved, "2", "moved"), base);
}

/// The report's chaining figures: under `components`, the dropped documents that their
/// cluster's survivor is not a confirmed near duplicate of, as the brute-force relation says;
/// none under `greedy`.
#[test]
fn the_report_counts_what_chaining_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut chained = 0;
    for seed in 0..6u64 {
        let c = corpus(100 + seed, false);
        let cfg = config(Keep::SmallestId, Confirm::Jaccard, false);
        let confirmed = confirmed_relation(&c, &cfg);
        let input = dir.path().join(format!("{seed}.jsonl"));
        let docs: Vec<(String, String)> =
            c.ids.iter().cloned().zip(c.texts.iter().cloned()).collect();
        write_jsonl(&input, &docs);
        let run = |rule: &str, parts: usize| {
            let tagged = dir.path().join(format!("{seed}.{rule}.{parts}.jsonl"));
            let report = dir
                .path()
                .join(format!("{seed}.{rule}.{parts}.report.json"));
            let work = dir.path().join(format!("{seed}.{rule}.{parts}.work"));
            let parts = parts.to_string();
            let mut out_of_core = vec![
                "--work-dir",
                work.to_str().unwrap(),
                "--partitions",
                parts.as_str(),
            ];
            if parts == "0" {
                out_of_core.clear();
            }
            let mut args = vec![
                "dedup",
                input.to_str().unwrap(),
                "-o",
                tagged.to_str().unwrap(),
                "--tag-only",
                "--report",
                report.to_str().unwrap(),
                "--cluster",
                rule,
                "-q",
            ];
            args.extend(PARAMS);
            args.extend(out_of_core);
            ok(&neardup(&args));
            let tags: Vec<String> = read_jsonl(&tagged)
                .iter()
                .map(|r| r["meta"]["minhash_cluster"].as_str().unwrap().to_string())
                .collect();
            let r: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
            (tags, r["chaining"].clone())
        };
        let index = |id: &str| c.ids.iter().position(|i| i == id).unwrap();
        // Out of core, the report's chaining is the same.
        for rule in ["components", "greedy"] {
            assert_eq!(run(rule, 3), run(rule, 0), "seed {seed}, {rule}");
        }
        let (tags, chaining) = run("components", 0);
        let want = (0..c.ids.len())
            .filter(|&d| tags[d] != c.ids[d] && !confirmed(d, index(&tags[d])))
            .count() as u64;
        assert_eq!(
            chaining["dropped_without_kept_duplicate"], want,
            "seed {seed}"
        );
        chained += want;
        let mut sizes = std::collections::HashMap::<&str, u64>::new();
        for t in &tags {
            *sizes.entry(t.as_str()).or_default() += 1;
        }
        assert_eq!(chaining["largest_cluster"], *sizes.values().max().unwrap());
        let (tags, chaining) = run("greedy", 0);
        assert_eq!(chaining["dropped_without_kept_duplicate"], 0, "seed {seed}");
        for (d, t) in tags.iter().enumerate() {
            assert!(
                t == &c.ids[d] || confirmed(d, index(t)),
                "seed {seed}: {} joined {t}",
                c.ids[d]
            );
        }
        // A greedy cluster is a star around its survivor.
        assert!(chaining["largest_cluster_diameter"].as_u64().unwrap() <= 2);
    }
    assert!(chained > 0, "the corpora have chains");
}

/// The report's pair counts are the rule's, bucket by bucket: the same in memory and out of
/// core, whatever `--partitions`, with exact copies, any keep order and groups.
#[test]
fn greedy_pair_counts_agree_in_memory_and_for_any_partitions() {
    let dir = tempfile::tempdir().unwrap();
    for seed in [1u64, 2, 5, 8] {
        let grouped = seed % 3 == 2;
        let c = corpus(seed, grouped);
        let keep = [Keep::Longest, Keep::FieldMax, Keep::SmallestId][seed as usize % 3];
        let f = flags(keep, Confirm::Jaccard, seed % 2 == 0, grouped);
        let input = dir.path().join(format!("in-{seed}.jsonl"));
        std::fs::write(&input, jsonl_lines(&c).join("\n") + "\n").unwrap();
        let counts = |work: Option<usize>| -> serde_json::Value {
            let tag = format!("{seed}-{work:?}");
            let rep = dir.path().join(format!("{tag}.json"));
            let out = dir.path().join(format!("{tag}.jsonl"));
            let mut args: Vec<String> = vec!["dedup".into(), input.display().to_string()];
            args.extend(["-o".into(), out.display().to_string(), "--report".into()]);
            args.push(rep.display().to_string());
            args.extend(f.iter().map(|s| s.to_string()));
            args.extend(["--engine".into(), "cpu".into()]);
            if let Some(p) = work {
                let w = dir.path().join(format!("w-{tag}"));
                args.extend(["--work-dir".into(), w.display().to_string()]);
                args.extend(["--partitions".into(), p.to_string()]);
            }
            ok(&neardup(
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
            ));
            let r: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
            let c = &r["counts"];
            serde_json::json!([
                c["pairs_checked"],
                c["pairs_rejected"],
                c["pairs_other_group"],
                c["pairs_confirmed"],
                c["near_duplicates"],
            ])
        };
        let want = counts(None);
        assert!(
            want[0].as_u64().unwrap() > want[3].as_u64().unwrap(),
            "{want}"
        );
        if grouped {
            assert!(want[2].as_u64().unwrap() > 0, "{want}");
        }
        for p in [1, 4, 16] {
            assert_eq!(counts(Some(p)), want, "seed {seed}, {f:?}, {p} partitions");
        }
    }
}

/// Under greedy the documents of an `--against` index are the first kept: a new document with
/// a match in the index is dropped for it and is no other new document's survivor, so a
/// document whose only near duplicate was dropped that way is kept, in memory and out of core.
#[test]
fn greedy_against_an_index_keeps_what_only_a_dropped_document_matched() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let mut rng = Pcg32::new(6);
    let mut word = || format!("w{}", rng.next_u32() % 5000);
    let x: Vec<String> = (0..200).map(|_| word()).collect();
    let mut a = x.clone();
    for w in &mut a[190..] {
        *w = word();
    }
    let mut b = a.clone();
    for w in &mut b[..10] {
        *w = word();
    }
    let line = |id: &str, t: &[String]| {
        serde_json::json!({ "id": id, "text": t.join(" ") }).to_string() + "\n"
    };
    std::fs::write(p("old.jsonl"), line("x", &x)).unwrap();
    std::fs::write(p("new.jsonl"), line("a", &a) + &line("b", &b)).unwrap();
    ok(&neardup(&[
        "index",
        "build",
        p("old.jsonl").to_str().unwrap(),
        "-o",
        p("ix").to_str().unwrap(),
    ]));
    for work in [None, Some(2)] {
        let (out, rep) = (
            p(&format!("o-{work:?}.jsonl")),
            p(&format!("r-{work:?}.json")),
        );
        let mut args = vec![
            "dedup".to_string(),
            p("new.jsonl").display().to_string(),
            "-o".into(),
            out.display().to_string(),
            "--report".into(),
            rep.display().to_string(),
            "--against".into(),
            p("ix").display().to_string(),
            "--cluster".into(),
            "greedy".into(),
            "--engine".into(),
            "cpu".into(),
        ];
        if let Some(n) = work {
            args.extend([
                "--work-dir".into(),
                p(&format!("w{n}")).display().to_string(),
            ]);
            args.extend(["--partitions".into(), n.to_string()]);
        }
        ok(&neardup(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        let kept: Vec<String> = read_jsonl(&out)
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(kept, ["b"], "{work:?}");
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
        assert_eq!(r["against"]["matched"], 1, "{work:?}: {r}");
        assert_eq!(r["counts"]["near_duplicates"], 0, "{work:?}");
    }
}

/// The block sizes of the tests in blocks (`None`: whole), and their names.
const BLOCK_BYTES: [Option<u64>; 5] = [None, Some(1), Some(3_000), Some(150_000), Some(u64::MAX)];
const BLOCK_NAMES: [&str; 4] = ["1", "3,000", "150,000", "all"];

/// The corpora of the tests in blocks, each in 3 shards under its own folder of `dir`, with
/// its flags: six generated ones covering every keep order, confirmation, exact copies and
/// groups, and a bucket of 700 templated pages (past the prefix index's size). Returns each
/// one's folder, shards and flags.
fn block_corpora(dir: &Path) -> Vec<(PathBuf, Vec<PathBuf>, Vec<&'static str>)> {
    let templated: Vec<String> = {
        let mut rng = Pcg32::new(17);
        let template: Vec<String> = (0..24).map(|i| format!("t{i}")).collect();
        (0..700)
            .map(|page| {
                let own = (0..1 + rng.next_u32() % 6).map(|w| format!("p{page}x{w}"));
                let text: Vec<String> = template.iter().cloned().chain(own).collect();
                serde_json::json!({ "id": format!("t{page:04}"), "text": text.join(" "), "v": 1 })
                    .to_string()
            })
            .collect()
    };
    let mut all: Vec<(Vec<String>, Vec<&'static str>)> = (0..6u64)
        .map(|seed| {
            let grouped = seed % 3 == 2;
            let keep =
                [Keep::Longest, Keep::FieldMax, Keep::SmallestId, Keep::First][seed as usize % 4];
            let confirm = [Confirm::Jaccard, Confirm::Estimate, Confirm::None][seed as usize % 3];
            let c = corpus(seed, grouped);
            (
                jsonl_lines(&c),
                flags(keep, confirm, seed % 2 == 0, grouped),
            )
        })
        .collect();
    all.push((
        templated,
        flags(Keep::Longest, Confirm::Jaccard, false, false),
    ));
    all.into_iter()
        .enumerate()
        .map(|(seed, (lines, f))| {
            let sub = dir.join(format!("seed-{seed}"));
            std::fs::create_dir(&sub).unwrap();
            let inputs = crate::sharded::shards(&sub, &lines, 3, None);
            (sub, inputs, f)
        })
        .collect()
}

/// `neardup stage ARGS...`, which must succeed.
fn stage(args: &[&str]) {
    let mut all = vec!["stage"];
    all.extend(args);
    ok(&neardup(&all));
}

/// A new work directory `w` over `inputs` (3 shards) in 2 partitions, signed, ranked and
/// banded.
fn staged_to_bands(w: &Path, inputs: &[PathBuf], flags: &[&str]) {
    let ws = w.to_str().unwrap();
    let mut init = vec!["init", ws];
    init.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    init.extend(["--partitions", "2"]);
    init.extend(flags.iter().copied());
    stage(&init);
    for s in ["0", "1", "2"] {
        stage(&["sign", ws, "--shard", s, "--engine", "cpu"]);
    }
    stage(&["rank", ws]);
    for s in ["0", "1", "2"] {
        stage(&["bands", ws, "--shard", s]);
    }
}

/// The pairs and clusters files of work directory `w` (every round run), by their hashes.
fn greedy_outputs(w: &Path) -> (String, String) {
    let pairs = w.with_extension("pairs.jsonl");
    let cl = w.with_extension("clusters.jsonl");
    let (p, c) = (pairs.to_str().unwrap(), cl.to_str().unwrap());
    stage(&[
        "cluster",
        w.to_str().unwrap(),
        "--pairs",
        p,
        "--clusters",
        c,
    ]);
    (sha256(&pairs), sha256(&cl))
}

/// A partition past a group, its round 0 answered over its documents in blocks (gathered once,
/// one or two blocks at a time) writes the members, buckets and answers of walking it whole:
/// every later round, and the output, clusters and pairs, are the same bytes. Blocks of one
/// document, of a few, and one block.
#[test]
fn greedy_round_zero_in_blocks_equals_round_zero_whole() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{confirm, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    for (seed, (sub, inputs, f)) in block_corpora(dir.path()).into_iter().enumerate() {
        let mut got = Vec::new();
        for block_bytes in BLOCK_BYTES {
            let w = sub.join(format!("work-{block_bytes:?}"));
            let ws = w.to_str().unwrap();
            staged_to_bands(&w, &inputs, &f);
            match block_bytes {
                None => stage(&["confirm", ws, "--partition", "0", "1"]),
                Some(bytes) => {
                    let work = WorkDir::open(&w).unwrap();
                    let hidden = ProgressFactory::hidden();
                    // One document a group: every partition of two or more is in blocks.
                    let done = confirm::confirm_within(&work, &[0, 1], 1, bytes, &hidden);
                    assert!(done.unwrap().iter().all(|d| d.is_some()));
                }
            }
            let undecided = |p: usize| {
                let s = std::fs::read_to_string(w.join(format!("greedy/00000-{p:04}.json")));
                let s: serde_json::Value = serde_json::from_str(&s.unwrap()).unwrap();
                (s["undecided"].clone(), s["answers"].clone())
            };
            let round0 = [undecided(0), undecided(1)];
            // Round 0's files, before settling removes its answers.
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(w.join("greedy"))
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| !e.file_name().to_string_lossy().ends_with(".json"))
                .map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, std::fs::read(e.path()).unwrap())
                })
                .collect();
            files.sort();
            assert!(
                files
                    .iter()
                    .any(|(n, b)| n.ends_with(".events") && !b.is_empty()),
                "seed {seed}: {:?}",
                files.iter().map(|f| &f.0).collect::<Vec<_>>()
            );
            stage(&["greedy", ws]);
            let (pairs, clusters) = greedy_outputs(&w);
            got.push((files, round0, pairs, clusters));
        }
        for (g, bytes) in got[1..].iter().zip(BLOCK_NAMES) {
            assert!(
                g.0 == got[0].0,
                "seed {seed}, blocks of {bytes} bytes: round 0's files"
            );
            assert_eq!(g.1, got[0].1, "seed {seed}, blocks of {bytes} bytes");
            assert_eq!(g.2, got[0].2, "seed {seed}, blocks of {bytes} bytes: pairs");
            assert_eq!(
                g.3, got[0].3,
                "seed {seed}, blocks of {bytes} bytes: clusters"
            );
        }
    }
}

/// A later round whose walks need more documents than a group holds, walked over them in
/// blocks (gathered once, one or two blocks at a time), writes the answers of walking the
/// partition whole: each round's answers and counts of units, and the pairs and clusters, are
/// the same bytes. Blocks of one document, of a few, and one block, job by job and every round
/// in one process; the corpora need several rounds, and their walks resume after dropped
/// neighbours.
#[test]
fn greedy_later_rounds_in_blocks_equal_rounds_whole() {
    use neardup::progress::ProgressFactory;
    use neardup::stages::sharded::{greedy, WorkDir};
    let dir = tempfile::tempdir().unwrap();
    let hidden = ProgressFactory::hidden();
    // Blocked jobs that gathered documents to walk.
    let mut walked = 0;
    for (seed, (sub, inputs, f)) in block_corpora(dir.path()).into_iter().enumerate() {
        let mut got = Vec::new();
        for block_bytes in BLOCK_BYTES {
            let w = sub.join(format!("work-{block_bytes:?}"));
            staged_to_bands(&w, &inputs, &f);
            stage(&["confirm", w.to_str().unwrap(), "--partition", "0", "1"]);
            let work = WorkDir::open(&w).unwrap();
            // One document a group: every walk of two or more is in blocks.
            let (max_docs, bytes) = block_bytes.map_or((usize::MAX, u64::MAX), |b| (1, b));
            let mut rounds = Vec::new();
            let mut left = greedy::settle(&work, 0, &hidden)
                .unwrap()
                .unwrap()
                .undecided;
            let mut r = 1;
            while left > 0 {
                for p in 0..2 {
                    let s = greedy::jobs::round_within(&work, r, p, max_docs, bytes, &hidden);
                    let s = s.unwrap().unwrap();
                    if block_bytes.is_some() && s.gathered > 0 {
                        walked += 1;
                    }
                    // The answers, before settling removes them.
                    let events = std::fs::read(w.join(format!("greedy/{r:05}-{p:04}.events")));
                    rounds.push((r, p, s.undecided, s.answers, events.unwrap()));
                }
                left = greedy::settle(&work, r, &hidden)
                    .unwrap()
                    .unwrap()
                    .undecided;
                r += 1;
            }
            got.push((rounds, greedy_outputs(&w)));
        }
        // Every round in one process: the jobs in blocks run after the others.
        let w = sub.join("work-rounds");
        staged_to_bands(&w, &inputs, &f);
        stage(&["confirm", w.to_str().unwrap(), "--partition", "0", "1"]);
        let work = WorkDir::open(&w).unwrap();
        greedy::jobs::rounds_within(&work, 1, 3_000, &hidden).unwrap();
        assert_eq!(greedy_outputs(&w), got[0].1, "seed {seed}, in one process");
        assert!(
            got[0].0.len() >= 4,
            "seed {seed}: {} rounds",
            got[0].0.len() / 2
        );
        for (g, bytes) in got[1..].iter().zip(BLOCK_NAMES) {
            assert_eq!(
                g.0.len(),
                got[0].0.len(),
                "seed {seed}, blocks of {bytes} bytes"
            );
            for (a, b) in g.0.iter().zip(&got[0].0) {
                assert!(
                    a == b,
                    "seed {seed}, blocks of {bytes} bytes: round {}, partition {}",
                    b.0,
                    b.1
                );
            }
            assert_eq!(
                g.1, got[0].1,
                "seed {seed}, blocks of {bytes} bytes: outputs"
            );
        }
    }
    assert!(walked >= 20, "{walked} jobs walked in blocks");
}
