//! Chunks of whole lines, as the line reader cuts them from an input: a mapped range of a
//! plain file (its pages released when done) or a buffer read from a stream; or a slice of a
//! Parquet file's rows.

use std::io::{self, BufRead, Read};

use crate::error::Error;

use super::decode::{decompress, CountingReader};
use super::pool::{recycle_buffer, spare_buffer_stale};

/// A block of records read from one input, for parallel parsing: whole JSONL lines, or a
/// slice of a Parquet file's rows (with the rows as JSONL lines too, where a pass asks for
/// them).
#[derive(Debug, Default)]
pub struct Chunk {
    /// Index of the input this came from.
    pub file_index: usize,
    /// The raw bytes of the lines (each with its newline, if it had one).
    pub data: ChunkBytes,
    /// For each non-blank line: its byte range in `data` (newline and `\r` excluded) and its
    /// 1-based line number in the input (for a Parquet row: its 0-based row index).
    pub lines: Vec<(usize, usize, u64)>,
    /// The rows, for a chunk of a Parquet file.
    pub rows: Option<super::parquet::Rows>,
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
pub(crate) fn page_size() -> usize {
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
    /// Record `i` as a JSONL line (a Parquet chunk has them only when read with
    /// [`Columns::AllAsJson`](super::parquet::Columns::AllAsJson)).
    pub fn line(&self, i: usize) -> &[u8] {
        let (s, e, _) = self.lines[i];
        &self.data[s..e]
    }

    /// Record `i`'s place in its input: its 1-based line, or a Parquet row's 0-based index.
    pub fn line_no(&self, i: usize) -> u64 {
        match &self.rows {
            Some(r) => r.first_row + i as u64,
            None => self.lines[i].2,
        }
    }

    pub fn len(&self) -> usize {
        match &self.rows {
            Some(r) => r.len(),
            None => self.lines.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of record `i` (its line, or a Parquet row's text), to cut a chunk into pieces of
    /// about equal work.
    pub fn record_bytes(&self, i: usize) -> usize {
        match &self.rows {
            Some(r) => r.text_len(i) + 1,
            None => self.lines[i].1 - self.lines[i].0 + 1,
        }
    }

    /// Bytes of the chunk as read: its lines, or a Parquet chunk's text.
    pub fn raw_bytes(&self) -> u64 {
        match &self.rows {
            Some(_) => (0..self.len()).map(|i| self.record_bytes(i) as u64).sum(),
            None => self.data.len() as u64,
        }
    }
}

/// Reads an input as chunks of lines. Blank lines (only whitespace) are skipped, in every pass
/// alike, so they never count as records.
pub struct LineReader {
    name: String,
    pub(crate) file_index: usize,
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
    pub(crate) map: Option<(std::sync::Arc<memmap2::Mmap>, usize)>,
    /// With [`crate::io::Inputs::with_content_checksums`]: the checksum of every byte handed
    /// out in chunks, kept where the input's owner reads it once the input is read to its end.
    pub(crate) content: Option<Box<ContentSum>>,
}

/// The running checksum of the bytes a [`LineReader`] hands out, and where it goes at the end.
pub(crate) struct ContentSum {
    pub(crate) sum: super::checksum::Checksum,
    pub(crate) out: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl LineReader {
    /// Count `bytes` (the next ones handed out) into the content checksum.
    fn count(&mut self, bytes: &[u8]) {
        if let Some(c) = &mut self.content {
            c.sum.update(bytes);
        }
    }

    /// The input is read to its end: its content checksum is final.
    fn finish_content(&mut self) {
        if let Some(c) = self.content.take() {
            let mut out = c.out.lock().unwrap_or_else(|e| e.into_inner());
            out[self.file_index] = Some(c.sum.hex());
        }
    }
}

impl LineReader {
    /// A line reader over a mapped plain file (see [`Inputs::with_mmap`]).
    pub(crate) fn from_map(name: &str, map: std::sync::Arc<memmap2::Mmap>) -> Self {
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
            content: None,
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
            content: None,
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
    /// Reading line by line (`read_until`) copied every byte twice, which showed in a
    /// `signatures` profile (docs/BENCHMARKS.md). A line longer than the target starts a chunk
    /// that runs at least to its end.
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
            self.finish_content();
            return Ok(None);
        }
        self.count(&data);
        let lines = split_lines_on_pool(&data, &mut self.line_no, |_, _| Ok(()))?;
        Ok(Some(Chunk {
            file_index: self.file_index,
            data: ChunkBytes::Owned(data),
            lines,
            rows: None,
        }))
    }

    /// [`LineReader::next_chunk`] over a mapped file: the target's bytes cut after their last
    /// newline (or, when they hold none, after the first newline past them), as a range of the
    /// map.
    fn next_mapped_chunk(&mut self, target: usize) -> Result<Option<Chunk>, Error> {
        let (map, pos) = self.map.as_mut().expect("a mapped reader");
        let (start, len) = (*pos, map.len());
        if start >= len {
            self.finish_content();
            return Ok(None);
        }
        let want = start.saturating_add(target).min(len);
        // Only the end is searched here (for the cut); the pages before it are mapped as the
        // pool splits the lines.
        prefault(
            map,
            want.saturating_sub(READ_BLOCK).max(start),
            want,
            &self.name,
        )?;
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
        let (map, name) = (&*map, &self.name);
        let lines = split_lines_on_pool(&data, &mut self.line_no, |a, b| {
            prefault(map, start + a, start + b, name)
        })?;
        // The pages are mapped now (the split touched them): counted where they lie.
        let map = map.clone();
        self.count(&map[start..cut]);
        Ok(Some(Chunk {
            file_index: self.file_index,
            data,
            lines,
            rows: None,
        }))
    }
}

/// Map the pages of `map[from..to]` in one call, not a fault per 64 KiB as the line split first
/// touches them; and a file that shrank under the map is an error naming it here, where reading
/// the lost pages would end the run with SIGBUS. Linux 5.14 or later (an older kernel answers
/// `EINVAL`, and its reads are left to fault as they come; so are other systems').
pub(crate) fn prefault(
    map: &memmap2::Mmap,
    from: usize,
    to: usize,
    name: &str,
) -> Result<(), Error> {
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

/// A line of a chunk: its byte range (newline and `\r` excluded) and 1-based line number.
type Line = (usize, usize, u64);

/// Bytes of a piece of [`split_lines_on_pool`].
pub(crate) const SPLIT_PIECE: usize = 256 << 10;

/// [`split_lines`] of `data` in pieces of about [`SPLIT_PIECE`] bytes (each cut after a
/// newline) on the rayon pool, each piece first handed to `before` (its byte range in `data`:
/// the pages of a mapped chunk are mapped there). The reader that cuts chunks is one thread
/// that every chunk waits for, and touching every byte of a chunk first (from memory, and for a
/// mapped file through the kernel's page mapping) was most of its time; the pool has cores for
/// it, and the workers read those bytes next anyway.
pub(crate) fn split_lines_on_pool(
    data: &[u8],
    line_no: &mut u64,
    before: impl Fn(usize, usize) -> Result<(), Error> + Sync,
) -> Result<Vec<Line>, Error> {
    use rayon::prelude::*;
    if data.len() < 2 * SPLIT_PIECE {
        before(0, data.len())?;
        return Ok(split_lines(data, line_no));
    }
    let mut cuts = vec![0];
    let mut at = SPLIT_PIECE;
    while at < data.len() {
        // The piece ends after the first newline at or past its nominal end.
        let end = match memchr::memchr(b'\n', &data[at..]) {
            Some(p) => at + p + 1,
            None => data.len(),
        };
        cuts.push(end);
        at = end + SPLIT_PIECE;
    }
    if *cuts.last().expect("a cut") < data.len() {
        cuts.push(data.len());
    }
    let pieces: Vec<(Vec<Line>, u64)> = cuts
        .par_windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            before(a, b)?;
            let mut count = 0;
            let mut lines = split_lines(&data[a..b], &mut count);
            for l in &mut lines {
                l.0 += a;
                l.1 += a;
            }
            Ok((lines, count))
        })
        .collect::<Result<_, Error>>()?;
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.0.len()).sum());
    for (lines, count) in pieces {
        out.extend(lines.into_iter().map(|(a, b, n)| (a, b, *line_no + n)));
        *line_no += count;
    }
    Ok(out)
}

/// The non-blank lines of `data` (whole lines, the last one perhaps without its newline): each
/// one's byte range (newline and `\r` excluded) and 1-based line number, counting on from
/// `line_no`.
pub(crate) fn split_lines(data: &[u8], line_no: &mut u64) -> Vec<(usize, usize, u64)> {
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
pub(crate) const READ_BLOCK: usize = 1 << 20;

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
