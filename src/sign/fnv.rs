//! FNV-1a shingle hashing (SPEC §2): `x(s) = fnv1a64(s) mod P` for every shingle of a packed
//! batch, many shingles in lockstep. Shingles are sorted into length classes so a block runs
//! about as many steps as its bytes need; the values still come out in text order. Scalar
//! lanes everywhere, AVX2 and AVX-512 lanes in [`x86`](self) where the CPU has them.

use std::mem::MaybeUninit;

use crate::batch::PackedBatch;
use crate::hash::{mod_p, FNV_OFFSET, FNV_PRIME};
use crate::text::shingle_layout;
use crate::text::Words;

/// Append `x(s)` of every shingle of document `d` (repeats included, text order) to `xs`.
pub fn hash_shingles(batch: &PackedBatch, d: usize, k: usize, xs: &mut Vec<u32>) {
    hash_docs(batch, d..d + 1, k, xs)
}

/// Append `x(s)` of every shingle of documents `docs`, document after document (repeats
/// included, text order), to `xs`: document `d`'s are the next `batch.shingle_count(d, k)`.
///
/// FNV-1a is a chain of dependent multiplies per shingle, so shingles are hashed in lockstep
/// blocks of [`HASH_BLOCK`] whose chains interleave and the multiplier never waits; the
/// shingles are sorted into blocks by length first (the private `hash_blocks` says how and
/// why).
pub fn hash_docs(batch: &PackedBatch, docs: std::ops::Range<usize>, k: usize, xs: &mut Vec<u32>) {
    hash_docs_into(batch, docs, k, xs)
}

/// The values of every shingle of documents `docs`, document after document, appended to
/// `out`.
fn hash_docs_into<T: ShingleValue>(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
    out: &mut Vec<T>,
) {
    let lists = || {
        docs.clone().map(|d| {
            let r = batch.doc_words(d);
            &batch.word_start[r.start..r.end + 1]
        })
    };
    hash_into(&batch.bytes, lists, k, out);
}

/// The full 64-bit FNV-1a of every shingle of documents `docs`, as [`hash_docs`] lays out
/// their `x(s)`: the values of which `x(s)` is taken, for a caller that needs both.
pub fn fnv64_docs(batch: &PackedBatch, docs: std::ops::Range<usize>, k: usize, out: &mut Vec<u64>) {
    hash_docs_into(batch, docs, k, out)
}

/// Append each of documents `docs`' shingle set to `sets`, cut from `values`, their shingles'
/// FNV-1a values as [`fnv64_docs`] lays them out.
pub fn sets_of_docs(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
    values: &[u64],
    sets: &mut Vec<Vec<u64>>,
) {
    let mut at = 0;
    for d in docs {
        let n = batch.shingle_count(d, k);
        let mut v = values[at..at + n].to_vec();
        at += n;
        v.sort_unstable();
        v.dedup();
        sets.push(v);
    }
    debug_assert_eq!(at, values.len());
}

/// `x(s)` of every shingle of one word list (bytes and word starts laid out as [`PackedBatch`]
/// holds them: words one byte apart, `starts` ending with the end), repeats included, in text
/// order, appended to `xs`: a part of a document, for a document signed in parts.
pub fn hash_word_list(bytes: &[u8], starts: &[u32], k: usize, xs: &mut Vec<u32>) {
    hash_into(bytes, || std::iter::once(starts), k, xs);
}

/// The full 64-bit FNV-1a of every shingle of one word list (bytes and word starts laid out as
/// [`PackedBatch`] and [`crate::text::Words`] hold them: words one byte apart, `starts` ending
/// with the end), repeats included, in text order, appended to `out`: the values exact-Jaccard
/// confirmation compares, hashed as [`hash_docs`] hashes.
pub fn fnv64_shingles(bytes: &[u8], starts: &[u32], k: usize, out: &mut Vec<u64>) {
    hash_into(bytes, || std::iter::once(starts), k, out);
}

