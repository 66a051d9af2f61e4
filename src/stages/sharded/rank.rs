//! Stage 2, over all shards: each document's place in id order (`rank`), a repeated id refused
//! with both places named, the exact-duplicate pre-pass (`exact_rep`: the rank of the identical
//! document with the smallest id, or `u64::MAX`), and each document's group (`group`, an index
//! into the groups in order of first appearance).
//!
//! Out of core: the documents' records (number, id, exact key, group) are split by id range
//! into buckets of about `budget` bytes, the ranges cut at ids drawn from a sample, and each
//! bucket is sorted on its own, in range order, so ranks count on from one bucket to the next.
//! The ranks and the exact-duplicate representatives (found per range of exact keys) then go
//! back into document order one range of documents at a time. A corpus whose records fit the
//! budget is never spilled. Memory: about twice the budget at the peak (one bucket, its order,
//! the spill buffers of the next steps), and the groups' names; ranks are 64-bit.

use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, UInt32Array, UInt64Array};
use arrow_schema::DataType;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::table::{col, strings, u32s, u64s, BATCH_ROWS};
use super::WorkDir;
use crate::error::Error;
use crate::ids::sort_ids_by;
use crate::progress::ProgressFactory;

/// No identical document with a smaller id.
pub const NO_REP: u64 = u64::MAX;

/// Bytes of records `rank` sorts at once by default (`stage rank --sort-memory`).
pub const RANK_BUDGET: usize = 256 << 20;

/// The most buckets a step splits into: past `RANK_BUDGET` times this many bytes of records
/// (about 4 billion documents), buckets grow beyond the budget.
const MAX_PARTS: usize = 1024;

/// Ids drawn to cut the id ranges: the ones with the smallest hashes.
const SAMPLE: usize = 1 << 16;

/// What `rank` found, for the later stages and the report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankSummary {
    /// Documents per shard.
    pub rows: Vec<u64>,
    pub exact_duplicates: u64,
    pub wordless: u64,
    /// With a group field: the groups in order of first appearance (`None`: documents without
    /// the field).
    pub groups: Vec<Option<String>>,
    pub seconds: f64,
    /// Id-range buckets the documents were sorted in (1: all in memory at once).
    #[serde(default)]
    pub buckets: usize,
}

/// Rank every document, sorting at most [`RANK_BUDGET`] bytes of records at once. Returns the
/// summary, or `None` when ranked already.
pub fn rank(work: &WorkDir, progress: &ProgressFactory) -> Result<Option<RankSummary>, Error> {
    rank_within(work, progress, RANK_BUDGET)
}

