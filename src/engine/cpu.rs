//! The CPU engine: rayon over documents, one signature row per task. It is the reference the GPU
//! engine is checked against, so it stays plain: the SPEC's arithmetic on native `u64`.
//!
//! Each row depends on its document alone, so the matrix is the same for every thread count and
//! batch split.

use rayon::prelude::*;

use super::{check_output, Engine, EngineError, EngineInfo, RecordSigner};
use crate::batch::PackedBatch;
use crate::hash::{PermParams, P};
use crate::io::{parse_record, Chunk, Fields};
use crate::kernel;
use crate::minhash::MinHashParams;
use crate::pipeline::ScannedChunk;

/// MinHash on the CPU.
pub struct CpuEngine {
    params: MinHashParams,
    perms: PermParams,
    /// Its own pool, or `None` to run on the caller's (the global pool, sized by `--threads`).
    pool: Option<rayon::ThreadPool>,
}

impl CpuEngine {
    /// An engine on a pool of its own with `threads` workers, or with `threads = 0` on the
    /// current rayon pool (so parsing and signing share the same workers, not twice as many).
    pub fn new(params: MinHashParams, threads: usize) -> Result<Self, crate::Error> {
        params.validate()?;
        let pool = if threads == 0 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("neardup-cpu-{i}"))
                    .build()
                    .map_err(|e| {
                        crate::Error::Param(format!("cannot start {threads} threads: {e}"))
                    })?,
            )
        };
        Ok(CpuEngine {
            perms: params.perms(),
            params,
            pool,
        })
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        match &self.pool {
            Some(p) => p.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }

    /// Run `f` on this engine's threads.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

impl Engine for CpuEngine {
    fn params(&self) -> &MinHashParams {
        &self.params
    }

    fn info(&self) -> EngineInfo {
        EngineInfo {
            kind: "cpu",
            detail: format!("{} threads, {}", self.threads(), kernel::describe()),
        }
    }

    fn record_signer(&self) -> Option<&dyn RecordSigner> {
        Some(self)
    }

    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError> {
        let n = self.params.num_perm;
        check_output(batch, n, out)?;
        if out.is_empty() {
            return Ok(());
        }
        let k = self.params.k;
        let perms = &self.perms;
        self.install(|| {
            out.par_chunks_mut(n * DOCS_PER_TASK)
                .enumerate()
                .for_each_init(Vec::new, |xs, (i, rows)| {
                    let d0 = i * DOCS_PER_TASK;
                    sign_docs(batch, d0..d0 + rows.len() / n, k, perms, xs, rows);
                });
        });
        Ok(())
    }
}

impl RecordSigner for CpuEngine {
    /// Cut the chunk's lines into pieces and, per piece on its own thread, parse each record,
    /// tokenize it into a reused per-thread batch and sign it while the text is still in cache.
    fn sign_chunk(
        &self,
        chunk: &Chunk,
        fields: &Fields,
        name: &str,
        want_exact_keys: bool,
    ) -> Result<ScannedChunk, crate::Error> {
        let (k, np) = (self.params.k, self.params.num_perm);
        let perms = &self.perms;
        let n = chunk.len();
        // Every line is one record, so the signature matrix can be laid out before parsing and
        // each piece writes its rows in place. Tokenizer and hash scratch live per thread and
        // are reused: fresh multi-megabyte buffers per piece cost page faults (and, freed,
        // TLB shootdowns across cores) that outweighed the hashing.
        let mut out = ScannedChunk {
            file_index: chunk.file_index,
            raw_bytes: chunk.data.len() as u64,
            sigs: crate::pipeline::signature_rows(n * np),
            ..Default::default()
        };
        self.install(|| {
            // Pieces of about equal bytes (documents vary by orders of magnitude in length, so
            // equal line counts leave one thread idle at the end of every chunk).
            let ranges = split_by_bytes(chunk, rayon::current_num_threads() * 8);
            let mut slots: Vec<(usize, usize, &mut [u32])> = Vec::with_capacity(ranges.len());
            let mut rest: &mut [u32] = &mut out.sigs;
            for &(start, end) in &ranges {
                let (head, tail) = rest.split_at_mut((end - start) * np);
                slots.push((start, end, head));
                rest = tail;
            }
            let parts: Vec<Result<ScannedChunk, crate::Error>> = slots
                .into_par_iter()
                .map(|(start, end, sigs)| {
                    // The scratch is taken out of its cell, not borrowed in place: a split
                    // document's parts run on the pool, and while this thread waits for them it
                    // may run another piece, which takes the scratch in turn (finding it empty).
                    let (mut batch, mut xs) = SCRATCH.take();
                    let r = (|| {
                        let (batch, xs) = (&mut batch, &mut xs);
                        batch.clear();
                        let mut part = ScannedChunk::default();
                        for i in start..end {
                            let rec = parse_record(chunk.line(i), fields, name, chunk.line_no(i))?;
                            batch.push_text(&rec.text);
                            part.ids.push(&rec.id);
                            part.lines.push(chunk.line_no(i));
                            part.text_bytes += rec.text.len() as u64;
                        }
                        let docs = batch.num_docs();
                        sign_docs(batch, 0..docs, k, perms, xs, sigs);
                        part.words = (0..docs).map(|d| batch.doc_words(d).len() as u32).collect();
                        part.shingles = batch.total_shingles(k) as u64;
                        if want_exact_keys {
                            part.exact_keys = (0..docs)
                                .map(|d| xxhash_rust::xxh3::xxh3_128(batch.doc_bytes(d)))
                                .collect();
                        }
                        Ok(part)
                    })();
                    SCRATCH.set((batch, xs));
                    r
                })
                .collect();
            // The parts' signatures are already in place in `out.sigs` (theirs are empty).
            for part in parts {
                out.append(part?);
            }
            Ok(out)
        })
    }
}

