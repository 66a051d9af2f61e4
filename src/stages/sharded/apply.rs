//! Stage 6, per shard: the shard's records again, in input order, each tagged with its
//! cluster's root and kept or dropped by `cluster`'s verdict; written as in-memory `dedup`
//! writes them, so the shards' outputs in shard order are its output.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::table::strings;
use super::WorkDir;
use crate::error::Error;
use crate::ids::IdArena;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{write_pass, Against, IndexMatch, PassTwo, Verdicts};
use crate::stages::removed::RemovedWriter;
use crate::stages::sink::RecordSink;

/// What applying one shard wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApplySummary {
    pub written: u64,
    /// With `--against`: pairs of a document and an indexed one sharing a band, and the
    /// documents with a confirmed match.
    #[serde(default)]
    pub index_candidates: u64,
    #[serde(default)]
    pub index_matched: u64,
    /// The beginnings of the texts of the report's largest clusters' members in this shard,
    /// by row.
    pub snippets: Vec<(u64, String)>,
    pub seconds: f64,
}

/// One shard's verdicts, in row order: from `sign` (ids), `cluster` (tags, survivors) and,
/// with `--against`, the indexes (matches). Read by [`shard_verdicts`].
#[derive(Debug, Default)]
pub struct ShardVerdicts {
    ids: IdArena,
    /// Per document, an index into `tags`, or `u32::MAX` for a document in no cluster.
    tag: Vec<u32>,
    tags: IdArena,
    survives: Vec<bool>,
    /// Per document, an index into `tags` of its cluster's survivor (`u32::MAX`: none read).
    survivor: Vec<u32>,
    /// Whether `survivor` was read (the run records it; else the root is the survivor).
    survivors_recorded: bool,
    /// With `--against`: each document's match in the indexes (else empty).
    matches: Vec<Option<IndexMatch>>,
    /// With `--against`: pairs of a document and an indexed one sharing a band.
    index_candidates: u64,
}

impl ShardVerdicts {
    /// How many documents the shard holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.len() == 0
    }
    /// The document's id.
    pub fn id(&self, d: usize) -> &str {
        self.ids.get(d)
    }
    /// The root id of the document's cluster, or `None` for a document in no cluster.
    pub fn cluster(&self, d: usize) -> Option<&str> {
        match self.tag[d] {
            u32::MAX => None,
            t => Some(self.tags.get(t as usize)),
        }
    }
    /// Whether the clustering keeps the document (an index match aside).
    pub fn survives(&self, d: usize) -> bool {
        self.survives[d]
    }
    /// The id of the document of its cluster that the run keeps (its own when in none).
    pub fn survivor_id(&self, d: usize) -> &str {
        Verdicts::survivor(self, d)
    }
    /// With `--against`: the id of the indexed document the document matched.
    pub fn matched(&self, d: usize) -> Option<&str> {
        Verdicts::index_match(self, d)
    }
    /// Whether a dropping run writes the document.
    pub fn kept(&self, d: usize) -> bool {
        Verdicts::keeps(self, d)
    }
}

impl Verdicts for ShardVerdicts {
    fn len(&self) -> usize {
        self.ids.len()
    }
    fn id(&self, d: usize) -> &str {
        self.ids.get(d)
    }
    fn tag(&self, d: usize) -> &str {
        match self.tag[d] {
            u32::MAX => self.ids.get(d),
            t => self.tags.get(t as usize),
        }
    }
    fn in_cluster(&self, d: usize) -> bool {
        self.tag[d] != u32::MAX
    }
    fn keeps(&self, d: usize) -> bool {
        self.survives[d] && self.index_match(d).is_none()
    }
    fn index_match(&self, d: usize) -> Option<&str> {
        self.matches.get(d)?.as_ref().map(|m| m.id.as_str())
    }
    fn survivor(&self, d: usize) -> &str {
        match self.survivor.get(d) {
            Some(&t) if t != u32::MAX => self.tags.get(t as usize),
            // Not recorded: the root is the survivor (its own id for a document alone).
            _ => Verdicts::tag(self, d),
        }
    }
}

