//! Bad input, faults and limits, through the real binary: every failure is a clear message
//! naming the file, the line and the field, a non-zero exit, and no output file at all (not
//! even an empty or partial one).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        Case {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }
    fn out(&self) -> String {
        self.path("out.jsonl").to_str().unwrap().to_string()
    }
    /// Run, expect failure (exit 1) with every `needle` in the message, and no new file.
    fn fails(&self, args: &[&str], needles: &[&str]) {
        let before = dir_entries(self.dir.path());
        refused_with(args, needles);
        assert_eq!(
            dir_entries(self.dir.path()),
            before,
            "no output file may appear for {args:?}"
        );
    }
    fn dedup_fails(&self, input: &str, needles: &[&str]) {
        let out = self.out();
        self.fails(&["dedup", input, "-o", &out, "--engine", "cpu"], needles);
    }
}

const GOOD: &str = "{\"id\":\"a\",\"text\":\"one two three four five six\"}\n";

#[test]
fn a_line_that_is_not_json() {
    let c = Case::new();
    let p = c.write(
        "in.jsonl",
        format!("{GOOD}{{\"id\": \"b\", \"text\": \n").as_bytes(),
    );
    c.dedup_fails(&p, &["in.jsonl:2", "not valid JSON"]);
}

#[test]
fn a_record_that_is_not_an_object() {
    let c = Case::new();
    for (bad, kind) in [
        ("[1, 2]", "an array"),
        ("\"text\"", "a string"),
        ("42", "a number"),
        ("null", "null"),
    ] {
        let p = c.write(
            "in.jsonl",
            format!("{GOOD}{GOOD}{bad}\n")
                .replace("\"a\"", "\"a1\"")
                .as_bytes(),
        );
        let p2 = std::fs::read_to_string(&p)
            .unwrap()
            .replacen("\"a1\"", "\"a2\"", 1);
        std::fs::write(&p, p2).unwrap();
        c.dedup_fails(&p, &["in.jsonl:3", kind, "not a JSON object"]);
    }
}

#[test]
fn missing_or_mistyped_id_and_text() {
    let c = Case::new();
    let cases: [(&str, &[&str]); 9] = [
        (
            "{\"text\":\"x\"}",
            &[
                "in.jsonl:2",
                "field `id`",
                "missing",
                "fields are \"text\"",
                "--id-field",
            ],
        ),
        (
            "{\"id\":7,\"text\":\"x\"}",
            &["in.jsonl:2", "field `id`", "number", "--numeric-ids"],
        ),
        (
            "{\"id\":null,\"text\":\"x\"}",
            &["in.jsonl:2", "field `id`", "null"],
        ),
        (
            // Past 64 bits: serde_json reads it as a float, and the message says both.
            "{\"id\":123456789012345678901234567890,\"text\":\"x\"}",
            &[
                "in.jsonl:2",
                "field `id`",
                "not a 64-bit integer",
                "past 64 bits",
            ],
        ),
        (
            "{\"id\":\"\",\"text\":\"x\"}",
            &["in.jsonl:2", "field `id`", "empty"],
        ),
        (
            "{\"id\":\"b\",\"content\":\"x\"}",
            &[
                "in.jsonl:2",
                "field `text`",
                "missing",
                "fields are \"id\", \"content\"",
                "--text-field",
            ],
        ),
        (
            "{\"id\":\"b\",\"text\":3.5}",
            &["in.jsonl:2", "field `text`", "number"],
        ),
        (
            "{\"id\":\"b\",\"text\":{\"t\":1}}",
            &["in.jsonl:2", "field `text`", "an object"],
        ),
        (
            "{\"id\":[\"b\"],\"text\":\"x\"}",
            &["in.jsonl:2", "field `id`", "an array"],
        ),
    ];
    for (line, needles) in cases {
        let p = c.write("in.jsonl", format!("{GOOD}{line}\n").as_bytes());
        c.dedup_fails(&p, needles);
    }
    // A number id is fine when asked for, and so is another id field.
    let p = c.write(
        "in.jsonl",
        b"{\"id\":7,\"text\":\"x y\"}\n{\"id\":8,\"text\":\"z\"}\n",
    );
    let out = c.out();
    ok(&neardup(&[
        "dedup",
        &p,
        "-o",
        &out,
        "--engine",
        "cpu",
        "--numeric-ids",
    ]));
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("\"minhash_cluster\":\"7\""));
    std::fs::remove_file(&out).unwrap();
    let p = c.write(
        "in.jsonl",
        b"{\"id\":7,\"doc_id\":\"k\",\"body\":\"x y\"}\n",
    );
    ok(&neardup(&[
        "dedup",
        &p,
        "-o",
        &out,
        "--engine",
        "cpu",
        "--id-field",
        "doc_id",
        "--text-field",
        "body",
    ]));
}

