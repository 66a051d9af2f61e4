//! Reading and writing files: inputs (plain, gzip or zstd, by content, `-` for stdin), chunks
//! of lines, spare buffers, outputs that appear only when complete, the check that outputs
//! name no input, and signature files.

pub mod chunk;
pub mod input;
pub mod output;
pub mod paths;
pub mod pool;
pub mod sigfile;

pub use chunk::{Chunk, ChunkBytes, LineReader};
pub use input::{InputSpec, Inputs};
pub use output::{interrupt_message, remove_partial_outputs, write_file_atomic, Output};
pub use paths::{check_output_paths, NamedPath};
pub use pool::{recycle_buffer, spare_buffer};

#[cfg(test)]
mod tests;
