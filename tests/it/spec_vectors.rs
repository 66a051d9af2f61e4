//! The test vectors of the signature contract (SPEC §5), copied here so the project stands
//! alone. Every engine must reproduce them; the engine-independent ones are checked here, the
//! signatures again for every engine in `conformance.rs`.

use approx::assert_abs_diff_eq;
use neardup::hash::{fnv1a64, shingle_hash, Pcg32, P};
use neardup::index::lsh::LshParams;
use neardup::{estimate, minhash, perm_params, shingles, words};

#[test]
fn pcg32_reference_demo_stream() {
    let mut rng = Pcg32::with_stream(42, 54);
    let got: Vec<u32> = (0..6).map(|_| rng.next_u32()).collect();
    assert_eq!(
        got,
        [0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e]
    );
}

#[test]
fn pcg32_seeded_streams() {
    let mut r = Pcg32::new(42);
    let got: Vec<u32> = (0..4).map(|_| r.next_u32()).collect();
    assert_eq!(got, [3270867926, 1795671209, 1924641435, 1143034755]);
    let mut r = Pcg32::new(0);
    let got: Vec<u32> = (0..4).map(|_| r.next_u32()).collect();
    assert_eq!(got, [3894649422, 2055130073, 2315086854, 2925816488]);
}

#[test]
fn perm_params_vector() {
    let p = perm_params(128, 0);
    assert_eq!(p.a[..4], [1747165777, 167603209, 1295841608, 428639622]);
    assert_eq!(p.b[..4], [2055130073, 778332841, 1644475139, 1241310737]);
    assert_eq!(p.a[127], 1579313945);
    assert_eq!(p.b[127], 1410716136);
    assert!(p.a.iter().all(|&a| (1..P).contains(&a)));
    assert!(p.b.iter().all(|&b| b < P));
}

#[test]
fn fnv1a64_vectors() {
    assert_eq!(fnv1a64(b""), 14695981039346656037);
    assert_eq!(fnv1a64(b"the cat sat"), 11539720610915459420);
    assert_eq!(shingle_hash(b"the cat sat"), 757679841);
    assert_eq!(fnv1a64(b"on the mat"), 14983931495288195681);
    assert_eq!(shingle_hash(b"on the mat"), 592709377);
    assert_eq!(fnv1a64("héllo wörld".as_bytes()), 1261653000850579490);
    assert_eq!(shingle_hash("héllo wörld".as_bytes()), 1686484370);
}

#[test]
fn words_vector() {
    assert_eq!(
        words("Héllo, WORLD! naïve_café 42 — ÉTÉ ΣΊΣΥΦΟΣ"),
        ["héllo", "world", "naïve_café", "42", "été", "σίσυφος"]
    );
}

#[test]
fn hand_example_signature_estimate_and_sum() {
    let a = shingles("the cat sat on the mat today", 3);
    let sig = minhash(&a, &perm_params(8, 0));
    assert_eq!(
        sig,
        [552187696, 459811629, 319030451, 188954223, 27324258, 536562966, 642288193, 451063373]
    );
    let p = perm_params(128, 0);
    let sa = minhash(&a, &p);
    let sb = minhash(shingles("the cat sat on the mat again", 3), &p);
    assert_eq!(estimate(&sa, &sb).unwrap(), 0.65625);
    assert_eq!(sa.iter().map(|&v| v as u64).sum::<u64>(), 47103861309);
    let j = neardup::jaccard(&a, &shingles("the cat sat on the mat again", 3));
    assert_eq!(j, 4.0 / 6.0);
}

#[test]
fn hello_world_and_wordless_signatures() {
    let p = perm_params(4, 0);
    let s = shingles("Hello, World!", 5);
    assert_eq!(s.len(), 1);
    assert!(s.contains("hello world"));
    assert_eq!(
        minhash(&s, &p),
        [1158616401, 1662017163, 41205727, 1528251121]
    );
    for t in ["", "!!! ..."] {
        assert_eq!(minhash(shingles(t, 5), &p), [2147483647; 4]);
    }
}

// The SPEC gives 0.7071 as a printed value; it is not meant as 1/sqrt(2) here.
#[allow(clippy::approx_constant)]
#[test]
fn s_curve_vectors() {
    let l = LshParams::new(16, 8).unwrap();
    assert_abs_diff_eq!(l.threshold(), 0.7071, epsilon = 5e-5);
    assert_abs_diff_eq!(l.probability(0.5), 0.0607, epsilon = 5e-5);
    assert_abs_diff_eq!(l.probability(0.7), 0.6133, epsilon = 5e-5);
    assert_abs_diff_eq!(l.probability(0.8), 0.9470, epsilon = 5e-5);
    assert_abs_diff_eq!(l.probability(0.9), 0.9999, epsilon = 5e-5);
    assert_abs_diff_eq!(l.half_point(), 0.6736, epsilon = 5e-5);
    let f = LshParams::new(14, 8).unwrap();
    assert_abs_diff_eq!(f.probability(0.5), 0.0533, epsilon = 5e-5);
    assert_abs_diff_eq!(f.probability(0.7), 0.5645, epsilon = 5e-5);
    assert_abs_diff_eq!(f.probability(0.8), 0.9235, epsilon = 5e-5);
    assert_abs_diff_eq!(f.probability(0.9), 0.9996, epsilon = 5e-5);
    assert_abs_diff_eq!(f.half_point(), 0.6847, epsilon = 5e-5);
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
