//! The AVX2 and AVX-512 permutation kernels (16 or 8 permutations a vector).

use std::arch::x86_64::*;

use super::fold_min;
use crate::hash::P;

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
unsafe fn load512<const G: usize>(a: &[u32], b: &[u32], row: &[u32], off: usize) -> Blocks512<G> {
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
unsafe fn group512<const G: usize>(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32], off: usize) {
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
unsafe fn group256<const G: usize>(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32], off: usize) {
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
