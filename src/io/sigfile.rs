//! Signature files, the format people cross-check implementations with.
//!
//! - `npy`: `OUT` is a NumPy `.npy` (format 1.0) little-endian `uint32` array of shape
//!   `[docs, num_perm]`; `OUT.ids` holds the ids, one JSON string per line, in row order; and
//!   `OUT.meta.json` states the contract version and parameters (NumPy refuses extra keys in the
//!   `.npy` header itself, so they live beside it).
//! - `parquet`: columns `id` (string) and `signature` (a fixed-size list of `num_perm`
//!   `uint32`), one row per document; the contract version, `k`, `num_perm`, `seed` and the
//!   engine in the file's key-value metadata (`neardup.contract`, `neardup.k`, ...).
//! - `tsv`: a first line `#neardup-signatures contract=... k=... num_perm=... seed=...`, then one
//!   line per document: the id, a TAB, the entries in decimal joined by commas. An id that
//!   contains a TAB, CR or LF, or starts with `"` or `#`, is written as a JSON string.
//!
//! Loading a file checks its contract version and, when asked, its parameters: signatures made
//! otherwise are an error, never silently mixed.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::Error;
use crate::sign::minhash::{MinHashParams, CONTRACT_VERSION};
use crate::text::{Normalize, ShingleUnit};

/// The on-disk formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SigFormat {
    Npy,
    Tsv,
    Parquet,
}

crate::named!(
    SigFormat,
    "format",
    [
        ("npy", SigFormat::Npy, ""),
        ("tsv", SigFormat::Tsv, ""),
        ("parquet", SigFormat::Parquet, ""),
    ]
);

/// What `OUT.meta.json` holds (and the tsv header line encodes).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SigMeta {
    pub contract: String,
    /// The parameter tuple (the text options written only when not the default), its fields
    /// in place in the file.
    #[serde(flatten)]
    pub params: MinHashParams,
    pub documents: u64,
    /// The engine that computed them (informational).
    #[serde(default)]
    pub engine: String,
}

impl SigMeta {
    /// The metadata of a file of no rows yet, made under this contract with `params`.
    pub fn new(params: MinHashParams, engine: &str) -> Self {
        SigMeta {
            contract: CONTRACT_VERSION.to_string(),
            params,
            documents: 0,
            engine: engine.to_string(),
        }
    }

    pub fn params(&self) -> MinHashParams {
        self.params
    }
}

/// Width reserved for the npy header so the row count can be filled in at the end.
const NPY_HEADER_TOTAL: usize = 128;

