//! Outputs that appear only when complete: written to a hidden temporary file beside the
//! target, its pages written back as they are written, renamed into place on success, and
//! removed on an error or an interrupt.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::checksum::Checksum;
use crate::error::Error;

/// Temporary output files of this process that are not finished yet. An interrupted run
/// (Ctrl-C, SIGTERM, SIGHUP) removes them before exiting, so nothing half-written is left;
/// a SIGKILL leaves them, hidden (`.NAME.XXXX.partial`), never under the final name.
static PARTIAL: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

pub(crate) fn register_partial(p: &Path) {
    PARTIAL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(p.to_path_buf());
}

pub(crate) fn unregister_partial(p: &Path) {
    let mut v = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    v.retain(|x| x != p);
}

/// Outputs this process has renamed into place (complete), in order.
static COMPLETED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Remove every unfinished temporary output (called by the interrupt handler), and return
/// the outputs that were already complete, which stay.
pub fn remove_partial_outputs() -> Vec<PathBuf> {
    remove_partials(None)
}

/// [`remove_partial_outputs`] for the unfinished outputs under `dir` alone: a test removes its
/// own without removing those of tests running beside it in the same process.
#[cfg(test)]
pub(crate) fn remove_partial_outputs_under(dir: &Path) -> Vec<PathBuf> {
    remove_partials(Some(dir))
}

fn remove_partials(under: Option<&Path>) -> Vec<PathBuf> {
    let v = PARTIAL.lock().unwrap_or_else(|e| e.into_inner());
    for p in v.iter().filter(|p| under.is_none_or(|d| p.starts_with(d))) {
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
/// `fsync` little to wait for (large steps leave a `signatures` run's cores idle at the end
/// while the last of its matrix is written back); but 1 MiB steps all the way made the
/// gigabytes of output of a 1M-document `dedup` slower, the many small requests costing CPU and
/// disk (docs/BENCHMARKS.md). Steps that grow with the file keep both short.
pub(crate) const WRITEBACK_MIN_STEP: u64 = 1 << 20;
pub(crate) const WRITEBACK_MAX_STEP: u64 = 8 << 20;

/// The step after `written` bytes (see [`WRITEBACK_MIN_STEP`]).
pub(crate) fn writeback_step(written: u64) -> u64 {
    (written / 16).clamp(WRITEBACK_MIN_STEP, WRITEBACK_MAX_STEP)
}

/// A temporary output file that asks the kernel to start writing back each step of bytes
/// ([`writeback_step`]) as soon as they are written (`sync_file_range`, Linux), so that the
/// `fsync` before the rename waits for the last step only, not the whole file, which would
/// otherwise be a wait with both cores idle at the end of a `signatures` run
/// (docs/BENCHMARKS.md). Elsewhere it is a plain file. The request is only a hint: errors
/// surface at the `fsync`.
pub(crate) struct WritebackFile {
    file: tempfile::NamedTempFile,
    pub(crate) written: u64,
    pub(crate) started: u64,
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
    pub(crate) fn persist(self, target: &Path, name: &str) -> Result<(), Error> {
        self.persist_as(target, name, true)
    }

    /// [`Partial::persist`]; `announced`: listed among the outputs completed (a user's output,
    /// not a file of neardup's own).
    fn persist_as(mut self, target: &Path, name: &str, announced: bool) -> Result<(), Error> {
        let f = self.file.take().expect("persisted once").into_inner();
        f.as_file().sync_all().map_err(|e| Error::io(name, e))?;
        let r = f.persist(target).map_err(|e| Error::io(name, e.error));
        unregister_partial(&self.path);
        if r.is_ok() && announced {
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
    /// With [`Output::with_checksum`]: the checksum of the bytes written so far, and how many.
    sum: Option<Box<(Checksum, u64)>>,
    /// A file of neardup's own (a stage file, an index's), not listed among the outputs a run
    /// completed ([`completed_outputs`]).
    internal: bool,
    /// [`super::checksum::seal`] ended it with its checksum.
    pub(crate) sealed: bool,
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
                sum: None,
                internal: false,
                sealed: false,
            });
        }
        let target = through_links(Path::new(path));
        let tmp = temp_beside_named(&target, path)?;
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
            sum: None,
            internal: false,
            sealed: false,
        })
    }

    /// [`Output::create`] for a file of neardup's own that a later stage or run reads back
    /// (not one of the user's outputs).
    pub fn internal(path: &str) -> Result<Self, Error> {
        let mut o = Self::create(path)?;
        o.internal = true;
        Ok(o)
    }

    /// [`Output::internal`], keeping a checksum of every byte written ([`Output::checksum`]):
    /// for the files neardup reads back, which carry it.
    pub fn with_checksum(path: &str) -> Result<Self, Error> {
        let mut o = Self::internal(path)?;
        o.sum = Some(Box::new((Checksum::new(), 0)));
        Ok(o)
    }

    /// With [`Output::with_checksum`]: the checksum ([`Checksum::hex`]) of the bytes written so
    /// far, and how many there are.
    pub fn checksum(&self) -> Option<(String, u64)> {
        self.sum.as_ref().map(|sum| (sum.0.hex(), sum.1))
    }

    /// [`Output::checksum`] as a number.
    pub(crate) fn sum_value(&self) -> Option<u128> {
        self.sum.as_ref().map(|sum| sum.0.value())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Write bytes.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if let Some(sum) = &mut self.sum {
            sum.0.update(bytes);
            sum.1 += bytes.len() as u64;
        }
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
                    .and_then(|tmp| {
                        Partial::new_persisted(tmp).persist_as(&target, &self.name, !self.internal)
                    });
                if r.is_ok() && self.sealed {
                    // Sealed as it was written: this process need not read it back to check.
                    super::checksum::mark_checked(&target);
                }
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
        let n = match &mut self.inner {
            OutputInner::Stdout(w) => w.write(b),
            OutputInner::File { writer, .. } => writer.write(b),
            OutputInner::Done => Err(io::Error::other("write after finish")),
        }?;
        if let Some(sum) = &mut self.sum {
            sum.0.update(&b[..n]);
            sum.1 += n as u64;
        }
        Ok(n)
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
/// run as root would leave a regular file at `/dev/null`, and every later program writing there
/// would fill it.
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
    temp_beside_named(target, &target.display().to_string())
}

