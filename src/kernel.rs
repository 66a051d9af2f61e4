//! The CPU hot loops: shingle hashing and the permutation min-reduction, with explicit SIMD
//! chosen at run time (AVX-512, AVX2) and a scalar fallback that is the reference for both.
//!
//! Kept apart from the engine so benchmarks can time each stage alone, and so tests can run
//! every variant the machine has against the scalar one.

use std::sync::OnceLock;

use crate::batch::PackedBatch;
use crate::hash::{mod_p, FNV_OFFSET, FNV_PRIME, P};
use crate::text::shingle_layout;

/// A variant of the permutation kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, one permutation at a time: the reference.
    Scalar,
    /// AVX2: 8 permutations a vector.
    Avx2,
    /// AVX-512F: 16 permutations a vector.
    Avx512,
}

impl Kernel {
    /// Every variant this machine can run (always at least `Scalar`).
    pub fn available() -> Vec<Kernel> {
        let mut v = vec![Kernel::Scalar];
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

    /// The fastest available variant, or the one `NEARDUP_KERNEL=scalar|avx2|avx512`
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
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }
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
/// blocks of [`HASH_BLOCK`] whose chains interleave and the multiplier never waits. The blocks run
/// across document boundaries: only the last block of the range is partial, so short documents
/// and each document's remainder do not fall back to a slower path.
pub fn hash_docs(batch: &PackedBatch, docs: std::ops::Range<usize>, k: usize, xs: &mut Vec<u32>) {
    let lists = docs.map(|d| {
        let r = batch.doc_words(d);
        &batch.word_start[r.start..r.end + 1]
    });
    hash_blocks(&batch.bytes, lists, k, |h| {
        xs.extend(h.iter().map(|&v| mod_p(v)))
    });
}

/// `x(s)` of every shingle of one word list (bytes and word starts laid out as [`PackedBatch`]
/// holds them: words one byte apart, `starts` ending with the end), repeats included, in text
/// order, appended to `xs`: a part of a document, for a document signed in parts.
pub fn hash_word_list(bytes: &[u8], starts: &[u32], k: usize, xs: &mut Vec<u32>) {
    hash_blocks(bytes, std::iter::once(starts), k, |h| {
        xs.extend(h.iter().map(|&v| mod_p(v)))
    });
}

/// The full 64-bit FNV-1a of every shingle of one word list (bytes and word starts laid out as
/// [`PackedBatch`] and [`crate::text::Words`] hold them: words one byte apart, `starts` ending
/// with the end), repeats included, in text order, appended to `out`: the values exact-Jaccard
/// confirmation compares, hashed as [`hash_docs`] hashes.
pub fn fnv64_shingles(bytes: &[u8], starts: &[u32], k: usize, out: &mut Vec<u64>) {
    hash_blocks(bytes, std::iter::once(starts), k, |h| {
        out.extend_from_slice(h)
    });
}

/// The shingles of each word list of `lists` (word start offsets into `bytes`, the end last)
/// in lockstep blocks of [`HASH_BLOCK`], the blocks running on from one list into the next.
/// `emit` gets each block's raw 64-bit FNV-1a values in order (the last block may be short).
fn hash_blocks<'a>(
    bytes: &[u8],
    lists: impl Iterator<Item = &'a [u32]>,
    k: usize,
    mut emit: impl FnMut(&[u64]),
) {
    let mut start = [0u64; HASH_BLOCK];
    let mut len = [0u64; HASH_BLOCK];
    // The furthest shingle end in the block so far (for the vector loads' bounds check).
    let mut far = 0u64;
    let mut n = 0;
    for ws in lists {
        let (count, width) = shingle_layout(ws.len().saturating_sub(1), k);
        let increasing = ws.windows(2).fold(true, |ok, p| ok & (p[0] < p[1]));
        // Shingle j is bytes[ws[j] .. ws[j + width] - 1]. The block is filled a run of
        // shingles at a time, in a loop the compiler vectorises (one shingle at a time, with
        // the block test in the loop, it was 6% of a run).
        let mut j = 0;
        while j < count {
            let take = (count - j).min(HASH_BLOCK - n);
            let (heads, tails) = (&ws[j..j + take], &ws[j + width..j + width + take]);
            for (((s, l), &h), &t) in start[n..n + take]
                .iter_mut()
                .zip(&mut len[n..n + take])
                .zip(heads)
                .zip(tails)
            {
                *s = h as u64;
                *l = (t - 1 - h) as u64;
            }
            // The furthest end of the run: its last shingle's when the word starts increase
            // (the vector loads trust `far`; a public caller's starts need not increase, and
            // then the blocks go the bounds-checked scalar way). Checking each list once costs
            // far less than a max over every lane (7-10% of `hash_docs`).
            far = if increasing {
                far.max(tails[take - 1] as u64 - 1)
            } else {
                u64::MAX
            };
            n += take;
            j += take;
            if n == HASH_BLOCK {
                emit(&hash_block(bytes, &start, &len, far));
                n = 0;
                far = 0;
            }
        }
    }
    if n > 0 {
        let mut tail = [0u64; HASH_BLOCK];
        for l in 0..n {
            let s = start[l] as usize;
            tail[l] = crate::hash::fnv1a64(&bytes[s..s + len[l] as usize]);
        }
        emit(&tail[..n]);
    }
}

