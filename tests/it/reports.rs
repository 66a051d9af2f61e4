//! What users see: progress on stderr, JSON and HTML reports (checked in a real headless
//! browser when one is installed), S-curve pictures, `tune` and `inspect`.

use std::process::Command;

use crate::common::*;
use serde_json::Value;

fn browser() -> Option<String> {
    for b in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(b.to_string());
        }
    }
    if std::env::var("NEARDUP_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
        panic!("NEARDUP_REQUIRE_BROWSER=1 but no chromium is installed (apt-get install chromium)");
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** BROWSER TEST SKIPPED: no chromium (apt-get install chromium)\n"
    );
    None
}

/// Load a page in headless Chromium: the DOM after loading, and the console messages logged.
fn load_in_browser(b: &str, page: &std::path::Path) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(b)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn dedup_html_report_has_the_charts_and_clusters_and_loads_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.jsonl");
    let html = dir.path().join("r.html");
    let json = dir.path().join("r.json");
    ok(&neardup(&[
        "dedup",
        fixture("example.jsonl").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--report",
        json.to_str().unwrap(),
        "--engine",
        "cpu",
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    for needle in [
        "<svg",
        "class=\"chart scurve\"",
        "class=\"curve\"",
        "class=\"threshold\"",
        "class=\"chosen-threshold\"",
        "class=\"chart histogram\"",
        "class=\"bar\"",
        "class=\"measured\"",
        "Largest clusters",
        "class=\"member\"",
    ] {
        assert!(page.contains(needle), "page lacks {needle}");
    }
    assert!(
        !page.contains("http://")
            || page.matches("http://").count()
                == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "the page loads nothing from the network"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(r["similarity_buckets"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["pairs"].as_u64().unwrap() > 0));
    assert_eq!(r["largest_clusters"].as_array().unwrap().len(), 5);
    // A cluster larger than the members shown says how many more it has.
    let mut cut = 0;
    for c in r["largest_clusters"].as_array().unwrap() {
        let more = c["size"].as_u64().unwrap() - c["members"].as_array().unwrap().len() as u64;
        if more > 0 {
            cut += 1;
            assert!(
                page.contains(&format!("+{more} more")),
                "page lacks +{more} more"
            );
        }
    }
    assert_eq!(page.matches("class=\"member more\"").count(), cut);
    if let Some(b) = browser() {
        let (dom, log) = load_in_browser(&b, &html);
        assert!(
            console_errors(&log).is_empty(),
            "console errors: {:?}",
            console_errors(&log)
        );
        assert!(
            dom.matches("<svg").count() >= 2,
            "the SVG charts are in the DOM"
        );
        assert!(
            dom.contains("<polyline")
                && dom.contains("<circle")
                && dom.contains("<rect class=\"bar\"")
        );
    }
}

#[test]
fn decontam_html_report_highlights_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.jsonl");
    let html = dir.path().join("d.html");
    ok(&neardup(&[
        "decontam",
        fixture("decontam_probes.jsonl").to_str().unwrap(),
        "--protected",
        fixture("protected.jsonl").to_str().unwrap(),
        fixture("protected.txt").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("<mark>").count(),
        4,
        "one highlighted match per caught document"
    );
    // The shouted, punctuated leak is highlighted in its original form.
    let marked: Vec<&str> = page
        .split("<mark>")
        .skip(1)
        .map(|s| s.split("</mark>").next().unwrap())
        .collect();
    assert!(
        marked.iter().any(|m| m.contains(", ")
            && m.chars()
                .filter(|c| c.is_alphabetic())
                .all(|c| c.is_uppercase())),
        "{marked:?}"
    );
    if let Some(b) = browser() {
        let (dom, log) = load_in_browser(&b, &html);
        assert!(
            console_errors(&log).is_empty(),
            "{:?}",
            console_errors(&log)
        );
        assert_eq!(dom.matches("<mark>").count(), 4);
    }
}

#[test]
fn reports_escape_what_the_corpus_says() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    let t = "<script>alert(1)</script> the same words here again and again";
    std::fs::write(
        &inp,
        format!(
            "{}\n{}\n",
            serde_json::json!({"id": "<b>x</b>", "text": t}),
            serde_json::json!({"id": "y\"'&", "text": t}),
        ),
    )
    .unwrap();
    let html = dir.path().join("r.html");
    ok(&neardup(&[
        "dedup",
        inp.to_str().unwrap(),
        "-o",
        dir.path().join("o.jsonl").to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--engine",
        "cpu",
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<script>") && !page.contains("<b>x</b>"));
    assert!(
        page.contains("&lt;script&gt;")
            && page.contains("&lt;b&gt;x&lt;/b&gt;")
            && page.contains("y&quot;&#39;&amp;")
    );
}

#[test]
fn progress_goes_to_stderr_only_when_asked_or_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    synth(&big, 40000, 150);
    let out = dir.path().join("o.jsonl");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "dedup",
            big.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--engine",
            "cpu",
        ];
        args.extend_from_slice(extra);
        let o = neardup(&args);
        ok(&o);
        stderr(&o)
    };
    let always = run(&["--progress", "always"]);
    // Bar lines (only bars have "ETA"; the summary also says docs/s): the first pass's, and the
    // last pass's final state, written before the summary.
    let bar_lines: Vec<&str> = always.lines().filter(|l| l.contains("ETA")).collect();
    assert!(
        bar_lines
            .iter()
            .any(|l| l.contains("signatures") && l.contains("MiB")),
        "{always}"
    );
    assert!(
        bar_lines
            .iter()
            .any(|l| l.contains("writing") && l.contains("docs/s")),
        "{always}"
    );
    let summary = always.find("documents read").expect("a summary");
    assert!(always.rfind("writing").unwrap() < summary, "{always}");
    // Not a terminal here: auto draws nothing, never draws nothing; the summary always prints.
    for mode in ["auto", "never"] {
        let e = run(&["--progress", mode]);
        assert!(!e.contains("ETA"), "{mode}: {e}");
        assert!(e.contains("documents read"), "{mode}: {e}");
    }
    // --quiet: nothing at all on success.
    assert_eq!(run(&["--quiet", "--progress", "always"]), "");
}

#[test]
fn scurve_svg_draws_every_curve_with_its_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("c.svg");
    ok(&neardup(&[
        "scurve",
        "--bands",
        "16",
        "14",
        "20",
        "--rows",
        "8",
        "8",
        "5",
        "--svg",
        svg.to_str().unwrap(),
    ]));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(s.matches("class=\"curve\"").count(), 3);
    assert_eq!(s.matches("class=\"threshold\"").count(), 3);
    assert!(s.contains("threshold 0.7071") && s.contains("14 bands x 8 rows"));
    let o = neardup(&["scurve", "--bands", "16", "14", "--rows", "8"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn a_cluster_larger_than_the_members_shown_says_how_many_more() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    let base = "one two three four five six seven eight nine ten eleven twelve thirteen \
                fourteen fifteen sixteen seventeen eighteen nineteen twenty";
    let docs: Vec<(String, String)> = (0..7)
        .map(|i| (format!("d{i}"), format!("{base} extra{}", i % 2)))
        .collect();
    write_jsonl(&inp, &docs);
    let html = dir.path().join("r.html");
    ok(&neardup(&[
        "dedup",
        inp.to_str().unwrap(),
        "-o",
        dir.path().join("o.jsonl").to_str().unwrap(),
        "--report",
        html.to_str().unwrap(),
        "--engine",
        "cpu",
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("root d0 — 7 documents"),
        "one cluster of all seven"
    );
    assert_eq!(page.matches("class=\"member\"").count(), 4);
    assert!(page.contains("+3 more"), "the page says what it leaves out");
}

#[test]
fn tune_minimises_the_weighted_error_areas_for_estimate_confirmation() {
    let o = neardup(&[
        "tune",
        "--threshold",
        "0.8",
        "--num-perm",
        "128",
        "--confirm",
        "estimate",
    ]);
    ok(&o);
    assert!(
        stdout(&o).contains("best: --bands 8 --rows 16"),
        "{}",
        stdout(&o)
    );
    // Weighting false negatives heavily moves the threshold down: more bands.
    let o = neardup(&[
        "tune",
        "--threshold",
        "0.8",
        "--num-perm",
        "128",
        "--confirm",
        "none",
        "--fp-weight",
        "0.05",
        "--fn-weight",
        "0.95",
    ]);
    ok(&o);
    assert!(
        stdout(&o).contains("best: --bands 16 --rows 8"),
        "{}",
        stdout(&o)
    );
    let c = neardup::index::scurve::tune(0.5, 120, 0.5, 0.5);
    assert!(c.iter().all(|x| x.bands * x.rows == 120));
    assert!(c.windows(2).all(|w| w[0].cost <= w[1].cost));
    let best = neardup::LshParams {
        bands: c[0].bands,
        rows: c[0].rows,
    };
    assert!(
        (best.threshold() - 0.5).abs() < 0.15,
        "the chosen curve turns near 0.5: {best:?}"
    );
}

/// The `best: --bands B --rows R` line of `tune`.
fn tune_best(args: &[&str]) -> (String, String, String) {
    let mut v = vec!["tune"];
    v.extend_from_slice(args);
    let o = neardup(&v);
    ok(&o);
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("best: "))
        .unwrap_or_else(|| panic!("no best line: {out}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((w[1], w[3]), ("--bands", "--rows"), "{line}");
    (w[2].to_string(), w[4].to_string(), out)
}

#[test]
fn tune_for_exact_confirmation_keeps_the_recall_at_the_threshold() {
    // The default is dedup's default confirmation, exact Jaccard: the least work with
    // p(0.8) >= 0.95. 16 x 8 has p(0.8) = 0.9470, so 32 x 4.
    let (b, r, out) = tune_best(&["--threshold", "0.8"]);
    assert_eq!((b.as_str(), r.as_str()), ("32", "4"), "{out}");
    assert!(out.contains("p(0.8) = 1.0000"), "{out}");
    assert!(out.contains("work"), "{out}");
    // Every row shows p(threshold) and the work; the qualifying rows come first, least work
    // first, then the rest by p(threshold).
    let c = neardup::index::scurve::tune_for_recall(0.8, 128, 0.95);
    let meets = c.iter().take_while(|x| x.p_at_threshold >= 0.95).count();
    assert!(meets > 0 && c[meets..].iter().all(|x| x.p_at_threshold < 0.95));
    assert!(c[..meets].windows(2).all(|w| w[0].work <= w[1].work));
    assert!(c[meets..]
        .windows(2)
        .all(|w| w[0].p_at_threshold >= w[1].p_at_threshold));
    // A lower recall asked for allows less work: 16 x 8.
    let (b, r, _) = tune_best(&["--threshold", "0.8", "--recall", "0.9"]);
    assert_eq!((b.as_str(), r.as_str()), ("16", "8"));
    // No split reaches it: the most likely one, and a warning.
    let (b, r, out) = tune_best(&["--threshold", "0.3", "--num-perm", "2", "--recall", "0.99"]);
    assert_eq!((b.as_str(), r.as_str()), ("2", "1"));
    assert!(out.contains("warning: no split"), "{out}");

    // On the example, the recommendation finds at least every near duplicate 16 x 8 finds.
    let (b, r, _) = tune_best(&["--threshold", "0.8", "--confirm", "jaccard"]);
    let dir = tempfile::tempdir().unwrap();
    let near = |bands: &str, rows: &str| {
        let rep = dir.path().join(format!("r{bands}x{rows}.json"));
        let out = dir.path().join(format!("o{bands}x{rows}.jsonl"));
        ok(&neardup(&[
            "dedup",
            fixture("example.jsonl").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--report",
            rep.to_str().unwrap(),
            "--bands",
            bands,
            "--rows",
            rows,
            "--engine",
            "cpu",
        ]));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
        r["counts"]["near_duplicates"].as_u64().unwrap()
    };
    let (tuned, default) = (near(&b, &r), near("16", "8"));
    assert!(
        default >= 90,
        "the example plants near duplicates: {default}"
    );
    assert!(tuned >= default, "{b} x {r}: {tuned} < 16 x 8: {default}");
}

#[test]
fn inspect_explains_a_pair() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    std::fs::write(&inp, "{\"id\":\"a\",\"text\":\"the cat sat on the mat today\"}\n{\"id\":\"b\",\"text\":\"The cat sat on the mat again\"}\n").unwrap();
    let o = neardup(&[
        "inspect",
        "a",
        "b",
        inp.to_str().unwrap(),
        "--k",
        "3",
        "--json",
        "--bands",
        "128",
        "--rows",
        "1",
    ]);
    ok(&o);
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["shingles"], serde_json::json!([5, 5]));
    assert_eq!(r["shared_shingles"], 4);
    assert_eq!(r["jaccard"].as_f64().unwrap(), 4.0 / 6.0);
    assert_eq!(r["estimate"].as_f64().unwrap(), 0.65625);
    assert_eq!(r["colliding_bands"].as_array().unwrap().len(), 84);
    assert_eq!(r["shared"][0], "cat sat on");
    // The text form says where the exact Jaccard (4/6) stands against the threshold asked for.
    let text = |extra: &[&str]| {
        let mut args = vec!["inspect", "a", "b", inp.to_str().unwrap(), "--k", "3"];
        args.extend_from_slice(extra);
        let o = neardup(&args);
        ok(&o);
        stdout(&o)
    };
    assert!(text(&[]).contains("(below threshold 0.8)"), "{}", text(&[]));
    let at = text(&["--threshold", "0.6"]);
    assert!(at.contains("(at or above threshold 0.6)"), "{at}");
    let o = neardup(&[
        "inspect",
        "a",
        "b",
        inp.to_str().unwrap(),
        "--threshold",
        "1.5",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("threshold 1.5 is outside"));
    let o = neardup(&["inspect", "a", "zzz", inp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("zzz"));
    // A document against itself: identical, every band collides.
    let o = neardup(&["inspect", "b", "b", inp.to_str().unwrap(), "--json"]);
    ok(&o);
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["jaccard"].as_f64().unwrap(), 1.0);
    assert_eq!(r["colliding_bands"].as_array().unwrap().len(), 16);
}
