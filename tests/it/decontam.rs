//! Decontamination (SPEC §4): protected 13-grams anywhere, in any case and punctuation, the
//! last window included; 12 words are not enough; id-like keys are not protected; bad lines
//! name file and line; the stage streams.

use neardup::stages::decontam::{protected_ngrams, Decontaminator, ProtectedSet};
use neardup::{contaminated, synth};

fn probes() -> (ProtectedSet, Vec<(String, String, bool)>) {
    let e = synth::fixtures::eval_set(synth::fixtures::EXAMPLE_SEED);
    let dir = tempfile::tempdir().unwrap();
    let jl = dir.path().join("eval.jsonl");
    let txt = dir.path().join("eval.txt");
    std::fs::write(&jl, synth::fixtures::protected_jsonl(&e)).unwrap();
    std::fs::write(&txt, &e.plain_text).unwrap();
    let set = protected_ngrams(&[jl, txt], 13).unwrap();
    (set, synth::fixtures::decontam_probes(&e, 99))
}

#[test]
fn probes_are_caught_exactly_when_they_share_a_13_gram() {
    let (set, probes) = probes();
    for (id, text, want) in &probes {
        assert_eq!(contaminated(text, &set, 13), *want, "{id}: {text}");
    }
}

#[test]
fn any_case_any_punctuation_and_the_last_window() {
    let text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu";
    let mut set = ProtectedSet::new(13).unwrap();
    set.add_texts("mem", [text]);
    assert_eq!(set.len(), 1);
    // Exactly the 13 words, shouted, with punctuation, at the very end of a longer text.
    let doc = "Some preamble here... ALPHA, Beta; gamma! DELTA epsilon (zeta) eta-theta iota kappa lambda mu. NU";
    assert!(contaminated(doc, &set, 13));
    // Twelve of them are not enough, wherever they are.
    assert!(!contaminated(
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu",
        &set,
        13
    ));
    assert!(!contaminated(
        "beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu",
        &set,
        13
    ));
    // A protected text of fewer than 13 words protects nothing.
    let mut short = ProtectedSet::new(13).unwrap();
    short.add_texts(
        "short",
        ["only twelve words are in this protected text so it has none"],
    );
    assert_eq!(short.len(), 0);
}

#[test]
fn id_like_keys_are_not_protected_but_nested_strings_are() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.jsonl");
    let w = |tag: &str| {
        (0..13)
            .map(|i| format!("{tag}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rec = serde_json::json!({
        "id": w("id"), "case_id": w("case"), "tags": [w("tag")],
        "scorer_args": {"ref": w("scorer"), "nested": [w("deepscorer")]},
        "question": w("q"),
        "deep": {"a": [{"b": w("nested")}], "id": w("nestedid")},
    });
    std::fs::write(&p, format!("{rec}\n")).unwrap();
    let set = protected_ngrams(&[&p], 13).unwrap();
    for tag in ["id", "case", "tag", "scorer", "deepscorer", "nestedid"] {
        assert!(
            !contaminated(&w(tag), &set, 13),
            "{tag} must not be protected"
        );
    }
    for tag in ["q", "nested"] {
        assert!(contaminated(&w(tag), &set, 13), "{tag} must be protected");
    }
    assert_eq!(set.len(), 2);
}

#[test]
fn a_bad_protected_line_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.jsonl");
    std::fs::write(&p, "{\"question\": \"fine\"}\n\n{not json\n").unwrap();
    let e = protected_ngrams(&[&p], 13).unwrap_err().to_string();
    assert!(e.contains("bad.jsonl:3"), "{e}");
    let missing = dir.path().join("missing.jsonl");
    let e = protected_ngrams(&[&missing], 13).unwrap_err().to_string();
    assert!(e.contains("missing.jsonl"), "{e}");
}

#[test]
fn decontamination_streams() {
    let (set, probes) = probes();
    let leak = probes.iter().find(|p| p.2).unwrap().1.clone();
    let clean = probes.iter().find(|p| !p.2).unwrap().1.clone();
    let mut pulled = 0usize;
    // An endless stream; the stage must pull only as much as it is asked for.
    let endless = (0..).map(|i| {
        pulled += 1;
        if i % 2 == 0 {
            leak.clone()
        } else {
            clean.clone()
        }
    });
    let mut d = Decontaminator::new(&set);
    let first: Vec<String> = d.filter(endless).take(5).collect();
    assert_eq!(first.len(), 5);
    assert!(first.iter().all(|t| *t == clean));
    assert_eq!(d.seen, 10);
    assert_eq!(d.dropped, 5);
    assert_eq!(pulled, 10);
}
