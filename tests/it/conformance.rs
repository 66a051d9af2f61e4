//! One conformance suite, run against every engine: the CPU engine (1 and 3 threads), the GPU
//! stages ported to the CPU (with tiny sub-batches, so documents are fragmented), and the GPU
//! engine (default and tiny sub-batches, both kernels, emulated and native 64-bit arithmetic).
//! Every signature is compared with `assert_eq!` to the naive oracle (`minhash` over the SPEC's
//! shingle strings) and, where the SPEC gives them, to its vectors.
//!
//! GPU tests need an adapter. With `NEARDUP_REQUIRE_GPU=1` (CI sets it, with Mesa's software
//! Vulkan driver installed) a missing adapter fails the test; without it the test says loudly on
//! stderr that it was skipped.

use std::collections::HashMap;
use std::io::Write;

use neardup::batch::PackedBatch;
use neardup::engine::gpu::ports::PortsEngine;
use neardup::engine::gpu::{GpuEngine, GpuOptions, Kernels};
use neardup::engine::{CpuEngine, Engine};
use neardup::hash::Pcg32;
use neardup::sign::docs::{split_parts, SPLIT_DOC_SHINGLES, SPLIT_PART_SHINGLES};
use neardup::text::{shingles_with, Normalize, ShingleUnit, TextRule};
use neardup::{fnv1a64, minhash, perm_params, shingles, MinHashParams};

struct Case {
    name: String,
    params: MinHashParams,
    texts: Vec<String>,
    /// SPEC vectors, where there are some: the signature of `texts[0]`.
    expect: Option<Vec<u32>>,
}

fn p(k: usize, num_perm: usize, seed: u64) -> MinHashParams {
    MinHashParams::new(k, num_perm, seed).unwrap()
}

/// Every combination of the text options (SPEC §1.4) but the default.
fn text_options() -> Vec<TextRule> {
    let mut v = Vec::new();
    for shingle in [ShingleUnit::Word, ShingleUnit::Char] {
        for normalize in [Normalize::None, Normalize::Nfc, Normalize::Nfkc] {
            let r = TextRule { shingle, normalize };
            if !r.is_default() {
                v.push(r);
            }
        }
    }
    v
}

fn rule_name(r: TextRule) -> String {
    format!("{}/{}", r.shingle.name(), r.normalize.name())
}

