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
    pub fn take(path: &Path) -> Result<FileLock, Error> {
        let name = path.display().to_string();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(&name, e))?;
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