/// [`rank`], sorting at most about `budget` bytes of records at once. The files written are
/// the same for any budget.
pub fn rank_within(
    work: &WorkDir,
    progress: &ProgressFactory,
    budget: usize,
) -> Result<Option<RankSummary>, Error> {
    let _lock = work.lock("rank")?;
    work.remove_partials("rank", "")?;
    if work
        .read_json::<RankSummary>(&work.rank_summary())?
        .is_some()
    {
        return Ok(None);
    }
    let t0 = Instant::now();
    let budget = budget.max(1);
    let step = progress.step("rank");
    let spill_dir = work.root().join("rank").join("spill");
    remove_dir(&spill_dir)?;
    let layout = Layout {
        exact: work.config().exact,
        grouped: work.fields().group.is_some(),
    };
    let mut reader = Reader::new(work, layout);
    let mut summary = RankSummary::default();

    // The first pass keeps the records while they fit; past that it only counts, and the
    // ids are drawn for the range cuts.
    // Reserved up front (untouched pages cost nothing): a buffer grown by doubling would
    // fault in and copy about twice its final bytes.
    let mut expected = 0usize;
    for s in 0..work.shards() {
        let docs = usize::try_from(super::sign::scan_stats(work, s)?.documents).unwrap_or(0);
        expected = expected.saturating_add(docs.saturating_mul(layout.head() + 24));
    }
    let mut kept: Option<Vec<u8>> = Some(Vec::with_capacity(expected.min(budget) + (1 << 16)));
    let mut sample = Sample::default();
    let mut record_bytes = 0usize;
    let mut n = 0u64;
    for s in 0..work.shards() {
        step.set_message(format!("reading ids, shard {s}"));
        let rows = reader.shard(s, n, &mut |rec| {
            record_bytes += rec.len();
            if let Some(buf) = &mut kept {
                buf.extend_from_slice(rec);
                if buf.len() > budget {
                    for r in layout.records(buf) {
                        sample.add(r.id);
                    }
                    kept = None;
                }
            } else {
                sample.add(layout.parse(rec).id);
            }
            Ok(())
        })?;
        summary.rows.push(rows);
        n += rows;
    }
    summary.wordless = reader.wordless;
    summary.groups = reader.group_names.clone();

    let mut ids = match kept {
        Some(buf) => {
            let mut one = Spill::new(&spill_dir, "ids", 1, usize::MAX);
            one.bufs[0] = buf;
            one
        }
        None => {
            let parts = parts(record_bytes, budget);
            let cuts = sample.cuts(parts);
            let mut spill = Spill::new(&spill_dir, "ids", cuts.len() + 1, flush_at(budget, parts));
            let mut d = 0;
            for s in 0..work.shards() {
                step.set_message(format!("splitting ids by range, shard {s}"));
                d += reader.shard(s, d, &mut |rec| {
                    let id = layout.parse(rec).id;
                    spill.push(cuts.partition_point(|c| c.as_slice() <= id), rec)
                })?;
            }
            spill
        }
    };
    summary.buckets = ids.bufs.len();

    // Ranks, bucket by bucket in id order, on their way back into document order; records
    // for the exact-duplicate pass.
    let per_doc = 20 + if layout.exact { 16 } else { 0 };
    let mut scatter = Scatter::new(
        &spill_dir,
        n,
        parts(n as usize * per_doc, budget),
        budget,
        layout,
    );
    let key_parts = if layout.exact {
        parts(n as usize * 36, budget)
    } else {
        1
    };
    let mut keyed = Spill::new(&spill_dir, "keys", key_parts, flush_at(budget, key_parts));
    let mut base = 0u64;
    let mut repeat: Option<(String, u64, u64)> = None;
    for b in 0..ids.bufs.len() {
        step.set_message(format!(
            "sorting ids, bucket {} of {}",
            b + 1,
            ids.bufs.len()
        ));
        let buf = ids.take(b)?;
        // Each record's id offset: the comparisons read an id without parsing its record.
        let head = layout.head();
        let mut id_at = Vec::with_capacity(if ids.bufs.len() == 1 { n as usize } else { 0 });
        let mut at = 0;
        while at < buf.len() {
            let len = u32::from_le_bytes(buf[at + head - 4..at + head].try_into().unwrap());
            id_at.push(at + head);
            at += head + len as usize;
        }
        let id = |i: u32| {
            let at = id_at[i as usize];
            let len = u32::from_le_bytes(buf[at - 4..at].try_into().unwrap()) as usize;
            &buf[at..at + len]
        };
        let rec = |i: u32| layout.parse(&buf[id_at[i as usize] - head..]);
        let (order, rep) = sort_ids_by(id_at.len(), id);
        if let Some((a, b)) = rep {
            let (a, b) = (rec(a), rec(b));
            if repeat.as_ref().is_none_or(|r| b.doc < r.2) {
                repeat = Some((String::from_utf8_lossy(a.id).into_owned(), a.doc, b.doc));
            }
        }
        if repeat.is_some() {
            continue;
        }
        for (i, &at) in order.iter().enumerate() {
            let r = &rec(at);
            let rank = base + i as u64;
            scatter.rank(r.doc, rank, r.group)?;
            if layout.exact && r.has_words {
                let mut k = [0u8; 36];
                k[..16].copy_from_slice(&r.key.to_le_bytes());
                k[16..20].copy_from_slice(&r.group.to_le_bytes());
                k[20..28].copy_from_slice(&rank.to_le_bytes());
                k[28..].copy_from_slice(&r.doc.to_le_bytes());
                keyed.push(((r.key >> 64) as u64 % key_parts as u64) as usize, &k)?;
            }
        }
        base += order.len() as u64;
    }
    if let Some((id, a, b)) = repeat {
        remove_dir(&spill_dir)?;
        let inputs = work.inputs(&(0..work.shards()).collect::<Vec<_>>())?;
        let place = |doc: u64| -> Result<String, Error> {
            let (s, row) = shard_row(&summary.rows, doc);
            Ok(inputs.place(s, line_at(work, s, row)?))
        };
        return Err(Error::DuplicateId {
            id,
            first: place(a)?,
            second: place(b)?,
        });
    }
    drop(ids);

    // Identical word sequences (never wordless ones) within a group: the smallest id is the
    // representative, as the in-memory pre-pass.
    if layout.exact {
        for p in 0..key_parts {
            step.set_message(format!("exact duplicates, part {} of {key_parts}", p + 1));
            let buf = keyed.take(p)?;
            let mut rows: Vec<(u128, u32, u64, u64)> = buf
                .chunks_exact(36)
                .map(|k| {
                    (
                        u128::from_le_bytes(k[..16].try_into().unwrap()),
                        u32::from_le_bytes(k[16..20].try_into().unwrap()),
                        u64::from_le_bytes(k[20..28].try_into().unwrap()),
                        u64::from_le_bytes(k[28..].try_into().unwrap()),
                    )
                })
                .collect();
            drop(buf);
            rows.par_sort_unstable();
            each_copy(&rows, |d, rep| {
                summary.exact_duplicates += 1;
                scatter.rep(d, rep)
            })?;
        }
    }
    drop(keyed);

    // Back into document order, one range of documents at a time.
    let mut columns = vec![col("rank", DataType::UInt64)];
    if layout.exact {
        columns.push(col("exact_rep", DataType::UInt64));
    }
    if layout.grouped {
        columns.push(col("group", DataType::UInt32));
    }
    let mut first = 0u64;
    for (s, &rows) in summary.rows.iter().enumerate() {
        step.set_message(format!("writing ranks, shard {s}"));
        let mut w = work.create_table(&work.rank_file(s), columns.clone(), &[])?;
        let end = first + rows;
        let mut at = first;
        loop {
            let to = (at + BATCH_ROWS as u64).min(end);
            let (mut rank, mut rep, mut group) = (Vec::new(), Vec::new(), Vec::new());
            let mut d = at;
            while d < to {
                let range = scatter.range(d)?;
                let upto = to.min(range.start + range.rank.len() as u64);
                let (i, j) = ((d - range.start) as usize, (upto - range.start) as usize);
                rank.extend_from_slice(&range.rank[i..j]);
                if layout.exact {
                    rep.extend_from_slice(&range.rep[i..j]);
                }
                if layout.grouped {
                    group.extend_from_slice(&range.group[i..j]);
                }
                d = upto;
            }
            let mut cols: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(rank))];
            if layout.exact {
                cols.push(Arc::new(UInt64Array::from(rep)));
            }
            if layout.grouped {
                cols.push(Arc::new(UInt32Array::from(group)));
            }
            if to == end {
                w.write_then_finish(cols)?;
                break;
            }
            w.write(cols)?;
            at = to;
        }
        first = end;
    }
    remove_dir(&spill_dir)?;
    summary.seconds = t0.elapsed().as_secs_f64();
    work.write_json(&work.rank_summary(), &summary)?;
    // Whatever rank tasks left: the stage is done.
    remove_tasks(work)?;
    Ok(Some(summary))
}