fn npy_header(rows: u64, cols: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '<u4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    let mut h = Vec::with_capacity(NPY_HEADER_TOTAL);
    h.extend_from_slice(b"\x93NUMPY\x01\x00");
    let header_len = NPY_HEADER_TOTAL - 10;
    h.extend_from_slice(&(header_len as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    assert!(
        h.len() < NPY_HEADER_TOTAL,
        "npy header fits its reserved width"
    );
    h.resize(NPY_HEADER_TOTAL - 1, b' ');
    h.push(b'\n');
    h
}

fn needs_json(id: &str) -> bool {
    id.starts_with('"') || id.starts_with('#') || id.contains(['\t', '\n', '\r'])
}

/// Rows of at least this many bytes in one [`SigWriter::push_rows`] go to an npy file directly.
const DIRECT_ROWS_BYTES: usize = 64 << 10;

/// Streams signature rows into a file of any format. Files appear only on
/// [`SigWriter::finish`].
pub struct SigWriter(Writer);

enum Writer {
    Flat(Box<FlatWriter>),
    #[cfg(feature = "parquet")]
    Table(Box<TableSigs>),
}

impl SigWriter {
    /// Start writing to `path`. npy and Parquet need a plain file path (not `-`, not
    /// compressed): an npy header is written last, a Parquet file compresses itself.
    pub fn create(
        path: &str,
        format: SigFormat,
        params: MinHashParams,
        engine: &str,
    ) -> Result<Self, Error> {
        if path == "-" || path.ends_with(".gz") || path.ends_with(".zst") {
            return Err(Error::Param(format!(
                "{path}: signature files must be plain file paths (npy headers are written last, \
                 Parquet compresses itself; compress an npy or tsv file afterwards if you need \
                 to)"
            )));
        }
        Ok(SigWriter(match format {
            #[cfg(feature = "parquet")]
            SigFormat::Parquet => Writer::Table(Box::new(TableSigs::create(path, params, engine)?)),
            #[cfg(not(feature = "parquet"))]
            SigFormat::Parquet => {
                return Err(Error::Feature {
                    feature: "parquet",
                    what: format!("{path}: a Parquet signature file"),
                })
            }
            _ => Writer::Flat(Box::new(FlatWriter::create(path, format, params, engine)?)),
        }))
    }

    /// Append one document's row.
    pub fn push(&mut self, id: &str, row: &[u32]) -> Result<(), Error> {
        match &mut self.0 {
            Writer::Flat(w) => w.push(id, row),
            #[cfg(feature = "parquet")]
            Writer::Table(w) => w.push_rows(std::iter::once(id), row),
        }
    }

    /// Append the rows of several documents at once: `rows` holds `ids.len()` rows, in order.
    pub fn push_rows<'a>(
        &mut self,
        ids: impl ExactSizeIterator<Item = &'a str>,
        rows: &[u32],
    ) -> Result<(), Error> {
        match &mut self.0 {
            Writer::Flat(w) => w.push_rows(ids, rows),
            #[cfg(feature = "parquet")]
            Writer::Table(w) => w.push_rows(ids, rows),
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        match &self.0 {
            Writer::Flat(w) => w.rows,
            #[cfg(feature = "parquet")]
            Writer::Table(w) => w.meta.documents,
        }
    }

    /// Write what is left and move every file into place.
    pub fn finish(self) -> Result<SigMeta, Error> {
        match self.0 {
            Writer::Flat(w) => (*w).finish(),
            #[cfg(feature = "parquet")]
            Writer::Table(w) => w.finish(),
        }
    }
}

#[cfg(feature = "parquet")]
/// Rows gathered before they go to a Parquet signature file as one batch.
const TABLE_BATCH_ROWS: usize = 16 << 10;

#[cfg(feature = "parquet")]
/// Keys of a Parquet signature file's key-value metadata (and, when not the default, the text
/// options under `neardup.shingle` and `neardup.normalize`).
const META_KEYS: [&str; 5] = [
    "neardup.contract",
    "neardup.k",
    "neardup.num_perm",
    "neardup.seed",
    "neardup.engine",
];

#[cfg(feature = "parquet")]
/// A Parquet signature file being written.
struct TableSigs {
    writer: crate::io::parquet::TableWriter,
    schema: arrow_schema::SchemaRef,
    meta: SigMeta,
    ids: Vec<String>,
    rows: Vec<u32>,
}

#[cfg(feature = "parquet")]
fn signature_schema(meta: &SigMeta) -> arrow_schema::Schema {
    use arrow_schema::{DataType, Field};
    let values = [
        meta.contract.clone(),
        meta.params.k.to_string(),
        meta.params.num_perm.to_string(),
        meta.params.seed.to_string(),
        meta.engine.clone(),
    ];
    let mut md: std::collections::HashMap<String, String> = META_KEYS
        .iter()
        .map(|k| k.to_string())
        .zip(values)
        .collect();
    if !meta.params.shingle.is_default() {
        md.insert("neardup.shingle".into(), meta.params.shingle.name().into());
    }
    if !meta.params.normalize.is_default() {
        md.insert(
            "neardup.normalize".into(),
            meta.params.normalize.name().into(),
        );
    }
    arrow_schema::Schema::new_with_metadata(
        vec![
            Field::new("id", DataType::Utf8, false),
            Field::new(
                "signature",
                DataType::FixedSizeList(
                    std::sync::Arc::new(Field::new("item", DataType::UInt32, false)),
                    meta.params.num_perm as i32,
                ),
                false,
            ),
        ],
        md,
    )
}

#[cfg(feature = "parquet")]
impl TableSigs {
    fn create(path: &str, params: MinHashParams, engine: &str) -> Result<Self, Error> {
        let meta = SigMeta::new(params, engine);
        let schema = std::sync::Arc::new(signature_schema(&meta));
        let writer = crate::io::parquet::TableWriter::create(path, &schema, &[])?;
        Ok(TableSigs {
            writer,
            schema,
            meta,
            ids: Vec::new(),
            rows: Vec::new(),
        })
    }

    fn push_rows<'a>(
        &mut self,
        ids: impl ExactSizeIterator<Item = &'a str>,
        rows: &[u32],
    ) -> Result<(), Error> {
        assert_eq!(
            rows.len(),
            ids.len() * self.meta.params.num_perm,
            "one row per id"
        );
        self.meta.documents += ids.len() as u64;
        self.ids.extend(ids.map(str::to_string));
        self.rows.extend_from_slice(rows);
        if self.ids.len() >= TABLE_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Error> {
        use arrow_array::{ArrayRef, FixedSizeListArray, RecordBatch, StringArray, UInt32Array};
        if self.ids.is_empty() {
            return Ok(());
        }
        let item = std::sync::Arc::new(arrow_schema::Field::new(
            "item",
            arrow_schema::DataType::UInt32,
            false,
        ));
        let values = UInt32Array::from(std::mem::take(&mut self.rows));
        let sigs = FixedSizeListArray::new(
            item,
            self.meta.params.num_perm as i32,
            std::sync::Arc::new(values),
            None,
        );
        let ids = StringArray::from_iter_values(self.ids.drain(..));
        let cols: Vec<ArrayRef> = vec![std::sync::Arc::new(ids), std::sync::Arc::new(sigs)];
        let batch = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| Error::io(self.writer.name(), std::io::Error::other(e)))?;
        self.writer.write(&batch, &[])
    }

    fn finish(mut self: Box<Self>) -> Result<SigMeta, Error> {
        self.flush()?;
        self.writer.finish()?;
        Ok(self.meta)
    }
}

#[cfg(feature = "parquet")]
/// A Parquet signature file read back (see the module docs for its layout).
fn read_table_signatures(path: &str) -> Result<SigFile, Error> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let err = |msg: String| Error::SignatureFile {
        path: path.to_string(),
        msg,
    };
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| err(format!("not a readable Parquet file: {e}")))?;
    let md = builder.schema().metadata().clone();
    let get = |k: &str| {
        md.get(k).cloned().ok_or_else(|| {
            err(format!(
                "not a neardup signature file (no `{k}` in its metadata)"
            ))
        })
    };
    let num = |k: &str| -> Result<u64, Error> {
        get(k)?
            .parse()
            .map_err(|e| err(format!("`{k}` in its metadata is not a number: {e}")))
    };
    let meta = SigMeta {
        contract: get(META_KEYS[0])?,
        params: MinHashParams {
            k: num(META_KEYS[1])? as usize,
            num_perm: num(META_KEYS[2])? as usize,
            seed: num(META_KEYS[3])?,
            shingle: match md.get("neardup.shingle") {
                None => ShingleUnit::Word,
                Some(v) => ShingleUnit::parse(v)
                    .ok_or_else(|| err(format!("`neardup.shingle` {v:?} is not word or char")))?,
            },
            normalize: match md.get("neardup.normalize") {
                None => Normalize::None,
                Some(v) => Normalize::parse(v).ok_or_else(|| {
                    err(format!(
                        "`neardup.normalize` {v:?} is not none, nfc or nfkc"
                    ))
                })?,
            },
        },
        documents: 0,
        engine: md.get(META_KEYS[4]).cloned().unwrap_or_default(),
    };
    let reader = builder
        .build()
        .map_err(|e| err(format!("not a readable Parquet file: {e}")))?;
    let (mut ids, mut sigs) = (Vec::new(), Vec::new());
    for batch in reader {
        let batch = batch.map_err(|e| err(format!("not a readable Parquet file: {e}")))?;
        let (Some(id), Some(sig)) = (
            batch.column_by_name("id"),
            batch.column_by_name("signature"),
        ) else {
            return Err(err("no `id` and `signature` columns".into()));
        };
        let (Some(id), Some(sig)) = (id.as_string_opt::<i32>(), sig.as_fixed_size_list_opt())
        else {
            return Err(err(
                "`id` must be strings and `signature` fixed-size lists of uint32".into(),
            ));
        };
        if sig.value_length() as usize != meta.params.num_perm {
            return Err(err(format!(
                "signatures of {} values, the metadata says num_perm={}",
                sig.value_length(),
                meta.params.num_perm
            )));
        }
        let Some(values) = sig
            .values()
            .as_primitive_opt::<arrow_array::types::UInt32Type>()
        else {
            return Err(err("`signature` values must be uint32".into()));
        };
        if id.null_count() > 0 || sig.null_count() > 0 || values.null_count() > 0 {
            return Err(err("null ids or signature values".into()));
        }
        ids.extend(id.iter().map(|s| s.unwrap_or_default().to_string()));
        let start = sig.value_offset_at(0);
        sigs.extend_from_slice(&values.values()[start..start + sig.len() * meta.params.num_perm]);
    }
    let mut meta = meta;
    meta.documents = ids.len() as u64;
    Ok(SigFile { meta, ids, sigs })
}

