//! The jobs a user runs over a corpus: near-dedup ([`dedup`]) and decontamination
//! ([`decontam`]), over files or documents in memory, and where they write what they keep
//! ([`sink`]).

pub mod decontam;
pub mod dedup;
pub mod sink;