#[test]
fn repeated_ids_in_one_file_and_across_files() {
    let c = Case::new();
    let p = c.write(
        "in.jsonl",
        format!("{GOOD}{{\"id\":\"b\",\"text\":\"x\"}}\n{GOOD}").as_bytes(),
    );
    c.dedup_fails(&p, &["repeated id \"a\"", "in.jsonl:1", "in.jsonl:3"]);
    let q = c.write("second.jsonl", GOOD.as_bytes());
    let only = c.write(
        "in.jsonl",
        b"{\"id\":\"z\",\"text\":\"x\"}\n{\"id\":\"a\",\"text\":\"y\"}\n",
    );
    let out = c.out();
    c.fails(
        &["dedup", &only, &q, "-o", &out, "--engine", "cpu"],
        &["repeated id \"a\"", "in.jsonl:2", "second.jsonl:1"],
    );
    // signatures refuses them too, and writes none of its three files.
    let sig = c.path("s.npy").to_str().unwrap().to_string();
    c.fails(
        &["signatures", &only, &q, "-o", &sig, "--engine", "cpu"],
        &["repeated id \"a\"", "in.jsonl:2", "second.jsonl:1"],
    );
    // Of several repeats, both name the one met first in input order ("b", though "a" sorts
    // first), with the earliest line that had its id.
    let two = c.write(
        "two.jsonl",
        b"{\"id\":\"b\",\"text\":\"x\"}\n{\"id\":\"a\",\"text\":\"x\"}\n\
          {\"id\":\"b\",\"text\":\"x\"}\n{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\",\"text\":\"x\"}\n",
    );
    let named = [
        "repeated id \"b\": at ",
        "two.jsonl:1 and again at ",
        "two.jsonl:3;",
    ];
    c.dedup_fails(&two, &named);
    c.fails(&["signatures", &two, "-o", &sig, "--engine", "cpu"], &named);
    // A repeat, then (past the first chunk the reader cuts, 256 KiB) a line that is not JSON:
    // both name the repeat, which comes first. (signatures stops at it; dedup, which checks
    // ids after its first pass, looks for one when that pass fails.)
    let filler = "{\"id\":\"f\",\"text\":\"padding words here\"}\n".len();
    let mut body = String::from("{\"id\":\"b\",\"text\":\"x\"}\n{\"id\":\"b\",\"text\":\"x\"}\n");
    for i in 0..(400 << 10) / filler {
        body.push_str(&format!(
            "{{\"id\":\"f{i}\",\"text\":\"padding words here\"}}\n"
        ));
    }
    body.push_str("{\"id\": \"late\", \"text\": \n");
    let late = c.write("late.jsonl", body.as_bytes());
    let named = [
        "repeated id \"b\": at ",
        "late.jsonl:1 and again at ",
        "late.jsonl:2;",
    ];
    c.dedup_fails(&late, &named);
    c.fails(
        &["signatures", &late, "-o", &sig, "--engine", "cpu"],
        &named,
    );
}

