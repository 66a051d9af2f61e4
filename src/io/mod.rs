//! Reading and writing files: inputs (JSONL plain, gzip or zstd, or Parquet, by content; `-`
//! for stdin), chunks of lines or rows, spare buffers, outputs that appear only when complete,
//! the check that outputs name no input, and signature files.

pub mod checksum;
pub mod chunk;
pub mod decode;
pub mod dirs;
pub mod fields;
pub mod format;
pub mod input;
pub mod lock;
pub mod output;
#[cfg(feature = "parquet")]
pub mod parquet;
/// Without the `parquet` feature: the same names, and an error naming the feature.
#[cfg(not(feature = "parquet"))]
#[path = "parquet_absent.rs"]
pub mod parquet;
pub mod paths;
pub mod pool;
pub mod ranges;
pub mod sigfile;

pub use chunk::{Chunk, ChunkBytes, LineReader};
pub use dirs::expand_inputs;
pub use fields::Fields;
pub use format::Columns;
pub use input::{InputSpec, Inputs, ReadPlan, Reader};
pub use output::{
    completed_outputs, failure_message, interrupt_message, probe_outputs, remove_partial_outputs,
    write_file_atomic, Output,
};
pub use paths::{check_inputs_outside, check_output_paths, check_outputs, NamedPath, OwnedDir};
pub use pool::{recycle_buffer, spare_buffer};

#[cfg(test)]
mod tests;
