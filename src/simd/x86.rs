//! x86 helpers shared by the SIMD paths of more than one module.

use std::arch::x86_64::*;

/// For each 8-bit mask, the indices of its set bits packed to the front (the rest 0x80, which
/// `pshufb` turns into zeros): the control that compresses eight bytes to the kept ones.
static COMPRESS8: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut m = 0;
    while m < 256 {
        let mut v = 0x8080_8080_8080_8080u64;
        let (mut bit, mut at) = (0, 0);
        while bit < 8 {
            if m & (1 << bit) != 0 {
                v &= !(0xffu64 << (8 * at));
                v |= (bit as u64) << (8 * at);
                at += 1;
            }
            bit += 1;
        }
        t[m] = v;
        m += 1;
    }
    t
};

/// Store the bytes of `v` whose bits are set in the low 16 of `keep`, in order, at `dst`;
/// returns how many. Each 8 bytes are compressed by one `pshufb` whose control is looked
/// up by their 8 bits, and stored whole, so up to 8 bytes past the kept ones are written
/// (junk): `dst` must have room for the kept bytes and 8 more.
///
/// # Safety
/// AVX2 and POPCNT must be present; `dst` as above.
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub(crate) unsafe fn compress_store16(v: __m128i, keep: u32, dst: *mut u8) -> usize {
    let k0 = keep & 0xff;
    let k1 = (keep >> 8) & 0xff;
    // The second group's indices are 8 on (0x80 stays a zeroing index).
    let ctrl = _mm_or_si128(
        _mm_set_epi64x(COMPRESS8[k1 as usize] as i64, COMPRESS8[k0 as usize] as i64),
        _mm_set_epi64x(0x0808_0808_0808_0808, 0),
    );
    let c = _mm_shuffle_epi8(v, ctrl);
    _mm_storel_epi64(dst as *mut __m128i, c);
    let first = k0.count_ones() as usize;
    _mm_storel_epi64(dst.add(first) as *mut __m128i, _mm_unpackhi_epi64(c, c));
    first + k1.count_ones() as usize
}
