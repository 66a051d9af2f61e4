//! The committed fixtures are exactly what the seeded generator makes
//! (`cargo run --example make_fixtures` regenerates them), and what they claim is true.

use neardup::synth::fixtures;

#[test]
fn committed_fixtures_equal_the_generator_output() {
    for (name, contents) in fixtures::files() {
        let committed = std::fs::read_to_string(crate::common::fixture(name)).unwrap_or_else(|e| {
            panic!("fixtures/{name}: {e}; run `cargo run --example make_fixtures`")
        });
        assert!(
            committed == contents,
            "fixtures/{name} differs from the generator's output; run `cargo run --example make_fixtures`"
        );
    }
}

#[test]
fn planted_similarities_are_in_their_ranges() {
    let p = fixtures::corpus();
    let text = |id: &str| p.docs.iter().find(|(i, _)| i == id).unwrap().1.clone();
    let sh = |id: &str| neardup::shingles(&text(id), 5);
    for c in &p.clusters {
        let seed = sh(&c[0]);
        for m in &c[1..] {
            let j = neardup::jaccard(&seed, &sh(m));
            assert!((0.85..=0.98).contains(&j), "{} ~ {m}: {j}", c[0]);
        }
    }
    for (a, b, _) in &p.borderline {
        let j = neardup::jaccard(&sh(a), &sh(b));
        assert!((0.5..=0.6).contains(&j), "{a} ~ {b}: {j}");
    }
    let [x, y, z] = p.chain.clone().unwrap();
    assert!(neardup::jaccard(&sh(&x), &sh(&y)) >= 0.8);
    assert!(neardup::jaccard(&sh(&y), &sh(&z)) >= 0.8);
    assert!(neardup::jaccard(&sh(&x), &sh(&z)) < 0.8);
    assert!(x < y && x < z);
    for (copy, orig) in &p.exact_copies {
        assert_eq!(neardup::words(&text(copy)), neardup::words(&text(orig)));
        assert_ne!(text(copy), text(orig));
    }
    let wordless = p
        .loners
        .iter()
        .filter(|id| neardup::words(&text(id)).is_empty())
        .count();
    let short = p
        .loners
        .iter()
        .filter(|id| (1..5).contains(&neardup::words(&text(id)).len()))
        .count();
    assert!(wordless >= 2 && short >= 2);
}
