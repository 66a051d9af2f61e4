//! The tokenizer's AVX2 and AVX-512 packers of pure-ASCII runs.

use std::arch::x86_64::*;

use crate::simd::x86::compress_store16;

/// AVX-512 F + BW (byte compares) + VBMI2 (byte compress), and the bit instructions the
/// kernel enables (every CPU with VBMI2 has them, but the kernel's contract is checked).
pub fn available() -> bool {
    crate::simd::cpu().avx512_vbmi2
}

/// [`super::ascii_run_scalar`] 32 bytes a step, for CPUs with AVX2 but not AVX-512: the same
/// classification as [`ascii_run_avx512`] (byte compares into a mask `M` of word bytes, keep
/// `M | M << 1`); AVX2 has no byte compress, so each 8 bytes are compressed by a `pshufb`
/// whose control is looked up by their 8 mask bits, two groups of 8 a shuffle, each stored
/// (8 bytes) at the cursor. Word starts are few (typically one per 7 bytes of text, and
/// never two in a row: at most `n / 2 + 1`, which is what `starts` reserves): each is placed
/// by a popcount of the kept bits below it. No `pext`: it is microcoded on AMD before Zen 3.
#[target_feature(enable = "avx2,popcnt,bmi1")]
pub unsafe fn ascii_run_avx2(
    bytes: &[u8],
    out: &mut Vec<u8>,
    starts: &mut Vec<u32>,
    prev_word: &mut bool,
) {
    let n = bytes.len();
    // Each 8-byte store may write up to 8 bytes past the cursor.
    out.reserve(n + 8);
    starts.reserve(n / 2 + 1);
    let base = out.len();
    let mut len = base;
    let mut ns = starts.len();
    let dst = out.as_mut_ptr();
    let sdst = starts.as_mut_ptr();
    let mut carry = *prev_word as u64;
    let a = _mm256_set1_epi8(b'a' as i8);
    let zero = _mm256_set1_epi8(b'0' as i8);
    let under = _mm256_set1_epi8(b'_' as i8);
    let bit5 = _mm256_set1_epi8(0x20);
    let space = _mm256_set1_epi8(b' ' as i8);
    let n25 = _mm256_set1_epi8(25);
    let n9 = _mm256_set1_epi8(9);
    let mut i = 0;
    while i < n {
        let take = (n - i).min(32);
        let lane: u64 = (1u64 << take) - 1;
        let v = if take == 32 {
            _mm256_loadu_si256(bytes.as_ptr().add(i) as *const __m256i)
        } else {
            // The last, short step: missing lanes read as separators (zero bytes).
            let mut tail = [0u8; 32];
            tail[..take].copy_from_slice(&bytes[i..]);
            _mm256_loadu_si256(tail.as_ptr() as *const __m256i)
        };
        let lower = _mm256_or_si256(v, bit5);
        // x <= y unsigned is min(x, y) == x.
        let la = _mm256_sub_epi8(lower, a);
        let alpha = _mm256_cmpeq_epi8(_mm256_min_epu8(la, n25), la);
        let d = _mm256_sub_epi8(v, zero);
        let digit = _mm256_cmpeq_epi8(_mm256_min_epu8(d, n9), d);
        let us = _mm256_cmpeq_epi8(v, under);
        let word = _mm256_or_si256(alpha, _mm256_or_si256(digit, us));
        let m = _mm256_movemask_epi8(word) as u32 as u64 & lane;
        let shifted = (m << 1) | carry;
        let keep = (m | shifted) & lane;
        // Letters lower-cased, digits and '_' as they are, separators a space.
        let word_bytes = _mm256_blendv_epi8(v, lower, alpha);
        let packed = _mm256_blendv_epi8(space, word_bytes, word);
        let before = len;
        len += compress_store16(_mm256_castsi256_si128(packed), keep as u32, dst.add(len));
        len += compress_store16(
            _mm256_extracti128_si256::<1>(packed),
            (keep >> 16) as u32,
            dst.add(len),
        );
        // Word starts: word bytes whose predecessor is not one; each lands after the kept
        // bytes before it.
        let mut st = m & !shifted;
        while st != 0 {
            let below = (st & st.wrapping_neg()) - 1;
            sdst.add(ns)
                .write((before + (keep & below).count_ones() as usize) as u32);
            ns += 1;
            st &= st - 1;
        }
        carry = (m >> (take - 1)) & 1;
        i += take;
    }
    // The reservations held (a broken bound would have written past them: caught here in
    // tests, not silently).
    debug_assert!(len + 8 <= out.capacity() && ns <= starts.capacity());
    // SAFETY: `len - base` bytes and `ns` starts were written, within the reservations
    // (starts are at least two bytes apart in the input, so at most n/2 + 1 of them).
    out.set_len(len);
    starts.set_len(ns);
    *prev_word = carry == 1;
}

