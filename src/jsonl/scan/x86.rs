//! The record scanner's AVX2 and AVX-512 stop finders and block unescapers.

use std::arch::x86_64::*;
use std::borrow::Cow;

/// [`super::string`] with [`Blocks`].
///
/// # Safety
/// AVX-512 F and BW must be present.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn string(
    line: &[u8],
    start: usize,
    keep: super::Keep,
) -> Option<(Option<std::borrow::Cow<'_, str>>, usize)> {
    super::string_with::<Blocks<true>>(line, start, keep)
}

/// [`super::string`] with [`Blocks`] on AVX2 (the CPUs without AVX-512).
///
/// # Safety
/// AVX2 must be present.
#[target_feature(enable = "avx2")]
pub unsafe fn string_avx2(
    line: &[u8],
    start: usize,
    keep: super::Keep,
) -> Option<(Option<std::borrow::Cow<'_, str>>, usize)> {
    super::string_with::<Blocks<false>>(line, start, keep)
}

/// [`super::string`] for a kept value, 64 bytes a step with every two-byte escape in the
/// step decoded at once: the escaped bytes found with [`super::escapes`], translated by
/// masked moves (`n` to a newline ...), and the escaping backslashes squeezed out of the
/// block by one byte compress (VBMI2) as it is stored. The stop scanner takes a stop at a
/// time (a copy and a branch per escape), which is what text with a newline every few
/// dozen bytes pays for. A `\u` or invalid escape hands the rest of the string to the
/// stop scanner, from the start of the step; a raw control byte or a line that ends
/// before the closing quote is `None` at once, as it is there.
///
/// # Safety
/// AVX-512 F, BW and VBMI2, POPCNT and BMI1 must be present.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2,popcnt,bmi1")]
pub unsafe fn string_unescape(line: &[u8], start: usize) -> Option<(Option<Cow<'_, str>>, usize)> {
    let n = line.len();
    let byte = |b: u8| _mm512_set1_epi8(b as i8);
    let mut at = start;
    // The value so far, once an escape was met (a string without one is borrowed).
    let mut out: Option<Vec<u8>> = None;
    // 0x80 once a byte of the content so far is not ASCII, else 0 (see `string_from`).
    let mut high = 0u64;
    loop {
        let take = (n - at).min(64);
        let live: u64 = if take == 64 { !0 } else { (1u64 << take) - 1 };
        // Masked lanes read as zero bytes: never a quote or backslash, and not counted
        // as control bytes below.
        let v = _mm512_maskz_loadu_epi8(live, line.as_ptr().add(at) as *const i8);
        let quote = _mm512_cmpeq_epi8_mask(v, byte(b'"'));
        let backslash = _mm512_cmpeq_epi8_mask(v, byte(b'\\'));
        let control = _mm512_cmplt_epu8_mask(v, byte(0x20)) & live;
        let (escaped, starters, close, end, part) = step(quote, backslash, control, take)?;
        let esc = escaped & part;
        let mut w = v;
        if esc != 0 {
            let is = |b: u8| _mm512_mask_cmpeq_epi8_mask(esc, v, byte(b));
            let (bs, f, nl, r, t) = (is(b'b'), is(b'f'), is(b'n'), is(b'r'), is(b't'));
            // `"`, `\` and `/` stand for themselves.
            let same = is(b'"') | is(b'\\') | is(b'/');
            if esc & !(bs | f | nl | r | t | same) != 0 {
                // `\u` (its four hex digits, surrogate pairs) or an invalid escape.
                #[cfg(test)]
                super::tests::HANDOVERS.with(|h| h.set(h.get() + 1));
                return super::string_from::<Blocks<true>>(
                    line,
                    start,
                    super::Keep::Value,
                    at,
                    out,
                    high,
                );
            }
            w = _mm512_mask_mov_epi8(w, bs, byte(0x08));
            w = _mm512_mask_mov_epi8(w, f, byte(0x0c));
            w = _mm512_mask_mov_epi8(w, nl, byte(b'\n'));
            w = _mm512_mask_mov_epi8(w, r, byte(b'\r'));
            w = _mm512_mask_mov_epi8(w, t, byte(b'\t'));
        }
        if _mm512_movepi8_mask(v) & part != 0 {
            high = 0x80;
        }
        let drop = starters & part;
        if drop != 0 && out.is_none() {
            out = Some(first_escape(line, start, at));
        }
        if let Some(o) = out.as_mut() {
            // Each store writes 64 bytes at the end of `o`, the kept ones first.
            o.reserve(64);
            let kept = part & !drop;
            let packed = _mm512_maskz_compress_epi8(kept, w);
            _mm512_storeu_si512(o.as_mut_ptr().add(o.len()) as *mut __m512i, packed);
            // SAFETY: the store wrote `kept.count_ones()` bytes (and junk past them)
            // into the reserved room.
            o.set_len(o.len() + kept.count_ones() as usize);
        }
        if close != 0 {
            let stop = at + end;
            // SAFETY: `high` saw every raw byte kept in `out`.
            return Some((Some(value(line, start, stop, out, high)?), stop + 1));
        }
        at += end;
    }
}