/// What a shingle's FNV-1a 64 becomes in the output: `x(s)` (its value mod `P`, as a
/// signature needs) or the full value (as exact Jaccard compares).
trait ShingleValue: Copy {
    fn block(h: &[u64; HASH_BLOCK]) -> [Self; HASH_BLOCK];
}

impl ShingleValue for u64 {
    #[inline]
    fn block(h: &[u64; HASH_BLOCK]) -> [u64; HASH_BLOCK] {
        *h
    }
}

impl ShingleValue for u32 {
    #[inline]
    fn block(h: &[u64; HASH_BLOCK]) -> [u32; HASH_BLOCK] {
        #[cfg(target_arch = "x86_64")]
        if x86::fnv_available() {
            // SAFETY: AVX-512 F present (fnv_available).
            return unsafe { x86::mod_p_lanes(h) };
        }
        std::array::from_fn(|l| mod_p(h[l]))
    }
}

/// Append the values of the shingles of `lists()` to `out`, in text order.
fn hash_into<'a, T: ShingleValue, I: Iterator<Item = &'a [u32]>>(
    bytes: &[u8],
    lists: impl Fn() -> I,
    k: usize,
    out: &mut Vec<T>,
) {
    let total: usize = lists()
        .map(|ws| shingle_layout(ws.len().saturating_sub(1), k).0)
        .sum();
    // Every value is written exactly once, so the room is not filled first. The shingles are
    // numbered in u32s.
    assert!(total <= u32::MAX as usize, "too many shingles for one call");
    out.reserve(total);
    let written = hash_blocks(bytes, lists(), k, &mut out.spare_capacity_mut()[..total]);
    assert_eq!(written, total, "every shingle counted is written");
    // SAFETY: hash_blocks wrote `written` values, each at its shingle's own number below
    // `total` (distinct numbers, bounds-checked writes), so all of out[len .. len + total].
    unsafe { out.set_len(out.len() + total) };
}

/// Shingle length classes of [`hash_blocks`]: a shingle of `len` bytes goes to class
/// `min(len, LENGTH_CLASS_CAP) >> LENGTH_CLASS_SHIFT`.
const LENGTH_CLASS_SHIFT: u32 = 2;
const LENGTH_CLASS_CAP: u32 = 96;
const LENGTH_CLASSES: usize = (LENGTH_CLASS_CAP >> LENGTH_CLASS_SHIFT) as usize + 1;

/// A byte range `start .. start + len` packed as `start | len << 32`, as the kernels take it.
#[inline(always)]
fn pack_range(start: u32, len: u32) -> u64 {
    start as u64 | (len as u64) << 32
}

/// `(start, len)` of a [`pack_range`].
#[inline(always)]
fn unpack_range(r: u64) -> (u32, u32) {
    (r as u32, (r >> 32) as u32)
}

/// Blocks of shingles waiting to be hashed, one per length class: packed byte ranges and their
/// places in the output, with the fill counts apart, so that a push is two stores and the
/// counts' loads do not wait on them. Each block has room for [`SLOTS`] entries, a power of
/// two, so its address is a shift and an index masked to it needs no bounds check; it is
/// hashed at [`HASH_BLOCK`]. Only the counts start initialised: the blocks are 19 KiB, and
/// exact-Jaccard confirmation makes one per document.
struct Pending<const C: usize> {
    range: [[MaybeUninit<u64>; SLOTS]; C],
    idx: [[MaybeUninit<u32>; SLOTS]; C],
    n: [u32; C],
}

const SLOTS: usize = HASH_BLOCK.next_power_of_two();

// The scalar way hashes a block in groups of `LANES`, and a block fits its slots.
const _: () = assert!(HASH_BLOCK.is_multiple_of(LANES) && SLOTS >= HASH_BLOCK);

impl<const C: usize> Pending<C> {
    fn new() -> Self {
        Pending {
            range: [[MaybeUninit::uninit(); SLOTS]; C],
            idx: [[MaybeUninit::uninit(); SLOTS]; C],
            n: [0; C],
        }
    }

