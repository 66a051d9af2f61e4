//! What a run tells its user besides its outputs: the JSON reports' typed schema ([`json`]),
//! the HTML pages ([`html`]), and the numbers of the summary line.

pub mod html;
pub mod json;

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

/// `n / secs`, and 0 for a run too short to time.
pub fn per_second(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}
