//! Reading and writing: JSONL inputs (plain, gzip or zstd, by content, `-` for stdin), record
//! parsing with errors that name file, line and field, and outputs that appear only when
//! complete (written to a temporary file beside the target, renamed on success).

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::Error;

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
    _spool: Option<tempfile::TempPath>,
    /// Plain (uncompressed) files are mapped into memory rather than read (see
    /// [`Inputs::with_mmap`]).
    mmap: bool,
}

impl Inputs {
    /// Open the named inputs: each must exist and be readable. `-` may appear once; with
    /// `spool_stdin`, stdin is copied to a temporary file so it can be re-read.
    pub fn new(specs: &[InputSpec], spool_stdin: bool) -> Result<Self, Error> {
        let mut files = Vec::new();
        let mut spool = None;
        let mut stdin_seen = false;
        for s in specs {
            match s {
                InputSpec::Path(p) => {
                    let name = p.display().to_string();
                    let meta = std::fs::metadata(p).map_err(|e| Error::io(&name, e))?;
                    if meta.is_dir() {
                        return Err(Error::io(
                            &name,
                            io::Error::other("is a directory, not a JSONL file"),
                        ));
                    }
                    files.push((name, p.clone()));
                }
                InputSpec::Stdin => {
                    if stdin_seen {
                        return Err(Error::Param("`-` (stdin) can be named only once".into()));
                    }
                    stdin_seen = true;
                    if spool_stdin {
                        let mut tmp = tempfile::Builder::new()
                            .prefix("neardup-stdin-")
                            .tempfile()
                            .map_err(|e| Error::io("<temporary spool file>", e))?;
                        // Registered before the copy, so an interrupt during it removes the
                        // spool too.
                        register_partial(tmp.path());
                        if let Err(e) = io::copy(&mut io::stdin().lock(), tmp.as_file_mut()) {
                            unregister_partial(tmp.path());
                            return Err(Error::io("<stdin>", e));
                        }
                        let path = tmp.into_temp_path();
                        files.push(("<stdin>".to_string(), path.to_path_buf()));
                        spool = Some(path);
                    } else {
                        files.push(("<stdin>".to_string(), PathBuf::from("-")));
                    }
                }
            }
        }
        Ok(Inputs {
            files,
            _spool: spool,
            mmap: true,
        })
    }

    /// Whether plain files are mapped into memory (the default) or read with `read(2)`.
    ///
    /// Mapped, the parsers read the page cache in place: no copy into a buffer of our own, which
    /// was the kernel's `_copy_to_iter` at 9% of a `signatures` run. On Linux 5.14 or later the
    /// reader maps each chunk's pages before handing it out, so a file another process
    /// truncates is an error when the reader reaches the missing part; a truncation of a part
    /// already handed out (a chunk waiting or being processed) still kills the run with
    /// `SIGBUS` when it is read, and so does any truncation on other systems: the price ripgrep
    /// documents for its `--mmap`. Compressed files, standard input and empty files are always
    /// read.
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

    /// A line reader over input `i`, decompressing by content.
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
                    return Ok(r);
                }
            }
            Box::new(file)
        };
        let mut r = LineReader::from_read(name, raw)?;
        r.file_index = i;
        Ok(r)
    }
}

impl Drop for Inputs {
    fn drop(&mut self) {
        if let Some(p) = &self._spool {
            unregister_partial(p);
        }
    }
}

/// Wraps a reader to count the raw (possibly compressed) bytes read, for progress bars.
struct CountingReader<R> {
    inner: R,
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R> CountingReader<R> {
    fn new(inner: R) -> Self {
        CountingReader {
            inner,
            count: Default::default(),
        }
    }

    fn counter(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.count.clone()
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Sniff the first bytes: gzip and zstd are decompressed, anything else is read as is.
/// `file` mapped read-only, when it is a non-empty regular file that is not compressed;
/// `None` sends it the `read(2)` way (a map that fails is not an error: reading may still work).
fn map_plain_file(file: &File) -> Option<std::sync::Arc<memmap2::Mmap>> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    // SAFETY: the map is only read. Another process that writes the file while it is mapped
    // changes bytes under our slices (we then parse what is there, as a `read` racing the writer
    // would); one that truncates it makes reads of the lost pages fault (`SIGBUS`), which the
    // reader's prefaulting turns into an error for the pages it has not yet handed out: the
    // hazard `Inputs::with_mmap` documents and `--no-mmap` avoids.
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    if map.starts_with(&GZIP_MAGIC) || map.starts_with(&ZSTD_MAGIC) {
        return None;
    }
    // No `MADV_SEQUENTIAL`: the reader prefaults each chunk (which reads ahead as it goes), and
    // the advice would make the kernel evict the pages first under memory pressure, before a
    // second pass (dedup's) reads them again.
    Some(std::sync::Arc::new(map))
}

fn decompress<R: Read + Send + 'static>(
    raw: R,
    name: &str,
) -> Result<Box<dyn BufRead + Send>, Error> {
    let mut buffered = BufReader::with_capacity(1 << 20, raw);
    let head = buffered.fill_buf().map_err(|e| Error::io(name, e))?;
    if head.starts_with(&GZIP_MAGIC) {
        Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(buffered),
        )))
    } else if head.starts_with(&ZSTD_MAGIC) {
        let dec =
            zstd::stream::read::Decoder::with_buffer(buffered).map_err(|e| Error::io(name, e))?;
        Ok(Box::new(BufReader::with_capacity(1 << 20, dec)))
    } else {
        Ok(Box::new(buffered))
    }
}

/// A block of whole lines read from one input, for parallel parsing.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Index of the input this came from.
    pub file_index: usize,
    /// The raw bytes of the lines (each with its newline, if it had one).
    pub data: ChunkBytes,
    /// For each non-blank line: its byte range in `data` (newline and `\r` excluded) and its
    /// 1-based line number in the input.
    pub lines: Vec<(usize, usize, u64)>,
}

/// Buffers of the streaming passes come back to one of these when done, and the next chunk
/// takes one: a run cycles through a handful of warm buffers instead of faulting in fresh pages
/// (and copying on growth) for each one. Bounded in count and bytes, so that what the spares
/// keep between passes never weighs on peak memory (a GPU engine's 64 MiB chunks are simply
/// freed, as before).
pub(crate) struct Spares<T>(std::sync::Mutex<Vec<Vec<T>>>);

/// More than a pipeline holds at once (reader, channel, chunks in flight, their output pieces).
const SPARE_BUFFERS_MAX: usize = 16;
/// The spares of one kind together hold at most this many bytes (so at most 64 MiB for the
/// two kinds, bytes and signature matrices; `--max-memory` does not count them).
const SPARE_BYTES_MAX: usize = 32 << 20;

impl<T> Spares<T> {
    pub(crate) const fn new() -> Self {
        Spares(std::sync::Mutex::new(Vec::new()))
    }

    /// A spare, as it was handed back (contents and length kept).
    pub(crate) fn take(&self) -> Option<Vec<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Keep `b` for [`Spares::take`], or free it when the spares are full.
    pub(crate) fn give(&self, b: Vec<T>) {
        if b.capacity() == 0 {
            return;
        }
        let size = std::mem::size_of::<T>();
        let mut spare = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = spare.iter().map(|s| s.capacity() * size).sum();
        if spare.len() < SPARE_BUFFERS_MAX && held + b.capacity() * size <= SPARE_BYTES_MAX {
            spare.push(b);
        }
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let spare = self.0.lock().unwrap();
        let bytes = spare.iter().map(|s| s.capacity()).sum::<usize>() * std::mem::size_of::<T>();
        (spare.len(), bytes)
    }
}

/// Byte buffers: chunks read, pieces of output.
static SPARE_BUFFERS: Spares<u8> = Spares::new();

