//! Stage files as Parquet tables: written atomically with the manifest's key in their metadata,
//! read back by the columns a stage needs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt32Type, UInt64Type};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::arrow::ProjectionMask;

use super::WorkDir;
use crate::error::Error;
use crate::io::parquet::{Sealed, TableWriter};

/// The metadata key that holds the manifest's key.
const WORK_KEY: &str = "neardup.work";

/// Rows a stage writes at a time.
pub(crate) const BATCH_ROWS: usize = 64 * 1024;

/// Row groups of stage files: a writer holds its row group in memory until it is full, and
/// `bands` has one writer a partition open at once. Their pages are not compressed: signatures,
/// digests and ranks do not compress, and `confirm` reads every shard's signatures again.
const ROW_GROUP_BYTES: usize = 8 << 20;

/// A stage file being read, batch by batch.
pub struct Table {
    name: String,
    reader: ParquetRecordBatchReader,
    /// The file's key-value metadata.
    pub meta: HashMap<String, String>,
    pub rows: u64,
}

impl Iterator for Table {
    type Item = Result<RecordBatch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next().map(|r| {
            r.map_err(|e| Error::Work {
                path: self.name.clone(),
                msg: format!("unreadable: {e}"),
            })
        })
    }
}

/// A stage table's column writer: the columns' fields and their batches.
pub(crate) struct StageWriter {
    writer: TableWriter,
    schema: Arc<Schema>,
}

impl StageWriter {
    pub fn write(&mut self, cols: Vec<ArrayRef>) -> Result<(), Error> {
        let batch = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| Error::io(self.writer.name(), std::io::Error::other(e)))?;
        self.writer.write(&batch, &[])
    }

    pub fn finish(self) -> Result<(), Error> {
        self.writer.finish()
    }

    /// Write the last columns (of any length, none included) and finish.
    pub fn write_then_finish(mut self, cols: Vec<ArrayRef>) -> Result<(), Error> {
        self.write(cols)?;
        self.finish()
    }
}

/// A non-null column of `name` and `ty`.
pub(crate) fn col(name: &str, ty: DataType) -> Field {
    Field::new(name, ty, false)
}

impl WorkDir {
    /// Start writing the stage file `path` with these columns and metadata; nothing appears at
    /// `path` until [`StageWriter::finish`].
    pub(crate) fn create_table(
        &self,
        path: &Path,
        fields: Vec<Field>,
        meta: &[(&str, String)],
    ) -> Result<StageWriter, Error> {
        let name = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(&name, e))?;
        }
        let mut md: HashMap<String, String> = meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        md.insert(WORK_KEY.into(), self.key.clone());
        let schema = Arc::new(Schema::new_with_metadata(fields, md));
        Ok(StageWriter {
            writer: TableWriter::with_layout(&name, &schema, &[], ROW_GROUP_BYTES, false)?,
            schema,
        })
    }

    /// Is the stage file `path` there, made for this manifest? One made for another is an
    /// error.
    pub(crate) fn table_done(&self, path: &Path) -> Result<bool, Error> {
        if !path.exists() {
            return Ok(false);
        }
        self.open_table(path, "", &[]).map(|_| true)
    }

    /// Read the columns `columns` of the stage file `path` (which the stage `stage` writes).
    pub(crate) fn open_table(
        &self,
        path: &Path,
        stage: &str,
        columns: &[&str],
    ) -> Result<Table, Error> {
        self.open_rows(path, stage, columns, None)
    }

    /// [`WorkDir::open_table`], reading only the rows `rows` (ascending) when given: the
    /// others are skipped, not decoded.
    pub(crate) fn open_rows(
        &self,
        path: &Path,
        stage: &str,
        columns: &[&str],
        rows: Option<&[u64]>,
    ) -> Result<Table, Error> {
        let name = path.display().to_string();
        let remedy = if stage.is_empty() {
            "run its stage again in an empty work directory".to_string()
        } else {
            format!("run `neardup stage {stage}` again in an empty work directory")
        };
        let Some(file) = Sealed::open(path, &remedy)? else {
            return Err(self.missing(path, stage));
        };
        let bad = |msg: String| Error::Work {
            path: name.clone(),
            msg,
        };
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| bad(format!("not a readable stage file: {e}")))?;
        let meta = builder.schema().metadata().clone();
        self.check_key(&name, meta.get(WORK_KEY).map(|s| s.as_str()))?;
        let mut roots = Vec::new();
        for c in columns {
            roots.push(
                builder
                    .schema()
                    .index_of(c)
                    .map_err(|_| bad(format!("has no column `{c}`")))?,
            );
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let total = builder.metadata().file_metadata().num_rows() as u64;
        let mut builder = builder.with_projection(mask).with_batch_size(BATCH_ROWS);
        if let Some(rows) = rows {
            let mut runs: Vec<RowSelector> = Vec::new();
            let mut at = 0u64;
            for &r in rows {
                if r > at {
                    runs.push(RowSelector::skip((r - at) as usize));
                }
                match runs.last_mut() {
                    Some(last) if !last.skip => last.row_count += 1,
                    _ => runs.push(RowSelector::select(1)),
                }
                at = r + 1;
            }
            if total > at {
                runs.push(RowSelector::skip((total - at) as usize));
            }
            builder = builder.with_row_selection(RowSelection::from(runs));
        }
        let reader = builder
            .build()
            .map_err(|e| bad(format!("unreadable: {e}")))?;
        Ok(Table {
            name,
            reader,
            meta: meta.into(),
            rows: total,
        })
    }
}

/// Column `name` of `batch` as u64 values.
pub(crate) fn u64s<'a>(batch: &'a RecordBatch, name: &str) -> &'a [u64] {
    batch
        .column_by_name(name)
        .expect("a projected column")
        .as_primitive::<UInt64Type>()
        .values()
}

/// Column `name` of `batch` as u32 values.
pub(crate) fn u32s<'a>(batch: &'a RecordBatch, name: &str) -> &'a [u32] {
    batch
        .column_by_name(name)
        .expect("a projected column")
        .as_primitive::<UInt32Type>()
        .values()
}

/// Column `name` of `batch` as f64 values.
pub(crate) fn f64s<'a>(batch: &'a RecordBatch, name: &str) -> &'a [f64] {
    batch
        .column_by_name(name)
        .expect("a projected column")
        .as_primitive::<Float64Type>()
        .values()
}

/// A string column of `batch` (nulls as `None`).
pub(crate) fn strings<'a>(
    batch: &'a RecordBatch,
    name: &str,
) -> &'a arrow_array::GenericStringArray<i32> {
    batch
        .column_by_name(name)
        .expect("a projected column")
        .as_string::<i32>()
}