fn n_words(n: usize, salt: usize) -> String {
    (0..n)
        .map(|i| format!("w{}x{}", i % 97, (i * 31 + salt) % 1013))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seed of the randomized cases: `NEARDUP_TEST_SEED`, else fresh each run (printed).
fn random_seed() -> u64 {
    let seed = std::env::var("NEARDUP_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let _ = writeln!(
        std::io::stderr(),
        "conformance: randomized cases use NEARDUP_TEST_SEED={seed}"
    );
    seed
}

fn random_text(rng: &mut Pcg32) -> String {
    const ALPHABET: &[&str] = &[
        "a", "b", "c", "the", "cat", " ", " ", " ", ",", ".", "É", "é", "ß", "Σ", "ς", "İ",
        "\u{301}", "日本", "_", "1", "٣", "🙂", "𝒜", "\t", "\n", "—", "ﬁ", "Ǆ",
    ];
    let n = rng.below(200) as usize;
    (0..n)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u32) as usize])
        .collect()
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    // The contract's signature vectors (testdata/contract/vectors.json), on every engine.
    for (name, params, text, want) in crate::spec_vectors::signature_cases() {
        v.push(Case {
            name,
            params,
            texts: vec![text],
            expect: Some(want),
        });
    }
    v.push(Case {
        name: "spec hand example, 128 permutations, and its pair".into(),
        params: p(3, 128, 0),
        texts: vec![
            "the cat sat on the mat today".into(),
            "the cat sat on the mat again".into(),
        ],
        expect: None,
    });
    // Fixtures.
    for f in ["corpus.jsonl", "example.jsonl", "decontam_probes.jsonl"] {
        let texts: Vec<String> = std::fs::read_to_string(crate::common::fixture(f))
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        v.push(Case {
            name: format!("fixture {f}"),
            params: p(5, 128, 0),
            texts,
            expect: None,
        });
    }
    // Tricky Unicode.
    v.push(Case {
        name: "tricky unicode".into(),
        params: p(2, 64, 3),
        texts: [
            "Héllo, WORLD! naïve_café 42 — ÉTÉ ΣΊΣΥΦΟΣ",
            "İstanbul İSTANBUL straße STRASSE",
            "cafe\u{301} cafe\u{301} cafe\u{301}",
            "日本語のテキスト、漢字。ひらがな カタカナ",
            "🙂🙂 emoji 𝒜𝒷𝒸 𝟘𝟙𝟚 astral",
            "ﬁ ligatures ﬀ Ǆ ǅ ǆ titlecase",
            "٣٤٥ ½ Ⅻ numbers of all kinds",
            "\u{feff}bom\u{200b}zero width\u{00a0}nbsp",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        expect: None,
    });
    // The text options: mixed scripts, CJK and Thai without spaces, combining marks, emoji,
    // full-width forms, white space of every kind, and character counts around k.
    let scripts: Vec<String> = [
        "Héllo, WORLD! naïve_café 42 — ÉTÉ ΣΊΣΥΦΟΣ",
        "cafe\u{301} café CAFE\u{301} ｃａｆé",
        "日本語のテキスト、漢字。ひらがな カタカナ",
        "中华人民共和国成立于一九四九年十月一日，首都北京。",
        "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
        "🙂🙂 emoji 👩‍👩‍👧 family 𝒜𝒷𝒸 𝟘𝟙𝟚",
        "ﬁ ligatures ﬀ Ǆ ǅ ǆ ① ² ½",
        "  tabs\tand\n\nnewlines\u{a0}nbsp\u{3000}ideographic  ",
        "",
        "   ",
        "a",
        "ab",
        "abcd",
        "abcde",
        "abcdef",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for rule in text_options() {
        for k in [1, 3, 5] {
            v.push(Case {
                name: format!("text options {}, k = {k}", rule_name(rule)),
                params: p(k, 64, 5).with_rule(rule),
                texts: scripts.clone(),
                expect: None,
            });
        }
    }
    let mut rng = Pcg32::new(random_seed() ^ 0x5eed);
    v.push(Case {
        name: "randomized texts, character shingles of NFKC".into(),
        params: p(4, 128, 9).with_rule(TextRule {
            shingle: ShingleUnit::Char,
            normalize: Normalize::Nfkc,
        }),
        texts: (0..200).map(|_| random_text(&mut rng)).collect(),
        expect: None,
    });
    // Character shingles of long texts: fragments on the GPU, parts on the CPU.
    let chars: String = (0..70_000)
        .map(|i| char::from_u32(0x4e00 + (i * 7919 % 20_000) as u32).unwrap())
        .collect();
    v.push(Case {
        name: "character shingles of long texts".into(),
        params: p(5, 128, 0).with_rule(TextRule {
            shingle: ShingleUnit::Char,
            normalize: Normalize::None,
        }),
        texts: vec![chars.clone(), n_words(3000, 2), format!("{chars} {chars}")],
        expect: None,
    });
    // Word-count sweep around k, and shingle-count sweeps around the GPU's chunk of 256.
    let k = 5;
    let mut sweep: Vec<String> = [0, 1, k - 1, k, k + 1]
        .iter()
        .map(|&n| n_words(n, n))
        .collect();
    for s in [63, 64, 65, 255, 256, 257, 511, 512, 513] {
        sweep.push(n_words(s + k - 1, s));
    }
    v.push(Case {
        name: "word and shingle count sweep".into(),
        params: p(k, 128, 0),
        texts: sweep.clone(),
        expect: None,
    });
    for k in [1, 2, 13] {
        v.push(Case {
            name: format!("sweep with k = {k}"),
            params: p(k, 32, 1),
            texts: sweep.clone(),
            expect: None,
        });
    }
    // Permutation counts, around the GPU's 64 permutations a workgroup.
    for np in [1, 7, 63, 64, 65, 100, 128, 256, 512] {
        v.push(Case {
            name: format!("num_perm = {np}"),
            params: p(5, np, 11),
            texts: sweep.clone(),
            expect: None,
        });
    }
    // Randomized texts.
    let mut rng = Pcg32::new(random_seed());
    v.push(Case {
        name: "randomized texts".into(),
        params: p(3, 128, rng.next_u32() as u64),
        texts: (0..200).map(|_| random_text(&mut rng)).collect(),
        expect: None,
    });
    // Bigger than a small sub-batch: fragments (20,000 words) and a single 12 KB word (host).
    v.push(Case {
        name: "documents bigger than a batch".into(),
        params: p(5, 128, 0),
        texts: vec![
            "short one".into(),
            n_words(20_000, 7),
            "x".repeat(12_000),
            format!("{} tail", "y".repeat(9_000)),
            n_words(300, 1),
        ],
        expect: None,
    });
    // Long documents that repeat themselves: the CPU engine drops repeated shingles of
    // documents from 1,024 shingles on (both sides of that edge here), in a table capped at
    // 2^17 slots (the last document has more distinct shingles than that, so slots collide).
    let para = n_words(40, 3);
    let repeated = |words: usize| {
        let mut t: Vec<&str> = Vec::new();
        while t.len() < words {
            t.extend(para.split(' '));
        }
        t.truncate(words);
        t.join(" ")
    };
    v.push(Case {
        name: "long documents that repeat themselves".into(),
        params: p(5, 128, 0),
        texts: vec![
            repeated(1027),
            repeated(1028),
            repeated(1029),
            repeated(5000),
            format!("{} {}", n_words(2000, 5), n_words(2000, 5)),
            format!("{} {}", n_words(150_000, 2), n_words(9_000, 2)),
        ],
        expect: None,
    });
    // Documents of SPLIT_DOC_SHINGLES or more are signed in parts (the CPU engine's): both
    // sides of that edge, and a document of one repeated word with a distinct word at the
    // first and last shingle of every part, so that a shingle lost or doubled at a cut shows.
    let k = 5;
    let words_for = |shingles: usize| shingles + k - 1;
    let count = 3 * SPLIT_PART_SHINGLES + 5;
    let mut marked = vec!["a".to_string(); words_for(count)];
    for (s, e) in split_parts(count) {
        // Shingle j is words j..j+k-1: word s+k-1 is the last word of shingle s (the part's
        // first), and word e-1 the first word of shingle e-1 (its last).
        marked[s + k - 1] = format!("first{s}");
        marked[e - 1] = format!("last{e}");
    }
    assert!(split_parts(count).count() > 2);
    v.push(Case {
        name: "documents signed in parts".into(),
        params: p(k, 128, 0),
        texts: vec![
            n_words(words_for(SPLIT_DOC_SHINGLES - 1), 4),
            n_words(words_for(SPLIT_DOC_SHINGLES), 4),
            marked.join(" "),
            "after the split ones".into(),
        ],
        expect: None,
    });
    v
}

fn oracle(c: &Case) -> Vec<u32> {
    let perms = perm_params(c.params.num_perm, c.params.seed);
    c.texts
        .iter()
        .flat_map(|t| minhash(shingles_with(t, c.params.k, c.params.rule()), &perms))
        .collect()
}

/// Run every case against the engines `make` builds (one per parameter set).
fn run_suite(label: &str, make: &mut dyn FnMut(MinHashParams) -> Box<dyn Engine>) {
    let mut engines: HashMap<(usize, usize, u64, TextRule), Box<dyn Engine>> = HashMap::new();
    for c in cases() {
        let key = (
            c.params.k,
            c.params.num_perm,
            c.params.seed,
            c.params.rule(),
        );
        let e = engines.entry(key).or_insert_with(|| make(c.params));
        let batch = PackedBatch::from_texts_with(&c.texts, c.params.rule());
        let got = e
            .sign_vec(&batch)
            .unwrap_or_else(|err| panic!("{label}: {}: {err}", c.name));
        let want = oracle(&c);
        assert_eq!(got.len(), want.len(), "{label}: {}", c.name);
        for (d, t) in c.texts.iter().enumerate() {
            let n = c.params.num_perm;
            assert_eq!(
                got[d * n..(d + 1) * n],
                want[d * n..(d + 1) * n],
                "{label}: case {:?}, document {d} ({} bytes)",
                c.name,
                t.len()
            );
        }
        if let Some(v) = &c.expect {
            assert_eq!(&got[..v.len()], &v[..], "{label}: {} (SPEC vector)", c.name);
        }
        // The in-memory path (the Python package's) packs and splits texts its own way.
        let strs: Vec<&str> = c.texts.iter().map(String::as_str).collect();
        let mut from_texts = vec![0u32; want.len()];
        e.sign_texts(&strs, &mut from_texts)
            .unwrap_or_else(|err| panic!("{label}: {} (sign_texts): {err}", c.name));
        assert_eq!(
            from_texts, want,
            "{label}: case {:?} through sign_texts",
            c.name
        );
    }
    // A batch of zero documents.
    let mut e = make(p(5, 128, 0));
    assert!(
        e.sign_vec(&PackedBatch::new()).unwrap().is_empty(),
        "{label}: empty batch"
    );
    e.sign_texts(&[], &mut []).unwrap();
    assert!(
        e.sign_texts(&["a b"], &mut [0u32; 127]).is_err(),
        "{label}: sign_texts into a wrong-sized matrix"
    );
}

#[test]
fn cpu_engine_one_thread_conforms() {
    run_suite("cpu/1", &mut |p| Box::new(CpuEngine::new(p, 1).unwrap()));
}

#[test]
fn cpu_engine_three_threads_conforms() {
    run_suite("cpu/3", &mut |p| Box::new(CpuEngine::new(p, 3).unwrap()));
}

#[test]
fn gpu_ports_with_tiny_sub_batches_conform() {
    run_suite("ports/4KiB", &mut |p| {
        Box::new(PortsEngine::new(p, 4096).unwrap())
    });
}

#[test]
fn gpu_ports_with_default_sub_batches_conform() {
    run_suite("ports", &mut |p| {
        Box::new(PortsEngine::new(p, 64 << 20).unwrap())
    });
}

#[test]
fn fused_gpu_ports_conform_with_tiny_and_default_sub_batches() {
    for (label, bytes) in [("ports/fused/4KiB", 4096), ("ports/fused", 64 << 20)] {
        run_suite(label, &mut |p| {
            Box::new(
                PortsEngine::new(p, bytes)
                    .unwrap()
                    .with_kernels(Kernels::Fused),
            )
        });
    }
}

/// Each text's shingle set as the SPEC states it: the sorted FNV-1a values of its shingle
/// strings.
fn spec_sets(c: &Case) -> Vec<Vec<u64>> {
    (c.texts.iter())
        .map(|t| {
            let mut v: Vec<u64> = shingles_with(t, c.params.k, c.params.rule())
                .iter()
                .map(|s| fnv1a64(s.as_bytes()))
                .collect();
            v.sort_unstable();
            v
        })
        .collect()
}

/// Pass 1 over a file, asked for sets, hands over each document's shingle set hashed from the
/// words it signed (so that `jaccard` confirmation need not read the text again): on every
/// engine, the sorted FNV-1a values of the SPEC's shingle strings, beside conforming
/// signatures.
#[test]
fn pass_one_hands_over_each_documents_shingle_set_on_every_engine() {
    use neardup::io::{Fields, InputSpec, Inputs};
    use neardup::progress::Progress;
    use std::sync::atomic::AtomicBool;
    type Make = Box<dyn Fn(MinHashParams) -> Box<dyn Engine>>;
    let mut engines: Vec<(&str, Make)> = vec![
        (
            "cpu/1",
            Box::new(|p| Box::new(CpuEngine::new(p, 1).unwrap())),
        ),
        (
            "cpu/3",
            Box::new(|p| Box::new(CpuEngine::new(p, 3).unwrap())),
        ),
        (
            "ports/4KiB",
            Box::new(|p| Box::new(PortsEngine::new(p, 4096).unwrap())),
        ),
    ];
    if gpu(p(5, 4, 0), &GpuOptions::default()).is_some() {
        engines.push((
            "gpu",
            Box::new(|p| Box::new(gpu(p, &GpuOptions::default()).expect("an adapter"))),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, c) in cases().into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.jsonl"));
        let lines: String = (c.texts.iter().enumerate())
            .map(|(d, t)| format!("{}\n", serde_json::json!({"id": d.to_string(), "text": t})))
            .collect();
        std::fs::write(&path, lines).unwrap();
        let inputs = Inputs::new(&[InputSpec::Path(path)], false).unwrap();
        let want_sets = spec_sets(&c);
        let want_sigs = oracle(&c);
        for (label, make) in &engines {
            let mut e = make(c.params);
            let asked = AtomicBool::new(true);
            let (mut sets, mut sigs) = (Vec::new(), Vec::new());
            neardup::pipeline::scan(
                &inputs,
                &Fields::default(),
                e.as_mut(),
                false,
                Some(&asked),
                &Progress::hidden(),
                |sc| {
                    assert_eq!(sc.sets.len(), sc.len(), "{label}: {}", c.name);
                    sets.append(&mut sc.sets);
                    sigs.extend_from_slice(&sc.sigs);
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(sigs, want_sigs, "{label}: case {:?}", c.name);
            for (d, want) in want_sets.iter().enumerate() {
                assert_eq!(&sets[d], want, "{label}: case {:?}, document {d}", c.name);
            }
        }
    }
}

/// Signing texts with their sets appends each text's shingle set, in order, beside signatures
/// that conform: the sorted FNV-1a values of the SPEC's shingle strings, on one thread and on
/// three (whose pieces are signed apart and put back in order).
#[test]
fn signing_texts_with_sets_appends_each_texts_shingle_set_in_order() {
    for (i, c) in cases().into_iter().enumerate() {
        let texts: Vec<&str> = c.texts.iter().map(|t| t.as_str()).collect();
        let want_sets = spec_sets(&c);
        let want_sigs = oracle(&c);
        for threads in [1, 3] {
            let e = CpuEngine::new(c.params, threads).unwrap();
            let mut sigs = vec![0u32; texts.len() * c.params.num_perm];
            // Sets already held stay where they are.
            let mut sets = vec![vec![i as u64]];
            e.sign_texts_and_sets(&texts, &mut sigs, &mut sets).unwrap();
            assert_eq!(sigs, want_sigs, "{threads} threads: case {:?}", c.name);
            assert_eq!(sets.len(), texts.len() + 1, "{threads} threads: {}", c.name);
            assert_eq!(sets[0], vec![i as u64]);
            for (d, want) in want_sets.iter().enumerate() {
                assert_eq!(
                    &sets[d + 1],
                    want,
                    "{threads} threads: case {:?}, document {d}",
                    c.name
                );
            }
        }
    }
}

/// Both kinds of kernels, for the sweeps below.
const KERNELS: [Kernels; 2] = [Kernels::Split, Kernels::Fused];

fn ports(params: MinHashParams, batch_bytes: usize, kernels: Kernels) -> PortsEngine {
    PortsEngine::new(params, batch_bytes)
        .unwrap()
        .with_kernels(kernels)
}

/// A GPU engine, or None (and a loud note) when there is no adapter and none is required.
fn gpu(p: MinHashParams, opts: &GpuOptions) -> Option<GpuEngine> {
    crate::common::gpu_or_skip(p, opts)
}

fn gpu_suite(label: &str, opts: GpuOptions) {
    if gpu(p(5, 4, 0), &opts).is_none() {
        return;
    }
    run_suite(label, &mut |p| {
        Box::new(gpu(p, &opts).expect("the adapter was there a moment ago"))
    });
}

#[test]
fn gpu_engine_conforms() {
    gpu_suite("gpu", GpuOptions::default());
}

#[test]
fn gpu_engine_with_fused_kernels_conforms() {
    for (label, batch_bytes) in [("gpu/fused", 32 << 20), ("gpu/fused/4KiB", 4096)] {
        gpu_suite(
            label,
            GpuOptions {
                batch_bytes,
                kernels: Kernels::Fused,
                ..GpuOptions::default()
            },
        );
    }
}

/// Native 64-bit shader integers (`u64_native.wgsl`): both kernels, default and tiny
/// sub-batches. Mesa's llvmpipe offers them, so CI runs this on every push.
#[test]
fn gpu_engine_with_native_int64_conforms() {
    for kernels in KERNELS {
        for (label, batch_bytes) in [("", 32 << 20), ("/4KiB", 4096)] {
            gpu_suite(
                &format!("gpu/int64/{kernels:?}{label}"),
                GpuOptions {
                    batch_bytes,
                    kernels,
                    int64: true,
                    ..GpuOptions::default()
                },
            );
        }
    }
}

#[test]
fn gpu_engine_with_tiny_sub_batches_conforms() {
    gpu_suite(
        "gpu/4KiB",
        GpuOptions {
            batch_bytes: 4096,
            ..GpuOptions::default()
        },
    );
}

#[test]
fn gpu_engine_reports_host_fallback_for_giant_shingles() {
    let opts = GpuOptions {
        batch_bytes: 4096,
        ..GpuOptions::default()
    };
    let Some(mut e) = gpu(p(5, 16, 0), &opts) else {
        return;
    };
    let texts = ["a b c", &"z".repeat(10_000)];
    let got = e.sign_vec(&PackedBatch::from_texts(&texts)).unwrap();
    let perms = perm_params(16, 0);
    let want: Vec<u32> = texts
        .iter()
        .flat_map(|t| minhash(shingles(t, 5), &perms))
        .collect();
    assert_eq!(got, want);
    assert_eq!(e.host_docs, 1);
}

#[test]
fn gpu_engine_with_kernel_timestamps_conforms() {
    // Profiling splits the work into one pass per stage, each with timestamps: same bits.
    let opts = GpuOptions {
        profile: true,
        ..GpuOptions::default()
    };
    gpu_suite("gpu/profiled", opts.clone());
    let Some(mut e) = gpu(p(5, 128, 0), &opts) else {
        return;
    };
    let texts: Vec<String> = (0..200).map(|i| n_words(100 + i, i)).collect();
    let batch = PackedBatch::from_texts(&texts);
    let want = e.sign_vec(&batch).unwrap();
    if e.profiling() {
        assert!(
            e.kernel_seconds()[1] > 0.0 && e.kernel_seconds()[2] > 0.0,
            "{:?}",
            e.kernel_seconds()
        );
        // Timing turned off (as `bench` times its sign row): no timestamps, same bits.
        e.set_profiling(false);
        assert!(!e.profiling());
        let before = e.kernel_seconds();
        assert_eq!(e.sign_vec(&batch).unwrap(), want);
        assert_eq!(
            e.kernel_seconds(),
            before,
            "no kernel time is taken with timing off"
        );
        e.set_profiling(true);
        assert_eq!(e.sign_vec(&batch).unwrap(), want);
        assert!(
            e.kernel_seconds()[2] > before[2],
            "{:?}",
            e.kernel_seconds()
        );
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "this adapter has no timestamp queries: kernel times not checked"
        );
    }
    // Fused kernels: no `hash_shingles` to time, the fused stage timed in its place.
    let fused = GpuOptions {
        kernels: Kernels::Fused,
        ..opts
    };
    let mut f = gpu(p(5, 128, 0), &fused).expect("the adapter was there a moment ago");
    assert_eq!(f.sign_vec(&batch).unwrap(), want);
    if f.profiling() {
        let [_, hash, fused] = f.kernel_seconds();
        assert!(hash == 0.0 && fused > 0.0, "{:?}", f.kernel_seconds());
    }
}

/// A word of `len` letters drawn from `rng` (random, so a byte lost anywhere changes the hash).
fn random_word(rng: &mut Pcg32, len: usize) -> String {
    (0..len)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect()
}

/// Texts whose shingles sit at and around every length boundary the GPU plan has: powers of
/// two up to 2^24 bytes, the longest shingle one shader invocation hashes, and a sub-batch's
/// byte limit; single long words and five-word shingles made of long words, each between
/// ordinary documents, all in one batch.
fn boundary_texts(max_pow: u32, batch_bytes: usize) -> Vec<String> {
    use neardup::engine::gpu::plan::MAX_SHINGLE_BYTES;
    let mut rng = Pcg32::new(2024);
    let mut lens = Vec::new();
    for n in 0..=max_pow {
        let b = 1usize << n;
        lens.extend([b.saturating_sub(1).max(1), b, b + 1]);
    }
    // A sub-batch's byte cap, where it is small enough to build texts around (the default's
    // is beyond the largest power of two swept).
    for cap in [MAX_SHINGLE_BYTES, batch_bytes] {
        if cap <= 1 << 20 {
            lens.extend([cap - 2, cap - 1, cap, cap + 1, cap + 2]);
        }
    }
    lens.sort_unstable();
    lens.dedup();
    let mut texts = vec!["an ordinary short document of a few words".to_string()];
    for len in lens {
        texts.push(random_word(&mut rng, len));
        // Five words of about len / 5 bytes: one shingle of about len bytes, its spaces
        // included, beside ordinary words (up to 2^17 bytes: past the invocation cap).
        if len <= 1 << 17 {
            let w = (len / 5).max(1);
            let five: Vec<String> = (0..5).map(|_| random_word(&mut rng, w)).collect();
            texts.push(format!("lead {} trail", five.join(" ")));
        }
        texts.push(n_words(12, len));
    }
    texts
}

/// The CPU engine's signatures of `texts`, the reference of [`boundary_suite`].
fn cpu_signatures(params: MinHashParams, texts: &[String]) -> Vec<u32> {
    let batch = PackedBatch::from_texts(texts);
    CpuEngine::new(params, 2).unwrap().sign_vec(&batch).unwrap()
}

/// An engine against the CPU engine's signatures `want`, entry by entry: a packed batch, and
/// the in-memory path (which cuts the texts into chunks of its own).
fn boundary_suite(label: &str, engine: &mut dyn Engine, texts: &[String], want: &[u32]) {
    let params = *engine.params();
    let batch = PackedBatch::from_texts(texts);
    let got = engine.sign_vec(&batch).unwrap();
    let strs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut from_texts = vec![0u32; want.len()];
    engine.sign_texts(&strs, &mut from_texts).unwrap();
    let n = params.num_perm;
    for (path, got) in [("batch", &got), ("texts", &from_texts)] {
        for (d, t) in texts.iter().enumerate() {
            assert_eq!(
                got[d * n..(d + 1) * n],
                want[d * n..(d + 1) * n],
                "{label} ({path}): num_perm {n}, document {d} of {} bytes",
                t.len()
            );
        }
    }
}

#[test]
fn every_engine_agrees_at_every_shingle_length_boundary() {
    // Up to 2^24-byte shingles with the default sub-batches; a 4 KiB sub-batch cap puts its
    // own boundary among them.
    for (batch_bytes, max_pow) in [(64usize << 20, 24u32), (4096, 16)] {
        let texts = boundary_texts(max_pow, batch_bytes);
        let params = p(5, 128, 0);
        let want = cpu_signatures(params, &texts);
        for kernels in KERNELS {
            let label = format!("{kernels:?}");
            boundary_suite(
                &format!("ports/{label}"),
                &mut ports(params, batch_bytes, kernels),
                &texts,
                &want,
            );
            for int64 in [false, true] {
                let opts = GpuOptions {
                    batch_bytes,
                    kernels,
                    int64,
                    ..GpuOptions::default()
                };
                if let Some(mut g) = gpu(params, &opts) {
                    boundary_suite(&format!("gpu/{label}/{int64}"), &mut g, &texts, &want);
                    assert!(
                        g.host_docs > 0,
                        "the longest shingles are signed on the host"
                    );
                }
            }
        }
    }
}

#[test]
fn every_engine_agrees_at_the_shingle_boundaries_for_every_signature_length() {
    let texts = boundary_texts(16, 64 << 20);
    for num_perm in [1, 7, 64, 100, 128, 256, 512] {
        let params = p(5, num_perm, 7);
        let want = cpu_signatures(params, &texts);
        for kernels in KERNELS {
            let label = format!("{kernels:?}/{num_perm}");
            boundary_suite(
                &format!("ports/{label}"),
                &mut ports(params, 64 << 20, kernels),
                &texts,
                &want,
            );
            for int64 in [false, true] {
                let opts = GpuOptions {
                    kernels,
                    int64,
                    ..GpuOptions::default()
                };
                if let Some(mut g) = gpu(params, &opts) {
                    boundary_suite(&format!("gpu/{label}/{int64}"), &mut g, &texts, &want);
                }
            }
        }
    }
}

/// The cap on a shingle hashed by one shader invocation, at the cap and one past it: the
/// document at the cap is signed on the device, the one past it on the host, both exactly.
#[test]
fn a_shingle_at_the_invocation_cap_is_hashed_on_the_device_and_one_past_it_on_the_host() {
    use neardup::engine::gpu::plan::MAX_SHINGLE_BYTES;
    for kernels in KERNELS {
        let opts = GpuOptions {
            kernels,
            ..GpuOptions::default()
        };
        let Some(mut g) = gpu(p(5, 64, 0), &opts) else {
            return;
        };
        let mut rng = Pcg32::new(5);
        for (len, on_host) in [(MAX_SHINGLE_BYTES, 0), (MAX_SHINGLE_BYTES + 1, 1)] {
            let before = g.host_docs;
            let texts = [random_word(&mut rng, len)];
            let want = cpu_signatures(*g.params(), &texts);
            boundary_suite(&format!("gpu/{kernels:?}"), &mut g, &texts, &want);
            // Once through each of the suite's two paths.
            assert_eq!(
                g.host_docs - before,
                2 * on_host,
                "{kernels:?}: a shingle of {len} bytes"
            );
        }
    }
}

/// A device that does not answer in time is an error naming the adapter, not a hang: with a
/// wait far shorter than the work, the wait gives up.
#[test]
fn a_gpu_wait_past_its_timeout_is_an_error_naming_the_adapter() {
    let opts = GpuOptions {
        wait_timeout: std::time::Duration::from_nanos(1),
        ..GpuOptions::default()
    };
    let Some(mut g) = gpu(p(5, 512, 0), &opts) else {
        return;
    };
    let texts: Vec<String> = (0..4000).map(|i| n_words(400, i)).collect();
    let err = g
        .sign_vec(&PackedBatch::from_texts(&texts))
        .expect_err("a 1 ns wait for seconds of work times out")
        .to_string();
    assert!(err.contains("did not finish a sub-batch"), "{err}");
    assert!(err.contains(&g.adapter().name), "{err}");
}

/// Documents per sub-batch, at the GPU plan's cap and one past it: the documents of a batch
/// past the cap go to a second sub-batch, and every signature still equals the CPU engine's.
#[test]
fn every_engine_agrees_around_the_documents_per_sub_batch_cap() {
    let params = p(5, 128, 0);
    for kernels in KERNELS {
        let opts = GpuOptions {
            kernels,
            ..GpuOptions::default()
        };
        let Some(mut g) = gpu(params, &opts) else {
            return;
        };
        let cap = g.limits().max_docs;
        for n in [cap - 1, cap, cap + 1] {
            let texts: Vec<String> = (0..n).map(|i| format!("doc {i} w{}", i % 97)).collect();
            let want = cpu_signatures(params, &texts);
            let before = g.sub_batches();
            boundary_suite(&format!("gpu/{kernels:?}"), &mut g, &texts, &want);
            // Through each of the suite's two paths (the texts are one chunk of the second).
            let subs = g.sub_batches() - before;
            assert_eq!(
                subs,
                2 * if n > cap { 2 } else { 1 },
                "{n} documents, cap {cap}"
            );
            boundary_suite(
                &format!("ports/{kernels:?}"),
                &mut ports(params, 32 << 20, kernels),
                &texts,
                &want,
            );
        }
    }
}

/// A document larger than a sub-batch is cut into overlapping word windows; one holding a word
/// nearly as long as a window, or longer than one, still signs exactly (the latter on the host).
#[test]
fn documents_cut_into_windows_with_words_near_and_past_a_window_conform() {
    let batch_bytes = 4096;
    let opts = GpuOptions {
        batch_bytes,
        ..GpuOptions::default()
    };
    let params = p(5, 64, 1);
    let mut rng = Pcg32::new(11);
    let mut texts = Vec::new();
    for long in [
        batch_bytes / 2,
        batch_bytes - 64,
        batch_bytes - 1,
        batch_bytes,
        batch_bytes + 1,
    ] {
        // Ordinary words, a long one in the middle, more ordinary words: several windows.
        let head = n_words(900, long);
        let tail = n_words(900, long + 1);
        texts.push(format!("{head} {} {tail}", random_word(&mut rng, long)));
    }
    let want = cpu_signatures(params, &texts);
    for kernels in KERNELS {
        boundary_suite(
            &format!("ports/{kernels:?}"),
            &mut ports(params, batch_bytes, kernels),
            &texts,
            &want,
        );
        let opts = GpuOptions {
            kernels,
            ..opts.clone()
        };
        if let Some(mut g) = gpu(params, &opts) {
            boundary_suite(&format!("gpu/{kernels:?}"), &mut g, &texts, &want);
            assert!(
                g.sub_batches() > texts.len() as u64,
                "the documents were cut into windows"
            );
        }
    }
}
