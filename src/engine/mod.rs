//! The engine seam: one trait that turns a [`PackedBatch`] into a `[docs x num_perm]` u32
//! signature matrix, with a CPU implementation (the oracle) and a GPU one. Both produce the same
//! bits for every batch; the conformance suite in `tests/it/conformance.rs` holds them to it.

pub mod auto;
pub mod cpu;
#[cfg(feature = "gpu")]
pub mod gpu;
/// Without the `gpu` feature: the same names, and an error naming the feature.
#[cfg(not(feature = "gpu"))]
#[path = "gpu_absent.rs"]
pub mod gpu;
pub mod gpu_options;

use crate::batch::PackedBatch;
use crate::sign::minhash::MinHashParams;

pub use cpu::CpuEngine;
pub use gpu::{GpuEngine, GpuOptions};

/// What an engine reports about itself (for summaries, reports and `bench`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineInfo {
    /// `cpu` or `gpu`.
    pub kind: &'static str,
    /// For the CPU engine the thread count, for the GPU engine the adapter name and backend.
    pub detail: String,
    /// With `--engine auto`: what it chose and why (`auto chose cpu: ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<String>,
}

impl EngineInfo {
    /// The engine and, where `auto` chose it, why: for summary lines. ([`Display`] is the
    /// engine alone, as signature files record it.)
    ///
    /// [`Display`]: std::fmt::Display
    pub fn summary(&self) -> String {
        match &self.auto {
            Some(why) => format!("{self}; {why}"),
            None => self.to_string(),
        }
    }
}

impl std::fmt::Display for EngineInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.kind, self.detail)
    }
}

pub use crate::error::EngineError;

/// A MinHash signature engine.
pub trait Engine: Send {
    /// The parameters every signature from this engine is made with.
    fn params(&self) -> &MinHashParams;

    /// Name and details, for reports.
    fn info(&self) -> EngineInfo;

    /// Signatures of a packed batch, one row of `num_perm` u32 per document, in batch order.
    /// `out.len()` must be `batch.num_docs() * num_perm`.
    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError>;

    /// Raw JSONL bytes per chunk this engine likes to receive (a GPU wants bigger batches).
    fn preferred_chunk_bytes(&self) -> usize {
        crate::batch::DEFAULT_CHUNK_BYTES
    }

    /// An engine that can sign pieces of batches from many threads at once returns itself
    /// here. The CPU engine does: the pipeline then tokenizes a piece of a chunk on a worker
    /// and signs it there while the text is in cache, and workers never wait between chunks.
    /// Others (the GPU) get whole chunks' batches, tokenized ahead, one job at a time.
    fn piece_signer(&self) -> Option<&dyn PieceSigner> {
        None
    }

    /// Signatures of in-memory texts into `out` (`texts.len() * num_perm`), in order: packed
    /// in batches of about [`preferred_chunk_bytes`](Engine::preferred_chunk_bytes) of text,
    /// each signed with [`sign`](Engine::sign). Both engines override it: the CPU engine
    /// tokenizes and signs pieces on all its threads, the GPU engine tokenizes each chunk on
    /// the pool while the previous one is on the device.
    fn sign_texts(&mut self, texts: &[&str], out: &mut [u32]) -> Result<(), EngineError> {
        let np = self.params().num_perm;
        check_rows(texts.len(), np, out)?;
        let limit = self.preferred_chunk_bytes().max(1);
        let mut batch = PackedBatch::with_rule(self.params().rule());
        let mut first = 0;
        for (i, t) in texts.iter().enumerate() {
            batch.push_text(t);
            if batch.bytes.len() >= limit || i + 1 == texts.len() {
                self.sign(&batch, &mut out[first * np..(i + 1) * np])?;
                batch.clear();
                first = i + 1;
            }
        }
        Ok(())
    }

    /// Signatures of the documents of `parts`, part after part, into `out` (`num_perm` u32 a
    /// document). Parts are batches tokenized side by side; an engine that can, signs them
    /// without joining them.
    fn sign_parts(&mut self, parts: &[PackedBatch], out: &mut [u32]) -> Result<(), EngineError> {
        let np = self.params().num_perm;
        let docs: usize = parts.iter().map(|b| b.num_docs()).sum();
        check_rows(docs, np, out)?;
        let mut at = 0;
        for b in parts {
            let n = b.num_docs() * np;
            self.sign(b, &mut out[at..at + n])?;
            at += n;
        }
        Ok(())
    }

    /// An engine that keeps several jobs in flight (the GPU) returns itself here.
    fn streamer(&mut self) -> Option<&mut dyn StreamSigner> {
        None
    }