/// An empty buffer of at least `capacity` bytes, a spare one when there is one.
pub fn spare_buffer(capacity: usize) -> Vec<u8> {
    let mut b = spare_buffer_stale(capacity);
    b.clear();
    b
}

/// [`spare_buffer`] with its stale contents kept (the spares keep their length): bytes the
/// caller may overwrite in place, without zeroing them first to make room for a read.
fn spare_buffer_stale(capacity: usize) -> Vec<u8> {
    match SPARE_BUFFERS.take() {
        Some(mut b) => {
            b.reserve(capacity.saturating_sub(b.len()));
            b
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Hand a buffer back for [`spare_buffer`] to reuse (freed instead when the spares are full).
pub fn recycle_buffer(b: Vec<u8>) {
    SPARE_BUFFERS.give(b);
}

/// The bytes of a [`Chunk`]: read into a buffer of its own, or a range of a mapped file.
#[derive(Debug)]
pub enum ChunkBytes {
    Owned(Vec<u8>),
    Mapped {
        map: std::sync::Arc<memmap2::Mmap>,
        start: usize,
        end: usize,
    },
}

impl Default for ChunkBytes {
    fn default() -> Self {
        ChunkBytes::Owned(Vec::new())
    }
}

impl std::ops::Deref for ChunkBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ChunkBytes::Owned(v) => v,
            ChunkBytes::Mapped { map, start, end } => &map[*start..*end],
        }
    }
}

impl From<Vec<u8>> for ChunkBytes {
    fn from(v: Vec<u8>) -> Self {
        ChunkBytes::Owned(v)
    }
}

/// The system's page size (for releasing whole pages of a mapped chunk).
fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        #[cfg(unix)]
        {
            // SAFETY: sysconf has no preconditions.
            let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if p > 0 {
                return p as usize;
            }
        }
        4096
    })
}

impl Drop for Chunk {
    fn drop(&mut self) {
        match std::mem::take(&mut self.data) {
            ChunkBytes::Owned(v) => recycle_buffer(v),
            ChunkBytes::Mapped { map, start, end } => {
                // Unmap the pages that lie wholly inside this chunk: they were read once and
                // will not be again, and mapped they count in the process's resident memory
                // (a 2 GB input would show as 2 GB more). The page cache keeps them; a page
                // shared with the next chunk stays until the map goes.
                let page = page_size();
                let (a, b) = (start.next_multiple_of(page), end / page * page);
                if b > a {
                    // SAFETY: a shared read-only file map: dropped pages fault back in from the
                    // file, unchanged, if anything reads them again (nothing does: each byte
                    // belongs to one chunk).
                    #[cfg(unix)]
                    let _ = unsafe {
                        map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, a, b - a)
                    };
                }
            }
        }
    }
}

impl Chunk {
    pub fn line(&self, i: usize) -> &[u8] {
        let (s, e, _) = self.lines[i];
        &self.data[s..e]
    }

    pub fn line_no(&self, i: usize) -> u64 {
        self.lines[i].2
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Reads an input as chunks of lines. Blank lines (only whitespace) are skipped, in every pass
/// alike, so they never count as records.
pub struct LineReader {
    name: String,
    file_index: usize,
    reader: Box<dyn BufRead + Send>,
    line_no: u64,
    raw_bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Bytes read past the last whole line of the previous chunk, and how many of them a
    /// plain `read` has already handed out.
    carry: Vec<u8>,
    carry_at: usize,
    /// The reader has returned end of input.
    eof: bool,
    /// A mapped plain file and the offset of its first byte not yet handed out (`reader` is
    /// then empty): chunks are ranges of the map, not copies.
    map: Option<(std::sync::Arc<memmap2::Mmap>, usize)>,
}

impl LineReader {
    /// A line reader over a mapped plain file (see [`Inputs::with_mmap`]).
    fn from_map(name: &str, map: std::sync::Arc<memmap2::Mmap>) -> Self {
        LineReader {
            name: name.to_string(),
            file_index: 0,
            reader: Box::new(io::empty()),
            line_no: 0,
            raw_bytes: Default::default(),
            carry: Vec::new(),
            carry_at: 0,
            eof: false,
            map: Some((map, 0)),
        }
    }

    /// A line reader over any byte source named `name` (gzip and zstd detected by content).
    pub fn from_read(name: &str, raw: impl Read + Send + 'static) -> Result<Self, Error> {
        let counted = CountingReader::new(raw);
        let counter = counted.counter();
        let reader = decompress(counted, name)?;
        Ok(LineReader {
            name: name.to_string(),
            file_index: 0,
            reader,
            line_no: 0,
            raw_bytes: counter,
            carry: Vec::new(),
            carry_at: 0,
            eof: false,
            map: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Raw bytes read from the file so far (compressed bytes for compressed input).
    pub fn raw_bytes_read(&self) -> u64 {
        self.raw_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The next chunk of about `target_bytes` (whole lines), or `None` at the end of the input.
    ///
    /// The input is read straight into the chunk, the rest of the target at a time (a read of
    /// at least the `BufReader`'s size skips its buffer), cut after the last newline, and
    /// split into lines with `memchr`; the partial line after the cut starts the next chunk.
    /// Reading line by line (`read_until`, 2.1% of a `signatures` profile) copied every byte
    /// twice. A line longer than the target starts a chunk that runs at least to its end.
    pub fn next_chunk(&mut self, target_bytes: usize) -> Result<Option<Chunk>, Error> {
        let target = target_bytes.max(1);
        if self.map.is_some() {
            return self.next_mapped_chunk(target);
        }
        // A spare buffer's stale bytes are room to read into; only growth past them is zeroed
        // (zeroing a whole chunk before each read cost as much as the copy it saves).
        let mut data = spare_buffer_stale(target.min(64 << 20) + 4096);
        let carried = &self.carry[self.carry_at..];
        if data.len() < carried.len() {
            data.resize(carried.len(), 0);
        }
        data[..carried.len()].copy_from_slice(carried);
        // Bytes of `data` that hold input (the rest is room for the next read), and where to
        // look for the cut: no newline lies before `searched`.
        let mut filled = carried.len();
        self.carry.clear();
        self.carry_at = 0;
        let mut searched = 0;
        let cut = loop {
            if filled >= target || self.eof {
                match memchr::memrchr(b'\n', &data[searched..filled]) {
                    Some(p) => break searched + p + 1,
                    None if self.eof => break filled,
                    // One line longer than the target: read on until it ends.
                    None => searched = filled,
                }
            }
            // The rest of the target (no more: what is read past the last newline is copied
            // over to the next chunk), or a block more while one line outgrows the target.
            let want = if filled < target {
                target - filled
            } else {
                READ_BLOCK
            };
            if data.len() < filled + want {
                // Zeroed once per growth, not per read (a pipe answers in small reads).
                data.resize(filled + want, 0);
            }
            let n = loop {
                match self.reader.read(&mut data[filled..filled + want]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::io(&self.name, annotate_read_error(e))),
                }
            };
            filled += n;
            if n == 0 {
                self.eof = true;
            }
        };
        data.truncate(filled);
        self.carry.extend_from_slice(&data[cut..]);
        data.truncate(cut);
        if data.is_empty() {
            recycle_buffer(data);
            return Ok(None);
        }
        let lines = split_lines(&data, &mut self.line_no);
        Ok(Some(Chunk {
            file_index: self.file_index,
            data: ChunkBytes::Owned(data),
            lines,
        }))
    }

    /// [`LineReader::next_chunk`] over a mapped file: the target's bytes cut after their last
    /// newline (or, when they hold none, after the first newline past them), as a range of the
    /// map.
    fn next_mapped_chunk(&mut self, target: usize) -> Result<Option<Chunk>, Error> {
        let (map, pos) = self.map.as_mut().expect("a mapped reader");
        let (start, len) = (*pos, map.len());
        if start >= len {
            return Ok(None);
        }
        let want = start.saturating_add(target).min(len);
        prefault(map, start, want, &self.name)?;
        let cut = if want == len {
            len
        } else {
            match memchr::memrchr(b'\n', &map[start..want]) {
                Some(p) => start + p + 1,
                // One line longer than the target: on to its end, a block at a time, each
                // block prefaulted before it is searched.
                None => {
                    let mut at = want;
                    loop {
                        let to = at.saturating_add(READ_BLOCK).min(len);
                        prefault(map, at, to, &self.name)?;
                        if let Some(p) = memchr::memchr(b'\n', &map[at..to]) {
                            break at + p + 1;
                        }
                        if to == len {
                            break len;
                        }
                        at = to;
                    }
                }
            }
        };
        *pos = cut;
        self.raw_bytes
            .store(cut as u64, std::sync::atomic::Ordering::Relaxed);
        let data = ChunkBytes::Mapped {
            map: map.clone(),
            start,
            end: cut,
        };
        let lines = split_lines(&data, &mut self.line_no);
        Ok(Some(Chunk {
            file_index: self.file_index,
            data,
            lines,
        }))
    }
}

/// Map the pages of `map[from..to]` in one call, not a fault per 64 KiB as the line split first
/// touches them; and a file that shrank under the map is an error naming it here, where reading
/// the lost pages would end the run with SIGBUS. Linux 5.14 or later (an older kernel answers
/// `EINVAL`, and its reads are left to fault as they come; so are other systems').
fn prefault(map: &memmap2::Mmap, from: usize, to: usize, name: &str) -> Result<(), Error> {
    #[cfg(target_os = "linux")]
    if to > from {
        if let Err(e) = map.advise_range(memmap2::Advice::PopulateRead, from, to - from) {
            let why = match e.raw_os_error() {
                Some(libc::EINVAL) => return Ok(()),
                // What a read past the end of the file would have raised as SIGBUS.
                Some(libc::EFAULT) => {
                    "it is shorter than when it was opened (truncated by another process?)"
                        .to_string()
                }
                _ => format!("it could not be read while mapped ({e})"),
            };
            return Err(Error::io(
                name,
                io::Error::new(e.kind(), format!("{why}; --no-mmap reads it instead")),
            ));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (map, from, to, name);
    Ok(())
}

/// The non-blank lines of `data` (whole lines, the last one perhaps without its newline): each
/// one's byte range (newline and `\r` excluded) and 1-based line number, counting on from
/// `line_no`.
fn split_lines(data: &[u8], line_no: &mut u64) -> Vec<(usize, usize, u64)> {
    let mut lines = Vec::with_capacity(data.len() / 256 + 1);
    let mut start = 0;
    while start < data.len() {
        let nl = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |p| start + p);
        *line_no += 1;
        let mut end = nl;
        if end > start && data[end - 1] == b'\r' {
            end -= 1;
        }
        if !data[start..end].iter().all(|b| b.is_ascii_whitespace()) {
            lines.push((start, end, *line_no));
        }
        start = nl + 1;
    }
    lines
}

/// What [`LineReader::next_chunk`] asks of the reader at once while a line outgrows the
/// chunk target: the size of the `BufReader`s of [`decompress`], so that a read skips them.
const READ_BLOCK: usize = 1 << 20;

impl Read for LineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // The partial line a `next_chunk` read ahead comes first.
        if self.carry_at < self.carry.len() {
            let rest = &self.carry[self.carry_at..];
            let n = buf.len().min(rest.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.carry_at += n;
            if self.carry_at == self.carry.len() {
                self.carry.clear();
                self.carry_at = 0;
            }
            return Ok(n);
        }
        if let Some((map, pos)) = self.map.as_mut() {
            let from = (*pos).min(map.len());
            let to = from.saturating_add(buf.len()).min(map.len());
            prefault(map, from, to, &self.name).map_err(io::Error::other)?;
            let rest = &map[from..];
            let n = buf.len().min(rest.len());
            buf[..n].copy_from_slice(&rest[..n]);
            *pos += n;
            self.raw_bytes
                .store(*pos as u64, std::sync::atomic::Ordering::Relaxed);
            return Ok(n);
        }
        self.reader.read(buf).map_err(annotate_read_error)
    }
}

/// Make decompression failures say what they mean.
fn annotate_read_error(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => io::Error::new(
            e.kind(),
            format!("the compressed stream ends early (truncated file?): {e}"),
        ),
        _ => e,
    }
}

/// Which fields of a record hold its id and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub id: String,
    pub text: String,
    /// Accept integer ids (written as their decimal digits) instead of rejecting them.
    pub numeric_ids: bool,
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            id: "id".into(),
            text: "text".into(),
            numeric_ids: false,
        }
    }
}

/// The id and text of one JSONL record, borrowed from the line when the JSON has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub id: Cow<'a, str>,
    pub text: Cow<'a, str>,
}

