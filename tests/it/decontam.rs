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
    // A protected text of fewer than 13 words yields no 13-gram: under the strict n-gram rule
    // (short items off) it protects nothing; by default (8 words and more) it is protected
    // whole, and only a copy of all its words catches.
    let twelve = "only twelve words are in this protected text so it has none";
    let mut strict = ProtectedSet::new(13).unwrap().with_short_items(0);
    strict.add_texts("short", [twelve]);
    assert_eq!(strict.len(), 0);
    assert!(!contaminated(&format!("say {twelve} again"), &strict, 13));
    let mut short = ProtectedSet::new(13).unwrap();
    assert_eq!(short.short_min(), 8);
    short.add_texts("short", [twelve]);
    assert_eq!(short.len(), 1);
    assert!(contaminated(&format!("Say: {twelve}, again"), &short, 13));
    assert!(!contaminated(
        "only twelve words are in this protected text so it has",
        &short,
        13
    ));
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

/// With short items protected (`--protect-short MIN`, by default 8), an item of MIN to n - 1
/// words is caught by a verbatim copy inside a document, at any position and in any case, and
/// not by a copy missing a word; shorter items still protect nothing; the report counts both
/// kinds. `--protect-short off` is the strict n-gram rule.
#[test]
fn short_items_are_protected_whole_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let eval = dir.path().join("eval.jsonl");
    // 12 words (under 13), 8 words (the default minimum) and 5 words (under it).
    let q12 = "which planet in the solar system has the most known natural moons";
    let q8 = "name the longest river that flows through egypt";
    let q5 = "what is two plus two";
    std::fs::write(
        &eval,
        format!("{{\"id\":\"a\",\"q\":\"{q12}\"}}\n{{\"id\":\"b\",\"q\":\"{q8}\"}}\n{{\"id\":\"c\",\"q\":\"{q5}\"}}\n"),
    )
    .unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    let docs = [
        (
            "d12",
            format!("Trivia night. {} Answer: Saturn.", q12.to_uppercase()),
        ),
        ("d8", format!("{q8}? The Nile, of course")),
        ("d5", format!("kids ask {q5} and laugh")),
        (
            "d11",
            "which planet in the solar system has the most known natural".to_string(),
        ),
        (
            "clean",
            "a document about gardening and the weather in spring".to_string(),
        ),
    ];
    let mut t = String::new();
    for (id, text) in &docs {
        t.push_str(&serde_json::json!({"id": id, "text": text}).to_string());
        t.push('\n');
    }
    std::fs::write(&corpus, t).unwrap();
    let out = dir.path().join("clean.jsonl");
    let report = dir.path().join("r.json");
    let run = |extra: &[&str]| -> Vec<String> {
        let mut a = vec!["--report", s(&report)];
        a.extend_from_slice(extra);
        decontam(&corpus, &eval, &out, &a);
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let r = |k: &str| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        v["protected_files"][0][k].clone()
    };
    // Off: nothing shorter than 13 words protects.
    assert_eq!(
        run(&["--protect-short", "off"]),
        ["d12", "d8", "d5", "d11", "clean"]
    );
    assert_eq!(
        (r("texts_too_short"), r("texts_protected_whole")),
        (3.into(), 0.into())
    );
    let params = |k: &str| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        v["parameters"][k].clone()
    };
    assert_eq!(params("protect_short"), 0);
    // The default (SPEC §4): down to 8 words; the flag without a value is the same.
    for extra in [&[][..], &["--protect-short"]] {
        assert_eq!(run(extra), ["d5", "d11", "clean"]);
        assert_eq!(
            (r("texts_too_short"), r("texts_protected_whole")),
            (1.into(), 2.into())
        );
        assert_eq!(params("protect_short"), 8);
    }
    // Down to 5 words.
    assert_eq!(run(&["--protect-short", "5"]), ["d11", "clean"]);
    assert_eq!(
        (r("texts_too_short"), r("texts_protected_whole")),
        (0.into(), 3.into())
    );
    // Down to 9: the 8-word item protects nothing again.
    assert_eq!(run(&["--protect-short", "9"]), ["d8", "d5", "d11", "clean"]);
}