/// Cut a chunk's lines into at most `pieces` contiguous ranges of about equal bytes.
fn split_by_bytes(chunk: &Chunk, pieces: usize) -> Vec<(usize, usize)> {
    let n = chunk.len();
    if n == 0 {
        return Vec::new();
    }
    let total: usize = chunk.lines.iter().map(|&(s, e, _)| e - s + 1).sum();
    let target = total.div_ceil(pieces.max(1)).max(1);
    let mut out = Vec::with_capacity(pieces);
    let (mut start, mut acc) = (0, 0);
    for (i, &(s, e, _)) in chunk.lines.iter().enumerate() {
        acc += e - s + 1;
        if acc >= target {
            out.push((start, i + 1));
            start = i + 1;
            acc = 0;
        }
    }
    if start < n {
        out.push((start, n));
    }
    out
}

thread_local! {
    /// Per-thread tokenizer batch and shingle-hash buffer, reused from piece to piece.
    static SCRATCH: std::cell::RefCell<(PackedBatch, Vec<u32>)> =
        std::cell::RefCell::new((PackedBatch::new(), Vec::new()));
}

/// Documents per rayon task of [`CpuEngine::sign`]: enough that the hasher's lockstep blocks
/// are seldom partial, few enough that the tasks balance.
pub(crate) const DOCS_PER_TASK: usize = 16;

/// Documents of at least this many shingles are signed in parts on the pool, their minima
/// merged: one such document otherwise holds one thread while the others run out of work (the
/// real-text benchmark corpus has three of 200k-600k shingles, 14% of its bytes, and single-core
/// stretches of 20 ms showed while each was signed).
pub const SPLIT_DOC_SHINGLES: usize = 1 << 16;

/// Shingles per part of a split document (a part is hashed, filtered and permuted on its own).
pub const SPLIT_PART_SHINGLES: usize = 1 << 15;

/// The signatures of documents `docs` into `rows` (one row each, in order), with `xs` as
/// scratch for their shingle hashes. Runs of documents are hashed in one go (the hasher's
/// lockstep blocks run across documents), then each document's slice is permuted; a document
/// of [`SPLIT_DOC_SHINGLES`] or more is signed in parts on the pool.
pub(crate) fn sign_docs(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
    perms: &PermParams,
    xs: &mut Vec<u32>,
    rows: &mut [u32],
) {
    let np = perms.len();
    debug_assert_eq!(rows.len(), docs.len() * np);
    let mut rows = rows;
    let mut d = docs.start;
    while d < docs.end {
        let run_end = (d..docs.end)
            .find(|&e| batch.shingle_count(e, k) >= SPLIT_DOC_SHINGLES)
            .unwrap_or(docs.end);
        let (run_rows, rest) = rows.split_at_mut((run_end - d) * np);
        sign_run(batch, d..run_end, k, perms, xs, run_rows);
        rows = rest;
        d = run_end;
        if d < docs.end {
            let (row, rest) = rows.split_at_mut(np);
            sign_split_doc(batch, d, k, perms, row);
            rows = rest;
            d += 1;
        }
    }
}

/// The shingle ranges `[s, e)` of the parts a document of `count` shingles is signed in:
/// contiguous, in order, covering every shingle once, each about [`SPLIT_PART_SHINGLES`].
pub fn split_parts(count: usize) -> impl Iterator<Item = (usize, usize)> {
    let parts = count.div_ceil(SPLIT_PART_SHINGLES).max(1);
    (0..parts).map(move |p| (p * count / parts, (p + 1) * count / parts))
}

/// Document `d`'s signature into `row`, its shingles cut into [`split_parts`] that are hashed,
/// filtered and permuted as tasks on the pool; a signature is a minimum, so the parts' rows
/// merge into it by `min`, whatever the cut.
fn sign_split_doc(batch: &PackedBatch, d: usize, k: usize, perms: &PermParams, row: &mut [u32]) {
    let np = perms.len();
    let words = batch.doc_words(d);
    let starts = &batch.word_start[words.start..words.end + 1];
    let (count, width) = crate::text::shingle_layout(words.len(), k);
    let parts: Vec<(usize, usize)> = split_parts(count).collect();
    let merged = parts
        .into_par_iter()
        .map(|(s, e)| {
            // A per-thread buffer: a fresh one per part (128 KiB, glibc's mmap threshold)
            // cost page faults, and TLB flushes when freed.
            let mut xs = PART_XS.take();
            xs.clear();
            // Shingle j of the document is bytes[starts[j] .. starts[j + width] - 1], so
            // these starts hold exactly shingles s..e.
            kernel::hash_word_list(&batch.bytes, &starts[s..e + width], k, &mut xs);
            debug_assert_eq!(xs.len(), e - s);
            let fresh = REPEATS.with_borrow_mut(|f| f.keep_first_seen(&mut xs));
            let mut part = vec![P; np];
            kernel::permute_min(&xs[..fresh], &perms.a, &perms.b, &mut part);
            PART_XS.set(xs);
            part
        })
        .reduce(
            || vec![P; np],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, &y)| *x = (*x).min(y));
                a
            },
        );
    row.copy_from_slice(&merged);
}

