//! Where a stage writes the records it keeps: JSONL lines as they were read (tagged), or
//! Parquet rows with the inputs' schema.

use crate::io::parquet::{self, TableWriter};
use crate::io::{Columns, Inputs, Output};
use crate::Error;

/// Where the kept records go: JSONL lines, or Parquet rows.
pub enum RecordSink {
    Lines(Output),
    Table {
        writer: Box<TableWriter>,
        /// The rows' schema (without the tag column), for JSONL records to be decoded into.
        schema: arrow_schema::SchemaRef,
    },
}

/// The records `idx` of `chunk` as rows of `schema` (a Parquet output's): a Parquet chunk's
/// rows as they are, JSONL records decoded.
pub fn table_rows(
    schema: &arrow_schema::SchemaRef,
    chunk: &crate::io::Chunk,
    idx: &[usize],
    name: &str,
) -> Result<arrow_array::RecordBatch, Error> {
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
        if parquet::is_parquet_name(path) {
            let schema = parquet::output_schema(inputs)?;
            let writer = Box::new(TableWriter::create(path, &schema, tags)?);
            Ok(RecordSink::Table { writer, schema })
        } else {
            Ok(RecordSink::Lines(Output::create(path)?))
        }
    }

    /// The columns to read from Parquet inputs.
    pub fn columns(&self) -> Columns {
        match self {
            RecordSink::Lines(_) => Columns::AllAsJson,
            RecordSink::Table { .. } => Columns::All,
        }
    }

    /// The rows' schema of a Parquet output.
    pub fn table_schema(&self) -> Option<arrow_schema::SchemaRef> {
        match self {
            RecordSink::Lines(_) => None,
            RecordSink::Table { schema, .. } => Some(schema.clone()),
        }
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error> {
        match self {
            RecordSink::Lines(o) => o.write_all(bytes),
            RecordSink::Table { .. } => unreachable!("lines are written to a JSONL output only"),
        }
    }

    pub fn write_rows(
        &mut self,
        rows: &arrow_array::RecordBatch,
        tags: &[&[Option<&str>]],
    ) -> Result<(), Error> {
        match self {
            RecordSink::Table { writer, .. } => writer.write(rows, tags),
            RecordSink::Lines(_) => unreachable!("rows are written to a Parquet output only"),
        }
    }

    pub fn finish(self) -> Result<(), Error> {
        match self {
            RecordSink::Lines(o) => o.finish(),
            RecordSink::Table { writer, .. } => writer.finish(),
        }
    }
}
