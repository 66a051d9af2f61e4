//! The CPU hot loops: shingle hashing and the permutation min-reduction, with explicit SIMD
//! chosen at run time (AVX-512, AVX2), a portable permutation kernel shaped for the compiler's
//! vectorizer (the fast path on other CPUs), and scalar references for all of them.
//!
//! Kept apart from the engine so benchmarks can time each stage alone, and so tests can run
//! every variant the machine has against the scalar one.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use crate::batch::PackedBatch;
use crate::hash::{mod_p, FNV_OFFSET, FNV_PRIME, P};
use crate::text::shingle_layout;

/// A variant of the permutation kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, one permutation at a time: the reference.
    Scalar,
    /// Plain Rust in blocks of [`PORTABLE_BLOCK`] permutations, a shape the compiler
    /// vectorizes for whatever the target has (SSE2 on any x86-64, NEON on AArch64): the
    /// fastest kernel on a CPU without AVX2.
    Portable,
    /// AVX2: 8 permutations a vector.
    Avx2,
    /// AVX-512F: 16 permutations a vector.
    Avx512,
}

impl Kernel {
    /// Every variant this machine can run (always at least `Scalar` and `Portable`), slowest
    /// first.
    pub fn available() -> Vec<Kernel> {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut v = vec![Kernel::Scalar, Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Kernel::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Kernel::Avx512);
            }
        }
        v
    }

    /// The fastest available variant, or the one `NEARDUP_KERNEL=scalar|portable|avx2|avx512`
    /// names (for benchmarks; an unavailable name falls back to the fastest). It picks the
    /// permutation kernel; `scalar` also turns off the SIMD hasher, tokenizer and record
    /// scanner, any other name leaves them on.
    pub fn detect() -> Kernel {
        static K: OnceLock<Kernel> = OnceLock::new();
        *K.get_or_init(|| {
            let avail = Kernel::available();
            let wanted = std::env::var("NEARDUP_KERNEL")
                .ok()
                .and_then(|s| match s.as_str() {
                    "scalar" => Some(Kernel::Scalar),
                    "portable" => Some(Kernel::Portable),
                    "avx2" => Some(Kernel::Avx2),
                    "avx512" => Some(Kernel::Avx512),
                    _ => None,
                });
            match wanted {
                Some(k) if avail.contains(&k) => k,
                _ => *avail.last().expect("scalar is always available"),
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Portable => "portable",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }
}

/// Whether the AVX2 paths for CPUs without AVX-512 (the hasher, the tokenizer's packer, the
/// record scanner's stop finder) run here: AVX2 with POPCNT and BMI1 (which every AVX2 CPU
/// has), unless `NEARDUP_KERNEL=scalar`.
pub(crate) fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static OK: OnceLock<bool> = OnceLock::new();
        *OK.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("popcnt")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::env::var("NEARDUP_KERNEL").map_or(true, |k| k != "scalar")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Which kernel variant runs on this machine (for reports).
pub fn describe() -> String {
    format!("{} kernel", Kernel::detect().name())
}

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
    let lists = || {
        docs.clone().map(|d| {
            let r = batch.doc_words(d);
            &batch.word_start[r.start..r.end + 1]
        })
    };
    hash_into(&batch.bytes, lists, k, xs);
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
/// class first. On real text (the benchmark corpus), blocks of 48 shingles in text order ran
/// 1.77 times the byte steps their shingles need (the longest of 48 is far above the mean); by
/// class, 1.06 times, and hashing took a quarter less time, the sorting included (`hash_docs`
/// alone, one thread: 13.3-14.1 ns a shingle before, 9.9-10.6 after). A short last block is
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
    // bounds and keeps the four hashes and pointers in registers. Indexing an array of eight
    // slices instead kept a bounds check per byte and spilled: `hash_docs` under
    // `NEARDUP_KERNEL=scalar` ran 31-33M shingles/s with 4, 6 or 8 such lanes, 41M/s this way.
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

/// Documents with fewer shingles are permuted whole by [`sign_docs`](crate::engine::cpu): in
/// the real-text benchmark corpus, repeats are 2-7% of the shingles of documents under 1,024
/// shingles (too few to pay for the check), 10-30% of those up to 16k, and 80% of the few huge
/// ones (licence and changelog collections), which hold most repeats.
pub const REPEAT_FILTER_MIN_SHINGLES: usize = 1024;

/// Most slots of a [`RepeatFilter`] (1 MiB: it stays in L2).
pub const REPEAT_FILTER_MAX_SLOTS: usize = 1 << 17;

/// A [`RepeatFilter`] slot that holds nothing: no key matches it, since every key's stamp (its
/// high half) is at least 1. Not zero, so that the table is not a zeroed allocation.
const REPEAT_FILTER_EMPTY: u64 = u32::MAX as u64;

/// A direct-mapped table of the shingle hashes seen in the current document, to drop repeats
/// before the permutations (a repeat cannot change a minimum; checking a shingle costs about a
/// tenth of permuting it). It has a slot per shingle of the document, rounded up to a power of
/// two, up to [`REPEAT_FILTER_MAX_SLOTS`]. Each slot holds `stamp | x`, the stamp counting
/// documents in its high half, so a new document starts with one add instead of clearing the
/// table. Two hashes that share a slot evict each other: a repeat may then be kept, never a new
/// hash dropped.
#[derive(Default)]
pub struct RepeatFilter {
    slots: Vec<u64>,
    stamp: u64,
}

impl RepeatFilter {
    /// Move the hashes of one document's `xs` not seen earlier in it (as far as the table
    /// remembers) to its front, in order, and return how many there are.
    pub fn keep_first_seen(&mut self, xs: &mut [u32]) -> usize {
        let size = xs.len().next_power_of_two().min(REPEAT_FILTER_MAX_SLOTS);
        if self.slots.len() < size {
            // The table grows to the largest document seen so far, not to the most slots at
            // once: every fresh page costs a fault (about 2.5 us on a VM, where the host backs
            // it too), and most threads never see a document of 128k shingles (split
            // documents come in parts of about 32k). It is filled with a value that is not
            // zero: a zeroed allocation (`vec![0; n]`, or a fill with zeros, which the compiler
            // turns into `calloc`) maps the kernel's zero page, and the first store to each
            // page then copies it and flushes the other cores' TLBs (2.5% of a `signatures`
            // run went to those flushes). The old table (earlier documents' values) is freed
            // first, so that its memory can serve the new one.
            self.slots = Vec::new();
            self.slots = vec![REPEAT_FILTER_EMPTY; size];
        }
        self.stamp = self.stamp.wrapping_add(1 << 32);
        if self.stamp == 0 {
            // 2^32 documents on: stale slots could match again, so clear them once.
            self.slots.fill(REPEAT_FILTER_EMPTY);
            self.stamp = 1 << 32;
        }
        let slots = &mut self.slots[..size];
        let mask = size - 1;
        let mut n = 0;
        for i in 0..xs.len() {
            let x = xs[i];
            let key = self.stamp | x as u64;
            // x is FNV-1a mod P: its low bits are as mixed as any.
            let slot = &mut slots[x as usize & mask];
            let fresh = (*slot != key) as usize;
            *slot = key;
            // Branch-free compaction: always write, advance only past a fresh hash.
            xs[n] = x;
            n += fresh;
        }
        n
    }
}

/// `row[i] = min(row[i], min over x in xs of (a[i]*x + b[i]) mod P)`, with the machine's
/// fastest kernel.
pub fn permute_min(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    permute_min_with(Kernel::detect(), xs, a, b, row)
}

/// [`permute_min`] with a chosen kernel. Panics if the machine cannot run it. The values and
/// parameters must be below `P`, as the SPEC's are (`x(s)` is reduced mod `P`, and
/// `perm_params` draws below it): the kernels' folds rely on it.
pub fn permute_min_with(kernel: Kernel, xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    assert_eq!(a.len(), row.len());
    assert_eq!(b.len(), row.len());
    debug_assert!(xs.iter().all(|&x| x < P));
    debug_assert!(a.iter().chain(b).all(|&v| v < P));
    match kernel {
        Kernel::Scalar => permute_min_scalar(xs, a, b, row),
        Kernel::Portable => permute_min_portable(xs, a, b, row),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => {
            assert!(std::arch::is_x86_feature_detected!("avx2"));
            // SAFETY: the CPU supports AVX2 (checked above).
            unsafe { x86::permute_min_avx2(xs, a, b, row) }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => {
            assert!(std::arch::is_x86_feature_detected!("avx512f"));
            // SAFETY: the CPU supports AVX-512F (checked above).
            unsafe { x86::permute_min_avx512(xs, a, b, row) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => panic!("the {} kernel does not run on this CPU", kernel.name()),
    }
}

/// The reference: the SPEC's arithmetic on native `u64`.
pub fn permute_min_scalar(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    for (slot, (&ai, &bi)) in row.iter_mut().zip(a.iter().zip(b)) {
        let mut m = *slot;
        for &x in xs {
            m = m.min(mod_p(ai as u64 * x as u64 + bi as u64));
        }
        *slot = m;
    }
}

/// Permutations a block of [`permute_min_portable`]. On x86-64 without AVX2 (SSE2 only),
/// `permute+min` in criterion ran 14.3M shingles/s with blocks of 4, 10.8M with 8 and 14.8M
/// with 16, against the scalar reference's 8.2M/s.
pub const PORTABLE_BLOCK: usize = 16;

/// [`permute_min_scalar`]'s result, computed in blocks of [`PORTABLE_BLOCK`] permutations:
/// each block's doubled parameters and running minima sit in fixed-size arrays, and one pass
/// over `xs` updates the whole block: independent lanes of the same arithmetic, which the
/// compiler turns into SIMD (`pmuludq` with SSE2; with NEON, `umull`/`umlal` over four values
/// of `xs` at a time, as read in the AArch64 assembly, not timed on an ARM machine). The
/// arithmetic is [`fold_min_doubled`], as in the explicit kernels. Rows of any length: the
/// permutations past the last whole block take the scalar way.
pub fn permute_min_portable(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    const B: usize = PORTABLE_BLOCK;
    assert!(a.len() >= row.len() && b.len() >= row.len());
    let full = row.len() / B * B;
    for off in (0..full).step_by(B) {
        // Doubled, below 2^32: 32-bit lanes, widened by the multiply (`umull`, `pmuludq`).
        let a2: [u32; B] = std::array::from_fn(|j| 2 * a[off + j]);
        let b2: [u32; B] = std::array::from_fn(|j| 2 * b[off + j]);
        let acc: &mut [u32; B] = (&mut row[off..off + B]).try_into().expect("B");
        let mut m = *acc;
        for &x in xs {
            let x = x as u64;
            let f: [u32; B] =
                std::array::from_fn(|j| fold_min_doubled(a2[j] as u64 * x + b2[j] as u64));
            for j in 0..B {
                m[j] = m[j].min(f[j]);
            }
        }
        *acc = m;
    }
    permute_min_scalar(
        xs,
        &a[full..row.len()],
        &b[full..row.len()],
        &mut row[full..],
    );
}

/// The reduction every SIMD variant uses, written out once in scalar form.
///
/// With `a, x, b <= P - 1`, `v = a*x + b <= 2^62 - 3*2^31 + 2`, so `v >> 31 <= 2^31 - 3` and
/// `f = (v & P) + (v >> 31) <= 2^32 - 4 < 2P`: `f` is congruent to `v` and below `2P`, and
/// `v mod P` is the smaller of `f` and `f - P` in wrapping 32-bit arithmetic (when `f < P` the
/// subtraction wraps to a value above `f`). One subtraction and one `min`, no compare.
#[inline]
pub fn fold_min(v: u64) -> u32 {
    let f = ((v & P as u64) + (v >> 31)) as u32;
    f.min(f.wrapping_sub(P))
}

/// [`fold_min`] as the SIMD kernels compute it, from `w = 2v = (2a)*x + 2b` (the doubled `a`
/// and `b` are made once per row): the high half of `w` is `v >> 31` and the low half is
/// `2 * (v & P)`, so `f` is one 32-bit shift and one add of the two halves, with no mask.
/// `w < 2^63`, so nothing is lost.
#[inline]
pub fn fold_min_doubled(w: u64) -> u32 {
    let f = ((w >> 32) as u32).wrapping_add((w as u32) >> 1);
    f.min(f.wrapping_sub(P))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    use super::{fold_min, FNV_OFFSET, FNV_PRIME, P};

    /// Shingles hashed at once by [`fnv_lanes`]: six vectors of eight.
    pub const FNV_SIMD_LANES: usize = super::HASH_BLOCK;
    const GROUPS: usize = FNV_SIMD_LANES / 8;

    /// The shared loop of the SIMD kernels: the row in blocks of `$lanes` permutations, up to
    /// four blocks per pass over `xs` (each pass keeps its accumulators in registers), then the
    /// scalar tail. A macro, not a function, so the group call stays inside the caller's
    /// `target_feature` context and inlines.
    macro_rules! by_groups {
        ($group:ident, $lanes:expr, $xs:ident, $a:ident, $b:ident, $row:ident) => {{
            let full = $row.len() / $lanes;
            let mut blk = 0;
            while blk < full {
                match full - blk {
                    1 => $group::<1>($xs, $a, $b, $row, blk * $lanes),
                    2 => $group::<2>($xs, $a, $b, $row, blk * $lanes),
                    3 => $group::<3>($xs, $a, $b, $row, blk * $lanes),
                    _ => $group::<4>($xs, $a, $b, $row, blk * $lanes),
                }
                blk += (full - blk).min(4);
            }
            tail($xs, $a, $b, $row, full * $lanes);
        }};
    }

    /// AVX-512 F + DQ (64-bit multiply), unless `NEARDUP_KERNEL=scalar`.
    pub fn fnv_available() -> bool {
        static OK: OnceLock<bool> = OnceLock::new();
        *OK.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::env::var("NEARDUP_KERNEL").map_or(true, |k| k != "scalar")
        })
    }

    /// A vector FNV-1a kernel: [`fnv_lanes`]' contract.
    pub type FnvLanes = unsafe fn(&[u8], &[u64; FNV_SIMD_LANES], &mut [u64; FNV_SIMD_LANES]) -> u64;

    /// The fastest vector hasher this CPU runs (AVX-512 F+DQ, else AVX2), or none (no SIMD, or
    /// `NEARDUP_KERNEL=scalar`).
    pub fn vector_hasher() -> Option<FnvLanes> {
        static K: OnceLock<Option<FnvLanes>> = OnceLock::new();
        *K.get_or_init(|| {
            if fnv_available() {
                Some(fnv_lanes as FnvLanes)
            } else if super::avx2_available() {
                Some(fnv_lanes_avx2 as FnvLanes)
            } else {
                None
            }
        })
    }

    /// [`fnv_lanes`] for CPUs with AVX2 but not AVX-512: four ranges a vector, in passes of
    /// [`AVX2_GROUPS`] vectors (AVX2 has 16 registers; a group keeps its hash and its current
    /// 8-byte word in two). Each word is four scalar loads put together: on Zen 3 that hashed
    /// a fifth faster than `vpgatherqq` (15.2 against 19.5 ns a shingle, `hash_docs` on one
    /// thread). AVX2 has no 64-bit multiply, but FNV's prime is `2^40 + 0x1b3`, so
    /// `h * prime = lo(h) * 0x1b3 + (hi(h) * 0x1b3 mod 2^32) << 32 + h << 40` (mod 2^64): one
    /// `vpmuludq` for the first term, one `vpmulld` for the second (its multiplier is 0 in the
    /// low dword, so the low dword comes out 0), a shift and two adds. A step's byte is moved
    /// to the bottom of each lane by one `pshufb`. Lanes are masked only in the steps past the
    /// pass's shortest range: a block's ranges are of similar length, so most steps need none.
    ///
    /// # Safety
    /// AVX2 must be present.
    #[target_feature(enable = "avx2")]
    pub unsafe fn fnv_lanes_avx2(
        bytes: &[u8],
        ranges: &[u64; FNV_SIMD_LANES],
        out: &mut [u64; FNV_SIMD_LANES],
    ) -> u64 {
        // The same reach check as `fnv_lanes`, in scalar form: a refused lane runs as an empty
        // one (offset 0, length 0: it loads nothing). Every lane is written, a refused one as
        // zeros by a mask: written only when not refused, the compiler made the writes masked
        // stores (`vpmaskmovq`), which are slow on AMD (a tenth of this kernel on Zen 3).
        let mut refused = 0u64;
        let mut offs = [0i64; FNV_SIMD_LANES];
        let mut lens = [0i64; FNV_SIMD_LANES];
        for (l, &r) in ranges.iter().enumerate() {
            let (start, len) = super::unpack_range(r);
            let reach = start as u64 + ((len as u64 + 7) & !7);
            let out = len != 0 && reach > bytes.len() as u64;
            refused |= (out as u64) << l;
            let keep = (out as i64).wrapping_sub(1);
            offs[l] = start as i64 & keep;
            lens[l] = len as i64 & keep;
        }
        for pass in 0..FNV_SIMD_LANES / (4 * AVX2_GROUPS) {
            let at = 4 * AVX2_GROUPS * pass;
            fnv_pass_avx2(
                bytes,
                &offs[at..],
                &lens[at..],
                &mut out[at..],
                refused >> at,
            );
        }
        refused
    }

    /// Vectors of four lanes hashed together by [`fnv_lanes_avx2`], so that their chains (a
    /// step is a multiply and three dependent single-cycle instructions) overlap. On Zen 3,
    /// `hash_docs` on one thread took 15.2 ns a shingle with four, 15.4-16.4 with six (spills)
    /// and 17.4 with two.
    const AVX2_GROUPS: usize = 4;

    // A block is a whole number of passes.
    const _: () = assert!(FNV_SIMD_LANES.is_multiple_of(4 * AVX2_GROUPS));

    /// One pass of [`fnv_lanes_avx2`]: lanes `0 .. 4 * AVX2_GROUPS` of `offs`, `lens` and
    /// `out`; lanes whose bit is set in `refused` are not stored.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(clippy::needless_range_loop)] // one step index into every group: the lockstep
    unsafe fn fnv_pass_avx2(
        bytes: &[u8],
        offs: &[i64],
        lens: &[i64],
        out: &mut [u64],
        refused: u64,
    ) {
        const G: usize = AVX2_GROUPS;
        assert!(offs.len() >= 4 * G && lens.len() >= 4 * G && out.len() >= 4 * G);
        let lo_mul = _mm256_set1_epi64x(0x1b3);
        let hi_mul = _mm256_set1_epi64x(0x1b3 << 32);
        // pshufb controls: byte s of each lane to its bottom byte, the other bytes zero.
        let pick: [__m256i; 8] = std::array::from_fn(|s| {
            let b = s as i64 | -256;
            _mm256_set_epi64x(b | 8, b, b | 8, b)
        });
        let mut h = [_mm256_set1_epi64x(FNV_OFFSET as i64); G];
        let len: [__m256i; G] =
            std::array::from_fn(|g| _mm256_loadu_si256(lens.as_ptr().add(4 * g) as *const __m256i));
        let lane_lens = &lens[..4 * G];
        // Each lane's last word: where its loads stop once its range has ended.
        let last: [i64; 4 * G] = std::array::from_fn(|l| {
            if lens[l] == 0 {
                0
            } else {
                offs[l] + ((lens[l] + 7) & !7) - 8
            }
        });
        let base = bytes.as_ptr();
        let longest = *lane_lens.iter().max().expect("lanes") as usize;
        let shortest = *lane_lens.iter().min().expect("lanes") as usize;
        let mut w = [_mm256_setzero_si256(); G];
        // h = (h ^ byte s of w) * prime, as the doc above says.
        macro_rules! mix {
            ($g:expr, $s:expr) => {{
                let x = _mm256_xor_si256(h[$g], _mm256_shuffle_epi8(w[$g], pick[$s]));
                _mm256_add_epi64(
                    _mm256_add_epi64(_mm256_mul_epu32(x, lo_mul), _mm256_mullo_epi32(x, hi_mul)),
                    _mm256_slli_epi64::<40>(x),
                )
            }};
        }
        let mut t = 0usize;
        while t < longest {
            for g in 0..G {
                let word = |l: usize| -> i64 {
                    let l = 4 * g + l;
                    // SAFETY: min(offs + t, last) is a word the reach check let through (the
                    // lane's last, once it has ended; a word at 0 for an empty lane, which
                    // only loads when a longer lane made the bytes at least 8 long).
                    unsafe {
                        (base.add((offs[l] + t as i64).min(last[l]) as usize) as *const i64)
                            .read_unaligned()
                    }
                };
                w[g] = _mm256_set_epi64x(word(3), word(2), word(1), word(0));
            }
            if t + 8 <= shortest {
                for s in 0..8 {
                    for g in 0..G {
                        h[g] = mix!(g, s);
                    }
                }
            } else {
                // Some lane ends in this word: a lane whose range has ended keeps its value.
                for s in 0..(longest - t).min(8) {
                    let at = _mm256_set1_epi64x((t + s) as i64);
                    for g in 0..G {
                        let live = _mm256_cmpgt_epi64(len[g], at);
                        h[g] = _mm256_blendv_epi8(h[g], mix!(g, s), live);
                    }
                }
            }
            t += 8;
        }
        let mut all = [0u64; 4 * G];
        for (g, v) in h.iter().enumerate() {
            _mm256_storeu_si256(all.as_mut_ptr().add(4 * g) as *mut __m256i, *v);
        }
        for (l, &v) in all.iter().enumerate() {
            if refused >> l & 1 == 0 {
                out[l] = v;
            }
        }
    }

    /// FNV-1a 64 of 48 byte ranges at once: eight ranges a vector, six vectors interleaved so
    /// the multiplies' latency (15 cycles for `vpmullq`) overlaps: with four the loop waited on
    /// it, with six it is bound by the multiplies' issue (48 shingles: 5% faster than 32 in the
    /// `fnv1a` benchmark; 64 gained 4% more there but nothing end to end). Each step loads eight
    /// bytes of every range (one gather), then feeds them in one at a time; a lane whose range
    /// has ended is masked and keeps its value.
    ///
    /// The loads read whole 8-byte words, up to 7 bytes past a range's end: fine inside the
    /// batch, not past its end. So the kernel first checks every lane's reach, `start` plus
    /// `len` rounded up to a multiple of 8, against the bytes. A lane that would pass the end
    /// is refused: it loads nothing, its `out` is left as it was, and its bit (bit `l` for lane
    /// `l`) is set in the mask returned, for the caller to hash it the scalar way (whose
    /// slicing panics on a range that is really out of bounds).
    ///
    /// # Safety
    /// AVX-512 F and DQ must be present.
    #[target_feature(enable = "avx512f,avx512dq")]
    pub unsafe fn fnv_lanes(
        bytes: &[u8],
        ranges: &[u64; FNV_SIMD_LANES],
        out: &mut [u64; FNV_SIMD_LANES],
    ) -> u64 {
        let base = bytes.as_ptr();
        let prime = _mm512_set1_epi64(FNV_PRIME as i64);
        let ff = _mm512_set1_epi64(0xff);
        let eight = _mm512_set1_epi64(8);
        let mut h = [_mm512_set1_epi64(FNV_OFFSET as i64); GROUPS];
        let mut off = [_mm512_setzero_si512(); GROUPS];
        let mut lens = [_mm512_setzero_si512(); GROUPS];
        let limit = _mm512_set1_epi64(bytes.len() as i64);
        let seven = _mm512_set1_epi64(7);
        let mut refused = 0u64;
        let mut most = _mm512_setzero_si512();
        for g in 0..GROUPS {
            let r = _mm512_loadu_si512(ranges.as_ptr().add(8 * g) as *const __m512i);
            off[g] = _mm512_and_si512(r, _mm512_set1_epi64(u32::MAX as i64));
            lens[g] = _mm512_srli_epi64::<32>(r);
            // The lane's reach: start plus len rounded up to whole words (an empty lane, as
            // pads a short block, loads nothing and may start anywhere). Both are below 2^32,
            // so the 64-bit sum cannot wrap.
            let span = _mm512_andnot_si512(seven, _mm512_add_epi64(lens[g], seven));
            let loads = _mm512_test_epi64_mask(lens[g], lens[g]);
            let beyond = _mm512_mask_cmpgt_epu64_mask(loads, _mm512_add_epi64(off[g], span), limit);
            // A refused lane runs as an empty one.
            lens[g] = _mm512_maskz_mov_epi64(!beyond, lens[g]);
            refused |= (beyond as u64) << (8 * g);
            most = _mm512_max_epu64(most, lens[g]);
        }
        let longest = _mm512_reduce_max_epu64(most) as usize;
        let mut w = [_mm512_setzero_si512(); GROUPS];
        // One byte step of every group: lanes whose range has ended are masked and keep their
        // value.
        macro_rules! step {
            ($at:expr) => {
                let at = _mm512_set1_epi64($at as i64);
                for g in 0..GROUPS {
                    let k = _mm512_cmpgt_epu64_mask(lens[g], at);
                    // h ^ (w & 0xff) in one instruction (3.6% faster than `and` then `xor`).
                    let x = _mm512_ternarylogic_epi64::<0x78>(h[g], w[g], ff);
                    w[g] = _mm512_srli_epi64::<8>(w[g]);
                    h[g] = _mm512_mask_mullo_epi64(h[g], k, x, prime);
                }
            };
        }
        let mut t = 0usize;
        while t < longest {
            for g in 0..GROUPS {
                // Lanes with bytes left at this step; the others load nothing.
                let live = _mm512_cmpgt_epu64_mask(lens[g], _mm512_set1_epi64(t as i64));
                w[g] = _mm512_mask_i64gather_epi64::<1>(
                    _mm512_setzero_si512(),
                    live,
                    off[g],
                    base as *const i64,
                );
                off[g] = _mm512_add_epi64(off[g], eight);
            }
            if longest - t >= 8 {
                for s in 0..8 {
                    step!(t + s);
                }
            } else {
                // The last word: only the steps some lane still needs (a block's lanes are of
                // similar length, so a whole word of masked steps would be mostly waste).
                for s in t..longest {
                    step!(s);
                }
            }
            t += 8;
        }
        for (g, v) in h.iter().enumerate() {
            _mm512_mask_storeu_epi64(
                out.as_mut_ptr().add(8 * g) as *mut i64,
                !((refused >> (8 * g)) as u8),
                *v,
            );
        }
        refused
    }

    /// `v mod P` of 48 values, as [`crate::hash::mod_p`] computes it: two folds leave
    /// `f <= P + 4`, and the smaller of `f` and `f - P` (wrapping) is the remainder.
    ///
    /// # Safety
    /// AVX-512 F must be present.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn mod_p_lanes(h: &[u64; FNV_SIMD_LANES]) -> [u32; FNV_SIMD_LANES] {
        let p = _mm512_set1_epi64(P as i64);
        let mut out = [0u32; FNV_SIMD_LANES];
        for g in 0..GROUPS {
            let v = _mm512_loadu_si512(h.as_ptr().add(8 * g) as *const __m512i);
            let f = _mm512_add_epi64(_mm512_and_si512(v, p), _mm512_srli_epi64::<31>(v));
            let f = _mm512_add_epi64(_mm512_and_si512(f, p), _mm512_srli_epi64::<31>(f));
            let f = _mm512_min_epu64(f, _mm512_sub_epi64(f, p));
            _mm256_storeu_si256(
                out.as_mut_ptr().add(8 * g) as *mut __m256i,
                _mm512_cvtepi64_epi32(f),
            );
        }
        out
    }

    /// `G` blocks of 16 permutations from `off`: `2a` and `2b` widened to u64 lanes (permutations
    /// 0-7 of a block in `*lo`, 8-15 in `*hi`; doubled for `fold_min_doubled`) and the running
    /// minima.
    struct Blocks512<const G: usize> {
        alo: [__m512i; G],
        ahi: [__m512i; G],
        blo: [__m512i; G],
        bhi: [__m512i; G],
        acc: [__m512i; G],
    }

    /// Load [`Blocks512`]. Callers guarantee `off + 16 * G <= row.len() <= a.len(), b.len()`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load512<const G: usize>(
        a: &[u32],
        b: &[u32],
        row: &[u32],
        off: usize,
    ) -> Blocks512<G> {
        let load64 = |s: &[u32], i: usize| -> __m512i {
            // SAFETY: i + 8 <= s.len() for every call below.
            _mm512_slli_epi64::<1>(_mm512_cvtepu32_epi64(unsafe {
                _mm256_loadu_si256(s.as_ptr().add(i) as *const __m256i)
            }))
        };
        let mut k = Blocks512 {
            alo: [_mm512_setzero_si512(); G],
            ahi: [_mm512_setzero_si512(); G],
            blo: [_mm512_setzero_si512(); G],
            bhi: [_mm512_setzero_si512(); G],
            acc: [_mm512_setzero_si512(); G],
        };
        for g in 0..G {
            let i = off + 16 * g;
            k.alo[g] = load64(a, i);
            k.ahi[g] = load64(a, i + 8);
            k.blo[g] = load64(b, i);
            k.bhi[g] = load64(b, i + 8);
            k.acc[g] = _mm512_loadu_si512(row.as_ptr().add(i) as *const __m512i);
        }
        k
    }

    /// Store the running minima of [`load512`]'s blocks back into `row`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn store512<const G: usize>(acc: &[__m512i; G], row: &mut [u32], off: usize) {
        for (g, v) in acc.iter().enumerate() {
            _mm512_storeu_si512(row.as_mut_ptr().add(off + 16 * g) as *mut __m512i, *v);
        }
    }

    /// 16 permutations a vector, four vectors (64 permutations) per pass over `xs`, so each
    /// broadcast `x` feeds 64 independent chains. Eleven instructions per 16 permutations: two
    /// multiplies and two adds make `w` in u64 lanes, two `vpermt2d` split it into its low and
    /// high halves (16 lanes each), a shift and an add fold them, and a subtract and two `min`s
    /// reduce and accumulate.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn permute_min_avx512(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
        by_groups!(group512, 16, xs, a, b, row);
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn group512<const G: usize>(
        xs: &[u32],
        a: &[u32],
        b: &[u32],
        row: &mut [u32],
        off: usize,
    ) {
        let p32 = _mm512_set1_epi32(P as i32);
        // Even and odd dwords of two u64x8 vectors, in lane order: their low and high halves.
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let Blocks512 {
            alo,
            ahi,
            blo,
            bhi,
            mut acc,
        } = load512::<G>(a, b, row, off);
        for &x in xs {
            let xv = _mm512_set1_epi64(x as i64);
            for g in 0..G {
                // w = 2a*x + 2b in u64 lanes; see `fold_min_doubled`.
                let wlo = _mm512_add_epi64(_mm512_mul_epu32(alo[g], xv), blo[g]);
                let whi = _mm512_add_epi64(_mm512_mul_epu32(ahi[g], xv), bhi[g]);
                let l = _mm512_permutex2var_epi32(wlo, even, whi);
                let h = _mm512_permutex2var_epi32(wlo, odd, whi);
                let f = _mm512_add_epi32(h, _mm512_srli_epi32::<1>(l));
                acc[g] = _mm512_min_epu32(acc[g], _mm512_min_epu32(f, _mm512_sub_epi32(f, p32)));
            }
        }
        store512(&acc, row, off);
    }

    /// 8 permutations a vector, four vectors per pass over `xs`. The packed order of a vector is
    /// `[0, 1, 4, 5, 2, 3, 6, 7]` (what `shuffle_ps` leaves); it is undone at the store.
    #[target_feature(enable = "avx2")]
    pub unsafe fn permute_min_avx2(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
        by_groups!(group256, 8, xs, a, b, row);
    }

    #[target_feature(enable = "avx2")]
    unsafe fn group256<const G: usize>(
        xs: &[u32],
        a: &[u32],
        b: &[u32],
        row: &mut [u32],
        off: usize,
    ) {
        let p32 = _mm256_set1_epi32(P as i32);
        // Lane j of the packed vector holds permutation `packed[j]`; the order is its own inverse
        // (it swaps lanes 2-3 with 4-5), so the same permute puts a vector back in row order.
        let packed = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
        let load64 = |s: &[u32], i: usize| -> __m256i {
            // SAFETY: i + 4 <= s.len() for every call below.
            // Doubled, for `fold_min_doubled`.
            _mm256_slli_epi64::<1>(_mm256_cvtepu32_epi64(unsafe {
                _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i)
            }))
        };
        let mut alo = [_mm256_setzero_si256(); G];
        let mut ahi = [_mm256_setzero_si256(); G];
        let mut blo = [_mm256_setzero_si256(); G];
        let mut bhi = [_mm256_setzero_si256(); G];
        let mut acc = [_mm256_setzero_si256(); G];
        for g in 0..G {
            let i = off + 8 * g;
            alo[g] = load64(a, i);
            ahi[g] = load64(a, i + 4);
            blo[g] = load64(b, i);
            bhi[g] = load64(b, i + 4);
            let r = _mm256_loadu_si256(row.as_ptr().add(i) as *const __m256i);
            // Into packed order: lane j takes `row[packed[j]]`.
            acc[g] = _mm256_permutevar8x32_epi32(r, packed);
        }
        for &x in xs {
            let xv = _mm256_set1_epi64x(x as i64);
            for g in 0..G {
                let wlo = _mm256_add_epi64(_mm256_mul_epu32(alo[g], xv), blo[g]);
                let whi = _mm256_add_epi64(_mm256_mul_epu32(ahi[g], xv), bhi[g]);
                let (wlo, whi) = (_mm256_castsi256_ps(wlo), _mm256_castsi256_ps(whi));
                // Low and high halves of the u64 lanes, both in packed order.
                let l = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(wlo, whi));
                let h = _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(wlo, whi));
                let f = _mm256_add_epi32(h, _mm256_srli_epi32::<1>(l));
                acc[g] = _mm256_min_epu32(acc[g], _mm256_min_epu32(f, _mm256_sub_epi32(f, p32)));
            }
        }
        // The packing permutation is its own inverse.
        for (g, v) in acc.iter().enumerate() {
            let r = _mm256_permutevar8x32_epi32(*v, packed);
            _mm256_storeu_si256(row.as_mut_ptr().add(off + 8 * g) as *mut __m256i, r);
        }
    }

    /// Permutations `from..` that do not fill a vector, in scalar form.
    fn tail(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32], from: usize) {
        for i in from..row.len() {
            let mut m = row[i];
            for &x in xs {
                m = m.min(fold_min(a[i] as u64 * x as u64 + b[i] as u64));
            }
            row[i] = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_filter_keeps_each_value_once_in_first_seen_order() {
        let mut f = RepeatFilter::default();
        let mut rng = crate::hash::Pcg32::new(9);
        for len in [0usize, 1, 2, 63, 64, 65, 1024, 5000, 300_000] {
            // Few distinct values (many repeats), drawn below P like shingle hashes.
            let distinct: Vec<u32> = (0..(len / 3).max(1)).map(|_| rng.below(P)).collect();
            let xs: Vec<u32> = (0..len)
                .map(|_| distinct[rng.below(distinct.len() as u32) as usize])
                .collect();
            let mut got = xs.clone();
            let n = f.keep_first_seen(&mut got);
            let kept = &got[..n];
            // Every value is kept at least once, nothing new appears, and the order is the
            // order of first appearance (a kept repeat comes after its first occurrence).
            let want: std::collections::BTreeSet<u32> = xs.iter().copied().collect();
            let have: std::collections::BTreeSet<u32> = kept.iter().copied().collect();
            assert_eq!(have, want, "len {len}");
            let mut it = xs.iter();
            assert!(
                kept.iter().all(|k| it.any(|x| x == k)),
                "a subsequence (len {len})"
            );
            // With a slot per value, only slot collisions leave repeats: few of them.
            if len <= REPEAT_FILTER_MAX_SLOTS {
                assert!(
                    n <= want.len() + want.len() / 2,
                    "len {len}: kept {n} of {}",
                    want.len()
                );
            }
        }
        // The table is as large as the largest document so far needs, no larger.
        let mut g = RepeatFilter::default();
        g.keep_first_seen(&mut vec![1; 1000]);
        assert_eq!(g.slots.len(), 1024);
        g.keep_first_seen(&mut [1; 10]);
        assert_eq!(g.slots.len(), 1024);
        g.keep_first_seen(&mut vec![1; 5000]);
        assert_eq!(g.slots.len(), 8192);
        g.keep_first_seen(&mut vec![1; 3 * REPEAT_FILTER_MAX_SLOTS]);
        assert_eq!(g.slots.len(), REPEAT_FILTER_MAX_SLOTS);
        // A new document forgets the last one's values, also when the stamp wraps around.
        for stamp in [
            f.stamp,
            0u64.wrapping_sub(2 << 32),
            0u64.wrapping_sub(1 << 32),
        ] {
            f.stamp = stamp;
            let mut a = vec![7, 7, 8];
            assert_eq!(f.keep_first_seen(&mut a), 2);
            let mut b = vec![8, 7];
            assert_eq!(f.keep_first_seen(&mut b), 2, "after stamp {stamp:#x}");
            assert_eq!(b, [8, 7]);
        }
        // An empty slot matches no value, whatever the stamp: in a fresh table and after the
        // wrap-around's refill, every u32 (the extremes too) is kept the first time.
        for stamp in [0, 0u64.wrapping_sub(1 << 32)] {
            let mut f = RepeatFilter {
                stamp,
                ..Default::default()
            };
            // (Four values in four different slots of the eight.)
            let mut xs = vec![u32::MAX, 0, 2, 1, u32::MAX, 0];
            assert_eq!(f.keep_first_seen(&mut xs), 4, "stamp {stamp:#x}");
            assert_eq!(xs[..4], [u32::MAX, 0, 2, 1]);
        }
    }

    #[test]
    fn fold_min_is_mod_p_for_every_reachable_value() {
        for a in [1u32, 2, P - 1, P - 2, 1 << 30, 12345] {
            for x in [0u32, 1, P - 1, P - 2, 1 << 30, 777] {
                for b in [0u32, 1, P - 1] {
                    let v = a as u64 * x as u64 + b as u64;
                    assert_eq!(fold_min(v) as u64, v % P as u64, "a={a} x={x} b={b}");
                    assert_eq!(
                        fold_min_doubled(2 * v) as u64,
                        v % P as u64,
                        "doubled: a={a} x={x} b={b}"
                    );
                }
            }
        }
    }

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
        if avx2_available() {
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
