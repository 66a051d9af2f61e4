//! `neardup dedup` on files: pass 1 signs, clustering decides, pass 2 writes, and only a
//! complete run leaves outputs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use super::*;
use crate::corpus::record;
use crate::engine::Engine;
use crate::error::Error;
use crate::ids::{id_order, DocLoc};
use crate::io::{Inputs, Output, ReadPlan};
use crate::jsonl::{write_tagged, Fields};
use crate::pipeline::{pipelined, scan, ScanStats};
use crate::progress::ProgressFactory;
use crate::stages::sink::{table_rows, RecordSink};

/// Where `neardup dedup` writes besides its main output, and the indexes it checks against.
#[derive(Debug, Clone, Default)]
pub struct DedupOutputs {
    pub output: String,
    pub clusters: Option<String>,
    pub pairs: Option<String>,
    /// A report will be written: measure the S-curve on a sample.
    pub measure: bool,
    /// `--against`: indexes of documents already kept ([`Against`]).
    pub against: Vec<std::path::PathBuf>,
    /// `--update-index`: add the survivors to the one index of `against`.
    pub update_index: bool,
    /// `--removed`: the removed documents' ids, roots and survivors, as Parquet.
    pub removed: Option<String>,
}

/// Everything a `dedup` run reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DedupSummary {
    pub scan: ScanStats,
    pub cluster: ClusterStats,
    /// Measured LSH candidate rates by true similarity (exact-Jaccard confirmation only).
    pub similarity_buckets: Vec<SimilarityBucket>,
    /// The largest clusters, with the beginnings of a few members.
    pub examples: Vec<ClusterExample>,
    pub documents_written: u64,
    pub write_seconds: f64,
    pub seconds: f64,
    /// Heap bytes of the pass-1 tables (ids, signatures, counts).
    pub table_bytes: u64,
    /// With `--group-field`: each group's counts, in order of first appearance.
    pub groups: Vec<GroupCounts>,
    /// With `--against`: what the indexes matched.
    pub against: Option<AgainstSummary>,
}

/// One group's counts (`--group-field`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct GroupCounts {
    /// The field's value; `None` for the documents without it (`--group-missing own`).
    pub group: Option<String>,
    pub documents: u64,
    /// Clusters of two or more documents.
    pub clusters: u64,
    pub documents_written: u64,
}

/// A cluster shown in the report: its root, size, and the first members (id, beginning of
/// text).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ClusterExample {
    pub root: String,
    pub size: usize,
    pub members: Vec<(String, String)>,
}

/// Clusters shown in reports, and members shown of each.
pub(crate) const EXAMPLE_CLUSTERS: usize = 5;
pub(crate) const EXAMPLE_MEMBERS: usize = 4;
/// Characters of each shown member's text.
const SNIPPET_CHARS: usize = 400;