/// [`temp_beside`], its errors naming the output `name` (as the user gave it: `target` may be
/// where its links lead).
fn temp_beside_named(target: &Path, name: &str) -> Result<tempfile::NamedTempFile, Error> {
    let name = name.to_string();
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

/// Where an output named `p` is written: `p`, or where it leads when it is a symbolic link
/// (followed to the end, dangling or not), so the rename into place replaces the file the link
/// names and leaves the link as it was.
pub(crate) fn through_links(p: &Path) -> PathBuf {
    let mut at = p.to_path_buf();
    // As many links as the kernel follows in one lookup; past that the rename fails as the
    // open would.
    for _ in 0..40 {
        match std::fs::read_link(&at) {
            Ok(next) => {
                at = match at.parent() {
                    Some(dir) if next.is_relative() => dir.join(next),
                    _ => next,
                }
            }
            Err(_) => break,
        }
    }
    at
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

/// [`write_file_atomic`] for a file of neardup's own ([`Output::internal`]): a manifest, a
/// stage's summary.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
pub(crate) fn write_internal_atomic(path: &str, bytes: &[u8]) -> Result<(), Error> {
    let mut out = Output::internal(path)?;
    out.write_all(bytes)?;
    out.finish()
}

/// Write a small file of neardup's own at `path` only if nothing is there yet: written beside
/// it, then linked into place without replacing anything, so of several processes making the
/// same file at once exactly one succeeds. `false` when a file was already there (left as it
/// was).
#[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
pub(crate) fn write_internal_new(path: &str, bytes: &[u8]) -> Result<bool, Error> {
    let target = Path::new(path);
    let mut f = temp_beside(target)?;
    f.write_all(bytes).map_err(|e| Error::io(path, e))?;
    f.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    match f.persist_noclobber(target) {
        Ok(_) => Ok(true),
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::io(path, e.error)),
    }
}

/// The users' outputs this process has completed (renamed into place), in order.
pub fn completed_outputs() -> Vec<PathBuf> {
    COMPLETED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// What a run that failed tells its user of the outputs it had completed before the error
/// (`None` when there are none): an output is complete or absent, never half-written.
pub fn failure_message(completed: &[PathBuf]) -> Option<String> {
    if completed.is_empty() {
        return None;
    }
    let names: Vec<String> = completed.iter().map(|p| p.display().to_string()).collect();
    Some(format!(
        "neardup: already complete before the error: {}; no other output was written",
        names.join(", ")
    ))
}

/// Check, before any work, that each output in `paths` (`-` aside) can be created: its
/// directory exists and takes a new file, and it is not a directory or a device. A temporary
/// file is made beside each and removed at once; so a read-only or missing directory fails
/// the run before it writes anything, not after its first outputs are complete.
pub fn probe_outputs(paths: &[&str]) -> Result<(), Error> {
    for p in paths.iter().filter(|p| **p != "-") {
        drop(temp_beside_named(&through_links(Path::new(p)), p)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_names_the_outputs_it_completed_and_only_those() {
        assert_eq!(failure_message(&[]), None);
        let m = failure_message(&[PathBuf::from("out.jsonl"), PathBuf::from("c.jsonl")]).unwrap();
        assert!(m.contains("out.jsonl, c.jsonl"), "{m}");
        assert!(m.contains("no other output was written"), "{m}");
        // A file of neardup's own is not one of the user's outputs.
        let d = tempfile::tempdir().unwrap();
        let mine = d.path().join("stage.bin");
        let theirs = d.path().join("theirs.txt");
        let mut o = Output::with_checksum(mine.to_str().unwrap()).unwrap();
        o.write_all(b"x").unwrap();
        o.finish().unwrap();
        write_file_atomic(theirs.to_str().unwrap(), b"y").unwrap();
        let done = completed_outputs();
        assert!(done.contains(&theirs));
        assert!(!done.contains(&mine));
    }

    #[test]
    fn an_output_named_by_a_link_is_written_where_the_link_leads() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.txt");
        std::fs::write(&target, b"old").unwrap();
        #[cfg(unix)]
        {
            let link = d.path().join("link.txt");
            let chain = d.path().join("chain.txt");
            std::os::unix::fs::symlink("real.txt", &link).unwrap();
            std::os::unix::fs::symlink(&link, &chain).unwrap();
            write_file_atomic(chain.to_str().unwrap(), b"new").unwrap();
            assert_eq!(std::fs::read(&target).unwrap(), b"new");
            assert!(std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(std::fs::symlink_metadata(&chain)
                .unwrap()
                .file_type()
                .is_symlink());
            // A dangling link: the file it names is made.
            let dangling = d.path().join("dangling.txt");
            std::os::unix::fs::symlink("made.txt", &dangling).unwrap();
            write_file_atomic(dangling.to_str().unwrap(), b"made").unwrap();
            assert_eq!(std::fs::read(d.path().join("made.txt")).unwrap(), b"made");
        }
    }
}
