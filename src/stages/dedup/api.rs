//! Near-dedup and exact dedup over documents in memory (the library's simple entry points).

use std::collections::HashMap;

use rayon::prelude::*;

use super::*;
use crate::batch::PackedBatch;
use crate::engine::{CpuEngine, Engine};
use crate::error::Error;
use crate::ids::DocLoc;
use crate::jsonl::Fields;
use crate::progress::ProgressFactory;

/// Sign in-memory documents `(id, text)` with the CPU engine (on the current rayon pool).
pub fn sign_texts<I: AsRef<str>, T: AsRef<str>>(
    docs: &[(I, T)],
    cfg: &DedupConfig,
) -> Result<(SignedCorpus, PackedBatch), Error> {
    cfg.validate()?;
    let mut engine = CpuEngine::new(cfg.params, 0)?;
    sign_texts_with(docs, cfg, &mut engine)
}

/// Sign in-memory documents with the given engine.
pub fn sign_texts_with<I: AsRef<str>, T: AsRef<str>>(
    docs: &[(I, T)],
    cfg: &DedupConfig,
    engine: &mut dyn Engine,
) -> Result<(SignedCorpus, PackedBatch), Error> {
    let texts: Vec<&str> = docs.iter().map(|(_, t)| t.as_ref()).collect();
    let batch = PackedBatch::from_texts_with(&texts, cfg.params.rule());
    let sigs = engine.sign_vec(&batch)?;
    let mut corpus = SignedCorpus {
        num_perm: cfg.params.num_perm,
        sigs,
        ..Default::default()
    };
    for (i, (id, _)) in docs.iter().enumerate() {
        corpus.ids.push(id.as_ref());
        corpus.locs.push(DocLoc {
            file: 0,
            line: i as u64 + 1,
        });
        corpus.words.push(batch.doc_words(i).len() as u32);
        if cfg.exact {
            corpus
                .exact_keys
                .push(xxhash_rust::xxh3::xxh3_128(batch.doc_bytes(i)));
        }
    }
    Ok((corpus, batch))
}

/// Shingle sets of the documents of `batch` that `needed` marks.
fn sets_from_batch(batch: &PackedBatch, k: usize, needed: &[bool]) -> ShingleSets {
    (0..batch.num_docs())
        .into_par_iter()
        .filter(|&d| needed[d])
        .map(|d| (d as u32, crate::sign::fnv::batch_fnv_set(batch, d, k)))
        .collect()
}

/// Cluster in-memory documents `(id, text)`: the library form of `neardup dedup`.
pub fn clusters<I: AsRef<str>, T: AsRef<str>>(
    docs: &[(I, T)],
    cfg: &DedupConfig,
) -> Result<Clustering, Error> {
    let (corpus, batch) = sign_texts(docs, cfg)?;
    let k = cfg.params.k;
    cluster_corpus(
        &corpus,
        cfg,
        &|_| "<memory>".to_string(),
        |needed| Ok(sets_from_batch(&batch, k, needed)),
        &ProgressFactory::hidden(),
        false,
    )
}

/// Documents in memory with what the keep and group policies read, as a caller outside Rust
/// (the Python package) hands them over. Document `i` is named `ids[i]`; errors name it by
/// its position, `row i`.
pub struct MemoryDocs<'a> {
    pub ids: &'a [&'a str],
    pub texts: &'a [&'a str],
    /// With `Keep::FieldMax` or `FieldMin`: each document's value (`None`: it has none, an
    /// error).
    pub keep_values: Option<&'a [Option<f64>]>,
    /// With groups: each document's group (`None`: it has none; see
    /// [`DedupConfig::group_missing`]).
    pub groups: Option<&'a [Option<&'a str>]>,
}

/// Cluster documents in memory, signed by `engine`: `dedup`'s clustering, with its policies,
/// for texts that are already in memory.
pub fn cluster_docs(
    docs: &MemoryDocs,
    cfg: &DedupConfig,
    engine: &mut dyn Engine,
) -> Result<Clustering, Error> {
    cluster_docs_with_progress(docs, cfg, engine, &ProgressFactory::hidden())
}

/// Documents signed between two progress reports of [`cluster_docs_with_progress`].
const PROGRESS_DOCS: usize = 8192;

