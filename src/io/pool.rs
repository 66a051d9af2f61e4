//! Spare buffers of the streaming passes, handed back when done and taken again by the next
//! chunk, bounded in count and bytes.

/// Buffers of the streaming passes come back to one of these when done, and the next chunk
/// takes one: a run cycles through a handful of warm buffers instead of faulting in fresh pages
/// (and copying on growth) for each one. Bounded in count and bytes, so that what the spares
/// keep between passes never weighs on peak memory (a GPU engine's 64 MiB chunks are simply
/// freed).
pub(crate) struct Spares<T>(std::sync::Mutex<Vec<Vec<T>>>);

/// More than a pipeline holds at once (reader, channel, chunks in flight, their output pieces).
pub(crate) const SPARE_BUFFERS_MAX: usize = 16;
/// The spares of one kind together hold at most this many bytes (so at most 64 MiB for the
/// two kinds, bytes and signature matrices; `--max-memory` does not count them).
pub(crate) const SPARE_BYTES_MAX: usize = 32 << 20;

impl<T> Spares<T> {
    pub(crate) const fn new() -> Self {
        Spares(std::sync::Mutex::new(Vec::new()))
    }

    /// A spare, as it was handed back (contents and length kept).
    pub(crate) fn take(&self) -> Option<Vec<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Keep `b` for [`Spares::take`], or free it when the spares are full.
    pub(crate) fn give(&self, b: Vec<T>) {
        if b.capacity() == 0 {
            return;
        }
        let size = std::mem::size_of::<T>();
        let mut spare = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = spare.iter().map(|s| s.capacity() * size).sum();
        if spare.len() < SPARE_BUFFERS_MAX && held + b.capacity() * size <= SPARE_BYTES_MAX {
            spare.push(b);
        }
    }

    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let spare = self.0.lock().unwrap();
        let bytes = spare.iter().map(|s| s.capacity()).sum::<usize>() * std::mem::size_of::<T>();
        (spare.len(), bytes)
    }
}

/// Byte buffers: chunks read, pieces of output.
pub(crate) static SPARE_BUFFERS: Spares<u8> = Spares::new();

/// An empty buffer of at least `capacity` bytes, a spare one when there is one.
pub fn spare_buffer(capacity: usize) -> Vec<u8> {
    let mut b = spare_buffer_stale(capacity);
    b.clear();
    b
}

/// [`spare_buffer`] with its stale contents kept (the spares keep their length): bytes the
/// caller may overwrite in place, without zeroing them first to make room for a read.
pub(crate) fn spare_buffer_stale(capacity: usize) -> Vec<u8> {
    match SPARE_BUFFERS.take() {
        Some(mut b) => {
            b.reserve(capacity.saturating_sub(b.len()));
            b
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Hand a buffer back for [`spare_buffer`] to reuse (freed instead when the spares are full).
pub fn recycle_buffer(b: Vec<u8>) {
    SPARE_BUFFERS.give(b);
}