    /// Add a shingle to block `c`; true when the block is full (it must then be flushed before
    /// the next push, so that `n < HASH_BLOCK` here).
    #[inline(always)]
    fn push(&mut self, c: usize, range: u64, idx: u32) -> bool {
        let n = self.n[c] as usize;
        debug_assert!(n < HASH_BLOCK);
        self.range[c][n % SLOTS].write(range);
        self.idx[c][n % SLOTS].write(idx);
        self.n[c] = n as u32 + 1;
        n + 1 == HASH_BLOCK
    }

    /// The packed range and output place of entry `l < n[c]` of block `c`.
    #[inline]
    fn entry(&self, c: usize, l: usize) -> (u64, u32) {
        assert!(l < self.n[c] as usize);
        // SAFETY: entries below n[c] were written by `push`.
        unsafe { (self.range[c][l].assume_init(), self.idx[c][l].assume_init()) }
    }

    /// Add a shingle to block `c`, and hash the block when that fills it; the values written.
    #[inline(always)]
    fn push_or_flush<T: ShingleValue>(
        &mut self,
        c: usize,
        range: u64,
        idx: u32,
        bytes: &[u8],
        out: &mut [MaybeUninit<T>],
    ) -> usize {
        if self.push(c, range, idx) {
            self.flush(c, bytes, out)
        } else {
            0
        }
    }

    /// Hash block `c` (its unused lanes empty ranges), put each value in its place, and return
    /// how many there were.
    fn flush<T: ShingleValue>(
        &mut self,
        c: usize,
        bytes: &[u8],
        out: &mut [MaybeUninit<T>],
    ) -> usize {
        let n = self.n[c] as usize;
        assert!(n <= HASH_BLOCK);
        for r in &mut self.range[c][n..HASH_BLOCK] {
            r.write(0);
        }
        // SAFETY: entries below n were written by `push`, the rest up to HASH_BLOCK just now.
        let ranges = unsafe { &*(self.range[c].as_ptr() as *const [u64; HASH_BLOCK]) };
        let v = T::block(&hash_block(bytes, ranges));
        for (i, &v) in self.idx[c][..n].iter().zip(&v) {
            // SAFETY: entries below n were written by `push`.
            out[unsafe { i.assume_init() } as usize].write(v);
        }
        self.n[c] = 0;
        n
    }
}

/// `out[i]` = the value of shingle `i` of the word lists `lists` (word start offsets into
/// `bytes`, the end last), numbered on from one list into the next; `out` holds exactly as
/// many.
///
/// A lockstep block runs as many byte steps as its longest shingle. So the shingles are sorted
/// into classes of similar length (four bytes wide) as they come, and a class is hashed when it
/// fills a block; what is left in the classes at the end is hashed in blocks taken shortest
/// class first. On real text a block in text order runs far more steps than its shingles need
/// (the longest of a block is far above the mean); a block of one class runs close to what
/// they need, and the saving outweighs the sorting (docs/BENCHMARKS.md). A short last block is
/// padded with empty ranges and takes the vector way too.
fn hash_blocks<'a, T: ShingleValue>(
    bytes: &[u8],
    lists: impl Iterator<Item = &'a [u32]>,
    k: usize,
    out: &mut [MaybeUninit<T>],
) -> usize {
    let mut rest = Pending::<1>::new();
    let mut written = 0;
    if out.len() < SORT_MIN_SHINGLES {
        for_each_range(lists, k, |range, i| {
            written += rest.push_or_flush(0, range, i, bytes, out);
        });
    } else {
        let mut classes = Pending::<LENGTH_CLASSES>::new();
        for_each_range(lists, k, |range, i| {
            let c = (unpack_range(range).1.min(LENGTH_CLASS_CAP) >> LENGTH_CLASS_SHIFT) as usize;
            written += classes.push_or_flush(c, range, i, bytes, out);
        });
        for c in 0..LENGTH_CLASSES {
            for l in 0..classes.n[c] as usize {
                let (range, idx) = classes.entry(c, l);
                written += rest.push_or_flush(0, range, idx, bytes, out);
            }
        }
    }
    if rest.n[0] > 0 {
        written += rest.flush(0, bytes, out);
    }
    written
}

