//! Checksums of file contents (xxh3), for the files neardup writes and reads back later (stage
//! files, index segments) and for the inputs a work directory reads more than once: a file
//! edited, truncated or replaced in between is an error naming it, never a silently different
//! result.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use twox_hash::XxHash3_128;

use super::Output;
use crate::error::Error;

/// The end of a sealed file's trailer.
const SEAL_MAGIC: &[u8; 8] = b"NDSUM001";

/// Bytes of a sealed file's trailer: the checksum of every byte before it (xxh3-128,
/// little-endian) and the magic `NDSUM001`.
pub const SEAL_BYTES: u64 = 24;

/// The bytes read at a time.
const READ_BYTES: usize = 4 << 20;

/// A running checksum (xxh3-128, with the SIMD kernel the CPU has): what
/// [`Checksum::update`] was given, in order.
#[derive(Default)]
pub struct Checksum(XxHash3_128);

impl Checksum {
    pub fn new() -> Self {
        Checksum(XxHash3_128::new())
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The checksum so far, as 32 hex digits.
    pub fn hex(&self) -> String {
        format!("{:032x}", self.value())
    }

    /// The checksum so far.
    pub fn value(&self) -> u128 {
        self.0.finish_128()
    }
}

/// Seal `out` (made by [`Output::with_checksum`]) before it is finished: append the trailer,
/// the checksum of everything written to it.
pub fn seal(out: &mut Output) -> Result<(), Error> {
    let sum = out.sum_value().expect("a sealed file keeps a checksum");
    out.write_all(&sum.to_le_bytes())?;
    out.write_all(SEAL_MAGIC)?;
    out.sealed = true;
    Ok(())
}

/// What makes a file the same file, unchanged: its device, inode, size and change times. An
/// edit changes its change time (`ctime`), which no program can set back.
#[cfg(unix)]
type Seen = (u64, u64, u64, i64, i64, i64, i64);

/// The files this process has checked against their seals, or sealed itself: each is checked
/// once per process, however many stages open it.
#[cfg(unix)]
static CHECKED: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<Seen>>> =
    std::sync::LazyLock::new(Default::default);

#[cfg(unix)]
fn seen(meta: &std::fs::Metadata) -> Seen {
    use std::os::unix::fs::MetadataExt;
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// Whether this process has checked the file `file` as it is now (see [`mark_file_checked`]).
pub(crate) fn is_checked(file: &File) -> bool {
    #[cfg(unix)]
    if let Ok(meta) = file.metadata() {
        let v = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        return v.contains(&seen(&meta));
    }
    let _ = file;
    false
}

/// Count the open file `file`, as it is now, as checked.
pub(crate) fn mark_file_checked(file: &File) {
    #[cfg(unix)]
    if let Ok(meta) = file.metadata() {
        CHECKED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(seen(&meta));
    }
    let _ = file;
}

/// Count the file at `path`, as it is now, as checked (a file this process sealed and moved
/// into place itself).
pub(crate) fn mark_checked(path: &Path) {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        let mut v = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        v.insert(seen(&meta));
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Check the sealed file `file` (at `path`, `len` bytes) against its trailer; returns the
/// bytes before the trailer. A file cut short, edited or damaged is an error naming it and
/// saying what to do (`remedy`). A file this process checked or sealed before, unchanged since,
/// is not read again.
pub fn check_sealed(path: &Path, file: &File, len: u64, remedy: &str) -> Result<u64, Error> {
    #[cfg(unix)]
    let id = file.metadata().ok().map(|m| seen(&m));
    #[cfg(unix)]
    if let Some(id) = id {
        let v = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        if len >= SEAL_BYTES && v.contains(&id) {
            return Ok(len - SEAL_BYTES);
        }
    }
    let body = check_seal_bytes(path, file, len, remedy)?;
    #[cfg(unix)]
    if let Some(id) = id {
        CHECKED.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
    }
    Ok(body)
}

/// [`check_sealed`], always reading the file.
fn check_seal_bytes(path: &Path, file: &File, len: u64, remedy: &str) -> Result<u64, Error> {
    let name = path.display().to_string();
    let bad = |what: &str| Error::Work {
        path: name.clone(),
        msg: format!("{what}: {remedy}"),
    };
    if len < SEAL_BYTES {
        return Err(bad("too short for a file of neardup's (cut short?)"));
    }
    let mut tail = [0u8; SEAL_BYTES as usize];
    super::ranges::read_exact_at(file, &mut tail, len - SEAL_BYTES)
        .map_err(|e| Error::io(&name, e))?;
    if &tail[16..] != SEAL_MAGIC {
        return Err(bad(
            "has no checksum trailer (cut short, or not a file neardup wrote)",
        ));
    }
    let want = u128::from_le_bytes(tail[..16].try_into().expect("16 bytes"));
    // The bytes of the file whose trailer was read, not of whatever the path names now.
    let (now, _) = open_file_checksum(file, &name, Some(len - SEAL_BYTES))?;
    if now != format!("{want:032x}") {
        return Err(bad(
            "its contents do not match their checksum (edited or damaged since neardup wrote \
             it)",
        ));
    }
    Ok(len - SEAL_BYTES)
}

/// The checksum ([`Checksum::hex`]) of the first `len` bytes of the file `path` (all of it
/// when `None`), and the bytes it covers. A file shorter than `len` is an error.
pub fn file_checksum(path: &Path, len: Option<u64>) -> Result<(String, u64), Error> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
    open_file_checksum(&f, &name, len)
}

/// [`file_checksum`] of the open file `f` (named `name`): the bytes of this file, whatever
/// its path names by now.
fn open_file_checksum(f: &File, name: &str, len: Option<u64>) -> Result<(String, u64), Error> {
    let io = |e| Error::io(name, e);
    let size = f.metadata().map_err(io)?.len();
    // A regular file is hashed where it lies in the page cache (mapped, not copied out); a
    // pipe or a file that changes size meanwhile is read.
    if f.metadata().map_err(io)?.is_file() && size > 0 && len.is_none_or(|l| l <= size) {
        // SAFETY: read-only; a file truncated while it is hashed faults as any mapped input
        // does (GUIDE.md, "Reading inputs").
        if let Ok(map) = unsafe { memmap2::Mmap::map(f) } {
            let n = len.unwrap_or(size) as usize;
            let mut sum = Checksum::new();
            sum.update(&map[..n]);
            return Ok((sum.hex(), n as u64));
        }
    }
    // From the start, and back to where the handle was after: its reader goes on from there.
    use std::io::Seek;
    let mut h = f;
    let was = h.stream_position().ok();
    if was.is_some() {
        h.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
    }
    let mut r = h.take(len.unwrap_or(u64::MAX));
    let mut sum = Checksum::new();
    let mut buf = vec![0u8; READ_BYTES];
    let mut read = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        sum.update(&buf[..n]);
        read += n as u64;
    }
    if let Some(at) = was {
        h.seek(std::io::SeekFrom::Start(at)).map_err(io)?;
    }
    if let Some(len) = len {
        if read < len {
            return Err(Error::Work {
                path: name.to_string(),
                msg: format!("cut short: {read} bytes where {len} were written"),
            });
        }
    }
    Ok((sum.hex(), read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_checksum_is_that_of_its_bytes_and_sees_every_byte() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        // Past one read, so the running sum spans reads.
        let mut bytes: Vec<u8> = (0..READ_BYTES + 77).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let mut s = Checksum::new();
        s.update(&bytes[..10]);
        s.update(&bytes[10..]);
        let (all, n) = file_checksum(&p, None).unwrap();
        assert_eq!((all.clone(), n), (s.hex(), bytes.len() as u64));
        let (head, n) = file_checksum(&p, Some(10)).unwrap();
        let mut h = Checksum::new();
        h.update(&bytes[..10]);
        assert_eq!((head, n), (h.hex(), 10));
        for at in [0, 1, READ_BYTES - 1, READ_BYTES, bytes.len() - 1] {
            bytes[at] ^= 1;
            std::fs::write(&p, &bytes).unwrap();
            assert_ne!(file_checksum(&p, None).unwrap().0, all, "byte {at}");
            bytes[at] ^= 1;
        }
        let err = file_checksum(&p, Some(bytes.len() as u64 + 1)).unwrap_err();
        assert!(err.to_string().contains("cut short"), "{err}");
    }
}
