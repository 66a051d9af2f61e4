//! The CPU engine: rayon over documents, one signature row per task. It is the reference the GPU
//! engine is checked against, so it stays plain: the SPEC's arithmetic on native `u64`.
//!
//! Each row depends on its document alone, so the matrix is the same for every thread count and
//! batch split.

use rayon::prelude::*;

use super::{check_output, Engine, EngineError, EngineInfo};
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

    fn fuses_parsing(&self) -> bool {
        true
    }

    /// Cut the chunk's lines into pieces and, per piece on its own thread, parse each record,
    /// tokenize it into a piece-local batch and sign it while the text is still in cache.
    fn sign_records(
        &mut self,
        chunk: &Chunk,
        fields: &Fields,
        name: &str,
        want_exact_keys: bool,
    ) -> Result<ScannedChunk, crate::Error> {
        let (k, np) = (self.params.k, self.params.num_perm);
        let perms = &self.perms;
        let n = chunk.len();
        self.install(|| {
            let pieces = (rayon::current_num_threads() * 4).clamp(1, n.max(1));
            let per = n.div_ceil(pieces).max(1);
            let starts: Vec<usize> = (0..n).step_by(per).collect();
            let parts: Vec<Result<ScannedChunk, crate::Error>> = starts
                .into_par_iter()
                .map(|start| {
                    let end = (start + per).min(n);
                    let mut batch = PackedBatch::new();
                    let mut part = ScannedChunk {
                        file_index: chunk.file_index,
                        ..Default::default()
                    };
                    for i in start..end {
                        let rec = parse_record(chunk.line(i), fields, name, chunk.line_no(i))?;
                        batch.push_text(&rec.text);
                        part.ids.push(&rec.id);
                        part.lines.push(chunk.line_no(i));
                        part.text_bytes += rec.text.len() as u64;
                    }
                    let docs = batch.num_docs();
                    part.sigs = vec![0u32; docs * np];
                    let mut xs = Vec::new();
                    for (d, row) in part.sigs.chunks_exact_mut(np).enumerate() {
                        sign_doc(&batch, d, k, perms, &mut xs, row);
                    }
                    part.words = (0..docs).map(|d| batch.doc_words(d).len() as u32).collect();
                    part.shingles = batch.total_shingles(k) as u64;
                    if want_exact_keys {
                        part.exact_keys = (0..docs)
                            .map(|d| xxhash_rust::xxh3::xxh3_128(batch.doc_bytes(d)))
                            .collect();
                    }
                    Ok(part)
                })
                .collect();
            let mut out = ScannedChunk {
                file_index: chunk.file_index,
                raw_bytes: chunk.data.len() as u64,
                ..Default::default()
            };
            for p in parts {
                out.append(p?);
            }
            Ok(out)
        })
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
            out.par_chunks_mut(n)
                .enumerate()
                .with_min_len(4)
                .for_each_init(Vec::new, |xs, (d, row)| {
                    sign_doc(batch, d, k, perms, xs, row);
                });
        });
        Ok(())
    }
}

/// One document's signature into `row`, with `xs` as scratch for its shingle hashes.
pub(crate) fn sign_doc(
    batch: &PackedBatch,
    d: usize,
    k: usize,
    perms: &PermParams,
    xs: &mut Vec<u32>,
    row: &mut [u32],
) {
    row.fill(P);
    xs.clear();
    kernel::hash_shingles(batch, d, k, xs);
    // Repeated shingles are permuted again rather than sorted out: in real text they are too
    // few for a sort to pay for itself.
    kernel::permute_min(xs, &perms.a, &perms.b, row);
}