/// [`cluster_docs`], reporting its passes to `progress`: signing (by text bytes), then the
/// steps of clustering. The same result whether or not anything is shown.
pub fn cluster_docs_with_progress(
    docs: &MemoryDocs,
    cfg: &DedupConfig,
    engine: &mut dyn Engine,
    progress: &ProgressFactory,
) -> Result<Clustering, Error> {
    cfg.validate()?;
    let n = docs.ids.len();
    let lengths = [
        ("texts", Some(docs.texts.len())),
        ("keep values", docs.keep_values.map(|v| v.len())),
        ("groups", docs.groups.map(|v| v.len())),
    ];
    for (what, len) in lengths {
        if let Some(len) = len.filter(|&l| l != n) {
            return Err(Error::Param(format!(
                "{n} ids but {len} {what}: one of each per document"
            )));
        }
    }
    if engine.params() != &cfg.params {
        return Err(Error::Param(
            "the engine was built with other parameters than the dedup config".into(),
        ));
    }
    let np = cfg.params.num_perm;
    let mut corpus = SignedCorpus {
        num_perm: np,
        sigs: vec![0u32; n * np],
        ..Default::default()
    };
    if progress.enabled() {
        // In slices, to report between them: a document's signature depends on its text alone.
        let bytes = docs.texts.iter().map(|t| t.len() as u64).sum();
        let bar = progress.pass("signing", Some(bytes));
        for (texts, sigs) in docs
            .texts
            .chunks(PROGRESS_DOCS)
            .zip(corpus.sigs.chunks_mut(PROGRESS_DOCS * np))
        {
            engine.sign_texts(texts, sigs)?;
            bar.add_bytes(texts.iter().map(|t| t.len() as u64).sum());
            bar.add_docs(texts.len() as u64);
        }
    } else {
        engine.sign_texts(docs.texts, &mut corpus.sigs)?;
    }
    // Word counts and exact keys, from the same packing the engines tokenize into.
    let per: Vec<(u32, u128)> = docs
        .texts
        .par_chunks(256)
        .flat_map_iter(|chunk| {
            let b = PackedBatch::from_texts_with(chunk, cfg.params.rule());
            (0..chunk.len())
                .map(|d| {
                    let key = if cfg.exact {
                        xxhash_rust::xxh3::xxh3_128(b.doc_bytes(d))
                    } else {
                        0
                    };
                    (b.doc_words(d).len() as u32, key)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (i, id) in docs.ids.iter().enumerate() {
        corpus.ids.push(id);
        corpus.locs.push(DocLoc {
            file: 0,
            line: i as u64 + 1,
        });
        corpus.words.push(per[i].0);
        if cfg.exact {
            corpus.exact_keys.push(per[i].1);
        }
    }
    let row = |i: usize| format!("row {i} (id {:?})", docs.ids[i]);
    if matches!(cfg.keep, Keep::FieldMax | Keep::FieldMin) {
        let values = docs.keep_values.ok_or_else(|| {
            Error::Param("a keep policy by value needs one value per document".into())
        })?;
        for (i, v) in values.iter().enumerate() {
            match v {
                Some(v) if v.is_finite() => corpus.keep_values.push(*v),
                _ => {
                    return Err(Error::Record(format!(
                        "{}: the keep value is missing or not a finite number",
                        row(i)
                    )))
                }
            }
        }
    }
    if let Some(groups) = docs.groups {
        let mut index: HashMap<Option<&str>, u32> = HashMap::new();
        for (i, g) in groups.iter().enumerate() {
            if g.is_none() && cfg.group_missing == GroupMissing::Error {
                return Err(Error::Record(format!(
                    "{}: it has no group (group_missing=\"own\" puts documents without one in a \
                     group of their own)",
                    row(i)
                )));
            }
            let next = index.len() as u32;
            let gi = *index.entry(*g).or_insert_with(|| {
                corpus.group_names.push(g.map(str::to_string));
                next
            });
            corpus.groups.push(gi);
        }
    }
    let (k, rule) = (cfg.params.k, cfg.params.rule());
    let texts = docs.texts;
    cluster_corpus(
        &corpus,
        cfg,
        &|l: DocLoc| format!("row {}", l.line - 1),
        |needed| {
            Ok((0..n)
                .into_par_iter()
                .filter(|&d| needed[d])
                .map(|d| {
                    let b = PackedBatch::from_texts_with(&texts[d..d + 1], rule);
                    (d as u32, crate::sign::fnv::batch_fnv_set(&b, 0, k))
                })
                .collect())
        },
        progress,
        false,
    )
}

/// The near-dedup stage over in-memory JSON records: every record gets `meta.minhash_cluster`
/// (its root id); with `cfg.drop` only the survivors are returned, as `cfg.keep` chooses them
/// (reading `fields.keep`), and with `fields.group` clusters stay within groups. Order and all other fields are kept.
/// A repeated id is an error before anything is returned.
pub fn near_dedup(
    records: Vec<serde_json::Map<String, serde_json::Value>>,
    fields: &Fields,
    cfg: &DedupConfig,
) -> Result<(Vec<serde_json::Map<String, serde_json::Value>>, Clustering), Error> {
    let docs = records_id_text(&records, fields)?;
    // The keep and group policies read their fields as a file run does.
    let extras = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let v = serde_json::Value::Object(r.clone());
            crate::corpus::value_extras(&v, fields, "<memory>", i as u64 + 1)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let keep_values: Option<Vec<Option<f64>>> = fields
        .keep
        .as_ref()
        .map(|_| extras.iter().map(|x| x.keep).collect());
    let groups: Option<Vec<Option<&str>>> = fields
        .group
        .as_ref()
        .map(|_| extras.iter().map(|x| x.group.as_deref()).collect());
    let id_refs: Vec<&str> = docs.iter().map(|(i, _)| i.as_str()).collect();
    let text_refs: Vec<&str> = docs.iter().map(|(_, t)| t.as_str()).collect();
    let mut engine = CpuEngine::new(cfg.params, 0)?;
    let c = cluster_docs(
        &MemoryDocs {
            ids: &id_refs,
            texts: &text_refs,
            keep_values: keep_values.as_deref(),
            groups: groups.as_deref(),
        },
        cfg,
        &mut engine,
    )?;
    drop((id_refs, text_refs));
    let ids: Vec<String> = docs.into_iter().map(|(i, _)| i).collect();
    let mut out = Vec::new();
    for (d, mut rec) in records.into_iter().enumerate() {
        if cfg.drop && !c.keeps(d) {
            continue;
        }
        let root = ids[c.root[d] as usize].clone();
        match rec.get_mut("meta") {
            Some(serde_json::Value::Object(m)) => {
                m.insert("minhash_cluster".into(), root.into());
            }
            None => {
                let mut m = serde_json::Map::new();
                m.insert("minhash_cluster".into(), root.into());
                rec.insert("meta".into(), m.into());
            }
            Some(other) => {
                return Err(Error::Field {
                    path: "<memory>".into(),
                    line: d as u64 + 1,
                    field: "meta".into(),
                    msg: format!(
                        "is {}, it must be an object",
                        crate::jsonl::json_kind(other)
                    ),
                })
            }
        }
        out.push(rec);
    }
    Ok((out, c))
}

/// The exact-dedup stage over in-memory records: of the records whose word sequences are
/// identical, only the one with the smallest id is kept (wordless records are all kept). Returns
/// the kept records in input order and how many were dropped.
pub fn exact_dedup(
    records: Vec<serde_json::Map<String, serde_json::Value>>,
    fields: &Fields,
) -> Result<(Vec<serde_json::Map<String, serde_json::Value>>, usize), Error> {
    let docs = records_id_text(&records, fields)?;
    let mut best: HashMap<u128, usize> = HashMap::new();
    let mut seen_ids: HashMap<&str, usize> = HashMap::new();
    let mut words = crate::text::Words::default();
    let mut keys = Vec::with_capacity(docs.len());
    for (d, (id, text)) in docs.iter().enumerate() {
        if let Some(first) = seen_ids.insert(id.as_str(), d) {
            return Err(Error::DuplicateId {
                id: id.clone(),
                first: format!("<memory>:{}", first + 1),
                second: format!("<memory>:{}", d + 1),
            });
        }
        words.reset(text);
        if words.is_empty() {
            keys.push(None);
            continue;
        }
        let key = xxhash_rust::xxh3::xxh3_128(&words.bytes);
        keys.push(Some(key));
        let e = best.entry(key).or_insert(d);
        if docs[d].0 < docs[*e].0 {
            *e = d;
        }
    }
    let mut dropped = 0;
    let kept = records
        .into_iter()
        .enumerate()
        .filter(|(d, _)| match keys[*d] {
            Some(k) if best[&k] != *d => {
                dropped += 1;
                false
            }
            _ => true,
        })
        .map(|(_, r)| r)
        .collect();
    Ok((kept, dropped))
}

fn records_id_text(
    records: &[serde_json::Map<String, serde_json::Value>],
    fields: &Fields,
) -> Result<Vec<(String, String)>, Error> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let line = serde_json::to_vec(r).expect("a map serializes");
            let rec = crate::jsonl::parse_record(&line, fields, "<memory>", i as u64 + 1)?;
            Ok((rec.id.into_owned(), rec.text.into_owned()))
        })
        .collect()
}
