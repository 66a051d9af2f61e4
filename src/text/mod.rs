//! Words, shingles and exact Jaccard (SPEC §1), and the tokenizer that packs documents into the
//! byte layout every engine reads ([`tokenize`]).
//!
//! The packed layout is the one idea everything else leans on: a document's lower-cased words are
//! written one after another, **each followed by exactly one ASCII space**. Shingle `j` (words
//! `j .. j+k`, joined by one space) is then the contiguous byte range
//! `word_start[j] .. word_start[j+k] - 1`, so no shingle string is ever built, on the CPU or the
//! GPU, and the bytes hashed are exactly the UTF-8 of the SPEC's shingle.

use std::collections::HashSet;
use std::hash::Hash;

pub mod rule;
pub mod tokenize;

pub use rule::{Normalize, ShingleUnit, TextRule};
pub use tokenize::{is_word_char, push_words};

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

    /// `text`'s units under `rule` (characters under `--shingle char`), in the same layout.
    pub fn with_rule(text: &str, rule: TextRule) -> Self {
        let mut w = Words::default();
        w.reset_with(text, rule);
        w
    }

    /// Tokenize `text` into this buffer, reusing its allocations.
    pub fn reset(&mut self, text: &str) {
        self.reset_with(text, TextRule::default());
    }

    /// [`Words::reset`] under `rule`.
    pub fn reset_with(&mut self, text: &str, rule: TextRule) {
        self.bytes.clear();
        self.starts.clear();
        rule.push(text, &mut self.bytes, &mut self.starts);
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
    shingles_with(text, k, TextRule::default())
}

/// [`shingles`] under the text options `rule` (SPEC §1.4): under `char`, the `k`-character
/// windows, their characters joined by one space as they are hashed.
pub fn shingles_with(text: &str, k: usize, rule: TextRule) -> HashSet<String> {
    let w = Words::with_rule(text, rule);
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

/// Jaccard of two sorted, repeat-free slices (a merge, no hashing); `0.0` when both are empty.
pub fn jaccard_sorted<T: Ord + Copy>(a: &[T], b: &[T]) -> f64 {
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    // Without branches: which side steps is data, not a guess the CPU gets wrong about half
    // the time on sets that share little.
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        inter += (x == y) as usize;
        i += (x <= y) as usize;
        j += (y <= x) as usize;
    }
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
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
        assert_eq!(jaccard_sorted(&[0u64, u64::MAX], &[u64::MAX]), 0.5);
        assert_eq!(jaccard_sorted(&[7u64], &[]), 0.0);
    }

    proptest::proptest! {
        /// The merge equals the Jaccard of the two sets as hash sets, whatever their overlap
        /// (values drawn from a small range share many, from the whole range almost none).
        #[test]
        fn jaccard_sorted_is_the_sets_jaccard(
            a in proptest::collection::btree_set(0u64..64, 0..80),
            b in proptest::collection::btree_set(0u64..64, 0..80),
            c in proptest::collection::btree_set(proptest::num::u64::ANY, 0..40),
        ) {
            for (x, y) in [(&a, &b), (&a, &c), (&c, &c), (&b, &a)] {
                let (xs, ys): (Vec<u64>, Vec<u64>) =
                    (x.iter().copied().collect(), y.iter().copied().collect());
                let want = jaccard(
                    &x.iter().copied().collect::<HashSet<u64>>(),
                    &y.iter().copied().collect::<HashSet<u64>>(),
                );
                proptest::prop_assert_eq!(jaccard_sorted(&xs, &ys), want);
            }
        }
    }
}
