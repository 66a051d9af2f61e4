//! Parquet in and out, through the real binary: every command reads it, outputs keep the
//! input's schema and values, the same corpus as JSONL and as Parquet gives the same bytes
//! where the formats meet, and bad Parquet fails as bad JSONL does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::*;

/// The committed FineWeb-layout sample, written by pyarrow (testdata/parquet).
fn fineweb() -> PathBuf {
    root().join("testdata/parquet/fineweb-sample.parquet")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A whole Parquet file as one batch, and its row groups' sizes.
fn read_parquet(path: &Path) -> (RecordBatch, Vec<i64>) {
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let groups = b
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect();
    let schema = b.schema().clone();
    let batches: Vec<RecordBatch> = b.build().unwrap().map(|r| r.unwrap()).collect();
    (
        arrow_select::concat::concat_batches(&schema, &batches).unwrap(),
        groups,
    )
}

fn strings(batch: &RecordBatch, col: &str) -> Vec<Option<String>> {
    batch
        .column_by_name(col)
        .unwrap_or_else(|| panic!("no column {col}"))
        .as_string::<i32>()
        .iter()
        .map(|v| v.map(str::to_string))
        .collect()
}

/// `fixtures/corpus.jsonl` (id, text) and a `n` column, as Parquet in row groups of 64.
fn corpus_as_parquet(path: &Path) -> Vec<(String, String)> {
    let docs: Vec<(String, String)> = std::fs::read_to_string(fixture("corpus.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(docs.iter().map(|d| &d.0))),
            Arc::new(StringArray::from_iter_values(docs.iter().map(|d| &d.1))),
            Arc::new(Int64Array::from_iter_values(0..docs.len() as i64)),
        ],
    )
    .unwrap();
    write_parquet(path, &batch, 64);
    docs
}

/// The same corpus as JSONL and as Parquet: identical signatures (every format), clusters,
/// pairs and survivors, with the CPU engine and, where there is an adapter, the GPU engine.
#[test]
fn the_same_corpus_as_jsonl_and_as_parquet_gives_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("corpus.parquet");
    corpus_as_parquet(&pq);
    let jsonl = fixture("corpus.jsonl");
    let p = |n: &str| dir.path().join(n);
    for fmt in ["npy", "tsv", "parquet"] {
        for (name, input) in [("j", &jsonl), ("p", &pq)] {
            let out = p(&format!("{name}.{fmt}"));
            ok(&neardup(&[
                "signatures",
                s(input),
                "-o",
                s(&out),
                "--format",
                fmt,
                "--engine",
                "cpu",
            ]));
        }
        assert_eq!(
            sha256(&p(&format!("j.{fmt}"))),
            sha256(&p(&format!("p.{fmt}"))),
            "{fmt} signatures"
        );
    }
    for (name, input) in [("j", &jsonl), ("p", &pq)] {
        ok(&neardup(&[
            "dedup",
            s(input),
            "-o",
            s(&p(&format!("{name}.out.jsonl"))),
            "--clusters",
            s(&p(&format!("{name}.clusters.jsonl"))),
            "--pairs",
            s(&p(&format!("{name}.pairs.jsonl"))),
            "--engine",
            "cpu",
        ]));
    }
    assert_eq!(
        sha256(&p("j.clusters.jsonl")),
        sha256(&p("p.clusters.jsonl"))
    );
    assert_eq!(sha256(&p("j.pairs.jsonl")), sha256(&p("p.pairs.jsonl")));
    let ids = |f: &str| -> Vec<String> {
        std::fs::read_to_string(p(f))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
            .collect()
    };
    assert_eq!(ids("j.out.jsonl"), ids("p.out.jsonl"));
    assert!(
        std::fs::read_to_string(p("j.clusters.jsonl"))
            .unwrap()
            .lines()
            .count()
            > 5
    );
}

