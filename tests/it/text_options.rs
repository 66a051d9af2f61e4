//! The contract's text options (`--shingle word|char`, `--normalize none|nfc|nfkc`, SPEC
//! §1.4): written into every file that carries parameters and refused on mismatch by every
//! reader; the defaults leave those files as they were; and character shingles find planted
//! near duplicates in Chinese and Japanese at the rate the S-curve predicts, where word shingles
//! miss them.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use neardup::text::{shingles_with, Normalize, ShingleUnit, TextRule};
use neardup::{jaccard, Pcg32};

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn run_ok(args: &[&str]) -> std::process::Output {
    let o = neardup(args);
    ok(&o);
    o
}

fn refused(args: &[&str], why: &str) {
    let o = neardup(args);
    assert!(!o.status.success(), "{args:?} must fail");
    assert!(stderr(&o).contains(why), "{args:?}: {}", stderr(&o));
}

/// Signature files, the index and the work directory carry the text options when they are not
/// the default (and only then, so default files are what they always were); `compare`, `dedup
/// --against` and the stages refuse a mismatch, naming it.
#[test]
fn every_file_carries_the_options_and_every_reader_refuses_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let input = fixture("example.jsonl");
    let char_nfkc = ["--shingle", "char", "--normalize", "nfkc"];
    for fmt in ["npy", "tsv", "parquet"] {
        let (plain, opts) = (p(&format!("w.{fmt}")), p(&format!("c.{fmt}")));
        run_ok(&["signatures", s(&input), "-o", s(&plain), "--format", fmt]);
        let mut args = vec!["signatures", s(&input), "-o", s(&opts), "--format", fmt];
        args.extend_from_slice(&char_nfkc);
        run_ok(&args);
        refused(
            &["compare", s(&plain), s(&opts)],
            "shingle=char normalize=nfkc",
        );
        let mut args = vec!["compare", s(&opts), s(&opts)];
        args.extend_from_slice(&char_nfkc);
        run_ok(&args);
        refused(
            &["compare", s(&opts), s(&opts), "--shingle", "word"],
            "not comparable",
        );
    }
    // The default tsv header and npy metadata are the contract's as they always were.
    let header = lines_of(&p("w.tsv")).remove(0);
    assert_eq!(
        header,
        "#neardup-signatures contract=neardup-minhash-v1 k=5 num_perm=128 seed=0"
    );
    let meta = std::fs::read_to_string(p("w.npy.meta.json")).unwrap();
    assert!(
        !meta.contains("shingle") && !meta.contains("normalize"),
        "{meta}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p("c.npy.meta.json")).unwrap()).unwrap();
    assert_eq!(
        (meta["shingle"].as_str(), meta["normalize"].as_str()),
        (Some("char"), Some("nfkc"))
    );

    // The index.
    let ix = p("ix");
    let mut args = vec!["index", "build", s(&input), "-o", s(&ix)];
    args.extend_from_slice(&char_nfkc);
    run_ok(&args);
    let m = std::fs::read_to_string(p("ix/index.json")).unwrap();
    assert!(
        m.contains("\"shingle\": \"char\"") && m.contains("\"normalize\": \"nfkc\""),
        "{m}"
    );
    let out = p("out.jsonl");
    refused(
        &["dedup", s(&input), "-o", s(&out), "--against", s(&p("ix"))],
        "shingle char (this run: word), normalize nfkc (this run: none)",
    );
    let mut args = vec!["dedup", s(&input), "-o", s(&out), "--against", s(&ix)];
    args.extend_from_slice(&char_nfkc);
    run_ok(&args);
    run_ok(&["index", "build", s(&input), "-o", s(&p("ix-plain"))]);
    let m = std::fs::read_to_string(p("ix-plain/index.json")).unwrap();
    assert!(!m.contains("shingle") && !m.contains("normalize"), "{m}");

    // The work directory.
    let w = p("w");
    let mut args = vec!["stage", "init", s(&w), s(&input)];
    args.extend_from_slice(&char_nfkc);
    run_ok(&args);
    refused(
        &["stage", "init", s(&p("w")), s(&input)],
        "config.params.shingle: \"char\" there",
    );
    run_ok(&["stage", "init", s(&p("w-plain")), s(&input)]);
    let m = std::fs::read_to_string(p("w-plain/manifest.json")).unwrap();
    assert!(!m.contains("shingle") && !m.contains("normalize"), "{m}");
}

