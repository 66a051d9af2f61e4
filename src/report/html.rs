//! Pictures: S-curve and histogram charts as inline SVG, and the self-contained HTML reports of
//! `dedup` and `decontam` (no script, no network, nothing but the one file).

use std::fmt::Write as _;

use crate::index::lsh::LshParams;
use crate::stages::decontam::DecontamSummary;
use crate::stages::dedup::{DedupConfig, DedupSummary};

/// Escape text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

/// A measured candidate rate at a similarity: `(similarity, rate, pairs)`.
pub type Measured = (f64, f64, u64);

/// The S-curves `p(s)` of several bandings on one chart, each threshold `(1/b)^(1/r)` marked
/// with a dashed line, an optional chosen threshold marked in grey, and optional measured
/// candidate rates drawn as points.
pub fn scurve_svg(curves: &[LshParams], chosen: Option<f64>, measured: &[Measured]) -> String {
    let (w, h) = (640.0, 400.0);
    let (l, r, t, b) = (56.0, 20.0, 20.0, 48.0);
    let x = |s: f64| l + s * (w - l - r);
    let y = |p: f64| t + (1.0 - p) * (h - t - b);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart scurve" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="LSH S-curve">"#
    );
    s.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    for i in 0..=10 {
        let v = i as f64 / 10.0;
        let _ = write!(
            s,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e5e5e5"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e5e5e5"/>"##,
            x(v),
            y(0.0),
            x(v),
            y(1.0),
            x(0.0),
            y(v),
            x(1.0),
            y(v)
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{v:.1}</text><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{v:.1}</text>"#,
            x(v),
            y(0.0) + 16.0,
            x(0.0) - 6.0,
            y(v) + 4.0
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">Jaccard similarity s</text><text x="14" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {:.1})">P(candidate) = 1 - (1 - s^r)^b</text>"#,
        x(0.5),
        h - 8.0,
        y(0.5),
        y(0.5)
    );
    if let Some(th) = chosen {
        let _ = write!(
            s,
            r##"<line class="chosen-threshold" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#555" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#555">threshold {th:.2}</text>"##,
            x(th),
            y(0.0),
            x(th),
            y(1.0),
            x(th) + 4.0,
            y(0.03)
        );
    }
    for (i, p) in curves.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = (0..=200)
            .map(|k| {
                let v = k as f64 / 200.0;
                format!("{:.1},{:.1}", x(v), y(p.probability(v)))
            })
            .collect();
        let th = p.threshold();
        let _ = write!(
            s,
            r#"<polyline class="curve" fill="none" stroke="{c}" stroke-width="2" points="{}"/><line class="threshold" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-dasharray="5,4"/>"#,
            pts.join(" "),
            x(th),
            y(0.0),
            x(th),
            y(1.0)
        );
        let _ = write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="12">{} bands x {} rows: threshold {:.4}, 50% at {:.4}</text>"#,
            x(0.02),
            y(0.97) + 16.0 * i as f64 - 3.0,
            x(0.02) + 16.0,
            y(0.97) + 16.0 * i as f64 + 1.0,
            p.bands,
            p.rows,
            th,
            p.half_point()
        );
    }
    for &(sim, rate, n) in measured {
        let _ = write!(
            s,
            r##"<circle class="measured" cx="{:.1}" cy="{:.1}" r="4" fill="#000" fill-opacity="0.7"><title>s ≈ {sim:.3}: {:.1}% of {n} pairs were candidates</title></circle>"##,
            x(sim),
            y(rate),
            rate * 100.0
        );
    }
    s.push_str("</svg>");
    s
}

/// Bins of cluster sizes for the histogram.
const SIZE_BINS: [(u64, u64, &str); 9] = [
    (2, 2, "2"),
    (3, 3, "3"),
    (4, 4, "4"),
    (5, 5, "5"),
    (6, 10, "6-10"),
    (11, 20, "11-20"),
    (21, 50, "21-50"),
    (51, 100, "51-100"),
    (101, u64::MAX, "101+"),
];