/// Fewer shingles than this are hashed in text order: sorting a few into 25 classes would
/// leave most of them in the remainders.
const SORT_MIN_SHINGLES: usize = 4 * HASH_BLOCK;

/// `f(packed byte range, number)` of every shingle of the word lists, numbered on from one list
/// into the next. Shingle `j` of a list `ws` is `bytes[ws[j] .. ws[j + width] - 1]`. A public
/// caller's starts need not increase: a shingle that runs backwards gets a wrapped length,
/// and any range outside `bytes` makes the hashing panic (the kernel refuses its lane, and the
/// scalar way's slicing panics).
#[inline(always)]
fn for_each_range<'a>(
    lists: impl Iterator<Item = &'a [u32]>,
    k: usize,
    mut f: impl FnMut(u64, u32),
) {
    let mut i = 0u32;
    for ws in lists {
        let (count, width) = shingle_layout(ws.len().saturating_sub(1), k);
        for (&h, &t) in ws[..count].iter().zip(&ws[width..width + count]) {
            f(pack_range(h, t.wrapping_sub(1).wrapping_sub(h)), i);
            i += 1;
        }
    }
}

/// Shingles per lockstep block of [`hash_docs`] (public so tests can sweep its boundaries).
pub const HASH_BLOCK: usize = 48;

/// FNV-1a 64 of the [`HASH_BLOCK`] packed byte ranges (see [`pack_range`]).
fn hash_block(bytes: &[u8], ranges: &[u64; HASH_BLOCK]) -> [u64; HASH_BLOCK] {
    #[cfg(target_arch = "x86_64")]
    if let Some(kernel) = x86::vector_hasher() {
        let mut out = [0u64; HASH_BLOCK];
        // SAFETY: vector_hasher returns only a kernel this CPU runs; the kernels check their
        // loads' bounds.
        let mut refused = unsafe { kernel(bytes, ranges, &mut out) };
        // The lanes whose word loads would pass the end of the bytes (the last shingles of a
        // batch or word list, or ranges that are really out of bounds: the slicing panics).
        while refused != 0 {
            let l = refused.trailing_zeros() as usize;
            let (start, len) = unpack_range(ranges[l]);
            out[l] = crate::hash::fnv1a64(&bytes[start as usize..][..len as usize]);
            refused &= refused - 1;
        }
        return out;
    }
    hash_block_scalar(bytes, ranges)
}

/// [`hash_block`] the scalar way: [`LANES`] ranges at a time in lockstep.
fn hash_block_scalar(bytes: &[u8], ranges: &[u64; HASH_BLOCK]) -> [u64; HASH_BLOCK] {
    let mut out = [0u64; HASH_BLOCK];
    for g in 0..HASH_BLOCK / LANES {
        let r: &[u64; LANES] = ranges[g * LANES..][..LANES].try_into().expect("LANES");
        let o: &mut [u64; LANES] = (&mut out[g * LANES..][..LANES]).try_into().expect("LANES");
        hash_lanes_scalar(bytes, r, o);
    }
    out
}