/// From the pyarrow-written FineWeb sample to Parquet: the survivors keep every column, type,
/// null, nested value and the schema's metadata, in input order, plus `minhash_cluster` (the
/// root's id; null for a document in no cluster). With `--tag-only` every row is there.
#[test]
fn parquet_output_keeps_the_inputs_schema_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let sample = fineweb();
    let (input, groups) = read_parquet(&sample);
    assert_eq!(groups, [100, 100, 100, 1], "the sample's row groups");
    for tag_only in [false, true] {
        let out = dir.path().join(format!("out-{tag_only}.parquet"));
        let clusters = dir.path().join(format!("c-{tag_only}.jsonl"));
        let mut args = vec![
            "dedup",
            s(&sample),
            "-o",
            s(&out),
            "--clusters",
            s(&clusters),
        ];
        if tag_only {
            args.push("--tag-only");
        }
        ok(&neardup(&args));
        let (got, _) = read_parquet(&out);
        // The schema: the input's, metadata included, and the tag column last.
        let schema = got.schema();
        assert_eq!(schema.metadata(), input.schema().metadata());
        assert!(schema.metadata().contains_key("huggingface"));
        assert_eq!(
            &schema.fields()[..input.num_columns()],
            &input.schema().fields()[..]
        );
        let tag = schema.field(input.num_columns());
        assert_eq!(
            (tag.name().as_str(), tag.data_type(), tag.is_nullable()),
            ("minhash_cluster", &DataType::Utf8, true)
        );
        // The rows: the input's, the dropped ones left out, every value equal.
        let mut root_of = std::collections::HashMap::new();
        for l in std::fs::read_to_string(&clusters).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            for m in v["members"].as_array().unwrap() {
                root_of.insert(
                    m.as_str().unwrap().to_string(),
                    v["root"].as_str().unwrap().to_string(),
                );
            }
        }
        let ids = strings(&input, "id");
        let keep: Vec<bool> = ids
            .iter()
            .map(|id| {
                let id = id.as_ref().unwrap();
                tag_only || root_of.get(id).is_none_or(|r| r == id)
            })
            .collect();
        let expected = arrow_select::filter::filter_record_batch(
            &input,
            &arrow_array::BooleanArray::from(keep.clone()),
        )
        .unwrap();
        assert_eq!(got.num_rows(), expected.num_rows());
        if !tag_only {
            assert!(got.num_rows() < input.num_rows(), "some rows are dropped");
        }
        for c in 0..input.num_columns() {
            assert_eq!(
                got.column(c).as_ref(),
                expected.column(c).as_ref(),
                "column {}",
                schema.field(c).name()
            );
        }
        let tags = strings(&got, "minhash_cluster");
        for (id, tag) in strings(&got, "id").iter().zip(&tags) {
            assert_eq!(tag.as_ref(), root_of.get(id.as_ref().unwrap()), "{id:?}");
        }
        assert!(tags.iter().any(Option::is_none) && tags.iter().any(Option::is_some));
    }
}