/// Where a block unescaper's step ends, from the masks of its `take` bytes (bit i: byte i;
/// all three only within `take`): the escaped bytes and the backslashes escaping them
/// ([`super::escapes`]), the closing quotes (quotes not escaped), the step's length and the
/// mask of its bytes. `None` when the string cannot be read: no closing quote before the
/// line ends (unterminated, or worse), or a raw control byte before the end.
#[inline(always)]
fn step(
    quote: u64,
    backslash: u64,
    control: u64,
    take: usize,
) -> Option<(u64, u64, u64, usize, u64)> {
    // The step's start is never inside an escape: a step ends at the closing quote, at the
    // end of the block, or before a backslash whose escaped byte is in the next block.
    let (escaped, starters) = super::escapes(backslash);
    let close = quote & !escaped;
    let end = if close != 0 {
        close.trailing_zeros() as usize
    } else if take < 64 {
        return None;
    } else {
        64 - (starters >> 63) as usize
    };
    let part = if end == 64 { !0 } else { (1u64 << end) - 1 };
    if control & part != 0 {
        return None;
    }
    Some((escaped, starters, close, end, part))
}

/// A block unescaper's owned value at its first escape: the raw bytes before it, with room
/// for the rest of the line, up to 64 KiB (as the stop scanner reserves), and a step more.
#[inline(always)]
fn first_escape(line: &[u8], start: usize, at: usize) -> Vec<u8> {
    let mut o = Vec::with_capacity((line.len() - start).min(64 << 10) + 64);
    o.extend_from_slice(&line[start..at]);
    o
}

/// The value of a string whose content is `line[start..stop]`, as a block unescaper ends
/// it: borrowed when no escape was kept, else `out`; `None` when it is not UTF-8.
///
/// # Safety
/// With `high == 0`, every byte of `out` is ASCII (raw bytes the scan saw below 0x80, and
/// decoded two-byte escapes).
#[inline(always)]
unsafe fn value(
    line: &[u8],
    start: usize,
    stop: usize,
    out: Option<Vec<u8>>,
    high: u64,
) -> Option<Cow<'_, str>> {
    Some(match out {
        None => Cow::Borrowed(super::utf8(&line[start..stop], high == 0)?),
        // Raw bytes and decoded escapes (all ASCII): UTF-8 whenever the raw bytes are,
        // checked as the stop scanner checks them.
        // SAFETY: the caller's promise.
        Some(o) if high == 0 => Cow::Owned(unsafe { String::from_utf8_unchecked(o) }),
        Some(o) => Cow::Owned(String::from_utf8(o).ok()?),
    })
}

/// What a two-byte escape's second byte stands for (0: not a two-byte escape, such as
/// `u`), for [`string_unescape_avx2`].
static UNESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t
};

