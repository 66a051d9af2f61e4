//! The test vectors of the signature contract (docs/SPEC.md §5), read from the one data file
//! `testdata/contract/vectors.json`. The engine-independent vectors are checked here; the
//! signatures are handed to the conformance suite ([`signature_cases`]), which checks them on
//! every engine.

use approx::assert_abs_diff_eq;
use neardup::hash::{fnv1a64, shingle_hash, Pcg32, P};
use neardup::index::lsh::LshParams;
use neardup::text::{shingles_with, Normalize, ShingleUnit, TextRule};
use neardup::{estimate, minhash, perm_params, shingles, words, MinHashParams};
use serde_json::Value;

/// The data file, parsed.
pub(crate) fn vectors() -> Value {
    let path = crate::common::root().join("testdata/contract/vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["contract"], neardup::CONTRACT_VERSION);
    v
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    u64s(v)
        .into_iter()
        .map(|x| u32::try_from(x).unwrap())
        .collect()
}

/// The text options of a vector (SPEC §1.4): the default when it names none.
fn rule_of(v: &Value) -> TextRule {
    TextRule {
        shingle: v["shingle"]
            .as_str()
            .map_or(ShingleUnit::Word, |s| ShingleUnit::parse(s).unwrap()),
        normalize: v["normalize"]
            .as_str()
            .map_or(Normalize::None, |s| Normalize::parse(s).unwrap()),
    }
}

fn params_of(v: &Value) -> MinHashParams {
    let n = |k: &str| v[k].as_u64().unwrap();
    MinHashParams::new(n("k") as usize, n("num_perm") as usize, n("seed"))
        .unwrap()
        .with_rule(rule_of(v))
}

/// Each signature vector: a name, its parameters, its text and the signature it must have.
pub(crate) fn signature_cases() -> Vec<(String, MinHashParams, String, Vec<u32>)> {
    vectors()["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = s["text"].as_str().unwrap().to_string();
            let p = params_of(s);
            let name = format!(
                "SPEC vector {text:?} (k={}, num_perm={}{})",
                p.k,
                p.num_perm,
                p.rule_words()
            );
            (name, p, text, u32s(&s["signature"]))
        })
        .collect()
}

#[test]
fn the_data_file_holds_every_kind_of_vector() {
    let v = vectors();
    for key in [
        "pcg32",
        "perm_params",
        "fnv1a64",
        "words",
        "shingles",
        "signatures",
        "signature_sums",
        "pairs",
        "s_curves",
    ] {
        assert!(
            v[key].as_array().is_some_and(|a| !a.is_empty()),
            "vectors.json lacks {key}"
        );
    }
}

#[test]
fn pcg32_streams() {
    for s in vectors()["pcg32"].as_array().unwrap() {
        let want = u32s(&s["outputs"]);
        let mut rng = match s.get("seed") {
            Some(seed) => Pcg32::new(seed.as_u64().unwrap()),
            None => Pcg32::with_stream(
                s["initstate"].as_u64().unwrap(),
                s["initseq"].as_u64().unwrap(),
            ),
        };
        let got: Vec<u32> = (0..want.len()).map(|_| rng.next_u32()).collect();
        assert_eq!(got, want, "{s}");
    }
}

#[test]
fn perm_params_vectors() {
    for s in vectors()["perm_params"].as_array().unwrap() {
        let n = s["num_perm"].as_u64().unwrap() as usize;
        let p = perm_params(n, s["seed"].as_u64().unwrap());
        let (a, b) = (u32s(&s["a_first"]), u32s(&s["b_first"]));
        assert_eq!(p.a[..a.len()], a[..]);
        assert_eq!(p.b[..b.len()], b[..]);
        assert_eq!(p.a[n - 1] as u64, s["a_last"].as_u64().unwrap());
        assert_eq!(p.b[n - 1] as u64, s["b_last"].as_u64().unwrap());
        assert!(p.a.iter().all(|&a| (1..P).contains(&a)));
        assert!(p.b.iter().all(|&b| b < P));
    }
}