#[test]
fn invalid_utf8_inside_a_string_and_raw_invalid_bytes() {
    let c = Case::new();
    let p = c.write("in.jsonl", b"{\"id\":\"a\",\"text\":\"caf\xe9 au lait\"}\n");
    c.dedup_fails(&p, &["in.jsonl:1", "UTF-8"]);
    let p = c.write("in.jsonl", b"{\"id\":\"a\",\xfe\"text\":\"x\"}\n");
    c.dedup_fails(&p, &["in.jsonl:1", "UTF-8"]);
    let p = c.write("in.jsonl", format!("{GOOD}\u{0}\u{1}garbage\n").as_bytes());
    c.dedup_fails(&p, &["in.jsonl:2", "not valid JSON"]);
}

#[test]
fn truncated_compressed_inputs() {
    let c = Case::new();
    let corpus = std::fs::read(fixture("corpus.jsonl")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&corpus).unwrap();
    let gz = gz.finish().unwrap();
    let p = c.write("in.jsonl.gz", &gz[..gz.len() / 2]);
    c.dedup_fails(&p, &["in.jsonl.gz", "truncated"]);
    let zst = zstd::encode_all(&corpus[..], 3).unwrap();
    let p = c.write("in.jsonl.zst", &zst[..zst.len() / 2]);
    c.dedup_fails(&p, &["in.jsonl.zst", "truncated"]);
}

/// A JSONL file that starts with a UTF-8 byte-order mark (as some Windows editors save it) is
/// refused with a message that says so and how to strip it, not serde's "expected value at line
/// 1 column 1"; so is a protected file, and a line that starts with one further down (files
/// joined with their marks).
#[test]
fn a_byte_order_mark_is_named_with_its_fix() {
    let c = Case::new();
    let p = c.write("bom.jsonl", format!("\u{feff}{GOOD}").as_bytes());
    let needles = [
        "bom.jsonl:1",
        "the file starts with a UTF-8 byte-order mark",
        "sed -i '1s/^\\xEF\\xBB\\xBF//'",
    ];
    c.dedup_fails(&p, &needles);
    let out = c.out();
    let sig = c.path("s.npy").to_str().unwrap().to_string();
    c.fails(&["signatures", &p, "-o", &sig, "--engine", "cpu"], &needles);
    let good = c.write("good.jsonl", GOOD.as_bytes());
    c.fails(
        &["decontam", &p, "--protected", &good, "-o", &out],
        &needles,
    );
    c.fails(
        &["decontam", &good, "--protected", &p, "-o", &out],
        &needles,
    );
    // Further down: the line, not the file.
    let joined = c.write(
        "joined.jsonl",
        format!("{GOOD}\u{feff}{}", GOOD.replace("\"a\"", "\"b\"")).as_bytes(),
    );
    c.dedup_fails(
        &joined,
        &[
            "joined.jsonl:2",
            "the line starts with a UTF-8 byte-order mark",
        ],
    );
    // Without a mark the same record is read.
    ok(&neardup(&["dedup", &good, "-o", &out, "--engine", "cpu"]));
}

/// An empty file named `*.parquet` is no Parquet file (a failed copy or export), not an empty
/// corpus: refused, naming the file. An empty `.jsonl` file stays a valid empty corpus (see
/// below), and so does an empty file of any other name.
#[test]
fn an_empty_parquet_file_is_refused() {
    let c = Case::new();
    for name in ["empty.parquet", "EMPTY.PARQUET"] {
        let p = c.write(name, b"");
        c.dedup_fails(&p, &[name, "empty file: not Parquet"]);
        let good = c.write("good.jsonl", GOOD.as_bytes());
        let out = c.out();
        c.fails(
            &["decontam", &good, "--protected", &p, "-o", &out],
            &[name, "empty file: not Parquet"],
        );
        std::fs::remove_file(c.path("good.jsonl")).unwrap();
    }
    let p = c.write("empty.txt", b"");
    let out = c.out();
    let o = neardup(&["dedup", &p, "-o", &out, "--engine", "cpu"]);
    ok(&o);
    assert!(stderr(&o).contains("0 documents read"));
}

