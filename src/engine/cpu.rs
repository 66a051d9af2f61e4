//! The CPU engine: rayon over documents, one signature row per task. It is the reference the GPU
//! engine is checked against, so it stays plain: the SPEC's arithmetic on native `u64`.
//!
//! Each row depends on its document alone, so the matrix is the same for every thread count and
//! batch split.

use rayon::prelude::*;

use super::{check_output, Engine, EngineError, EngineInfo};
use crate::batch::PackedBatch;
use crate::hash::{PermParams, P};
use crate::kernel;
use crate::minhash::MinHashParams;

/// MinHash on the CPU.
pub struct CpuEngine {
    params: MinHashParams,
    perms: PermParams,
    pool: rayon::ThreadPool,
}

impl CpuEngine {
    /// An engine with its own pool of `threads` workers (0: one per core).
    pub fn new(params: MinHashParams, threads: usize) -> Result<Self, crate::Error> {
        params.validate()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("neardup-cpu-{i}"))
            .build()
            .map_err(|e| crate::Error::Param(format!("cannot start {threads} threads: {e}")))?;
        Ok(CpuEngine {
            perms: params.perms(),
            params,
            pool,
        })
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Run `f` on this engine's thread pool (so callers' own rayon work obeys `--threads`).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
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

    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError> {
        let n = self.params.num_perm;
        check_output(batch, n, out)?;
        if out.is_empty() {
            return Ok(());
        }
        let k = self.params.k;
        let perms = &self.perms;
        self.pool.install(|| {
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
    if xs.is_empty() {
        return;
    }
    // Repeated shingles cannot lower a minimum; dropping them saves permutation work.
    xs.sort_unstable();
    xs.dedup();
    kernel::permute_min(xs, &perms.a, &perms.b, row);
}
