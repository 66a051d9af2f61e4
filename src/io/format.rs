//! What kind of file an input or output is, by its first bytes or its name: Parquet or JSONL.
//! Known in every build, so that a build without the `parquet` feature can name what it cannot
//! read.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The first (and last) four bytes of every Parquet file.
pub const MAGIC: [u8; 4] = *b"PAR1";

/// Does the file at `path` start with the Parquet magic? (Unreadable files answer no; opening
/// them reports why.)
pub fn sniff(path: &Path) -> bool {
    let mut head = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|_| head == MAGIC)
}

/// Is `path` a Parquet output by its name (`.parquet`, any case)?
pub fn is_parquet_name(path: &str) -> bool {
    path.len() > 8 && path[path.len() - 8..].eq_ignore_ascii_case(".parquet")
}

/// How much of each row a pass reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Columns {
    /// Only the id and text columns (signatures, shingle sets).
    #[default]
    Needed,
    /// Every column, as stored (a Parquet output).
    All,
    /// Every column, and each row as a JSONL line too (a JSONL output).
    AllAsJson,
}