/// [`string_unescape`] for CPUs with AVX2 but not AVX-512: the same 64-byte steps, each
/// loaded as two 32-byte halves by [`load64_avx2`], as the stop finder loads them. Without
/// masked moves, the escaped bytes of a step (about two in real text) are translated one by
/// one in a copy of the block on the stack, through a 256-entry table that also says which
/// are two-byte escapes; without a byte compress, the escaping backslashes are squeezed out
/// eight bytes a `pshufb` ([`crate::simd::x86::compress_store16`], the tokenizer's
/// packer). A `\u` or an invalid escape hands the rest of the string to the stop scanner
/// from the start of the step, a raw control byte or a line that ends before the closing
/// quote is `None`, as there.
///
/// # Safety
/// AVX2, POPCNT and BMI1 must be present.
#[target_feature(enable = "avx2,popcnt,bmi1")]
pub unsafe fn string_unescape_avx2(
    line: &[u8],
    start: usize,
) -> Option<(Option<Cow<'_, str>>, usize)> {
    let n = line.len();
    let mut at = start;
    // The value so far, once an escape was met (a string without one is borrowed).
    let mut out: Option<Vec<u8>> = None;
    // 0x80 once a byte of the content so far is not ASCII, else 0 (see `string_from`).
    let mut high = 0u64;
    let byte = |b: u8| _mm256_set1_epi8(b as i8);
    // The short last step's bytes (see `load64_avx2`), and the step's bytes with its escapes
    // translated; 32-byte aligned for the stores below.
    #[repr(align(32))]
    struct Block([u8; 64]);
    let mut block = Block([0; 64]);
    loop {
        let take = (n - at).min(64);
        let (v, live) = load64_avx2(line, at, &mut block.0);
        let quote = mask64(&v, |x| _mm256_cmpeq_epi8(x, byte(b'"'))) & live;
        let backslash = mask64(&v, |x| _mm256_cmpeq_epi8(x, byte(b'\\'))) & live;
        let control = mask64(&v, |x| control32(x)) & live;
        let (escaped, starters, close, end, part) = step(quote, backslash, control, take)?;
        let esc = escaped & part;
        // The step's bytes on the stack, with each escaped one translated, in one pass that
        // also checks that every escape is a two-byte one before anything is kept. That
        // copy is what is kept once a value is owned (an escape kept now or earlier: an
        // escaped byte has its backslash in the same step, so a first escape has `esc`).
        if esc != 0 || out.is_some() {
            _mm256_store_si256(block.0.as_mut_ptr() as *mut __m256i, v[0]);
            _mm256_store_si256(block.0.as_mut_ptr().add(32) as *mut __m256i, v[1]);
        }
        let mut e = esc;
        while e != 0 {
            let i = e.trailing_zeros() as usize;
            let t = UNESCAPE[block.0[i] as usize];
            block.0[i] = t;
            if t == 0 {
                // `\u` (its four hex digits, surrogate pairs) or an invalid escape.
                #[cfg(test)]
                super::tests::HANDOVERS.with(|h| h.set(h.get() + 1));
                return super::string_from::<Blocks<false>>(
                    line,
                    start,
                    super::Keep::Value,
                    at,
                    out,
                    high,
                );
            }
            e &= e - 1;
        }
        if mask64(&v, |x| x) & part != 0 {
            high = 0x80;
        }
        let drop = starters & part;
        if drop != 0 && out.is_none() {
            out = Some(first_escape(line, start, at));
        }
        if let Some(o) = out.as_mut() {
            // The kept bytes of each 16 of the copy, by `compress_store16`. Its 8-byte
            // stores write junk past the kept bytes, but the store for bytes `8g ..` of the
            // step starts at most `8g` bytes in, so every store ends within 64 bytes.
            o.reserve(64);
            let kept = part & !drop;
            let dst = o.as_mut_ptr().add(o.len());
            let mut len = 0;
            for q in 0..4 {
                let bytes = _mm_load_si128(block.0.as_ptr().add(16 * q) as *const __m128i);
                len += crate::simd::x86::compress_store16(
                    bytes,
                    (kept >> (16 * q)) as u32 & 0xffff,
                    dst.add(len),
                );
            }
            debug_assert!(len == kept.count_ones() as usize && o.len() + 64 <= o.capacity());
            // SAFETY: the stores wrote `len` kept bytes (and junk past them) within the 64
            // bytes reserved.
            o.set_len(o.len() + len);
        }
        if close != 0 {
            let stop = at + end;
            // SAFETY: `high` saw every raw byte kept in `out`.
            return Some((Some(value(line, start, stop, out, high)?), stop + 1));
        }
        at += end;
    }
}

/// 64 bytes at a time, keeping the last block's stops: text with an escape every few
/// dozen bytes finds the next one without loading again.
///
/// The stops of a 64-byte block at a time: found by [`specials64`] (AVX-512) when `WIDE`,
/// else by [`specials64_avx2`].
#[derive(Default)]
pub struct Blocks<const WIDE: bool> {
    /// Where the last block starts, and its stops (bit i: byte `from + i`).
    from: usize,
    stops: u64,
    loaded: bool,
}

