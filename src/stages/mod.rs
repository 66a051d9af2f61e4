//! The jobs a user runs over a corpus: near-dedup ([`dedup`]), the same cut into stages over
//! files for corpora past one machine's memory ([`sharded`]), and decontamination
//! ([`decontam`]), over files or documents in memory, where they write what they keep
//! ([`sink`]) and which documents they removed ([`removed`]), and the index of kept documents
//! that new ones are checked against ([`indexing`]).

pub mod decontam;
pub mod dedup;
pub mod indexing;
pub mod removed;
#[cfg(feature = "parquet")]
pub mod sharded;
pub mod sink;