/// A bar chart of how many clusters have each size.
pub fn histogram_svg(sizes: &std::collections::BTreeMap<u64, u64>) -> String {
    let counts: Vec<u64> = SIZE_BINS
        .iter()
        .map(|&(lo, hi, _)| sizes.range(lo..=hi).map(|(_, c)| c).sum())
        .collect();
    let max = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (w, h) = (640.0, 260.0);
    let (l, b, t) = (56.0, 40.0, 16.0);
    let bw = (w - l - 20.0) / SIZE_BINS.len() as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart histogram" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="cluster sizes"><rect width="100%" height="100%" fill="white"/>"#
    );
    for (i, (&(_, _, label), &c)) in SIZE_BINS.iter().zip(&counts).enumerate() {
        let bh = (h - b - t) * c as f64 / max;
        let bx = l + i as f64 * bw + 4.0;
        let _ = write!(
            s,
            r##"<rect class="bar" x="{bx:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="#1f77b4"><title>{c} clusters of size {label}</title></rect><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{label}</text><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{c}</text>"##,
            h - b - bh,
            bw - 8.0,
            bx + (bw - 8.0) / 2.0,
            h - b + 16.0,
            bx + (bw - 8.0) / 2.0,
            h - b - bh - 4.0
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">cluster size (documents)</text></svg>"#,
        w / 2.0,
        h - 6.0
    );
    s
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;max-width:1100px;color:#222}\
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}table{border-collapse:collapse}\
td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.members{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:10px;margin:.5em 0 1.5em}\
.member{border:1px solid #ddd;border-radius:6px;padding:8px;font-size:.85em;white-space:pre-wrap;overflow-wrap:anywhere}\
.member b{display:block;margin-bottom:4px;font-family:monospace}.more{color:#666;font-style:italic}mark{background:#ffe066}\
.hit{border-left:4px solid #d62728;padding:6px 10px;margin:8px 0;background:#fafafa;white-space:pre-wrap;overflow-wrap:anywhere}\
.muted{color:#666;font-size:.9em}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n{body}\n</body></html>\n",
        escape(title)
    )
}

fn row(s: &mut String, k: &str, v: impl std::fmt::Display) {
    let _ = write!(
        s,
        "<tr><th>{}</th><td class=\"n\">{}</td></tr>",
        escape(k),
        escape(&v.to_string())
    );
}

/// The `dedup --report FILE.html` page.
pub fn dedup_page(s: &DedupSummary, cfg: &DedupConfig, inputs: &[String], engine: &str) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>neardup dedup report</h1><p class=\"muted\">{} · contract {} · {}</p>",
        escape(&inputs.join(", ")),
        crate::CONTRACT_VERSION,
        escape(engine)
    );
    b.push_str("<h2>Counts</h2><table>");
    row(&mut b, "documents read", s.scan.documents);
    row(&mut b, "documents written", s.documents_written);
    row(&mut b, "exact duplicates", s.cluster.exact_duplicates);
    row(&mut b, "near duplicates", s.cluster.near_duplicates);
    row(&mut b, "clusters (2+ documents)", s.cluster.clusters);
    if let Some(c) = &s.cluster.chaining {
        row(
            &mut b,
            "dropped with no kept near duplicate (chaining)",
            c.dropped_without_kept_duplicate,
        );
        row(
            &mut b,
            "largest cluster: documents, diameter in hops",
            format!("{}, {}", c.largest_cluster, c.largest_cluster_diameter),
        );
    }
    row(&mut b, "wordless documents", s.cluster.wordless);
    row(&mut b, "candidate pairs checked", s.cluster.pairs_checked);
    row(
        &mut b,
        "checks confirmed / rejected",
        format!(
            "{} / {}",
            s.cluster.pairs_checked - s.cluster.pairs_rejected,
            s.cluster.pairs_rejected
        ),
    );
    row(
        &mut b,
        "distinct pairs confirmed",
        s.cluster.pairs_confirmed,
    );
    row(
        &mut b,
        "pairs ruled out by the prefix filter",
        s.cluster.pairs_filtered,
    );
    row(&mut b, "shingles", s.scan.shingles);
    row(&mut b, "seconds", format!("{:.3}", s.seconds));
    b.push_str("</table>");
    let _ = write!(
        b,
        "<h2>LSH S-curve</h2><p>k = {}, {} permutations, {} bands x {} rows, confirmation <b>{:?}</b> at threshold {}, clusters by <b>{}</b>.</p>",
        cfg.params.k, cfg.params.num_perm, cfg.lsh.bands, cfg.lsh.rows, cfg.confirm, cfg.threshold, cfg.cluster
    );
    let measured: Vec<Measured> = s
        .similarity_buckets
        .iter()
        .filter(|x| x.pairs >= 5)
        .map(|x| {
            (
                (x.lo + x.hi) / 2.0,
                x.candidates as f64 / x.pairs as f64,
                x.pairs,
            )
        })
        .collect();
    b.push_str(&scurve_svg(&[cfg.lsh], Some(cfg.threshold), &measured));
    if measured.is_empty() {
        b.push_str("<p class=\"muted\">Measured candidate rates need true similarities: run with <code>--confirm jaccard</code> (the default) on a corpus with near duplicates.</p>");
    } else {
        let n: u64 = s.similarity_buckets.iter().map(|x| x.pairs).sum();
        let _ = write!(b, "<p class=\"muted\">Points: the share of document pairs that LSH made candidates, by exact Jaccard, over {n} pairs of a sample of the documents that fell in some bucket (pairs sharing at least one shingle).</p>");
    }
    b.push_str("<h2>Cluster sizes</h2>");
    b.push_str(&histogram_svg(&s.cluster.cluster_sizes));
    b.push_str("<h2>Largest clusters</h2>");
    if s.examples.is_empty() {
        b.push_str("<p class=\"muted\">No clusters.</p>");
    }
    for c in &s.examples {
        let _ = write!(
            b,
            "<h3>root {} — {} documents</h3><div class=\"members\">",
            escape(&c.root),
            c.size
        );
        for (id, text) in &c.members {
            let _ = write!(
                b,
                "<div class=\"member\"><b>{}</b>{}</div>",
                escape(id),
                escape(text)
            );
        }
        let more = c.size.saturating_sub(c.members.len());
        if more > 0 {
            let _ = write!(
                b,
                "<div class=\"member more\">+{more} more (the clusters file lists every member)</div>"
            );
        }
        b.push_str("</div>");
    }
    b.push_str("<h2>Stages</h2><table><tr><th>stage</th><th>seconds</th></tr>");
    for (k, v) in [
        ("signatures (read, tokenize, hash, permute)", s.scan.seconds),
        ("rank by id, exact duplicates", s.cluster.order_seconds),
        ("LSH", s.cluster.lsh_seconds),
        ("confirm (all)", s.cluster.confirm_seconds),
        (
            if s.cluster.sets_from_signing {
                "of which taking the shingle sets kept from signing"
            } else {
                "of which loading shingle sets (re-reading the input)"
            },
            s.cluster.sets_seconds,
        ),
        ("cluster", s.cluster.cluster_seconds),
        ("write", s.write_seconds),
    ] {
        let _ = write!(b, "<tr><td>{k}</td><td class=\"n\">{v:.3}</td></tr>");
    }
    b.push_str("</table>");
    page("neardup dedup report", &b)
}

