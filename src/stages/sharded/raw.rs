//! The raw row files `sign` writes beside its table, for the stages that read all of them in
//! order or a few at their offsets, without decoding anything: `S.dig`, each document's band
//! digests (`bands` u64); `S.lines`, of a plain JSONL shard, each document's line (its byte
//! offset and line number, u64 each); with `--against`, `S.sig`, each document's signature
//! (`num_perm` u32). Little-endian whatever the machine, so a work
//! directory on shared storage reads the same everywhere.
//!
//! Every raw file is sealed ([`crate::io::checksum::seal`]) and checked against its seal when
//! it is opened, so an edited or damaged file is an error naming it, never rows read as they
//! are.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::codec::{as_fields, Le};
use super::WorkDir;
use crate::error::Error;
use crate::io::ranges::{prefetch, read_exact_at};
use crate::io::Output;

/// Bytes of a row of `S.lines`.
pub(crate) const LINE_ROW_BYTES: usize = 16;

/// A raw row file being written.
pub(crate) struct RawWriter(Output);

impl RawWriter {
    pub fn create(path: &Path) -> Result<Self, Error> {
        Output::with_checksum(&path.display().to_string()).map(RawWriter)
    }

    /// Append `values`, each a little-endian field.
    pub fn values<T: Le + bytemuck::Pod>(&mut self, values: &[T]) -> Result<(), Error> {
        self.0.write_all(&as_fields(values))
    }

    /// Seal the file ([`crate::io::checksum::seal`]) and move it into place.
    pub fn finish(mut self) -> Result<(), Error> {
        crate::io::checksum::seal(&mut self.0)?;
        self.0.finish()
    }
}

/// A raw row file being read.
pub(crate) struct RawRows {
    file: File,
    name: String,
    row_bytes: usize,
    /// Bytes before the first row.
    head: u64,
    /// Rows the file holds.
    pub rows: u64,
    buf: Vec<u8>,
}

impl RawRows {
    /// Open `path`, which `sign` wrote with rows of `row_bytes`; `signed`, when known, is the
    /// rows its table says it signed, which the file must hold exactly. `None` when there is
    /// no such file and `optional`.
    pub fn open(
        work: &WorkDir,
        path: &Path,
        row_bytes: usize,
        signed: Option<u64>,
        optional: bool,
    ) -> Result<Option<Self>, Error> {
        let name = path.display().to_string();
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && optional => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(work.missing(path, "sign"))
            }
            Err(e) => return Err(Error::io(&name, e)),
        };
        let len = file.metadata().map_err(|e| Error::io(&name, e))?.len();
        let remedy = "run `neardup stage sign` again in an empty work directory";
        let len = crate::io::checksum::check_sealed(path, &file, len, remedy)?;
        let width = row_bytes as u64;
        if len % width != 0 || signed.is_some_and(|n| n * width != len) {
            return Err(Error::Work {
                path: name,
                msg: format!(
                    "holds {len} bytes, not whole rows of {row_bytes} for each of its shard's \
                     signed documents: run `neardup stage sign` again in an empty work \
                     directory"
                ),
            });
        }
        Ok(Some(RawRows {
            file,
            name,
            row_bytes,
            head: 0,
            rows: len / width,
            buf: Vec::new(),
        }))
    }

    /// Shard `shard`'s band digests (`signed`: see [`RawRows::open`]).
    pub fn digests(work: &WorkDir, shard: usize, signed: Option<u64>) -> Result<Self, Error> {
        let width = work.config().lsh.bands * 8;
        let path = work.digests_file(shard);
        Ok(Self::open(work, &path, width, signed, false)?.expect("required"))
    }

    /// Shard `shard`'s lines, when it is a plain JSONL shard.
    pub fn lines(work: &WorkDir, shard: usize) -> Result<Option<Self>, Error> {
        Self::open(work, &work.lines_file(shard), LINE_ROW_BYTES, None, true)
    }

    /// The next `n` rows, in order.
    pub fn read_next(&mut self, n: usize) -> Result<&[u8], Error> {
        self.buf.resize(n * self.row_bytes, 0);
        self.file
            .read_exact(&mut self.buf)
            .map_err(|e| Error::io(&self.name, e))?;
        Ok(&self.buf)
    }

    /// The file, at its first row not yet read: for a reader of its own over the rows left
    /// (`rows` counts every row, read or not).
    pub fn into_file(self) -> File {
        self.file
    }

    /// Back to the first row, for [`RawRows::read_next`].
    pub fn rewind(&mut self) -> Result<(), Error> {
        use std::io::{Seek, SeekFrom};
        self.file
            .seek(SeekFrom::Start(self.head))
            .map(|_| ())
            .map_err(|e| Error::io(&self.name, e))
    }

    /// The rows `rows` (ascending), one after the other. The kernel is first told of them
    /// all, so the reads of rows not in memory overlap instead of waiting one by one.
    pub fn read_at(&mut self, rows: &[u64]) -> Result<&[u8], Error> {
        if let Some(&last) = rows.last().filter(|&&r| r >= self.rows) {
            return Err(Error::Work {
                path: self.name.clone(),
                msg: format!(
                    "holds {} rows, not row {last}: run `neardup stage sign` again in an empty \
                     work directory",
                    self.rows
                ),
            });
        }
        let width = self.row_bytes as u64;
        prefetch(
            &self.file,
            rows.iter().map(|&r| (self.head + r * width, width)),
        );
        self.buf.resize(rows.len() * self.row_bytes, 0);
        for (&r, out) in rows.iter().zip(self.buf.chunks_exact_mut(self.row_bytes)) {
            read_exact_at(&self.file, out, self.head + r * width)
                .map_err(|e| Error::io(&self.name, e))?;
        }
        Ok(&self.buf)
    }
}

