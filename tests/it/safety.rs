//! The sharded path as a careless scheduler runs it: outputs aimed at inputs, at standard
//! input or into a work directory or an index are refused before any work; a directory that is
//! not a work directory is never written into; two runs of one stage unit at once give the
//! bytes of one; every stage file, index segment and shard edited after it was written is an
//! error naming it (or leaves the outputs as they were), never a silently different result.

use std::path::{Path, PathBuf};

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Two shards of the example corpus (its clusters cross them) in `dir`.
fn two_shards(dir: &Path) -> Vec<PathBuf> {
    let lines = lines_of(&fixture("example.jsonl"));
    let half = lines.len() / 2;
    let mut out = Vec::new();
    for (i, part) in [&lines[..half], &lines[half..]].iter().enumerate() {
        let p = dir.join(format!("in{i}.jsonl"));
        let body: String = part.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, body).unwrap();
        out.push(p);
    }
    out
}

fn stage(args: &[&str]) -> std::process::Output {
    let mut a = vec!["stage"];
    a.extend_from_slice(args);
    let o = neardup(&a);
    ok(&o);
    o
}

/// Run the stages of a work directory `w` over `ins` up to and including `last` (`init`,
/// `sign`, `rank`, `bands`, `confirm`, `cluster`), with 2 partitions.
fn stages_upto(w: &Path, ins: &[PathBuf], last: &str) {
    let order = ["init", "sign", "rank", "bands", "confirm", "cluster"];
    let upto = order.iter().position(|s| *s == last).unwrap();
    let mut init = vec!["init", s(w)];
    init.extend(ins.iter().map(|p| s(p)));
    init.extend(["--partitions", "2", "--exact"]);
    stage(&init);
    for &st in &order[1..=upto] {
        match st {
            "sign" => {
                for i in 0..ins.len() {
                    stage(&[st, s(w), "--shard", &i.to_string(), "--engine", "cpu"]);
                }
            }
            "bands" => {
                for i in 0..ins.len() {
                    stage(&[st, s(w), "--shard", &i.to_string()]);
                }
            }
            "confirm" => {
                stage(&["confirm", s(w), "--partition", "0", "1"]);
            }
            _ => {
                stage(&[st, s(w)]);
            }
        }
    }
}

fn refused(o: &std::process::Output, why: &str) {
    assert!(!o.status.success(), "must fail: {}", stderr(o));
    assert!(stderr(o).contains(why), "wanted {why:?} in: {}", stderr(o));
}

