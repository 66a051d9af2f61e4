//! The shuffle between the tasks of one stage: a task writes one file whose bytes are cut into
//! consecutive slices, one for each task of the next step (or, for sorted records, one per
//! block), and records each slice's place and checksum in its summary. A reader takes just its
//! slice and checks it against that checksum, so an edited or damaged file is an error naming
//! it, without any task reading more than its own bytes. One file per writing task keeps the
//! file count at the number of tasks, not their product.

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::io::Output;

/// Where a slice lies in its file, and the xxh3 of its bytes (hex).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    pub offset: u64,
    pub bytes: u64,
    pub checksum: String,
}

/// A file of slices being written, slice after slice; nothing appears at its path until
/// [`SlicedWriter::finish`].
pub(crate) struct SlicedWriter {
    out: Output,
    at: u64,
    slices: Vec<Slice>,
    hasher: xxhash_rust::xxh3::Xxh3,
    start: u64,
}

impl SlicedWriter {
    pub fn create(path: &Path) -> Result<Self, Error> {
        let name = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(&name, e))?;
        }
        Ok(SlicedWriter {
            out: Output::internal(&name)?,
            at: 0,
            slices: Vec::new(),
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            start: 0,
        })
    }

    /// Append `bytes` to slice `slice`: slices are written in order, so `slice` is the one
    /// being written or a later one (the ones between are empty).
    pub fn push(&mut self, slice: usize, bytes: &[u8]) -> Result<(), Error> {
        assert!(slice >= self.slices.len(), "slices are written in order");
        while self.slices.len() < slice {
            self.close();
        }
        self.hasher.update(bytes);
        self.at += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    fn close(&mut self) {
        self.slices.push(Slice {
            offset: self.start,
            bytes: self.at - self.start,
            checksum: format!("{:016x}", self.hasher.digest()),
        });
        self.hasher.reset();
        self.start = self.at;
    }

    /// Close the slices up to `slices` in all and move the file into place.
    pub fn finish(mut self, slices: usize) -> Result<Vec<Slice>, Error> {
        assert!(slices > self.slices.len() || (slices == 0 && self.at == 0));
        while self.slices.len() < slices {
            self.close();
        }
        self.out.finish()?;
        Ok(self.slices)
    }
}

/// A file of slices opened for reading.
pub(crate) struct SlicedFile {
    file: File,
    name: String,
    remedy: String,
}

impl SlicedFile {
    /// Open `path`, which the step `step` (as `neardup stage` names it) wrote.
    pub fn open(path: &Path, step: &str) -> Result<Self, Error> {
        let name = path.display().to_string();
        let remedy = format!("run `neardup stage {step}` again in an empty work directory");
        let file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Work {
                path: name.clone(),
                msg: format!("missing (removed since its summary was written?): {remedy}"),
            },
            _ => Error::io(&name, e),
        })?;
        Ok(SlicedFile { file, name, remedy })
    }

    /// The bytes of `slice`, checked against its checksum.
    pub fn read(&self, slice: &Slice) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; slice.bytes as usize];
        crate::io::ranges::read_exact_at(&self.file, &mut buf, slice.offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::Work {
                    path: self.name.clone(),
                    msg: format!("cut short: {}", self.remedy),
                }
            } else {
                Error::io(&self.name, e)
            }
        })?;
        if format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&buf)) != slice.checksum {
            return Err(Error::Work {
                path: self.name.clone(),
                msg: format!(
                    "bytes {}..{} do not match their checksum (edited or damaged since neardup \
                     wrote them): {}",
                    slice.offset,
                    slice.offset + slice.bytes,
                    self.remedy
                ),
            });
        }
        Ok(buf)
    }
}

impl SlicedFile {
    /// The bytes of `slice` as a stream, checked against its checksum at its end.
    pub fn stream(&self, slice: &Slice) -> Result<SliceReader, Error> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = self
            .file
            .try_clone()
            .map_err(|e| Error::io(&self.name, e))?;
        f.seek(SeekFrom::Start(slice.offset))
            .map_err(|e| Error::io(&self.name, e))?;
        Ok(SliceReader {
            r: std::io::BufReader::with_capacity(1 << 16, f.take(slice.bytes)),
            left: slice.bytes,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            slice: slice.clone(),
            name: self.name.clone(),
            remedy: self.remedy.clone(),
        })
    }
}

/// A slice read as a stream ([`SlicedFile::stream`]).
pub(crate) struct SliceReader {
    r: std::io::BufReader<std::io::Take<File>>,
    left: u64,
    hasher: xxhash_rust::xxh3::Xxh3,
    slice: Slice,
    name: String,
    remedy: String,
}

impl SliceReader {
    /// Fill `buf` with the next bytes; `false` at the slice's end, once its checksum is
    /// checked. A slice that ends inside `buf` is an error.
    pub fn next(&mut self, buf: &mut [u8]) -> Result<bool, Error> {
        use std::io::Read;
        let bad = |what: String| Error::Work {
            path: self.name.clone(),
            msg: format!("{what}: {}", self.remedy),
        };
        if self.left == 0 {
            if format!("{:016x}", self.hasher.digest()) != self.slice.checksum {
                return Err(bad(format!(
                    "bytes {}..{} do not match their checksum (edited or damaged since                      neardup wrote them)",
                    self.slice.offset,
                    self.slice.offset + self.slice.bytes
                )));
            }
            return Ok(false);
        }
        if (buf.len() as u64) > self.left {
            return Err(bad("a record runs past its slice".into()));
        }
        self.r.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                bad("cut short".into())
            } else {
                Error::io(&self.name, e)
            }
        })?;
        self.hasher.update(buf);
        self.left -= buf.len() as u64;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_read_back_in_place_and_empty_ones_between_are_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.bin");
        let mut w = SlicedWriter::create(&p).unwrap();
        w.push(0, b"ab").unwrap();
        w.push(0, b"c").unwrap();
        w.push(3, b"xyz").unwrap();
        let slices = w.finish(5).unwrap();
        assert_eq!(slices.len(), 5);
        let f = SlicedFile::open(&p, "t").unwrap();
        let got: Vec<Vec<u8>> = slices.iter().map(|s| f.read(s).unwrap()).collect();
        assert_eq!(got, [&b"abc"[..], b"", b"", b"xyz", b""]);
        assert_eq!(slices[3].offset, 3);
    }

    #[test]
    fn an_edited_or_cut_file_is_refused_by_name() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.bin");
        let mut w = SlicedWriter::create(&p).unwrap();
        w.push(0, b"hello").unwrap();
        w.push(1, b"world").unwrap();
        let slices = w.finish(2).unwrap();
        std::fs::write(&p, b"hellp world").unwrap();
        let f = SlicedFile::open(&p, "t").unwrap();
        let e = f.read(&slices[0]).unwrap_err().to_string();
        assert!(e.contains("f.bin") && e.contains("checksum"), "{e}");
        let mut r = f.stream(&slices[0]).unwrap();
        let mut buf = [0u8; 5];
        assert!(r.next(&mut buf).unwrap());
        let e = r.next(&mut buf).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        std::fs::write(&p, b"hello").unwrap();
        let f = SlicedFile::open(&p, "t").unwrap();
        assert!(f
            .read(&slices[1])
            .unwrap_err()
            .to_string()
            .contains("cut short"));
        std::fs::remove_file(&p).unwrap();
        assert!(SlicedFile::open(&p, "t")
            .err()
            .unwrap()
            .to_string()
            .contains("missing"));
    }
}