/// Of exact-key records `(key, group, rank, document)` sorted, each copy's document and its
/// representative (the rank of the first record of its key and group: its smallest id).
pub(super) fn each_copy(
    rows: &[(u128, u32, u64, u64)],
    mut f: impl FnMut(u64, u64) -> Result<(), Error>,
) -> Result<(), Error> {
    for run in rows.chunk_by(|a, b| a.0 == b.0 && a.1 == b.1) {
        for &(_, _, _, d) in &run[1..] {
            f(d, run[0].2)?;
        }
    }
    Ok(())
}

/// The summary of a finished `rank`.
pub fn summary(work: &WorkDir) -> Result<RankSummary, Error> {
    work.need_json(&work.rank_summary(), "rank")
}

/// The shard of document `doc` and its row there, from the rows per shard.
fn shard_row(rows: &[u64], doc: u64) -> (usize, u64) {
    let mut first = 0;
    for (s, &r) in rows.iter().enumerate() {
        if doc < first + r {
            return (s, doc - first);
        }
        first += r;
    }
    (rows.len().saturating_sub(1), doc - first)
}

/// The input line of row `row` of shard `s` (for naming a repeated id's places: records do
/// not carry lines).
pub(super) fn line_at(work: &WorkDir, s: usize, row: u64) -> Result<u64, Error> {
    let mut at = 0u64;
    for batch in work.open_table(&work.sign_file(s), "sign", &["line"])? {
        let batch = batch?;
        let line = u64s(&batch, "line");
        if row < at + line.len() as u64 {
            return Ok(line[(row - at) as usize]);
        }
        at += line.len() as u64;
    }
    Err(Error::Work {
        path: work.sign_file(s).display().to_string(),
        msg: format!("row {row} is missing; sign shard {s} again"),
    })
}

