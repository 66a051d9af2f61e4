//! `PackedBatch`: many documents tokenized into one flat layout that both engines read.
//!
//! Built once by the host, so the packer is tested once. It never holds a shingle: every
//! document's words are stored once, each followed by one space (see [`crate::text`]), and a
//! shingle is a byte range computed from word offsets.

use crate::text::{shingle_layout, TextRule};

/// Raw bytes per chunk handed to the parser (the CPU engine's; a GPU engine asks for larger
/// ones). Large enough to amortise the hand-offs, small enough that the chunks in flight (two
/// per worker thread, plus the reader's) stay a few tens of MiB.
pub const DEFAULT_CHUNK_BYTES: usize = 2 << 20;

/// How many pieces a chunk is cut into for tokenizing (fewer for a chunk of fewer records):
/// one batch each.
pub fn pieces_per_chunk() -> usize {
    rayon::current_num_threads() * 4
}

thread_local! {
    /// Per-thread tokenizer batch and shingle-hash buffer, reused from piece to piece.
    static SCRATCH: std::cell::RefCell<(PackedBatch, Vec<u32>)> =
        std::cell::RefCell::new((PackedBatch::new(), Vec::new()));
}

/// Run `f` with this thread's reusable batch and shingle-hash buffer: fresh multi-megabyte
/// buffers per piece cost page faults (and, freed, TLB shootdowns across cores) that outweigh
/// the hashing. The scratch is taken out of its cell for the call, not borrowed in place: a
/// long document's parts run on the pool, and while this thread waits for them it may run
/// another piece, which takes the scratch in turn (finding it empty).
pub fn with_scratch<R>(f: impl FnOnce(&mut PackedBatch, &mut Vec<u32>) -> R) -> R {
    let (mut batch, mut xs) = SCRATCH.take();
    let r = f(&mut batch, &mut xs);
    SCRATCH.set((batch, xs));
    r
}

/// A batch of tokenized documents.
///
/// Invariants: `word_start.len() == words + 1` and its last entry is `bytes.len()` (the
/// sentinel); `doc_word_start.len() == docs + 1` and its last entry is the number of words.
/// Word `j` is `bytes[word_start[j] .. word_start[j+1] - 1]` (the byte before the next word is
/// its separating space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedBatch {
    pub bytes: Vec<u8>,
    pub word_start: Vec<u32>,
    pub doc_word_start: Vec<u32>,
    /// How texts become units ("words" here: characters under `--shingle char`).
    pub rule: TextRule,
}

impl Default for PackedBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl PackedBatch {
    pub fn new() -> Self {
        PackedBatch {
            bytes: Vec::new(),
            word_start: vec![0],
            doc_word_start: vec![0],
            rule: TextRule::default(),
        }
    }

    /// An empty batch that packs texts under `rule`.
    pub fn with_rule(rule: TextRule) -> Self {
        PackedBatch {
            rule,
            ..Self::new()
        }
    }

    /// A batch of the given texts.
    pub fn from_texts<S: AsRef<str>>(texts: &[S]) -> Self {
        Self::from_texts_with(texts, TextRule::default())
    }

    /// A batch of the given texts, packed under `rule`.
    pub fn from_texts_with<S: AsRef<str>>(texts: &[S], rule: TextRule) -> Self {
        let mut b = Self::with_rule(rule);
        for t in texts {
            b.push_text(t.as_ref());
        }
        b
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.word_start.clear();
        self.word_start.push(0);
        self.doc_word_start.clear();
        self.doc_word_start.push(0);
    }

    /// Tokenize `text` and append it as the next document. Returns its number of words.
    ///
    /// Panics if the batch would pass 4 GiB of word bytes (offsets are `u32`, as on the GPU);
    /// batch builders flush long before that.
    pub fn push_text(&mut self, text: &str) -> usize {
        self.word_start.pop();
        let n = self.rule.push(text, &mut self.bytes, &mut self.word_start);
        assert!(
            self.bytes.len() <= u32::MAX as usize,
            "a packed batch is limited to 4 GiB of word bytes"
        );
        self.word_start.push(self.bytes.len() as u32);
        let words = self.word_start.len() as u32 - 1;
        self.doc_word_start.push(words);
        n
    }

