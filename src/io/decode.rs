//! Raw bytes into text: a count of the raw bytes read (for progress), and gzip or zstd
//! decompression chosen by the first bytes. Below both the chunk reader and the inputs.

use std::io::{self, BufRead, BufReader, Read};

use crate::error::Error;

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

pub(super) const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
pub(super) const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Sniff the first bytes: gzip and zstd are decompressed, anything else is read as is.
pub(super) fn decompress<R: Read + Send + 'static>(
    raw: R,
    name: &str,
) -> Result<Box<dyn BufRead + Send>, Error> {
    let mut buffered = BufReader::with_capacity(1 << 20, raw);
    let head = buffered.fill_buf().map_err(|e| Error::io(name, e))?;
    if head.starts_with(&super::format::MAGIC) {
        // Only a stream gets here: a named file is sniffed and read as Parquet.
        return Err(Error::io(
            name,
            io::Error::new(
                io::ErrorKind::InvalidData,
                "is Parquet, which cannot be read as a stream (its index sits at the end of the \
                 file): name the file instead",
            ),
        ));
    }
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
