//! The LSH S-curve `p(s) = 1 - (1 - s^rows)^bands` as users read it: the table of
//! `neardup scurve`, and the choice of `bands x rows` for a threshold (`neardup tune`).

use std::fmt::Write as _;

use super::lsh::LshParams;

/// The S-curve table of `neardup scurve`.
pub fn scurve_table(p: LshParams) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "bands = {}, rows = {}, num_perm = {}",
        p.bands,
        p.rows,
        p.bands * p.rows
    );
    let _ = writeln!(s, "threshold (1/b)^(1/r) = {:.4}", p.threshold());
    let _ = writeln!(
        s,
        "exact 50% point (1 - 0.5^(1/b))^(1/r) = {:.4}",
        p.half_point()
    );
    let _ = writeln!(s, "{:>6}  {:>8}", "s", "p(s)");
    for i in 0..=20 {
        let x = i as f64 * 0.05;
        let _ = writeln!(s, "{x:>6.2}  {:>8.4}", p.probability(x));
    }
    s
}

/// The area `∫ f(s) ds` over `[a, b]` by Simpson's rule.
fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    let n = 1000;
    let h = (b - a) / n as f64;
    let mut s = f(a) + f(b);
    for i in 1..n {
        s += f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

/// One banding's error areas, candidate probability and work at a threshold.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TuneChoice {
    pub bands: usize,
    pub rows: usize,
    /// `∫_0^t p(s) ds`: pairs below the threshold that become candidates.
    pub false_positive_area: f64,
    /// `∫_t^1 (1 - p(s)) ds`: pairs above it that do not.
    pub false_negative_area: f64,
    /// The weighted sum that [`tune`] minimises.
    pub cost: f64,
    /// `p(t)`: the chance that a pair exactly at the threshold becomes a candidate (the recall
    /// there).
    pub p_at_threshold: f64,
    /// `∫_0^1 p(s) ds`: the expected share of pairs that become candidates (and are checked)
    /// when similarities spread evenly over [0, 1]; a measure of confirmation work.
    pub work: f64,
}

/// Every split `bands x rows = num_perm`, with its areas, `p(threshold)` and work, in order of
/// bands; `cost` weighs the two areas.
fn splits(threshold: f64, num_perm: usize, fp_weight: f64, fn_weight: f64) -> Vec<TuneChoice> {
    (1..=num_perm)
        .filter(|&b| num_perm.is_multiple_of(b))
        .map(|b| {
            let p = LshParams {
                bands: b,
                rows: num_perm / b,
            };
            let fp = integrate(|s| p.probability(s), 0.0, threshold);
            let fne = integrate(|s| 1.0 - p.probability(s), threshold, 1.0);
            TuneChoice {
                bands: p.bands,
                rows: p.rows,
                false_positive_area: fp,
                false_negative_area: fne,
                cost: fp * fp_weight + fne * fn_weight,
                p_at_threshold: p.probability(threshold),
                work: integrate(|s| p.probability(s), 0.0, 1.0),
            }
        })
        .collect()
}

/// Every split `bands x rows = num_perm`, best first, by weighted false-positive and
/// false-negative area (as datasketch's optimal parameters, but keeping `b * r = num_perm`).
/// The choice for confirmation by estimate or none, where a false positive is a wrong merge.
pub fn tune(threshold: f64, num_perm: usize, fp_weight: f64, fn_weight: f64) -> Vec<TuneChoice> {
    let mut v = splits(threshold, num_perm, fp_weight, fn_weight);
    v.sort_by(|a, b| a.cost.total_cmp(&b.cost));
    v
}

/// Every split `bands x rows = num_perm`, best first, for exact-Jaccard confirmation: there a
/// false positive costs one check and a false negative is a lost duplicate, so the splits whose
/// `p(threshold)` is at least `recall` come first, least work first; the others follow, most
/// likely candidates first. (`cost` is the unweighted sum of the two areas.)
pub fn tune_for_recall(threshold: f64, num_perm: usize, recall: f64) -> Vec<TuneChoice> {
    let mut v = splits(threshold, num_perm, 0.5, 0.5);
    v.sort_by(|a, b| {
        let (ma, mb) = (a.p_at_threshold >= recall, b.p_at_threshold >= recall);
        mb.cmp(&ma).then(if ma {
            a.work.total_cmp(&b.work)
        } else {
            b.p_at_threshold.total_cmp(&a.p_at_threshold)
        })
    });
    v
}