impl<const WIDE: bool> super::StopFinder for Blocks<WIDE> {
    /// Only reached through [`string`] or [`string_avx2`] (`target_feature` functions the
    /// caller checked for): `Blocks` is private to this module and built nowhere else.
    #[inline(always)]
    fn next_stop(&mut self, line: &[u8], at: usize, high: &mut u64) -> usize {
        if self.loaded && at < self.from + 64 {
            let rest = self.stops & (!0u64 << (at - self.from));
            if rest != 0 {
                return self.from + rest.trailing_zeros() as usize;
            }
            if self.from + 64 >= line.len() {
                return line.len();
            }
            self.from += 64;
        } else {
            self.from = at;
        }
        loop {
            // SAFETY: only called from `string` (AVX-512 F+BW present) with `WIDE` and
            // `string_avx2` (AVX2 present) without; from <= len.
            let (stops, hi) = unsafe {
                if WIDE {
                    specials64(line, self.from)
                } else {
                    specials64_avx2(line, self.from)
                }
            };
            self.loaded = true;
            self.stops = stops;
            *high |= hi;
            if stops != 0 {
                return self.from + stops.trailing_zeros() as usize;
            }
            if self.from + 64 >= line.len() {
                return line.len();
            }
            self.from += 64;
        }
    }
}

/// For the (up to) 64 bytes of `line` from `at`: a mask of those that are `"`, `\` or
/// below 0x20 (bit i for byte at + i), and the high bits of all of them or'ed (0x80 when
/// any is not ASCII). Past the end nothing is read: the load is masked, and masked bytes
/// neither fault nor count.
///
/// # Safety
/// AVX-512 F and BW must be present; `at <= line.len()`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub unsafe fn specials64(line: &[u8], at: usize) -> (u64, u64) {
    debug_assert!(at <= line.len());
    let n = (line.len() - at).min(64);
    let live: __mmask64 = if n == 64 { !0 } else { (1u64 << n) - 1 };
    let v = _mm512_maskz_loadu_epi8(live, line.as_ptr().add(at) as *const i8);
    let quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
    let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
    let control = _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20));
    let high = if _mm512_movepi8_mask(v) != 0 { 0x80 } else { 0 };
    ((quote | backslash | control) & live, high)
}

/// Up to 64 bytes of `line` from `at` as two 32-byte halves, and the mask of those that are
/// the line's (bit i: byte `at + i`). Near the end of the line the bytes left are copied
/// into `tail`, zeroed first, so nothing past the end is read: the missing bytes read as
/// zeros (control bytes, never a quote or backslash), which the callers mask off.
///
/// # Safety
/// AVX2 must be present; `at <= line.len()`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load64_avx2(line: &[u8], at: usize, tail: &mut [u8; 64]) -> ([__m256i; 2], u64) {
    debug_assert!(at <= line.len());
    let n = (line.len() - at).min(64);
    let p = if n == 64 {
        line.as_ptr().add(at)
    } else {
        *tail = [0; 64];
        tail[..n].copy_from_slice(&line[at..]);
        tail.as_ptr()
    };
    let live = if n == 64 { !0 } else { (1u64 << n) - 1 };
    (
        [
            _mm256_loadu_si256(p as *const __m256i),
            _mm256_loadu_si256(p.add(32) as *const __m256i),
        ],
        live,
    )
}

/// The 64-bit mask of the bytes of the two halves `v` that `f` sets to 0xff (bit i: byte i).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn mask64(v: &[__m256i; 2], f: impl Fn(__m256i) -> __m256i) -> u64 {
    _mm256_movemask_epi8(f(v[0])) as u32 as u64
        | (_mm256_movemask_epi8(f(v[1])) as u32 as u64) << 32
}

/// 0xff in each byte of `x` below 0x20 (unsigned: `min(x, 0x1f) == x`).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn control32(x: __m256i) -> __m256i {
    _mm256_cmpeq_epi8(_mm256_min_epu8(x, _mm256_set1_epi8(0x1f)), x)
}

/// [`specials64`] with AVX2: two 32-byte halves from [`load64_avx2`].
///
/// # Safety
/// AVX2 must be present; `at <= line.len()`.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn specials64_avx2(line: &[u8], at: usize) -> (u64, u64) {
    let mut tail = [0u8; 64];
    let (v, live) = load64_avx2(line, at, &mut tail);
    let any = mask64(&v, |x| {
        let quote = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'"' as i8));
        let backslash = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'\\' as i8));
        _mm256_or_si256(quote, _mm256_or_si256(backslash, control32(x)))
    });
    let high = if mask64(&v, |x| x) != 0 { 0x80 } else { 0 };
    (any & live, high)
}