/// Parquet to JSONL: each row becomes a JSON object of every column (nulls written as null,
/// structs as objects, lists as arrays) with `meta.minhash_cluster`; JSONL to Parquet: the
/// columns arrow-json infers, values equal, nested objects as structs.
#[test]
fn parquet_to_jsonl_and_jsonl_to_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    ok(&neardup(&[
        "dedup",
        s(&fineweb()),
        "-o",
        s(&out),
        "--tag-only",
    ]));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 301);
    let r5 = &lines[5];
    assert_eq!(r5["url"], serde_json::Value::Null, "row 5's url is null");
    assert!(r5["metadata"]["source"].is_string());
    assert!(lines[4]["tags"].is_null() && lines[5]["tags"].is_array());
    assert!(r5["token_count"].is_i64() && r5["language_score"].is_f64());
    assert!(r5["meta"]["minhash_cluster"].is_string());
    let keys: Vec<&str> = lines[0]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "text",
            "id",
            "dump",
            "url",
            "date",
            "file_path",
            "language",
            "language_score",
            "token_count",
            "metadata",
            "tags",
            "meta"
        ]
    );

    // JSONL (with a nested `meta` and an integer field) to Parquet.
    let jsonl = dir.path().join("in.jsonl");
    let mut text = String::new();
    for (i, line) in std::fs::read_to_string(fixture("corpus.jsonl"))
        .unwrap()
        .lines()
        .enumerate()
    {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["n"] = i.into();
        v["meta"] = serde_json::json!({"src": format!("s{}", i % 3)});
        text.push_str(&v.to_string());
        text.push('\n');
    }
    std::fs::write(&jsonl, text).unwrap();
    let pq = dir.path().join("out.parquet");
    ok(&neardup(&["dedup", s(&jsonl), "-o", s(&pq), "--tag-only"]));
    let (got, _) = read_parquet(&pq);
    assert_eq!(got.num_rows(), 301);
    let schema = got.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "text", "n", "meta", "minhash_cluster"]);
    assert_eq!(
        got.column_by_name("n")
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>()
            .value(7),
        7
    );
    let meta: &StructArray = got.column_by_name("meta").unwrap().as_struct();
    assert_eq!(meta.column(0).as_string::<i32>().value(4), "s1");
    let corpus = std::fs::read_to_string(fixture("corpus.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(corpus.lines().next().unwrap()).unwrap();
    assert_eq!(strings(&got, "text")[0].as_deref(), first["text"].as_str());

    // Records whose fields cannot share columns: an error that suggests JSONL output.
    let clash = dir.path().join("clash.jsonl");
    std::fs::write(
        &clash,
        "{\"id\":\"a\",\"text\":\"x y z\",\"m\":{\"k\":1}}\n{\"id\":\"b\",\"text\":\"x y z\",\"m\":[1]}\n",
    )
    .unwrap();
    let bad = dir.path().join("bad.parquet");
    let o = neardup(&["dedup", s(&clash), "-o", s(&bad)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("-o OUT.jsonl"), "{}", stderr(&o));
    assert!(!bad.exists());
}

/// `signatures --format parquet`: the contract and parameters in the metadata, rows equal to
/// npy's; `compare` reads it against npy and tsv, and refuses other parameters.
#[test]
fn parquet_signature_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let input = fixture("corpus.jsonl");
    for (out, fmt, k) in [
        ("a.parquet", "parquet", "5"),
        ("a.npy", "npy", "5"),
        ("a.tsv", "tsv", "5"),
        ("k3.parquet", "parquet", "3"),
    ] {
        ok(&neardup(&[
            "signatures",
            s(&input),
            "-o",
            s(&p(out)),
            "--format",
            fmt,
            "--k",
            k,
        ]));
    }
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(p("a.parquet")).unwrap())
        .unwrap();
    let md = b.schema().metadata().clone();
    assert_eq!(md["neardup.contract"], "neardup-minhash-v1");
    assert_eq!(
        (
            md["neardup.k"].as_str(),
            md["neardup.num_perm"].as_str(),
            md["neardup.seed"].as_str()
        ),
        ("5", "128", "0")
    );
    assert!(md["neardup.engine"].starts_with("cpu"));
    let (batch, _) = read_parquet(&p("a.parquet"));
    let sig = batch.column_by_name("signature").unwrap();
    assert!(
        matches!(sig.data_type(), DataType::FixedSizeList(f, 128) if f.data_type() == &DataType::UInt32)
    );
    let npy = neardup::io::sigfile::read_signatures(s(&p("a.npy"))).unwrap();
    let pq = neardup::io::sigfile::read_signatures(s(&p("a.parquet"))).unwrap();
    assert_eq!(
        (npy.ids.clone(), npy.sigs.clone()),
        (pq.ids.clone(), pq.sigs.clone())
    );
    assert_eq!(batch.num_rows(), 301);
    for other in ["a.npy", "a.tsv", "a.parquet"] {
        let o = neardup(&["compare", s(&p("a.parquet")), s(&p(other))]);
        ok(&o);
        assert!(stdout(&o).contains("mismatches: 0"), "{}", stdout(&o));
    }
    let o = neardup(&["compare", s(&p("a.parquet")), s(&p("k3.parquet"))]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("k=3"), "{}", stderr(&o));
}