/// Streams signature rows into an npy or tsv file.
struct FlatWriter {
    format: SigFormat,
    path: String,
    meta: SigMeta,
    main: crate::io::output::Partial,
    main_buf: Vec<u8>,
    ids: Option<crate::io::Output>,
    /// The ids file's next lines (npy), written out with `main_buf`, or by
    /// [`SigWriter::push_rows`] once they fill an output buffer.
    ids_buf: Vec<u8>,
    rows: u64,
}

impl FlatWriter {
    fn create(
        path: &str,
        format: SigFormat,
        params: MinHashParams,
        engine: &str,
    ) -> Result<Self, Error> {
        let mut main = crate::io::output::Partial::new(crate::io::output::temp_beside(
            &crate::io::output::through_links(Path::new(path)),
        )?);
        let meta = SigMeta::new(params, engine);
        let ids = match format {
            SigFormat::Npy => {
                main.file_mut()
                    .write_all(&npy_header(0, params.num_perm))
                    .map_err(|e| Error::io(path, e))?;
                Some(crate::io::Output::create(&format!("{path}.ids"))?)
            }
            SigFormat::Tsv => {
                writeln!(
                    main.file_mut(),
                    "#neardup-signatures contract={} k={} num_perm={} seed={}{}",
                    CONTRACT_VERSION,
                    params.k,
                    params.num_perm,
                    params.seed,
                    params.rule_words()
                )
                .map_err(|e| Error::io(path, e))?;
                None
            }
            SigFormat::Parquet => unreachable!("a Parquet signature file is a TableSigs"),
        };
        Ok(FlatWriter {
            format,
            path: path.to_string(),
            meta,
            main,
            main_buf: Vec::new(),
            ids,
            ids_buf: Vec::new(),
            rows: 0,
        })
    }

