//! `--removed`: the documents a dropping run removes, as a Parquet file of three string
//! columns, `id`, `root` (the id of its cluster's root) and `survivor` (the id of the kept
//! document it duplicates: its cluster's survivor, or with `--against` the indexed document it
//! matched), in input order. NeMo Curator's `TextDuplicatesRemovalWorkflow` reads it as
//! `ids_to_remove_path` with `duplicate_id_field="id"`.

#[cfg(feature = "parquet")]
use arrow_array::builder::ArrayBuilder;

use crate::error::Error;

use super::dedup::Verdicts;

/// The file's columns, in order.
pub const REMOVED_COLUMNS: [&str; 3] = ["id", "root", "survivor"];

/// Rows gathered before a batch is written.
#[cfg(feature = "parquet")]
const BATCH: usize = 64 * 1024;

#[cfg(feature = "parquet")]
fn schema() -> arrow_schema::Schema {
    use arrow_schema::{DataType, Field, Schema};
    Schema::new(
        REMOVED_COLUMNS
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    )
}

/// Writes `--removed` (atomically: the file appears when [`RemovedWriter::finish`] closes it).
pub struct RemovedWriter {
    #[cfg(feature = "parquet")]
    w: crate::io::parquet::TableWriter,
    /// The batch being gathered, one builder per column.
    #[cfg(feature = "parquet")]
    rows: [arrow_array::builder::StringBuilder; 3],
    written: u64,
}

impl RemovedWriter {
    /// Start writing `path` (refused where the build cannot write Parquet).
    pub fn create(path: &str) -> Result<Self, Error> {
        #[cfg(feature = "parquet")]
        {
            Ok(RemovedWriter {
                w: crate::io::parquet::TableWriter::create(path, &schema(), &[])?,
                rows: Default::default(),
                written: 0,
            })
        }
        #[cfg(not(feature = "parquet"))]
        {
            Err(Error::Feature {
                feature: "parquet",
                what: format!("--removed {path} (a Parquet file)"),
            })
        }
    }

    /// Add the documents of `v` that a dropping run removes, in order.
    pub(crate) fn add(&mut self, v: &dyn Verdicts) -> Result<(), Error> {
        for d in (0..v.len()).filter(|&d| !v.keeps(d)) {
            let survivor = v.index_match(d).unwrap_or_else(|| v.survivor(d));
            self.push([v.id(d), v.tag(d), survivor])?;
        }
        Ok(())
    }

    #[cfg(feature = "parquet")]
    fn push(&mut self, row: [&str; 3]) -> Result<(), Error> {
        for (col, value) in self.rows.iter_mut().zip(row) {
            col.append_value(value);
        }
        self.written += 1;
        if self.rows[0].len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Never reached: [`RemovedWriter::create`] refuses in this build.
    #[cfg(not(feature = "parquet"))]
    fn push(&mut self, _: [&str; 3]) -> Result<(), Error> {
        self.written += 1;
        Ok(())
    }

    #[cfg(feature = "parquet")]
    fn flush(&mut self) -> Result<(), Error> {
        if self.rows[0].is_empty() {
            return Ok(());
        }
        // `finish` hands the builder's values over and leaves it empty for the next batch.
        let cols: Vec<arrow_array::ArrayRef> =
            self.rows.iter_mut().map(ArrayBuilder::finish).collect();
        let batch = arrow_array::RecordBatch::try_new(std::sync::Arc::new(schema()), cols)
            .map_err(|e| Error::io(self.w.name(), std::io::Error::other(e)))?;
        self.w.write(&batch, &[])
    }

    /// Close the file and move it into place; returns the rows written.
    #[cfg(feature = "parquet")]
    pub fn finish(mut self) -> Result<u64, Error> {
        self.flush()?;
        self.w.finish()?;
        Ok(self.written)
    }

    /// Never reached: [`RemovedWriter::create`] refuses in this build.
    #[cfg(not(feature = "parquet"))]
    pub fn finish(self) -> Result<u64, Error> {
        Ok(self.written)
    }
}
