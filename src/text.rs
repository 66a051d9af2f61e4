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
/// Pure-ASCII text (most of any web corpus) takes a byte loop; anything else goes through
/// `str::to_lowercase`, which is what the SPEC names (it handles the final sigma and the
/// characters whose lower case is longer than themselves), then the word class above.
pub fn push_words(text: &str, out: &mut Vec<u8>, starts: &mut Vec<u32>) -> usize {
    let before = starts.len();
    if text.is_ascii() {
        push_words_ascii(text.as_bytes(), out, starts);
    } else {
        let lower = text.to_lowercase();
        let mut in_word = false;
        for c in lower.chars() {
            if is_word_char(c) {
                if !in_word {
                    starts.push(out.len() as u32);
                    in_word = true;
                }
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            } else if in_word {
                out.push(b' ');
                in_word = false;
            }
        }
        if in_word {
            out.push(b' ');
        }
    }
    starts.len() - before
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

fn push_words_ascii(bytes: &[u8], out: &mut Vec<u8>, starts: &mut Vec<u32>) {
    // Worst case every byte is a one-letter word: one extra space per byte.
    out.reserve(bytes.len() + 1);
    let mut in_word = false;
    for &b in bytes {
        let l = ASCII_LOWER_WORD[b as usize];
        if l != 0 {
            if !in_word {
                starts.push(out.len() as u32);
                in_word = true;
            }
            out.push(l);
        } else if in_word {
            out.push(b' ');
            in_word = false;
        }
    }
    if in_word {
        out.push(b' ');
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
    let mut v: Vec<u64> = words.shingle_slices(k).map(crate::hash::fnv1a64).collect();
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
    fn jaccard_sorted_matches_sets() {
        assert_eq!(jaccard_sorted::<u64>(&[], &[]), 0.0);
        assert_eq!(jaccard_sorted(&[1u64, 2, 3], &[2, 3, 4]), 0.5);
    }
}
