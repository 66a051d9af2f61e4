//! The jobs a user runs over a corpus: near-dedup ([`dedup`]) and decontamination
//! ([`decontam`]), over files or documents in memory.

pub mod decontam;
pub mod dedup;
