//! Exclusive locks on files (`flock`): held while the value lives, released by the kernel when
//! the process ends however it ends, so a killed run never leaves a stale lock behind.

use std::path::Path;

use crate::error::Error;

/// A held lock on a file.
#[derive(Debug)]
pub struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    /// Lock the file `path` (made when missing), waiting while another process holds it.
    /// Anything there but a regular file (a FIFO, a device, a directory) is refused by name:
    /// opening a FIFO would wait for a reader forever, and no other kind can be locked.
    pub fn take(path: &Path) -> Result<FileLock, Error> {
        let name = path.display().to_string();
        let not_a_file = || {
            Error::io(
                &name,
                std::io::Error::other(
                    "not a regular file, so it cannot serve as a lock file (a FIFO, a device, \
                     a directory or a link to one is there): remove it and run again",
                ),
            )
        };
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => return Err(not_a_file()),
            _ => {}
        }
        let mut open = std::fs::OpenOptions::new();
        open.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            // Never block in open(2): a FIFO put there after the check above fails at once.
            use std::os::unix::fs::OpenOptionsExt;
            open.custom_flags(libc::O_NONBLOCK);
        }
        let file = open.open(path).map_err(|e| Error::io(&name, e))?;
        if !file.metadata().map_err(|e| Error::io(&name, e))?.is_file() {
            return Err(not_a_file());
        }
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            loop {
                // SAFETY: flock on a descriptor `file` owns; the lock goes with it.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    break;
                }
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::io(&name, e));
                }
            }
        }
        Ok(FileLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_directory_where_the_lock_goes_is_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let dir = d.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        for p in [&fifo, &dir] {
            // A FIFO opened for writing with no reader would block here forever.
            let e = FileLock::take(p).unwrap_err().to_string();
            assert!(
                e.contains(&p.display().to_string()) && e.contains("not a regular file"),
                "{e}"
            );
        }
        // A regular file beside them still locks.
        FileLock::take(&d.path().join("unit")).unwrap();
    }

    #[test]
    fn a_second_taker_waits_until_the_first_lets_go() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("unit");
        let first = FileLock::take(&path).unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let seen = released.clone();
        let p = path.clone();
        let t = std::thread::spawn(move || {
            // Another descriptor of the same file: flock locks conflict between them as
            // between processes.
            let _second = FileLock::take(&p).unwrap();
            seen.load(Ordering::SeqCst)
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        released.store(true, Ordering::SeqCst);
        drop(first);
        assert!(
            t.join().unwrap(),
            "the second lock was taken while the first was held"
        );
    }
}
