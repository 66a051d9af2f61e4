//! Inputs as the user names them: files (plain, gzip or zstd, by content) and standard input
//! (spooled to a temporary file where a run reads twice), opened as line readers.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;

use crate::Error;

use super::chunk::LineReader;
use super::output::{register_partial, unregister_partial};

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
pub(super) struct CountingReader<R> {
    inner: R,
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R> CountingReader<R> {
    pub(super) fn new(inner: R) -> Self {
        CountingReader {
            inner,
            count: Default::default(),
        }
    }

    pub(super) fn counter(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
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

pub(super) fn decompress<R: Read + Send + 'static>(
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
