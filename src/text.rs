//! Words, shingles and exact Jaccard (SPEC §1), and the tokenizer that packs documents into the
//! byte layout every engine reads.
//!
//! The packed layout is the one idea everything else leans on: a document's lower-cased words are
//! written one after another, **each followed by exactly one ASCII space**. Shingle `j` (words
//! `j .. j+k`, joined by one space) is then the contiguous byte range
//! `word_start[j] .. word_start[j+k] - 1`, so no shingle string is ever built, on the CPU or the
//! GPU, and the bytes hashed are exactly the UTF-8 of the SPEC's shingle.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::OnceLock;

/// Is `c` a word character: `_`, a letter (`L*`) or a number (`N*`)? This is the class
/// `[\p{L}\p{N}_]` of the regex crate, taken from regex-syntax's own Unicode tables so that the
/// tokenizer and its regex oracle can never disagree on a code point.
#[inline]
pub fn is_word_char(c: char) -> bool {
    let u = c as u32;
    if u < 0x80 {
        let b = u as u8;
        return b.is_ascii_alphanumeric() || b == b'_';
    }
    word_class().contains(u)
}

/// Word-character membership: a bitmap for the Basic Multilingual Plane (8 KiB, one lookup) and
/// sorted ranges above it (binary search; astral letters are rare in text).
struct WordClass {
    bmp: Vec<u64>,
    astral: Vec<(u32, u32)>,
}

impl WordClass {
    #[inline]
    fn contains(&self, u: u32) -> bool {
        if u < 0x10000 {
            return self.bmp[(u >> 6) as usize] >> (u & 63) & 1 == 1;
        }
        // Ranges are sorted and disjoint: the last range starting at or below u decides.
        let i = self.astral.partition_point(|&(lo, _)| lo <= u);
        i > 0 && u <= self.astral[i - 1].1
    }
}

fn word_class() -> &'static WordClass {
    static CLASS: OnceLock<WordClass> = OnceLock::new();
    CLASS.get_or_init(|| {
        use regex_syntax::hir::{Class, HirKind};
        let hir = regex_syntax::Parser::new()
            .parse(r"[\p{L}\p{N}_]")
            .expect("the word class is a valid regex");
        let ranges: Vec<(u32, u32)> = match hir.kind() {
            HirKind::Class(Class::Unicode(cls)) => cls
                .ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect(),
            other => unreachable!("[\\p{{L}}\\p{{N}}_] parsed as {other:?}"),
        };
        let mut bmp = vec![0u64; 0x10000 / 64];
        let mut astral = Vec::new();
        for (lo, hi) in ranges {
            for u in lo..=hi.min(0xFFFF) {
                bmp[(u >> 6) as usize] |= 1 << (u & 63);
            }
            if hi >= 0x10000 {
                astral.push((lo.max(0x10000), hi));
            }
        }
        WordClass { bmp, astral }
    })
}

/// Append the SPEC words of `text` to `out`, lower-cased, each followed by one space, and the
/// byte offset of each word (relative to the start of `out`) to `starts`. Returns the number of
/// words appended.
///
/// ASCII runs (most of any web corpus) take a branch-free byte loop. Other characters are
/// lower-cased one at a time with `char::to_lowercase`, which is exactly what
/// `str::to_lowercase` does for every character but `Σ`, whose lower case depends on its
/// neighbours (final sigma); a text containing `Σ` goes through `str::to_lowercase` whole.
pub fn push_words(text: &str, out: &mut Vec<u8>, starts: &mut Vec<u32>) -> usize {
    let before = starts.len();
    let bytes = text.as_bytes();
    let mut prev_word = false;
    if bytes.is_ascii() {
        ascii_run(bytes, out, starts, &mut prev_word);
    } else if text.contains('Σ') {
        let lower = text.to_lowercase();
        for c in lower.chars() {
            push_char(c, out, starts, &mut prev_word);
        }
    } else {
        let mut i = 0;
        while i < bytes.len() {
            let run = ascii_prefix(&bytes[i..]);
            ascii_run(&bytes[i..i + run], out, starts, &mut prev_word);
            i += run;
            if i < bytes.len() {
                // A non-ASCII character starts here (`i` is on a char boundary: ASCII bytes
                // never occur inside a multi-byte sequence).
                let c = text[i..].chars().next().expect("a char starts here");
                for lc in c.to_lowercase() {
                    push_char(lc, out, starts, &mut prev_word);
                }
                i += c.len_utf8();
            }
        }
    }
    if prev_word {
        out.push(b' ');
    }
    starts.len() - before
}