/// Buckets for `bytes` of records at `budget` bytes a bucket.
fn parts(bytes: usize, budget: usize) -> usize {
    bytes.div_ceil(budget).clamp(1, MAX_PARTS)
}

/// The buffer size past which a bucket's records go to its file: the buffers of all buckets
/// together stay within half the budget.
fn flush_at(budget: usize, parts: usize) -> usize {
    if parts == 1 {
        usize::MAX
    } else {
        (budget / parts / 2).clamp(64 << 10, 8 << 20)
    }
}

/// Remove the spill files (`ids-NNNNN.bin`, `keys-NNNNN.bin`) a run left in `dir`, then `dir`
/// if that leaves it empty: nothing else in it is neardup's to delete.
fn remove_dir(dir: &Path) -> Result<(), Error> {
    super::remove_own_files(dir, is_spill_name)
}

/// Whether `name` is the name of a spill file ([`Spill::path`]).
fn is_spill_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".bin") else {
        return false;
    };
    let Some(part) = stem
        .strip_prefix("ids-")
        .or_else(|| stem.strip_prefix("keys-"))
    else {
        return false;
    };
    part.len() >= 5 && part.bytes().all(|b| b.is_ascii_digit())
}

/// Reads the sign files' columns `rank` needs, as records.
pub(super) struct Reader<'w> {
    work: &'w WorkDir,
    layout: Layout,
    group_index: HashMap<Option<String>, u32>,
    pub(super) group_names: Vec<Option<String>>,
    pub(super) wordless: u64,
    /// Whether shard `s` was read already (its wordless documents and groups counted).
    seen: Vec<bool>,
}

impl<'w> Reader<'w> {
    pub(super) fn new(work: &'w WorkDir, layout: Layout) -> Self {
        Reader {
            work,
            layout,
            group_index: HashMap::new(),
            group_names: Vec::new(),
            wordless: 0,
            seen: vec![false; work.shards()],
        }
    }