#[test]
fn an_empty_input_is_zero_documents_and_a_valid_empty_output() {
    let c = Case::new();
    let p = c.write("in.jsonl", b"");
    let out = c.out();
    let o = neardup(&["dedup", &p, "-o", &out, "--engine", "cpu"]);
    ok(&o);
    assert!(stderr(&o).contains("0 documents read"));
    assert_eq!(std::fs::read(&out).unwrap(), b"");
    let npy = c.path("s.npy");
    ok(&neardup(&[
        "signatures",
        &p,
        "-o",
        npy.to_str().unwrap(),
        "--engine",
        "cpu",
    ]));
    let f = neardup::io::sigfile::read_signatures(npy.to_str().unwrap()).unwrap();
    assert_eq!((f.ids.len(), f.sigs.len(), f.meta.documents), (0, 0, 0));
    // Blank lines are not records.
    let p = c.write("blank.jsonl", b"\n   \n\r\n");
    let o = neardup(&["dedup", &p, "-o", &out, "--engine", "cpu"]);
    ok(&o);
    assert!(stderr(&o).contains("0 documents read"));
}

#[test]
fn missing_inputs_and_missing_output_directories() {
    let c = Case::new();
    let missing = c.path("nope.jsonl");
    c.dedup_fails(missing.to_str().unwrap(), &["nope.jsonl", "No such file"]);
    let p = c.write("in.jsonl", GOOD.as_bytes());
    let bad_out = c.path("no/such/dir/out.jsonl");
    c.fails(
        &[
            "dedup",
            &p,
            "-o",
            bad_out.to_str().unwrap(),
            "--engine",
            "cpu",
        ],
        &["out.jsonl", "does not exist"],
    );
    c.fails(
        &[
            "signatures",
            &p,
            "-o",
            bad_out.to_str().unwrap(),
            "--engine",
            "cpu",
        ],
        &["does not exist"],
    );
    let prot = c.write("p.txt", b"protected words here");
    c.fails(
        &[
            "decontam",
            &p,
            "--protected",
            &prot,
            "-o",
            bad_out.to_str().unwrap(),
        ],
        &["does not exist"],
    );
}