#[test]
fn no_output_lands_on_an_input_standard_input_or_neardup_s_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let w = dir.path().join("w");
    stages_upto(&w, &ins, "cluster");
    let before: Vec<String> = ins.iter().map(|p| sha256(p)).collect();
    let manifest = sha256(&w.join("manifest.json"));
    let sign0 = sha256(&w.join("sign/00000.parquet"));

    // The stages' own outputs onto an input shard, however spelled.
    let dotted = format!("{}/./in0.jsonl", s(dir.path()));
    for args in [
        vec!["stage", "cluster", s(&w), "--clusters", s(&ins[0])],
        vec!["stage", "cluster", s(&w), "--pairs", &dotted],
        vec!["stage", "report", s(&w), "--report", s(&ins[1])],
    ] {
        refused(&neardup(&args), "would overwrite the input");
    }
    // Outputs into the work directory.
    let m = w.join("manifest.json");
    let sign_file = w.join("sign/00000.parquet");
    let out = dir.path().join("out.jsonl");
    for args in [
        vec![
            "dedup",
            s(&ins[0]),
            s(&ins[1]),
            "-o",
            s(&m),
            "--work-dir",
            s(&w),
        ],
        vec!["stage", "apply", s(&w), "--shard", "0", "-o", s(&sign_file)],
        vec!["stage", "report", s(&w), "--report", s(&m)],
        vec![
            "stage",
            "cluster",
            s(&w),
            "--clusters",
            s(&w.join("new.jsonl")),
        ],
    ] {
        refused(&neardup(&args), "is in the work directory");
    }
    // A link, dangling until the run makes the work directory, that leads into it.
    let fresh = dir.path().join("fresh-work");
    let dangling = dir.path().join("dangling.jsonl");
    std::os::unix::fs::symlink("fresh-work/manifest.json", &dangling).unwrap();
    let o = neardup_command()
        .current_dir(dir.path())
        .args([
            "dedup",
            "in0.jsonl",
            "-o",
            "dangling.jsonl",
            "--work-dir",
            "fresh-work",
        ])
        .output()
        .unwrap();
    refused(&o, "is in the work directory");
    assert!(!fresh.join("manifest.json").exists());
    // A hard link to a file of the work directory, outside it, is one of its files.
    let linked = dir.path().join("linked.json");
    std::fs::hard_link(&m, &linked).unwrap();
    refused(
        &neardup(&["stage", "report", s(&w), "--report", s(&linked)]),
        "is in the work directory",
    );
    assert_eq!(sha256(&w.join("manifest.json")), manifest);
    assert_eq!(sha256(&w.join("sign/00000.parquet")), sign0);
    let now: Vec<String> = ins.iter().map(|p| sha256(p)).collect();
    assert_eq!(now, before);
    assert!(!out.exists());

    // An index's segments.
    let ix = dir.path().join("ix");
    ok(&neardup(&["index", "build", s(&ins[0]), "-o", s(&ix)]));
    let seg = ix.join("seg-000001.ndx");
    let seg_sum = sha256(&seg);
    refused(
        &neardup(&["dedup", s(&ins[1]), "-o", s(&seg), "--against", s(&ix)]),
        "is in the index",
    );
    assert_eq!(sha256(&seg), seg_sum);

    // Standard input is the file it reads.
    let x = dir.path().join("x.jsonl");
    std::fs::copy(&ins[0], &x).unwrap();
    let x_sum = sha256(&x);
    let prot = fixture("protected.jsonl");
    for args in [
        vec!["dedup", "-", "-o", s(&x)],
        vec!["decontam", "-", "--protected", s(&prot), "-o", s(&x)],
        vec!["signatures", "-", "--format", "tsv", "-o", s(&x)],
    ] {
        refused(&neardup_stdin(&args, &x), "would overwrite the input");
        assert_eq!(sha256(&x), x_sum, "{args:?}");
    }
    // An index built from standard input that reads a file of the index.
    let before = sha256(&ix.join("index.json"));
    refused(
        &neardup_stdin(&["index", "add", s(&ix), "-"], &ix.join("index.json")),
        "lies in the index directory",
    );
    assert_eq!(sha256(&ix.join("index.json")), before);
}

#[test]
fn only_a_new_or_empty_directory_becomes_a_work_directory_and_only_neardup_s_files_go() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    // A directory of the user's.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(theirs.join("rank/spill")).unwrap();
    std::fs::write(theirs.join("rank/spill/keep.txt"), b"mine").unwrap();
    let out = dir.path().join("out.jsonl");
    refused(
        &neardup(&["stage", "init", s(&theirs), s(&ins[0])]),
        "not empty",
    );
    refused(
        &neardup(&["dedup", s(&ins[0]), "-o", s(&out), "--work-dir", s(&theirs)]),
        "not empty",
    );
    assert_eq!(
        std::fs::read(theirs.join("rank/spill/keep.txt")).unwrap(),
        b"mine"
    );
    assert!(!theirs.join("manifest.json").exists());
    // A file of the user's dropped into a work directory's spill directory stays; so does the
    // directory, which still holds it.
    let w = dir.path().join("w");
    stages_upto(&w, &ins, "sign");
    std::fs::create_dir_all(w.join("rank/spill")).unwrap();
    std::fs::write(w.join("rank/spill/keep.txt"), b"mine").unwrap();
    std::fs::write(w.join("rank/spill/ids-00003.bin"), b"left by a killed run").unwrap();
    ok(&neardup(&["stage", "rank", s(&w), "--sort-memory", "1"]));
    assert_eq!(
        std::fs::read(w.join("rank/spill/keep.txt")).unwrap(),
        b"mine"
    );
    assert!(!w.join("rank/spill/ids-00003.bin").exists());
    // What a killed run of a unit leaves (hidden temporary files) goes when the unit runs
    // again; another unit's stay.
    let left = w.join("sign/.00001.parquet.Xy12.partial");
    let other = w.join("sign/.00000.parquet.Xy12.partial");
    std::fs::write(&left, b"half").unwrap();
    std::fs::write(&other, b"half").unwrap();
    ok(&neardup(&[
        "stage",
        "sign",
        s(&w),
        "--shard",
        "1",
        "--engine",
        "cpu",
    ]));
    assert!(!left.exists());
    assert!(other.exists());
    // An empty directory, and one a killed `init` left its temporary manifest in, are fine.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join(".manifest.json.Ab12.partial"), b"{").unwrap();
    stage(&["init", s(&empty), s(&ins[0])]);
}