    /// Calls `f` with the record of each document of shard `s` in order, its first document
    /// numbered `first`; returns the shard's rows.
    pub(super) fn shard(
        &mut self,
        s: usize,
        first: u64,
        f: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<u64, Error> {
        let Layout { exact, grouped } = self.layout;
        let mut cols = vec!["id", "words"];
        if exact {
            cols.extend(["exact_lo", "exact_hi"]);
        }
        if grouped {
            cols.push("group");
        }
        let table = self
            .work
            .open_table(&self.work.sign_file(s), "sign", &cols)?;
        let rows = table.rows;
        let counting = !std::mem::replace(&mut self.seen[s], true);
        let mut doc = first;
        let mut rec = Vec::new();
        for batch in table {
            let batch = batch?;
            let id = strings(&batch, "id");
            let words = u32s(&batch, "words");
            let (lo, hi) = if exact {
                (u64s(&batch, "exact_lo"), u64s(&batch, "exact_hi"))
            } else {
                (&[][..], &[][..])
            };
            let g = grouped.then(|| strings(&batch, "group"));
            for i in 0..batch.num_rows() {
                let group = match g {
                    Some(g) => {
                        let name =
                            (!arrow_array::Array::is_null(g, i)).then(|| g.value(i).to_string());
                        let next = self.group_index.len() as u32;
                        *self.group_index.entry(name.clone()).or_insert_with(|| {
                            self.group_names.push(name);
                            next
                        })
                    }
                    None => 0,
                };
                if counting && words[i] == 0 {
                    self.wordless += 1;
                }
                let key = if exact {
                    (hi[i] as u128) << 64 | lo[i] as u128
                } else {
                    0
                };
                let r = Record {
                    doc,
                    key,
                    group,
                    has_words: words[i] > 0,
                    id: id.value(i).as_bytes(),
                };
                self.layout.encode(&r, &mut rec);
                f(&rec)?;
                doc += 1;
            }
        }
        Ok(rows)
    }
}

/// One document as `rank` sorts it.
pub(super) struct Record<'a> {
    pub(super) doc: u64,
    pub(super) key: u128,
    pub(super) group: u32,
    pub(super) has_words: bool,
    pub(super) id: &'a [u8],
}

/// Which fields a run's records carry: the document number, with `exact` its key and whether
/// it has words, with `grouped` its group, then the id's length and bytes.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    pub(super) exact: bool,
    pub(super) grouped: bool,
}

impl Layout {
    /// Bytes of a record before its id.
    pub(super) fn head(self) -> usize {
        8 + if self.exact { 17 } else { 0 } + if self.grouped { 4 } else { 0 } + 4
    }

    pub(super) fn encode(self, r: &Record, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&r.doc.to_le_bytes());
        if self.exact {
            out.extend_from_slice(&r.key.to_le_bytes());
            out.push(r.has_words as u8);
        }
        if self.grouped {
            out.extend_from_slice(&r.group.to_le_bytes());
        }
        out.extend_from_slice(&(r.id.len() as u32).to_le_bytes());
        out.extend_from_slice(r.id);
    }

    /// The record at the start of `b`.
    pub(super) fn parse(self, b: &[u8]) -> Record<'_> {
        let mut r = Record {
            doc: u64::from_le_bytes(b[..8].try_into().unwrap()),
            key: 0,
            group: 0,
            has_words: true,
            id: &[],
        };
        let mut at = 8;
        if self.exact {
            r.key = u128::from_le_bytes(b[at..at + 16].try_into().unwrap());
            r.has_words = b[at + 16] != 0;
            at += 17;
        }
        if self.grouped {
            r.group = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            at += 4;
        }
        let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        r.id = &b[at + 4..at + 4 + len];
        r
    }

    /// The records of a buffer, in order.
    pub(super) fn records(self, mut b: &[u8]) -> impl Iterator<Item = Record<'_>> {
        std::iter::from_fn(move || {
            if b.is_empty() {
                return None;
            }
            let r = self.parse(b);
            b = &b[self.head() + r.id.len()..];
            Some(r)
        })
    }
}

/// The ids with the smallest hashes, for cutting id ranges of about equal counts.
#[derive(Default)]
struct Sample {
    heap: BinaryHeap<(u64, Vec<u8>)>,
}

