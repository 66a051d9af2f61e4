//! The CPU engine: rayon over documents, one signature row per task. It is the reference the GPU
//! engine is checked against, so it stays plain: the SPEC's arithmetic on native `u64`.
//!
//! Each row depends on its document alone, so the matrix is the same for every thread count and
//! batch split.

use rayon::prelude::*;

use std::ops::Range;

use super::{check_output, split_lens, Engine, EngineError, EngineInfo, PieceSigner};
use crate::batch::{with_scratch, PackedBatch};
use crate::hash::PermParams;
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
            auto: None,
        }
    }

    fn piece_signer(&self) -> Option<&dyn PieceSigner> {
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
                    sign_docs(batch, d0..d0 + rows.len() / n, k, perms, xs, rows, None);
                });
        });
        Ok(())
    }

    fn sign_texts(&mut self, texts: &[&str], out: &mut [u32]) -> Result<(), EngineError> {
        super::check_rows(texts.len(), self.params.num_perm, out)?;
        self.sign_text_pieces(texts, out, None);
        Ok(())
    }
}

impl CpuEngine {
    /// [`Engine::sign_texts`], and each text's shingle set (sorted 64-bit FNV-1a values)
    /// appended to `sets`, in order: the set comes from the values the signature is taken
    /// from, so each shingle is hashed once for both.
    pub fn sign_texts_and_sets(
        &self,
        texts: &[&str],
        out: &mut [u32],
        sets: &mut Vec<Vec<u64>>,
    ) -> Result<(), EngineError> {
        super::check_rows(texts.len(), self.params.num_perm, out)?;
        self.sign_text_pieces(texts, out, Some(sets));
        Ok(())
    }

    /// [`Engine::sign_texts`] on all the engine's threads: pieces of about equal bytes, each
    /// tokenized into a per-thread batch and signed while its text is in cache, rows written
    /// in place; with `sets`, each piece's shingle sets appended to it in the texts' order.
    fn sign_text_pieces(&self, texts: &[&str], out: &mut [u32], sets: Option<&mut Vec<Vec<u64>>>) {
        let (k, np) = (self.params.k, self.params.num_perm);
        let (perms, rule) = (&self.perms, self.params.rule());
        let want_sets = sets.is_some();
        let pieces: Vec<Vec<Vec<u64>>> = self.install(|| {
            let ranges = split_lens(texts, rayon::current_num_threads() * 8);
            let mut slots: Vec<(usize, usize, &mut [u32])> = Vec::with_capacity(ranges.len());
            let mut rest: &mut [u32] = out;
            for &(start, end) in &ranges {
                let (head, tail) = rest.split_at_mut((end - start) * np);
                slots.push((start, end, head));
                rest = tail;
            }
            slots
                .into_par_iter()
                .map(|(start, end, rows)| {
                    let mut piece = Vec::new();
                    with_scratch(|batch, xs| {
                        batch.clear();
                        batch.rule = rule;
                        for t in &texts[start..end] {
                            batch.push_text(t);
                        }
                        let sets = want_sets.then_some(&mut piece);
                        sign_docs(batch, 0..end - start, k, perms, xs, rows, sets);
                    });
                    piece
                })
                .collect()
        });
        if let Some(sets) = sets {
            sets.reserve(texts.len());
            sets.extend(pieces.into_iter().flatten());
        }
    }
}

impl PieceSigner for CpuEngine {
    fn run(&self, f: &mut (dyn FnMut() + Send)) {
        self.install(f)
    }

    fn sign_piece(
        &self,
        batch: &PackedBatch,
        docs: Range<usize>,
        xs: &mut Vec<u32>,
        out: &mut [u32],
        sets: Option<&mut Vec<Vec<u64>>>,
    ) {
        sign_docs(batch, docs, self.params.k, &self.perms, xs, out, sets);
    }
}

/// Documents per rayon task of [`CpuEngine::sign`]: enough that the hasher's lockstep blocks
/// are seldom partial, few enough that the tasks balance.
pub const DOCS_PER_TASK: usize = 16;
