//! neardup: near-duplicate removal and benchmark decontamination for text corpora.
//!
//! Texts become sets of word shingles ([`text`]); MinHash signatures ([`sign::minhash`], with
//! the hash family in [`hash`]) estimate their Jaccard similarity; LSH banding
//! ([`index::lsh`]) proposes candidate pairs, confirmation keeps the true ones and union-find
//! ([`index::unionfind`]) makes clusters whose root is the smallest id
//! ([`stages::dedup`]). [`stages::decontam`] drops documents that share a word 13-gram with a
//! protected eval set.
//!
//! Signatures come from an [`engine::Engine`]: the CPU engine (rayon, the oracle) or the GPU
//! engine (wgpu compute shaders). Both follow the contract of `docs/SPEC.md` bit for bit.
//!
//! The stable API is what this root re-exports. The modules are public for the project's own
//! binary, tests and benchmarks, and their paths may change between versions.
//!
//! The modules form layers, each importing only those below it (a test guards it):
//! [`options`] (defaults and option names), [`simd`], [`sys`], [`text`], [`hash`], [`batch`],
//! [`sign`], [`engine`] (batches in, signatures out: no records), [`io`], [`jsonl`], [`ids`],
//! [`corpus`], [`index`], [`progress`], [`pipeline`], [`stages`], [`report`], [`ops`] (the
//! options layer both front ends share), with
//! [`synth`] (seeded corpora for tests and benchmarks, which the library itself never uses)
//! beside them.
//!
//! Two Cargo features, both on by default, carry the heavy dependencies: `gpu` (wgpu: the GPU
//! engine) and `parquet` (arrow and parquet: Parquet inputs, outputs and signature files, and
//! the sharded stages' tables). A build without one says so, naming the feature, wherever it is
//! needed.

pub mod batch;
pub mod corpus;
pub mod engine;
mod error;
#[cfg(test)]
mod guarded;
pub mod hash;
pub mod ids;
pub mod index;
pub mod io;
pub mod jsonl;
pub mod ops;
pub mod options;
pub mod pipeline;
pub mod progress;
pub mod report;
pub mod sign;
pub mod simd;
pub mod stages;
pub mod synth;
pub mod sys;
pub mod text;

pub use batch::PackedBatch;
pub use engine::{CpuEngine, Engine, EngineChoice, GpuEngine};
pub use error::{Error, Result};
pub use hash::{fnv1a64, perm_params, shingle_hash, Pcg32, PermParams, P};
pub use index::lsh::{Lsh, LshParams};
pub use index::unionfind::UnionFind;
pub use sign::minhash::{estimate, minhash, MinHashParams, Signature, CONTRACT_VERSION};
pub use stages::decontam::{contaminated, protected_ngrams, Decontaminator, ProtectedSet};
pub use stages::dedup::{clusters, Clustering, Confirm, DedupConfig};
pub use text::{jaccard, shingles, words};

/// What the unit tests of several modules share.
#[cfg(test)]
mod testsupport {
    /// A SIMD path this CPU does not run (it lacks the instructions, or `NEARDUP_KERNEL=scalar`):
    /// fail when `require` says the machine must run it (`NEARDUP_REQUIRE_SIMD` for the AVX2
    /// paths, `NEARDUP_REQUIRE_AVX512` for the AVX-512 F/BW/DQ ones, and
    /// `NEARDUP_REQUIRE_AVX512_VBMI2` for the two that also need VBMI2), else say loudly that
    /// `what` is not tested. One variable per set of instructions, so that a CPU with AVX-512
    /// but no VBMI2 (Skylake-X, Cascade Lake) can still require the paths it has.
    pub(crate) fn untested(what: &str, require: &str) {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but {what} does not run here"
        );
        eprintln!("!!! {what} NOT TESTED: this CPU lacks it (or NEARDUP_KERNEL=scalar) !!!");
    }
}