impl Sample {
    fn add(&mut self, id: &[u8]) {
        let h = xxhash_rust::xxh3::xxh3_64(id);
        if self.heap.len() < SAMPLE {
            self.heap.push((h, id.to_vec()));
        } else if h < self.heap.peek().expect("a full sample").0 {
            self.heap.pop();
            self.heap.push((h, id.to_vec()));
        }
    }

    /// Ids that cut the sample (and so the corpus) into about `parts` ranges: bucket `b` holds
    /// the ids from cut `b - 1` (included) to cut `b` (excluded).
    fn cuts(self, parts: usize) -> Vec<Vec<u8>> {
        let mut ids: Vec<Vec<u8>> = self.heap.into_iter().map(|(_, id)| id).collect();
        ids.sort_unstable();
        let mut cuts: Vec<Vec<u8>> = (1..parts)
            .map(|i| ids[i * ids.len() / parts].clone())
            .collect();
        cuts.dedup();
        cuts
    }
}

/// Records split into numbered parts, each kept in memory until it outgrows `flush_at` bytes
/// and then appended to its own file.
struct Spill {
    dir: PathBuf,
    name: &'static str,
    bufs: Vec<Vec<u8>>,
    files: Vec<bool>,
    flush_at: usize,
}

impl Spill {
    fn new(dir: &Path, name: &'static str, parts: usize, flush_at: usize) -> Self {
        Spill {
            dir: dir.to_path_buf(),
            name,
            bufs: vec![Vec::new(); parts],
            files: vec![false; parts],
            flush_at,
        }
    }

    fn path(&self, part: usize) -> PathBuf {
        self.dir.join(format!("{}-{part:05}.bin", self.name))
    }

    fn push(&mut self, part: usize, rec: &[u8]) -> Result<(), Error> {
        self.bufs[part].extend_from_slice(rec);
        if self.bufs[part].len() >= self.flush_at {
            let path = self.path(part);
            let name = path.display().to_string();
            std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&name, e))?;
            // Opened for each flush: a file stays open for no longer than one write, so any
            // number of parts fits the descriptors a process may hold.
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| Error::io(&name, e))?;
            f.write_all(&self.bufs[part])
                .map_err(|e| Error::io(&name, e))?;
            self.bufs[part].clear();
            self.files[part] = true;
        }
        Ok(())
    }

    /// Every record of `part`, in the order pushed; its file is removed.
    fn take(&mut self, part: usize) -> Result<Vec<u8>, Error> {
        let tail = std::mem::take(&mut self.bufs[part]);
        if !self.files[part] {
            return Ok(tail);
        }
        let path = self.path(part);
        let name = path.display().to_string();
        let mut all = std::fs::read(&path).map_err(|e| Error::io(&name, e))?;
        std::fs::remove_file(&path).map_err(|e| Error::io(&name, e))?;
        self.files[part] = false;
        all.extend_from_slice(&tail);
        Ok(all)
    }
}

/// One range of documents' ranks, representatives (with `exact`) and groups (with
/// `grouped`), in document order.
struct Range {
    start: u64,
    rank: Vec<u64>,
    rep: Vec<u64>,
    group: Vec<u32>,
}

impl Range {
    fn new(start: u64, len: usize, layout: Layout) -> Self {
        Range {
            start,
            rank: vec![0; len],
            rep: vec![NO_REP; if layout.exact { len } else { 0 }],
            group: vec![0; if layout.grouped { len } else { 0 }],
        }
    }
}

/// Ranks, representatives and groups on their way back into document order: straight into
/// the arrays of the one range when the corpus is one, else spilled by range of documents and
/// loaded one range at a time.
struct Scatter {
    layout: Layout,
    n: u64,
    span: u64,
    /// The range loaded (all documents when there is one range).
    range: Option<(u64, Range)>,
    ranks: Spill,
    reps: Spill,
}