/// The start of a keyed row file: this, then the manifest's key (16 bytes), then 8 zero bytes.
const KEYED_MAGIC: &[u8; 8] = b"NDROWS01";

/// Bytes before a keyed row file's first row.
const KEYED_HEAD: usize = 32;

impl WorkDir {
    /// Start writing the keyed row file `path`: raw rows after a header that names this work
    /// directory's manifest, so that a file of another run is refused rather than mixed in.
    /// Nothing appears at `path` until [`RawWriter::finish`].
    pub(crate) fn create_keyed(&self, path: &Path) -> Result<RawWriter, Error> {
        let name = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(&name, e))?;
        }
        let mut w = RawWriter::create(path)?;
        let mut head = [0u8; KEYED_HEAD];
        head[..8].copy_from_slice(KEYED_MAGIC);
        head[8..24].copy_from_slice(self.key.as_bytes());
        w.values(&head)?;
        Ok(w)
    }

    /// Open the keyed row file `path` (which the stage `stage` writes), of rows of `row_bytes`.
    pub(crate) fn open_keyed(
        &self,
        path: &Path,
        stage: &str,
        row_bytes: usize,
    ) -> Result<RawRows, Error> {
        let name = path.display().to_string();
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.missing(path, stage))
            }
            Err(e) => return Err(Error::io(&name, e)),
        };
        let len = file.metadata().map_err(|e| Error::io(&name, e))?.len();
        let remedy = format!("run `neardup stage {stage}` again in an empty work directory");
        let len = crate::io::checksum::check_sealed(path, &file, len, &remedy)?;
        let mut head = [0u8; KEYED_HEAD];
        let whole =
            len >= KEYED_HEAD as u64 && (len - KEYED_HEAD as u64).is_multiple_of(row_bytes as u64);
        if !whole || file.read_exact(&mut head).is_err() || &head[..8] != KEYED_MAGIC {
            return Err(Error::Work {
                path: name,
                msg: format!(
                    "not a row file of `neardup stage {stage}`: run it again in an empty work \
                     directory"
                ),
            });
        }
        self.check_key(&name, std::str::from_utf8(&head[8..24]).ok())?;
        Ok(RawRows {
            file,
            name,
            row_bytes,
            head: KEYED_HEAD as u64,
            rows: (len - KEYED_HEAD as u64) / row_bytes as u64,
            buf: Vec::new(),
        })
    }

    /// Is the keyed row file `path` (which the stage `stage` writes) there, made for this
    /// manifest? One made for another, or cut short, is an error.
    pub(crate) fn keyed_done(
        &self,
        path: &Path,
        stage: &str,
        row_bytes: usize,
    ) -> Result<bool, Error> {
        if !path.exists() {
            return Ok(false);
        }
        self.open_keyed(path, stage, row_bytes).map(|_| true)
    }
}
