//! Inputs as the user names them: files (JSONL plain, gzip or zstd, or Parquet, by content)
//! and standard input (spooled to a temporary file where a run reads twice), opened as readers
//! of chunks.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;

use crate::error::Error;

use super::chunk::{Chunk, LineReader};
use super::decode::{GZIP_MAGIC, ZSTD_MAGIC};
use super::output::{register_partial, unregister_partial};
use super::parquet::{self, Columns, ParquetReader};
use super::Fields;

/// An input as the user named it: a path, or `-` for standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSpec {
    Stdin,
    Path(PathBuf),
}

impl InputSpec {
    pub fn parse(s: &str) -> Self {
        if s == "-" {
            InputSpec::Stdin
        } else {
            InputSpec::Path(PathBuf::from(s))
        }
    }
}

impl fmt::Display for InputSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputSpec::Stdin => f.write_str("<stdin>"),
            InputSpec::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A set of inputs that can be read more than once (standard input is spooled to a temporary
/// file on first use, since near-dedup needs two passes and holds no text in memory).
pub struct Inputs {
    files: Vec<(String, PathBuf)>,
    /// Which inputs are Parquet (by content).
    parquet: Vec<bool>,
    _spool: Option<tempfile::TempPath>,
    /// Named pipes and other inputs that are not regular files, spooled to temporary files.
    _pipes: Vec<tempfile::TempPath>,
    /// Plain (uncompressed) files are mapped into memory rather than read (see
    /// [`Inputs::with_mmap`]).
    mmap: bool,
    /// With [`Inputs::with_content_checksums`]: each input's content checksum, once a chunk
    /// reader has read it to its end.
    content: Option<std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>>,
}

impl Inputs {
    /// Open the named inputs: each must exist and be readable. `-` may appear once; with
    /// `spool_stdin`, stdin is copied to a temporary file so it can be re-read.
    pub fn new(specs: &[InputSpec], spool_stdin: bool) -> Result<Self, Error> {
        let mut files = Vec::new();
        let mut parquet = Vec::new();
        let mut spool = None;
        let mut pipes = Vec::new();
        let mut stdin_seen = false;
        for s in specs {
            match s {
                InputSpec::Path(p) => {
                    let name = p.display().to_string();
                    let meta = std::fs::metadata(p).map_err(|e| Error::io(&name, e))?;
                    if meta.is_dir() {
                        return Err(Error::io(
                            &name,
                            io::Error::other("is a directory, not a JSONL or Parquet file"),
                        ));
                    }
                    if !meta.is_file() {
                        // A named pipe, a process substitution (`<(...)`) or a device: its bytes
                        // can be read once only, and detecting the format already reads some.
                        // Copied to a temporary file first, it is read like any file.
                        let file = File::open(p).map_err(|e| Error::io(&name, e))?;
                        let path = spool_to_temp(file, &name)?;
                        let is_parquet = parquet::sniff(&path);
                        if is_parquet && !cfg!(feature = "parquet") {
                            return Err(parquet_missing(&name));
                        }
                        files.push((name, path.to_path_buf()));
                        parquet.push(is_parquet);
                        pipes.push(path);
                        continue;
                    }
                    // By content an empty file is an empty JSONL corpus; named as Parquet, it
                    // is a Parquet file that was never written (a failed copy or export), and
                    // reading it as no documents would hide that.
                    if meta.is_file() && meta.len() == 0 && parquet::is_parquet_name(&name) {
                        return Err(Error::io(
                            &name,
                            io::Error::other(
                                "empty file: not Parquet (a Parquet file holds at least its \
                                 header and footer; an empty corpus is an empty .jsonl file)",
                            ),
                        ));
                    }
                    let is_parquet = parquet::sniff(p);
                    if is_parquet && !cfg!(feature = "parquet") {
                        return Err(parquet_missing(&name));
                    }
                    files.push((name, p.clone()));
                    parquet.push(is_parquet);
                }
                InputSpec::Stdin => {
                    if stdin_seen {
                        return Err(Error::Param("`-` (stdin) can be named only once".into()));
                    }
                    stdin_seen = true;
                    if spool_stdin {
                        let path = spool_to_temp(io::stdin().lock(), "<stdin>")?;
                        let is_parquet = parquet::sniff(&path);
                        if is_parquet && !cfg!(feature = "parquet") {
                            return Err(parquet_missing("<stdin>"));
                        }
                        files.push(("<stdin>".to_string(), path.to_path_buf()));
                        parquet.push(is_parquet);
                        spool = Some(path);
                    } else {
                        files.push(("<stdin>".to_string(), PathBuf::from("-")));
                        parquet.push(false);
                    }
                }
            }
        }
        Ok(Inputs {
            files,
            parquet,
            _spool: spool,
            _pipes: pipes,
            mmap: true,
            content: None,
        })
    }

    /// Keep the checksum ([`super::checksum`]) of the bytes each JSONL input's chunk readers hand
    /// out (the file's bytes, decompressed where it is compressed), for
    /// [`Inputs::content_checksum`]: a pass that reads every byte anyway gets it for the cost of
    /// the hash alone.
    pub fn with_content_checksums(mut self) -> Self {
        self.content = Some(std::sync::Arc::new(std::sync::Mutex::new(vec![
            None;
            self.files
                .len()
        ])));
        self
    }

    /// Input `i`'s content checksum, once a chunk reader has read it to its end (see
    /// [`Inputs::with_content_checksums`]); `None` before that, and for Parquet inputs.
    pub fn content_checksum(&self, i: usize) -> Option<String> {
        let c = self.content.as_ref()?;
        c.lock().unwrap_or_else(|e| e.into_inner())[i].clone()
    }

    /// Whether plain files are mapped into memory (the default) or read with `read(2)`.
    ///
    /// Mapped, the parsers read the page cache in place: no copy into a buffer of the process's
    /// own (the kernel's `_copy_to_iter`, a visible share of a `signatures` profile when read:
    /// docs/BENCHMARKS.md). On Linux 5.14 or later the reader maps each chunk's pages before
    /// handing it out, so a file another process truncates is an error when the reader reaches
    /// the missing part; a truncation of a part already handed out (a chunk waiting or being
    /// processed) still kills the run with `SIGBUS` when it is read, and so does any truncation
    /// on other systems: the price ripgrep documents for its `--mmap`. Compressed files,
    /// standard input and empty files are always read.
    pub fn with_mmap(mut self, on: bool) -> Self {
        self.mmap = on;
        self
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The same inputs named `names` in messages (one each, in order), where the paths
    /// they are read from are not the paths the user gave.
    pub fn with_names(mut self, names: Vec<String>) -> Self {
        assert_eq!(names.len(), self.files.len(), "one name an input");
        for ((name, _), given) in self.files.iter_mut().zip(names) {
            *name = given;
        }
        self
    }

    /// The display name of input `i` (its path, or `<stdin>`).
    pub fn name(&self, i: usize) -> &str {
        &self.files[i].0
    }

    /// Total size on disk of the inputs (compressed size for compressed files; unknown for an
    /// unspooled stdin), for progress estimates.
    pub fn total_bytes(&self) -> Option<u64> {
        let mut t = 0;
        for (_, p) in &self.files {
            if p.as_os_str() == "-" {
                return None;
            }
            t += std::fs::metadata(p).ok()?.len();
        }
        Some(t)
    }

    /// Is input `i` standard input (read as it comes, or spooled)?
    pub fn is_stdin(&self, i: usize) -> bool {
        let p = &self.files[i].1;
        p.as_os_str() == "-"
            || self
                ._spool
                .as_ref()
                .is_some_and(|s| s.as_os_str() == p.as_os_str())
    }

    /// The path of input `i` (a spooled stdin's temporary file).
    pub(crate) fn path(&self, i: usize) -> &std::path::Path {
        &self.files[i].1
    }

    /// Is input `i` a Parquet file?
    pub fn is_parquet(&self, i: usize) -> bool {
        self.parquet[i]
    }

    /// Where record `line` of input `file` was read, for messages: `a.jsonl:12`, or
    /// `a.parquet row 11` (Parquet rows count from 0).
    pub fn place(&self, file: usize, line: u64) -> String {
        if self.parquet[file] {
            format!("{} row {line}", self.files[file].0)
        } else {
            format!("{}:{line}", self.files[file].0)
        }
    }

    /// A reader of input `i` in chunks of about `chunk_bytes`: lines of JSONL, or rows of
    /// Parquet (the `plan`'s columns).
    pub fn reader(
        &self,
        i: usize,
        plan: ReadPlan<'_>,
        chunk_bytes: usize,
    ) -> Result<Reader, Error> {
        if self.parquet[i] {
            let (name, path) = &self.files[i];
            let r = ParquetReader::open(path, name, plan.fields, plan.columns, chunk_bytes)?;
            Ok(Reader::Rows(Box::new(r), i))
        } else {
            self.open(i).map(Reader::Lines)
        }
    }

    /// A [`LineCursor`] over input `i`, when it is a plain JSONL file that can be mapped;
    /// `None` for any other (compressed, Parquet, standard input, `--no-mmap`).
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
    pub(crate) fn line_cursor(&self, i: usize) -> Result<Option<LineCursor>, Error> {
        let (name, path) = &self.files[i];
        if !self.mmap || self.is_parquet(i) || path.as_os_str() == "-" {
            return Ok(None);
        }
        let file = File::open(path).map_err(|e| Error::io(name, e))?;
        Ok(map_plain_file(&file).map(|map| LineCursor {
            map,
            name: name.clone(),
            line_no: 0,
            pos: 0,
            faulted: 0,
            released: 0,
        }))
    }

    /// The lines at `spans` (each a byte range of input `i`, a plain JSONL file, that starts a
    /// line, and the line's number) as one chunk in that order: each line ends at the first
    /// newline of its span. Only those bytes are read; the kernel is told of them all first,
    /// so that the reads overlap.
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
    pub(crate) fn read_spans(&self, i: usize, spans: &[(u64, u64, u64)]) -> Result<Chunk, Error> {
        let (name, path) = &self.files[i];
        let io = |e| Error::io(name, e);
        let file = File::open(path).map_err(io)?;
        super::ranges::prefetch(&file, spans.iter().map(|&(s, e, _)| (s, e - s)));
        let total: u64 = spans.iter().map(|&(s, e, _)| e - s).sum();
        let mut data = vec![0u8; total as usize];
        let mut lines = Vec::with_capacity(spans.len());
        let mut at = 0;
        for &(s, e, line) in spans {
            let buf = &mut data[at..at + (e - s) as usize];
            super::ranges::read_exact_at(&file, buf, s).map_err(io)?;
            let mut end = memchr::memchr(b'\n', buf).unwrap_or(buf.len());
            if end > 0 && buf[end - 1] == b'\r' {
                end -= 1;
            }
            lines.push((at, at + end, line));
            at += buf.len();
        }
        Ok(Chunk {
            file_index: i,
            data: data.into(),
            lines,
            rows: None,
        })
    }

    /// A line reader over input `i`, decompressing by content (a JSONL input; see
    /// [`Inputs::reader`] for any).
    pub fn open(&self, i: usize) -> Result<LineReader, Error> {
        let (name, path) = &self.files[i];
        let raw: Box<dyn Read + Send> = if path.as_os_str() == "-" {
            Box::new(io::stdin())
        } else {
            let file = File::open(path).map_err(|e| Error::io(name, e))?;
            if self.mmap {
                if let Some(map) = map_plain_file(&file) {
                    let mut r = LineReader::from_map(name, map);
                    r.file_index = i;
                    r.content = self.content_sum();
                    return Ok(r);
                }
            }
            Box::new(file)
        };
        let mut r = LineReader::from_read(name, raw)?;
        r.file_index = i;
        r.content = self.content_sum();
        Ok(r)
    }

    /// A running content checksum for a reader, with [`Inputs::with_content_checksums`].
    fn content_sum(&self) -> Option<Box<super::chunk::ContentSum>> {
        self.content.as_ref().map(|out| {
            Box::new(super::chunk::ContentSum {
                sum: super::checksum::Checksum::new(),
                out: out.clone(),
            })
        })
    }
}

impl Drop for Inputs {
    fn drop(&mut self) {
        for p in self._spool.iter().chain(&self._pipes) {
            unregister_partial(p);
        }
    }
}

/// Copy `from` (standard input, a named pipe) to a temporary file that lives as long as the
/// returned path; `name` names it in errors.
fn spool_to_temp(mut from: impl Read, name: &str) -> Result<tempfile::TempPath, Error> {
    let mut tmp = tempfile::Builder::new()
        .prefix("neardup-spool-")
        .tempfile()
        .map_err(|e| Error::io("<temporary spool file>", e))?;
    // Registered before the copy, so an interrupt during it removes the spool too.
    register_partial(tmp.path());
    if let Err(e) = io::copy(&mut from, tmp.as_file_mut()) {
        unregister_partial(tmp.path());
        return Err(Error::io(name, e));
    }
    Ok(tmp.into_temp_path())
}

/// What a Parquet input says in a build without the `parquet` feature.
fn parquet_missing(name: &str) -> Error {
    Error::Feature {
        feature: "parquet",
        what: format!("{name}: reading a Parquet file"),
    }
}

/// What a pass reads of each record: which fields hold the id and text, and (of Parquet) which
/// columns.
#[derive(Debug, Clone, Copy)]
pub struct ReadPlan<'a> {
    pub fields: &'a Fields,
    pub columns: Columns,
}

impl<'a> ReadPlan<'a> {
    /// The id and text only.
    pub fn needed(fields: &'a Fields) -> Self {
        ReadPlan {
            fields,
            columns: Columns::Needed,
        }
    }
}

/// Reads one input as chunks: lines of JSONL, or rows of Parquet.
pub enum Reader {
    Lines(LineReader),
    /// A Parquet file, and its index among the inputs.
    Rows(Box<ParquetReader>, usize),
}

impl Reader {
    /// The next chunk of about `target_bytes`, or `None` at the end of the input.
    pub fn next_chunk(&mut self, target_bytes: usize) -> Result<Option<Chunk>, Error> {
        match self {
            Reader::Lines(r) => r.next_chunk(target_bytes),
            Reader::Rows(r, file_index) => {
                let Some(rows) = r.next_rows(target_bytes)? else {
                    return Ok(None);
                };
                let (data, lines) = if r.wants_json() {
                    let buf = super::pool::spare_buffer(0);
                    parquet::rows_as_json(&rows.batch, rows.first_row, r.name(), buf)?
                } else {
                    (Vec::new(), Vec::new())
                };
                Ok(Some(Chunk {
                    file_index: *file_index,
                    data: data.into(),
                    lines,
                    rows: Some(rows),
                }))
            }
        }
    }

    /// Raw bytes of the input read so far (for progress bars).
    pub fn raw_bytes_read(&self) -> u64 {
        match self {
            Reader::Lines(r) => r.raw_bytes_read(),
            Reader::Rows(r, _) => r.raw_bytes_read(),
        }
    }
}

/// `file` mapped read-only, when it is a non-empty regular file that is not compressed;
/// `None` sends it the `read(2)` way (a map that fails is not an error: reading may still work).
fn map_plain_file(file: &File) -> Option<std::sync::Arc<memmap2::Mmap>> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    // SAFETY: the map is only read. Another process that writes the file while it is mapped
    // changes bytes under the reader's slices (the parsers then read what is there, as a `read`
    // racing the writer would); one that truncates it makes reads of the lost pages fault
    // (`SIGBUS`), which the reader's prefaulting turns into an error for the pages it has not
    // yet handed out: the hazard `Inputs::with_mmap` documents and `--no-mmap` avoids.
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    if map.starts_with(&GZIP_MAGIC) || map.starts_with(&ZSTD_MAGIC) {
        return None;
    }
    // No `MADV_SEQUENTIAL`: the reader prefaults each chunk (which reads ahead as it goes), and
    // the advice would make the kernel evict the pages first under memory pressure, before a
    // second pass (dedup's) reads them again.
    Some(std::sync::Arc::new(map))
}