/// [`super::ascii_run_scalar`], 64 bytes a step: classify with byte compares into a mask
/// `M` of word bytes; keep every word byte and the first separator after a word
/// (`M | M << 1`), turned into a space; compress the kept bytes together (VBMI2); and
/// record the word starts at their compressed positions, all of a step's at once (their
/// mask moved to compressed positions by `pext`, its bits' indices compressed out of
/// `0..64` and widened to `u32`: a loop over the starts took a large share of this function's
/// time, see docs/BENCHMARKS.md).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt,bmi1,bmi2")]
pub unsafe fn ascii_run_avx512(
    bytes: &[u8],
    out: &mut Vec<u8>,
    starts: &mut Vec<u32>,
    prev_word: &mut bool,
) {
    let n = bytes.len();
    // Each 64-byte store may write up to 64 bytes past the cursor.
    out.reserve(n + 64);
    // A step with word starts stores 16 or 32 of them, up to 32 slots past the cursor.
    starts.reserve(n / 2 + 1 + 32);
    let base = out.len();
    let mut len = base;
    let mut ns = starts.len();
    let dst = out.as_mut_ptr();
    let sdst = starts.as_mut_ptr();
    let mut carry = *prev_word as u64;
    let a = _mm512_set1_epi8(b'a' as i8);
    let zero = _mm512_set1_epi8(b'0' as i8);
    let under = _mm512_set1_epi8(b'_' as i8);
    let bit5 = _mm512_set1_epi8(0x20);
    let space = _mm512_set1_epi8(b' ' as i8);
    let n25 = _mm512_set1_epi8(25);
    let n9 = _mm512_set1_epi8(9);
    let iota = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
        40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
        17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
    );
    let mut i = 0;
    while i < n {
        let take = (n - i).min(64);
        let lane: u64 = if take == 64 { !0 } else { (1u64 << take) - 1 };
        // Missing lanes read as separators (zero bytes).
        let v = _mm512_maskz_loadu_epi8(lane, bytes.as_ptr().add(i) as *const i8);
        let lower = _mm512_or_si512(v, bit5);
        let alpha = _mm512_cmple_epu8_mask(_mm512_sub_epi8(lower, a), n25);
        let digit = _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, zero), n9);
        let us = _mm512_cmpeq_epi8_mask(v, under);
        let m = (alpha | digit | us) & lane;
        let shifted = (m << 1) | carry;
        let keep = (m | shifted) & lane;
        // Letters lower-cased, digits and '_' as they are, separators a space.
        let word_bytes = _mm512_mask_blend_epi8(alpha, v, lower);
        let packed = _mm512_mask_blend_epi8(m, space, word_bytes);
        let comp = _mm512_maskz_compress_epi8(keep, packed);
        _mm512_storeu_si512(dst.add(len) as *mut __m512i, comp);
        // Word starts: word bytes whose predecessor is not one (all kept), at their
        // compressed positions. They are at least two apart there, so at most 32.
        let st = _pext_u64(m & !shifted, keep);
        if st != 0 {
            let at = _mm512_set1_epi32(len as i32);
            let idx = _mm512_maskz_compress_epi8(st, iota);
            let first = _mm512_cvtepu8_epi32(_mm512_castsi512_si128(idx));
            _mm512_storeu_si512(sdst.add(ns) as *mut __m512i, _mm512_add_epi32(first, at));
            let count = st.count_ones() as usize;
            if count > 16 {
                let second = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<1>(idx));
                _mm512_storeu_si512(
                    sdst.add(ns + 16) as *mut __m512i,
                    _mm512_add_epi32(second, at),
                );
            }
            ns += count;
        }
        len += keep.count_ones() as usize;
        carry = (m >> (take - 1)) & 1;
        i += take;
    }
    // SAFETY: `len - base` bytes and `ns` starts were written, within the reservations.
    out.set_len(len);
    starts.set_len(ns);
    *prev_word = carry == 1;
}