/// The `decontam --report FILE.html` page.
/// A task's name on the page (items without the task field have none).
fn task_name(t: &crate::stages::decontam::TaskHits) -> &str {
    t.task.as_deref().unwrap_or("(no task)")
}

/// A heading and its matches, each highlighted in its context; nothing without matches.
fn hits(b: &mut String, heading: &str, evidence: &[crate::stages::decontam::Evidence]) {
    if evidence.is_empty() {
        return;
    }
    let _ = write!(b, "<h3>{}</h3>", escape(heading));
    for e in evidence {
        let ctx = &e.context;
        let (hs, he) = e.highlight;
        let marked = if hs <= he
            && he <= ctx.len()
            && ctx.is_char_boundary(hs)
            && ctx.is_char_boundary(he)
        {
            format!(
                "{}<mark>{}</mark>{}",
                escape(&ctx[..hs]),
                escape(&ctx[hs..he]),
                escape(&ctx[he..])
            )
        } else {
            escape(ctx)
        };
        let _ = write!(
            b,
            "<div class=\"hit\"><b>{}</b> — matched <code>{}</code>\n{}</div>",
            escape(&e.id),
            escape(&e.ngram),
            marked
        );
    }
}

pub fn decontam_page(s: &DecontamSummary, inputs: &[String]) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>neardup decontamination report</h1><p class=\"muted\">{} · {}-grams · contract {}</p>",
        escape(&inputs.join(", ")),
        s.n,
        crate::CONTRACT_VERSION
    );
    b.push_str("<h2>Counts</h2><table>");
    row(&mut b, "documents read", s.documents);
    row(&mut b, "contaminated (dropped)", s.contaminated);
    row(&mut b, "documents written", s.documents_written);
    row(&mut b, "protected n-grams", s.protected_ngrams);
    row(&mut b, "seconds", format!("{:.3}", s.seconds));
    b.push_str("</table><h2>Protected files</h2><table><tr><th>file</th><th>texts</th><th>n-grams</th><th>documents caught</th></tr>");
    for f in &s.files {
        let _ = write!(b, "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&f.path), f.texts, f.ngrams, f.documents_caught);
    }
    b.push_str("</table>");
    if !s.tasks.is_empty() {
        let _ = write!(
            b,
            "<h2>Tasks ({})</h2><table><tr><th>file</th><th>task</th><th>texts</th><th>n-grams</th><th>documents caught</th></tr>",
            escape(s.task_field.as_deref().unwrap_or(""))
        );
        for t in &s.tasks {
            let _ = write!(b, "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                escape(&t.path), escape(task_name(t)), t.texts, t.ngrams, t.documents_caught);
        }
        b.push_str("</table><h2>Hits by task</h2>");
        for t in &s.tasks {
            hits(
                &mut b,
                &format!("{} · {}", t.path, task_name(t)),
                &t.evidence,
            );
        }
    }
    b.push_str("<h2>Hits</h2>");
    for f in &s.files {
        hits(&mut b, &f.path, &f.evidence);
    }
    page("neardup decontamination report", &b)
}