/// What the finished pipeline writes, for comparing runs.
fn finish_and_hash(w: &Path, ins: &[PathBuf], tag: &str) -> [String; 3] {
    let (o, files) = dedup(ins, &w.with_extension(tag), Some(w));
    ok(&o);
    files.map(|f| sha256(&f))
}

/// `dedup --exact` of `ins` (out of core in `work` with 2 partitions, when given) with its
/// output, clusters and pairs at `stem.out.jsonl`, `stem.clusters.jsonl`, `stem.pairs.jsonl`,
/// which are removed first.
fn dedup(
    ins: &[PathBuf],
    stem: &Path,
    work: Option<&Path>,
) -> (std::process::Output, [PathBuf; 3]) {
    let files = ["out", "clusters", "pairs"].map(|k| {
        let mut name = stem.as_os_str().to_owned();
        name.push(format!(".{k}.jsonl"));
        PathBuf::from(name)
    });
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
    let mut args = vec!["dedup"];
    args.extend(ins.iter().map(|p| s(p)));
    args.extend(["-o", s(&files[0]), "--clusters", s(&files[1])]);
    args.extend(["--pairs", s(&files[2]), "--exact", "--engine", "cpu"]);
    if let Some(w) = work {
        args.extend(["--work-dir", s(w), "--partitions", "2"]);
    }
    (neardup(&args), files)
}

/// Every file under `dir` (its lock files aside), as paths relative to it, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(at).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                if e.file_name() != "lock" {
                    walk(root, &p, out);
                }
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for rel in files_under(from) {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), dest).unwrap();
    }
}

#[test]
fn two_runs_of_one_unit_at_once_give_the_bytes_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let reference = dir.path().join("ref");
    stages_upto(&reference, &ins, "sign");
    let want = finish_and_hash(&reference, &ins, "ref");
    let rank_files = ["rank/00000.parquet", "rank/00001.parquet"];
    let want_rank: Vec<String> = rank_files
        .iter()
        .map(|f| sha256(&reference.join(f)))
        .collect();
    for trial in 0..6 {
        let w = dir.path().join(format!("w{trial}"));
        let sign: Vec<PathBuf> = files_under(&reference)
            .into_iter()
            .filter(|p| p.starts_with("sign") || p.as_os_str() == "manifest.json")
            .collect();
        std::fs::create_dir_all(w.join("sign")).unwrap();
        for rel in sign {
            std::fs::copy(reference.join(&rel), w.join(&rel)).unwrap();
        }
        // Two `rank`s at once, sorting in buckets of a few records (so both spill).
        let run = |args: &[&str]| {
            let mut c = neardup_command();
            c.arg("stage").args(args);
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let ranks = [
            run(&["rank", s(&w), "--sort-memory", "1"]),
            run(&["rank", s(&w), "--sort-memory", "1"]),
        ];
        for r in ranks {
            ok(&r.wait_with_output().unwrap());
        }
        let got: Vec<String> = rank_files.iter().map(|f| sha256(&w.join(f))).collect();
        assert_eq!(got, want_rank, "trial {trial}: rank files");
        for i in 0..ins.len() {
            stage(&["bands", s(&w), "--shard", &i.to_string()]);
        }
        // Two `confirm`s of one partition at once, and one of both partitions beside them.
        let confirms = [
            run(&["confirm", s(&w), "--partition", "0"]),
            run(&["confirm", s(&w), "--partition", "0"]),
            run(&["confirm", s(&w), "--partition", "1", "0"]),
        ];
        for c in confirms {
            ok(&c.wait_with_output().unwrap());
        }
        assert_eq!(
            finish_and_hash(&w, &ins, &format!("t{trial}")),
            want,
            "trial {trial}"
        );
    }
    // And the bytes are those of in-memory dedup.
    let (o, files) = dedup(&ins, &dir.path().join("mem"), None);
    ok(&o);
    assert_eq!(want, files.map(|f| sha256(&f)));
}

