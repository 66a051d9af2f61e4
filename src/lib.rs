//! neardup: near-duplicate removal and benchmark decontamination for text corpora.
//!
//! Texts become sets of word shingles ([`text`]); MinHash signatures ([`mod@minhash`], with the hash
//! family in [`hash`]) estimate their Jaccard similarity; LSH banding ([`lsh`]) proposes
//! candidate pairs, confirmation keeps the true ones and union-find ([`unionfind`]) makes
//! clusters whose root is the smallest id ([`dedup`]). [`decontam`] drops documents that share a
//! word 13-gram with a protected eval set.
//!
//! Signatures come from an [`engine::Engine`]: the CPU engine (rayon, the oracle) or the GPU
//! engine (wgpu compute shaders). Both follow `SPEC.md`'s contract bit for bit.

pub mod batch;
pub mod bench;
pub mod cli;
pub mod decontam;
pub mod dedup;
pub mod engine;
#[cfg(test)]
mod guarded;
pub mod hash;
pub mod html;
pub mod io;
mod jsonscan;
pub mod kernel;
pub mod lsh;
pub mod minhash;
pub mod pipeline;
pub mod progress;
pub mod report;
pub mod sigfile;
pub mod synth;
pub mod text;
pub mod unionfind;

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

pub use batch::PackedBatch;
pub use decontam::{contaminated, protected_ngrams, Decontaminator, ProtectedSet};
pub use dedup::{clusters, Clustering, Confirm, DedupConfig};
pub use engine::{CpuEngine, Engine, EngineChoice, GpuEngine};
pub use hash::{fnv1a64, perm_params, shingle_hash, Pcg32, PermParams, P};
pub use lsh::{Lsh, LshParams};
pub use minhash::{estimate, minhash, MinHashParams, Signature, CONTRACT_VERSION};
pub use text::{jaccard, shingles, words};
pub use unionfind::UnionFind;

/// Everything the library can fail with. Messages name the file, line and field where there
/// is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is out of range or inconsistent (`num_perm != bands * rows`, `k = 0`, ...).
    #[error("invalid parameters: {0}")]
    Param(String),
    /// Two signatures that cannot be compared (different length or parameters).
    #[error("incomparable signatures: {0}")]
    Incomparable(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A line is not a JSON object (or not JSON at all).
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: String,
        line: u64,
        msg: String,
    },
    /// A record's field is missing or of the wrong type.
    #[error("{path}:{line}: field `{field}` {msg}")]
    Field {
        path: String,
        line: u64,
        field: String,
        msg: String,
    },
    /// The same id twice (in one input or across inputs).
    #[error("repeated id {id:?}: at {first} and again at {second}; ids must be unique across all inputs")]
    DuplicateId {
        id: String,
        first: String,
        second: String,
    },
    /// An LSH index was misused (repeated id, wrong signature length).
    #[error("lsh: {0}")]
    Lsh(String),
    /// A signature file does not match what it is loaded for.
    #[error("{path}: {msg}")]
    SignatureFile { path: String, msg: String },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// The run would need more memory than allowed.
    #[error("{0}")]
    Memory(String),
    /// An output names an input or another output of the same run (refused before any work).
    #[error("{0}")]
    Output(String),
}

impl Error {
    pub(crate) fn io(path: &str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_string(),
            source,
        }
    }

    /// A missing GPU adapter's message, with what to do instead where the user is (`hint`);
    /// any other error unchanged.
    pub fn with_hint(self, hint: &str) -> Self {
        match self {
            Error::Engine(engine::EngineError::NoAdapter(m)) => {
                Error::Engine(engine::EngineError::NoAdapter(format!("{m}; {hint}")))
            }
            e => e,
        }
    }

    /// Is this a broken pipe on an output (a reader that went away, as `| head` does)? That is
    /// not a failure of ours.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