/// FNV-1a 64 of [`LANES`] packed byte ranges in lockstep (scalar), into `out`.
fn hash_lanes_scalar(bytes: &[u8], ranges: &[u64; LANES], out: &mut [u64; LANES]) {
    let ranges: [&[u8]; LANES] = std::array::from_fn(|l| {
        let (start, len) = unpack_range(ranges[l]);
        &bytes[start as usize..][..len as usize]
    });
    let common = ranges.iter().map(|r| r.len()).min().expect("LANES > 0");
    // Each lane cut to the common length by name, so the compiler sees every index below in
    // bounds and keeps the four hashes and pointers in registers. Indexing an array of
    // slices instead kept a bounds check per byte and spilled, and was slower with 4, 6 or 8
    // lanes alike (`hash_docs` under `NEARDUP_KERNEL=scalar`, docs/BENCHMARKS.md).
    let (r0, r1, r2, r3) = (
        &ranges[0][..common],
        &ranges[1][..common],
        &ranges[2][..common],
        &ranges[3][..common],
    );
    let mut h = [FNV_OFFSET; LANES];
    for i in 0..common {
        h[0] = (h[0] ^ r0[i] as u64).wrapping_mul(FNV_PRIME);
        h[1] = (h[1] ^ r1[i] as u64).wrapping_mul(FNV_PRIME);
        h[2] = (h[2] ^ r2[i] as u64).wrapping_mul(FNV_PRIME);
        h[3] = (h[3] ^ r3[i] as u64).wrapping_mul(FNV_PRIME);
    }
    for l in 0..LANES {
        for &b in &ranges[l][common..] {
            h[l] = (h[l] ^ b as u64).wrapping_mul(FNV_PRIME);
        }
    }
    *out = h;
}

/// Shingles hashed in lockstep: four chains of a multiply and an xor (four cycles each) keep
/// a 64-bit multiplier busy, and four hashes and four byte pointers fit x86-64's registers.
const LANES: usize = 4;

// `hash_lanes_scalar` names its four lanes one by one.
const _: () = assert!(LANES == 4);

/// The set a document's exact Jaccard is computed over (SPEC §3): each shingle's full 64-bit
/// FNV-1a value, sorted and without repeats.
pub fn shingle_fnv_set(words: &Words, k: usize) -> Vec<u64> {
    fnv_set(&words.bytes, &words.starts, k)
}

/// [`shingle_fnv_set`] of document `d` of a batch: the same set as its text's.
pub fn batch_fnv_set(batch: &PackedBatch, d: usize, k: usize) -> Vec<u64> {
    let r = batch.doc_words(d);
    fnv_set(&batch.bytes, &batch.word_start[r.start..r.end + 1], k)
}

/// [`batch_fnv_set`] of each of documents `docs`, in order, their shingles hashed in one call
/// (the lockstep blocks fill across documents).
pub fn batch_fnv_sets(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
) -> Vec<Vec<u64>> {
    let mut values = Vec::new();
    fnv64_docs(batch, docs.clone(), k, &mut values);
    let mut sets = Vec::with_capacity(docs.len());
    sets_of_docs(batch, docs, k, &values, &mut sets);
    sets
}

