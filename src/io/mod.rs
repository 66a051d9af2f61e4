//! Reading and writing files: inputs (JSONL plain, gzip or zstd, or Parquet, by content; `-`
//! for stdin), chunks of lines or rows, spare buffers, outputs that appear only when complete,
//! the check that outputs name no input, and signature files.

pub mod chunk;
pub mod fields;
pub mod input;
pub mod output;
pub mod parquet;
pub mod paths;
pub mod pool;
pub mod ranges;
pub mod sigfile;

pub use chunk::{Chunk, ChunkBytes, LineReader};
pub use fields::Fields;
pub use input::{InputSpec, Inputs, ReadPlan, Reader};
pub use output::{interrupt_message, remove_partial_outputs, write_file_atomic, Output};
pub use parquet::Columns;
pub use paths::{check_output_paths, NamedPath};
pub use pool::{recycle_buffer, spare_buffer};

#[cfg(test)]
mod tests;