/// [`sign_docs`] for a run of documents none of which is split.
fn sign_run(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
    perms: &PermParams,
    xs: &mut Vec<u32>,
    rows: &mut [u32],
) {
    let np = perms.len();
    debug_assert_eq!(rows.len(), docs.len() * np);
    xs.clear();
    kernel::hash_docs(batch, docs.clone(), k, xs);
    let mut at = 0;
    REPEATS.with_borrow_mut(|filter| {
        for (d, row) in docs.zip(rows.chunks_exact_mut(np)) {
            let n = batch.shingle_count(d, k);
            row.fill(P);
            // A long document's repeated shingles are mostly dropped first.
            let doc = &mut xs[at..at + n];
            let fresh = if n >= kernel::REPEAT_FILTER_MIN_SHINGLES {
                filter.keep_first_seen(doc)
            } else {
                n
            };
            kernel::permute_min(&doc[..fresh], &perms.a, &perms.b, row);
            at += n;
        }
    });
    debug_assert_eq!(at, xs.len());
}

thread_local! {
    /// Per-thread table of [`sign_docs`]'s repeat filter.
    static REPEATS: std::cell::RefCell<kernel::RepeatFilter> = Default::default();
    /// Per-thread shingle hashes of one part of a split document.
    static PART_XS: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parts_cover_every_shingle_once_in_order() {
        for count in [
            0,
            1,
            SPLIT_PART_SHINGLES - 1,
            SPLIT_PART_SHINGLES,
            SPLIT_PART_SHINGLES + 1,
            SPLIT_DOC_SHINGLES,
            3 * SPLIT_PART_SHINGLES + 5,
            1_000_003,
        ] {
            let parts: Vec<(usize, usize)> = split_parts(count).collect();
            assert_eq!(parts[0].0, 0);
            assert_eq!(parts.last().unwrap().1, count);
            assert!(parts.windows(2).all(|w| w[0].1 == w[1].0), "{count}");
            assert!(parts
                .iter()
                .all(|&(s, e)| (count == 0 || s < e) && e - s <= SPLIT_PART_SHINGLES));
        }
    }

    /// Through the record path (parse, tokenize and sign per piece, several threads): pieces
    /// holding documents signed in parts, among small ones, equal the oracle. The parts run on
    /// the pool while their piece's thread waits, and that thread may meanwhile sign another
    /// piece with the per-thread scratch.
    #[test]
    fn records_with_documents_signed_in_parts_conform() {
        let params = MinHashParams::new(5, 64, 3).unwrap();
        let perms = crate::perm_params(params.num_perm, params.seed);
        let big = |n: usize, salt: usize| -> String {
            (0..n)
                .map(|i| format!("b{}y{}", i % 101, (i * 7 + salt) % 2039))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut texts = Vec::new();
        for i in 0..200 {
            texts.push(format!("small document number {i} with a few words in it"));
            if i % 25 == 3 {
                texts.push(big(SPLIT_DOC_SHINGLES + 4 + 1000 * i, i));
            }
        }
        let mut data = Vec::new();
        let mut lines = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let start = data.len();
            serde_json::to_writer(
                &mut data,
                &serde_json::json!({"id": i.to_string(), "text": t}),
            )
            .unwrap();
            lines.push((start, data.len(), i as u64 + 1));
            data.push(b'\n');
        }
        let chunk = Chunk {
            file_index: 0,
            data: data.into(),
            lines,
        };
        let fields = Fields {
            id: "id".into(),
            text: "text".into(),
            numeric_ids: false,
        };
        let want: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| crate::minhash(crate::shingles(t, params.k), &perms))
            .collect();
        // Whether a thread meets a piece while it waits for a part depends on timing: several
        // rounds make it likely (a borrowed scratch then panics).
        for threads in [1, 2, 3, 4].into_iter().chain([2, 3].repeat(4)) {
            let engine = CpuEngine::new(params, threads).unwrap();
            let got = engine.sign_chunk(&chunk, &fields, "t", false).unwrap();
            assert_eq!(got.len(), texts.len());
            for (d, want) in want.iter().enumerate() {
                assert_eq!(
                    &got.sigs[d * params.num_perm..(d + 1) * params.num_perm],
                    &want[..],
                    "{threads} threads, document {d}"
                );
            }
        }
    }
}