/// Finds where lines start in a plain JSONL file, in one forward scan: for a stage that keeps
/// where each record is, so that a later one reads only the records it needs.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
pub(crate) struct LineCursor {
    map: std::sync::Arc<memmap2::Mmap>,
    name: String,
    /// Lines passed so far: `pos` is where line `line_no + 1` starts.
    line_no: u64,
    pos: usize,
    /// Bytes prefaulted so far.
    faulted: usize,
    /// Bytes whose pages are unmapped again (see [`LineCursor::release_behind`]).
    released: usize,
}

#[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
impl LineCursor {
    /// The byte offset where line `line` (1-based) starts; lines must be asked for in
    /// ascending order.
    pub(crate) fn offset_of(&mut self, line: u64) -> Result<u64, Error> {
        while self.line_no + 1 < line {
            self.pos = self.next_newline()? + 1;
            self.line_no += 1;
        }
        self.release_behind();
        if self.line_no + 1 != line || self.pos >= self.map.len() {
            return Err(Error::io(
                &self.name,
                io::Error::other(format!(
                    "line {line} is not where it was when the file was read (was it changed?)"
                )),
            ));
        }
        Ok(self.pos as u64)
    }

    /// Unmap the pages wholly behind `pos`, a block at a time: the cursor reads each once, and
    /// mapped they would stay in the process's resident memory for the rest of the pass (a
    /// 2 GB shard as 2 GB). The page cache keeps them.
    fn release_behind(&mut self) {
        let to = self.pos / super::chunk::page_size() * super::chunk::page_size();
        if to >= self.released + super::chunk::READ_BLOCK {
            // SAFETY: a shared read-only file map: a dropped page faults back in from the file,
            // unchanged, if it is read again (the cursor only moves forward).
            #[cfg(unix)]
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.released,
                    to - self.released,
                )
            };
            self.released = to;
        }
    }

    /// The next newline at or after `pos`, prefaulting a block at a time (so that a file
    /// truncated since it was mapped is an error, not `SIGBUS`).
    fn next_newline(&mut self) -> Result<usize, Error> {
        let mut from = self.pos;
        loop {
            if from >= self.map.len() {
                return Err(Error::io(
                    &self.name,
                    io::Error::other("it ends before a line it had (was it changed?)"),
                ));
            }
            if from >= self.faulted {
                let to = (from + super::chunk::READ_BLOCK).min(self.map.len());
                super::chunk::prefault(&self.map, from, to, &self.name)?;
                self.faulted = to;
            }
            if let Some(p) = memchr::memchr(b'\n', &self.map[from..self.faulted]) {
                return Ok(from + p);
            }
            from = self.faulted;
        }
    }
}
