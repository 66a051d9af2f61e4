//! Criterion benchmarks of the hot stages, one group each: the tokenizer, FNV-1a shingle
//! hashing, the permutation kernel (every variant this CPU has), LSH (bucketing a signature
//! matrix; the library index's inserts and candidate pairs) and union-find.
//!
//!     cargo bench --bench kernels [-- FILTER]
//!
//! Inputs are seeded synthetic text (`neardup::synth`), so runs are comparable across machines.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use neardup::batch::PackedBatch;
use neardup::hash::P;
use neardup::index::lsh::{band_buckets, Lsh, LshParams};
use neardup::sign::fnv::{hash_docs, hash_shingles};
use neardup::sign::permute::{permute_min_with, Kernel};
use neardup::synth::SyntheticDocs;
use neardup::UnionFind;

fn corpus(n: usize) -> Vec<String> {
    SyntheticDocs::new(n, 150, 42).map(|(_, t)| t).collect()
}

fn tokenizer(c: &mut Criterion) {
    let texts = corpus(2000);
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    let mut g = c.benchmark_group("tokenize");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("push_text (synthetic ASCII)", |b| {
        b.iter(|| {
            let mut batch = PackedBatch::new();
            for t in &texts {
                batch.push_text(t);
            }
            batch
        })
    });
    let accented: Vec<String> = texts.iter().map(|t| format!("Café — {t}")).collect();
    g.bench_function("push_text (one non-ASCII char a doc)", |b| {
        b.iter(|| {
            let mut batch = PackedBatch::new();
            for t in &accented {
                batch.push_text(t);
            }
            batch
        })
    });
    g.finish();
}

fn hashing(c: &mut Criterion) {
    let batch = PackedBatch::from_texts(&corpus(2000));
    let shingles = batch.total_shingles(5);
    let mut g = c.benchmark_group("fnv1a shingles");
    g.throughput(Throughput::Elements(shingles as u64));
    // As the engine hashes: a whole batch at once, the lockstep blocks by length class,
    // across documents.
    g.bench_function("hash_docs k=5", |b| {
        let mut xs = Vec::with_capacity(shingles);
        b.iter(|| {
            xs.clear();
            hash_docs(&batch, 0..batch.num_docs(), 5, &mut xs);
            xs.len()
        })
    });
    // One document at a time: under 192 shingles a call, so in text order, each document's
    // last block partial (padded).
    g.bench_function("hash_shingles k=5", |b| {
        let mut xs = Vec::with_capacity(shingles);
        b.iter(|| {
            xs.clear();
            for d in 0..batch.num_docs() {
                hash_shingles(&batch, d, 5, &mut xs);
            }
            xs.len()
        })
    });
    g.finish();
}

fn permutation(c: &mut Criterion) {
    let perms = neardup::perm_params(128, 0);
    let mut rng = neardup::Pcg32::new(5);
    let xs: Vec<u32> = (0..4096).map(|_| rng.below(P)).collect();
    let mut g = c.benchmark_group("permute+min 128 perms");
    g.throughput(Throughput::Elements(xs.len() as u64));
    for k in Kernel::available() {
        g.bench_function(k.name(), |b| {
            let mut row = vec![P; 128];
            b.iter(|| {
                row.fill(P);
                permute_min_with(k, &xs, &perms.a, &perms.b, &mut row);
                row[0]
            })
        });
    }
    g.finish();
}

fn lsh(c: &mut Criterion) {
    let n = 100_000;
    let mut rng = neardup::Pcg32::new(9);
    // Signatures where every 20th document copies an earlier one, as in a real corpus.
    let mut sigs: Vec<u32> = Vec::with_capacity(n * 128);
    for d in 0..n {
        if d % 20 == 19 {
            let src = rng.below(d as u32) as usize;
            let row: Vec<u32> = sigs[src * 128..(src + 1) * 128].to_vec();
            sigs.extend(row);
        } else {
            sigs.extend((0..128).map(|_| rng.below(P)));
        }
    }
    let mut g = c.benchmark_group("lsh");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.bench_function("band_buckets 100k docs 16x8", |b| {
        b.iter(|| band_buckets(&sigs, 128, LshParams::new(16, 8).unwrap(), |_| true).len())
    });
    // The library's index over named documents: inserting them, then the candidate pairs.
    let ids: Vec<String> = (0..n).map(|d| format!("doc-{d}")).collect();
    let fill = |mut index: Lsh| {
        for (id, sig) in ids.iter().zip(sigs.chunks_exact(128)) {
            index.insert(id, sig).unwrap();
        }
        index
    };
    let empty = || Lsh::new(LshParams::new(16, 8).unwrap());
    // The filled index is returned, so criterion drops it outside the timing.
    g.bench_function("Lsh::insert 100k docs 16x8", |b| {
        b.iter_batched(empty, fill, BatchSize::LargeInput)
    });
    let index = fill(empty());
    g.bench_function("Lsh::candidates 100k docs 16x8", |b| {
        b.iter(|| index.candidates().len())
    });
    g.finish();
}

fn union_find(c: &mut Criterion) {
    let n = 1_000_000u32;
    let mut rng = neardup::Pcg32::new(3);
    let pairs: Vec<(u32, u32)> = (0..n / 2).map(|_| (rng.below(n), rng.below(n))).collect();
    let mut g = c.benchmark_group("union-find");
    g.throughput(Throughput::Elements(pairs.len() as u64));
    g.sample_size(10);
    g.bench_function("500k unions over 1M + roots", |b| {
        b.iter_batched(
            || UnionFind::new(n as usize),
            |mut uf| {
                for &(x, y) in &pairs {
                    uf.union(x, y);
                }
                uf.roots().len()
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, tokenizer, hashing, permutation, lsh, union_find);
criterion_main!(benches);
