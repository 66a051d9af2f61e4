//! The AVX2 and AVX-512 FNV-1a lane hashers, and the vector reduction mod P.

use std::arch::x86_64::*;
use std::sync::OnceLock;

use crate::hash::{FNV_OFFSET, FNV_PRIME, P};

/// Shingles hashed at once by [`fnv_lanes`]: six vectors of eight.
pub const FNV_SIMD_LANES: usize = super::HASH_BLOCK;
const GROUPS: usize = FNV_SIMD_LANES / 8;

/// AVX-512 F + DQ (64-bit multiply), unless `NEARDUP_KERNEL=scalar`.
pub fn fnv_available() -> bool {
    crate::simd::cpu().avx512_dq
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
        } else if crate::simd::cpu().avx2 {
            Some(fnv_lanes_avx2 as FnvLanes)
        } else {
            None
        }
    })
}

/// [`fnv_lanes`] for CPUs with AVX2 but not AVX-512: four ranges a vector, in passes of
/// [`AVX2_GROUPS`] vectors (AVX2 has 16 registers; a group keeps its hash and its current
/// 8-byte word in two). Each word is four scalar loads put together: on Zen 3 that hashes
/// faster than `vpgatherqq` (docs/BENCHMARKS.md). AVX2 has no 64-bit multiply, but FNV's
/// prime is `2^40 + 0x1b3`, so
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
    // stores (`vpmaskmovq`), which are slow on AMD (docs/BENCHMARKS.md).
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
/// step is a multiply and three dependent single-cycle instructions) overlap. On Zen 3 four
/// are faster than six (which spill registers) or two (docs/BENCHMARKS.md).
const AVX2_GROUPS: usize = 4;

// A block is a whole number of passes.
const _: () = assert!(FNV_SIMD_LANES.is_multiple_of(4 * AVX2_GROUPS));

/// One pass of [`fnv_lanes_avx2`]: lanes `0 .. 4 * AVX2_GROUPS` of `offs`, `lens` and
/// `out`; lanes whose bit is set in `refused` are not stored.
#[target_feature(enable = "avx2")]
#[inline]
#[allow(clippy::needless_range_loop)] // one step index into every group: the lockstep
unsafe fn fnv_pass_avx2(bytes: &[u8], offs: &[i64], lens: &[i64], out: &mut [u64], refused: u64) {
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
/// it, with six it is bound by the multiplies' issue (48 shingles beat 32 in the `fnv1a`
/// benchmark; 64 gained a little more there but nothing end to end: docs/BENCHMARKS.md).
/// Each step loads eight bytes of every range (one gather), then feeds them in one at a
/// time; a lane whose range has ended is masked and keeps its value.
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
                // h ^ (w & 0xff) in one instruction, faster than `and` then `xor`
                // (docs/BENCHMARKS.md).
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