    /// Append all documents of `other` (used to join batches tokenized in parallel).
    pub fn append(&mut self, other: &PackedBatch) {
        let byte_off = self.bytes.len() as u32;
        let word_off = self.word_start.len() as u32 - 1;
        self.bytes.extend_from_slice(&other.bytes);
        self.word_start.pop();
        self.word_start
            .extend(other.word_start.iter().map(|&s| s + byte_off));
        self.doc_word_start
            .extend(other.doc_word_start[1..].iter().map(|&w| w + word_off));
    }

    /// Room up front for `docs` more documents of about `text_bytes` bytes of text: growing a
    /// fresh batch copies it at every doubling. Packed words take about their text's bytes,
    /// and a word averages four bytes or more with its space; a character unit (`--shingle
    /// char`) is one to four bytes with its space. The guess is capped at [`RESERVE_MAX`]
    /// bytes; past it the batch grows as it must.
    pub fn reserve_for(&mut self, text_bytes: usize, docs: usize) {
        let raw = text_bytes.min(RESERVE_MAX);
        let per_unit = match self.rule.shingle {
            crate::text::ShingleUnit::Word => 4,
            crate::text::ShingleUnit::Char => 2,
        };
        self.bytes.reserve(raw);
        self.word_start.reserve(raw / per_unit + 1);
        self.doc_word_start.reserve(docs);
    }

    /// Bytes of heap the batch holds (its capacity, not its length).
    pub fn capacity_bytes(&self) -> usize {
        self.bytes.capacity() + 4 * (self.word_start.capacity() + self.doc_word_start.capacity())
    }

    pub fn num_docs(&self) -> usize {
        self.doc_word_start.len() - 1
    }

    pub fn num_words(&self) -> usize {
        self.word_start.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.num_docs() == 0
    }

    /// The global word range of document `d`.
    #[inline]
    pub fn doc_words(&self, d: usize) -> std::ops::Range<usize> {
        self.doc_word_start[d] as usize..self.doc_word_start[d + 1] as usize
    }

    /// Words `from .. to` (global word indices, `from < to`) joined by one space.
    #[inline]
    pub fn span(&self, from: usize, to: usize) -> &[u8] {
        &self.bytes[self.word_start[from] as usize..self.word_start[to] as usize - 1]
    }

    /// The packed bytes of document `d` (its words, each followed by a space).
    pub fn doc_bytes(&self, d: usize) -> &[u8] {
        let r = self.doc_words(d);
        &self.bytes[self.word_start[r.start] as usize..self.word_start[r.end] as usize]
    }

    /// Number of shingles of document `d` for shingle width `k`.
    pub fn shingle_count(&self, d: usize, k: usize) -> usize {
        shingle_layout(self.doc_words(d).len(), k).0
    }

    /// Total shingles in the batch for width `k`.
    pub fn total_shingles(&self, k: usize) -> usize {
        (0..self.num_docs()).map(|d| self.shingle_count(d, k)).sum()
    }

    /// The shingles of document `d` as byte ranges, in text order.
    pub fn shingles(&self, d: usize, k: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let r = self.doc_words(d);
        let (count, width) = shingle_layout(r.len(), k);
        (0..count).map(move |j| self.span(r.start + j, r.start + j + width))
    }
}

/// The most text bytes [`PackedBatch::reserve_for`] makes room for.
pub const RESERVE_MAX: usize = 64 << 20;

/// Packed batches to tokenize into again. A streaming engine hands each chunk's parts back
/// once they are signed, and the next chunk's workers take them: a run, and every later run
/// of the same engine, cycles through warm buffers instead of faulting in fresh pages (and
/// copying on growth) for every chunk. Holds at most `max` batches, each of at most
/// [`SPARE_PART_BYTES_MAX`] bytes of capacity (one grown by an outlier document is freed); the
/// rest are freed.
#[derive(Debug)]
pub struct SpareParts {
    held: std::sync::Mutex<Vec<PackedBatch>>,
    max: usize,
    reused: std::sync::atomic::AtomicU64,
}

