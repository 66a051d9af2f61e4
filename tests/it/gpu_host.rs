//! The GPU engine's host side, each case compared with `assert_eq!` to the CPU engine: jobs of
//! several parts (never joined), many jobs in flight through the stream, every sub-batch limit
//! at its cap and one past it, and dispatch grids past 65,535 workgroups a dimension.
//!
//! Like the conformance suite, these need an adapter and fail without one under
//! `NEARDUP_REQUIRE_GPU=1`.

use neardup::batch::PackedBatch;
use neardup::engine::gpu::GpuOptions;
use neardup::engine::{CpuEngine, Engine, SignJob, StreamSigner};
use neardup::hash::Pcg32;
use neardup::{GpuEngine, MinHashParams};

fn params(k: usize, num_perm: usize) -> MinHashParams {
    MinHashParams::new(k, num_perm, 11).unwrap()
}

fn gpu(p: MinHashParams, batch_bytes: usize) -> Option<GpuEngine> {
    crate::common::gpu_or_skip(
        p,
        &GpuOptions {
            batch_bytes,
            ..GpuOptions::default()
        },
    )
}

fn cpu_rows(p: MinHashParams, parts: &[PackedBatch]) -> Vec<u32> {
    let docs: usize = parts.iter().map(|b| b.num_docs()).sum();
    let mut out = vec![0u32; docs * p.num_perm];
    CpuEngine::new(p, 2)
        .unwrap()
        .sign_parts(parts, &mut out)
        .unwrap();
    out
}

/// A document of one of several kinds: empty, a few words, a long one (fragments under a 4 KiB
/// sub-batch), or one whose word outgrows a 4 KiB sub-batch (signed on the host there).
fn document(rng: &mut Pcg32) -> String {
    let word = |rng: &mut Pcg32| format!("w{}", rng.below(5000));
    let words = |rng: &mut Pcg32, n: u32| (0..n).map(|_| word(rng)).collect::<Vec<_>>().join(" ");
    match rng.below(12) {
        0 => String::new(),
        1 => words(rng, 1500),
        2 => format!("{} {} {}", words(rng, 3), "q".repeat(5000), words(rng, 3)),
        _ => {
            let n = rng.below(60);
            words(rng, n)
        }
    }
}

/// `n` jobs of 0 to 4 parts of 0 to 9 documents each.
fn jobs(rng: &mut Pcg32, n: usize) -> Vec<Vec<PackedBatch>> {
    (0..n)
        .map(|_| {
            (0..rng.below(5))
                .map(|_| {
                    let docs: Vec<String> = (0..rng.below(10)).map(|_| document(rng)).collect();
                    PackedBatch::from_texts(&docs)
                })
                .collect()
        })
        .collect()
}

#[test]
fn parts_sign_as_the_cpu_engine_signs_them() {
    let mut rng = Pcg32::new(3);
    let p = params(5, 64);
    for batch_bytes in [4096, 32 << 20] {
        let Some(mut g) = gpu(p, batch_bytes) else {
            return;
        };
        for (i, parts) in jobs(&mut rng, 12).into_iter().enumerate() {
            let want = cpu_rows(p, &parts);
            let mut got = vec![0u32; want.len()];
            g.sign_parts(&parts, &mut got).unwrap();
            assert_eq!(got, want, "job {i}, {batch_bytes}-byte sub-batches");
        }
    }
}

#[test]
fn streamed_jobs_come_back_in_order_with_several_in_flight() {
    let mut rng = Pcg32::new(5);
    let p = params(3, 32);
    for batch_bytes in [4096, 32 << 20] {
        let Some(mut g) = gpu(p, batch_bytes) else {
            return;
        };
        let all = jobs(&mut rng, 15);
        let want: Vec<Vec<u32>> = all.iter().map(|parts| cpu_rows(p, parts)).collect();
        let mut back: Vec<SignJob> = Vec::new();
        for (i, parts) in all.iter().enumerate() {
            let docs: usize = parts.iter().map(|b| b.num_docs()).sum();
            let job = SignJob {
                parts: parts.clone(),
                sigs: vec![0; docs * p.num_perm],
            };
            let done = StreamSigner::submit(&mut g, job).unwrap();
            back.extend(done);
            assert!(back.len() <= i + 1);
            if i == 0 && batch_bytes == 32 << 20 && docs > 0 {
                // One sub-batch, and the ring has room: it is still in flight.
                assert!(back.is_empty(), "the first job came back at once");
            }
        }
        let in_flight = all.len() - back.len();
        assert!(
            in_flight > 0,
            "{batch_bytes}: every job came back before the stream was finished"
        );
        // Signing outside the stream while jobs are in flight is refused, not interleaved.
        let mut out = vec![0u32; p.num_perm];
        assert!(g
            .sign(&PackedBatch::from_texts(&["a b c"]), &mut out)
            .is_err());
        back.extend(StreamSigner::finish(&mut g).unwrap());
        assert_eq!(back.len(), all.len());
        for (i, (job, want)) in back.iter().zip(&want).enumerate() {
            assert_eq!(job.parts, all[i], "job {i} came back out of order");
            assert_eq!(&job.sigs, want, "job {i}, {batch_bytes}-byte sub-batches");
        }
        assert!(StreamSigner::finish(&mut g).unwrap().is_empty());
        g.sign(&PackedBatch::from_texts(&["a b c"]), &mut out)
            .unwrap();
    }
}