/// `decontam` reads Parquet inputs and protected files and writes the clean rows as Parquet,
/// values unchanged; `inspect` finds documents in Parquet.
#[test]
fn decontam_and_inspect_read_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = read_parquet(&fineweb());
    // Protect row 10's text: a Parquet file of one string column.
    let texts = strings(&input, "text");
    let protected = dir.path().join("evals.parquet");
    let schema = Arc::new(Schema::new(vec![Field::new(
        "question",
        DataType::Utf8,
        false,
    )]));
    let evals = RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from(vec![texts[10].clone().unwrap()])) as ArrayRef],
    )
    .unwrap();
    write_parquet(&protected, &evals, 10);
    let out = dir.path().join("clean.parquet");
    let o = neardup(&[
        "decontam",
        s(&fineweb()),
        "--protected",
        s(&protected),
        "-o",
        s(&out),
    ]);
    ok(&o);
    let (got, _) = read_parquet(&out);
    assert_eq!(got.schema(), input.schema(), "no column added");
    let ids = strings(&input, "id");
    let got_ids = strings(&got, "id");
    assert!(!got_ids.contains(&ids[10]), "the protected text is caught");
    assert!(got.num_rows() < input.num_rows() && got.num_rows() > 200);

    let o = neardup(&[
        "inspect",
        ids[0].as_deref().unwrap(),
        ids[1].as_deref().unwrap(),
        s(&fineweb()),
    ]);
    ok(&o);
    assert!(stdout(&o).contains("exact Jaccard"), "{}", stdout(&o));
}

/// Ids from a nested field (`metadata.key`) and from an integer column (`--numeric-ids`).
#[test]
fn nested_and_integer_id_columns() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40;
    let meta = StructArray::from(vec![(
        Arc::new(Field::new("key", DataType::Utf8, true)),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("k{i:03}")),
        )) as ArrayRef,
    )]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("num", DataType::Int64, false),
        Field::new("metadata", meta.data_type().clone(), true),
        Field::new("text", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(meta),
            Arc::new(StringArray::from_iter_values((0..n).map(|i| {
                format!("shared words of every document here number {}", i % 20)
            }))),
        ],
    )
    .unwrap();
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &batch, 16);
    let clusters = dir.path().join("c.jsonl");
    for args in [
        vec!["--id-field", "metadata.key"],
        vec!["--id-field", "num", "--numeric-ids"],
    ] {
        let mut a = vec![
            "dedup",
            s(&input),
            "-o",
            "/dev/stdout",
            "--clusters",
            s(&clusters),
        ];
        a.extend(args.iter().copied());
        let a: Vec<&str> = a
            .into_iter()
            .map(|x| if x == "/dev/stdout" { "-" } else { x })
            .collect();
        let o = neardup(&a);
        ok(&o);
        let c = std::fs::read_to_string(&clusters).unwrap();
        assert_eq!(c.lines().count(), 20, "{c}");
        let first: serde_json::Value = serde_json::from_str(c.lines().next().unwrap()).unwrap();
        let root = first["root"].as_str().unwrap();
        assert!(root == "k000" || root == "0", "{root}");
    }
}