/// `--join-fields`: an item's question and answer are one text, so a document that copies the
/// end of the question and the start of the answer (no 13 words of either alone) is caught; a
/// document that copies neither is not. Off, each value is its own text.
#[test]
fn joined_fields_catch_ngrams_across_question_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let eval = dir.path().join("eval.jsonl");
    let q =
        "in which year did the first crewed landing on the moon take place according to the record";
    let ans = "it was in nineteen sixty nine during the apollo eleven mission of nasa";
    std::fs::write(
        &eval,
        format!(
            "{}\n",
            serde_json::json!({"id": "x", "question": q, "answer": ans})
        ),
    )
    .unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    // The last 7 words of the question and the first 6 of the answer: 13 words across both.
    let across = "on the moon take place according to the record it was in nineteen sixty";
    let t = format!(
        "{}\n{}\n",
        serde_json::json!({"id": "across", "text": format!("notes: {across} and so on")}),
        serde_json::json!({"id": "clean", "text": "a note about the moon and the record of a year"}),
    );
    std::fs::write(&corpus, t).unwrap();
    let out = dir.path().join("clean.jsonl");
    let run = |extra: &[&str]| -> usize {
        decontam(&corpus, &eval, &out, extra);
        std::fs::read_to_string(&out).unwrap().lines().count()
    };
    assert_eq!(run(&[]), 2, "off: no 13-gram of either value alone");
    assert_eq!(
        run(&["--join-fields"]),
        1,
        "joined: the 13-gram across both is caught"
    );
}

