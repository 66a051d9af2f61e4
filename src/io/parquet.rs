//! Parquet inputs and outputs: a file's rows streamed in slices of about a chunk's bytes (only
//! the id and text columns where a pass needs no more), each row also as a JSONL line where a
//! JSONL output needs one, and a writer that keeps the rows' schema and values and adds the
//! cluster column.
//!
//! Rows are numbered from 0 across the file, as Parquet tools index them; an error names the
//! row and its row group.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};

use super::{Fields, Output};
use crate::error::Error;

pub use super::format::{is_parquet_name, sniff, Columns, MAGIC};

fn bad_file(name: &str, msg: String) -> Error {
    Error::io(name, io::Error::new(io::ErrorKind::InvalidData, msg))
}

fn parquet_error(name: &str, e: impl std::fmt::Display) -> Error {
    bad_file(name, format!("not a readable Parquet file: {e}"))
}

/// The indices that lead from a top-level column through struct fields to `name`: the
/// top-level column of that exact name, else the dotted path (`metadata.id`).
fn resolve(schema: &Schema, name: &str) -> Option<Vec<usize>> {
    if let Ok(i) = schema.index_of(name) {
        return Some(vec![i]);
    }
    let mut parts = name.split('.');
    let mut path = vec![schema.index_of(parts.next()?).ok()?];
    let mut dt = schema.field(path[0]).data_type();
    for p in parts {
        let DataType::Struct(fields) = dt else {
            return None;
        };
        let (j, f) = fields.find(p)?;
        path.push(j);
        dt = f.data_type();
    }
    Some(path)
}

/// The field at `path`.
fn field_at<'a>(schema: &'a Schema, path: &[usize]) -> &'a Field {
    let mut f = schema.field(path[0]);
    for &j in &path[1..] {
        let DataType::Struct(fields) = f.data_type() else {
            unreachable!("a resolved path runs through structs")
        };
        f = &fields[j];
    }
    f
}

/// The names a user may give (top-level columns, and the fields of struct columns dotted), for
/// an error about a missing one.
fn column_names(schema: &Schema) -> String {
    fn walk(prefix: &str, f: &Field, out: &mut Vec<String>) {
        let name = format!("{prefix}{}", f.name());
        if let DataType::Struct(children) = f.data_type() {
            for c in children {
                walk(&format!("{name}."), c, out);
            }
        } else {
            out.push(name);
        }
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        walk("", f, &mut out);
    }
    out.join(", ")
}

fn is_string(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_string(v),
        _ => false,
    }
}

fn is_integer(dt: &DataType) -> bool {
    dt.is_integer() || matches!(dt, DataType::Dictionary(_, v) if v.is_integer())
}

/// Where a reader finds each field it reads: paths into the schema.
#[derive(Debug, Clone)]
struct Paths {
    /// `None` under `--id-field @row`.
    id: Option<Vec<usize>>,
    text: Vec<usize>,
    keep: Option<Vec<usize>>,
    group: Option<Vec<usize>>,
}

impl Paths {
    /// The top-level columns these paths start from.
    fn roots(&self) -> Vec<usize> {
        let mut r: Vec<usize> = [
            self.id.as_ref(),
            Some(&self.text),
            self.keep.as_ref(),
            self.group.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|p| p[0])
        .collect();
        r.sort_unstable();
        r.dedup();
        r
    }
}

/// Check that `schema` has the fields `fields` names (id, text, and the policies' fields), of
/// types they can be read as; their paths.
fn check_fields(schema: &Schema, fields: &Fields, name: &str) -> Result<Paths, Error> {
    let (id, text) = check_id_text(schema, fields, name)?;
    let keep = match &fields.keep {
        None => None,
        Some(k) => {
            let path = resolve(schema, k).ok_or_else(|| {
                bad_file(
                    name,
                    format!(
                        "has no column `{k}` (its columns: {}) for --keep field:{k}",
                        column_names(schema)
                    ),
                )
            })?;
            let dt = field_at(schema, &path).data_type();
            if !dt.is_numeric() {
                return Err(bad_file(
                    name,
                    format!("column `{k}` is {dt}; --keep field:{k} needs a numeric column"),
                ));
            }
            Some(path)
        }
    };
    let group = match &fields.group {
        None => None,
        Some(g) => {
            let path = resolve(schema, g).ok_or_else(|| {
                bad_file(
                    name,
                    format!(
                        "has no column `{g}` (its columns: {}) for --group-field",
                        column_names(schema)
                    ),
                )
            })?;
            let dt = field_at(schema, &path).data_type();
            if !(is_string(dt) || is_integer(dt) || dt == &DataType::Boolean) {
                return Err(bad_file(
                    name,
                    format!("column `{g}` is {dt}; a group is a string, an integer or a boolean"),
                ));
            }
            Some(path)
        }
    };
    Ok(Paths {
        id,
        text,
        keep,
        group,
    })
}

