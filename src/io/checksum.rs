//! Checksums of file contents (xxh3), for the files neardup writes and reads back later (stage
//! files, index segments) and for the inputs a work directory reads more than once: a file
//! edited, truncated or replaced in between is an error naming it, never a silently different
//! result.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use xxhash_rust::xxh3::Xxh3;

use super::Output;
use crate::Error;

/// The end of a sealed file's trailer.
const SEAL_MAGIC: &[u8; 8] = b"NDSUM001";

/// Bytes of a sealed file's trailer: the checksum of every byte before it (xxh3-128,
/// little-endian) and [`SEAL_MAGIC`].
pub const SEAL_BYTES: u64 = 24;

/// The bytes read at a time.
const READ_BYTES: usize = 4 << 20;

/// A running checksum: what [`Checksum::update`] was given, in order.
#[derive(Clone, Default)]
pub struct Checksum(Xxh3);

impl Checksum {
    pub fn new() -> Self {
        Checksum(Xxh3::new())
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The checksum so far, as 32 hex digits.
    pub fn hex(&self) -> String {
        format!("{:032x}", self.value())
    }

    /// The checksum so far.
    pub fn value(&self) -> u128 {
        self.0.digest128()
    }
}

/// Seal `out` (made by [`Output::with_checksum`]) before it is finished: append the trailer,
/// the checksum of everything written to it.
pub fn seal(out: &mut Output) -> Result<(), Error> {
    let sum = out.sum_value().expect("a sealed file keeps a checksum");
    out.write_all(&sum.to_le_bytes())?;
    out.write_all(SEAL_MAGIC)
}

/// Check the sealed file `file` (at `path`, `len` bytes) against its trailer; returns the
/// bytes before the trailer. A file cut short, edited or damaged is an error naming it and
/// saying what to do (`remedy`).
pub fn check_sealed(path: &Path, file: &File, len: u64, remedy: &str) -> Result<u64, Error> {
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
    let (now, _) = file_checksum(path, Some(len - SEAL_BYTES))?;
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
    let io = |e| Error::io(&name, e);
    let f = std::fs::File::open(path).map_err(io)?;
    let mut r = f.take(len.unwrap_or(u64::MAX));
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
    if let Some(len) = len {
        if read < len {
            return Err(Error::Work {
                path: name,
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
