//! What a run tells its user: the one-line summary on stderr, the JSON report, the S-curve
//! table, and the process's peak memory.

use std::fmt::Write as _;

use crate::lsh::LshParams;

/// Peak resident set size of this process in bytes (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Memory this process can count on: the smaller of the kernel's `MemAvailable` and what the
/// cgroup (container) limit leaves, if either is known.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let avail = meminfo.as_deref().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    });
    let cgroup = (|| {
        let max: u64 = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cur: u64 = std::fs::read_to_string("/sys/fs/cgroup/memory.current")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(max.saturating_sub(cur))
    })();
    match (avail, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// The default `--max-memory` of `dedup`: three quarters of what is available, so the run stops
/// with a clear error well before the kernel's OOM killer would end it.
pub fn default_memory_limit() -> Option<u64> {
    available_memory_bytes().map(|b| b / 4 * 3)
}

/// Bytes `dedup` keeps per document in pass 1, without the id: the signature, word count,
/// location, and the exact key when asked for.
pub fn bytes_per_document(num_perm: usize, exact: bool) -> usize {
    num_perm * 4 + 4 + 16 + std::mem::size_of::<usize>() + if exact { 16 } else { 0 }
}

/// `12.3k` style counts for the summary line.
pub fn human_count(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.2}G", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

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

/// One banding's error areas at a threshold.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TuneChoice {
    pub bands: usize,
    pub rows: usize,
    /// `∫_0^t p(s) ds`: pairs below the threshold that become candidates.
    pub false_positive_area: f64,
    /// `∫_t^1 (1 - p(s)) ds`: pairs above it that do not.
    pub false_negative_area: f64,
    /// The weighted sum that is minimised.
    pub cost: f64,
}

/// Every split `bands x rows = num_perm`, best first, by weighted false-positive and
/// false-negative area (as datasketch's optimal parameters, but keeping `b * r = num_perm`).
pub fn tune(threshold: f64, num_perm: usize, fp_weight: f64, fn_weight: f64) -> Vec<TuneChoice> {
    let mut v: Vec<TuneChoice> = (1..=num_perm)
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
            }
        })
        .collect();
    v.sort_by(|a, b| a.cost.total_cmp(&b.cost));
    v
}