impl Scatter {
    fn new(dir: &Path, n: u64, parts: usize, budget: usize, layout: Layout) -> Self {
        let span = n.div_ceil(parts as u64).max(1);
        Scatter {
            layout,
            n,
            span,
            range: (parts == 1).then(|| (0, Range::new(0, n as usize, layout))),
            ranks: Spill::new(dir, "ranks", parts, flush_at(budget, parts)),
            reps: Spill::new(dir, "reps", parts, flush_at(budget, parts)),
        }
    }

    fn single(&mut self) -> Option<&mut Range> {
        match &mut self.range {
            Some((_, r)) if self.ranks.bufs.len() == 1 => Some(r),
            _ => None,
        }
    }

    fn rank(&mut self, doc: u64, rank: u64, group: u32) -> Result<(), Error> {
        let grouped = self.layout.grouped;
        if let Some(r) = self.single() {
            r.rank[doc as usize] = rank;
            if grouped {
                r.group[doc as usize] = group;
            }
            return Ok(());
        }
        let mut o = [0u8; 20];
        o[..8].copy_from_slice(&doc.to_le_bytes());
        o[8..16].copy_from_slice(&rank.to_le_bytes());
        o[16..].copy_from_slice(&group.to_le_bytes());
        self.ranks.push((doc / self.span) as usize, &o)
    }

    fn rep(&mut self, doc: u64, rep: u64) -> Result<(), Error> {
        if let Some(r) = self.single() {
            r.rep[doc as usize] = rep;
            return Ok(());
        }
        let mut o = [0u8; 16];
        o[..8].copy_from_slice(&doc.to_le_bytes());
        o[8..].copy_from_slice(&rep.to_le_bytes());
        self.reps.push((doc / self.span) as usize, &o)
    }

    /// The range holding document `doc`, loaded once every rank and representative is in.
    fn range(&mut self, doc: u64) -> Result<&Range, Error> {
        let index = doc / self.span;
        if self.range.as_ref().is_none_or(|(i, _)| *i != index) {
            let start = index * self.span;
            let len = (self.n.min(start + self.span) - start) as usize;
            let mut r = Range::new(start, len, self.layout);
            for o in self.ranks.take(index as usize)?.chunks_exact(20) {
                let d = (u64::from_le_bytes(o[..8].try_into().unwrap()) - start) as usize;
                r.rank[d] = u64::from_le_bytes(o[8..16].try_into().unwrap());
                if self.layout.grouped {
                    r.group[d] = u32::from_le_bytes(o[16..].try_into().unwrap());
                }
            }
            for o in self.reps.take(index as usize)?.chunks_exact(16) {
                let d = (u64::from_le_bytes(o[..8].try_into().unwrap()) - start) as usize;
                r.rep[d] = u64::from_le_bytes(o[8..].try_into().unwrap());
            }
            self.range = Some((index, r));
        }
        Ok(&self.range.as_ref().expect("loaded").1)
    }
}

/// Remove the task files (`rank/tasks/`), then the directory if that leaves it empty: nothing
/// else in it is neardup's to delete.
pub(super) fn remove_tasks(work: &WorkDir) -> Result<(), Error> {
    super::remove_own_files(&work.root().join("rank").join("tasks"), is_task_name)
}

