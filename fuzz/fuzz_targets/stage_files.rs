//! Any damage to one file of a finished work directory or of an index: the stages after it (run
//! again over the damaged copy) and a query of the index must never panic, and a run that
//! succeeds must give the untouched run's bytes. The first byte picks the file; the rest either
//! replace it whole (an odd second byte) or are `(offset, xor)` triples flipped into it.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use neardup::io::{Fields, Inputs, InputSpec};
use neardup::progress::ProgressFactory;
use neardup::stages::dedup::{DedupConfig, DedupOutputs};
use neardup::{CpuEngine, Engine};

/// The stage directories in the order the stages write them.
const STAGES: [&str; 6] = ["sign", "rank", "bands", "pairs", "cluster", "apply"];

struct Template {
    _dir: tempfile::TempDir,
    shards: Vec<String>,
    work: PathBuf,
    index: PathBuf,
    /// Files of the work directory and of the index, relative to their directory.
    files: Vec<(bool, PathBuf)>,
    want: [Vec<u8>; 3],
    want_candidates: Vec<(u32, u32, u32)>,
    sigs: Vec<u32>,
}

fn cfg() -> DedupConfig {
    DedupConfig {
        exact: true,
        ..Default::default()
    }
}

fn run(t: &Template, work: &Path, out_dir: &Path) -> Result<[Vec<u8>; 3], neardup::Error> {
    let mut engine = CpuEngine::new(cfg().params, 1)?;
    let p = |n: &str| out_dir.join(n).display().to_string();
    let outs = DedupOutputs {
        output: p("out.jsonl"),
        clusters: Some(p("clusters.jsonl")),
        pairs: Some(p("pairs.jsonl")),
        measure: false,
        against: Vec::new(),
        update_index: false,
    };
    neardup::stages::sharded::run_sharded(
        work,
        &t.shards,
        &Fields::default(),
        &cfg(),
        2,
        1 << 10,
        &mut engine as &mut dyn Engine,
        &outs,
        &ProgressFactory::hidden(),
    )?;
    let read = |n: &str| std::fs::read(out_dir.join(n)).unwrap();
    Ok([read("out.jsonl"), read("clusters.jsonl"), read("pairs.jsonl")])
}

fn files_under(root: &Path, at: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(at).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if e.file_name() != "lock" {
                files_under(root, &p, out);
            }
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

fn candidates(index: &Path, sigs: &[u32]) -> Result<Vec<(u32, u32, u32)>, neardup::Error> {
    let ix = neardup::index::store::Index::open(index)?;
    Ok(ix
        .candidates(sigs, |_| true)?
        .into_iter()
        .map(|(q, d)| (q, d.segment, d.doc))
        .collect())
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let docs: Vec<(String, String)> =
            neardup::synth::SyntheticDocs::new(300, 20, 7).with_template(12).collect();
        let mut shards = Vec::new();
        for (s, part) in docs.chunks(150).enumerate() {
            let p = dir.path().join(format!("in{s}.jsonl"));
            let body: String = part
                .iter()
                .map(|(id, text)| serde_json::json!({"id": id, "text": text}).to_string() + "\n")
                .collect();
            std::fs::write(&p, body).unwrap();
            shards.push(p.display().to_string());
        }
        let work = dir.path().join("work");
        let mut t = Template {
            shards,
            work: work.clone(),
            index: dir.path().join("index"),
            files: Vec::new(),
            want: Default::default(),
            want_candidates: Vec::new(),
            sigs: Vec::new(),
            _dir: dir,
        };
        let outs = t._dir.path().join("outs");
        std::fs::create_dir_all(&outs).unwrap();
        t.want = run(&t, &work, &outs).unwrap();
        let mut engine = CpuEngine::new(cfg().params, 1).unwrap();
        let specs: Vec<InputSpec> = t.shards.iter().map(|s| InputSpec::parse(s)).collect();
        let inputs = Inputs::new(&specs, false).unwrap();
        neardup::stages::indexing::index_inputs(
            &t.index,
            true,
            &inputs,
            &Fields::default(),
            cfg().lsh,
            &mut engine,
            &ProgressFactory::hidden(),
        )
        .unwrap();
        let texts: Vec<&str> = docs.iter().map(|(_, text)| text.as_str()).take(40).collect();
        t.sigs = vec![0u32; texts.len() * cfg().params.num_perm];
        engine.sign_texts(&texts, &mut t.sigs).unwrap();
        t.want_candidates = candidates(&t.index, &t.sigs).unwrap();
        let mut f = Vec::new();
        files_under(&work, &work, &mut f);
        t.files.extend(f.into_iter().map(|p| (false, p)));
        let mut f = Vec::new();
        files_under(&t.index, &t.index, &mut f);
        t.files.extend(f.into_iter().map(|p| (true, p)));
        t.files.sort();
        t
    })
}

fn copy_tree(from: &Path, to: &Path) {
    let mut f = Vec::new();
    files_under(from, from, &mut f);
    for rel in f {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), dest).unwrap();
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let t = template();
    let (in_index, rel) = &t.files[data[0] as usize % t.files.len()];
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join(if *in_index { "index" } else { "work" });
    copy_tree(if *in_index { &t.index } else { &t.work }, &root);
    let path = root.join(rel);
    let mut bytes = std::fs::read(&path).unwrap();
    if data[1] & 1 == 1 {
        bytes = data[2..].to_vec();
    } else {
        for f in data[2..].chunks_exact(3) {
            if bytes.is_empty() {
                break;
            }
            let at = u16::from_le_bytes([f[0], f[1]]) as usize % bytes.len();
            bytes[at] ^= f[2];
        }
    }
    std::fs::write(&path, &bytes).unwrap();
    if *in_index {
        if let Ok(c) = candidates(&root, &t.sigs) {
            assert_eq!(c, t.want_candidates, "{} damaged, same candidates", rel.display());
        }
        return;
    }
    // The stages after the damaged file's run again and read it.
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    if let Some(k) = STAGES.iter().position(|s| *s == first) {
        for later in &STAGES[k + 1..] {
            let _ = std::fs::remove_dir_all(root.join(later));
        }
    }
    let outs = scratch.path().join("outs");
    std::fs::create_dir_all(&outs).unwrap();
    if let Ok(got) = run(t, &root, &outs) {
        assert!(got == t.want, "{} damaged, yet a different result", rel.display());
    }
});