    fn push(&mut self, id: &str, row: &[u32]) -> Result<(), Error> {
        debug_assert_eq!(row.len(), self.meta.params.num_perm);
        match self.format {
            SigFormat::Npy => {
                // npy rows are little-endian u32: on little-endian machines, the row's bytes.
                #[cfg(target_endian = "little")]
                self.main_buf.extend_from_slice(bytemuck::cast_slice(row));
                #[cfg(not(target_endian = "little"))]
                for v in row {
                    self.main_buf.extend_from_slice(&v.to_le_bytes());
                }
                serde_json::to_writer(&mut self.ids_buf, id).expect("writing JSON to memory");
                self.ids_buf.push(b'\n');
            }
            SigFormat::Parquet => unreachable!("a Parquet signature file is a TableSigs"),
            SigFormat::Tsv => {
                if needs_json(id) {
                    let j = serde_json::to_string(id).expect("a string serializes");
                    self.main_buf.extend_from_slice(j.as_bytes());
                } else {
                    self.main_buf.extend_from_slice(id.as_bytes());
                }
                self.main_buf.push(b'\t');
                let mut first = true;
                let mut ib = itoa_buf();
                for &v in row {
                    if !first {
                        self.main_buf.push(b',');
                    }
                    first = false;
                    self.main_buf.extend_from_slice(ib.format(v));
                }
                self.main_buf.push(b'\n');
            }
        }
        self.rows += 1;
        if self.main_buf.len() >= 1 << 20 {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Append the rows of several documents at once: `rows` holds `ids.len()` rows, in order.
    /// An npy file (on a little-endian machine) gets them straight from `rows`, not through
    /// the buffer: one copy fewer of the whole matrix, and a megabyte of buffer that is never
    /// touched (each fresh page is a fault). The ids wait in their buffer until it fills.
    fn push_rows<'a>(
        &mut self,
        ids: impl ExactSizeIterator<Item = &'a str>,
        rows: &[u32],
    ) -> Result<(), Error> {
        let np = self.meta.params.num_perm;
        assert_eq!(rows.len(), ids.len() * np, "one row per id");
        // A few rows (a tiny input file's chunk) go through the buffer, as one at a time do:
        // a write call each would cost more than the copy.
        let few = rows.len() * 4 < DIRECT_ROWS_BYTES;
        if few || self.format != SigFormat::Npy || cfg!(not(target_endian = "little")) {
            for (id, row) in ids.zip(rows.chunks_exact(np)) {
                self.push(id, row)?;
            }
            return Ok(());
        }
        let n = ids.len() as u64;
        for id in ids {
            serde_json::to_writer(&mut self.ids_buf, id).expect("writing JSON to memory");
            self.ids_buf.push(b'\n');
        }
        let file = self.main.file_mut();
        if !self.main_buf.is_empty() {
            file.write_all(&self.main_buf)
                .map_err(|e| Error::io(&self.path, e))?;
            self.main_buf.clear();
        }
        file.write_all(bytemuck::cast_slice(rows))
            .map_err(|e| Error::io(&self.path, e))?;
        self.rows += n;
        // At least the ids file's buffer size, so that it passes the bytes straight through.
        if self.ids_buf.len() >= crate::io::output::OUTPUT_BUFFER_BYTES {
            if let Some(ids) = self.ids.as_mut() {
                ids.write_all(&self.ids_buf)?;
            }
            self.ids_buf.clear();
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<(), Error> {
        self.main
            .file_mut()
            .write_all(&self.main_buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.main_buf.clear();
        if let Some(ids) = self.ids.as_mut() {
            ids.write_all(&self.ids_buf)?;
        }
        self.ids_buf.clear();
        Ok(())
    }

    /// Fill in the header, write the metadata, and move every file into place.
    fn finish(mut self) -> Result<SigMeta, Error> {
        self.flush_buf()?;
        self.meta.documents = self.rows;
        let path = self.path.clone();
        let io = |e| Error::io(&path, e);
        if self.format == SigFormat::Npy {
            let f = self.main.file_mut().get_mut().as_file_mut();
            f.seek(SeekFrom::Start(0)).map_err(io)?;
            f.write_all(&npy_header(self.rows, self.meta.params.num_perm))
                .map_err(io)?;
            let meta_json = serde_json::to_vec_pretty(&self.meta).expect("metadata serializes");
            // The sidecars are synced and renamed on a second thread while this one syncs the
            // matrix: three `fsync`s one after another would keep both cores idle at the end
            // of a short run (docs/BENCHMARKS.md). The matrix is still renamed last, so its
            // presence means the set is whole.
            let ids = self.ids.take();
            let main = &mut self.main;
            let meta_path = format!("{path}.meta.json");
            let pending = std::sync::Mutex::new(Some((meta_json, ids)));
            let finish_sidecars = || -> Result<(), Error> {
                let taken = pending.lock().unwrap_or_else(|e| e.into_inner()).take();
                let (meta_json, ids) = taken.expect("the sidecars are finished once");
                crate::io::write_file_atomic(&meta_path, &meta_json)?;
                ids.map_or(Ok(()), |ids| ids.finish())
            };
            std::thread::scope(|s| {
                // On a scoped thread; where none can be started, here, after the matrix's sync.
                let handle = std::thread::Builder::new()
                    .spawn_scoped(s, finish_sidecars)
                    .ok();
                let synced = main.sync(&path);
                let sidecars = match handle {
                    Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    None => finish_sidecars(),
                };
                sidecars.and(synced)
            })?;
        }
        let meta = self.meta.clone();
        self.main
            .persist(&crate::io::output::through_links(Path::new(&path)), &path)?;
        Ok(meta)
    }
}

/// A tiny integer formatter (no allocation per value).
struct ItoaBuf([u8; 10]);

fn itoa_buf() -> ItoaBuf {
    ItoaBuf([0; 10])
}

impl ItoaBuf {
    fn format(&mut self, mut v: u32) -> &[u8] {
        let mut i = self.0.len();
        loop {
            i -= 1;
            self.0[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        &self.0[i..]
    }
}

/// A signature file read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigFile {
    pub meta: SigMeta,
    pub ids: Vec<String>,
    /// Row-major `[ids.len() x meta.params.num_perm]`.
    pub sigs: Vec<u32>,
}

impl SigFile {
    pub fn row(&self, i: usize) -> &[u32] {
        &self.sigs[i * self.meta.params.num_perm..(i + 1) * self.meta.params.num_perm]
    }

    /// Error unless these signatures were made with `params` under this contract version.
    pub fn expect_params(&self, params: &MinHashParams, path: &str) -> Result<(), Error> {
        if self.meta.params() != *params {
            return Err(Error::SignatureFile {
                path: path.to_string(),
                msg: format!(
                    "made with k={} num_perm={} seed={}{}, but k={} num_perm={} seed={}{} were \
                     asked for; signatures made with other parameters are not comparable",
                    self.meta.params.k,
                    self.meta.params.num_perm,
                    self.meta.params.seed,
                    self.meta.params().rule_words(),
                    params.k,
                    params.num_perm,
                    params.seed,
                    params.rule_words()
                ),
            });
        }
        Ok(())
    }
}

/// Read a signature file (format by content: `.npy` magic, else the tsv header). Errors on
/// another contract version.
pub fn read_signatures(path: &str) -> Result<SigFile, Error> {
    let err = |msg: String| Error::SignatureFile {
        path: path.to_string(),
        msg,
    };
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut magic = [0u8; 6];
    let n = f.read(&mut magic).map_err(|e| Error::io(path, e))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| Error::io(path, e))?;
    let file = if n >= 4 && magic[..4] == crate::io::format::MAGIC {
        #[cfg(feature = "parquet")]
        {
            read_table_signatures(path)?
        }
        #[cfg(not(feature = "parquet"))]
        return Err(Error::Feature {
            feature: "parquet",
            what: format!("{path}: a Parquet signature file"),
        });
    } else if n == 6 && &magic == b"\x93NUMPY" {
        let meta_path = format!("{path}.meta.json");
        let meta_bytes = std::fs::read(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
        let meta: SigMeta = serde_json::from_slice(&meta_bytes)
            .map_err(|e| err(format!("{meta_path} is not valid metadata: {e}")))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
        if bytes.len() < 10 {
            return Err(err("truncated npy header".into()));
        }
        let hl = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let header = std::str::from_utf8(&bytes[10..(10 + hl).min(bytes.len())])
            .map_err(|_| err("npy header is not text".into()))?;
        if !header.contains("'descr': '<u4'") {
            return Err(err(format!(
                "npy dtype is not little-endian uint32: {header}"
            )));
        }
        let data = &bytes[10 + hl..];
        if data.len() != meta.documents as usize * meta.params.num_perm * 4 {
            return Err(err(format!(
                "npy data has {} bytes, the metadata says {} x {} uint32",
                data.len(),
                meta.documents,
                meta.params.num_perm
            )));
        }
        let sigs: Vec<u32> = data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let ids_path = format!("{path}.ids");
        let ids_text = std::fs::read_to_string(&ids_path).map_err(|e| Error::io(&ids_path, e))?;
        let ids = ids_text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str::<String>(l).map_err(|e| Error::Parse {
                    path: ids_path.clone(),
                    line: i as u64 + 1,
                    msg: format!("not a JSON string: {e}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        SigFile { meta, ids, sigs }
    } else {
        let mut lines = BufReader::new(f).lines();
        let header = lines
            .next()
            .ok_or_else(|| err("empty file".into()))?
            .map_err(|e| Error::io(path, e))?;
        let meta = parse_tsv_header(&header).ok_or_else(|| {
            err("not a neardup signature file (no `#neardup-signatures` header line)".into())
        })?;
        let mut ids = Vec::new();
        let mut sigs = Vec::new();
        for (i, line) in lines.enumerate() {
            let line = line.map_err(|e| Error::io(path, e))?;
            let line_no = i as u64 + 2;
            let perr = |msg: String| Error::Parse {
                path: path.to_string(),
                line: line_no,
                msg,
            };
            let (id, vals) = line
                .rsplit_once('\t')
                .ok_or_else(|| perr("no TAB between id and values".into()))?;
            let id = if id.starts_with('"') {
                serde_json::from_str::<String>(id).map_err(|e| perr(format!("bad JSON id: {e}")))?
            } else {
                id.to_string()
            };
            let before = sigs.len();
            for v in vals.split(',') {
                sigs.push(
                    v.parse::<u32>()
                        .map_err(|e| perr(format!("bad value {v:?}: {e}")))?,
                );
            }
            if sigs.len() - before != meta.params.num_perm {
                return Err(perr(format!(
                    "{} values, the header says num_perm={}",
                    sigs.len() - before,
                    meta.params.num_perm
                )));
            }
            ids.push(id);
        }
        let mut meta = meta;
        meta.documents = ids.len() as u64;
        SigFile { meta, ids, sigs }
    };
    if file.meta.contract != CONTRACT_VERSION {
        return Err(err(format!(
            "made under signature contract {:?}, this neardup follows {:?}",
            file.meta.contract, CONTRACT_VERSION
        )));
    }
    // One id per row, each once: `compare` pairs rows by id.
    if file.ids.len() as u64 != file.meta.documents {
        return Err(err(format!(
            "{} ids for {} rows of signatures",
            file.ids.len(),
            file.meta.documents
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(file.ids.len());
    if let Some(dup) = file.ids.iter().find(|id| !seen.insert(id.as_str())) {
        return Err(err(format!("the id {dup:?} appears more than once")));
    }
    Ok(file)
}

fn parse_tsv_header(line: &str) -> Option<SigMeta> {
    let rest = line.strip_prefix("#neardup-signatures")?;
    let mut meta = SigMeta {
        contract: String::new(),
        params: MinHashParams {
            k: 0,
            num_perm: 0,
            seed: 0,
            shingle: ShingleUnit::Word,
            normalize: Normalize::None,
        },
        documents: 0,
        engine: String::new(),
    };
    for kv in rest.split_whitespace() {
        let (k, v) = kv.split_once('=')?;
        match k {
            "contract" => meta.contract = v.to_string(),
            "k" => meta.params.k = v.parse().ok()?,
            "num_perm" => meta.params.num_perm = v.parse().ok()?,
            "seed" => meta.params.seed = v.parse().ok()?,
            "shingle" => meta.params.shingle = ShingleUnit::parse(v)?,
            "normalize" => meta.params.normalize = Normalize::parse(v)?,
            _ => {}
        }
    }
    Some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metadata's bytes, the parameter tuple flattened in place: default text options left
    /// out, others written between the seed and the document count; and read back.
    #[test]
    fn the_metadata_json_is_fixed() {
        let mut meta = SigMeta::new(MinHashParams::default(), "cpu");
        meta.documents = 3;
        let text = serde_json::to_string(&meta).unwrap();
        assert_eq!(
            text,
            r#"{"contract":"neardup-minhash-v1","k":5,"num_perm":128,"seed":0,"documents":3,"engine":"cpu"}"#
        );
        assert_eq!(serde_json::from_str::<SigMeta>(&text).unwrap(), meta);
        meta.params.shingle = ShingleUnit::Char;
        meta.params.normalize = Normalize::Nfkc;
        meta.params.seed = u64::MAX;
        let text = serde_json::to_string(&meta).unwrap();
        assert_eq!(
            text,
            r#"{"contract":"neardup-minhash-v1","k":5,"num_perm":128,"seed":18446744073709551615,"shingle":"char","normalize":"nfkc","documents":3,"engine":"cpu"}"#
        );
        assert_eq!(serde_json::from_str::<SigMeta>(&text).unwrap(), meta);
    }

    /// Rows pushed many at a time (npy: straight to the file) make the same files as rows
    /// pushed one by one, in either order of the two calls, and the ids stay beside their rows
    /// across the ids buffer's flushes (30k ids of 100-odd bytes pass its megabyte).
    #[test]
    fn rows_pushed_together_make_the_same_files_as_rows_pushed_one_by_one() {
        let params = MinHashParams {
            num_perm: 8,
            ..Default::default()
        };
        let n = 30_000;
        let ids: Vec<String> = (0..n)
            .map(|i| format!("/a/path/{}/doc-{i:08}.txt#\"{i}", "long".repeat(16)))
            .collect();
        let rows: Vec<u32> = (0..n * 8)
            .map(|v| (v as u32).wrapping_mul(2_654_435_761))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        for format in [SigFormat::Npy, SigFormat::Tsv] {
            let write = |name: &str, together: bool| -> Vec<u8> {
                let path = dir.path().join(name);
                let path = path.to_str().unwrap();
                let mut w = SigWriter::create(path, format, params, "test").unwrap();
                // Uneven pieces, with single pushes between them.
                let mut d = 0;
                for (i, piece) in [1, 0, 999, 1, 7000, 3, 10_000, 11_996].iter().enumerate() {
                    let end = d + piece;
                    if together && i % 2 == 0 {
                        w.push_rows(
                            ids[d..end].iter().map(|s| s.as_str()),
                            &rows[d * 8..end * 8],
                        )
                        .unwrap();
                    } else {
                        for j in d..end {
                            w.push(&ids[j], &rows[j * 8..(j + 1) * 8]).unwrap();
                        }
                    }
                    d = end;
                }
                assert_eq!(d, n);
                w.finish().unwrap();
                let read = read_signatures(path).unwrap();
                assert_eq!(read.ids, ids, "{format:?}");
                assert_eq!(read.sigs, rows, "{format:?}");
                let mut bytes = std::fs::read(path).unwrap();
                if format == SigFormat::Npy {
                    bytes.extend(std::fs::read(format!("{path}.ids")).unwrap());
                }
                bytes
            };
            let ext = if format == SigFormat::Npy {
                "npy"
            } else {
                "tsv"
            };
            assert!(
                write(&format!("one.{ext}"), false) == write(&format!("many.{ext}"), true),
                "{format:?}"
            );
        }
    }
}