/// The most capacity, in bytes, of a batch [`SpareParts`] keeps.
pub const SPARE_PART_BYTES_MAX: usize = 64 << 20;

impl SpareParts {
    pub fn new(max: usize) -> Self {
        SpareParts {
            held: std::sync::Mutex::new(Vec::new()),
            max,
            reused: Default::default(),
        }
    }

    /// An empty batch under `rule`: a spare one (its capacity kept) when there is one.
    pub fn take(&self, rule: TextRule) -> PackedBatch {
        let spare = self.held.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match spare {
            Some(mut b) => {
                self.reused
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                b.clear();
                b.rule = rule;
                b
            }
            None => PackedBatch::with_rule(rule),
        }
    }

    /// Keep `parts` for [`SpareParts::take`], as many as there is room for.
    pub fn give(&self, parts: impl IntoIterator<Item = PackedBatch>) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.max.saturating_sub(held.len());
        held.extend(
            parts
                .into_iter()
                .filter(|b| b.capacity_bytes() <= SPARE_PART_BYTES_MAX)
                .take(room),
        );
    }

    /// How many batches [`SpareParts::take`] has handed out warm.
    pub fn reused(&self) -> u64 {
        self.reused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The most batches kept.
    pub fn max(&self) -> usize {
        self.max
    }

    /// How many batches are kept.
    pub fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spare comes back empty, under the rule asked for, with its capacity; past `max`,
    /// batches handed back are freed.
    #[test]
    fn spare_parts_come_back_cleared_and_stay_bounded() {
        let spares = SpareParts::new(2);
        let mut b = PackedBatch::new();
        b.push_text("some words here");
        let cap = b.bytes.len();
        spares.give([b.clone(), b.clone(), b]);
        assert_eq!(spares.len(), 2);
        let rule = TextRule {
            shingle: crate::text::ShingleUnit::Char,
            ..TextRule::default()
        };
        let t = spares.take(rule);
        assert_eq!(t, PackedBatch::with_rule(rule));
        assert!(t.bytes.capacity() >= cap);
        spares.take(rule);
        assert!(spares.is_empty());
        assert_eq!(spares.reused(), 2);
        assert_eq!(spares.take(rule), PackedBatch::with_rule(rule));
        assert_eq!(spares.reused(), 2, "a fresh batch is not a reused one");
        // A batch past the capacity cap is freed, not kept.
        let mut big = PackedBatch::new();
        big.bytes.reserve(SPARE_PART_BYTES_MAX + 1);
        spares.give([big, PackedBatch::new()]);
        assert_eq!(spares.len(), 1);
    }

    #[test]
    fn packs_words_with_sentinels() {
        let b = PackedBatch::from_texts(&["A b", "", "!!", "c d e"]);
        assert_eq!(b.bytes, b"a b c d e ");
        assert_eq!(b.word_start, [0, 2, 4, 6, 8, 10]);
        assert_eq!(b.doc_word_start, [0, 2, 2, 2, 5]);
        assert_eq!(b.num_docs(), 4);
        let sh: Vec<&[u8]> = b.shingles(3, 2).collect();
        assert_eq!(sh, [&b"c d"[..], b"d e"]);
        let sh: Vec<&[u8]> = b.shingles(0, 5).collect();
        assert_eq!(sh, [&b"a b"[..]]);
        assert_eq!(b.shingles(1, 5).count(), 0);
    }

    #[test]
    fn append_equals_packing_together() {
        let texts = ["one two", "", "three four five", "six"];
        let whole = PackedBatch::from_texts(&texts);
        let mut joined = PackedBatch::from_texts(&texts[..2]);
        joined.append(&PackedBatch::from_texts(&texts[2..]));
        assert_eq!(joined, whole);
        let mut from_empty = PackedBatch::new();
        from_empty.append(&whole);
        assert_eq!(from_empty, whole);
    }
}