/// Parse one line into its id and text. `file` and `line` are used for the error message only.
pub fn parse_record<'a>(
    bytes: &'a [u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<Record<'a>, Error> {
    // The common shape in one pass; anything else (errors included) takes the full parse.
    if let Some((id, text)) = crate::jsonscan::scan_record(bytes, &fields.id, &fields.text) {
        if !id.is_empty() {
            return Ok(Record { id, text });
        }
    }
    parse_record_full(bytes, fields, file, line)
}

/// [`parse_record`] by serde_json alone, without the fast scanner in front: the same answer
/// for every line (the reference the scanner is tested and fuzzed against).
pub fn parse_record_full<'a>(
    bytes: &'a [u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<Record<'a>, Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = RecordSeed { fields }
        .deserialize(&mut de)
        .and_then(|r| de.end().map(|_| r));
    let (id, text) = match parsed {
        Ok(v) => v,
        Err(e) => {
            return Err(Error::Parse {
                path: file.to_string(),
                line,
                msg: describe_json_error(&e, bytes),
            })
        }
    };
    let field_err = |field: &str, msg: String| Error::Field {
        path: file.to_string(),
        line,
        field: field.to_string(),
        msg,
    };
    let id = match id {
        None => return Err(field_err(&fields.id, missing_field(bytes, "--id-field"))),
        Some(FieldValue::Str(s)) => s,
        Some(FieldValue::Integer(n)) if fields.numeric_ids => Cow::Owned(n),
        Some(FieldValue::Integer(_)) => {
            return Err(field_err(
                &fields.id,
                "is a number, ids must be strings (pass --numeric-ids to accept integer ids, \
                 or --id-field to name another field)"
                    .into(),
            ))
        }
        Some(other) => {
            return Err(field_err(
                &fields.id,
                format!("is {}, ids must be strings", other.kind()),
            ))
        }
    };
    if id.is_empty() {
        return Err(field_err(&fields.id, "is empty".into()));
    }
    let text = match text {
        None => {
            return Err(field_err(
                &fields.text,
                missing_field(bytes, "--text-field"),
            ))
        }
        Some(FieldValue::Str(s)) => s,
        Some(other) => {
            return Err(field_err(
                &fields.text,
                format!("is {}, the text must be a string", other.kind()),
            ))
        }
    };
    Ok(Record { id, text })
}

/// "missing", with the fields the record has and the flag that names another one: a corpus
/// whose text sits under `content` or `raw_content` fails on its first line, and the message
/// should say how to go on.
fn missing_field(line: &[u8], flag: &str) -> String {
    let keys = top_level_keys(line);
    if keys.is_empty() {
        return format!("missing (the record has no fields; {flag} names the field to read)");
    }
    const SHOWN: usize = 20;
    let mut list: Vec<String> = keys.iter().take(SHOWN).map(|k| format!("{k:?}")).collect();
    if keys.len() > SHOWN {
        list.push(format!("and {} more", keys.len() - SHOWN));
    }
    format!(
        "missing (the record's fields are {}; name the one to read with {flag})",
        list.join(", ")
    )
}