/// The first `n` characters of `text`, with `…` when cut.
fn snippet(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The whole `neardup dedup` on files: pass 1, clustering, pass 2. Outputs appear only when the
/// run succeeds.
pub fn run_dedup(
    inputs: &Inputs,
    fields: &Fields,
    cfg: &DedupConfig,
    engine: &mut dyn Engine,
    outs: &DedupOutputs,
    progress: &ProgressFactory,
    memory_limit: Option<u64>,
) -> Result<DedupSummary, Error> {
    cfg.validate()?;
    if engine.params() != &cfg.params {
        return Err(Error::Param(
            "the engine was built with other parameters than the dedup config".into(),
        ));
    }
    let t0 = Instant::now();
    // Open the indexes and create every output first, so a bad index or path fails before
    // the work.
    let against = Against::open(
        &outs.against,
        cfg,
        fields.group.is_some(),
        outs.update_index,
    )?;
    let tags = record_tags(cfg, against.is_some());
    let mut out = RecordSink::create(&outs.output, inputs, &tags)?;
    let mut clusters_out = outs.clusters.as_deref().map(Output::create).transpose()?;
    let mut pairs_out = outs.pairs.as_deref().map(Output::create).transpose()?;
    let mut removed_out = outs
        .removed
        .as_deref()
        .map(crate::stages::removed::RemovedWriter::create)
        .transpose()?;

    let num_perm = cfg.params.num_perm;
    let mut corpus = SignedCorpus {
        num_perm,
        ..Default::default()
    };
    let per_doc_bytes = crate::sys::bytes_per_document(num_perm, cfg.exact);
    let mut group_index: HashMap<Option<String>, u32> = HashMap::new();
    // Under `jaccard`, the shingle sets are hashed as the documents are signed and kept while
    // they fit, so confirmation need not read the inputs again; past that they are dropped,
    // and the documents in buckets are read again instead (`load_shingle_sets`). Inputs too
    // large for their sets to fit do not try.
    let want_sets =
        AtomicBool::new(cfg.confirm == Confirm::Jaccard && sets_may_fit(inputs.total_bytes()));
    let mut scan_sets = ScanSets {
        kept: want_sets.load(Ordering::Relaxed),
        ..Default::default()
    };
    let scan_stats = {
        let bar = progress.pass("signatures", inputs.total_bytes());
        scan(
            inputs,
            fields,
            engine,
            cfg.exact,
            Some(&want_sets),
            &bar,
            |sc| {
                for (i, x) in sc.extras.iter().enumerate() {
                    if let Some(v) = x.keep {
                        corpus.keep_values.push(v);
                    }
                    if let Some(g) = &fields.group {
                        if x.group.is_none() && cfg.group_missing == GroupMissing::Error {
                            return Err(Error::Record(format!(
                                "{}: field `{g}` is missing or null (--group-missing own puts \
                             documents without it in a group of their own)",
                                inputs.place(sc.file_index, sc.lines[i])
                            )));
                        }
                        let next = group_index.len() as u32;
                        let gi = *group_index.entry(x.group.clone()).or_insert_with(|| {
                            corpus.group_names.push(x.group.clone());
                            next
                        });
                        corpus.groups.push(gi);
                    }
                }
                corpus.ids.extend_from(&sc.ids);
                corpus.locs.extend(sc.lines.iter().map(|&line| DocLoc {
                    file: sc.file_index as u32,
                    line,
                }));
                corpus.sigs.extend_from_slice(&sc.sigs);
                corpus.words.extend_from_slice(&sc.words);
                corpus.exact_keys.extend_from_slice(&sc.exact_keys);
                let table_bytes = corpus.heap_bytes() as u64;
                let room = memory_limit.map_or(u64::MAX, |l| l.saturating_sub(table_bytes));
                let docs = sc.len();
                if !scan_sets.add(&mut sc.sets, docs, room) {
                    want_sets.store(false, Ordering::Relaxed);
                }
                if let Some(limit) = memory_limit {
                    let projected = corpus.heap_bytes() as u64;
                    if projected > limit {
                        return Err(Error::Memory(format!(
                            "after {} documents the signature tables hold {} MiB, over the memory \
                         limit of {} MiB (--max-memory; by default 3/4 of the memory available); \
                         each document costs about {} bytes at num_perm {}: raise --max-memory, \
                         lower --num-perm, or split the corpus; no output was written",
                            corpus.len(),
                            projected >> 20,
                            limit >> 20,
                            per_doc_bytes,
                            num_perm
                        )));
                    }
                }
                Ok(())
            },
        )
    };
    let place_of = |l: DocLoc| inputs.place(l.file as usize, l.line);
    let scan_stats = scan_stats.map_err(|e| {
        // `signatures` checks ids as the chunks arrive, so of a repeated id in the chunks
        // before this error and the error, it names the repeat; name the same here. (Which
        // comes first is chunk by chunk: a repeat in the failing chunk itself is not seen, by
        // either command, and chunks are cut alike only for the same engine.)
        id_order(&corpus.ids, &corpus.locs, &place_of)
            .err()
            .unwrap_or(e)
    })?;
    let sets_budget = memory_limit.map(|l| l.saturating_sub(corpus.heap_bytes() as u64));
    // Before clustering: under `greedy` the indexed documents are kept before every new one,
    // so a new document they match is no other's survivor.
    let t_match = Instant::now();
    let (matches, candidates) = match &against {
        Some(a) => a.matches(&corpus.sigs, cfg)?,
        None => (Vec::new(), 0),
    };
    let match_time = t_match.elapsed();
    if cfg.cluster == ClusterRule::Greedy {
        corpus.index_matched = matches.iter().map(Option::is_some).collect();
    }
    let sets_kept = scan_sets.kept;
    let mut clustering = cluster_corpus(
        &corpus,
        cfg,
        &place_of,
        |needed| match scan_sets.complete(corpus.len()) {
            Some(sets) => Ok(sets
                .into_iter()
                .enumerate()
                .filter(|&(d, _)| needed[d])
                .map(|(d, v)| (d as u32, v))
                .collect()),
            None => load_shingle_sets(inputs, fields, &cfg.params, needed, progress, sets_budget),
        },
        progress,
        outs.measure,
    )?;
    clustering.stats.sets_from_signing = sets_kept && clustering.stats.sets_loaded > 0;
    // The index's time: its matching, then what follows clustering (pass 2, the update).
    let t_against = Instant::now() - match_time;

    // Pass 2: stream the records out.
    let t_write = Instant::now();
    // The largest clusters, for the report: their first members' texts are read in pass 2.
    let groups = clustering.groups(&corpus.ids);
    let mut largest: Vec<&(u32, Vec<u32>)> = groups.iter().collect();
    largest.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    largest.truncate(EXAMPLE_CLUSTERS);
    let wanted: std::collections::HashSet<u32> = largest
        .iter()
        .flat_map(|(_, m)| m.iter().take(EXAMPLE_MEMBERS).copied())
        .collect();
    let mut snippets = HashMap::new();
    let verdicts = InMemory::new(&corpus, &clustering, &matches);
    let pass_two = PassTwo {
        inputs,
        fields,
        verdicts: &verdicts,
        drop: cfg.drop,
        survivor_tag: cfg.tags_survivor(),
        index_tag: against.is_some() && !cfg.drop,
    };
    let written = write_pass(&pass_two, &mut out, progress, &wanted, &mut snippets)?;
    let examples = largest
        .iter()
        .map(|(root, members)| ClusterExample {
            root: corpus.ids.get(*root as usize).to_string(),
            size: members.len(),
            members: members
                .iter()
                .take(EXAMPLE_MEMBERS)
                .map(|&m| {
                    (
                        corpus.ids.get(m as usize).to_string(),
                        snippets.get(&m).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        })
        .collect();
    if let Some(o) = clusters_out.as_mut() {
        let mut line = Vec::new();
        for (root, members) in clustering.groups(&corpus.ids) {
            line.clear();
            let names = members.iter().map(|&m| corpus.ids.get(m as usize));
            put_cluster_line(&mut line, corpus.ids.get(root as usize), names);
            o.write_all(&line)?;
        }
    }
    if let Some(o) = removed_out.as_mut() {
        o.add(&verdicts)?;
    }
    if let Some(o) = pairs_out.as_mut() {
        for p in &clustering.pairs {
            let (a, b) = (corpus.ids.get(p.a as usize), corpus.ids.get(p.b as usize));
            o.write_all(pair_line(a, b, p.estimate, p.jaccard).as_bytes())?;
        }
    }
    out.finish()?;
    if let Some(o) = clusters_out {
        o.finish()?;
    }
    if let Some(o) = pairs_out {
        o.finish()?;
    }
    if let Some(o) = removed_out {
        o.finish()?;
    }
    // The index changes only once the outputs are in place: a run that fails before leaves
    // it as it was.
    let against = match &against {
        Some(a) => {
            let survivors: Vec<u32> = (0..corpus.len())
                .filter(|&d| verdicts.keeps(d))
                .map(|d| d as u32)
                .collect();
            let added = a.update_index(cfg, &corpus.ids, &corpus.sigs, &survivors)?;
            let matched = matches.iter().filter(|m| m.is_some()).count() as u64;
            Some(against_summary(
                a, cfg, candidates, matched, added, t_against,
            ))
        }
        None => None,
    };
    let mut groups: Vec<GroupCounts> = corpus
        .group_names
        .iter()
        .map(|g| GroupCounts {
            group: g.clone(),
            ..Default::default()
        })
        .collect();
    // Only with groups: the roots of clusters of two or more, to count each group's clusters.
    let mut is_cluster_root = vec![false; corpus.groups.len()];
    if !corpus.groups.is_empty() {
        for (d, &r) in clustering.root.iter().enumerate() {
            if r as usize != d {
                is_cluster_root[r as usize] = true;
            }
        }
    }
    for (d, &g) in corpus.groups.iter().enumerate() {
        let c = &mut groups[g as usize];
        c.documents += 1;
        if is_cluster_root[d] {
            c.clusters += 1;
        }
        if !cfg.drop || verdicts.keeps(d) {
            c.documents_written += 1;
        }
    }
    Ok(DedupSummary {
        against,
        groups,
        table_bytes: corpus.heap_bytes() as u64,
        scan: scan_stats,
        cluster: clustering.stats,
        similarity_buckets: clustering.similarity_buckets,
        examples,
        documents_written: written,
        write_seconds: t_write.elapsed().as_secs_f64(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Bytes of shingle sets pass 1 keeps at most (besides the memory limit): enough that a
/// corpus of a few hundred MB is read once (docs/BENCHMARKS.md, "Sets from the signing
/// pass"), little beside the signature tables of one too large for it, whose sets are
/// dropped early in the pass.
pub(crate) const SCAN_SETS_BYTES: u64 = 256 << 20;

/// Input bytes (as stored, compressed or not) past which pass 1 does not hash sets to keep:
/// a set costs about a byte for each byte of text, so such inputs' sets pass
/// [`SCAN_SETS_BYTES`] unless text is under a quarter of their bytes, and would be hashed up
/// to it only to be dropped.
const SCAN_SETS_TRY_BYTES: u64 = 4 * SCAN_SETS_BYTES;

/// Whether pass 1 hashes sets to keep, for inputs of `total` bytes as stored (`None`: not
/// known, as for stdin).
fn sets_may_fit(total: Option<u64>) -> bool {
    total.is_none_or(|b| b <= SCAN_SETS_TRY_BYTES)
}

/// The shingle sets pass 1 hands over, every document's in input order, while they are kept.
#[derive(Default)]
struct ScanSets {
    sets: Vec<Vec<u64>>,
    bytes: u64,
    /// False once a chunk came without its sets or they outgrew their room: then none are
    /// kept.
    kept: bool,
}

impl ScanSets {
    /// Keep the `docs` sets of the next chunk (taken from `sets`) while all of them fit in
    /// [`SCAN_SETS_BYTES`] and `room`; false once none are kept.
    fn add(&mut self, sets: &mut Vec<Vec<u64>>, docs: usize, room: u64) -> bool {
        if self.kept && sets.len() == docs {
            // A set costs its allocation and its vector.
            self.bytes += sets
                .iter()
                .map(|v| v.capacity() as u64 * 8 + 24)
                .sum::<u64>();
            self.sets.append(sets);
            self.kept = self.bytes <= SCAN_SETS_BYTES.min(room);
        } else {
            self.kept = false;
        }
        if !self.kept {
            *self = ScanSets::default();
        }
        self.kept
    }

    /// Every document's set, if all `docs` were kept.
    fn complete(self, docs: usize) -> Option<Vec<Vec<u64>>> {
        (self.kept && self.sets.len() == docs).then_some(self.sets)
    }
}

/// One line of the `--clusters` file, appended to `out`: the root, the members in id order,
/// the size; the bytes serde_json writes for that object, written as they go (a cluster of
/// millions is never a JSON value of millions of strings).
pub(crate) fn put_cluster_line<'a>(
    out: &mut Vec<u8>,
    root: &str,
    members: impl ExactSizeIterator<Item = &'a str>,
) {
    let json = |out: &mut Vec<u8>, s: &str| {
        serde_json::to_writer(&mut *out, s).expect("writing JSON to memory cannot fail")
    };
    out.extend_from_slice(b"{\"root\":");
    json(out, root);
    out.extend_from_slice(b",\"members\":[");
    let size = members.len();
    for (i, m) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json(out, m);
    }
    out.extend_from_slice(format!("],\"size\":{size}}}\n").as_bytes());
}

/// One line of the `--pairs` file.
pub(crate) fn pair_line(a: &str, b: &str, estimate: f64, jaccard: Option<f64>) -> String {
    let mut line = serde_json::json!({ "a": a, "b": b, "estimate": estimate });
    if let Some(j) = jaccard {
        line["jaccard"] = j.into();
    }
    format!("{line}\n")
}

/// Record `i` of `chunk`'s shingle set (sorted 64-bit FNV-1a values), for `jaccard`
/// confirmation.
pub(crate) fn shingle_set(
    chunk: &crate::io::Chunk,
    i: usize,
    fields: &Fields,
    name: &str,
    params: &crate::sign::minhash::MinHashParams,
) -> Result<Vec<u64>, Error> {
    let rec = record(chunk, i, fields, name)?;
    Ok(text_shingle_set(&rec.text, params))
}

/// A text's shingle set (sorted 64-bit FNV-1a values).
pub(crate) fn text_shingle_set(
    text: &str,
    params: &crate::sign::minhash::MinHashParams,
) -> Vec<u64> {
    let words = crate::text::Words::with_rule(text, params.rule());
    crate::sign::fnv::shingle_fnv_set(&words, params.k)
}

/// The extra pass for `jaccard` confirmation: shingle sets of the marked documents only.
pub(crate) fn load_shingle_sets(
    inputs: &Inputs,
    fields: &Fields,
    params: &crate::sign::minhash::MinHashParams,
    needed: &[bool],
    progress: &ProgressFactory,
    budget: Option<u64>,
) -> Result<ShingleSets, Error> {
    let bar = progress.pass("shingle sets", inputs.total_bytes());
    let next_doc = std::sync::atomic::AtomicUsize::new(0);
    let mut sets = ShingleSets::new();
    let mut held = 0u64;
    pipelined(
        inputs,
        ReadPlan::needed(fields),
        crate::corpus::DEFAULT_CHUNK_BYTES,
        &bar,
        |chunk, name| {
            // Chunks are prepared one at a time, in input order, so a running count gives
            // each line its document index.
            let base = next_doc.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            let found: Result<Vec<(u32, Vec<u64>)>, Error> = (0..chunk.len())
                .into_par_iter()
                .filter(|&i| needed.get(base + i).copied().unwrap_or(false))
                .map(|i| {
                    Ok((
                        (base + i) as u32,
                        shingle_set(&chunk, i, fields, name, params)?,
                    ))
                })
                .collect();
            found
        },
        |found| {
            // A set costs its values plus a map entry.
            held += found
                .iter()
                .map(|(_, v)| v.len() as u64 * 8 + 64)
                .sum::<u64>();
            if let Some(b) = budget {
                if held > b {
                    return Err(Error::Memory(format!(
                        "the shingle sets for exact-Jaccard confirmation ({} documents in LSH \
                         buckets) need more than the {} MiB left under the memory limit; use \
                         --confirm estimate (no sets), raise --max-memory, or split the corpus; \
                         no output was written",
                        needed.iter().filter(|&&x| x).count(),
                        b >> 20
                    )));
                }
            }
            sets.extend(found);
            Ok(())
        },
    )?;
    Ok(sets)
}

/// The column (Parquet) or `meta` key (JSONL) that names each record's cluster root.
pub const CLUSTER_TAG: &str = "minhash_cluster";

/// The column or `meta` key that names, in a `--tag-only` run whose `--keep` is not the root,
/// the record of the cluster that a dropping run would keep.
pub const SURVIVOR_TAG: &str = "minhash_survivor";

/// The tags a run writes on each record, in order (the columns a Parquet output adds): the
/// cluster's root; its survivor ([`DedupConfig::tags_survivor`]); with `against` and
/// `--tag-only`, the indexed document it duplicates.
pub fn record_tags(cfg: &DedupConfig, against: bool) -> Vec<&'static str> {
    let mut tags = vec![CLUSTER_TAG];
    if cfg.tags_survivor() {
        tags.push(SURVIVOR_TAG);
    }
    if against && !cfg.drop {
        tags.push(INDEX_TAG);
    }
    tags
}

/// What pass 2 writes of each document (indices in input order).
pub(crate) trait Verdicts: Sync {
    /// Documents in all.
    fn len(&self) -> usize;
    /// The document's id.
    fn id(&self, d: usize) -> &str;
    /// The tag: the id of the document's cluster root (its own id when alone).
    fn tag(&self, d: usize) -> &str;
    /// Is the document in a cluster of two or more (a Parquet output tags only these)?
    fn in_cluster(&self, d: usize) -> bool;
    /// Does it survive a dropping run?
    fn keeps(&self, d: usize) -> bool;
    /// The id of the document of its cluster that survives (its own id when alone).
    fn survivor(&self, d: usize) -> &str;
    /// With `--against`: the id of the indexed document it duplicates.
    fn index_match(&self, _d: usize) -> Option<&str> {
        None
    }
}

/// The verdicts of an in-memory clustering, and of the indexes checked against (`matches`:
/// one per document, or none without `--against`).
struct InMemory<'a> {
    corpus: &'a SignedCorpus,
    clustering: &'a Clustering,
    matches: &'a [Option<IndexMatch>],
    in_cluster: Vec<bool>,
    /// For each cluster root (indexed by document), the document that survives.
    survivor_of_root: HashMap<u32, u32>,
}

impl<'a> InMemory<'a> {
    fn new(
        corpus: &'a SignedCorpus,
        clustering: &'a Clustering,
        matches: &'a [Option<IndexMatch>],
    ) -> Self {
        let mut in_cluster = vec![false; corpus.len()];
        for (d, &r) in clustering.root.iter().enumerate() {
            if r as usize != d {
                in_cluster[d] = true;
                in_cluster[r as usize] = true;
            }
        }
        let survivor_of_root = (0..corpus.len())
            .filter(|&d| in_cluster[d] && clustering.survives[d])
            .map(|d| (clustering.root[d], d as u32))
            .collect();
        InMemory {
            corpus,
            clustering,
            matches,
            in_cluster,
            survivor_of_root,
        }
    }
}

impl Verdicts for InMemory<'_> {
    fn len(&self) -> usize {
        self.corpus.len()
    }
    fn id(&self, d: usize) -> &str {
        self.corpus.ids.get(d)
    }
    fn tag(&self, d: usize) -> &str {
        self.corpus.ids.get(self.clustering.root[d] as usize)
    }
    fn in_cluster(&self, d: usize) -> bool {
        self.in_cluster[d]
    }
    fn keeps(&self, d: usize) -> bool {
        self.clustering.keeps(d) && self.index_match(d).is_none()
    }
    fn survivor(&self, d: usize) -> &str {
        let s = self
            .survivor_of_root
            .get(&self.clustering.root[d])
            .map_or(d, |&s| s as usize);
        self.corpus.ids.get(s)
    }
    fn index_match(&self, d: usize) -> Option<&str> {
        self.matches.get(d)?.as_ref().map(|m| m.id.as_str())
    }
}

/// What pass 2 reads from: the inputs again, and what to write of each document.
pub(crate) struct PassTwo<'a> {
    pub inputs: &'a Inputs,
    pub fields: &'a Fields,
    pub verdicts: &'a dyn Verdicts,
    pub drop: bool,
    /// Tag each record with its cluster's survivor ([`SURVIVOR_TAG`]).
    pub survivor_tag: bool,
    /// Tag each record with the indexed document it duplicates ([`INDEX_TAG`]).
    pub index_tag: bool,
}

/// One chunk's kept records as pass 2 writes them.
enum Kept<'a> {
    /// JSONL lines (tagged), in pieces, with their counts.
    Lines(Vec<Result<(Vec<u8>, u64), Error>>),
    /// Parquet rows and their tags: each one's cluster root's id (none for a document in no
    /// cluster), and with `--against` and `--tag-only` the indexed document it duplicates.
    Rows(crate::stages::sink::TableRows, Vec<Vec<Option<&'a str>>>),
}

/// Pass 2: every kept record out, tagged with its cluster root (`meta.minhash_cluster` in
/// JSONL, the `minhash_cluster` column in Parquet); the beginnings of the `wanted` documents
/// into `snippets` (for the report).
pub(crate) fn write_pass(
    p2: &PassTwo,
    out: &mut RecordSink,
    progress: &ProgressFactory,
    wanted: &std::collections::HashSet<u32>,
    snippets: &mut HashMap<u32, String>,
) -> Result<u64, Error> {
    let PassTwo {
        inputs,
        fields,
        verdicts,
        drop,
        survivor_tag,
        index_tag,
    } = *p2;
    let bar = progress.pass("writing", inputs.total_bytes());
    let next_doc = std::sync::atomic::AtomicUsize::new(0);
    let mut written = 0u64;
    let plan = ReadPlan {
        fields,
        columns: out.columns(),
    };
    let table_schema = out.table_schema();
    pipelined(
        inputs,
        plan,
        crate::corpus::DEFAULT_CHUNK_BYTES,
        &bar,
        |chunk, name| {
            let base = next_doc.fetch_add(chunk.len(), std::sync::atomic::Ordering::SeqCst);
            if base + chunk.len() > verdicts.len() {
                return Err(Error::Param(format!(
                    "{name} changed between passes: it now has more records than when it was \
                     first read"
                )));
            }
            let kept_idx: Vec<usize> = (0..chunk.len())
                .filter(|&i| !drop || verdicts.keeps(base + i))
                .collect();
            let kept = match &table_schema {
                Some(schema) => {
                    let mut tags = vec![kept_idx
                        .iter()
                        .map(|&i| {
                            let d = base + i;
                            verdicts.in_cluster(d).then(|| verdicts.tag(d))
                        })
                        .collect()];
                    if survivor_tag {
                        tags.push(
                            kept_idx
                                .iter()
                                .map(|&i| {
                                    let d = base + i;
                                    verdicts.in_cluster(d).then(|| verdicts.survivor(d))
                                })
                                .collect(),
                        );
                    }
                    if index_tag {
                        tags.push(
                            kept_idx
                                .iter()
                                .map(|&i| verdicts.index_match(base + i))
                                .collect(),
                        );
                    }
                    Kept::Rows(table_rows(schema, &chunk, &kept_idx, name)?, tags)
                }
                None => Kept::Lines(
                    kept_idx
                        .par_chunks(256)
                        .map(|idx| {
                            // Room for the lines and their tags, so the buffer never grows.
                            let bytes: usize = idx.iter().map(|&i| chunk.line(i).len() + 1).sum();
                            let mut buf = crate::io::spare_buffer(bytes + idx.len() * 96);
                            let (mut one, mut two) = (Vec::new(), Vec::new());
                            for &i in idx {
                                let d = base + i;
                                let (line, line_no) = (chunk.line(i), chunk.line_no(i));
                                let mut tags = vec![(CLUSTER_TAG, verdicts.tag(d))];
                                if survivor_tag {
                                    tags.push((SURVIVOR_TAG, verdicts.survivor(d)));
                                }
                                if let Some(m) = verdicts.index_match(d).filter(|_| index_tag) {
                                    tags.push((INDEX_TAG, m));
                                }
                                // Each tag but the last into a scratch line, without its
                                // newline (a record again), the last into the buffer.
                                let (last, before) = tags.split_last().expect("a cluster tag");
                                let mut from: &[u8] = line;
                                for &(key, value) in before {
                                    one.clear();
                                    write_tagged(&mut one, from, key, value, name, line_no)?;
                                    one.pop();
                                    std::mem::swap(&mut one, &mut two);
                                    from = &two;
                                }
                                write_tagged(&mut buf, from, last.0, last.1, name, line_no)?;
                            }
                            Ok((buf, idx.len() as u64))
                        })
                        .collect(),
                ),
            };
            // The beginnings of the documents the report shows.
            let mut found = Vec::new();
            for i in 0..chunk.len() {
                let d = (base + i) as u32;
                if wanted.contains(&d) {
                    let rec = record(&chunk, i, fields, name)?;
                    found.push((d, snippet(&rec.text, SNIPPET_CHARS)));
                }
            }
            Ok((kept, chunk.len(), found))
        },
        |(kept, lines, found)| {
            match kept {
                Kept::Lines(pieces) => {
                    for p in pieces {
                        let (buf, n) = p?;
                        out.write_all(&buf)?;
                        crate::io::recycle_buffer(buf);
                        written += n;
                    }
                }
                Kept::Rows(rows, tags) => {
                    let columns: Vec<&[Option<&str>]> = tags.iter().map(Vec::as_slice).collect();
                    out.write_rows(&rows, &columns)?;
                    written += rows.num_rows() as u64;
                }
            }
            snippets.extend(found);
            bar.add_docs(lines as u64);
            Ok(())
        },
    )?;
    if next_doc.into_inner() != verdicts.len() {
        return Err(Error::Param(
            "an input changed between passes: it has fewer records than when it was first read"
                .into(),
        ));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets of `n` documents of `len` values each.
    fn sets(n: usize, len: usize) -> Vec<Vec<u64>> {
        (0..n).map(|d| vec![d as u64; len]).collect()
    }

    /// Inputs up to 1 GiB as stored, and those of unknown size, try to keep their sets; larger
    /// ones do not.
    #[test]
    fn only_inputs_whose_sets_may_fit_try_to_keep_them() {
        assert_eq!(SCAN_SETS_TRY_BYTES, 1 << 30);
        for (total, tries) in [
            (Some(0), true),
            (Some(1), true),
            (Some((1 << 30) - 1), true),
            (Some(1 << 30), true),
            (Some((1 << 30) + 1), false),
            (Some(u64::MAX), false),
            (None, true),
        ] {
            assert_eq!(sets_may_fit(total), tries, "{total:?}");
        }
    }

    /// Pass 1's sets are kept chunk after chunk while they fit; one chunk too many, too little
    /// room beside the tables or a chunk without its sets drops them all for good.
    #[test]
    fn scan_sets_are_kept_while_every_chunk_brings_them_and_they_fit() {
        let bytes = |n: usize, len: usize| (n * (len * 8 + 24)) as u64;
        let mut kept = ScanSets {
            kept: true,
            ..Default::default()
        };
        assert!(kept.add(&mut sets(3, 4), 3, u64::MAX));
        assert!(kept.add(&mut Vec::new(), 0, u64::MAX), "an empty chunk");
        assert!(kept.add(&mut sets(2, 1), 2, bytes(3, 4) + bytes(2, 1)));
        assert_eq!(kept.bytes, bytes(3, 4) + bytes(2, 1));
        let all = kept.complete(5).expect("all five kept");
        assert_eq!(
            all.iter().map(Vec::len).collect::<Vec<_>>(),
            [4, 4, 4, 1, 1]
        );

        let fresh = || ScanSets {
            kept: true,
            ..Default::default()
        };
        // The room beside the tables, by one byte.
        let mut s = fresh();
        assert!(s.add(&mut sets(3, 4), 3, u64::MAX));
        assert!(!s.add(&mut sets(2, 1), 2, bytes(3, 4) + bytes(2, 1) - 1));
        assert!((s.bytes, s.sets.len()) == (0, 0), "dropped sets are freed");
        assert!(
            !s.add(&mut sets(1, 1), 1, u64::MAX),
            "once dropped, never again"
        );
        assert!(s.complete(6).is_none());
        // The cap, whatever the room.
        let over = (SCAN_SETS_BYTES as usize - 24) / 8 + 1;
        let mut s = fresh();
        assert!(!s.add(&mut vec![Vec::with_capacity(over)], 1, u64::MAX));
        let mut s = fresh();
        assert!(s.add(&mut vec![Vec::with_capacity(over - 1)], 1, u64::MAX));
        // A chunk prepared without its sets.
        let mut s = fresh();
        assert!(s.add(&mut sets(2, 1), 2, u64::MAX));
        assert!(!s.add(&mut Vec::new(), 1, u64::MAX));
        assert!(s.complete(3).is_none());
        // Not asked for, none are kept.
        assert!(!ScanSets::default().add(&mut sets(1, 1), 1, u64::MAX));
        // A run that did not see every document has no complete sets.
        let mut s = fresh();
        assert!(s.add(&mut sets(2, 1), 2, u64::MAX));
        assert!(s.complete(3).is_none());
    }

    #[test]
    fn a_cluster_line_is_the_json_object_serde_json_writes() {
        let ids = [
            "a",
            "",
            "quote \" and \\ backslash",
            "tab\tnewline\ncontrol\u{1}",
            "é中😀",
            "</script>",
        ];
        for n in 0..=ids.len() {
            for root in ids {
                let members = &ids[..n];
                let want = serde_json::json!({"root": root, "members": members, "size": n});
                let mut got = Vec::new();
                put_cluster_line(&mut got, root, members.iter().copied());
                assert_eq!(String::from_utf8(got).unwrap(), format!("{want}\n"));
            }
        }
    }
}