/// A tiny seeded generator (the tests need no cryptographic randomness).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// For each stage, every file it wrote with a byte flipped at random places, then the rest of
/// the pipeline: an error naming that file, or the outputs of the untouched run.
#[test]
fn a_flipped_byte_in_any_stage_file_is_an_error_naming_it_or_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let want = {
        let w = dir.path().join("whole");
        stages_upto(&w, &ins, "init");
        finish_and_hash(&w, &ins, "whole")
    };
    let mut rng = Rng(0x5eed);
    let mut caught = 0;
    let order = ["sign", "rank", "bands", "confirm", "cluster"];
    for (k, last) in order.iter().enumerate() {
        let template = dir.path().join(format!("upto-{last}"));
        stages_upto(&template, &ins, last);
        let dir_of = |f: &Path| f.components().next().unwrap().as_os_str().to_owned();
        let stage_dir = match *last {
            "confirm" => "pairs",
            d => d,
        };
        let files: Vec<PathBuf> = files_under(&template)
            .into_iter()
            .filter(|f| dir_of(f) == stage_dir)
            .collect();
        assert!(!files.is_empty(), "{last} wrote files");
        for rel in files {
            let len = std::fs::metadata(template.join(&rel)).unwrap().len();
            for trial in 0..3 {
                let at = rng.below(len);
                let w = dir.path().join(format!("m{k}-{trial}"));
                let _ = std::fs::remove_dir_all(&w);
                copy_tree(&template, &w);
                let path = w.join(&rel);
                let mut bytes = std::fs::read(&path).unwrap();
                bytes[at as usize] ^= 1 << rng.below(8);
                std::fs::write(&path, bytes).unwrap();
                let (o, files) = dedup(&ins, &w.with_extension("flipped"), Some(&w));
                let out = &files[0];
                let what = format!("{} byte {at}", rel.display());
                if o.status.success() {
                    assert_eq!(
                        files.clone().map(|f| sha256(&f)),
                        want,
                        "{what}: a run that succeeds writes the untouched run's bytes"
                    );
                } else {
                    let name = rel.file_name().unwrap().to_string_lossy().into_owned();
                    assert!(
                        stderr(&o).contains(&name),
                        "{what}: the error names the file: {}",
                        stderr(&o)
                    );
                    assert!(!out.exists(), "{what}: no output");
                    caught += 1;
                }
            }
        }
    }
    assert!(caught > 20, "flips caught: {caught}");
}