#[cfg(unix)]
/// An output naming an input would replace the input with the run's result (outputs are
/// renamed into place), and two outputs naming one file would leave only the last: both are
/// refused before any work, by file identity (device and inode), not by the names.
#[test]
fn an_output_that_names_an_input_is_refused_and_the_input_kept() {
    let c = Case::new();
    let example = std::fs::read(fixture("example.jsonl")).unwrap();
    let inp = c.write("in.jsonl", &example);
    let other_spelling = c.dir.path().join(".").join("in.jsonl");
    let other_spelling = other_spelling.to_str().unwrap();
    let link = c.path("link.jsonl");
    std::os::unix::fs::symlink(&inp, &link).unwrap();
    let hard = c.path("hard.jsonl");
    std::fs::hard_link(&inp, &hard).unwrap();
    let (link, hard) = (link.to_str().unwrap(), hard.to_str().unwrap());
    let prot = c.write("p.txt", b"protected words here and there and everywhere");
    let out = c.out();
    for target in [inp.as_str(), other_spelling, link, hard] {
        let needles = ["would overwrite the input", &inp];
        for opt in ["-o", "--clusters", "--pairs", "--report"] {
            let mut args = vec!["dedup", &inp, "-o", &out, "--engine", "cpu"];
            if opt == "-o" {
                args[3] = target;
            } else {
                args.extend([opt, target]);
            }
            let mut n = needles.to_vec();
            n.push(opt);
            c.fails(&args, &n);
        }
        let mut n = needles.to_vec();
        n.push("-o");
        c.fails(&["signatures", &inp, "-o", target, "--format", "tsv"], &n);
        c.fails(&["decontam", &inp, "--protected", &prot, "-o", target], &n);
        c.fails(
            &[
                "decontam",
                &inp,
                "--protected",
                &prot,
                "-o",
                &out,
                "--report",
                target,
            ],
            &["--report", "would overwrite the input"],
        );
    }
    // A protected file is an input of decontam too.
    c.fails(
        &["decontam", &inp, "--protected", &prot, "-o", &prot],
        &["-o", "would overwrite the --protected file", &prot],
    );
    // The npy format's companion files are outputs as well.
    let ids = c.write("s.npy.ids", &example);
    let npy = c.path("s.npy");
    c.fails(
        &["signatures", &ids, "-o", npy.to_str().unwrap()],
        &["its ids file", "would overwrite the input"],
    );
    assert_eq!(
        std::fs::read(&inp).unwrap(),
        example,
        "the input is unchanged"
    );
    assert_eq!(std::fs::read(&ids).unwrap(), example);
    assert_eq!(
        std::fs::read(&prot).unwrap(),
        b"protected words here and there and everywhere"
    );
    assert!(std::fs::symlink_metadata(link)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn two_outputs_naming_one_file_are_refused() {
    let c = Case::new();
    let inp = c.write(
        "in.jsonl",
        &std::fs::read(fixture("example.jsonl")).unwrap(),
    );
    let x = c.path("x.jsonl");
    let x = x.to_str().unwrap();
    let x_again = c.dir.path().join(".").join("x.jsonl");
    let x_again = x_again.to_str().unwrap();
    fn dedup<'a>(inp: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["dedup", inp, "--engine", "cpu"];
        v.extend_from_slice(extra);
        v
    }
    // Files that do not exist yet: the same name, or the same place spelled another way.
    c.fails(
        &dedup(&inp, &["-o", x, "--clusters", x]),
        &["-o and --clusters", "both name", x, "a path of its own"],
    );
    c.fails(
        &dedup(&inp, &["-o", x, "--pairs", x_again]),
        &["-o and --pairs"],
    );
    c.fails(
        &dedup(&inp, &["-o", x, "--clusters", "c.jsonl", "--report", x]),
        &["-o and --report"],
    );
    let r = c.path("r.json");
    let r = r.to_str().unwrap();
    c.fails(
        &dedup(&inp, &["-o", x, "--report", r, "--report", r]),
        &["--report and --report"],
    );
    c.fails(
        &dedup(&inp, &["-o", "-", "--clusters", "-"]),
        &["both write to standard output"],
    );
    // Files that exist: a hard link to another output is the same file.
    std::fs::write(x, b"kept\n").unwrap();
    let h = c.path("h.jsonl");
    std::fs::hard_link(x, &h).unwrap();
    c.fails(
        &dedup(&inp, &["-o", x, "--clusters", h.to_str().unwrap()]),
        &["-o and --clusters", "are the same file"],
    );
    assert_eq!(std::fs::read(x).unwrap(), b"kept\n");
    // Distinct outputs still work, side by side.
    let o = c.path("o.jsonl");
    let cl = c.path("c.jsonl");
    ok(&neardup(&dedup(
        &inp,
        &[
            "-o",
            o.to_str().unwrap(),
            "--clusters",
            cl.to_str().unwrap(),
            "--report",
            r,
        ],
    )));
}

/// An output path that exists but is not a regular file (a pipe, a device such as /dev/null, a
/// directory) is refused before any work, and left as it was: outputs are renamed into place,
/// which would have replaced it with a regular file (/dev/null too, when run as root).
#[test]
fn outputs_that_are_not_regular_files_are_refused_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let c = Case::new();
    let p = c.write("in.jsonl", GOOD.as_bytes());
    let fifo = c.path("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo");
    let link = c.path("link-to-pipe");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let dir = c.path("a-directory");
    std::fs::create_dir(&dir).unwrap();
    let prot = c.write("p.txt", b"protected words here");
    for target in [&fifo, &link, &dir] {
        let t = target.to_str().unwrap();
        let needles = [t, "not a regular file"];
        c.fails(&["dedup", &p, "-o", t, "--engine", "cpu"], &needles);
        c.fails(&["signatures", &p, "-o", t, "--engine", "cpu"], &needles);
        c.fails(&["signatures", &p, "-o", t, "--format", "tsv"], &needles);
        c.fails(&["decontam", &p, "--protected", &prot, "-o", t], &needles);
        let out = c.out();
        c.fails(
            &["dedup", &p, "-o", &out, "--clusters", t, "--engine", "cpu"],
            &needles,
        );
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::metadata(&dir).unwrap().is_dir());
}