/// How many bytes `bytes` starts with below 0x80: eight at a time (a byte loop was 1.3% of a
/// `signatures` run on text that is mostly ASCII with a few other characters).
#[inline]
fn ascii_prefix(bytes: &[u8]) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let high = u64::from_le_bytes(w.try_into().expect("8 bytes")) & HIGH;
        if high != 0 {
            return at + (high.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + words
        .remainder()
        .iter()
        .position(|&b| b >= 0x80)
        .unwrap_or(words.remainder().len())
}

/// One (already lower-cased) character into the packed layout.
#[inline]
fn push_char(c: char, out: &mut Vec<u8>, starts: &mut Vec<u32>, prev_word: &mut bool) {
    if c.is_ascii() {
        ascii_run(&[c as u8], out, starts, prev_word);
    } else if is_word_char(c) {
        if !*prev_word {
            starts.push(out.len() as u32);
        }
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        *prev_word = true;
    } else {
        if *prev_word {
            out.push(b' ');
        }
        *prev_word = false;
    }
}

/// ASCII word chars, as a 256-entry table: lower-cased byte, or 0 for a separator.
static ASCII_LOWER_WORD: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        t[i] = if b.is_ascii_uppercase() {
            b + 32
        } else if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' {
            b
        } else {
            0
        };
        i += 1;
    }
    t
};

/// Pack a run of ASCII bytes (see [`ascii_run_scalar`]); 64 bytes at a time with AVX-512 where
/// the CPU has it, else 32 at a time with AVX2.
#[inline]
fn ascii_run(bytes: &[u8], out: &mut Vec<u8>, starts: &mut Vec<u32>, prev_word: &mut bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if bytes.len() >= 16 {
            if simd::available() {
                // SAFETY: the CPU has AVX-512F, BW and VBMI2 (checked by `available`).
                unsafe { simd::ascii_run_avx512(bytes, out, starts, prev_word) };
                return;
            }
            if crate::kernel::avx2_available() {
                // SAFETY: the CPU has AVX2, POPCNT and BMI1 (checked by `avx2_available`).
                unsafe { simd::ascii_run_avx2(bytes, out, starts, prev_word) };
                return;
            }
        }
    }
    ascii_run_scalar(bytes, out, starts, prev_word)
}

/// Pack a run of ASCII bytes without a branch per byte: every byte is written at the output
/// cursor (its lower case, or a space for a separator), and the cursor advances past a word
/// byte and past the first separator after a word, so runs of separators collapse into the one
/// space that ends the word. A word start is recorded the same way. `prev_word` carries the
/// state across runs; the caller adds the space after a word that ends the text.
pub(crate) fn ascii_run_scalar(
    bytes: &[u8],
    out: &mut Vec<u8>,
    starts: &mut Vec<u32>,
    prev_word: &mut bool,
) {
    let n = bytes.len();
    let base = out.len();
    // At most one byte out per byte in; at most one word start per two bytes (plus one).
    out.reserve(n);
    starts.reserve(n / 2 + 1);
    let first_start = starts.len();
    let dst = &mut out.spare_capacity_mut()[..n];
    let sdst = &mut starts.spare_capacity_mut()[..n / 2 + 1];
    let (mut len, mut ns, mut prev) = (0usize, 0usize, *prev_word as usize);
    for &b in bytes {
        let l = ASCII_LOWER_WORD[b as usize];
        let w = (l != 0) as usize;
        // l for a word byte, b' ' (0x20) for a separator.
        dst[len.min(n - 1)].write(l | (((w ^ 1) as u8) << 5));
        sdst[ns.min(n / 2)].write((base + len) as u32);
        ns += w & (prev ^ 1);
        len += w | prev;
        prev = w;
    }
    // SAFETY: the first `len` bytes of the spare capacity and the first `ns` word starts were
    // written above (the cursors only advance past written slots, and stay within the reserved
    // lengths: len <= n, and ns <= n/2 + 1 since word starts are separated by a separator).
    unsafe {
        out.set_len(base + len);
        starts.set_len(first_start + ns);
    }
    *prev_word = prev == 1;
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod simd {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// AVX-512 F + BW (byte compares) + VBMI2 (byte compress), and the bit instructions the
    /// kernel enables (every CPU with VBMI2 has them, but the kernel's contract is checked).
    pub fn available() -> bool {
        static OK: OnceLock<bool> = OnceLock::new();
        *OK.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vbmi2")
                && std::arch::is_x86_feature_detected!("popcnt")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2")
                && std::env::var("NEARDUP_KERNEL").map_or(true, |k| k != "scalar")
        })
    }

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
    /// `0..64` and widened to `u32`: a loop over the starts was 40% of this function).
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
            63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42,
            41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
            19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
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
}

