//! Statistical properties, with fixed seeds and stated confidence: the MinHash estimator is
//! unbiased, and LSH candidate rates follow the S-curve `p(s) = 1 - (1 - s^r)^b`.

use neardup::batch::PackedBatch;
use neardup::engine::{CpuEngine, Engine};
use neardup::hash::Pcg32;
use neardup::index::lsh::{Lsh, LshParams};
use neardup::{estimate, minhash, perm_params, MinHashParams};

/// Two texts of one-word "shingles" (k = 1) with exactly `inter` shared words out of a union of
/// `union`, drawn fresh from `rng`.
fn pair_with_jaccard(rng: &mut Pcg32, inter: usize, union: usize) -> (String, String) {
    let fresh = |rng: &mut Pcg32| format!("w{:08x}{:08x}", rng.next_u32(), rng.next_u32());
    let common: Vec<String> = (0..inter).map(|_| fresh(rng)).collect();
    let only = (union - inter) / 2;
    let a: Vec<String> = common
        .iter()
        .cloned()
        .chain((0..only).map(|_| fresh(rng)))
        .collect();
    let b: Vec<String> = common
        .iter()
        .cloned()
        .chain((0..only).map(|_| fresh(rng)))
        .collect();
    (a.join(" "), b.join(" "))
}

/// Mean of the estimate over 40 fresh seeds at J = 1/3: |z| < 3.29 (two-sided 99.9%).
#[test]
fn estimator_is_unbiased() {
    let mut rng = Pcg32::new(2024);
    let (a, b) = pair_with_jaccard(&mut rng, 50, 150);
    let (sa, sb) = (neardup::shingles(&a, 1), neardup::shingles(&b, 1));
    assert_eq!(neardup::jaccard(&sa, &sb), 1.0 / 3.0);
    let n = 128;
    let seeds = 40;
    let mean: f64 = (0..seeds)
        .map(|s| {
            let p = perm_params(n, 1000 + s as u64);
            estimate(&minhash(&sa, &p), &minhash(&sb, &p)).unwrap()
        })
        .sum::<f64>()
        / seeds as f64;
    let j = 1.0 / 3.0;
    let se = (j * (1.0 - j) / n as f64).sqrt() / (seeds as f64).sqrt();
    let z = (mean - j) / se;
    eprintln!("mean estimate over {seeds} seeds: {mean:.4} (J = {j:.4}, z = {z:.2})");
    assert!(
        z.abs() < 3.29,
        "mean estimate {mean:.4} vs J = {j:.4}: z = {z:.2}"
    );
}

/// Candidate rates at 13 similarities fit p(s): Pearson chi-square below the 99.9% critical
/// value for the cells with enough variance, and the measured 50% point is within 0.05 of
/// (1/b)^(1/r).
#[test]
fn lsh_candidate_rates_follow_the_s_curve() {
    let lsh = LshParams::new(16, 8).unwrap();
    let params = MinHashParams::new(1, 128, 0).unwrap();
    let mut engine = CpuEngine::new(params, 0).unwrap();
    let mut rng = Pcg32::new(77);
    let trials = 400;
    let union = 200;
    // s = 0.30, 0.35, ..., 0.90: intersections 60, 70, ..., 180 of a union of 200.
    let sims: Vec<usize> = (0..13).map(|i| 60 + 10 * i).collect();
    let mut rates = Vec::new();
    let mut chi2 = 0.0;
    let mut df = 0;
    for &inter in &sims {
        let s = inter as f64 / union as f64;
        let mut texts = Vec::with_capacity(2 * trials);
        for _ in 0..trials {
            let (a, b) = pair_with_jaccard(&mut rng, inter, union);
            texts.push(a);
            texts.push(b);
        }
        let sigs = engine.sign_vec(&PackedBatch::from_texts(&texts)).unwrap();
        let mut hits = 0;
        for t in 0..trials {
            let mut idx = Lsh::new(lsh);
            idx.insert("a", &sigs[2 * t * 128..(2 * t + 1) * 128])
                .unwrap();
            idx.insert("b", &sigs[(2 * t + 1) * 128..(2 * t + 2) * 128])
                .unwrap();
            if !idx.candidates().is_empty() {
                hits += 1;
            }
        }
        let p = lsh.probability(s);
        let var = trials as f64 * p * (1.0 - p);
        if var >= 1.0 {
            chi2 += (hits as f64 - trials as f64 * p).powi(2) / var;
            df += 1;
        }
        rates.push((s, hits as f64 / trials as f64, p));
    }
    eprintln!("S-curve: chi-square {chi2:.2} on {df} df; (s, rate, p(s)) = {rates:?}");
    // 99.9% points of chi-square for the degrees of freedom used.
    let critical = [
        10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91, 34.53,
    ];
    assert!(df >= 8, "too few informative similarities: {df}");
    assert!(
        chi2 < critical[df - 1],
        "chi-square {chi2:.2} on {df} df exceeds {}: rates {rates:?}",
        critical[df - 1]
    );
    // The measured 50% point, by linear interpolation between the bracketing similarities.
    let w = rates
        .windows(2)
        .find(|w| w[0].1 < 0.5 && w[1].1 >= 0.5)
        .expect("rates cross 0.5");
    let half = w[0].0 + (0.5 - w[0].1) * (w[1].0 - w[0].0) / (w[1].1 - w[0].1);
    eprintln!(
        "measured 50% point {half:.4}, threshold {:.4}",
        lsh.threshold()
    );
    assert!(
        (half - lsh.threshold()).abs() < 0.05,
        "measured 50% point {half:.4} vs threshold {:.4}",
        lsh.threshold()
    );
}