#[test]
fn parameters_out_of_range() {
    let c = Case::new();
    let p = c.write("in.jsonl", GOOD.as_bytes());
    let out = c.out();
    let run = |extra: &[&str], needles: &[&str]| {
        let mut args = vec!["dedup", p.as_str(), "-o", out.as_str(), "--engine", "cpu"];
        args.extend_from_slice(extra);
        c.fails(&args, needles);
    };
    run(&["--num-perm", "100"], &["num_perm (100)", "bands x rows"]);
    run(&["--bands", "10"], &["num_perm (128)", "10 x 8"]);
    run(&["--k", "0"], &["k"]);
    run(&["--num-perm", "0", "--bands", "0"], &["at least 1"]);
    for t in [
        "--threshold=0",
        "--threshold=1.5",
        "--threshold=-0.1",
        "--threshold=NaN",
    ] {
        run(&[t], &["threshold", "outside (0, 1]"]);
    }
    ok(&neardup(&[
        "dedup",
        &p,
        "-o",
        &out,
        "--engine",
        "cpu",
        "--threshold",
        "1",
    ]));
    std::fs::remove_file(&out).unwrap();
    let prot = c.write("p.txt", b"some protected text");
    c.fails(
        &["decontam", &p, "--protected", &prot, "-o", &out, "--n", "0"],
        &["n (the n-gram length) must be at least 1"],
    );
    let sig = c.path("s.npy").to_str().unwrap().to_string();
    c.fails(
        &["signatures", &p, "-o", &sig, "--num-perm", "0"],
        &["num_perm must be at least 1"],
    );
}

#[test]
fn protected_files_that_are_missing_or_bad() {
    let c = Case::new();
    let p = c.write("in.jsonl", GOOD.as_bytes());
    let out = c.out();
    let missing = c.path("gone.jsonl");
    c.fails(
        &[
            "decontam",
            &p,
            "--protected",
            missing.to_str().unwrap(),
            "-o",
            &out,
        ],
        &["gone.jsonl"],
    );
    let bad = c.write(
        "eval.jsonl",
        b"{\"question\":\"ok\"}\n{\"question\": nope}\n",
    );
    c.fails(
        &["decontam", &p, "--protected", &bad, "-o", &out],
        &["eval.jsonl:2", "not valid JSON"],
    );
    let bin = c.write("eval.txt", b"fine text \xff\xfe broken");
    c.fails(
        &["decontam", &p, "--protected", &bin, "-o", &out],
        &["eval.txt:1", "UTF-8"],
    );
    // A bad corpus line in decontam names its file and line too, and nothing is written.
    let badin = c.write("corpus.jsonl", format!("{GOOD}{{oops\n").as_bytes());
    let good_prot = c.write("ok.txt", b"a b c");
    c.fails(
        &["decontam", &badin, "--protected", &good_prot, "-o", &out],
        &["corpus.jsonl:2"],
    );
}

#[test]
fn a_50_mb_document_and_a_10_mb_word_work() {
    let c = Case::new();
    let mut text = String::with_capacity(50 << 20);
    let mut i = 0u64;
    while text.len() < 50 << 20 {
        text.push_str(&format!("w{} ", i % 5003));
        i += 1;
    }
    let word = "x".repeat(10 << 20);
    let body = format!(
        "{}\n{}\n{}\n",
        serde_json::json!({"id": "huge", "text": text}),
        serde_json::json!({"id": "word", "text": word}),
        serde_json::json!({"id": "word2", "text": format!("{word} {word}")}),
    );
    let p = c.write("in.jsonl", body.as_bytes());
    let out = c.out();
    let o = neardup(&["dedup", &p, "-o", &out, "--engine", "cpu", "--tag-only"]);
    ok(&o);
    assert!(stderr(&o).contains("3 documents read"), "{}", stderr(&o));
    // Three singletons: "word" is the one shingle `x..x`, "word2" (two words, fewer than k) the
    // one different shingle `x..x x..x`, and the huge document has no twin.
    let out_text = std::fs::read_to_string(&out).unwrap();
    for id in ["huge", "word", "word2"] {
        let tag = format!("\"minhash_cluster\":\"{id}\"");
        assert_eq!(out_text.matches(&tag).count(), 1, "{id}");
    }
}