/// The paths of the id and text fields, checked.
fn check_id_text(
    schema: &Schema,
    fields: &Fields,
    name: &str,
) -> Result<(Option<Vec<usize>>, Vec<usize>), Error> {
    let find = |field: &str, option: &str| {
        resolve(schema, field).ok_or_else(|| {
            bad_file(
                name,
                format!(
                    "has no column `{field}` (its columns: {}); name the column with {option}",
                    column_names(schema)
                ),
            )
        })
    };
    let text = find(&fields.text, "--text-field")?;
    if fields.row_ids() {
        check_text(schema, fields, name, &text)?;
        return Ok((None, text));
    }
    let id = find(&fields.id, "--id-field")?;
    let id_type = field_at(schema, &id).data_type();
    if !is_string(id_type) {
        let msg = if is_integer(id_type) {
            if fields.numeric_ids {
                None
            } else {
                Some(format!(
                    "column `{}` is {id_type}, ids must be strings (pass --numeric-ids to accept \
                     integer ids, or --id-field to name another column)",
                    fields.id
                ))
            }
        } else {
            Some(format!(
                "column `{}` is {id_type}, ids must be strings",
                fields.id
            ))
        };
        if let Some(msg) = msg {
            return Err(bad_file(name, msg));
        }
    }
    check_text(schema, fields, name, &text)?;
    Ok((Some(id), text))
}

/// The text column is of strings.
fn check_text(schema: &Schema, fields: &Fields, name: &str, text: &[usize]) -> Result<(), Error> {
    let text_type = field_at(schema, text).data_type();
    if !is_string(text_type) {
        return Err(bad_file(
            name,
            format!(
                "column `{}` is {text_type}, the text must be a string (--text-field names \
                 another column)",
                fields.text
            ),
        ));
    }
    Ok(())
}

/// One column of a slice of rows, ready to read values from: the array as plain strings
/// (dictionaries and integer ids turned into strings), and which rows are null (there or in a
/// struct above it).
#[derive(Debug, Clone)]
struct Column {
    values: ArrayRef,
    nulls: Option<arrow_buffer::NullBuffer>,
}

impl Column {
    /// Strings (ids, texts).
    fn new(batch: &RecordBatch, path: &[usize], name: &str) -> Result<Self, Error> {
        Self::of(batch, path, name, false)
    }

    /// Strings, or with `numeric` numbers as `f64`.
    fn of(batch: &RecordBatch, path: &[usize], name: &str, numeric: bool) -> Result<Self, Error> {
        let mut arr = batch.column(path[0]).clone();
        let mut nulls = arr.logical_nulls();
        for &j in &path[1..] {
            let child = arr.as_struct().column(j).clone();
            nulls = arrow_buffer::NullBuffer::union(nulls.as_ref(), child.logical_nulls().as_ref());
            arr = child;
        }
        let ready = if numeric {
            arr.data_type() == &DataType::Float64
        } else {
            matches!(
                arr.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            )
        };
        if !ready {
            let to = if numeric {
                DataType::Float64
            } else {
                DataType::Utf8
            };
            arr = arrow_cast::cast(&arr, &to).map_err(|e| parquet_error(name, e))?;
            nulls = arrow_buffer::NullBuffer::union(nulls.as_ref(), arr.logical_nulls().as_ref());
        }
        Ok(Column { values: arr, nulls })
    }

    fn number(&self, i: usize) -> Option<f64> {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            return None;
        }
        Some(
            self.values
                .as_primitive::<arrow_array::types::Float64Type>()
                .value(i),
        )
    }

    fn get(&self, i: usize) -> Option<&str> {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            return None;
        }
        Some(match self.values.data_type() {
            DataType::Utf8 => self.values.as_string::<i32>().value(i),
            DataType::LargeUtf8 => self.values.as_string::<i64>().value(i),
            _ => self.values.as_string_view().value(i),
        })
    }
}

