//! Where a stage writes the records it keeps: JSONL lines as they were read (tagged), or
//! Parquet rows with the inputs' schema.

use crate::error::Error;
#[cfg(feature = "parquet")]
use crate::io::parquet::{self, TableWriter};
use crate::io::{Columns, Inputs, Output};

/// A Parquet output's schema.
#[cfg(feature = "parquet")]
pub type TableSchema = arrow_schema::SchemaRef;
/// Rows for a Parquet output.
#[cfg(feature = "parquet")]
pub type TableRows = arrow_array::RecordBatch;

/// A Parquet output's schema: none exists without the `parquet` feature.
#[cfg(not(feature = "parquet"))]
#[derive(Debug)]
pub enum TableSchema {}
/// Rows for a Parquet output: none exist without the `parquet` feature.
#[cfg(not(feature = "parquet"))]
#[derive(Debug)]
pub enum TableRows {}

#[cfg(not(feature = "parquet"))]
impl TableRows {
    pub fn num_rows(&self) -> usize {
        match *self {}
    }
}

/// Where the kept records go: JSONL lines, or Parquet rows.
pub enum RecordSink {
    Lines(Output),
    #[cfg(feature = "parquet")]
    Table {
        writer: Box<TableWriter>,
        /// The rows' schema (without the tag column), for JSONL records to be decoded into.
        schema: TableSchema,
    },
}

/// The records `idx` of `chunk` as rows of `schema` (a Parquet output's): a Parquet chunk's
/// rows as they are, JSONL records decoded.
pub fn table_rows(
    schema: &TableSchema,
    chunk: &crate::io::Chunk,
    idx: &[usize],
    name: &str,
) -> Result<TableRows, Error> {
    #[cfg(not(feature = "parquet"))]
    {
        let _ = (chunk, idx, name);
        match *schema {}
    }
    #[cfg(feature = "parquet")]
    match &chunk.rows {
        Some(rows) => {
            let mut keep = vec![false; chunk.len()];
            for &i in idx {
                keep[i] = true;
            }
            parquet::filter_rows(rows, &keep, name)
        }
        None => parquet::decode_lines(schema, chunk, idx, name),
    }
}

impl RecordSink {
    /// Start writing `path`: Parquet when it ends in `.parquet` (with a column for each of
    /// `tags` added), JSONL otherwise.
    pub fn create(path: &str, inputs: &Inputs, tags: &[&str]) -> Result<Self, Error> {
        if crate::io::format::is_parquet_name(path) {
            #[cfg(feature = "parquet")]
            {
                let schema = parquet::output_schema(inputs)?;
                let writer = Box::new(TableWriter::create(path, &schema, tags)?);
                Ok(RecordSink::Table { writer, schema })
            }
            #[cfg(not(feature = "parquet"))]
            {
                let _ = (inputs, tags);
                Err(Error::Feature {
                    feature: "parquet",
                    what: format!("{path}: a Parquet output"),
                })
            }
        } else {
            Ok(RecordSink::Lines(Output::create(path)?))
        }
    }

    /// The columns to read from Parquet inputs.
    pub fn columns(&self) -> Columns {
        match self {
            RecordSink::Lines(_) => Columns::AllAsJson,
            #[cfg(feature = "parquet")]
            RecordSink::Table { .. } => Columns::All,
        }
    }

    /// The rows' schema of a Parquet output.
    pub fn table_schema(&self) -> Option<TableSchema> {
        match self {
            RecordSink::Lines(_) => None,
            #[cfg(feature = "parquet")]
            RecordSink::Table { schema, .. } => Some(schema.clone()),
        }
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error> {
        match self {
            RecordSink::Lines(o) => o.write_all(bytes),
            #[cfg(feature = "parquet")]
            RecordSink::Table { .. } => unreachable!("lines are written to a JSONL output only"),
        }
    }

    pub fn write_rows(&mut self, rows: &TableRows, tags: &[&[Option<&str>]]) -> Result<(), Error> {
        #[cfg(not(feature = "parquet"))]
        {
            let _ = tags;
            match *rows {}
        }
        #[cfg(feature = "parquet")]
        match self {
            RecordSink::Table { writer, .. } => writer.write(rows, tags),
            RecordSink::Lines(_) => unreachable!("rows are written to a Parquet output only"),
        }
    }

    pub fn finish(self) -> Result<(), Error> {
        match self {
            RecordSink::Lines(o) => o.finish(),
            #[cfg(feature = "parquet")]
            RecordSink::Table { writer, .. } => writer.finish(),
        }
    }
}
