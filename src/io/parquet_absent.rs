//! Parquet in a build without the `parquet` feature: the same names, so that the readers compile
//! unchanged, and an error naming the feature wherever a Parquet file is met. The row types are
//! uninhabited: no value of them is ever made.

use std::borrow::Cow;
use std::path::Path;

pub use super::format::{is_parquet_name, sniff, Columns, MAGIC};
use super::Fields;
use crate::error::Error;

/// What reading `name` says in this build.
pub fn missing(name: &str) -> Error {
    Error::Feature {
        feature: "parquet",
        what: format!("{name}: reading a Parquet file"),
    }
}

/// The rows of a record batch: none exist in this build.
#[derive(Debug)]
pub enum Batch {}

/// A slice of a Parquet file's rows: none exist in this build.
#[derive(Debug)]
pub struct Rows {
    pub batch: Batch,
    pub first_row: u64,
}

impl Rows {
    pub fn len(&self) -> usize {
        match self.batch {}
    }
    pub fn is_empty(&self) -> bool {
        match self.batch {}
    }
    pub fn place(&self, _: usize) -> (usize, u64) {
        match self.batch {}
    }
    pub fn id(&self, _: usize, _: &str) -> Result<Cow<'_, str>, Error> {
        match self.batch {}
    }
    pub fn text(&self, _: usize, _: &str) -> Result<&str, Error> {
        match self.batch {}
    }
    pub fn keep(&self, _: usize, _: &str) -> Result<Option<f64>, Error> {
        match self.batch {}
    }
    pub fn group(&self, _: usize) -> Option<&str> {
        match self.batch {}
    }
    pub fn text_len(&self, _: usize) -> usize {
        match self.batch {}
    }
}

/// A Parquet reader, which this build cannot open.
#[derive(Debug)]
pub enum ParquetReader {}

impl ParquetReader {
    /// Always the error naming the feature.
    pub fn open(_: &Path, name: &str, _: &Fields, _: Columns, _: usize) -> Result<Self, Error> {
        Err(missing(name))
    }
    pub fn name(&self) -> &str {
        match *self {}
    }
    pub fn raw_bytes_read(&self) -> u64 {
        match *self {}
    }
    pub fn next_rows(&mut self, _: usize) -> Result<Option<Rows>, Error> {
        match *self {}
    }
    pub fn wants_json(&self) -> bool {
        match *self {}
    }
}

/// Rows as JSONL lines: `(start, end, line number)` of each line in the buffer.
pub type LineRanges = Vec<(usize, usize, u64)>;

pub fn rows_as_json(
    batch: &Batch,
    _: u64,
    _: &str,
    _: Vec<u8>,
) -> Result<(Vec<u8>, LineRanges), Error> {
    match *batch {}
}

/// Always the error naming the feature.
pub fn for_each_row_as_json(
    _: &Path,
    name: &str,
    _: impl FnMut(&[u8], u64) -> Result<(), Error>,
) -> Result<(), Error> {
    Err(missing(name))
}