/// A slice of a Parquet file's rows, as a chunk carries them.
#[derive(Debug, Clone)]
pub struct Rows {
    /// The columns read (see [`Columns`]).
    pub batch: RecordBatch,
    /// The file-wide index of the first row.
    pub first_row: u64,
    /// The first row of each row group of the file.
    groups: Arc<[u64]>,
    /// `None` under `--id-field @row`.
    id: Option<Column>,
    text: Column,
    keep: Option<Column>,
    group: Option<Column>,
    fields: Arc<Fields>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }

    /// Row `i`'s row group and file-wide index.
    pub fn place(&self, i: usize) -> (usize, u64) {
        let row = self.first_row + i as u64;
        (self.groups.partition_point(|&g| g <= row) - 1, row)
    }

    fn field_error(&self, i: usize, file: &str, field: &str, msg: &str) -> Error {
        let (row_group, row) = self.place(i);
        Error::Row {
            path: file.to_string(),
            row_group,
            row,
            field: field.to_string(),
            msg: msg.to_string(),
        }
    }

    /// Row `i`'s id: a non-empty string (or an integer's digits, with `--numeric-ids`).
    pub fn id(&self, i: usize, file: &str) -> Result<Cow<'_, str>, Error> {
        let Some(id) = &self.id else {
            return Ok(Cow::Owned(Fields::row_id(file, self.first_row + i as u64)));
        };
        match id.get(i) {
            None => Err(self.field_error(i, file, &self.fields.id, "is null")),
            Some("") => Err(self.field_error(i, file, &self.fields.id, "is empty")),
            Some(s) => Ok(Cow::Borrowed(s)),
        }
    }

    /// Row `i`'s text.
    pub fn text(&self, i: usize, file: &str) -> Result<&str, Error> {
        self.text
            .get(i)
            .ok_or_else(|| self.field_error(i, file, &self.fields.text, "is null"))
    }

    /// Row `i`'s keep value (`--keep field:NAME`): a number, not null.
    pub fn keep(&self, i: usize, file: &str) -> Result<Option<f64>, Error> {
        let Some(col) = &self.keep else {
            return Ok(None);
        };
        let name = self.fields.keep.as_deref().unwrap_or_default();
        match col.number(i) {
            Some(v) if v.is_nan() => {
                Err(self.field_error(i, file, name, "is NaN, not a number to keep by"))
            }
            Some(v) => Ok(Some(v)),
            None => Err(self.field_error(i, file, name, "is null; --keep field needs a number")),
        }
    }

    /// Row `i`'s group (`--group-field`), `None` when null.
    pub fn group(&self, i: usize) -> Option<&str> {
        self.group.as_ref().and_then(|c| c.get(i))
    }

    /// Bytes of row `i`'s text (0 when null), to cut a chunk into pieces of equal work.
    pub fn text_len(&self, i: usize) -> usize {
        self.text.get(i).map_or(0, str::len)
    }
}

/// Reads one Parquet file as chunks of rows.
pub struct ParquetReader {
    name: String,
    reader: ParquetRecordBatchReader,
    schema: SchemaRef,
    /// A decoded batch not yet all handed out, and the offset of its first row left.
    pending: Option<(RecordBatch, usize)>,
    paths: Paths,
    groups: Arc<[u64]>,
    fields: Arc<Fields>,
    next_row: u64,
    total_rows: u64,
    file_bytes: u64,
    bytes_per_row: f64,
    json: bool,
}