/// `--min-score`: a long document with one protected 13-gram (a small share of its words) stays,
/// a near copy of the protected text goes; `--mode tag` keeps both and records the score, the
/// matched windows and the source in `meta.decontam`, clean lines untouched.
#[test]
fn scores_decide_and_tags_record_what_was_found() {
    use crate::common::*;
    let dir = tempfile::tempdir().unwrap();
    let eval = dir.path().join("eval.txt");
    let item = "the committee finally agreed that the bridge over the northern river would be \
                rebuilt in stone before the winter floods arrived";
    std::fs::write(&eval, item).unwrap();
    let filler: Vec<String> = (0..600).map(|i| format!("w{i}")).collect();
    let long = format!(
        "{} {} {}",
        filler[..300].join(" "),
        item.split_whitespace()
            .take(15)
            .collect::<Vec<_>>()
            .join(" "),
        filler[300..].join(" ")
    );
    let copy = format!("Minutes: {item}.");
    let corpus = dir.path().join("corpus.jsonl");
    let clean_line =
        serde_json::json!({"id": "clean", "text": "nothing to see here at all"}).to_string();
    std::fs::write(
        &corpus,
        format!(
            "{}\n{}\n{clean_line}\n",
            serde_json::json!({"id": "long", "text": long}),
            serde_json::json!({"id": "copy", "text": copy}),
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let run = |extra: &[&str]| -> Vec<serde_json::Value> {
        decontam(&corpus, &eval, &out, extra);
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let ids = |v: &[serde_json::Value]| -> Vec<String> {
        v.iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(&run(&[])),
        ["clean"],
        "by default one 13-gram is enough"
    );
    assert_eq!(ids(&run(&["--min-score", "0.5"])), ["long", "clean"]);
    assert_eq!(
        ids(&run(&["--min-score", "1"])),
        ["long", "copy", "clean"],
        "the copy has an uncovered word"
    );
    let tagged = run(&["--mode", "tag"]);
    assert_eq!(ids(&tagged), ["long", "copy", "clean"]);
    let t = &tagged[0]["meta"]["decontam"];
    let score = t["score"].as_f64().unwrap();
    assert!(score > 0.0 && score < 0.05, "{t}");
    assert!(t["matched"].as_u64().unwrap() >= 1);
    assert_eq!(t["sources"], serde_json::json!([s(&eval)]));
    let c = &tagged[1]["meta"]["decontam"];
    assert!(c["score"].as_f64().unwrap() > 0.9, "{c}");
    assert_eq!(
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .nth(2)
            .unwrap(),
        clean_line
    );
    // Tags into Parquet: a `decontam` column holding the object JSONL records get, null for a
    // clean row.
    let pq = dir.path().join("x.parquet");
    ok(&neardup(&[
        "decontam",
        s(&corpus),
        "--protected",
        s(&eval),
        "-o",
        s(&pq),
        "--mode",
        "tag",
    ]));
    let got: Vec<Option<serde_json::Value>> = parquet_string_column(&pq, "decontam")
        .1
        .unwrap()
        .iter()
        .map(|v| v.as_ref().map(|j| serde_json::from_str(j).unwrap()))
        .collect();
    assert_eq!(got[0].as_ref(), Some(t));
    assert_eq!(got[1].as_ref(), Some(c));
    assert_eq!(got[2], None);
    // Out of range: refused before any work.
    std::fs::remove_file(&out).ok();
    let o = neardup(&[
        "decontam",
        s(&corpus),
        "--protected",
        s(&eval),
        "-o",
        s(&out),
        "--min-score",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("outside (0, 1]"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// `--task-field`: the report counts documents caught per task of each protected file, with
/// evidence per task; a document caught by two tasks of one file counts once for the file; items
/// without the field form a task of their own; the field's value is not protected. Without the
/// flag the report has neither the key nor the parameter.
#[test]
fn task_fields_break_the_catch_down_by_task() {
    let dir = tempfile::tempdir().unwrap();
    let eval = dir.path().join("bench.jsonl");
    let arith = "what is the sum of seventeen and twenty five when both are written out as words";
    let arith2 =
        "how many apples remain if a farmer with forty apples sells nineteen of them today";
    let geo =
        "which river flows through the capital city of the country that borders the alps north";
    let loose = "a question asked without any task name at all in a benchmark file of many kinds";
    let lines = [
        serde_json::json!({"id": "a1", "task": "arithmetic", "input": arith}),
        serde_json::json!({"id": "a2", "task": "arithmetic", "input": arith2}),
        serde_json::json!({"id": "g1", "task": "geography", "input": geo, "target": "the rhine"}),
        serde_json::json!({"id": "x1", "input": loose}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&eval, body).unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    let docs = [
        ("d-arith", format!("copied: {arith}")),
        ("d-arith2", format!("{arith2} and more")),
        ("d-both", format!("{arith} then {geo}")),
        ("d-loose", loose.to_string()),
        (
            "d-task-name",
            "arithmetic geography arithmetic geography".to_string(),
        ),
        (
            "d-clean",
            "nothing from the benchmark is in this one".to_string(),
        ),
    ];
    let t: String = docs
        .iter()
        .map(|(id, text)| format!("{}\n", serde_json::json!({"id": id, "text": text})))
        .collect();
    std::fs::write(&corpus, t).unwrap();
    let out = dir.path().join("clean.jsonl");
    let report = dir.path().join("report.json");
    let page = dir.path().join("report.html");
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut a = vec!["--report", s(&report), "--report", s(&page)];
        a.extend_from_slice(extra);
        decontam(&corpus, &eval, &out, &a);
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
    };
    let plain = run(&[]);
    assert!(plain.get("protected_tasks").is_none(), "{plain}");
    assert!(plain["parameters"].get("task_field").is_none());
    assert!(!std::fs::read_to_string(&page).unwrap().contains("Tasks ("));
    let plain_out = std::fs::read_to_string(&out).unwrap();

    let r = run(&["--task-field", "task"]);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        plain_out,
        "the same documents caught"
    );
    assert_eq!(r["parameters"]["task_field"], "task");
    assert_eq!(r["counts"]["contaminated"], 4);
    let tasks = r["protected_tasks"].as_array().unwrap();
    let by = |name: Option<&str>| {
        tasks
            .iter()
            .find(|t| t["task"].as_str() == name)
            .unwrap_or_else(|| panic!("no task {name:?} in {tasks:?}"))
    };
    let (a, g, none) = (by(Some("arithmetic")), by(Some("geography")), by(None));
    assert_eq!(tasks.len(), 3);
    assert_eq!(a["documents_caught"], 3, "d-arith, d-arith2, d-both");
    assert_eq!(a["texts"], 2, "the task's name is no text");
    assert_eq!(g["documents_caught"], 1, "d-both");
    assert_eq!(g["texts"], 2, "input and target");
    assert_eq!(none["documents_caught"], 1, "d-loose");
    let ids = |t: &serde_json::Value| -> Vec<String> {
        t["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(a), ["d-arith", "d-arith2", "d-both"]);
    assert_eq!(ids(g), ["d-both"]);
    // The file caught d-both once, though two of its tasks did.
    assert_eq!(r["protected_files"][0]["documents_caught"], 4);
    assert_eq!(
        r["protected_files"][0]["documents_caught"],
        plain["protected_files"][0]["documents_caught"]
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for needle in [
        "Tasks (task)",
        "arithmetic",
        "geography",
        "(no task)",
        "Hits by task",
    ] {
        assert!(html.contains(needle), "the page lacks {needle:?}");
    }
    // Tags name the tasks.
    std::fs::remove_file(&report).ok();
    decontam(
        &corpus,
        &eval,
        &out,
        &["--task-field", "task", "--mode", "tag"],
    );
    let both: serde_json::Value = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["id"] == "d-both")
        .unwrap();
    let d = &both["meta"]["decontam"];
    assert_eq!(d["sources"], serde_json::json!([s(&eval)]));
    let mut names: Vec<&str> = d["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["arithmetic", "geography"]);
    decontam(&corpus, &eval, &out, &["--task-field", "task"]);
    assert!(!std::fs::read_to_string(&out).unwrap().contains("\"tasks\""));
}

/// `neardup decontam CORPUS --protected EVAL -o OUT EXTRA...`, which must succeed.
fn decontam(
    corpus: &std::path::Path,
    eval: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) {
    use crate::common::*;
    let mut a = vec!["decontam", s(corpus), "--protected", s(eval), "-o", s(out)];
    a.extend_from_slice(extra);
    ok(&neardup(&a));
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// A protected file whose content is JSONL but whose name is not `.jsonl` is read whole (SPEC
/// §4 goes by the name), and the run warns, naming it; one named `.jsonl`, or a plain text,
/// gets no such warning.
#[test]
fn jsonl_content_under_another_name_is_named_in_a_warning() {
    use crate::common::*;
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("c.jsonl");
    write_jsonl(
        &corpus,
        &[("a".into(), "nothing to see in this document at all".into())],
    );
    let item = r#"{"question": "what is the boiling point of water at sea level in kelvin degrees", "answer": "373"}"#;
    let out = dir.path().join("out.jsonl");
    for (name, warned) in [
        ("evals.json", true),
        ("evals.jsonl", false),
        ("notes.txt", false),
    ] {
        let p = dir.path().join(name);
        let body = if name == "notes.txt" {
            "just a paragraph of plain protected prose\n".to_string()
        } else {
            format!("{item}\n")
        };
        std::fs::write(&p, body).unwrap();
        let o = neardup(&[
            "decontam",
            corpus.to_str().unwrap(),
            "--protected",
            p.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        ok(&o);
        let said = stderr(&o).contains(&format!(
            "protected file {} is read as one whole text",
            p.display()
        ));
        assert_eq!(said, warned, "{name}: {}", stderr(&o));
    }
}
