//! Near-dedup (SPEC §3) and the exact-dedup pre-pass: from signatures to clusters, and the
//! two-pass file pipeline that never holds the corpus text in memory.
//!
//! Pass 1 ([`crate::pipeline::scan`]) keeps per document only its id, where it was read, its word
//! count, its signature and (with `--exact`) a 128-bit key of its words. Candidates come from LSH
//! buckets, confirmed bucket by bucket ([`confirm_bucket`]); `jaccard` confirmation re-reads the inputs once for the shingle sets of the
//! documents that sit in some bucket (and only those). Pass 2 re-reads the inputs and streams the
//! survivors (or everyone, tagged) to the output.

mod against;
mod api;
mod cluster;
mod config;
mod confirm;
mod greedy;
mod inspect;
mod run;
mod sample;

pub use against::*;
pub use api::*;
pub use cluster::*;
pub use config::*;
pub use confirm::*;
pub use inspect::*;
pub use run::*;
pub use sample::*;

#[cfg(feature = "parquet")]
pub(crate) use greedy::INDEX_FROM;