/// The top-level keys of a JSON object line, in order (empty when it is not one).
fn top_level_keys(line: &[u8]) -> Vec<String> {
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(Key(k)) = map.next_key::<Key>()? {
                map.next_value::<IgnoredAny>()?;
                v.push(k.into_owned());
            }
            Ok(v)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de::Deserializer::deserialize_map(&mut de, Keys).unwrap_or_default()
}

fn describe_json_error(e: &serde_json::Error, bytes: &[u8]) -> String {
    let msg = e.to_string();
    if msg.contains("NEARDUP_NOT_AN_OBJECT") {
        let kind = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't') | Some(b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return format!("the record is {kind}, not a JSON object");
    }
    if let Err(u) = std::str::from_utf8(bytes) {
        return format!(
            "invalid UTF-8 at byte {} of the line (JSON must be UTF-8): {msg}",
            u.valid_up_to()
        );
    }
    format!("not valid JSON: {msg}")
}

/// A field's value as far as we care: a string, an integer, or something else (named).
enum FieldValue<'a> {
    Str(Cow<'a, str>),
    Integer(String),
    Other(&'static str),
}

impl FieldValue<'_> {
    fn kind(&self) -> &'static str {
        match self {
            FieldValue::Str(_) => "a string",
            FieldValue::Integer(_) => "a number",
            FieldValue::Other(k) => k,
        }
    }
}

struct FieldValueVisitor;

impl<'de> Visitor<'de> for FieldValueVisitor {
    type Value = FieldValue<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(FieldValue::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(FieldValue::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(FieldValue::Str(Cow::Owned(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(FieldValue::Integer(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(FieldValue::Integer(v.to_string()))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a non-integer number"))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a boolean"))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("null"))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(FieldValue::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(FieldValue::Other("an object"))
    }
}

impl<'de> de::Deserialize<'de> for FieldValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldValueVisitor)
    }
}

/// A key, borrowed when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

type IdText<'a> = (Option<FieldValue<'a>>, Option<FieldValue<'a>>);

struct RecordSeed<'f> {
    fields: &'f Fields,
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = IdText<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = IdText<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        // A marker we translate into a friendly message in `describe_json_error`.
        f.write_str("NEARDUP_NOT_AN_OBJECT")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut text) = (None, None);
        while let Some(Key(k)) = map.next_key::<Key>()? {
            if k == self.fields.id.as_str() {
                id = Some(map.next_value::<FieldValue>()?);
            } else if k == self.fields.text.as_str() {
                text = Some(map.next_value::<FieldValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok((id, text))
    }
}

/// If `line` is a valid JSON object without the top-level key `absent`, its number of keys;
/// `None` if it has that key or is not a valid object (the caller then takes the full parse,
/// which explains any error).
fn top_level_keys_without(line: &[u8], absent: &str) -> Option<usize> {
    struct Count<'a>(&'a str);
    impl<'de> Visitor<'de> for Count<'_> {
        type Value = Option<usize>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut n = 0;
            let mut found = false;
            while let Some(Key(k)) = map.next_key::<Key>()? {
                found |= k == self.0;
                map.next_value::<IgnoredAny>()?;
                n += 1;
            }
            Ok(if found { None } else { Some(n) })
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let r = de::Deserializer::deserialize_map(&mut de, Count(absent)).ok()?;
    de.end().ok()?;
    r
}

/// "a string", "an array", ... for messages.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Copy `line` (a JSON object) to `out` with `meta.<key> = value` set, keeping every field and
/// its order. An existing `meta` object keeps its fields; a `meta` that is not an object is an
/// error naming the field.
pub fn write_tagged(
    out: &mut Vec<u8>,
    line: &[u8],
    key: &str,
    value: &str,
    file: &str,
    line_no: u64,
) -> Result<(), Error> {
    // Most records have no `meta`: then the line is copied as it is and the new member
    // spliced in before its closing brace, without building the record as a value.
    if let Some(keys) = top_level_keys_without(line, "meta") {
        let end = line
            .iter()
            .rposition(|&b| b == b'}')
            .expect("a JSON object ends with a brace");
        out.extend_from_slice(&line[..end]);
        if keys > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"meta\":{");
        serde_json::to_writer(&mut *out, key).expect("writing JSON to memory cannot fail");
        out.push(b':');
        serde_json::to_writer(&mut *out, value).expect("writing JSON to memory cannot fail");
        out.extend_from_slice(b"}}\n");
        return Ok(());
    }
    // The record has a `meta`: every other member is copied as its raw JSON text; only `meta`
    // is parsed, extended and written back.
    let members = raw_members(line).map_err(|e| Error::Parse {
        path: file.into(),
        line: line_no,
        msg: describe_json_error(&e, line),
    })?;
    out.push(b'{');
    for (i, (k, raw)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, k.as_ref()).expect("writing JSON to memory cannot fail");
        out.push(b':');
        if k == "meta" {
            // Its own members stay raw too; the tag replaces an old one in place, or comes
            // last.
            let inner = raw_members(raw.get().as_bytes()).map_err(|_| {
                let kind = match raw.get().trim_start().as_bytes().first() {
                    Some(b'[') => "an array",
                    Some(b'"') => "a string",
                    Some(b't') | Some(b'f') => "a boolean",
                    Some(b'n') => "null",
                    _ => "a number",
                };
                Error::Field {
                    path: file.into(),
                    line: line_no,
                    field: "meta".into(),
                    msg: format!("is {kind}, it must be an object to hold `{key}`"),
                }
            })?;
            out.push(b'{');
            let mut replaced = false;
            for (j, (ik, iraw)) in inner.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, ik.as_ref()).expect("in memory");
                out.push(b':');
                if ik == key {
                    serde_json::to_writer(&mut *out, value).expect("in memory");
                    replaced = true;
                } else {
                    out.extend_from_slice(iraw.get().as_bytes());
                }
            }
            if !replaced {
                if !inner.is_empty() {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("in memory");
                out.push(b':');
                serde_json::to_writer(&mut *out, value).expect("in memory");
            }
            out.push(b'}');
        } else {
            out.extend_from_slice(raw.get().as_bytes());
        }
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// The members of a JSON object line, each value as its raw text.
fn raw_members(
    line: &[u8],
) -> Result<Vec<(Cow<'_, str>, &serde_json::value::RawValue)>, serde_json::Error> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(Cow<'de, str>, &'de serde_json::value::RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("NEARDUP_NOT_AN_OBJECT")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(Key(k)) = map.next_key::<Key>()? {
                v.push((k, map.next_value::<&serde_json::value::RawValue>()?));
            }
            Ok(v)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let v = de::Deserializer::deserialize_map(&mut de, Members)?;
    de.end()?;
    Ok(v)
}

/// Temporary output files of this process that are not finished yet. An interrupted run
/// (Ctrl-C, SIGTERM, SIGHUP) removes them before exiting, so nothing half-written is left;
/// a SIGKILL leaves them, hidden (`.NAME.XXXX.partial`), never under the final name.
static PARTIAL: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn register_partial(p: &Path) {
    PARTIAL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(p.to_path_buf());
}

fn unregister_partial(p: &Path) {
    let mut v = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    v.retain(|x| x != p);
}