/// Shingles per lockstep block of [`hash_docs`] (public so tests can sweep its boundaries).
pub const HASH_BLOCK: usize = 48;

/// FNV-1a 64 of the [`HASH_BLOCK`] byte ranges `bytes[start[l] .. start[l] + len[l]]`. `far`
/// is at least the furthest end of them, `max(start[l] + len[l])` (`u64::MAX` when unknown:
/// the block then goes the bounds-checked way).
fn hash_block(
    bytes: &[u8],
    start: &[u64; HASH_BLOCK],
    len: &[u64; HASH_BLOCK],
    far: u64,
) -> [u64; HASH_BLOCK] {
    debug_assert!(far >= (0..HASH_BLOCK).map(|l| start[l] + len[l]).max().unwrap());
    let mut out = [0u64; HASH_BLOCK];
    #[cfg(target_arch = "x86_64")]
    if x86::fnv_available() {
        // The vector loads read whole 8-byte words, up to 7 bytes past a shingle's end: fine
        // inside the batch, not past its end (a block that could goes the scalar way). The
        // check is on the furthest end of any lane, not the last lane's: an earlier shingle can
        // round up further than the last one. (Computing each lane's exact reach here took 5%
        // of a run: SSE2 has no 64-bit compare.)
        if far.saturating_add(7) <= bytes.len() as u64 {
            // SAFETY: AVX-512 F+DQ present (fnv_available); an 8-byte read at start[l] + 8i
            // with 8i <= len[l] - 1 ends at or before start[l] + len[l] + 7 <= far + 7, inside
            // `bytes`.
            unsafe { x86::fnv_lanes(bytes, start, len, &mut out) };
            return out;
        }
    }
    for g in 0..HASH_BLOCK / LANES {
        let s: &[u64; LANES] = start[g * LANES..][..LANES].try_into().expect("LANES");
        let l: &[u64; LANES] = len[g * LANES..][..LANES].try_into().expect("LANES");
        let o: &mut [u64; LANES] = (&mut out[g * LANES..][..LANES]).try_into().expect("LANES");
        hash_lanes_scalar(bytes, s, l, o);
    }
    out
}

/// FNV-1a 64 of [`LANES`] byte ranges in lockstep (scalar), into `out`.
fn hash_lanes_scalar(
    bytes: &[u8],
    start: &[u64; LANES],
    len: &[u64; LANES],
    out: &mut [u64; LANES],
) {
    let ranges: [&[u8]; LANES] =
        std::array::from_fn(|l| &bytes[start[l] as usize..(start[l] + len[l]) as usize]);
    let common = ranges.iter().map(|r| r.len()).min().expect("LANES > 0");
    // Cut to the common length, so the compiler sees every index below in bounds.
    let heads: [&[u8]; LANES] = std::array::from_fn(|l| &ranges[l][..common]);
    let mut h = [FNV_OFFSET; LANES];
    #[allow(clippy::needless_range_loop)] // one index into eight ranges: the lockstep
    for i in 0..common {
        for l in 0..LANES {
            h[l] = (h[l] ^ heads[l][i] as u64).wrapping_mul(FNV_PRIME);
        }
    }
    for l in 0..LANES {
        for &b in &ranges[l][common..] {
            h[l] = (h[l] ^ b as u64).wrapping_mul(FNV_PRIME);
        }
    }
    *out = h;
}