impl WorkDir {
    /// Where `apply` keeps a shard's summary, for the run's report.
    pub fn apply_summary_file(&self, shard: usize) -> std::path::PathBuf {
        self.root().join("apply").join(format!("{shard:05}.json"))
    }
}

impl WorkDir {
    /// Refuse shard `shard` when its bytes are no longer those `sign` read: every verdict of
    /// the run was made from those, and a document edited since would be dropped as the
    /// duplicate of a text it no longer matches.
    pub fn check_content(&self, inputs: &crate::io::Inputs, shard: usize) -> Result<(), Error> {
        let signed = super::sign::sign_summary(self, shard)?.content;
        let e = &self.manifest.shards[shard];
        let now = self.content_checksum(inputs, shard)?;
        if now != signed {
            return Err(Error::Work {
                path: e.path.clone(),
                msg: format!(
                    "shard {shard} changed since `sign` read it (its contents' checksum was \
                     {signed}, it is {now}); start again in an empty work directory"
                ),
            });
        }
        Ok(())
    }

    /// The content checksum of shard `shard`, read whole as `inputs` (its only input, opened
    /// with [`crate::io::Inputs::with_content_checksums`]): the bytes the pass read, or for a
    /// Parquet shard, whose pass reads columns, the file's.
    pub(crate) fn content_checksum(
        &self,
        inputs: &crate::io::Inputs,
        shard: usize,
    ) -> Result<String, Error> {
        match inputs.content_checksum(0) {
            Some(sum) => Ok(sum),
            None => {
                let path = self.manifest.shard_path(shard);
                Ok(crate::io::checksum::file_checksum(&path, None)?.0)
            }
        }
    }
}

/// The summary `apply` left for shard `shard`.
pub fn apply_summary(work: &WorkDir, shard: usize) -> Result<ApplySummary, Error> {
    work.need_json(&work.apply_summary_file(shard), &format!("apply {shard}"))
}

/// Shard `shard`'s verdicts, in row order, once `cluster` has run: what `apply` writes by, for
/// a caller that filters the records itself. The stage files are checked as every stage
/// checks them (sealed, of this run, one verdict per signed document).
pub fn shard_verdicts(work: &WorkDir, shard: usize) -> Result<ShardVerdicts, Error> {
    work.check_shard(shard)?;
    super::cluster::summary(work)?;
    let mut v = ShardVerdicts {
        survivors_recorded: work.config().records_survivor(),
        ..ShardVerdicts::default()
    };
    let mut columns = vec!["tag", "survives"];
    if v.survivors_recorded {
        columns.push("survivor");
    }
    for batch in work.open_table(&work.sign_file(shard), "sign", &["id"])? {
        let batch = batch?;
        let id = strings(&batch, "id");
        for i in 0..batch.num_rows() {
            v.ids.push(id.value(i));
        }
    }
    // Tags repeat (a cluster's members share one): each distinct tag is stored once.
    let mut seen: HashMap<String, u32> = HashMap::new();
    let table = work.open_table(&work.cluster_file(shard), "cluster", &columns)?;
    let mut intern = |t: &str, tags: &mut IdArena| -> u32 {
        match seen.get(t) {
            Some(&at) => at,
            None => {
                tags.push(t);
                let at = tags.len() as u32 - 1;
                seen.insert(t.to_string(), at);
                at
            }
        }
    };
    for batch in table {
        let batch = batch?;
        let tag = strings(&batch, "tag");
        if v.survivors_recorded {
            let survivor = strings(&batch, "survivor");
            for i in 0..batch.num_rows() {
                v.survivor
                    .push(if arrow_array::Array::is_null(survivor, i) {
                        u32::MAX
                    } else {
                        intern(survivor.value(i), &mut v.tags)
                    });
            }
        }
        let survives = arrow_array::cast::AsArray::as_boolean(
            batch
                .column_by_name("survives")
                .expect("a projected column")
                .as_ref(),
        );
        for i in 0..batch.num_rows() {
            v.survives.push(survives.value(i));
            if arrow_array::Array::is_null(tag, i) {
                v.tag.push(u32::MAX);
                continue;
            }
            let at = intern(tag.value(i), &mut v.tags);
            v.tag.push(at);
        }
    }
    if v.tag.len() != v.ids.len() {
        return Err(work.refuse(format!(
            "shard {shard} has {} signed documents and {} verdicts",
            v.ids.len(),
            v.tag.len()
        )));
    }
    // `--against`: the shard's signatures checked against the indexes as recorded.
    if !work.manifest.against.is_empty() {
        let against = Against::open_recorded(&work.manifest.against_resolved(), work.config())?;
        let path = work.sig_rows_file(shard);
        let width = work.config().params.num_perm * 4;
        let docs = v.ids.len() as u64;
        let mut rows =
            super::raw::RawRows::open(work, &path, width, Some(docs), false)?.expect("required");
        let sigs: Vec<u32> = super::codec::fields::<u32>(rows.read_next(v.ids.len())?).collect();
        let (matches, candidates) = against.matches(&sigs, work.config())?;
        v.index_candidates = candidates;
        v.matches = matches;
    }
    Ok(v)
}