#[test]
fn a_confirm_of_several_partitions_confirms_each_whatever_is_done_already() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let w = dir.path().join("w");
    stages_upto(&w, &ins, "bands");
    // The later partition first, alone; then both, the earlier one not done yet.
    stage(&["confirm", s(&w), "--partition", "1"]);
    let o = stage(&["confirm", s(&w), "--partition", "0", "1"]);
    assert!(w.join("pairs/0000.parquet").exists(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("confirm: partition 0,"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("partition 1: done already"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_shard_edited_after_sign_is_refused_before_apply_writes() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    // Bigger than 2 MiB, so the edit is in neither end the manifest's fingerprint reads.
    let mut text = std::fs::read_to_string(&ins[0]).unwrap();
    let filler: String = (0..30_000)
        .map(|i| {
            format!("{{\"id\":\"pad-{i:06}\",\"text\":\"filler words number {i} stay apart\"}}\n")
        })
        .collect();
    text.push_str(&filler);
    let big = dir.path().join("big.jsonl");
    std::fs::write(&big, &text).unwrap();
    assert!(text.len() > 2 << 20);
    let w2 = dir.path().join("w2");
    stages_upto(&w2, &[big.clone(), ins[1].clone()], "cluster");
    // One byte in the middle, same length: a word of a text changes.
    let mid = text.len() / 2;
    let at = mid + text[mid..].find("filler").unwrap();
    let mut edited = text.into_bytes();
    edited[at] = b'F';
    std::fs::write(&big, &edited).unwrap();
    let out = dir.path().join("apply0.jsonl");
    refused(
        &neardup(&["stage", "apply", s(&w2), "--shard", "0", "-o", s(&out)]),
        "changed since `sign` read it",
    );
    assert!(!out.exists());
}

#[test]
fn an_edited_index_segment_is_refused_and_an_input_is_added_once() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let ix = dir.path().join("ix");
    ok(&neardup(&["index", "build", s(&ins[0]), "-o", s(&ix)]));
    let seg = ix.join("seg-000001.ndx");
    let mut bytes = std::fs::read(&seg).unwrap();
    // A signature entry: past the header, the id offsets and the ids.
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    let good = std::fs::read(&seg).unwrap();
    std::fs::write(&seg, &bytes).unwrap();
    let out = dir.path().join("out.jsonl");
    refused(
        &neardup(&["dedup", s(&ins[1]), "-o", s(&out), "--against", s(&ix)]),
        "seg-000001.ndx",
    );
    assert!(!out.exists());
    std::fs::write(&seg, &good).unwrap();
    let against = |out: &Path| neardup(&["dedup", s(&ins[1]), "-o", s(out), "--against", s(&ix)]);
    ok(&against(&out));
    let want = sha256(&out);
    // A flipped bit anywhere in the segment: an error naming it, or the same bytes.
    let mut rng = Rng(0xc0ffee);
    for _ in 0..12 {
        let mut bytes = good.clone();
        let at = rng.below(bytes.len() as u64) as usize;
        bytes[at] ^= 1 << rng.below(8);
        std::fs::write(&seg, &bytes).unwrap();
        let _ = std::fs::remove_file(&out);
        let o = against(&out);
        if o.status.success() {
            assert_eq!(
                sha256(&out),
                want,
                "byte {at}: a run that succeeds writes the same bytes"
            );
        } else {
            assert!(
                stderr(&o).contains("seg-000001.ndx"),
                "byte {at}: {}",
                stderr(&o)
            );
        }
    }
    std::fs::write(&seg, &good).unwrap();

    // The same input again: nothing added (a rerun of an addition that landed).
    let docs = |ix: &Path| -> u64 {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ix.join("index.json")).unwrap()).unwrap();
        m["documents"].as_u64().unwrap()
    };
    let n = docs(&ix);
    let o = neardup(&["index", "add", s(&ix), s(&ins[0])]);
    ok(&o);
    assert!(
        stderr(&o).contains("in the index already"),
        "{}",
        stderr(&o)
    );
    assert_eq!(docs(&ix), n);
    // With a new input beside it: refused, naming it.
    refused(
        &neardup(&["index", "add", s(&ix), s(&ins[1]), s(&ins[0])]),
        "in0.jsonl is in the index already",
    );
    assert_eq!(docs(&ix), n);
    ok(&neardup(&["index", "add", s(&ix), s(&ins[1])]));
    assert!(docs(&ix) > n);
}

#[test]
fn outputs_are_checked_writable_before_the_work_and_a_link_is_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let out = dir.path().join("out.jsonl");
    // A report into a directory that does not exist fails before -o is written.
    let o = neardup(&[
        "dedup",
        s(&ins[0]),
        "-o",
        s(&out),
        "--report",
        s(&dir.path().join("missing/report.json")),
    ]);
    refused(&o, "does not exist");
    assert!(!out.exists());
    // -o naming a symbolic link writes the file it names and keeps the link.
    let target = dir.path().join("target.jsonl");
    std::fs::write(&target, b"old\n").unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink("target.jsonl", &link).unwrap();
    ok(&neardup(&["dedup", s(&ins[0]), "-o", s(&link)]));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_ne!(std::fs::read(&target).unwrap(), b"old\n");
    ok(&neardup(&["dedup", s(&ins[0]), "-o", s(&out)]));
    assert_eq!(sha256(&target), sha256(&out));
}