fn big_corpus(c: &Case) -> String {
    let p = c.path("big.jsonl");
    synth(&p, 60000, 200);
    p.to_str().unwrap().to_string()
}

#[test]
fn an_interrupted_run_leaves_no_output() {
    let c = Case::new();
    let input = big_corpus(&c);
    for signal in ["INT", "TERM", "KILL"] {
        // The signal is sent in the write pass, but a loaded machine may deschedule this test
        // between seeing the partial file and sending it, and the run may finish meanwhile: an
        // attempt whose run completed first is run again (a complete output is not the case
        // under test), and one of a few attempts must have been interrupted.
        let interrupted = (0..8).any(|attempt| interrupt_once(&c, &input, signal, attempt));
        assert!(
            interrupted,
            "{signal}: every run completed before its signal"
        );
    }
}

/// Run `dedup` and send it `signal` once its hidden partial output has bytes in it: the moment
/// a half-written file could be left behind. Returns false when the run completed its output
/// before the signal arrived (the output is then whole, and the attempt says nothing).
fn interrupt_once(c: &Case, input: &str, signal: &str, attempt: usize) -> bool {
    let name = format!("out-{signal}-{attempt}");
    let out = c.path(&format!("{name}.jsonl"));
    let mut child = crate::common::neardup_command()
        .args([
            "dedup",
            input,
            "-o",
            out.to_str().unwrap(),
            "--engine",
            "cpu",
            "--confirm",
            "jaccard",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let partial_has_bytes = || {
        dir_entries(c.dir.path()).iter().any(|n| {
            n.starts_with(&format!(".{name}"))
                && n.ends_with(".partial")
                && std::fs::metadata(c.dir.path().join(n)).is_ok_and(|m| m.len() > 0)
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !partial_has_bytes() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{signal}: the run ended before its output had any bytes"
        );
        assert!(std::time::Instant::now() < deadline, "{signal}: no output");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status();
    let o = child.wait_with_output().unwrap();
    let leftovers: Vec<String> = dir_entries(c.dir.path())
        .into_iter()
        .filter(|n| n.contains(&name))
        .collect();
    if out.exists() {
        // The rename came first: the output is whole, and an interrupt after it says so.
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            text.ends_with('\n'),
            "{signal}: a complete output ends its last line"
        );
        if signal != "KILL" && !o.status.success() {
            assert_eq!(o.status.code(), Some(130), "{signal}");
            assert!(
                stderr(&o).contains("already complete before the interrupt"),
                "{}",
                stderr(&o)
            );
        }
        std::fs::remove_file(&out).unwrap();
        return false;
    }
    assert!(!o.status.success(), "{signal}: the run was interrupted");
    if signal != "KILL" {
        assert!(
            leftovers.is_empty(),
            "{signal}: temporary files left: {leftovers:?}"
        );
        assert_eq!(o.status.code(), Some(130), "{signal}");
        assert!(
            stderr(&o).contains("interrupted; no output was written"),
            "{}",
            stderr(&o)
        );
    } else {
        // SIGKILL cannot be caught: a hidden partial file may remain, never the output.
        assert!(
            leftovers
                .iter()
                .all(|n| n.starts_with('.') && n.ends_with(".partial")),
            "{leftovers:?}"
        );
    }
    true
}

#[test]
fn a_broken_pipe_on_stdout_is_not_an_error() {
    let mut child = crate::common::neardup_command()
        .args([
            "dedup",
            fixture("example.jsonl").to_str().unwrap(),
            "-o",
            "-",
            "--engine",
            "cpu",
            "--tag-only",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 100];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {err}", out.status);
    assert!(!err.contains("error"), "{err}");
}

/// Commands that print to stdout end quietly when the reader has gone: the pipe is closed
/// before the command writes a byte, so its first write fails with a broken pipe.
#[test]
fn commands_that_print_end_quietly_when_the_reader_is_gone() {
    let example = fixture("example.jsonl");
    let example = example.to_str().unwrap();
    for args in [
        &["tune", "--threshold", "0.8"][..],
        &["scurve", "--bands", "16", "--rows", "8"],
        &["inspect", "doc-00001", "doc-00170", example],
    ] {
        let mut child = crate::common::neardup_command()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{args:?}: exit {:?}: {err}",
            out.status
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn the_memory_guard_stops_before_writing() {
    let c = Case::new();
    let input = big_corpus(&c);
    let out = c.out();
    c.fails(
        &[
            "dedup",
            &input,
            "-o",
            &out,
            "--engine",
            "cpu",
            "--max-memory",
            "4",
        ],
        &[
            "memory limit of 4 MiB",
            "--max-memory",
            "no output was written",
        ],
    );
    // At 33 MiB the tables fit (about 31 MiB for these 60,000 documents) but exact-Jaccard
    // confirmation's shingle sets do not: that is refused too, and --confirm estimate passes.
    c.fails(
        &[
            "dedup",
            &input,
            "-o",
            &out,
            "--engine",
            "cpu",
            "--max-memory",
            "33",
        ],
        &[
            "shingle sets",
            "--confirm estimate",
            "no output was written",
        ],
    );
    ok(&neardup(&[
        "dedup",
        &input,
        "-o",
        &out,
        "--engine",
        "cpu",
        "--max-memory",
        "33",
        "--confirm",
        "estimate",
    ]));
    assert!(Path::new(&out).exists());
}

/// Shingle sets with no room beside the signature tables under `--max-memory` are not kept
/// from the signing pass (all 60,000 documents' sets, about 100 MB, against 64 - 31 MiB): the
/// documents in buckets (a tenth) are read again, and the output, clusters and pairs are the
/// bytes of a run that kept every set.
#[test]
fn sets_without_room_beside_the_tables_are_read_again_to_the_same_bytes() {
    let c = Case::new();
    let input = big_corpus(&c);
    let run = |name: &str, limit: &[&str]| {
        let out = c.path(&format!("{name}.jsonl"));
        let clusters = c.path(&format!("{name}.clusters.jsonl"));
        let pairs = c.path(&format!("{name}.pairs.jsonl"));
        let report = c.path(&format!("{name}.report.json"));
        let mut args = vec![
            "dedup",
            &input,
            "-o",
            out.to_str().unwrap(),
            "--clusters",
            clusters.to_str().unwrap(),
            "--pairs",
            pairs.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--engine",
            "cpu",
        ];
        args.extend_from_slice(limit);
        ok(&neardup(&args));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let from_signing = r["stages"]["confirm"]["sets_from_signing"]
            .as_bool()
            .unwrap();
        let files = [out, clusters, pairs].map(|p| std::fs::read(p).unwrap());
        (files, from_signing)
    };
    let (kept, from_signing) = run("kept", &[]);
    assert!(
        from_signing,
        "the sets fit: they come from the signing pass"
    );
    let (read_again, from_signing) = run("again", &["--max-memory", "64"]);
    assert!(!from_signing, "the sets have no room: they are read again");
    assert!(kept[1].len() > 1000, "too few clusters to test anything");
    for (what, (a, b)) in ["output", "clusters", "pairs"]
        .iter()
        .zip(kept.iter().zip(&read_again))
    {
        assert!(a == b, "{what} differs when the sets are read again");
    }
}

#[test]
fn the_first_bad_line_is_reported_even_with_chunks_in_flight() {
    let c = Case::new();
    let big = c.path("big.jsonl");
    synth(&big, 30000, 120);
    let mut lines = lines_of(&big);
    lines[12345] = "{broken".into();
    lines[25000] = "[also broken]".into();
    let p = c.write("in.jsonl", (lines.join("\n") + "\n").as_bytes());
    std::fs::remove_file(&big).unwrap();
    c.dedup_fails(&p, &["in.jsonl:12346", "not valid JSON"]);
    let sig = c.path("s.npy").to_str().unwrap().to_string();
    c.fails(
        &["signatures", &p, "-o", &sig, "--engine", "cpu"],
        &["in.jsonl:12346"],
    );
}
