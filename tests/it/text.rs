//! Words and shingles (SPEC §1): the tokenizer against a regex oracle, and the rules around
//! case, punctuation, short and wordless texts.

use std::collections::HashSet;

use neardup::hash::P;
use neardup::sign::fnv::shingle_fnv_set;
use neardup::text::{jaccard_sorted, Words};
use neardup::{jaccard, minhash, perm_params, shingles, words};
use proptest::prelude::*;

/// The SPEC's definition, literally: lower-case, then the regex.
fn oracle_words(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"[\p{L}\p{N}_]+").unwrap();
    re.find_iter(&text.to_lowercase())
        .map(|m| m.as_str().to_string())
        .collect()
}

fn oracle_shingles(text: &str, k: usize) -> HashSet<String> {
    let w = oracle_words(text);
    if w.is_empty() {
        HashSet::new()
    } else if w.len() < k {
        [w.join(" ")].into()
    } else {
        w.windows(k).map(|x| x.join(" ")).collect()
    }
}

#[test]
fn case_and_punctuation_are_ignored() {
    let a = shingles("The cat, sat. On THE mat!", 3);
    let b = shingles("the cat sat on the mat", 3);
    assert_eq!(a, b);
    assert_eq!(words("...Hello,,,world???"), ["hello", "world"]);
}

#[test]
fn fewer_than_k_words_is_one_shingle() {
    for (text, want) in [
        ("one", "one"),
        ("one two", "one two"),
        ("a b c d", "a b c d"),
    ] {
        let s = shingles(text, 5);
        assert_eq!(s, [want.to_string()].into_iter().collect::<HashSet<_>>());
    }
    assert_eq!(shingles("a b c d e", 5).len(), 1);
    assert_eq!(shingles("a b c d e f", 5).len(), 2);
}

#[test]
fn wordless_texts_have_no_shingles_and_all_p_signatures() {
    let p = perm_params(16, 0);
    for t in ["", "   ", "!!! ...", "— – …", "\u{301}\u{302}"] {
        let s = shingles(t, 5);
        assert!(s.is_empty(), "{t:?}");
        assert_eq!(minhash(&s, &p), vec![P; 16]);
        assert_eq!(jaccard(&s, &shingles("", 5)), 0.0);
    }
}

#[test]
fn unicode_edge_cases_follow_the_oracle() {
    for t in [
        "ΣΊΣΥΦΟΣ ΟΔΟΣ",
        "İstanbul straße ǅemal",
        "cafe\u{301} naïve",
        "日本語のテキスト、漢字。",
        "x\u{200b}y zero\u{00a0}width",
        "🙂 emoji 🙂 text 𝒜𝒷𝒸 astral letters 𝟘𝟙",
        "٣٤٥ arabic digits ½ ⅔ Ⅻ roman",
        "ﬁ ligature ﬀ",
        "under_score __init__ a_b",
    ] {
        assert_eq!(words(t), oracle_words(t), "{t:?}");
    }
}

#[test]
fn hand_example_jaccard() {
    let a = shingles("the cat sat on the mat today", 3);
    let b = shingles("the cat sat on the mat again", 3);
    assert_eq!(jaccard(&a, &b), 4.0 / 6.0);
    let (wa, wb) = (
        Words::new("the cat sat on the mat today"),
        Words::new("the cat sat on the mat again"),
    );
    assert_eq!(
        jaccard_sorted(&shingle_fnv_set(&wa, 3), &shingle_fnv_set(&wb, 3)),
        4.0 / 6.0
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn tokenizer_equals_regex_oracle(text in "\\PC{0,60}") {
        prop_assert_eq!(words(&text), oracle_words(&text));
    }

    #[test]
    fn tokenizer_equals_oracle_on_mixed_scripts(
        parts in proptest::collection::vec(
            prop_oneof![
                "[a-zA-Z0-9_]{1,6}",
                "[ .,;!?\\-]{1,3}",
                "[À-ɏ]{1,4}",
                "[Α-ω]{1,4}",
                "[\u{300}-\u{36f}]{1,2}",
                "[一-龥]{1,3}",
                "[\u{1d400}-\u{1d7ff}]{1,2}",
            ],
            0..20,
        )
    ) {
        let text: String = parts.concat();
        prop_assert_eq!(words(&text), oracle_words(&text));
    }

    #[test]
    fn shingles_equal_oracle(text in "[a-cA-C .]{0,40}", k in 1usize..7) {
        prop_assert_eq!(shingles(&text, k), oracle_shingles(&text, k));
    }

    #[test]
    fn jaccard_sorted_equals_set_jaccard(a in proptest::collection::btree_set(0u64..50, 0..30),
                                         b in proptest::collection::btree_set(0u64..50, 0..30)) {
        let av: Vec<u64> = a.iter().copied().collect();
        let bv: Vec<u64> = b.iter().copied().collect();
        let (ah, bh): (HashSet<u64>, HashSet<u64>) = (a.into_iter().collect(), b.into_iter().collect());
        prop_assert_eq!(jaccard_sorted(&av, &bv), jaccard(&ah, &bh));
    }
}