/// [`shingle_fnv_set`] of one word list laid out as [`Words`] and
/// [`PackedBatch`] hold it (`starts` ending with the end): the batch's documents
/// are cut out of it without copying.
pub fn fnv_set(bytes: &[u8], starts: &[u32], k: usize) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(starts.len());
    fnv64_shingles(bytes, starts, k, &mut v);
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::P;

    /// Words of the given lengths (letters only, so each is one word), one text.
    fn text_of_lengths(lens: &[usize]) -> String {
        let words: Vec<String> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                let c = (b'a' + (i % 26) as u8) as char;
                std::iter::repeat_n(c, l).collect()
            })
            .collect();
        words.join(" ")
    }

    #[test]
    fn shingles_of_every_length_class_hash_in_text_order() {
        // One-word shingles of lengths in every class, the first (1-3 bytes) and the
        // open-ended last (LENGTH_CLASS_CAP bytes and up) among them, each class holding 1,
        // 47, 48, 49 or 97 of them (a lone, a one-short, a full, a full-plus-one and a
        // twice-full-plus-one block) or none; the class edges themselves (3, 4, CAP - 1, CAP,
        // CAP + 1) among the lengths; shuffled. Then the same words as 2- and 5-word shingles.
        let mut rng = crate::hash::Pcg32::new(11);
        let counts = [97usize, 1, 47, 48, 49, 0];
        let cap = LENGTH_CLASS_CAP as usize;
        let mut lens = vec![3, 4, cap - 1, cap, cap + 1];
        for c in 0..LENGTH_CLASSES {
            let lo = (c << LENGTH_CLASS_SHIFT).max(1);
            let hi = if c + 1 == LENGTH_CLASSES {
                lo + 40
            } else {
                (c + 1) << LENGTH_CLASS_SHIFT
            };
            let n = if c + 1 == LENGTH_CLASSES {
                97
            } else {
                counts[c % counts.len()]
            };
            for _ in 0..n {
                lens.push(lo + rng.below((hi - lo) as u32) as usize);
            }
        }
        for i in (1..lens.len()).rev() {
            lens.swap(i, rng.below(i as u32 + 1) as usize);
        }
        assert!(lens.len() >= SORT_MIN_SHINGLES);
        let text = text_of_lengths(&lens);
        let w = crate::text::Words::new(&text);
        assert_eq!(w.starts.len(), lens.len() + 1);
        for k in [1, 2, 5] {
            let mut got = Vec::new();
            fnv64_shingles(&w.bytes, &w.starts, k, &mut got);
            let want: Vec<u64> = w.shingle_slices(k).map(crate::hash::fnv1a64).collect();
            assert_eq!(got, want, "k = {k}");
            let mut xs = vec![7u32];
            hash_word_list(&w.bytes, &w.starts, k, &mut xs);
            assert_eq!(xs[0], 7, "what was there is kept");
            let want: Vec<u32> = want.iter().map(|&v| mod_p(v)).collect();
            assert_eq!(xs[1..], want, "k = {k}");
        }
    }

    /// Whether this CPU runs the AVX-512 hasher; without it, say so loudly, and fail when
    /// `NEARDUP_REQUIRE_AVX512=1` says the machine must have it.
    fn avx512_hasher(what: &str) -> bool {
        #[cfg(target_arch = "x86_64")]
        if x86::fnv_available() {
            return true;
        }
        crate::testsupport::untested(&format!("{what} with AVX-512"), "NEARDUP_REQUIRE_AVX512");
        false
    }

    /// Every vector hasher this CPU runs, by name. Says loudly which are missing, and fails
    /// when `NEARDUP_REQUIRE_AVX512=1` or `NEARDUP_REQUIRE_SIMD=1` (AVX2) says the machine
    /// must have them.
    #[cfg(target_arch = "x86_64")]
    fn vector_hashers(what: &str) -> Vec<(&'static str, x86::FnvLanes)> {
        let mut v = Vec::new();
        if avx512_hasher(what) {
            v.push(("avx512", x86::fnv_lanes as x86::FnvLanes));
        }
        if crate::simd::cpu().avx2 {
            v.push(("avx2", x86::fnv_lanes_avx2 as x86::FnvLanes));
        } else {
            crate::testsupport::untested(&format!("{what} with AVX2"), "NEARDUP_REQUIRE_SIMD");
        }
        v
    }

    #[test]
    fn mod_p_lanes_is_mod_p() {
        if !avx512_hasher("mod_p_lanes") {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let p = P as u64;
            let mut rng = crate::hash::Pcg32::new(5);
            let edges = [
                0,
                1,
                p - 1,
                p,
                p + 1,
                2 * p - 1,
                2 * p,
                1 << 62,
                u64::MAX,
                u64::MAX - p,
            ];
            let mut v: Vec<u64> = edges.to_vec();
            v.extend((0..86).map(|_| (rng.next_u32() as u64) << 32 | rng.next_u32() as u64));
            for block in v.chunks_exact(HASH_BLOCK) {
                let h: &[u64; HASH_BLOCK] = block.try_into().unwrap();
                // SAFETY: avx512_hasher says AVX-512 F is present.
                let got = unsafe { x86::mod_p_lanes(h) };
                let want: Vec<u32> = h.iter().map(|&x| (x % p) as u32).collect();
                assert_eq!(got[..], want[..]);
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_vector_hashers_refuse_only_the_lanes_whose_loads_would_pass_the_end() {
        for (name, kernel) in vector_hashers("the vector hashers' bounds check") {
            // The bytes end right before an unmapped page: a load past them crashes the test.
            let guarded = crate::guarded::Guarded::new(&(0..100u8).collect::<Vec<u8>>());
            let bytes = guarded.bytes();
            // A lane reads whole words: 90 + 9 bytes reaches 90 + 16 > 100; 84 + 16 ends
            // exactly at the end. Then ranges at the edges of u32 (a 32-bit sum would wrap
            // and pass), in the first group and the last. Empty lanes (start 1,000) read
            // nothing, wherever they start.
            let cases = [
                (90u32, 9u32, false),
                (84, 9, true),
                (84, 16, true),
                // A short lane whose last word ends at the end, and one that would pass it.
                (92, 8, true),
                (96, 4, false),
                (u32::MAX, 1, false),
                (u32::MAX - 3, 8, false),
                (0, u32::MAX, false),
            ];
            for (start, len, fits) in cases {
                for lane in [5, HASH_BLOCK - 1] {
                    let mut ranges = [pack_range(1000, 0); HASH_BLOCK];
                    for (l, r) in ranges.iter_mut().enumerate().take(5) {
                        *r = pack_range(l as u32, 3);
                    }
                    ranges[lane] = pack_range(start, len);
                    let mut out = [1u64; HASH_BLOCK];
                    // SAFETY: vector_hashers lists only kernels this CPU runs.
                    let refused = unsafe { kernel(bytes, &ranges, &mut out) };
                    let what = format!("{name}: start {start} len {len} in lane {lane}");
                    assert_eq!(refused, if fits { 0 } else { 1 << lane }, "{what}");
                    if fits {
                        let s = start as usize;
                        let want = crate::hash::fnv1a64(&bytes[s..s + len as usize]);
                        assert_eq!(out[lane], want, "{what}");
                    } else {
                        assert_eq!(out[lane], 1, "a refused lane's value is left: {what}");
                    }
                    // The other lanes are hashed either way.
                    assert_eq!(out[1], crate::hash::fnv1a64(&bytes[1..4]), "{what}");
                    assert_eq!(out[6], FNV_OFFSET, "{what}");
                }
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_vector_and_scalar_hashers_agree_on_random_blocks() {
        for (name, kernel) in vector_hashers("the vector hashers against hash_lanes_scalar") {
            let mut rng = crate::hash::Pcg32::new(17);
            let random: Vec<u8> = (0..4096).map(|_| rng.next_u32() as u8).collect();
            let guarded = crate::guarded::Guarded::new(&random);
            let bytes = guarded.bytes();
            for round in 0..200 {
                // Lengths from 0 to 130, some blocks of one length class, some mixed; some
                // lanes end within 7 bytes of the end of the bytes (refused, then scalar).
                let spread = [3, 130, 1][round % 3];
                let base = rng.below(100) as usize;
                let ranges: [u64; HASH_BLOCK] = std::array::from_fn(|_| {
                    let len = (base + rng.below(spread) as usize).min(130);
                    let start = rng.below((bytes.len() - len + 1) as u32);
                    pack_range(start, len as u32)
                });
                let want = hash_block_scalar(bytes, &ranges);
                let mut got = [0u64; HASH_BLOCK];
                // SAFETY: vector_hashers lists only kernels this CPU runs.
                let mut refused = unsafe { kernel(bytes, &ranges, &mut got) };
                // Refused lanes (their loads would pass the end) are the caller's to hash.
                while refused != 0 {
                    let l = refused.trailing_zeros() as usize;
                    got[l] = want[l];
                    refused &= refused - 1;
                }
                assert_eq!(got, want, "{name}: round {round}");
                assert_eq!(hash_block(bytes, &ranges), want, "round {round}");
            }
        }
    }
}
