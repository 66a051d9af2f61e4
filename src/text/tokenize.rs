//! The tokenizer: a text's words (SPEC §1) written into the packed layout, lower-cased, each
//! followed by one space. Pure-ASCII runs go a block at a time ([`x86`](self) where the CPU
//! has the instructions), everything else one character at a time, exactly as
//! `str::to_lowercase` and the word class decide.

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

/// How many bytes `bytes` starts with below 0x80: eight at a time (a byte loop showed in the
/// profile of a `signatures` run on text that is mostly ASCII with a few other characters:
/// docs/BENCHMARKS.md).
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
            if x86::available() {
                // SAFETY: the CPU has AVX-512F, BW and VBMI2 (checked by `available`).
                unsafe { x86::ascii_run_avx512(bytes, out, starts, prev_word) };
                return;
            }
            if crate::simd::cpu().avx2 {
                // SAFETY: the CPU has AVX2, POPCNT and BMI1 (checked by `simd::cpu`).
                unsafe { x86::ascii_run_avx2(bytes, out, starts, prev_word) };
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
pub(crate) mod x86;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::words;

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
}

#[cfg(all(test, target_arch = "x86_64"))]
mod simd_tests {
    use super::*;

    #[test]
    fn avx512_ascii_run_equals_scalar() {
        if !x86::available() {
            crate::testsupport::untested("the AVX-512 packer", "NEARDUP_REQUIRE_AVX512_VBMI2");
            return;
        }
        packer_equals_scalar(|t, o, s, p| unsafe { x86::ascii_run_avx512(t, o, s, p) });
    }

    #[test]
    fn avx2_ascii_run_equals_scalar() {
        if !crate::simd::cpu().avx2 {
            crate::testsupport::untested("the AVX2 packer", "NEARDUP_REQUIRE_SIMD");
            return;
        }
        packer_equals_scalar(|t, o, s, p| unsafe { x86::ascii_run_avx2(t, o, s, p) });
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