/// One document's words in the packed layout (see the module docs), with a final sentinel in
/// `starts` so that word `j` is always `bytes[starts[j] .. starts[j+1] - 1]`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Words {
    pub bytes: Vec<u8>,
    pub starts: Vec<u32>,
}

impl Words {
    /// Tokenize `text`.
    pub fn new(text: &str) -> Self {
        let mut w = Words::default();
        w.reset(text);
        w
    }

    /// Tokenize `text` into this buffer, reusing its allocations.
    pub fn reset(&mut self, text: &str) {
        self.bytes.clear();
        self.starts.clear();
        push_words(text, &mut self.bytes, &mut self.starts);
        self.starts.push(self.bytes.len() as u32);
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Word `j`.
    pub fn word(&self, j: usize) -> &[u8] {
        &self.bytes[self.starts[j] as usize..self.starts[j + 1] as usize - 1]
    }

    /// The words `from .. to` joined by one space (`to` exclusive, `from < to`).
    pub fn span(&self, from: usize, to: usize) -> &[u8] {
        &self.bytes[self.starts[from] as usize..self.starts[to] as usize - 1]
    }

    /// The SPEC shingles as byte ranges (duplicates included, in text order).
    pub fn shingle_slices(&self, k: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let w = self.len();
        let (count, width) = shingle_layout(w, k);
        (0..count).map(move |j| self.span(j, j + width))
    }

    /// The word `n`-grams (windows of exactly `n` words; none when there are fewer).
    pub fn ngram_slices(&self, n: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let w = self.len();
        let count = if n == 0 || w < n { 0 } else { w - n + 1 };
        (0..count).map(move |j| self.span(j, j + n))
    }
}

/// How many shingles a document of `words` words has, and how many words each spans: none for
/// no words, one of all words for `1 <= words < k`, else `words - k + 1` of `k` words.
#[inline]
pub fn shingle_layout(words: usize, k: usize) -> (usize, usize) {
    if words == 0 {
        (0, 0)
    } else if words < k {
        (1, words)
    } else {
        (words - k + 1, k)
    }
}

/// SPEC `words(text)`: lower-case with Unicode's full default lower-casing, then the maximal
/// runs of `[\p{L}\p{N}_]`.
pub fn words(text: &str) -> Vec<String> {
    let w = Words::new(text);
    (0..w.len())
        .map(|j| String::from_utf8(w.word(j).to_vec()).expect("words are UTF-8"))
        .collect()
}

/// SPEC `shingles(text, k)`: the set of `k`-word windows joined by one space; one shingle of all
/// words when there are fewer than `k`; none when there are no words.
pub fn shingles(text: &str, k: usize) -> HashSet<String> {
    let w = Words::new(text);
    w.shingle_slices(k)
        .map(|s| String::from_utf8(s.to_vec()).expect("shingles are UTF-8"))
        .collect()
}

/// SPEC `jaccard(A, B) = |A ∩ B| / |A ∪ B|`, `0.0` when both are empty.
pub fn jaccard<T: Eq + Hash>(a: &HashSet<T>, b: &HashSet<T>) -> f64 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let inter = small.iter().filter(|x| large.contains(x)).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// The set a document's exact Jaccard is computed over (SPEC §3): each shingle's full 64-bit
/// FNV-1a value, sorted and without repeats.
pub fn shingle_fnv_set(words: &Words, k: usize) -> Vec<u64> {
    fnv_set(&words.bytes, &words.starts, k)
}

/// [`shingle_fnv_set`] of one word list laid out as [`Words`] and
/// [`crate::batch::PackedBatch`] hold it (`starts` ending with the end): the batch's documents
/// are cut out of it without copying.
pub fn fnv_set(bytes: &[u8], starts: &[u32], k: usize) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::with_capacity(starts.len());
    crate::kernel::fnv64_shingles(bytes, starts, k, &mut v);
    v.sort_unstable();
    v.dedup();
    v
}

