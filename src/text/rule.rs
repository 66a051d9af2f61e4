//! The contract's text options (SPEC §1.4): what a shingle is made of (`--shingle word|char`)
//! and how a text is normalised first (`--normalize none|nfc|nfkc`). The defaults are the
//! word rule on the text as given, bit for bit what the contract always was.
//!
//! Both options produce the packed layout (one unit, then one space): under `char`, each unit
//! is one character, so a `k`-character shingle is the contiguous range of its characters
//! joined by single spaces, and every engine (the GPU's kernels included) hashes it as it
//! hashes a word shingle.

use std::borrow::Cow;

use unicode_normalization::{is_nfc_quick, is_nfkc_quick, IsNormalized, UnicodeNormalization};

use super::tokenize::push_words;

/// What a shingle is made of.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ShingleUnit {
    /// `k` consecutive words (SPEC §1.1).
    #[default]
    Word,
    /// `k` consecutive characters of the lower-cased text, runs of white space as one space
    /// (SPEC §1.4).
    Char,
}

/// The Unicode normalisation applied to a text before it is cut into units.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Normalize {
    /// The text as given.
    #[default]
    None,
    /// Canonical composition: the same text in NFC and NFD agrees.
    Nfc,
    /// Compatibility composition: also full-width Latin, ligatures, superscripts ... fold to
    /// their plain forms.
    Nfkc,
}

crate::named!(
    ShingleUnit,
    "shingle",
    [
        ("word", ShingleUnit::Word, "k consecutive words (the contract's default)"),
        (
            "char",
            ShingleUnit::Char,
            "k consecutive characters of the lower-cased text, white space runs as one space (for text without spaces between words: Chinese, Japanese, Thai)"
        ),
    ]
);

crate::named!(
    Normalize,
    "normalize",
    [
        (
            "none",
            Normalize::None,
            "The text as given (the contract's default)"
        ),
        ("nfc", Normalize::Nfc, "Canonical composition (NFC)"),
        (
            "nfkc",
            Normalize::Nfkc,
            "Compatibility composition (NFKC): also folds full-width forms and ligatures"
        ),
    ]
);

impl ShingleUnit {
    pub fn name(self) -> &'static str {
        crate::options::Named::name(self)
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    pub fn is_default(&self) -> bool {
        *self == ShingleUnit::Word
    }
}

impl Normalize {
    pub fn name(self) -> &'static str {
        crate::options::Named::name(self)
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    pub fn is_default(&self) -> bool {
        *self == Normalize::None
    }

    /// `text` in this normal form (borrowed when it already is).
    pub fn apply(self, text: &str) -> Cow<'_, str> {
        match self {
            Normalize::None => Cow::Borrowed(text),
            Normalize::Nfc => {
                if is_nfc_quick(text.chars()) == IsNormalized::Yes {
                    Cow::Borrowed(text)
                } else {
                    Cow::Owned(text.nfc().collect())
                }
            }
            Normalize::Nfkc => {
                if is_nfkc_quick(text.chars()) == IsNormalized::Yes {
                    Cow::Borrowed(text)
                } else {
                    Cow::Owned(text.nfkc().collect())
                }
            }
        }
    }
}

/// Both text options together: how a text becomes the units its shingles are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TextRule {
    pub shingle: ShingleUnit,
    pub normalize: Normalize,
}

impl TextRule {
    /// The contract's default: words of the text as given.
    pub fn is_default(&self) -> bool {
        self.shingle.is_default() && self.normalize.is_default()
    }

    /// Append `text`'s units in the packed layout to `out` (each followed by one space) and
    /// their offsets to `starts`, as [`push_words`] does for words. Returns the number of units.
    pub fn push(&self, text: &str, out: &mut Vec<u8>, starts: &mut Vec<u32>) -> usize {
        if self.is_default() {
            return push_words(text, out, starts);
        }
        let text = self.normalize.apply(text);
        match self.shingle {
            ShingleUnit::Word => push_words(&text, out, starts),
            ShingleUnit::Char => push_chars(&text, out, starts),
        }
    }
}

/// The characters of `text` (SPEC §1.4), lower-cased as `str::to_lowercase` does, every run of
/// white space as one space and none at either end, each followed by one space in `out`.
pub fn push_chars(text: &str, out: &mut Vec<u8>, starts: &mut Vec<u32>) -> usize {
    let before = starts.len();
    let lower = text.to_lowercase();
    let mut space = false;
    let mut buf = [0u8; 4];
    for c in lower.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && starts.len() > before {
            starts.push(out.len() as u32);
            out.extend_from_slice(b"  ");
        }
        space = false;
        starts.push(out.len() as u32);
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        out.push(b' ');
    }
    starts.len() - before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(rule: TextRule, text: &str) -> Vec<String> {
        let (mut out, mut starts) = (Vec::new(), Vec::new());
        let n = rule.push(text, &mut out, &mut starts);
        assert_eq!(n, starts.len());
        starts.push(out.len() as u32);
        (0..n)
            .map(|j| {
                let b = &out[starts[j] as usize..starts[j + 1] as usize - 1];
                String::from_utf8(b.to_vec()).unwrap()
            })
            .collect()
    }

    const CHAR: TextRule = TextRule {
        shingle: ShingleUnit::Char,
        normalize: Normalize::None,
    };

    /// Characters are lower-cased, white space runs are one space, none at the ends.
    #[test]
    fn characters_and_white_space() {
        assert_eq!(units(CHAR, ""), Vec::<String>::new());
        assert_eq!(units(CHAR, " \t\n "), Vec::<String>::new());
        assert_eq!(units(CHAR, "A"), ["a"]);
        assert_eq!(units(CHAR, "  Ab \n\t c!  "), ["a", "b", " ", "c", "!"]);
        assert_eq!(
            units(CHAR, "中文。日本語"),
            ["中", "文", "。", "日", "本", "語"]
        );
        // Final sigma: lower-cased in context, as str::to_lowercase does.
        assert_eq!(units(CHAR, "ΟΔΟΣ"), ["ο", "δ", "ο", "ς"]);
        // A combining mark is a character of its own without normalisation.
        assert_eq!(units(CHAR, "e\u{301}"), ["e", "\u{301}"]);
    }

    /// NFC joins a decomposed letter; NFKC also folds full-width Latin.
    #[test]
    fn normal_forms() {
        let nfc = TextRule {
            shingle: ShingleUnit::Char,
            normalize: Normalize::Nfc,
        };
        assert_eq!(units(nfc, "e\u{301}"), ["é"]);
        assert_eq!(units(nfc, "ＡＢ"), ["ａ", "ｂ"]);
        let nfkc = TextRule {
            shingle: ShingleUnit::Char,
            normalize: Normalize::Nfkc,
        };
        assert_eq!(units(nfkc, "ＡＢ"), ["a", "b"]);
        let words_nfkc = TextRule {
            shingle: ShingleUnit::Word,
            normalize: Normalize::Nfkc,
        };
        assert_eq!(units(words_nfkc, "Ｈello ｗorld"), ["hello", "world"]);
        assert_eq!(
            units(TextRule::default(), "Ｈello ｗorld"),
            ["ｈello", "ｗorld"]
        );
    }
}