impl ParquetReader {
    /// Open `path` (named `name` in errors) reading `columns`, in batches of about
    /// `chunk_bytes` of the columns read. The id and text columns must exist and be strings (or
    /// integer ids with `numeric_ids`).
    pub fn open(
        path: &Path,
        name: &str,
        fields: &Fields,
        columns: Columns,
        chunk_bytes: usize,
    ) -> Result<Self, Error> {
        let file = File::open(path).map_err(|e| Error::io(name, e))?;
        let file_bytes = file.metadata().map_err(|e| Error::io(name, e))?.len();
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| parquet_error(name, e))?;
        let schema = builder.schema().clone();
        let paths = check_fields(&schema, fields, name)?;
        let meta = builder.metadata().clone();
        let descr = meta.file_metadata().schema_descr_ptr();
        let mask = match columns {
            Columns::Needed => ProjectionMask::roots(&descr, paths.roots()),
            _ => ProjectionMask::all(),
        };
        let mut groups = Vec::with_capacity(meta.num_row_groups() + 1);
        let (mut rows, mut bytes) = (0u64, 0u64);
        for g in meta.row_groups() {
            groups.push(rows);
            rows += g.num_rows() as u64;
            for (c, col) in g.columns().iter().enumerate() {
                if mask.leaf_included(c) {
                    bytes += col.uncompressed_size().max(0) as u64;
                }
            }
        }
        if groups.is_empty() {
            groups.push(0);
        }
        let bytes_per_row = bytes as f64 / rows.max(1) as f64;
        let batch_rows = ((chunk_bytes as f64 / bytes_per_row.max(1.0)) as usize).clamp(1, 1 << 20);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(batch_rows)
            .build()
            .map_err(|e| parquet_error(name, e))?;
        // The projected schema's paths (the reader keeps the file's column order).
        let projected = arrow_array::RecordBatchReader::schema(&reader);
        let paths = check_fields(&projected, fields, name)?;
        Ok(ParquetReader {
            name: name.to_string(),
            reader,
            schema: projected,
            pending: None,
            paths,
            groups: groups.into(),
            fields: Arc::new(fields.clone()),
            next_row: 0,
            total_rows: rows,
            file_bytes,
            bytes_per_row,
            json: columns == Columns::AllAsJson,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema of the rows this reader hands out.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The file's bytes read so far, estimated by the rows handed out (for progress bars).
    pub fn raw_bytes_read(&self) -> u64 {
        if self.total_rows == 0 {
            return self.file_bytes;
        }
        (self.file_bytes as f64 * self.next_row as f64 / self.total_rows as f64) as u64
    }

    /// The next rows, about `target_bytes` of the columns read, or `None` at the end.
    pub fn next_rows(&mut self, target_bytes: usize) -> Result<Option<Rows>, Error> {
        let (batch, at) = match self.pending.take() {
            Some(p) => p,
            None => match self.reader.next() {
                None => return Ok(None),
                Some(Err(e)) => return Err(parquet_error(&self.name, e)),
                Some(Ok(b)) => (b, 0),
            },
        };
        let want = ((target_bytes as f64 / self.bytes_per_row.max(1.0)) as usize).max(1);
        let n = want.min(batch.num_rows() - at);
        let piece = batch.slice(at, n);
        if at + n < batch.num_rows() {
            self.pending = Some((batch, at + n));
        }
        let column = |p: &Option<Vec<usize>>, numeric: bool| {
            p.as_ref()
                .map(|p| Column::of(&piece, p, &self.name, numeric))
                .transpose()
        };
        let rows = Rows {
            id: self
                .paths
                .id
                .as_ref()
                .map(|p| Column::new(&piece, p, &self.name))
                .transpose()?,
            text: Column::new(&piece, &self.paths.text, &self.name)?,
            keep: column(&self.paths.keep, true)?,
            group: column(&self.paths.group, false)?,
            batch: piece,
            first_row: self.next_row,
            groups: self.groups.clone(),
            fields: self.fields.clone(),
        };
        self.next_row += n as u64;
        Ok(Some(rows))
    }

    /// Whether each chunk also carries its rows as JSONL lines.
    pub fn wants_json(&self) -> bool {
        self.json
    }
}

/// Per line: its byte range and its record's place (a row index), as [`super::Chunk::lines`].
pub type LineRanges = Vec<(usize, usize, u64)>;

/// Rows as JSONL lines, one per row, as arrow-json writes them (every column, nulls
/// included): the bytes and, per row, its byte range and file-wide row index (counting from
/// `first_row`).
pub fn rows_as_json(
    batch: &RecordBatch,
    first_row: u64,
    name: &str,
    buf: Vec<u8>,
) -> Result<(Vec<u8>, LineRanges), Error> {
    let mut w = arrow_json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow_json::writer::LineDelimited>(buf);
    w.write(batch)
        .and_then(|_| w.finish())
        .map_err(|e| bad_file(name, format!("a row cannot be written as JSON: {e}")))?;
    let data = w.into_inner();
    let mut lines = Vec::with_capacity(batch.num_rows());
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', &data) {
        lines.push((start, nl, first_row + lines.len() as u64));
        start = nl + 1;
    }
    debug_assert_eq!(lines.len(), batch.num_rows(), "one JSON line per row");
    Ok((data, lines))
}

/// Every row of the Parquet file at `path` as a JSONL line (see [`rows_as_json`]), with its
/// row index, in order.
pub fn for_each_row_as_json(
    path: &Path,
    name: &str,
    mut f: impl FnMut(&[u8], u64) -> Result<(), Error>,
) -> Result<(), Error> {
    let file = File::open(path).map_err(|e| Error::io(name, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| parquet_error(name, e))?;
    let mut row = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| parquet_error(name, e))?;
        let (data, lines) = rows_as_json(&batch, row, name, Vec::new())?;
        for (s, e, r) in lines {
            f(&data[s..e], r)?;
        }
        row += batch.num_rows() as u64;
    }
    Ok(())
}