/// Write the `--removed` file of a run whose `cluster` has run: every shard's removed
/// documents, in shard order; returns how many.
pub fn write_removed(work: &WorkDir, path: &str) -> Result<u64, Error> {
    let mut out = RemovedWriter::create(path)?;
    for s in 0..work.shards() {
        out.add(&shard_verdicts(work, s)?)?;
    }
    out.finish()
}

/// Write shard `shard`'s kept records to `out` (which the caller finishes), and keep the
/// summary in the work directory for the run's report.
pub fn apply(
    work: &WorkDir,
    shard: usize,
    out: &mut RecordSink,
    progress: &ProgressFactory,
) -> Result<ApplySummary, Error> {
    apply_listing_removed(work, shard, out, None, progress)
}

/// [`apply`], adding the shard's removed documents to `removed` (`dedup --work-dir
/// --removed`) from the verdicts it reads anyway.
pub(crate) fn apply_listing_removed(
    work: &WorkDir,
    shard: usize,
    out: &mut RecordSink,
    removed: Option<&mut RemovedWriter>,
    progress: &ProgressFactory,
) -> Result<ApplySummary, Error> {
    work.check_shard(shard)?;
    let _lock = work.lock(&format!("apply-{shard:05}"))?;
    work.remove_partials("apply", &format!("{shard:05}."))?;
    let t0 = std::time::Instant::now();
    let summary = super::cluster::summary(work)?;
    let v = shard_verdicts(work, shard)?;
    if let Some(r) = removed {
        r.add(&v)?;
    }
    let (index_candidates, index_matched) = (
        v.index_candidates,
        v.matches.iter().filter(|m| m.is_some()).count() as u64,
    );
    let survivor_tag = work.config().tags_survivor();
    let wanted: HashSet<u32> = summary
        .largest
        .iter()
        .flat_map(|c| c.members.iter())
        .filter(|m| m.0 == shard)
        .map(|m| m.1 as u32)
        .collect();
    let inputs = work.inputs(&[shard])?.with_content_checksums();
    let pass = PassTwo {
        inputs: &inputs,
        fields: work.fields(),
        verdicts: &v,
        drop: work.config().drop,
        survivor_tag,
        index_tag: !work.manifest.against.is_empty() && !work.config().drop,
    };
    let mut snippets = HashMap::new();
    let written = write_pass(&pass, out, progress, &wanted, &mut snippets)?;
    work.check_content(&inputs, shard)?;
    let mut snippets: Vec<(u64, String)> =
        snippets.into_iter().map(|(d, s)| (d as u64, s)).collect();
    snippets.sort();
    let s = ApplySummary {
        written,
        index_candidates,
        index_matched,
        snippets,
        seconds: t0.elapsed().as_secs_f64(),
    };
    work.write_json(&work.apply_summary_file(shard), &s)?;
    Ok(s)
}