/// A scheduler reruns whatever it likes: a rank plan rerun with another `--task-memory` keeps
/// the plan made and says so, a plan after `finish` is a no-op, and a greedy round past the
/// last one is nothing to run, not a round to wait for.
#[test]
fn a_finished_plan_rerun_and_a_round_past_the_last_are_no_ops() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let w = dir.path().join("w");
    stages_upto(&w, &ins, "sign");
    for i in ["0", "1"] {
        stage(&["rank", s(&w), "--step", "split", "--shard", i]);
    }
    let o = stage(&["rank", s(&w), "--step", "plan", "--task-memory", "4096"]);
    assert!(!stderr(&o).contains("planned before"), "{}", stderr(&o));
    let o = stage(&["rank", s(&w), "--step", "plan", "--task-memory", "1"]);
    assert!(
        stderr(&o).contains("planned before, for --task-memory 4096, not the 1 asked now"),
        "{}",
        stderr(&o)
    );
    stage(&["rank", s(&w), "--step", "sort", "--range", "0"]);
    stage(&["rank", s(&w), "--step", "exact", "--range", "0"]);
    for i in ["0", "1"] {
        stage(&["rank", s(&w), "--step", "write", "--shard", i]);
    }
    stage(&["rank", s(&w), "--step", "finish"]);
    let o = stage(&["rank", s(&w), "--step", "plan"]);
    assert!(stderr(&o).contains("rank is finished"), "{}", stderr(&o));
    assert!(!w.join("rank/tasks/plan.json").exists());

    // Greedy: rounds until every unit is decided, then rounds past the last.
    let g = dir.path().join("g");
    let mut init = vec!["init", s(&g)];
    init.extend(ins.iter().map(|p| s(p)));
    init.extend(["--partitions", "2", "--cluster", "greedy"]);
    stage(&init);
    for i in ["0", "1"] {
        stage(&["sign", s(&g), "--shard", i, "--engine", "cpu"]);
    }
    stage(&["rank", s(&g)]);
    for i in ["0", "1"] {
        stage(&["bands", s(&g), "--shard", i]);
    }
    stage(&["confirm", s(&g), "--partition", "0", "1"]);
    stage(&["greedy", s(&g)]);
    let last = (0..)
        .find(|r| {
            let p = g.join(format!("greedy/{r:05}.json"));
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            v["summary"]["undecided"] == 0
        })
        .unwrap();
    for args in [
        vec![
            "greedy".to_string(),
            s(&g).into(),
            "--round".into(),
            (last + 1).to_string(),
        ],
        vec![
            "greedy".into(),
            s(&g).into(),
            "--round".into(),
            (last + 5).to_string(),
            "--partition".into(),
            "0".into(),
        ],
    ] {
        let o = stage(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            stderr(&o).contains(&format!("converged at round {last}")),
            "{}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("first"), "{}", stderr(&o));
    }
}

/// The outputs of one run's units never land on each other: a report or a clusters copy over
/// a shard's `apply` output, or an `apply` over another's output or the clusters copy, is
/// refused before any work, naming the unit that wrote it; a unit writes its own again.
#[test]
fn one_unit_never_writes_over_another_units_output() {
    let dir = tempfile::tempdir().unwrap();
    let ins = two_shards(dir.path());
    let w = dir.path().join("w");
    stages_upto(&w, &ins, "cluster");
    let a0 = dir.path().join("a0.jsonl");
    let cl = dir.path().join("cl.jsonl");
    stage(&["apply", s(&w), "--shard", "0", "-o", s(&a0)]);
    stage(&["apply", s(&w), "--shard", "0", "-o", s(&a0)]);
    stage(&["cluster", s(&w), "--clusters", s(&cl)]);
    let (kept, clusters) = (sha256(&a0), sha256(&cl));
    let dotted = format!("{}/./a0.jsonl", s(dir.path()));
    for args in [
        vec!["stage", "report", s(&w), "--report", s(&a0)],
        vec!["stage", "cluster", s(&w), "--clusters", &dotted],
        vec!["stage", "cluster", s(&w), "--pairs", s(&a0)],
        vec!["stage", "apply", s(&w), "--shard", "1", "-o", s(&a0)],
        vec!["stage", "apply", s(&w), "--shard", "1", "-o", s(&cl)],
    ] {
        refused(&neardup(&args), "is the output of `neardup stage");
    }
    assert_eq!(sha256(&a0), kept);
    assert_eq!(sha256(&cl), clusters);
    // Through a link too.
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&a0, &link).unwrap();
    refused(
        &neardup(&["stage", "report", s(&w), "--report", s(&link)]),
        "apply --shard 0",
    );
    assert_eq!(sha256(&a0), kept);
}