/// Bad Parquet: the message names the file (and the row group and row, or the columns there
/// are), the exit is 1, and no output appears.
#[test]
fn bad_parquet_inputs_fail_clearly_with_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let fails = |args: &[&str], needles: &[&str]| {
        let o = neardup(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err} lacks {n:?}");
        }
        assert_eq!(
            dir_entries(&out),
            Vec::<String>::new(),
            "{args:?} left output"
        );
    };
    let o_jsonl = out.join("o.jsonl");
    let o_pq = out.join("o.parquet");
    let bytes = std::fs::read(fineweb()).unwrap();
    // Truncated: the footer is gone.
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    // Corrupt: pages overwritten, footer intact.
    let corrupt = dir.path().join("corrupt.parquet");
    let mut c = bytes.clone();
    for b in &mut c[100..20_000] {
        *b = 0x5a;
    }
    std::fs::write(&corrupt, &c).unwrap();
    for f in [&cut, &corrupt] {
        for o in [&o_jsonl, &o_pq] {
            fails(&["dedup", s(f), "-o", s(o)], &[s(f), "Parquet"]);
        }
        fails(&["signatures", s(f), "-o", s(&out.join("s.npy"))], &[s(f)]);
    }
    fails(
        &[
            "dedup",
            s(&fineweb()),
            "-o",
            s(&o_pq),
            "--text-field",
            "body",
        ],
        &[
            "no column `body`",
            "text, id, dump",
            "metadata.source",
            "--text-field",
        ],
    );
    fails(
        &[
            "dedup",
            s(&fineweb()),
            "-o",
            s(&o_jsonl),
            "--id-field",
            "nope",
        ],
        &["no column `nope`", "--id-field"],
    );
    fails(
        &[
            "dedup",
            s(&fineweb()),
            "-o",
            s(&o_jsonl),
            "--id-field",
            "url",
        ],
        &["row 5 (row group 0)", "field `url` is null"],
    );
    fails(
        &[
            "dedup",
            s(&fineweb()),
            "-o",
            s(&o_jsonl),
            "--id-field",
            "token_count",
        ],
        &["`token_count` is Int64", "--numeric-ids"],
    );
    fails(
        &[
            "dedup",
            s(&fineweb()),
            "-o",
            s(&o_jsonl),
            "--text-field",
            "token_count",
        ],
        &["`token_count` is Int64", "the text must be a string"],
    );
    // Null and empty values in later row groups, and a repeat across JSONL and Parquet.
    let n = 30;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("text", DataType::Utf8, true),
    ]));
    let make = |id: Box<dyn Fn(usize) -> Option<String>>,
                text: Box<dyn Fn(usize) -> Option<String>>| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from((0..n).map(&id).collect::<Vec<_>>())) as ArrayRef,
                Arc::new(StringArray::from((0..n).map(&text).collect::<Vec<_>>())),
            ],
        )
        .unwrap()
    };
    let t = |i: usize| Some(format!("words number {i} of a text"));
    let null_text = dir.path().join("null-text.parquet");
    write_parquet(
        &null_text,
        &make(
            Box::new(|i| Some(format!("d{i}"))),
            Box::new(move |i| (i != 23).then(|| t(i).unwrap())),
        ),
        10,
    );
    fails(
        &["dedup", s(&null_text), "-o", s(&o_pq)],
        &[
            s(&null_text),
            "row 23 (row group 2)",
            "field `text` is null",
        ],
    );
    let empty_id = dir.path().join("empty-id.parquet");
    write_parquet(
        &empty_id,
        &make(
            Box::new(|i| {
                Some(if i == 12 {
                    String::new()
                } else {
                    format!("d{i}")
                })
            }),
            Box::new(t),
        ),
        10,
    );
    fails(
        &["dedup", s(&empty_id), "-o", s(&o_jsonl)],
        &["row 12 (row group 1)", "field `id` is empty"],
    );
    let good = dir.path().join("good.parquet");
    write_parquet(
        &good,
        &make(Box::new(|i| Some(format!("d{i}"))), Box::new(t)),
        10,
    );
    let dup = dir.path().join("dup.jsonl");
    std::fs::write(
        &dup,
        "{\"id\":\"x\",\"text\":\"a b c\"}\n{\"id\":\"d17\",\"text\":\"a b c\"}\n",
    )
    .unwrap();
    fails(
        &["dedup", s(&good), s(&dup), "-o", s(&o_jsonl)],
        &["repeated id \"d17\"", "good.parquet row 17", "dup.jsonl:2"],
    );
    fails(
        &["signatures", s(&good), s(&dup), "-o", s(&out.join("s.npy"))],
        &["repeated id \"d17\"", "good.parquet row 17", "dup.jsonl:2"],
    );
    // Parquet inputs of two schemas cannot share one Parquet output.
    fails(
        &["dedup", s(&good), s(&fineweb()), "-o", s(&o_pq)],
        &["one schema", "-o OUT.jsonl"],
    );
    // Parquet on a stream.
    let o = neardup_stdin(
        &[
            "signatures",
            "-",
            "-o",
            s(&out.join("s.tsv")),
            "--format",
            "tsv",
        ],
        &good,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("name the file instead"),
        "{}",
        stderr(&o)
    );
    assert_eq!(dir_entries(&out), Vec::<String>::new());
}