/// Whether `name` is the name of a task file.
fn is_task_name(name: &str) -> bool {
    if name == "plan.json" {
        return true;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    match (stem.split_once('-'), ext) {
        (Some(("split", rest)), "run") => rest
            .split_once('-')
            .is_some_and(|(a, b)| digits(a) && digits(b)),
        (Some(("split" | "sort" | "exact", n)), "json") => digits(n),
        (Some(("sort", n)), "ranks" | "keys") | (Some(("exact", n)), "reps") => digits(n),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_follow_each_other_in_every_layout() {
        for (exact, grouped) in [(false, false), (true, false), (false, true), (true, true)] {
            let layout = Layout { exact, grouped };
            let mut buf = Vec::new();
            let mut rec = Vec::new();
            for (i, id) in ["", "a", "ü-long-id"].iter().enumerate() {
                let r = Record {
                    doc: i as u64 + (1 << 40),
                    key: u128::MAX - i as u128,
                    group: i as u32 + 7,
                    has_words: i % 2 == 0,
                    id: id.as_bytes(),
                };
                layout.encode(&r, &mut rec);
                assert_eq!(rec.len(), layout.head() + id.len());
                buf.extend_from_slice(&rec);
            }
            let got: Vec<_> = layout
                .records(&buf)
                .map(|r| (r.doc, r.key, r.group, r.has_words, r.id.to_vec()))
                .collect();
            assert_eq!(got.len(), 3);
            assert_eq!(got[2].0, 2 + (1 << 40));
            assert_eq!(got[2].4, "ü-long-id".as_bytes());
            assert_eq!(got[1].1, if exact { u128::MAX - 1 } else { 0 });
            assert_eq!(got[1].2, if grouped { 8 } else { 0 });
            assert_eq!((got[0].3, got[1].3), (true, !exact));
        }
    }

    #[test]
    fn cuts_split_a_sample_in_order_and_keep_equal_ids_together() {
        let mut s = Sample::default();
        for i in 0..1000u32 {
            s.add(format!("{i:04}").as_bytes());
        }
        let cuts = s.cuts(4);
        assert_eq!(cuts.len(), 3);
        assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(cuts[1], b"0500".to_vec());
        let bucket = |id: &[u8]| cuts.partition_point(|c| c.as_slice() <= id);
        assert_eq!(bucket(b"0000"), 0);
        assert_eq!(bucket(b"0499"), 1);
        assert_eq!(bucket(b"0500"), 2);
        assert_eq!(bucket(b"9999"), 3);
        // Fewer distinct ids than parts: no empty range between equal cuts.
        let mut s = Sample::default();
        for _ in 0..10 {
            s.add(b"same");
        }
        assert!(s.cuts(8).len() <= 1);
    }

    #[test]
    fn only_spill_files_are_removed_with_the_spill_directory() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill");
        std::fs::create_dir(&spill).unwrap();
        for f in ["ids-00000.bin", "keys-00012.bin", "ids-123456.bin"] {
            std::fs::write(spill.join(f), b"x").unwrap();
        }
        remove_dir(&spill).unwrap();
        assert!(!spill.exists());
        std::fs::create_dir(&spill).unwrap();
        for f in [
            "ids-00000.bin",
            "mine.bin",
            "ids-0001.bin",
            "keys-00x00.bin",
        ] {
            std::fs::write(spill.join(f), b"x").unwrap();
        }
        remove_dir(&spill).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&spill)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["ids-0001.bin", "keys-00x00.bin", "mine.bin"]);
        remove_dir(&dir.path().join("missing")).unwrap();
    }

    #[test]
    fn a_spill_returns_what_was_pushed_in_order_across_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spill::new(dir.path(), "t", 3, 4);
        for i in 0u8..30 {
            s.push((i % 3) as usize, &[i, i]).unwrap();
        }
        for p in 0..3u8 {
            let want: Vec<u8> = (0u8..30)
                .filter(|i| i % 3 == p)
                .flat_map(|i| [i, i])
                .collect();
            assert_eq!(s.take(p as usize).unwrap(), want);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn only_task_files_are_task_names() {
        for n in [
            "plan.json",
            "split-00001.json",
            "split-00001-00000.run",
            "sort-00002.json",
            "sort-00002.ranks",
            "sort-00002.keys",
            "exact-00003.reps",
            "exact-00003.json",
        ] {
            assert!(is_task_name(n), "{n}");
        }
        for n in [
            "mine.json",
            "split-1.json",
            "split-00001.run",
            "sort-00002.reps",
            ".sort-00002.keys.x.partial",
            "notes",
        ] {
            assert!(!is_task_name(n), "{n}");
        }
    }
}