/// The zstd level of written pages: Arrow's (and so pyarrow's) default. Level 3 cost twice the
/// time of level 1 for a few percent smaller files, and the compression runs on the one thread
/// that writes (docs/BENCHMARKS.md).
const ZSTD_LEVEL: i32 = 1;

/// Uncompressed bytes of the rows a written row group gathers before it is closed.
const ROW_GROUP_BYTES: usize = 128 << 20;

/// Writes rows to a Parquet file (zstd level 1, row groups of about 128 MiB of data) that
/// appears only when complete.
pub struct TableWriter {
    name: String,
    writer: ArrowWriter<Output>,
    schema: SchemaRef,
    /// Where each tag column sits in the output schema, and whether it replaces an input column.
    tags: Vec<(usize, bool)>,
}

impl TableWriter {
    /// Start writing `path` with the rows' `schema` (its metadata kept), plus for each of
    /// `tags` a nullable string column of that name at the end (or in place of a string column
    /// of that name in `schema`).
    pub fn create(path: &str, schema: &Schema, tags: &[&str]) -> Result<Self, Error> {
        Self::with_layout(path, schema, tags, ROW_GROUP_BYTES, true)
    }

    /// [`TableWriter::create`] with row groups of about `row_group_bytes` (a writer holds its
    /// row group in memory until it is full), and the pages zstd-compressed and dictionary-encoded
    /// or neither (hashes and signatures do not compress, and are read again in full). A file of
    /// neither is one neardup reads back: it is sealed ([`super::checksum::seal`]) after its
    /// footer, and read through [`Sealed`].
    pub fn with_layout(
        path: &str,
        schema: &Schema,
        tags: &[&str],
        row_group_bytes: usize,
        compress: bool,
    ) -> Result<Self, Error> {
        let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
        let mut tag_columns = Vec::with_capacity(tags.len());
        for &t in tags {
            tag_columns.push(match schema.index_of(t) {
                Ok(i) if is_string(fields[i].data_type()) => {
                    fields[i] = Arc::new(Field::new(t, DataType::Utf8, true));
                    (i, true)
                }
                Ok(i) => {
                    return Err(Error::Param(format!(
                        "the inputs have a column `{t}` of type {}, where the output puts its \
                         tag (a string)",
                        fields[i].data_type()
                    )))
                }
                Err(_) => {
                    fields.push(Arc::new(Field::new(t, DataType::Utf8, true)));
                    (fields.len() - 1, false)
                }
            });
        }
        let out_schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
        let compression = if compress {
            parquet::basic::Compression::ZSTD(
                parquet::basic::ZstdLevel::try_new(ZSTD_LEVEL).expect("a valid zstd level"),
            )
        } else {
            parquet::basic::Compression::UNCOMPRESSED
        };
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(compression)
            // Dictionaries pay for repeated values; hashes and signatures have none.
            .set_dictionary_enabled(compress)
            .set_max_row_group_bytes(Some(row_group_bytes))
            .build();
        let out = if compress {
            Output::create(path)?
        } else {
            Output::with_checksum(path)?
        };
        let writer = ArrowWriter::try_new(out, out_schema.clone(), Some(props))
            .map_err(|e| Error::io(path, io::Error::other(e)))?;
        Ok(TableWriter {
            name: path.to_string(),
            writer,
            schema: out_schema,
            tags: tag_columns,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Append `batch` (rows of the schema given to [`TableWriter::create`]) with each tag
    /// column's values (`None`: null), one list per tag column, row by row.
    pub fn write(&mut self, batch: &RecordBatch, tags: &[&[Option<&str>]]) -> Result<(), Error> {
        let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
        assert_eq!(
            tags.len(),
            self.tags.len(),
            "one list of values per tag column"
        );
        for (&(i, replace), values) in self.tags.iter().zip(tags) {
            debug_assert_eq!(values.len(), batch.num_rows());
            let tag: ArrayRef = Arc::new(StringArray::from_iter(values.iter().copied()));
            if replace {
                cols[i] = tag;
            } else {
                cols.push(tag);
            }
        }
        let out = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| Error::io(&self.name, io::Error::other(e)))?;
        self.writer
            .write(&out)
            .map_err(|e| Error::io(&self.name, io::Error::other(e)))
    }

    /// Close the file (its footer) and move it into place.
    pub fn finish(self) -> Result<(), Error> {
        let mut out = self
            .writer
            .into_inner()
            .map_err(|e| Error::io(&self.name, io::Error::other(e)))?;
        if out.checksum().is_some() {
            super::checksum::seal(&mut out)?;
        }
        out.finish()
    }
}

/// A sealed Parquet file ([`TableWriter::with_layout`]) as its reader sees it: the bytes
/// before the seal, which was checked when it was opened ([`Sealed::open`]).
pub struct Sealed {
    file: File,
    len: u64,
}

impl Sealed {
    /// Open the sealed Parquet file `path`, checked against its seal (see
    /// [`super::checksum::check_sealed`] for `remedy`). `Ok(None)` when there is no such file.
    pub fn open(path: &Path, remedy: &str) -> Result<Option<Sealed>, Error> {
        let name = path.display().to_string();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&name, e)),
        };
        let len = file.metadata().map_err(|e| Error::io(&name, e))?.len();
        let len = super::checksum::check_sealed(path, &file, len, remedy)?;
        Ok(Some(Sealed { file, len }))
    }
}

