//! `rank` in one process, within a memory budget.
//!
//! Out of core: the documents' records (number, id, exact key, group) are split by id range
//! into buckets of about `budget` bytes, the ranges cut at ids drawn from a sample, and each
//! bucket is sorted on its own, in range order, so ranks count on from one bucket to the next.
//! The ranks and the exact-duplicate representatives (found per range of exact keys) then go
//! back into document order one range of documents at a time. A corpus whose records fit the
//! budget is never spilled. Memory: about twice the budget at the peak (one bucket, its order,
//! the spill buffers of the next steps), and the groups' names; ranks are 64-bit.

use std::collections::BinaryHeap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, UInt32Array, UInt64Array};
use arrow_schema::DataType;
use rayon::prelude::*;

use super::{
    each_copy, id_len, key_fields, key_record, line_at, rank_fields, rank_record, remove_tasks,
    rep_fields, rep_record, Layout, RankSummary, Reader, KEY_BYTES, NO_REP, RANK_BYTES, REP_BYTES,
};
use crate::error::Error;
use crate::ids::sort_ids_by;
use crate::progress::ProgressFactory;
use crate::stages::sharded::table::{col, BATCH_ROWS};
use crate::stages::sharded::WorkDir;

/// Bytes of records `rank` sorts at once by default (`stage rank --sort-memory`).
pub const RANK_BUDGET: usize = 256 << 20;

/// The most buckets a step splits into: past `RANK_BUDGET` times this many bytes of records
/// (about 4 billion documents), buckets grow beyond the budget.
const MAX_PARTS: usize = 1024;

/// Ids drawn to cut the id ranges: the ones with the smallest hashes.
const SAMPLE: usize = 1 << 16;

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
        let docs = usize::try_from(crate::stages::sharded::sign::scan_stats(work, s)?.documents)
            .unwrap_or(0);
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
            let len = id_len(&buf, at, head);
            id_at.push(at + head);
            at += head + len;
        }
        let id = |i: u32| {
            let at = id_at[i as usize];
            let len = id_len(&buf, at - head, head);
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
                let k = key_record(r.key, r.group, rank, r.doc);
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
            let mut rows: Vec<(u128, u32, u64, u64)> =
                buf.chunks_exact(KEY_BYTES).map(key_fields).collect();
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
    crate::stages::sharded::remove_own_files(dir, is_spill_name)
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
        let o = rank_record(doc, rank, group);
        self.ranks.push((doc / self.span) as usize, &o)
    }

    fn rep(&mut self, doc: u64, rep: u64) -> Result<(), Error> {
        if let Some(r) = self.single() {
            r.rep[doc as usize] = rep;
            return Ok(());
        }
        let o = rep_record(doc, rep);
        self.reps.push((doc / self.span) as usize, &o)
    }

    /// The range holding document `doc`, loaded once every rank and representative is in.
    fn range(&mut self, doc: u64) -> Result<&Range, Error> {
        let index = doc / self.span;
        if self.range.as_ref().is_none_or(|(i, _)| *i != index) {
            let start = index * self.span;
            let len = (self.n.min(start + self.span) - start) as usize;
            let mut r = Range::new(start, len, self.layout);
            for o in self.ranks.take(index as usize)?.chunks_exact(RANK_BYTES) {
                let (doc, rank, group) = rank_fields(o);
                let d = (doc - start) as usize;
                r.rank[d] = rank;
                if self.layout.grouped {
                    r.group[d] = group;
                }
            }
            for o in self.reps.take(index as usize)?.chunks_exact(REP_BYTES) {
                let (doc, rep) = rep_fields(o);
                r.rep[(doc - start) as usize] = rep;
            }
            self.range = Some((index, r));
        }
        Ok(&self.range.as_ref().expect("loaded").1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