/// The same document in NFC and NFD, and in ASCII and full-width Latin, share no word shingle
/// as given; NFC joins the first pair and NFKC both, through the real binary, out of core too.
#[test]
fn normal_forms_join_what_encodings_split() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let french = "Le célèbre théâtre de la côte a été rénové après des années d'oubli, et la \
                  première représentation a réuni élèves, élus et habitants émus";
    let nfd: String = unicode_nfd(french);
    assert_ne!(nfd, french);
    let latin = "the quick brown fox jumps over the lazy dog near the old river bank";
    let wide: String = latin
        .chars()
        .map(|c| match c {
            'a'..='z' => char::from_u32(c as u32 - 'a' as u32 + 0xff41).unwrap(),
            c => c,
        })
        .collect();
    let docs: Vec<(String, String)> = [
        ("fr-nfc", french.to_string()),
        ("fr-nfd", nfd),
        ("en-ascii", latin.to_string()),
        ("en-wide", wide),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.clone()))
    .collect();
    write_jsonl(&p("in.jsonl"), &docs);
    let tags = |extra: &[&str], work: bool| -> Vec<String> {
        let out = p("out.jsonl");
        let input = p("in.jsonl");
        let mut args = vec!["dedup", s(&input), "-o", s(&out), "--tag-only"];
        args.extend_from_slice(extra);
        let w = p(&format!("work-{}", extra.join("-")));
        if work {
            args.extend_from_slice(&["--work-dir", s(&w), "--partitions", "2"]);
        }
        run_ok(&args);
        read_jsonl(&out)
            .iter()
            .map(|r| r["meta"]["minhash_cluster"].as_str().unwrap().to_string())
            .collect()
    };
    for work in [false, true] {
        assert_eq!(tags(&[], work), ["fr-nfc", "fr-nfd", "en-ascii", "en-wide"]);
        assert_eq!(
            tags(&["--normalize", "nfc"], work),
            ["fr-nfc", "fr-nfc", "en-ascii", "en-wide"]
        );
        assert_eq!(
            tags(&["--normalize", "nfkc"], work),
            ["fr-nfc", "fr-nfc", "en-ascii", "en-ascii"]
        );
    }
}

/// NFD by the composition table the tests can see without a Unicode crate: the accented
/// letters of the French sample, decomposed.
fn unicode_nfd(s: &str) -> String {
    let table: BTreeMap<char, &str> = [
        ('é', "e\u{301}"),
        ('è', "e\u{300}"),
        ('â', "a\u{302}"),
        ('ô', "o\u{302}"),
        ('ê', "e\u{302}"),
    ]
    .into_iter()
    .collect();
    s.chars()
        .map(|c| table.get(&c).map_or(c.to_string(), |d| d.to_string()))
        .collect()
}

/// A seeded text of `n` characters drawn from `pool`, with a clause mark every 8 to 20
/// characters, as Chinese and Japanese prose has.
fn cjk_text(rng: &mut Pcg32, pool: &[char], n: usize) -> String {
    let mut t = String::new();
    let mut next_mark = 8 + rng.below(13) as usize;
    for i in 0..n {
        if i == next_mark {
            t.push(if rng.below(3) == 0 { '。' } else { '，' });
            next_mark = i + 8 + rng.below(13) as usize;
        }
        t.push(pool[rng.below(pool.len() as u32) as usize]);
    }
    t
}

/// `text` with `edits` characters (not clause marks) replaced from `pool`.
fn edited(rng: &mut Pcg32, text: &str, pool: &[char], edits: usize) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..edits {
        loop {
            let i = rng.below(chars.len() as u32) as usize;
            if chars[i] != '。' && chars[i] != '，' {
                chars[i] = pool[rng.below(pool.len() as u32) as usize];
                break;
            }
        }
    }
    chars.into_iter().collect()
}