impl parquet::file::reader::Length for Sealed {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for Sealed {
    type T = io::Take<io::BufReader<File>>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let r = self.file.get_read(start)?;
        Ok(r.take(self.len.saturating_sub(start)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        if start.saturating_add(length as u64) > self.len {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "{length} bytes at {start} run past the {} the file holds",
                self.len
            )));
        }
        self.file.get_bytes(start, length)
    }
}

/// The schema of a Parquet output of `inputs`: that of the Parquet inputs (all must have the
/// same columns), or, when every input is JSONL, the columns arrow-json infers over all their
/// records (which reads them once more).
pub fn output_schema(inputs: &super::Inputs) -> Result<SchemaRef, Error> {
    let mut found: Option<(SchemaRef, String)> = None;
    for i in 0..inputs.len() {
        if !inputs.is_parquet(i) {
            continue;
        }
        let name = inputs.name(i);
        let file = File::open(inputs.path(i)).map_err(|e| Error::io(name, e))?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| parquet_error(name, e))?;
        let schema = builder.schema().clone();
        match &found {
            None => found = Some((schema, name.to_string())),
            Some((first, first_name)) if first.fields() != schema.fields() => {
                return Err(Error::Param(format!(
                    "a Parquet output takes inputs with one schema, but {first_name} has the \
                     columns {} and {name} has {}; write JSONL (-o OUT.jsonl) or one output per \
                     schema",
                    describe_fields(first),
                    describe_fields(&schema)
                )));
            }
            Some(_) => {}
        }
    }
    if let Some((schema, _)) = found {
        return Ok(schema);
    }
    let mut merged = Schema::empty();
    for i in 0..inputs.len() {
        let name = inputs.name(i);
        let reader = io::BufReader::new(inputs.open(i)?);
        let (schema, _) = arrow_json::reader::infer_json_schema(reader, None).map_err(|e| {
            bad_file(
                name,
                format!("its records give no Parquet columns ({e}); write JSONL (-o OUT.jsonl)"),
            )
        })?;
        merged = Schema::try_merge([merged, schema]).map_err(|e| {
            Error::Param(format!(
                "{name}: its records do not fit one set of Parquet columns with the inputs \
                 before it ({e}); write JSONL (-o OUT.jsonl)"
            ))
        })?;
    }
    Ok(Arc::new(merged))
}

fn describe_fields(schema: &Schema) -> String {
    let cols: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect();
    format!("[{}]", cols.join(", "))
}