/// Shingles hashed in lockstep.
const LANES: usize = 8;

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

/// [`permute_min`] with a chosen kernel. Panics if the machine cannot run it.
pub fn permute_min_with(kernel: Kernel, xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    assert_eq!(a.len(), row.len());
    assert_eq!(b.len(), row.len());
    debug_assert!(xs.iter().all(|&x| x < P));
    match kernel {
        Kernel::Scalar => permute_min_scalar(xs, a, b, row),
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
        _ => permute_min_scalar(xs, a, b, row),
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

    /// FNV-1a 64 of 48 byte ranges at once: eight ranges a vector, six vectors interleaved so
    /// the multiplies' latency (15 cycles for `vpmullq`) overlaps: with four the loop waited on
    /// it, with six it is bound by the multiplies' issue (48 shingles: 5% faster than 32 in the
    /// `fnv1a` benchmark; 64 gained 4% more there but nothing end to end). Each step loads eight
    /// bytes of every range (one gather), then feeds them in one at a time; a lane whose range
    /// has ended is masked and keeps its value.
    ///
    /// # Safety
    /// AVX-512 F and DQ must be present, and `bytes[start[l] + 8i..][..8]` must be in bounds
    /// whenever `8i < len[l]` (checked in debug builds).
    #[target_feature(enable = "avx512f,avx512dq")]
    pub unsafe fn fnv_lanes(
        bytes: &[u8],
        start: &[u64; FNV_SIMD_LANES],
        len: &[u64; FNV_SIMD_LANES],
        out: &mut [u64; FNV_SIMD_LANES],
    ) {
        debug_assert!(
            (0..FNV_SIMD_LANES)
                .all(|l| (start[l] + len[l].next_multiple_of(8)) as usize <= bytes.len()),
            "a lane's 8-byte loads would pass the end of the batch"
        );
        let base = bytes.as_ptr();
        let prime = _mm512_set1_epi64(FNV_PRIME as i64);
        let ff = _mm512_set1_epi64(0xff);
        let eight = _mm512_set1_epi64(8);
        let mut h = [_mm512_set1_epi64(FNV_OFFSET as i64); GROUPS];
        let mut off = [_mm512_setzero_si512(); GROUPS];
        let mut lens = [_mm512_setzero_si512(); GROUPS];
        for g in 0..GROUPS {
            off[g] = _mm512_loadu_si512(start.as_ptr().add(8 * g) as *const __m512i);
            lens[g] = _mm512_loadu_si512(len.as_ptr().add(8 * g) as *const __m512i);
        }
        let longest = *len.iter().max().expect("lanes") as usize;
        let mut t = 0usize;
        while t < longest {
            let mut w = [_mm512_setzero_si512(); GROUPS];
            let mut live = [0u8; GROUPS];
            for g in 0..GROUPS {
                // Lanes with bytes left at this step; the others load nothing.
                live[g] = _mm512_cmpgt_epu64_mask(lens[g], _mm512_set1_epi64(t as i64));
                w[g] = _mm512_mask_i64gather_epi64::<1>(
                    _mm512_setzero_si512(),
                    live[g],
                    off[g],
                    base as *const i64,
                );
                off[g] = _mm512_add_epi64(off[g], eight);
            }
            for s in 0..8 {
                let at = _mm512_set1_epi64((t + s) as i64);
                for g in 0..GROUPS {
                    let k = _mm512_cmpgt_epu64_mask(lens[g], at);
                    // h ^ (w & 0xff) in one instruction (3.6% faster than `and` then `xor`).
                    let x = _mm512_ternarylogic_epi64::<0x78>(h[g], w[g], ff);
                    w[g] = _mm512_srli_epi64::<8>(w[g]);
                    h[g] = _mm512_mask_mullo_epi64(h[g], k, x, prime);
                }
            }
            t += 8;
        }
        for (g, v) in h.iter().enumerate() {
            _mm512_storeu_si512(out.as_mut_ptr().add(8 * g) as *mut __m512i, *v);
        }
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
}
