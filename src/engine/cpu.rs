//! The CPU engine: rayon over documents, one signature row per task. It is the reference the GPU
//! engine is checked against, so it stays plain: the SPEC's arithmetic on native `u64`.
//!
//! Each row depends on its document alone, so the matrix is the same for every thread count and
//! batch split.

use rayon::prelude::*;

use super::{check_output, split_lens, Engine, EngineError, EngineInfo, RecordSigner};
use crate::batch::PackedBatch;
use crate::corpus::ScannedChunk;
use crate::hash::PermParams;
use crate::io::Chunk;
use crate::jsonl::Fields;
use crate::sign::docs::sign_docs;
use crate::sign::minhash::MinHashParams;

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
    pub fn new(params: MinHashParams, threads: usize) -> Result<Self, crate::error::Error> {
        params.validate()?;
        let pool = if threads == 0 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("neardup-cpu-{i}"))
                    .start_handler(|_| crate::sys::threads::register_current_thread())
                    .build()
                    .map_err(|e| {
                        crate::error::Error::Param(format!("cannot start {threads} threads: {e}"))
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
            detail: format!(
                "{} threads, {}",
                self.threads(),
                crate::sign::permute::describe()
            ),
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

    fn sign_texts(&mut self, texts: &[&str], out: &mut [u32]) -> Result<(), EngineError> {
        super::check_rows(texts.len(), self.params.num_perm, out)?;
        self.sign_text_pieces(texts, out);
        Ok(())
    }
}

impl CpuEngine {
    /// [`Engine::sign_texts`] on all the engine's threads: pieces of about equal bytes, each
    /// tokenized into a per-thread batch and signed while its text is in cache, rows written
    /// in place.
    fn sign_text_pieces(&self, texts: &[&str], out: &mut [u32]) {
        let (k, np) = (self.params.k, self.params.num_perm);
        let (perms, rule) = (&self.perms, self.params.rule());
        self.install(|| {
            let ranges = split_lens(texts, rayon::current_num_threads() * 8);
            let mut slots: Vec<(usize, usize, &mut [u32])> = Vec::with_capacity(ranges.len());
            let mut rest: &mut [u32] = out;
            for &(start, end) in &ranges {
                let (head, tail) = rest.split_at_mut((end - start) * np);
                slots.push((start, end, head));
                rest = tail;
            }
            slots.into_par_iter().for_each(|(start, end, rows)| {
                // Taken out of the cell, not borrowed: see `sign_chunk`.
                let (mut batch, mut xs) = SCRATCH.take();
                batch.clear();
                batch.rule = rule;
                for t in &texts[start..end] {
                    batch.push_text(t);
                }
                sign_docs(&batch, 0..end - start, k, perms, &mut xs, rows);
                SCRATCH.set((batch, xs));
            });
        });
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
    ) -> Result<ScannedChunk, crate::error::Error> {
        let (k, np) = (self.params.k, self.params.num_perm);
        let (perms, rule) = (&self.perms, self.params.rule());
        let n = chunk.len();
        // Every line is one record, so the signature matrix can be laid out before parsing and
        // each piece writes its rows in place. Tokenizer and hash scratch live per thread and
        // are reused: fresh multi-megabyte buffers per piece cost page faults (and, freed,
        // TLB shootdowns across cores) that outweighed the hashing.
        let mut out = ScannedChunk {
            file_index: chunk.file_index,
            raw_bytes: chunk.raw_bytes(),
            sigs: crate::corpus::signature_rows(n * np),
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
            let parts: Vec<Result<ScannedChunk, crate::error::Error>> = slots
                .into_par_iter()
                .map(|(start, end, sigs)| {
                    // The scratch is taken out of its cell, not borrowed in place: a split
                    // document's parts run on the pool, and while this thread waits for them it
                    // may run another piece, which takes the scratch in turn (finding it empty).
                    let (mut batch, mut xs) = SCRATCH.take();
                    let r = (|| {
                        let (batch, xs) = (&mut batch, &mut xs);
                        batch.clear();
                        batch.rule = rule;
                        let mut part = ScannedChunk::default();
                        for i in start..end {
                            let rec = crate::corpus::record(chunk, i, fields, name)?;
                            if fields.keep.is_some() || fields.group.is_some() {
                                part.extras
                                    .push(crate::corpus::record_extras(chunk, i, fields, name)?);
                            }
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
    let total: usize = (0..n).map(|i| chunk.record_bytes(i)).sum();
    let target = total.div_ceil(pieces.max(1)).max(1);
    let mut out = Vec::with_capacity(pieces);
    let (mut start, mut acc) = (0, 0);
    for i in 0..n {
        acc += chunk.record_bytes(i);
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
pub const DOCS_PER_TASK: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::docs::SPLIT_DOC_SHINGLES;

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
            rows: None,
        };
        let fields = Fields {
            id: "id".into(),
            text: "text".into(),
            numeric_ids: false,
            ..Default::default()
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
