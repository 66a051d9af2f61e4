//! Test support: bytes placed so that they end right before an unmapped page, so a SIMD kernel
//! that reads even one byte past the end crashes the test instead of reading the heap's next
//! allocation unnoticed.

/// A copy of some bytes that ends at a page boundary, followed by a page with no access.
pub struct Guarded {
    #[cfg(unix)]
    map: *mut libc::c_void,
    #[cfg(unix)]
    map_len: usize,
    #[cfg(not(unix))]
    copy: Vec<u8>,
    start: usize,
    len: usize,
}

impl Guarded {
    /// Copy `bytes` to the end of a fresh mapping whose next page is `PROT_NONE`.
    pub fn new(bytes: &[u8]) -> Self {
        #[cfg(unix)]
        {
            // SAFETY: plain libc calls on a mapping this value owns; every result is checked.
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
                let data = bytes.len().div_ceil(page).max(1) * page;
                let map_len = data + page;
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(map, libc::MAP_FAILED, "mmap for a guarded buffer");
                let guard = (map as *mut u8).add(data) as *mut libc::c_void;
                assert_eq!(libc::mprotect(guard, page, libc::PROT_NONE), 0, "mprotect");
                let start = data - bytes.len();
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    (map as *mut u8).add(start),
                    bytes.len(),
                );
                Guarded {
                    map,
                    map_len,
                    start,
                    len: bytes.len(),
                }
            }
        }
        #[cfg(not(unix))]
        {
            Guarded {
                copy: bytes.to_vec(),
                start: 0,
                len: bytes.len(),
            }
        }
    }

    /// The bytes; the next address after them is unmapped (on Unix).
    pub fn bytes(&self) -> &[u8] {
        #[cfg(unix)]
        // SAFETY: `start .. start + len` lies in the readable part of the mapping, which lives
        // as long as `self`.
        unsafe {
            std::slice::from_raw_parts((self.map as *const u8).add(self.start), self.len)
        }
        #[cfg(not(unix))]
        &self.copy[self.start..self.start + self.len]
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: the mapping was made by `new` and is unmapped once.
        unsafe {
            libc::munmap(self.map, self.map_len);
        }
    }
}

#[test]
fn a_guarded_buffer_holds_its_bytes_and_ends_at_the_guard() {
    for n in [0, 1, 7, 4095, 4096, 4097, 10_000] {
        let bytes: Vec<u8> = (0..n).map(|i| i as u8).collect();
        let g = Guarded::new(&bytes);
        assert_eq!(g.bytes(), &bytes[..]);
        #[cfg(unix)]
        {
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
            let end = g.bytes().as_ptr() as usize + n;
            assert_eq!(end % page, 0, "ends at a page boundary");
        }
    }
}