#[test]
fn fnv1a64_vectors() {
    for s in vectors()["fnv1a64"].as_array().unwrap() {
        let bytes = s["text"].as_str().unwrap().as_bytes();
        assert_eq!(fnv1a64(bytes), s["fnv1a64"].as_u64().unwrap(), "{s}");
        if let Some(x) = s.get("x") {
            assert_eq!(shingle_hash(bytes) as u64, x.as_u64().unwrap(), "{s}");
        }
    }
}

#[test]
fn words_and_shingles_vectors() {
    for s in vectors()["words"].as_array().unwrap() {
        let want: Vec<&str> = s["words"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert_eq!(words(s["text"].as_str().unwrap()), want);
    }
    for s in vectors()["shingles"].as_array().unwrap() {
        let got = shingles_with(
            s["text"].as_str().unwrap(),
            s["k"].as_u64().unwrap() as usize,
            rule_of(s),
        );
        let want: std::collections::HashSet<String> = s["shingles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, want, "{s}");
    }
}

#[test]
fn the_oracle_gives_the_signature_vectors() {
    // The same vectors run on every engine in the conformance suite.
    for (name, p, text, want) in signature_cases() {
        assert_eq!(
            minhash(shingles_with(&text, p.k, p.rule()), &p.perms()),
            want,
            "{name}"
        );
    }
    for s in vectors()["signature_sums"].as_array().unwrap() {
        let p = params_of(s);
        let sig = minhash(shingles(s["text"].as_str().unwrap(), p.k), &p.perms());
        assert_eq!(
            sig.iter().map(|&v| v as u64).sum::<u64>(),
            s["sum"].as_u64().unwrap()
        );
    }
}

#[test]
fn pair_vectors_estimate_and_jaccard() {
    for s in vectors()["pairs"].as_array().unwrap() {
        let p = params_of(s);
        let (a, b) = (
            shingles(s["a"].as_str().unwrap(), p.k),
            shingles(s["b"].as_str().unwrap(), p.k),
        );
        let (sa, sb) = (minhash(&a, &p.perms()), minhash(&b, &p.perms()));
        assert_eq!(estimate(&sa, &sb).unwrap(), s["estimate"].as_f64().unwrap());
        let j = u64s(&s["jaccard"]);
        assert_eq!(neardup::jaccard(&a, &b), j[0] as f64 / j[1] as f64);
    }
}

#[test]
fn s_curve_vectors() {
    let v = vectors();
    // Printed to 4 decimals: each value is within half a unit of the last decimal.
    let eps = 0.5 * 10f64.powi(-(v["s_curves_printed_decimals"].as_i64().unwrap() as i32)) + 1e-9;
    for s in v["s_curves"].as_array().unwrap() {
        let l = LshParams::new(
            s["bands"].as_u64().unwrap() as usize,
            s["rows"].as_u64().unwrap() as usize,
        )
        .unwrap();
        if let Some(t) = s.get("threshold") {
            assert_abs_diff_eq!(l.threshold(), t.as_f64().unwrap(), epsilon = eps);
        }
        assert_abs_diff_eq!(
            l.half_point(),
            s["half_point"].as_f64().unwrap(),
            epsilon = eps
        );
        for pt in s["p"].as_array().unwrap() {
            let (x, y) = (pt[0].as_f64().unwrap(), pt[1].as_f64().unwrap());
            assert_abs_diff_eq!(l.probability(x), y, epsilon = eps);
        }
    }
}

#[test]
fn estimate_refuses_incomparable_signatures() {
    assert!(estimate(&[1, 2, 3], &[1, 2]).is_err());
    let a = neardup::Signature {
        params: neardup::MinHashParams::new(5, 4, 0).unwrap(),
        values: vec![1, 2, 3, 4],
    };
    let mut b = a.clone();
    b.params.seed = 1;
    assert!(a.estimate(&b).is_err());
    let mut c = a.clone();
    c.params.k = 3;
    assert!(a.estimate(&c).is_err());
    assert_eq!(a.estimate(&a.clone()).unwrap(), 1.0);
}