/// Planted near-duplicate pairs in Chinese and Japanese, of true Jaccard from about 0.6 to 0.97:
/// character 5-grams make each pair an LSH candidate at the rate the S-curve predicts for its
/// Jaccard, and word shingles, which see each clause as one word, miss most of them.
#[test]
fn character_shingles_find_cjk_near_duplicates_at_the_s_curve_rate() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let hanzi: Vec<char> = (0x4e00..0x4e00 + 2500).filter_map(char::from_u32).collect();
    let mut kana_kanji: Vec<char> = (0x3041..0x3097).filter_map(char::from_u32).collect();
    kana_kanji.extend((0x30a1..0x30fb).filter_map(char::from_u32));
    kana_kanji.extend(hanzi.iter().take(800));
    let lsh = neardup::LshParams::new(16, 8).unwrap();
    let char5 = TextRule {
        shingle: ShingleUnit::Char,
        normalize: Normalize::None,
    };
    for (script, pool) in [("chinese", &hanzi), ("japanese", &kana_kanji)] {
        let mut rng = Pcg32::new(7);
        let mut docs = Vec::new();
        let mut pairs = Vec::new();
        let (mut expected, mut var) = (0.0, 0.0f64);
        let (mut low_j, mut high_j) = (1.0f64, 0.0f64);
        for i in 0..150 {
            let a = cjk_text(&mut rng, pool, 300);
            // 1 to 12 edits of 300 characters: true Jaccard of the 5-grams from about 0.97
            // down to about 0.6, across the S-curve's slope.
            let b = edited(&mut rng, &a, pool, 1 + i % 12);
            let j = jaccard(&shingles_with(&a, 5, char5), &shingles_with(&b, 5, char5));
            let pj = lsh.probability(j);
            expected += pj;
            var += pj * (1.0 - pj);
            low_j = low_j.min(j);
            high_j = high_j.max(j);
            let (ia, ib) = (format!("{script}-{i:03}-a"), format!("{script}-{i:03}-b"));
            pairs.push((ia.clone(), ib.clone()));
            docs.push((ia, a));
            docs.push((ib, b));
        }
        // Unrelated documents beside them.
        for i in 0..150 {
            docs.push((
                format!("{script}-other-{i:03}"),
                cjk_text(&mut rng, pool, 300),
            ));
        }
        let input = p(&format!("{script}.jsonl"));
        write_jsonl(&input, &docs);
        let found = |extra: &[&str]| -> usize {
            let out = p("out.jsonl");
            let mut args = vec!["dedup", s(&input), "-o", s(&out), "--tag-only"];
            args.extend_from_slice(extra);
            run_ok(&args);
            let tag: BTreeMap<String, String> = read_jsonl(&out)
                .iter()
                .map(|r| {
                    let id = r["id"].as_str().unwrap().to_string();
                    (
                        id,
                        r["meta"]["minhash_cluster"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            let others: HashSet<&String> = tag
                .iter()
                .filter(|(id, t)| id.contains("other") && id != t)
                .map(|(id, _)| id)
                .collect();
            assert!(
                others.is_empty(),
                "{script}: unrelated documents clustered: {others:?}"
            );
            pairs.iter().filter(|(a, b)| tag[a] == tag[b]).count()
        };
        assert!(
            low_j < 0.7,
            "{script}: the pairs reach down the slope ({low_j})"
        );
        // Every LSH candidate is a duplicate under `--confirm none`: what is found is what the
        // banding proposes.
        let by_chars = found(&["--shingle", "char", "--k", "5", "--confirm", "none"]);
        let by_words = found(&["--confirm", "none"]);
        eprintln!(
            "{script}: {} planted pairs, Jaccard {low_j:.2} to {high_j:.2}; character 5-grams found \
             {by_chars} (the S-curve predicts {expected:.1}), word 5-grams {by_words}",
            pairs.len()
        );
        // Each pair is found with probability p(J), independently: four standard deviations
        // either side.
        let tol = 4.0 * var.sqrt() + 1.0;
        assert!(
            (by_chars as f64 - expected).abs() <= tol,
            "{script}: {by_chars} of {} found, {expected:.1} expected (± {tol:.1})",
            pairs.len()
        );
        assert!(by_words * 3 < by_chars, "{script}: words found {by_words}");
    }
}