/// JSONL and Parquet inputs in one run: read in order, ids unique across both, and each
/// written back in its own shape to a JSONL output.
#[test]
fn jsonl_and_parquet_inputs_mix() {
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("corpus.parquet");
    corpus_as_parquet(&pq);
    let extra = dir.path().join("extra.jsonl");
    std::fs::write(
        &extra,
        "{\"id\":\"zz-new\",\"text\":\"a text of its own here\",\"x\":1}\n",
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    ok(&neardup(&[
        "dedup",
        s(&pq),
        s(&extra),
        "-o",
        s(&out),
        "--tag-only",
    ]));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 302);
    assert!(lines[0].contains("\"n\":0"), "{}", lines[0]);
    assert_eq!(
        lines[301],
        "{\"id\":\"zz-new\",\"text\":\"a text of its own here\",\"x\":1,\"meta\":{\"minhash_cluster\":\"zz-new\"}}"
    );
}

/// pyarrow reads neardup's Parquet output and finds, column by column, the input's schema and
/// values (the survivors' rows). Runs where `NEARDUP_PYTHON` names a Python with pyarrow (CI
/// sets it, with `NEARDUP_REQUIRE_PYARROW=1`, which makes a missing one a failure).
#[test]
fn pyarrow_reads_the_output_as_the_input() {
    let python = std::env::var_os("NEARDUP_PYTHON").unwrap_or_else(|| "python3".into());
    let has = std::process::Command::new(&python)
        .args(["-c", "import pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        if std::env::var("NEARDUP_REQUIRE_PYARROW").is_ok_and(|v| v == "1") {
            panic!("NEARDUP_REQUIRE_PYARROW=1 but {python:?} has no pyarrow");
        }
        eprintln!("\n*** PYARROW TEST SKIPPED: {python:?} has no pyarrow (set NEARDUP_PYTHON).\n");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let clusters = dir.path().join("c.jsonl");
    ok(&neardup(&[
        "dedup",
        s(&fineweb()),
        "-o",
        s(&out),
        "--clusters",
        s(&clusters),
    ]));
    let o = std::process::Command::new(&python)
        .arg(root().join("tests/python/check_parquet_output.py"))
        .args([fineweb(), out, clusters])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `bench` and `verify` read Parquet too (`verify` where there is an adapter: CI has one).
#[test]
fn bench_and_verify_read_parquet() {
    let o = neardup(&["bench", s(&fineweb()), "--engine", "cpu", "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["corpus"]["documents"], 301, "{v}");
    let o = neardup(&["verify", s(&fineweb())]);
    if stderr(&o).contains("no GPU adapter")
        && std::env::var("NEARDUP_REQUIRE_GPU").as_deref() != Ok("1")
    {
        eprintln!("\n*** GPU PART SKIPPED: no adapter for `verify`.\n");
        return;
    }
    ok(&o);
    assert!(stdout(&o).contains("mismatches: 0"), "{}", stdout(&o));
}

/// A run over neardup's own Parquet output replaces its `minhash_cluster` column in place (no
/// second column), and the tags come out the same.
#[test]
fn a_second_run_replaces_the_cluster_column() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.parquet");
    let second = dir.path().join("second.parquet");
    ok(&neardup(&[
        "dedup",
        s(&fineweb()),
        "-o",
        s(&first),
        "--tag-only",
    ]));
    ok(&neardup(&[
        "dedup",
        s(&first),
        "-o",
        s(&second),
        "--tag-only",
    ]));
    let (a, _) = read_parquet(&first);
    let (b, _) = read_parquet(&second);
    assert_eq!(a.schema(), b.schema());
    let tagged = a
        .schema()
        .fields()
        .iter()
        .filter(|f| f.name() == "minhash_cluster")
        .count();
    assert_eq!(tagged, 1);
    assert_eq!(
        strings(&a, "minhash_cluster"),
        strings(&b, "minhash_cluster")
    );
}

/// A Parquet input whose pages carry checksums (CRC-32, as pyarrow writes them with
/// `write_page_checksum=True`) is read as it is; with one text byte changed, it is an error
/// naming the file, and nothing is written.
#[test]
fn page_checksums_are_verified() {
    let dir = tempfile::tempdir().unwrap();
    let good = root().join("testdata/parquet/checksummed.parquet");
    let out = dir.path().join("out.jsonl");
    ok(&neardup(&["dedup", s(&good), "-o", s(&out)]));
    assert_eq!(lines_of(&out).len(), 3);
    let mut bytes = std::fs::read(&good).unwrap();
    let at = bytes
        .windows(8)
        .position(|w| w == b"lazy dog")
        .expect("the text is in a plain page");
    bytes[at] = b'L';
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, bytes).unwrap();
    let out2 = dir.path().join("out2.jsonl");
    let o = neardup(&["dedup", s(&bad), "-o", s(&out2)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("bad.parquet"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("CRC checksum mismatch"),
        "{}",
        stderr(&o)
    );
    assert!(!out2.exists());
}

/// `--id-field @row`: records without ids are named by their input and place (a JSONL file's
/// line from 1, a Parquet file's row from 0, padded to 12 digits): the clusters are those of
/// the same records given those ids, in memory and out of core.
#[test]
fn row_ids_name_records_by_input_and_place() {
    let dir = tempfile::tempdir().unwrap();
    let records = read_jsonl(&fixture("example.jsonl"));
    let texts: Vec<String> = records
        .iter()
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect();
    // JSONL without ids, and the same records with the ids @row gives them.
    let bare = dir.path().join("bare.jsonl");
    let named = dir.path().join("named.jsonl");
    let line = |t: &str| serde_json::json!({ "text": t }).to_string();
    let body: Vec<String> = texts.iter().map(|t| line(t)).collect();
    std::fs::write(&bare, body.join("\n") + "\n").unwrap();
    let named_body: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({ "id": format!("{}:{:012}", s(&bare), i + 1), "text": t })
                .to_string()
        })
        .collect();
    std::fs::write(&named, named_body.join("\n") + "\n").unwrap();
    let clusters = |name: &str, input: &Path, extra: &[&str]| {
        let c = dir.path().join(format!("{name}.clusters.jsonl"));
        let o = dir.path().join(format!("{name}.out.jsonl"));
        let mut args = vec!["dedup", s(input), "-o", s(&o), "--clusters", s(&c)];
        args.extend(["--engine", "cpu"]);
        args.extend(extra);
        ok(&neardup(&args));
        std::fs::read_to_string(&c).unwrap()
    };
    let want = clusters("named", &named, &[]);
    assert!(want.lines().count() > 40, "{want}");
    assert_eq!(clusters("bare", &bare, &["--id-field", "@row"]), want);
    let work = dir.path().join("work");
    assert_eq!(
        clusters(
            "bare-sharded",
            &bare,
            &["--id-field", "@row", "--work-dir", s(&work)]
        ),
        want
    );
    // Parquet: a text column alone; rows from 0.
    let pq = dir.path().join("bare.parquet");
    let batch = RecordBatch::try_from_iter([(
        "text",
        Arc::new(arrow_array::StringArray::from(texts.clone())) as arrow_array::ArrayRef,
    )])
    .unwrap();
    write_parquet(&pq, &batch, 100);
    let named_pq = dir.path().join("named-pq.jsonl");
    let named_body: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({ "id": format!("{}:{:012}", s(&pq), i), "text": t }).to_string()
        })
        .collect();
    std::fs::write(&named_pq, named_body.join("\n") + "\n").unwrap();
    assert_eq!(
        clusters("bare-pq", &pq, &["--id-field", "@row"]),
        clusters("named-pq", &named_pq, &[])
    );
    // Without @row, a file without ids is still an error naming the field.
    refused_with(
        &["dedup", s(&bare), "-o", s(&dir.path().join("x.jsonl"))],
        &["bare.jsonl:1", "id"],
    );
}