/// Outputs this process has renamed into place (complete), in order.
static COMPLETED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Remove every unfinished temporary output (called by the interrupt handler), and return
/// the outputs that were already complete, which stay.
pub fn remove_partial_outputs() -> Vec<PathBuf> {
    let v = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    for p in v.iter() {
        let _ = std::fs::remove_file(p);
    }
    COMPLETED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// What an interrupted run tells its user, given the outputs it had already completed (a
/// `dedup` with `--clusters` or `--report` finishes its files one after another).
pub fn interrupt_message(completed: &[PathBuf]) -> String {
    if completed.is_empty() {
        "neardup: interrupted; no output was written".into()
    } else {
        let names: Vec<String> = completed.iter().map(|p| p.display().to_string()).collect();
        format!(
            "neardup: interrupted; already complete before the interrupt: {}; no other output \
             was written",
            names.join(", ")
        )
    }
}

/// The write buffer of an [`Output`]: a write of at least this many bytes skips it.
pub(crate) const OUTPUT_BUFFER_BYTES: usize = 1 << 20;

/// Bytes written to an output between two requests to the kernel to start writing them back:
/// a sixteenth of what is written so far, between these bounds. Small steps leave the final
/// `fsync` little to wait for (with 8 MiB steps, the 25.6 MB matrix of a `signatures` run left
/// it 9.6 MB: 6-8 ms with both cores idle; with 1 MiB steps, 1-2 ms); but 1 MiB steps all the
/// way made the 2 GB output of a 1M-document `dedup` about 0.9 s slower (13.0 against 10.6 s
/// in alternating runs, of which 1.5 s was the runs' slot), the many small requests costing
/// CPU and disk.
const WRITEBACK_MIN_STEP: u64 = 1 << 20;
const WRITEBACK_MAX_STEP: u64 = 8 << 20;

/// The step after `written` bytes (see [`WRITEBACK_MIN_STEP`]).
fn writeback_step(written: u64) -> u64 {
    (written / 16).clamp(WRITEBACK_MIN_STEP, WRITEBACK_MAX_STEP)
}

/// A temporary output file that asks the kernel to start writing back each step of bytes
/// ([`writeback_step`]) as soon as they are written (`sync_file_range`, Linux), so that the
/// `fsync` before the rename waits for the last step only, not the whole file: it took 14 ms
/// of a 0.25 s `signatures` run with both cores idle. Elsewhere it is a plain file. The
/// request is only a hint: errors surface at the `fsync`.
pub(crate) struct WritebackFile {
    file: tempfile::NamedTempFile,
    written: u64,
    started: u64,
}

impl WritebackFile {
    pub(crate) fn new(file: tempfile::NamedTempFile) -> Self {
        WritebackFile {
            file,
            written: 0,
            started: 0,
        }
    }

    pub(crate) fn get_ref(&self) -> &tempfile::NamedTempFile {
        &self.file
    }

    pub(crate) fn get_mut(&mut self) -> &mut tempfile::NamedTempFile {
        &mut self.file
    }

    pub(crate) fn into_inner(self) -> tempfile::NamedTempFile {
        self.file
    }
}

impl Write for WritebackFile {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.file.write(b)?;
        self.written += n as u64;
        if self.written - self.started >= writeback_step(self.started) {
            #[cfg(target_os = "linux")]
            {
                use std::os::fd::AsRawFd;
                // SAFETY: a plain system call on a file descriptor this value owns.
                unsafe {
                    libc::sync_file_range(
                        self.file.as_file().as_raw_fd(),
                        self.started as libc::off64_t,
                        (self.written - self.started) as libc::off64_t,
                        libc::SYNC_FILE_RANGE_WRITE,
                    );
                }
            }
            self.started = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A registered temporary file: unregistered when it is persisted or dropped.
pub(crate) struct Partial {
    file: Option<WritebackFile>,
    path: PathBuf,
}

impl Partial {
    pub(crate) fn new(file: tempfile::NamedTempFile) -> Self {
        let path = file.path().to_path_buf();
        register_partial(&path);
        Partial {
            file: Some(WritebackFile::new(file)),
            path,
        }
    }

    /// Re-wrap a file whose registration was kept by its writer (see `Output`).
    fn new_persisted(file: tempfile::NamedTempFile) -> Self {
        let path = file.path().to_path_buf();
        Partial {
            file: Some(WritebackFile::new(file)),
            path,
        }
    }

    /// The file, for writing (sequential writes start their writeback early).
    pub(crate) fn file_mut(&mut self) -> &mut WritebackFile {
        self.file.as_mut().expect("not yet persisted")
    }

    /// Wait until the file's bytes are on disk (so that a later [`Partial::persist`] has little
    /// left to wait for).
    pub(crate) fn sync(&mut self, name: &str) -> Result<(), Error> {
        self.file_mut()
            .get_mut()
            .as_file()
            .sync_all()
            .map_err(|e| Error::io(name, e))
    }

    /// Sync and rename into place.
    pub(crate) fn persist(mut self, target: &Path, name: &str) -> Result<(), Error> {
        let f = self.file.take().expect("persisted once").into_inner();
        f.as_file().sync_all().map_err(|e| Error::io(name, e))?;
        let r = f.persist(target).map_err(|e| Error::io(name, e.error));
        unregister_partial(&self.path);
        if r.is_ok() {
            COMPLETED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(target.to_path_buf());
        }
        r.map(|_| ())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        // A dropped NamedTempFile deletes itself; only the registry needs updating.
        self.file.take();
        unregister_partial(&self.path);
    }
}

/// An output file that appears only when complete: bytes go to a temporary file beside the
/// target, renamed over it by [`Output::finish`]. Dropped without `finish` (an error, a panic),
/// the temporary file is removed. `-` writes to standard output. A target ending in `.gz` or
/// `.zst` is compressed.
pub struct Output {
    name: String,
    inner: OutputInner,
}

enum OutputInner {
    Stdout(io::BufWriter<io::Stdout>),
    File {
        writer: Box<dyn FinishWrite>,
        target: PathBuf,
    },
    Done,
}

/// A writer that can be flushed to completion, handing back the temporary file.
trait FinishWrite: Write + Send {
    fn finish_file(self: Box<Self>) -> io::Result<tempfile::NamedTempFile>;
    fn temp_path(&self) -> Option<PathBuf>;
}

struct Plain(io::BufWriter<WritebackFile>);
impl Write for Plain {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
impl FinishWrite for Plain {
    fn finish_file(self: Box<Self>) -> io::Result<tempfile::NamedTempFile> {
        Ok(self
            .0
            .into_inner()
            .map_err(|e| e.into_error())?
            .into_inner())
    }
    fn temp_path(&self) -> Option<PathBuf> {
        Some(self.0.get_ref().get_ref().path().to_path_buf())
    }
}

struct Gz(flate2::write::GzEncoder<io::BufWriter<WritebackFile>>);
impl Write for Gz {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
impl FinishWrite for Gz {
    fn finish_file(self: Box<Self>) -> io::Result<tempfile::NamedTempFile> {
        Ok(self
            .0
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .into_inner())
    }
    fn temp_path(&self) -> Option<PathBuf> {
        Some(self.0.get_ref().get_ref().get_ref().path().to_path_buf())
    }
}

struct Zst(zstd::stream::write::Encoder<'static, io::BufWriter<WritebackFile>>);
impl Write for Zst {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
impl FinishWrite for Zst {
    fn finish_file(self: Box<Self>) -> io::Result<tempfile::NamedTempFile> {
        Ok(self
            .0
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .into_inner())
    }
    fn temp_path(&self) -> Option<PathBuf> {
        Some(self.0.get_ref().get_ref().get_ref().path().to_path_buf())
    }
}

impl Output {
    /// Start writing `path` (`-`: stdout). The directory must exist; nothing appears at `path`
    /// until [`Output::finish`].
    pub fn create(path: &str) -> Result<Self, Error> {
        if path == "-" {
            return Ok(Output {
                name: "<stdout>".into(),
                inner: OutputInner::Stdout(io::BufWriter::with_capacity(
                    OUTPUT_BUFFER_BYTES,
                    io::stdout(),
                )),
            });
        }
        let target = PathBuf::from(path);
        let tmp = temp_beside(&target)?;
        register_partial(tmp.path());
        let buf = io::BufWriter::with_capacity(OUTPUT_BUFFER_BYTES, WritebackFile::new(tmp));
        let writer: Box<dyn FinishWrite> = if path.ends_with(".gz") {
            Box::new(Gz(flate2::write::GzEncoder::new(
                buf,
                flate2::Compression::default(),
            )))
        } else if path.ends_with(".zst") {
            Box::new(Zst(
                zstd::stream::write::Encoder::new(buf, 3).map_err(|e| Error::io(path, e))?
            ))
        } else {
            Box::new(Plain(buf))
        };
        Ok(Output {
            name: path.to_string(),
            inner: OutputInner::File { writer, target },
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Write bytes.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let r = match &mut self.inner {
            OutputInner::Stdout(w) => w.write_all(bytes),
            OutputInner::File { writer, .. } => writer.write_all(bytes),
            OutputInner::Done => panic!("write after finish"),
        };
        r.map_err(|e| Error::io(&self.name, e))
    }

    /// Flush everything and move the file into place.
    pub fn finish(mut self) -> Result<(), Error> {
        match std::mem::replace(&mut self.inner, OutputInner::Done) {
            OutputInner::Stdout(mut w) => w.flush().map_err(|e| Error::io(&self.name, e)),
            OutputInner::File { writer, target } => {
                let registered = writer.temp_path();
                let r = writer
                    .finish_file()
                    .map_err(|e| Error::io(&self.name, e))
                    .and_then(|tmp| Partial::new_persisted(tmp).persist(&target, &self.name));
                if let Some(p) = registered {
                    unregister_partial(&p);
                }
                r
            }
            OutputInner::Done => Ok(()),
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Unfinished (an error or a panic): the temporary file deletes itself when its writer
        // drops; take it off the interrupt handler's list. `finish` leaves `Done` behind.
        if let OutputInner::File { writer, .. } = &self.inner {
            if let Some(p) = writer.temp_path() {
                unregister_partial(&p);
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            OutputInner::Stdout(w) => w.write(b),
            OutputInner::File { writer, .. } => writer.write(b),
            OutputInner::Done => Err(io::Error::other("write after finish")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            OutputInner::Stdout(w) => w.flush(),
            OutputInner::File { writer, .. } => writer.flush(),
            OutputInner::Done => Ok(()),
        }
    }
}

/// Refuse an output target that exists and is not a regular file (after symlinks): a device
/// (`/dev/null`), a pipe (`/dev/stdout`, `>(gzip > f)`), a socket or a directory. Outputs are
/// renamed into place, which would not write to such a target but replace it: `-o /dev/null`
/// run as root once left a regular file at `/dev/null`, and every later program writing there
/// filled it.
fn check_replaceable(target: &Path, name: &str) -> Result<(), Error> {
    match std::fs::metadata(target) {
        Ok(meta) if !meta.is_file() => Err(Error::io(
            name,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "it exists and is not a regular file (a device, a pipe or a directory); outputs \
                 are written to a temporary file and renamed into place, which would replace it: \
                 give a file path (or `-` for standard output, where the option takes it)",
            ),
        )),
        _ => Ok(()),
    }
}

/// A hidden temporary file in the target's directory (so the final rename cannot cross file
/// systems). A missing directory, or a target that is not a regular file
/// ([`check_replaceable`]), is an error naming the target.
pub(crate) fn temp_beside(target: &Path) -> Result<tempfile::NamedTempFile, Error> {
    let name = target.display().to_string();
    check_replaceable(target, &name)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(Error::io(
            &name,
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("the output directory {} does not exist", dir.display()),
            ),
        ));
    }
    let file_name = target
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let prefix = format!(".{file_name}.");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix).suffix(".partial");
    set_output_mode(&mut b);
    b.tempfile_in(&dir).map_err(|e| Error::io(&name, e))
}

/// A file a run reads or writes, with the option (or role) that named it, as the user wrote
/// both: `("input", "in.jsonl")`, `("-o", "out.jsonl")`, `("--clusters", "c.jsonl")`.
pub type NamedPath<'a> = (&'a str, &'a str);

/// What makes two names the same file: its device and inode when it exists (so another
/// spelling, a symbolic link or a hard link is the same file), else the place it would be
/// created at (its directory resolved, its name as given); standard output is one place.
#[derive(Debug, PartialEq, Eq)]
enum FileIdentity {
    Stdout,
    #[cfg(unix)]
    Inode(u64, u64),
    Location(PathBuf),
}

fn file_identity(path: &str) -> FileIdentity {
    if path == "-" {
        return FileIdentity::Stdout;
    }
    let p = Path::new(path);
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(p) {
        use std::os::unix::fs::MetadataExt;
        return FileIdentity::Inode(meta.dev(), meta.ino());
    }
    #[cfg(not(unix))]
    if let Ok(c) = std::fs::canonicalize(p) {
        return FileIdentity::Location(c);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    FileIdentity::Location(match p.file_name() {
        Some(f) => dir.join(f),
        None => dir,
    })
}

/// Refuse, before any work, an output that names one of the inputs or another output of the
/// same run. An output is written to a temporary file and renamed into place, so an output
/// naming an input replaces the input with the run's result, and two outputs naming one file
/// leave only the last one written. Files are compared by device and inode (another spelling,
/// a symbolic link or a hard link is the same file), not by their names. Standard input
/// (`-` among the inputs) is never a file here; standard output may be named once.
pub fn check_output_paths(inputs: &[NamedPath], outputs: &[NamedPath]) -> Result<(), Error> {
    let ins: Vec<(NamedPath, FileIdentity)> = inputs
        .iter()
        .filter(|(_, p)| *p != "-")
        .map(|&np| (np, file_identity(np.1)))
        .collect();
    let mut seen: Vec<(NamedPath, FileIdentity)> = Vec::new();
    for &(opt, path) in outputs {
        let id = file_identity(path);
        if let Some(((role, ip), _)) = ins.iter().find(|(_, i)| *i == id) {
            let what = if *role == "input" {
                "the input".to_string()
            } else {
                format!("the {role} file")
            };
            let same = if ip == &path {
                String::new()
            } else {
                format!(" ({path} and {ip} are the same file)")
            };
            return Err(Error::Output(format!(
                "{opt} {path} would overwrite {what} {ip}{same}: an output is never written \
                 over an input; give {opt} another path"
            )));
        }
        if let Some(((first_opt, first_path), _)) = seen.iter().find(|(_, s)| *s == id) {
            let what = if id == FileIdentity::Stdout {
                "both write to standard output".to_string()
            } else if first_path == &path {
                format!("both name {path}")
            } else {
                format!("{first_path} and {path} are the same file")
            };
            return Err(Error::Output(format!(
                "{first_opt} and {opt} {what}: each output needs a path of its own"
            )));
        }
        seen.push(((opt, path), id));
    }
    Ok(())
}

/// Temporary files are private (0600); a finished output gets the usual 0666 minus the umask.
pub(crate) fn set_output_mode(b: &mut tempfile::Builder) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    #[cfg(not(unix))]
    let _ = b;
}

/// Write a whole small file atomically (reports, cluster lists).
pub fn write_file_atomic(path: &str, bytes: &[u8]) -> Result<(), Error> {
    let mut out = Output::create(path)?;
    out.write_all(bytes)?;
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A byte source that answers each read with at most the next of `sizes` bytes (cycling),
    /// the way pipes and decoders answer short; a size of 0 answers `Interrupted`.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        sizes: Vec<usize>,
        turn: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let step = self.sizes[self.turn % self.sizes.len()];
            self.turn += 1;
            if step == 0 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = step.min(buf.len()).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// The oracle: lines split on `\n` (a last piece counts when it is not empty), one `\r`
    /// cut from the end, blank ones skipped, numbered from 1.
    fn naive_lines(input: &[u8]) -> Vec<(Vec<u8>, u64)> {
        let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if pieces.last().is_some_and(|p| p.is_empty()) {
            pieces.pop();
        }
        pieces
            .into_iter()
            .enumerate()
            .map(|(i, l)| (l.strip_suffix(b"\r").unwrap_or(l).to_vec(), i as u64 + 1))
            .filter(|(l, _)| !l.iter().all(|b| b.is_ascii_whitespace()))
            .collect()
    }

    /// Every chunk of `input` read with `target`-byte chunks from a source answering `sizes`
    /// bytes a read: the chunks' lines in order, after checking that the chunks are the input
    /// cut at line ends.
    fn chunked_lines(input: &[u8], target: usize, sizes: Vec<usize>) -> Vec<(Vec<u8>, u64)> {
        let src = Trickle {
            data: input.to_vec(),
            at: 0,
            sizes,
            turn: 0,
        };
        let mut r = LineReader::from_read("t", src).expect("plain input");
        drain_checked(&mut r, input, target)
    }

    /// Every chunk of `r` (read with `target`-byte chunks): their lines in order, after checking
    /// that no chunk is empty, that each ends at a line end (or the end), that the progress
    /// counter of a mapped reader is where the chunks end, and that the chunks together are
    /// `input`, whole and in order.
    fn drain_checked(r: &mut LineReader, input: &[u8], target: usize) -> Vec<(Vec<u8>, u64)> {
        let mapped = r.map.is_some();
        let mut got = Vec::new();
        let mut joined = Vec::new();
        while let Some(c) = r.next_chunk(target).expect("reads") {
            assert!(!c.data.is_empty(), "an empty chunk");
            assert_eq!(matches!(c.data, ChunkBytes::Mapped { .. }), mapped);
            joined.extend_from_slice(&c.data);
            assert!(c.data.ends_with(b"\n") || joined.len() == input.len());
            if mapped {
                assert_eq!(r.raw_bytes_read(), joined.len() as u64);
            }
            for i in 0..c.len() {
                got.push((c.line(i).to_vec(), c.line_no(i)));
            }
        }
        assert_eq!(
            joined, input,
            "the chunks are the input, whole and in order"
        );
        got
    }

    /// [`chunked_lines`] for a plain file mapped into memory (the default way plain files are
    /// read): the chunks' lines in order, after checking that the chunks are ranges of the map
    /// that together are the input, cut at line ends.
    fn mapped_lines(input: &[u8], target: usize) -> Vec<(Vec<u8>, u64)> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, input).expect("writes");
        let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
        let mut r = inputs.open(0).expect("opens");
        // An empty file cannot be mapped; it is read.
        assert_eq!(r.map.is_some(), !input.is_empty(), "mapped unless empty");
        drain_checked(&mut r, input, target)
    }

    /// Lines of a few shapes: empty, blank, CRLF, short, and longer than most chunk targets.
    fn input_strategy() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            Just(Vec::new()),
            Just(b" \t ".to_vec()),
            Just(b"\r".to_vec()),
            "[a-z {}\r]{1,12}".prop_map(String::into_bytes),
            (1usize..3000).prop_map(|n| vec![b'x'; n]),
        ];
        (prop::collection::vec(line, 0..40), any::<bool>()).prop_map(|(lines, last_nl)| {
            let mut v = lines.join(&b'\n');
            if last_nl && !v.is_empty() {
                v.push(b'\n');
            }
            v
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Reading in chunks, whatever the chunk size and however short the reads, gives the
        /// naive split's lines and line numbers.
        #[test]
        fn chunks_hold_every_line_once_in_order(
            input in input_strategy(),
            target in prop_oneof![1usize..64, 64usize..5000, Just(READ_BLOCK + 1)],
            sizes in prop::collection::vec(prop_oneof![1usize..17, 17usize..5000], 1..5)
                .prop_map(|mut s| { s.push(0); s }),
        ) {
            prop_assert_eq!(chunked_lines(&input, target, sizes), naive_lines(&input));
        }

        /// And so does a mapped file, whatever the chunk size.
        #[test]
        fn mapped_chunks_hold_every_line_once_in_order(
            input in input_strategy(),
            target in prop_oneof![1usize..64, 64usize..5000, Just(READ_BLOCK + 1)],
        ) {
            prop_assert_eq!(mapped_lines(&input, target), naive_lines(&input));
        }
    }

    /// Resident kilobytes of the mapping that starts at `addr`, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn mapping_rss_kb(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let head = format!("{addr:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
        assert!(lines.next().is_some(), "no mapping at {addr:#x}");
        let rss = lines.find(|l| l.starts_with("Rss:")).expect("an Rss line");
        rss.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_mapped_chunk_unmaps_its_pages_when_dropped() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = lines_file(dir.path(), "big.jsonl", 80_000);
        let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
        let mut r = inputs.open(0).expect("opens");
        let addr = r.map.as_ref().expect("mapped").0.as_ptr() as usize;
        let mut chunks = Vec::new();
        while let Some(c) = r.next_chunk(256 << 10).expect("reads") {
            chunks.push(c);
        }
        assert_eq!(chunks.len(), 31);
        // Splitting the lines touched every page.
        let held = mapping_rss_kb(addr);
        assert!(
            held >= 7_000,
            "{held} kB resident while the chunks are held"
        );
        drop(chunks);
        // Left: at most the page each pair of neighbouring chunks shares, and the last one.
        let left = mapping_rss_kb(addr);
        let page_kb = (page_size() / 1024) as u64;
        assert!(
            left <= 32 * page_kb,
            "{left} kB still resident after the chunks went"
        );
        // The map goes with the reader.
        drop(r);
        assert!(!std::fs::read_to_string("/proc/self/smaps")
            .unwrap()
            .contains(&format!("{addr:x}-")));
    }

    /// A file `name` in `dir` of `n` lines of 100 bytes (newline included).
    #[cfg(target_os = "linux")]
    fn lines_file(dir: &Path, name: &str, n: usize) -> PathBuf {
        let path = dir.join(name);
        let line = format!("{}\n", "x".repeat(99));
        std::fs::write(&path, line.repeat(n)).expect("writes");
        path
    }

    /// Cut the file at `path` to `len` bytes, as another process might while we read it.
    #[cfg(target_os = "linux")]
    fn truncate(path: &Path, len: u64) {
        File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(len))
            .expect("truncates");
    }

    /// A mapped file that shrinks under the reader is an error naming it, not a SIGBUS.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_mapped_file_truncated_while_read_is_an_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = lines_file(dir.path(), "shrinks.jsonl", 1000);
        let inputs = Inputs::new(&[InputSpec::Path(path.clone())], false).expect("exists");
        let mut r = inputs.open(0).expect("opens");
        let map = r.map.as_ref().expect("mapped").0.clone();
        if let Err(e) = map.advise_range(memmap2::Advice::PopulateRead, 0, 4096) {
            // Before Linux 5.14 a truncated map can only fault: this test would die of SIGBUS.
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
            eprintln!("SKIPPED: this kernel has no MADV_POPULATE_READ");
            return;
        }
        drop(map);
        let first = r.next_chunk(10_000).expect("reads").expect("a chunk");
        assert_eq!(first.len(), 100);
        truncate(&path, 20_000);
        let e = r.next_chunk(200_000).expect_err("the rest is gone");
        let msg = e.to_string();
        assert!(msg.contains("shrinks.jsonl"), "{msg}");
        assert!(msg.contains("shorter than when it was opened"), "{msg}");
        // A plain `read` of the mapped file meets the same error.
        let mut buf = vec![0; 50_000];
        let e = r
            .read_exact(&mut buf)
            .expect_err("the map is gone past 20 kB");
        assert!(
            e.to_string().contains("shorter than when it was opened"),
            "{e}"
        );
        // So does a line that runs on past the target into the lost part.
        std::fs::write(&path, "x".repeat(3 << 20)).expect("writes one line of 3 MB");
        let inputs = Inputs::new(&[InputSpec::Path(path.clone())], false).expect("exists");
        let mut r = inputs.open(0).expect("opens");
        truncate(&path, READ_BLOCK as u64 / 2);
        let msg = r.next_chunk(1000).expect_err("the line is cut").to_string();
        assert!(msg.contains("shorter than when it was opened"), "{msg}");
    }

    #[test]
    fn mapped_and_read_inputs_agree_and_compressed_ones_are_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let plain = b"{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\"}".to_vec();
        let p = dir.path().join("p.jsonl");
        std::fs::write(&p, &plain).unwrap();
        let gz = dir.path().join("p.jsonl.gz");
        let mut e = flate2::write::GzEncoder::new(File::create(&gz).unwrap(), Default::default());
        e.write_all(&plain).unwrap();
        e.finish().unwrap();
        let zst = dir.path().join("p.jsonl.zst");
        std::fs::write(&zst, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
        let specs = [
            InputSpec::Path(p),
            InputSpec::Path(gz),
            InputSpec::Path(zst),
        ];
        for mmap in [true, false] {
            let inputs = Inputs::new(&specs, false).unwrap().with_mmap(mmap);
            for i in 0..3 {
                let mut r = inputs.open(i).unwrap();
                // Only the plain file is mapped, and only when asked.
                assert_eq!(r.map.is_some(), mmap && i == 0, "input {i}, mmap {mmap}");
                let (mut bytes, mut lines) = (Vec::new(), Vec::new());
                while let Some(c) = r.next_chunk(1 << 20).unwrap() {
                    bytes.extend_from_slice(&c.data);
                    lines.extend((0..c.len()).map(|l| (c.line(l).to_vec(), c.line_no(l))));
                }
                assert_eq!(bytes, plain, "input {i}, mmap {mmap}");
                assert_eq!(lines.len(), 2);
                assert_eq!(lines[1], (b"{\"id\":\"b\",\"text\":\"y\"}".to_vec(), 3));
            }
        }
    }

    #[test]
    fn writeback_file_asks_every_step_and_writes_every_byte() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut w = WritebackFile::new(tempfile::NamedTempFile::new_in(dir.path()).expect("file"));
        let mut want = Vec::new();
        let piece: Vec<u8> = (0..=255u8).cycle().take(1_000_003).collect();
        for i in 0..20 {
            w.write_all(&piece[i..]).expect("writes");
            want.extend_from_slice(&piece[i..]);
            // The request covers everything written up to the last whole step.
            assert_eq!(w.written, want.len() as u64);
            assert!(w.written - w.started < writeback_step(w.started));
            assert_eq!(w.started == 0, want.len() < WRITEBACK_MIN_STEP as usize);
        }
        // 19.07 MiB written in steps of 1 MiB (a sixteenth of 16 MiB is still 1 MiB).
        assert!(
            w.started >= 18 * WRITEBACK_MIN_STEP,
            "asked for {} bytes",
            w.started
        );
        // The step is a sixteenth of the bytes so far, from 1 MiB to 8 MiB.
        assert_eq!(writeback_step(0), WRITEBACK_MIN_STEP);
        assert_eq!(writeback_step(32 << 20), 2 << 20);
        assert_eq!(writeback_step(1 << 40), WRITEBACK_MAX_STEP);
        let f = w.into_inner();
        assert_eq!(std::fs::read(f.path()).expect("reads back"), want);
        // And through an `Output`, which now writes by way of one.
        let target = dir.path().join("out.bin");
        let mut o = Output::create(target.to_str().expect("UTF-8")).expect("creates");
        o.write_all(&want).expect("writes");
        o.finish().expect("finishes");
        assert_eq!(std::fs::read(&target).expect("reads back"), want);
    }

    #[test]
    fn chunk_edges_and_reading_on_after_a_chunk() {
        for input in [
            &b""[..],
            b"\n",
            b"\n\n \n",
            b"a",
            b"a\r\n",
            b"a\nb",
            b"a\n\r\nb\r",
        ] {
            for target in [1, 2, 3, 100] {
                assert_eq!(
                    chunked_lines(input, target, vec![1, 0, 2, 7]),
                    naive_lines(input),
                    "{input:?} {target}"
                );
            }
        }
        // A line over several reads and a chunk target is one chunk.
        let long = [vec![b'y'; 10_000], b"\nz\n".to_vec()].concat();
        assert_eq!(chunked_lines(&long, 100, vec![999])[0].0.len(), 10_000);
        // What a chunk read past its last line is the start of what `read` gives next.
        let data = b"one\ntwo\nthree".to_vec();
        let src = Trickle {
            data: data.clone(),
            at: 0,
            sizes: vec![6],
            turn: 0,
        };
        let mut r = LineReader::from_read("t", src).expect("plain input");
        let c = r.next_chunk(1).expect("reads").expect("a chunk");
        assert_eq!(&c.data[..], b"one\n");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).expect("reads");
        assert_eq!(rest, b"two\nthree");
        // The same from a mapped file.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("in.jsonl");
        std::fs::write(&path, &data).expect("writes");
        let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
        let mut r = inputs.open(0).expect("opens");
        assert!(r.map.is_some());
        let c = r.next_chunk(1).expect("reads").expect("a chunk");
        assert_eq!(&c.data[..], b"one\n");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).expect("reads");
        assert_eq!(rest, b"two\nthree");
        assert_eq!(r.raw_bytes_read(), data.len() as u64);
        assert!(r.next_chunk(1).expect("reads").is_none());
    }

    #[test]
    fn spare_buffers_come_back_empty_and_big_enough_and_hold_little() {
        // Other tests in this binary share the spares, so only what holds whatever they do
        // is asserted.
        let mut b = spare_buffer(1000);
        assert!(b.is_empty() && b.capacity() >= 1000);
        b.extend_from_slice(b"leftover bytes");
        recycle_buffer(b);
        for _ in 0..SPARE_BUFFERS_MAX + 1 {
            let b = spare_buffer(5000);
            assert!(b.is_empty(), "a recycled buffer comes back cleared");
            assert!(b.capacity() >= 5000);
        }
        recycle_buffer(Vec::with_capacity(SPARE_BYTES_MAX + 1));
        for _ in 0..SPARE_BUFFERS_MAX + 4 {
            recycle_buffer(Vec::with_capacity(4 << 20));
        }
        let (count, held) = SPARE_BUFFERS.held();
        assert!(count <= SPARE_BUFFERS_MAX);
        assert!(held <= SPARE_BYTES_MAX, "the spares hold {held} bytes");
    }

    #[test]
    fn an_interrupt_names_the_outputs_already_complete() {
        assert_eq!(
            interrupt_message(&[]),
            "neardup: interrupted; no output was written"
        );
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("clusters.jsonl");
        let mut o = Output::create(done.to_str().unwrap()).unwrap();
        o.write_all(b"{}\n").unwrap();
        o.finish().unwrap();
        let unfinished = dir.path().join("out.jsonl");
        let mut u = Output::create(unfinished.to_str().unwrap()).unwrap();
        u.write_all(b"half").unwrap();
        // Other tests in this binary may complete outputs too: only ours are asserted.
        let completed = remove_partial_outputs();
        assert!(completed.contains(&done), "{completed:?}");
        assert!(!completed.contains(&unfinished));
        let msg = interrupt_message(&completed);
        assert!(
            msg.contains("clusters.jsonl") && msg.contains("already complete"),
            "{msg}"
        );
        assert!(done.exists() && !unfinished.exists());
        drop(u);
    }
}