    /// Convenience: sign into a fresh matrix.
    fn sign_vec(&mut self, batch: &PackedBatch) -> Result<Vec<u32>, EngineError> {
        let mut out = vec![0u32; batch.num_docs() * self.params().num_perm];
        self.sign(batch, &mut out)?;
        Ok(out)
    }
}

/// A job for a [`StreamSigner`]: the parts of one chunk, and the matrix their signatures go
/// into (`num_perm` u32 a document, part after part).
#[derive(Debug, Default)]
pub struct SignJob {
    pub parts: Vec<PackedBatch>,
    pub sigs: Vec<u32>,
}

/// Signs jobs handed in one after another, several in flight at once: each call hands back
/// the jobs finished so far, always in the order they came in.
pub trait StreamSigner {
    /// Hand in the next job; returns the jobs now finished (possibly none).
    fn submit(&mut self, job: SignJob) -> Result<Vec<SignJob>, EngineError>;
    /// Finish every job handed in; returns them.
    fn finish(&mut self) -> Result<Vec<SignJob>, EngineError>;
    /// Where the parts of finished jobs go to be tokenized into again, when the engine keeps
    /// them from one run to the next (`None`: each run keeps its own).
    fn spare_parts(&self) -> Option<std::sync::Arc<crate::batch::SpareParts>> {
        None
    }
}

/// Signs documents of tokenized batches, callable from many threads at once. It knows
/// batches only: records, fields and what a dedup keeps are the pipeline's.
pub trait PieceSigner: Sync {
    /// Run `f` on the engine's threads (where [`sign_piece`](PieceSigner::sign_piece) is meant
    /// to be called).
    fn run(&self, f: &mut (dyn FnMut() + Send));

    /// Signatures of documents `docs` of `batch` into `out` (`num_perm` u32 a document), with
    /// `xs` as the caller's reusable shingle-hash scratch; with `sets`, each document's
    /// shingle set (sorted 64-bit FNV-1a values) appended to it, from the same hashing. A long
    /// document may be signed in parts on the engine's other threads meanwhile.
    fn sign_piece(
        &self,
        batch: &PackedBatch,
        docs: std::ops::Range<usize>,
        xs: &mut Vec<u32>,
        out: &mut [u32],
        sets: Option<&mut Vec<Vec<u64>>>,
    );
}

/// Check `out` has room for exactly the batch's signatures.
pub(crate) fn check_output(
    batch: &PackedBatch,
    num_perm: usize,
    out: &[u32],
) -> Result<(), EngineError> {
    check_rows(batch.num_docs(), num_perm, out)
}

/// Check `out` has room for exactly `docs` signatures.
pub(crate) fn check_rows(docs: usize, num_perm: usize, out: &[u32]) -> Result<(), EngineError> {
    let expected = docs * num_perm;
    if out.len() != expected {
        return Err(EngineError::OutputSize {
            got: out.len(),
            expected,
            docs,
            num_perm,
        });
    }
    Ok(())
}

/// Whether the device directory `dev` holds a node through which a hardware GPU is reached
/// on Linux: a DRM render or card node (`dri/renderD*`, `dri/card*`: Mesa's and AMD's
/// drivers), an NVIDIA node (`nvidia*`), or WSL's `dxg`. `None` where that cannot be told
/// (not Linux, or `dev` unreadable): then the adapters are searched.
///
/// Searching loads every installed Vulkan and GL driver (Mesa's software ones pull in LLVM),
/// a noticeable part of a short `signatures` run (docs/BENCHMARKS.md), wasted on a machine
/// that has no GPU at all, where `auto` could only ever end on the CPU engine.
pub fn gpu_device_nodes(dev: &std::path::Path) -> Option<bool> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let names = |d: &std::path::Path| -> Option<Vec<String>> {
        Some(
            std::fs::read_dir(d)
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        )
    };
    let top = names(dev)?;
    if top.iter().any(|n| n.starts_with("nvidia") || n == "dxg") {
        return Some(true);
    }
    let dri = names(&dev.join("dri")).unwrap_or_default();
    Some(
        dri.iter()
            .any(|n| n.starts_with("renderD") || n.starts_with("card")),
    )
}

/// Cut `texts` into at most `pieces` contiguous ranges of about equal bytes (a range never
/// passes 1 GiB, within a packed batch's 4 GiB limit).
pub(crate) fn split_lens(texts: &[&str], pieces: usize) -> Vec<(usize, usize)> {
    let total: usize = texts.iter().map(|t| t.len() + 1).sum();
    let target = total.div_ceil(pieces.max(1)).clamp(1, 1 << 30);
    let mut out = Vec::with_capacity(pieces);
    let (mut start, mut acc) = (0, 0);
    for (i, t) in texts.iter().enumerate() {
        acc += t.len() + 1;
        if acc >= target {
            out.push((start, i + 1));
            start = i + 1;
            acc = 0;
        }
    }
    if start < texts.len() {
        out.push((start, texts.len()));
    }
    out
}

