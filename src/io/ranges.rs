//! Reading scattered byte ranges of a file: a prefetch hint for all of them first, then one
//! positioned read each.

use std::fs::File;

/// Ranges further apart than this are prefetched separately; nearer ones as one.
const PREFETCH_GAP: u64 = 16 << 10;

/// Ask the kernel to start reading the ranges `(offset, len)` (ascending) of `file`, nearby
/// ones as one. Only a hint: nothing fails if it is not taken.
pub fn prefetch(file: &File, ranges: impl Iterator<Item = (u64, u64)>) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let advise = |start: u64, end: u64| {
            // SAFETY: a hint about a descriptor this process holds open; no memory is passed.
            unsafe {
                libc::posix_fadvise(
                    file.as_raw_fd(),
                    start as libc::off_t,
                    (end - start) as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                );
            }
        };
        let mut open: Option<(u64, u64)> = None;
        for (at, len) in ranges {
            open = match open {
                Some((s, e)) if at <= e + PREFETCH_GAP => Some((s, e.max(at + len))),
                Some((s, e)) => {
                    advise(s, e);
                    Some((at, at + len))
                }
                None => Some((at, at + len)),
            };
        }
        if let Some((s, e)) = open {
            advise(s, e);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, ranges);
}

/// `pread` until `buf` is full.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}