/// The JSONL records `idx` of `chunk` as rows of `schema` (for a Parquet output of JSONL
/// input). A record that does not fit is an error naming its line.
pub fn decode_lines(
    schema: &SchemaRef,
    chunk: &super::Chunk,
    idx: &[usize],
    name: &str,
) -> Result<RecordBatch, Error> {
    let decode = |lines: &mut dyn Iterator<Item = usize>| -> Result<RecordBatch, String> {
        let mut dec = arrow_json::ReaderBuilder::new(schema.clone())
            .with_batch_size(idx.len().max(1))
            .with_strict_mode(true)
            .build_decoder()
            .map_err(|e| e.to_string())?;
        for i in lines {
            dec.decode(chunk.line(i)).map_err(|e| e.to_string())?;
            dec.decode(b"\n").map_err(|e| e.to_string())?;
        }
        Ok(dec
            .flush()
            .map_err(|e| e.to_string())?
            .unwrap_or_else(|| RecordBatch::new_empty(schema.clone())))
    };
    match decode(&mut idx.iter().copied()) {
        Ok(b) => Ok(b),
        Err(all) => {
            // Which record: each on its own.
            let (line, msg) = idx
                .iter()
                .find_map(|&i| {
                    decode(&mut std::iter::once(i))
                        .err()
                        .map(|e| (chunk.line_no(i), e))
                })
                .unwrap_or((chunk.line_no(idx[0]), all));
            Err(Error::Parse {
                path: name.to_string(),
                line,
                msg: format!(
                    "the record does not fit the Parquet output's columns ({msg}); write JSONL \
                     (-o OUT.jsonl)"
                ),
            })
        }
    }
}

/// Rows of `rows` where `keep` is true.
pub fn filter_rows(rows: &Rows, keep: &[bool], name: &str) -> Result<RecordBatch, Error> {
    let mask = arrow_array::BooleanArray::from(keep.to_vec());
    arrow_select::filter::filter_record_batch(&rows.batch, &mask)
        .map_err(|e| Error::io(name, io::Error::other(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};

    fn sample(dir: &Path, rows: usize, per_group: usize) -> std::path::PathBuf {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("id", DataType::Utf8, false),
            Field::new("text", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("d{i}")),
                )),
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| "word ".repeat(1 + i % 50)),
                )),
            ],
        )
        .unwrap();
        let path = dir.join("s.parquet");
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(per_group))
            .build();
        let mut w =
            ArrowWriter::try_new(File::create(&path).unwrap(), schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    /// Rows arrive once each, in order, across row groups and slices of any target size; each
    /// is placed in its row group; the signature pass reads the id and text columns only.
    #[test]
    fn rows_stream_in_order_in_slices_and_know_their_row_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path(), 1000, 128);
        for (columns, width) in [(Columns::Needed, 2), (Columns::All, 3)] {
            for target in [1, 100, 4096, 1 << 20] {
                let mut r =
                    ParquetReader::open(&path, "s", &Fields::default(), columns, 8192).unwrap();
                let mut next = 0u64;
                while let Some(rows) = r.next_rows(target).unwrap() {
                    assert_eq!(rows.batch.num_columns(), width);
                    assert_eq!(rows.first_row, next);
                    for i in 0..rows.len() {
                        let row = next + i as u64;
                        assert_eq!(rows.id(i, "s").unwrap(), format!("d{row}"));
                        assert_eq!(rows.place(i), ((row / 128) as usize, row));
                    }
                    next += rows.len() as u64;
                }
                assert_eq!(next, 1000, "{columns:?} {target}");
                assert_eq!(r.raw_bytes_read(), std::fs::metadata(&path).unwrap().len());
            }
        }
    }

    /// Each row becomes exactly one JSON line, numbered by its row.
    #[test]
    fn rows_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path(), 10, 4);
        let mut seen = Vec::new();
        for_each_row_as_json(&path, "s", |line, row| {
            seen.push((String::from_utf8(line.to_vec()).unwrap(), row));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), 10);
        assert_eq!(
            seen[3].0,
            r#"{"n":3,"id":"d3","text":"word word word word "}"#
        );
        assert_eq!(
            seen.iter().map(|s| s.1).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
    }

    #[test]
    fn parquet_names_and_magic() {
        assert!(is_parquet_name("a.parquet") && is_parquet_name("x/B.PARQUET"));
        assert!(!is_parquet_name(".parquet") && !is_parquet_name("a.parquet.gz"));
        let dir = tempfile::tempdir().unwrap();
        assert!(sniff(&sample(dir.path(), 3, 2)));
        let j = dir.path().join("a.jsonl");
        std::fs::write(&j, "PAR").unwrap();
        assert!(!sniff(&j) && !sniff(&dir.path().join("missing")));
    }
}