/// Jaccard of two sorted, repeat-free slices (a merge, no hashing); `0.0` when both are empty.
pub fn jaccard_sorted<T: Ord>(a: &[T], b: &[T]) -> f64 {
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_words_vector() {
        assert_eq!(
            words("Héllo, WORLD! naïve_café 42 — ÉTÉ ΣΊΣΥΦΟΣ"),
            ["héllo", "world", "naïve_café", "42", "été", "σίσυφος"]
        );
    }

    #[test]
    fn packed_layout_puts_one_space_after_every_word() {
        let w = Words::new("  The cat, SAT!  ");
        assert_eq!(w.bytes, b"the cat sat ");
        assert_eq!(w.starts, [0, 4, 8, 12]);
        assert_eq!(w.span(0, 3), b"the cat sat");
        assert_eq!(w.word(2), b"sat");
    }

    #[test]
    fn shingle_layout_edges() {
        assert_eq!(shingle_layout(0, 5), (0, 0));
        assert_eq!(shingle_layout(1, 5), (1, 1));
        assert_eq!(shingle_layout(4, 5), (1, 4));
        assert_eq!(shingle_layout(5, 5), (1, 5));
        assert_eq!(shingle_layout(6, 5), (2, 5));
    }

    #[test]
    fn combining_marks_separate_words_and_dotted_capital_i_splits() {
        // U+0301 COMBINING ACUTE is M*, so it separates; İ lower-cases to i + U+0307.
        assert_eq!(words("cafe\u{301}s"), ["cafe", "s"]);
        assert_eq!(words("İstanbul"), ["i", "stanbul"]);
    }

    #[test]
    fn ascii_prefix_stops_at_the_first_other_byte_at_every_offset() {
        for len in 0..40 {
            let ascii = "aB c".repeat(10)[..len].to_string();
            assert_eq!(ascii_prefix(ascii.as_bytes()), len);
            for tail in ["é", "\u{80}", "中x", "😀 y"] {
                let text = format!("{ascii}{tail}{ascii}");
                assert_eq!(ascii_prefix(text.as_bytes()), len, "{text:?}");
                // The runs around the character are packed as the whole-text reading packs
                // them.
                let want: Vec<String> = text
                    .to_lowercase()
                    .split(|c: char| !is_word_char(c))
                    .filter(|w| !w.is_empty())
                    .map(String::from)
                    .collect();
                assert_eq!(words(&text), want, "{text:?}");
            }
        }
    }

    #[test]
    fn jaccard_sorted_matches_sets() {
        assert_eq!(jaccard_sorted::<u64>(&[], &[]), 0.0);
        assert_eq!(jaccard_sorted(&[1u64, 2, 3], &[2, 3, 4]), 0.5);
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod simd_tests {
    use super::*;

    #[test]
    fn avx512_ascii_run_equals_scalar() {
        if !simd::available() {
            crate::testsupport::untested("the AVX-512 packer", "NEARDUP_REQUIRE_AVX512_VBMI2");
            return;
        }
        packer_equals_scalar(|t, o, s, p| unsafe { simd::ascii_run_avx512(t, o, s, p) });
    }

    #[test]
    fn avx2_ascii_run_equals_scalar() {
        if !crate::kernel::avx2_available() {
            crate::testsupport::untested("the AVX2 packer", "NEARDUP_REQUIRE_SIMD");
            return;
        }
        packer_equals_scalar(|t, o, s, p| unsafe { simd::ascii_run_avx2(t, o, s, p) });
    }

    /// A SIMD packer equals the scalar one, byte for byte, across block boundaries and with
    /// either incoming state.
    fn packer_equals_scalar(packer: impl Fn(&[u8], &mut Vec<u8>, &mut Vec<u32>, &mut bool)) {
        // Both packers from the same state (what is already in the buffers, `prev_word`).
        let same = |text: &[u8], out: &[u8], starts: &[u32], prev: bool, what: &str| {
            let (mut o1, mut s1, mut p1) = (out.to_vec(), starts.to_vec(), prev);
            let (mut o2, mut s2, mut p2) = (out.to_vec(), starts.to_vec(), prev);
            ascii_run_scalar(text, &mut o1, &mut s1, &mut p1);
            // The text ends right before an unmapped page: a load past it crashes the test.
            let guarded = crate::guarded::Guarded::new(text);
            packer(guarded.bytes(), &mut o2, &mut s2, &mut p2);
            assert_eq!((o1, s1, p1), (o2, s2, p2), "{what} prev {prev}");
        };
        let mut rng = crate::hash::Pcg32::new(11);
        // Letters, digits and '_' with their neighbours in ASCII (the classifier's range edges:
        // '@' '[' '`' '{' '/' ':' '^'), separators, and DEL and NUL.
        let alphabet = b"aZ_9 .,-\t\nQz0xY!@[`{/:^\x7f\x00";
        for len in (0..300).chain([511, 512, 513, 1000]) {
            for prev in [false, true] {
                let text: Vec<u8> = (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len() as u32) as usize])
                    .collect();
                same(&text, b"xy ", &[0], prev, &format!("len {len}"));
            }
        }
        // Every ASCII byte, each alone between words and in runs.
        let all: Vec<u8> = (0..128u8).flat_map(|b| [b'w', b, b, b'w', b' ']).collect();
        for prev in [false, true] {
            same(&all, b"", &[], prev, "every ASCII byte");
        }
        // Odd-length runs of one-letter words from empty buffers: the most starts a text of
        // length n can have, n / 2 + 1, what `starts` reserves.
        for n in (1..200).step_by(2) {
            let text: Vec<u8> = (0..n)
                .map(|i| if i % 2 == 0 { b'a' } else { b' ' })
                .collect();
            same(
                &text,
                b"",
                &[],
                false,
                &format!("{n} bytes of one-letter words"),
            );
        }
        // The most word starts a block can hold: 32 (one-letter words), in both phases.
        for text in ["a ".repeat(100), " a".repeat(100)] {
            for prev in [false, true] {
                same(text.as_bytes(), b"", &[], prev, &format!("{text:?}"));
            }
        }
    }
}

/// The byte range, in the original `text`, of each SPEC word (same count and order as
/// [`words`]): a word spans from the first to the last original character that contributed to
/// it. For highlighting matches in reports.
pub fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut cur: Option<(usize, usize)> = None;
    for (o, c) in text.char_indices() {
        for lc in c.to_lowercase() {
            if is_word_char(lc) {
                let end = o + c.len_utf8();
                cur = Some(match cur {
                    Some((s, _)) => (s, end),
                    None => (o, end),
                });
            } else if let Some(span) = cur.take() {
                spans.push(span);
            }
        }
    }
    spans.extend(cur);
    spans
}

/// Where the word n-gram `gram` (words joined by one space, as the tokenizer writes them)
/// first occurs in `text`: its byte range in the original text.
pub fn locate_ngram(text: &str, gram: &str) -> Option<(usize, usize)> {
    let w = Words::new(text);
    let n = gram.split(' ').count();
    let spans = word_spans(text);
    if spans.len() != w.len() || n == 0 || w.len() < n {
        return None;
    }
    (0..=w.len() - n)
        .find(|&i| w.span(i, i + n) == gram.as_bytes())
        .map(|i| (spans[i].0, spans[i + n - 1].1))
}