/// Which engine to use, as chosen on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineChoice {
    /// The faster engine for the run: a hardware GPU where it signs faster than the CPU
    /// engine, else the CPU engine ([`auto`]).
    #[default]
    Auto,
    /// The CPU engine (rayon).
    Cpu,
    /// The GPU engine; a software adapter (llvmpipe) is accepted.
    Gpu,
}

crate::named!(
    EngineChoice,
    "engine",
    [
        (
            "auto",
            EngineChoice::Auto,
            "The faster engine for the run: a hardware GPU where it signs faster, else the CPU engine"
        ),
        ("cpu", EngineChoice::Cpu, "The CPU engine (rayon)"),
        (
            "gpu",
            EngineChoice::Gpu,
            "The GPU engine; a software adapter (llvmpipe) is accepted"
        ),
    ]
);

/// Build the engine `choice` asks for. `threads` sizes the CPU engine (0: all cores); `gpu`
/// finds and sizes the GPU (its `input_bytes`, when known, also informs `Auto`). `Auto` takes
/// the faster engine for this run ([`auto`]), and its info says which and why.
pub fn build_engine(
    choice: EngineChoice,
    params: MinHashParams,
    threads: usize,
    gpu: &GpuOptions,
) -> Result<Box<dyn Engine>, crate::error::Error> {
    match choice {
        EngineChoice::Cpu => Ok(Box::new(CpuEngine::new(params, threads)?)),
        EngineChoice::Gpu => {
            let g = GpuEngine::new(params, gpu).map_err(|e| {
                e.with_hint("or use --engine cpu (the same signatures, bit for bit)")
            })?;
            #[cfg(feature = "gpu")]
            auto::debug_startup(&g);
            Ok(Box::new(g))
        }
        EngineChoice::Auto => auto::choose(params, threads, gpu),
    }
}

#[cfg(test)]
mod tests {
    use super::{gpu_device_nodes, split_lens};

    /// The pieces cover every text once, in order, and never more pieces than asked.
    #[test]
    fn text_pieces_cover_every_text_in_order() {
        let long = "x".repeat(10_000);
        for n in [0usize, 1, 2, 3, 7, 8, 9, 100] {
            for pieces in [1usize, 2, 8, 16, 1000] {
                for big_at in [None, Some(0), Some(n / 2)] {
                    let texts: Vec<&str> = (0..n)
                        .map(|i| {
                            if Some(i) == big_at {
                                long.as_str()
                            } else {
                                "a b c"
                            }
                        })
                        .collect();
                    let r = split_lens(&texts, pieces);
                    assert!(
                        r.len() <= pieces.max(1),
                        "{n} texts, {pieces} pieces: {r:?}"
                    );
                    let mut next = 0;
                    for &(a, b) in &r {
                        assert_eq!(a, next, "{r:?}");
                        assert!(b > a, "{r:?}");
                        next = b;
                    }
                    assert_eq!(next, n, "{r:?}");
                }
            }
        }
    }

    #[test]
    fn gpu_device_nodes_are_told_apart_from_a_machine_without_any() {
        if !cfg!(target_os = "linux") {
            assert_eq!(gpu_device_nodes(std::path::Path::new("/dev")), None);
            return;
        }
        let dev = tempfile::tempdir().unwrap();
        let touch = |p: &str| {
            let p = dev.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        };
        touch("null");
        touch("tty0");
        assert_eq!(
            gpu_device_nodes(dev.path()),
            Some(false),
            "no dri, no nvidia"
        );
        std::fs::create_dir(dev.path().join("dri")).unwrap();
        assert_eq!(gpu_device_nodes(dev.path()), Some(false), "an empty dri");
        touch("dri/renderD128");
        assert_eq!(gpu_device_nodes(dev.path()), Some(true));
        let only = |name: &str| {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
            gpu_device_nodes(d.path())
        };
        assert_eq!(only("dri/card0"), Some(true));
        assert_eq!(only("nvidia0"), Some(true));
        assert_eq!(only("nvidiactl"), Some(true));
        assert_eq!(only("dxg"), Some(true));
        assert_eq!(only("video0"), Some(false));
        assert_eq!(gpu_device_nodes(&dev.path().join("missing")), None);
    }
}