/// A stream job whose matrix has the wrong size is an error, and the jobs already in flight
/// still come back.
#[test]
fn a_streamed_job_of_the_wrong_size_is_refused() {
    let p = params(3, 16);
    let Some(mut g) = gpu(p, 32 << 20) else {
        return;
    };
    let parts = vec![PackedBatch::from_texts(&["one two three", "four five"])];
    let ok = SignJob {
        parts: parts.clone(),
        sigs: vec![0; 2 * 16],
    };
    let mut back = StreamSigner::submit(&mut g, ok).unwrap();
    let bad = SignJob {
        parts: parts.clone(),
        sigs: vec![0; 16],
    };
    assert!(StreamSigner::submit(&mut g, bad).is_err());
    back.extend(StreamSigner::finish(&mut g).unwrap());
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].sigs, cpu_rows(p, &parts));
}

/// `n` one-word documents, each word its own.
fn one_word_docs(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("d{i}")).collect()
}

/// Each limit of a 4 KiB sub-batch, met exactly and passed by one: one sub-batch, then more,
/// with the same signatures as the CPU engine either way.
#[test]
fn every_sub_batch_limit_holds_at_its_cap_and_one_past_it_on_the_gpu() {
    let p = params(1, 16);
    let Some(mut g) = gpu(p, 4096) else {
        return;
    };
    let l = *g.limits();
    assert_eq!(
        (l.max_bytes, l.max_words, l.max_shingles),
        (4096, 1024, 1024)
    );
    // Word slots (and shingles, k = 1): one document of n two-byte words, whose piece takes
    // one slot more for the end of its last word.
    let letters = |n: usize| -> String {
        (0..n)
            .map(|i| ((b'a' + (i % 26) as u8) as char).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Bytes: n bytes of eight-byte words (seven letters and the space).
    let sevens = |n: usize| -> String {
        (0..n / 8)
            .map(|i| format!("{:a>7}", i % 1000))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let cases: Vec<(String, String, u64)> = vec![
        ("words at the cap".into(), letters(l.max_words - 1), 1),
        ("words past the cap".into(), letters(l.max_words), 2),
        ("bytes at the cap".into(), sevens(l.max_bytes), 1),
        // One more word: 4104 bytes.
        ("bytes past the cap".into(), sevens(l.max_bytes + 8), 2),
    ];
    for (name, text, subs) in cases {
        let parts = vec![PackedBatch::from_texts(&[text])];
        let want = cpu_rows(p, &parts);
        let before = g.sub_batches();
        let mut got = vec![0u32; want.len()];
        g.sign_parts(&parts, &mut got).unwrap();
        assert_eq!(got, want, "{name}");
        assert_eq!(g.sub_batches() - before, subs, "{name}");
    }
}

/// The minhash grid past 65,535 chunks, and the init grid past 65,535 workgroups, in one
/// sub-batch: one-word documents (one chunk each) and one of 257 words (two chunks), 256
/// permutations (one init workgroup a document).
#[test]
fn chunk_and_init_grids_past_65535_workgroups_conform() {
    let p = params(1, 256);
    let Some(mut g) = gpu(p, 32 << 20) else {
        return;
    };
    let max_docs = g.limits().max_docs;
    assert_eq!(max_docs, 1 << 16);
    for chunks in [65_534usize, 65_535, 65_536, 65_537] {
        let mut texts = one_word_docs(chunks - 2);
        texts.push(
            (0..257)
                .map(|i| format!("long{i}"))
                .collect::<Vec<_>>()
                .join(" "),
        );
        assert!(texts.len() <= max_docs);
        let parts = vec![PackedBatch::from_texts(&texts)];
        let want = cpu_rows(p, &parts);
        let before = g.sub_batches();
        let mut got = vec![0u32; want.len()];
        g.sign_parts(&parts, &mut got).unwrap();
        assert_eq!(
            g.sub_batches() - before,
            1,
            "{chunks} chunks in one sub-batch"
        );
        for d in 0..texts.len() {
            assert_eq!(
                got[d * 256..(d + 1) * 256],
                want[d * 256..(d + 1) * 256],
                "{chunks} chunks: document {d}"
            );
        }
    }
}

/// The hash grid past 65,535 workgroups (more than 65,535 x 256 shingles in one sub-batch): a
/// document of one repeated word and, past the first grid row, words of its own, which hold
/// the minima; a second row left out would leave the repeated word's values.
#[test]
fn a_hash_grid_past_65535_workgroups_conforms() {
    let p = params(1, 8);
    let Some(mut g) = gpu(p, 80 << 20) else {
        return;
    };
    let row = 65_535 * 256;
    let mut text = "a ".repeat(row + 100);
    for i in 0..2000 {
        text.push_str(&format!("t{i} "));
    }
    let parts = vec![PackedBatch::from_texts(&[text])];
    let want = cpu_rows(p, &parts);
    let before = g.sub_batches();
    let mut got = vec![0u32; want.len()];
    g.sign_parts(&parts, &mut got).unwrap();
    assert_eq!(g.sub_batches() - before, 1);
    assert_eq!(got, want);
    let only_a = cpu_rows(p, &[PackedBatch::from_texts(&["a"])]);
    assert_ne!(
        want, only_a,
        "the tail holds no minimum: the case tests nothing"
    );
}

/// A run's parts go back to the engine once signed, and the next run of the same engine
/// tokenizes into them (warm buffers): the spares never pass their bound, and every run signs
/// the CPU engine's bits.
#[test]
fn parts_are_kept_for_the_next_run_and_stay_bounded() {
    use neardup::io::{Fields, InputSpec, Inputs};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    let mut rng = Pcg32::new(7);
    let mut text = String::new();
    for i in 0..3000 {
        let doc = serde_json::json!({"id": i.to_string(), "text": document(&mut rng)});
        text.push_str(&format!("{doc}\n"));
    }
    std::fs::write(&path, text).unwrap();
    let inputs = Inputs::new(&[InputSpec::Path(path)], false).unwrap();
    let p = params(5, 64);
    let scan = |e: &mut dyn Engine| {
        let mut rows = Vec::new();
        neardup::pipeline::scan(
            &inputs,
            &Fields::default(),
            e,
            false,
            None,
            &neardup::progress::Progress::hidden(),
            |sc| {
                rows.extend_from_slice(&sc.sigs);
                Ok(())
            },
        )
        .unwrap();
        rows
    };
    let want = scan(&mut CpuEngine::new(p, 2).unwrap());
    let Some(mut g) = gpu(p, 4 << 10) else {
        return;
    };
    let spares = g.spare_parts().expect("the GPU engine keeps its parts");
    assert!(spares.is_empty());
    assert_eq!(scan(&mut g), want);
    let (kept, reused) = (spares.len(), spares.reused());
    assert!(kept > 0, "no part came back to the engine");
    assert_eq!(scan(&mut g), want);
    // The second run's first chunk finds the kept parts.
    assert!(
        spares.reused() >= reused + (kept as u64).min(2),
        "the second run tokenized into {} of the {kept} parts kept",
        spares.reused() - reused
    );
    // The spares never pass their bound, however many parts a run hands back.
    let many = neardup::batch::SpareParts::new(3);
    many.give((0..10).map(|_| neardup::PackedBatch::new()));
    assert_eq!(many.len(), many.max());
}

/// The in-memory path (`sign_texts`, the Python package's and in-memory dedup's) cuts texts
/// into chunks of about a sub-batch and streams them: with 4 KiB sub-batches, many chunks of
/// every kind of document (fragments and host documents among them) come back in order with
/// the CPU engine's bits, and a second call tokenizes into the parts the first one kept.
#[test]
fn texts_stream_in_chunks_and_reuse_their_parts() {
    let mut rng = Pcg32::new(19);
    let texts: Vec<String> = (0..600).map(|_| document(&mut rng)).collect();
    let strs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let total: usize = strs.iter().map(|t| t.len()).sum();
    let p = params(5, 32);
    let mut want = vec![0u32; strs.len() * p.num_perm];
    CpuEngine::new(p, 2)
        .unwrap()
        .sign_texts(&strs, &mut want)
        .unwrap();
    let Some(mut g) = gpu(p, 4 << 10) else {
        return;
    };
    assert!(total > 20 * (4 << 10), "a few chunks only: {total} bytes");
    let spares = g.spare_parts().expect("the GPU engine keeps its parts");
    for call in 0..2 {
        let mut got = vec![0u32; strs.len() * p.num_perm];
        g.sign_texts(&strs, &mut got).unwrap();
        for d in 0..strs.len() {
            let row = d * p.num_perm..(d + 1) * p.num_perm;
            assert_eq!(got[row.clone()], want[row], "call {call}, text {d}");
        }
        assert!(g.host_docs > 0, "no document was signed on the host");
        assert!(!spares.is_empty(), "no part came back to the engine");
    }
    assert!(
        spares.reused() > 0,
        "the second call tokenized into fresh parts"
    );
    // Texts of a few bytes each: the chunks hold documents only.
    let short: Vec<&str> = (0..5000).map(|i| ["a b c d e f", "", "g"][i % 3]).collect();
    let mut want = vec![0u32; short.len() * p.num_perm];
    CpuEngine::new(p, 1)
        .unwrap()
        .sign_texts(&short, &mut want)
        .unwrap();
    let mut got = vec![0u32; short.len() * p.num_perm];
    g.sign_texts(&short, &mut got).unwrap();
    assert_eq!(got, want);
}
