//! Stage 2 ([`rank`](super)) as parallel tasks, each within a memory budget, writing the
//! same rank files byte for byte:
//!
//! 1. `split`, per shard: the shard's id records sorted in runs of at most half the budget,
//!    each run cut into checksummed blocks whose first ids the summary keeps.
//! 2. `plan`, once: as many id ranges as the budget asks for, cut at ids drawn from the
//!    blocks' first ids, each weighted by its block's records.
//! 3. `sort`, per range: the range's records from every run (the blocks that hold them),
//!    sorted; its ranks count on from the records of every run below the range (a prefix sum
//!    counted in the same blocks, so no task waits for another range). Ranks go out sliced by
//!    shard, exact keys sliced by key part.
//! 4. `exact`, per key part (with `--exact`): each identical document's representative, the
//!    rank of its smallest id, sliced by shard.
//! 5. `write`, per shard: the shard's rank file, a window of rows at a time, from the window's
//!    slice of every range and key part.
//! 6. `finish`, once: the summary [`rank`](super) writes; the task files removed.
//!
//! Each step's output appears atomically under the step's own lock and is skipped when there,
//! so a retried or doubled task finds its work done. The task files live in `rank/tasks/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, UInt32Array, UInt64Array};
use arrow_schema::DataType;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{
    id_len, key_fields, key_record, rank_fields, rank_record, rep_fields, rep_record, Layout,
    RankSummary, Reader, KEY_BYTES, NO_REP, RANK_BYTES, REP_BYTES,
};
use crate::error::Error;
use crate::ids::sort_ids_by;
use crate::stages::sharded::sliced::{Slice, SlicedFile, SlicedWriter};
use crate::stages::sharded::table::{col, BATCH_ROWS};
use crate::stages::sharded::WorkDir;

/// Bytes a sort task holds for each record beyond the record itself: its offset and place in
/// the order, its rank on the way out, its exact key.
const PER_RECORD: u64 = 128;

/// The most ranges a plan cuts.
const MAX_RANGES: usize = 1 << 16;

/// Rows of a shard a `write` task holds at once, about 36 bytes each within the plan's budget,
/// in whole batches: its memory does not grow with the shard, since ranks and
/// representatives go out in a slice per window of rows.
fn window_rows(plan: &RankPlan) -> u64 {
    (plan.budget / 36 / BATCH_ROWS as u64).max(1) * BATCH_ROWS as u64
}

/// The first slice of each shard's windows of `window` rows, and the total after the last
/// shard.
fn window_bases(offsets: &[u64], window: u64) -> Vec<usize> {
    let mut out = vec![0usize];
    for w in offsets.windows(2) {
        out.push(out.last().unwrap() + (w[1] - w[0]).div_ceil(window) as usize);
    }
    out
}

/// Records of a block: a run of `n` records is cut into about 256 blocks, of at most 4096.
fn block_records(n: usize) -> usize {
    n.div_ceil(256).clamp(1, 4096)
}

/// A block of a sorted run: its first id, its records and where its bytes lie.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Block {
    first: String,
    records: u64,
    slice: Slice,
}

/// A sorted run of a shard's records.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Run {
    /// The file's name in `rank/tasks/`.
    file: String,
    blocks: Vec<Block>,
}

/// What `split` found in one shard.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SplitSummary {
    pub rows: u64,
    pub wordless: u64,
    /// The shard's groups, in order of first appearance in it.
    pub groups: Vec<Option<String>>,
    pub record_bytes: u64,
    runs: Vec<Run>,
    pub seconds: f64,
}

/// The id ranges the `sort` tasks take.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankPlan {
    /// Ranges (and key parts, with `--exact`): one `sort` (and `exact`) task each.
    pub ranges: usize,
    /// Range `r` holds the ids from cut `r - 1` (included) to cut `r` (excluded).
    cuts: Vec<String>,
    /// The budget the plan was made for (bytes).
    pub budget: u64,
}

/// What one `sort` task wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SortSummary {
    records: u64,
    /// The range's first rank.
    base: u64,
    /// Per shard: rows, ranks and groups.
    ranks: Vec<Slice>,
    /// Per key part: exact keys.
    keys: Vec<Slice>,
    seconds: f64,
}

/// What one `exact` task wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ExactSummary {
    exact_duplicates: u64,
    /// Per shard: rows and representatives.
    reps: Vec<Slice>,
    seconds: f64,
}

impl WorkDir {
    fn rank_task(&self, name: String) -> PathBuf {
        self.root().join("rank").join("tasks").join(name)
    }
}

/// How `neardup stage` names a step, for the errors that ask for it.
fn step(name: &str, index: Option<usize>) -> String {
    match (name, index) {
        ("split" | "write", Some(i)) => format!("rank --step {name} --shard {i}"),
        (_, Some(i)) => format!("rank --step {name} --range {i}"),
        _ => format!("rank --step {name}"),
    }
}

fn split_json(work: &WorkDir, s: usize) -> PathBuf {
    work.rank_task(format!("split-{s:05}.json"))
}

fn sort_json(work: &WorkDir, r: usize) -> PathBuf {
    work.rank_task(format!("sort-{r:05}.json"))
}

fn exact_json(work: &WorkDir, k: usize) -> PathBuf {
    work.rank_task(format!("exact-{k:05}.json"))
}

fn plan_json(work: &WorkDir) -> PathBuf {
    work.rank_task("plan.json".into())
}

/// Whether shard `s`'s `split` ran.
pub(in crate::stages::sharded) fn split_done(work: &WorkDir, s: usize) -> Result<bool, Error> {
    Ok(work
        .read_json::<SplitSummary>(&split_json(work, s))?
        .is_some())
}

/// The plan, once `plan` made it.
pub(in crate::stages::sharded) fn plan_if_made(work: &WorkDir) -> Result<Option<RankPlan>, Error> {
    work.read_json(&plan_json(work))
}

/// Whether range `r`'s `sort` ran.
pub(in crate::stages::sharded) fn sort_done(work: &WorkDir, r: usize) -> Result<bool, Error> {
    Ok(work
        .read_json::<SortSummary>(&sort_json(work, r))?
        .is_some())
}

/// Whether range `k`'s `exact` ran.
pub(in crate::stages::sharded) fn exact_done(work: &WorkDir, k: usize) -> Result<bool, Error> {
    Ok(work
        .read_json::<ExactSummary>(&exact_json(work, k))?
        .is_some())
}

/// Whether the whole stage is done (by these tasks or by one `rank`).
pub(in crate::stages::sharded) fn ranked(work: &WorkDir) -> Result<bool, Error> {
    Ok(work
        .read_json::<RankSummary>(&work.rank_summary())?
        .is_some())
}

/// Take the lock of a step's unit and clear what a killed run of it left.
/// A range step's prologue: its unit's lock (`name`), then `None` when the step ran already
/// (`done`, asked under the lock) or the whole stage did; else the lock, held for the step, its
/// start and the plan, which must have range `r` (`what`: how the step calls a range).
fn begin(
    work: &WorkDir,
    name: &str,
    done: impl Fn() -> Result<bool, Error>,
    r: usize,
    what: &str,
) -> Result<Option<(crate::stages::sharded::UnitLock, Instant, RankPlan)>, Error> {
    let lock = unit(work, name)?;
    if ranked(work)? || done()? {
        return Ok(None);
    }
    let plan = read_plan(work)?;
    if r >= plan.ranges {
        return Err(Error::Param(format!(
            "{what} {r} does not exist: the plan has {} (0 to {})",
            plan.ranges,
            plan.ranges - 1
        )));
    }
    Ok(Some((lock, Instant::now(), plan)))
}

fn unit(work: &WorkDir, name: &str) -> Result<crate::stages::sharded::UnitLock, Error> {
    let lock = work.lock(&format!("rank-{name}"))?;
    work.remove_partials("rank/tasks", name)?;
    Ok(lock)
}

fn layout(work: &WorkDir) -> Layout {
    Layout {
        exact: work.config().exact,
        grouped: work.fields().group.is_some(),
    }
}

/// The first document's number of each shard, and the total after the last.
fn offsets(work: &WorkDir) -> Result<Vec<u64>, Error> {
    let mut out = vec![0u64];
    for s in 0..work.shards() {
        let docs = crate::stages::sharded::sign::scan_stats(work, s)?.documents;
        out.push(out[s] + docs);
    }
    Ok(out)
}

/// Step 1 for shard `s`: its records in sorted runs of at most half of `budget` bytes.
/// `None` when done already.
pub fn split(work: &WorkDir, s: usize, budget: usize) -> Result<Option<SplitSummary>, Error> {
    work.check_shard(s)?;
    let name = format!("split-{s:05}");
    let _lock = unit(work, &name)?;
    if ranked(work)?
        || work
            .read_json::<SplitSummary>(&split_json(work, s))?
            .is_some()
    {
        return Ok(None);
    }
    let t0 = Instant::now();
    let first = offsets(work)?[s];
    let layout = layout(work);
    let chunk = (budget / 2).max(1);
    let mut reader = Reader::new(work, layout);
    let mut summary = SplitSummary::default();
    let mut buf = Vec::new();
    let mut runs = Vec::new();
    let flush = |buf: &mut Vec<u8>, runs: &mut Vec<Run>| -> Result<(), Error> {
        let file = format!("{name}-{:05}.run", runs.len());
        runs.push(write_run(work, &file, buf, layout)?);
        buf.clear();
        Ok(())
    };
    summary.rows = reader.shard(s, first, &mut |rec| {
        summary.record_bytes += rec.len() as u64;
        buf.extend_from_slice(rec);
        if buf.len() >= chunk {
            flush(&mut buf, &mut runs)?;
        }
        Ok(())
    })?;
    if !buf.is_empty() {
        flush(&mut buf, &mut runs)?;
    }
    summary.runs = runs;
    summary.wordless = reader.wordless;
    summary.groups = reader.group_names.clone();
    summary.seconds = t0.elapsed().as_secs_f64();
    work.write_json(&split_json(work, s), &summary)?;
    Ok(Some(summary))
}

/// The offsets of the records in `buf`.
fn record_offsets(buf: &[u8], layout: Layout) -> Vec<usize> {
    let head = layout.head();
    let mut at_ = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let len = id_len(buf, at, head);
        at_.push(at);
        at += head + len;
    }
    at_
}

/// Sort the records of `buf` by id (then document) and write them as the run `file`.
fn write_run(work: &WorkDir, file: &str, buf: &[u8], layout: Layout) -> Result<Run, Error> {
    let at = record_offsets(buf, layout);
    let rec = |i: u32| layout.parse(&buf[at[i as usize]..]);
    let (order, _) = sort_ids_by(at.len(), |i| rec(i).id);
    let per = block_records(order.len());
    let mut w = SlicedWriter::create(&work.rank_task(file.to_string()))?;
    let mut blocks = Vec::new();
    for (b, chunk) in order.chunks(per).enumerate() {
        let first = rec(chunk[0]).id;
        blocks.push(Block {
            first: String::from_utf8(first.to_vec()).expect("ids are UTF-8"),
            records: chunk.len() as u64,
            slice: Slice::default(),
        });
        for &i in chunk {
            let r = rec(i);
            let start = at[i as usize];
            w.push(b, &buf[start..start + layout.head() + r.id.len()])?;
        }
    }
    for (block, slice) in blocks.iter_mut().zip(w.finish(order.len().div_ceil(per))?) {
        block.slice = slice;
    }
    Ok(Run {
        file: file.to_string(),
        blocks,
    })
}

/// Every shard's split summary, in shard order.
fn splits(work: &WorkDir) -> Result<Vec<SplitSummary>, Error> {
    (0..work.shards())
        .map(|s| work.need_json(&split_json(work, s), &step("split", Some(s))))
        .collect()
}

/// What [`plan_status`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planned {
    /// Planned now, for the budget asked.
    Now,
    /// Planned before (its `budget` may not be the one asked now): that plan stands.
    Before,
    /// The whole stage is done (its task files, the plan's too, are gone): nothing to plan.
    Done,
}

/// Step 2: the ranges for tasks of about `budget` bytes each. A plan made already is kept
/// (and returned), whatever budget it was made for; once `rank` is done, its ranges.
pub fn plan(work: &WorkDir, budget: usize) -> Result<RankPlan, Error> {
    plan_status(work, budget).map(|(p, _)| p)
}

/// [`plan`], and whether it planned now, before, or found `rank` done (then the plan holds
/// the stage's ranges only, and every other step skips).
pub fn plan_status(work: &WorkDir, budget: usize) -> Result<(RankPlan, Planned), Error> {
    let _lock = unit(work, "plan")?;
    if let Some(s) = work.read_json::<RankSummary>(&work.rank_summary())? {
        let done = RankPlan {
            ranges: s.buckets.max(1),
            ..Default::default()
        };
        return Ok((done, Planned::Done));
    }
    if let Some(p) = work.read_json::<RankPlan>(&plan_json(work))? {
        return Ok((p, Planned::Before));
    }
    let splits = splits(work)?;
    let records: u64 = splits.iter().map(|s| s.rows).sum();
    let bytes: u64 = splits.iter().map(|s| s.record_bytes).sum();
    let cost = bytes + records * PER_RECORD;
    let wanted = (cost.div_ceil(budget.max(1) as u64) as usize).clamp(1, MAX_RANGES);
    let mut firsts: Vec<(&str, u64)> = splits
        .iter()
        .flat_map(|s| &s.runs)
        .flat_map(|r| &r.blocks)
        .map(|b| (b.first.as_str(), b.records))
        .collect();
    firsts.sort_unstable();
    let cuts = cuts(&firsts, wanted);
    let plan = RankPlan {
        ranges: cuts.len() + 1,
        cuts,
        budget: budget as u64,
    };
    work.write_json(&plan_json(work), &plan)?;
    Ok((plan, Planned::Now))
}

/// Ids that cut `firsts` (sorted ids, each standing for its weight of records) into about
/// `parts` ranges of equal weight; distinct and ascending.
fn cuts(firsts: &[(&str, u64)], parts: usize) -> Vec<String> {
    let total: u64 = firsts.iter().map(|f| f.1).sum();
    let mut out: Vec<String> = Vec::new();
    let mut below = 0u64;
    let mut next = 1;
    for &(id, w) in firsts {
        while next < parts && below >= (total as u128 * next as u128 / parts as u128) as u64 {
            if below > 0 && out.last().is_none_or(|c| c.as_str() < id) {
                out.push(id.to_string());
            }
            next += 1;
        }
        below += w;
    }
    out
}

/// The plan `plan` made.
pub fn read_plan(work: &WorkDir) -> Result<RankPlan, Error> {
    work.need_json(&plan_json(work), &step("plan", None))
}

/// Each shard's groups' indices among all shards' groups (in order of first appearance over
/// the shards in order), and those groups.
fn group_maps(splits: &[SplitSummary]) -> (Vec<Vec<u32>>, Vec<Option<String>>) {
    let mut index: HashMap<&Option<String>, u32> = HashMap::new();
    let mut names = Vec::new();
    let maps = splits
        .iter()
        .map(|s| {
            s.groups
                .iter()
                .map(|g| {
                    *index.entry(g).or_insert_with(|| {
                        names.push(g.clone());
                        names.len() as u32 - 1
                    })
                })
                .collect()
        })
        .collect();
    (maps, names)
}

/// Step 3 for range `r`: its records sorted, their ranks and exact keys out. `None` when done
/// already.
pub fn sort(work: &WorkDir, r: usize) -> Result<Option<u64>, Error> {
    let name = format!("sort-{r:05}");
    let Some((_lock, t0, plan)) = begin(work, &name, || sort_done(work, r), r, "range")? else {
        return Ok(None);
    };
    let splits = splits(work)?;
    let offsets = offsets(work)?;
    let layout = layout(work);
    let lo = r.checked_sub(1).map(|i| plan.cuts[i].as_bytes());
    let hi = plan.cuts.get(r).map(|c| c.as_bytes());
    let in_range = |id: &[u8]| lo.is_none_or(|l| l <= id) && hi.is_none_or(|h| id < h);

    // The range's records from every run, and how many records of the runs lie below it.
    let mut buf = Vec::new();
    let mut base = 0u64;
    let mut one = Vec::new();
    for split in &splits {
        for run in &split.runs {
            let path = work.rank_task(run.file.clone());
            let file = SlicedFile::open(&path, &step("split", None))?;
            for (b, block) in run.blocks.iter().enumerate() {
                // A block holds ids from its first to the next block's first.
                let last = run.blocks.get(b + 1).map(|n| n.first.as_bytes());
                if lo.is_some_and(|l| last.is_some_and(|x| x < l)) {
                    base += block.records;
                    continue;
                }
                if hi.is_some_and(|h| h <= block.first.as_bytes()) {
                    break;
                }
                let bytes = file.read(&block.slice)?;
                for rec in layout.records(&bytes) {
                    if in_range(rec.id) {
                        layout.encode(&rec, &mut one);
                        buf.extend_from_slice(&one);
                    } else if lo.is_some_and(|l| rec.id < l) {
                        base += 1;
                    }
                }
            }
        }
    }

    let at = record_offsets(&buf, layout);
    let rec = |i: u32| layout.parse(&buf[at[i as usize]..]);
    let (order, repeat) = sort_ids_by(at.len(), |i| rec(i).id);
    if let Some((a, b)) = repeat {
        let (a, b) = (rec(a), rec(b));
        let place = |doc: u64| -> Result<String, Error> {
            let s = offsets.partition_point(|&o| o <= doc) - 1;
            let inputs = work.inputs(&[s])?;
            Ok(inputs.place(0, super::line_at(work, s, doc - offsets[s])?))
        };
        return Err(Error::DuplicateId {
            id: String::from_utf8_lossy(a.id).into_owned(),
            first: place(a.doc)?,
            second: place(b.doc)?,
        });
    }
    let (maps, _) = group_maps(&splits);
    let shards = work.shards();
    let window = window_rows(&plan);
    let bases = window_bases(&offsets, window);
    let parts = plan.ranges;
    // (shard, row, rank, group), into shard and row order.
    let mut ranks: Vec<(u32, u64, u64, u32)> = Vec::with_capacity(order.len());
    let mut keys: Vec<(u32, [u8; KEY_BYTES])> = Vec::new();
    for (i, &o) in order.iter().enumerate() {
        let x = rec(o);
        let rank = base + i as u64;
        let s = offsets.partition_point(|&f| f <= x.doc) - 1;
        let group = if layout.grouped {
            maps[s][x.group as usize]
        } else {
            0
        };
        ranks.push((s as u32, x.doc - offsets[s], rank, group));
        if layout.exact && x.has_words {
            let k = key_record(x.key, group, rank, x.doc);
            keys.push((((x.key >> 64) as u64 % parts as u64) as u32, k));
        }
    }
    let records = order.len() as u64;
    drop(order);
    drop(at);
    drop(buf);
    ranks.par_sort_unstable();
    let mut w = SlicedWriter::create(&work.rank_task(format!("{name}.ranks")))?;
    for &(s, row, rank, group) in &ranks {
        let o = rank_record(row, rank, group);
        w.push(bases[s as usize] + (row / window) as usize, &o)?;
    }
    let ranks = w.finish(bases[shards])?;
    keys.par_sort_unstable_by_key(|k| k.0);
    let mut w = SlicedWriter::create(&work.rank_task(format!("{name}.keys")))?;
    for (p, k) in &keys {
        w.push(*p as usize, k)?;
    }
    let keys = w.finish(parts)?;
    let summary = SortSummary {
        records,
        base,
        ranks,
        keys,
        seconds: t0.elapsed().as_secs_f64(),
    };
    work.write_json(&sort_json(work, r), &summary)?;
    Ok(Some(records))
}

/// Every range's sort summary, in range order.
fn sorts(work: &WorkDir, plan: &RankPlan) -> Result<Vec<SortSummary>, Error> {
    (0..plan.ranges)
        .map(|r| work.need_json(&sort_json(work, r), &step("sort", Some(r))))
        .collect()
}

/// Step 4 for key part `k` (with `--exact`): identical documents' representatives. `None`
/// when done already.
pub fn exact(work: &WorkDir, k: usize) -> Result<Option<u64>, Error> {
    if !work.config().exact {
        return Err(Error::Param(
            "this work directory's run has no exact-duplicate pass (`--exact`): it has no \
             `exact` step"
                .into(),
        ));
    }
    let name = format!("exact-{k:05}");
    let done = || exact_done(work, k);
    let Some((_lock, t0, plan)) = begin(work, &name, done, k, "key part")? else {
        return Ok(None);
    };
    let offsets = offsets(work)?;
    let window = window_rows(&plan);
    let bases = window_bases(&offsets, window);
    let mut rows: Vec<(u128, u32, u64, u64)> = Vec::new();
    for (r, s) in sorts(work, &plan)?.iter().enumerate() {
        let path = work.rank_task(format!("sort-{r:05}.keys"));
        let bytes = SlicedFile::open(&path, &step("sort", Some(r)))?.read(&s.keys[k])?;
        rows.extend(bytes.chunks_exact(KEY_BYTES).map(key_fields));
    }
    rows.par_sort_unstable();
    // (shard, row, representative), into shard and row order.
    let mut reps: Vec<(u32, u64, u64)> = Vec::new();
    super::each_copy(&rows, |d, rep| {
        let s = offsets.partition_point(|&f| f <= d) - 1;
        reps.push((s as u32, d - offsets[s], rep));
        Ok(())
    })?;
    drop(rows);
    reps.par_sort_unstable();
    let mut w = SlicedWriter::create(&work.rank_task(format!("{name}.reps")))?;
    for &(s, row, rep) in &reps {
        let o = rep_record(row, rep);
        w.push(bases[s as usize] + (row / window) as usize, &o)?;
    }
    let summary = ExactSummary {
        exact_duplicates: reps.len() as u64,
        reps: w.finish(bases[work.shards()])?,
        seconds: t0.elapsed().as_secs_f64(),
    };
    work.write_json(&exact_json(work, k), &summary)?;
    Ok(Some(summary.exact_duplicates))
}

/// Step 5 for shard `s`: its rank file. `false` when done already.
pub fn write(work: &WorkDir, s: usize) -> Result<bool, Error> {
    work.check_shard(s)?;
    let name = format!("write-{s:05}");
    let _lock = unit(work, &name)?;
    work.remove_partials("rank", &format!("{s:05}"))?;
    if ranked(work)? || work.table_done(&work.rank_file(s))? {
        return Ok(false);
    }
    let plan = read_plan(work)?;
    let layout = layout(work);
    let offsets = offsets(work)?;
    let window = window_rows(&plan);
    let bases = window_bases(&offsets, window);
    let rows = offsets[s + 1] - offsets[s];
    let bad = |path: &Path, what: String| Error::Work {
        path: path.display().to_string(),
        msg: format!("{what}: run the rank steps again in an empty work directory"),
    };
    let sorts = sorts(work, &plan)?;
    let exacts: Vec<ExactSummary> = if layout.exact {
        (0..plan.ranges)
            .map(|k| work.need_json(&exact_json(work, k), &step("exact", Some(k))))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let mut columns = vec![col("rank", DataType::UInt64)];
    if layout.exact {
        columns.push(col("exact_rep", DataType::UInt64));
    }
    if layout.grouped {
        columns.push(col("group", DataType::UInt32));
    }
    let mut out = work.create_table(&work.rank_file(s), columns, &[])?;
    let windows = rows.div_ceil(window);
    if windows == 0 {
        let mut cols: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(Vec::<u64>::new()))];
        if layout.exact {
            cols.push(Arc::new(UInt64Array::from(Vec::<u64>::new())));
        }
        if layout.grouped {
            cols.push(Arc::new(UInt32Array::from(Vec::<u32>::new())));
        }
        out.write_then_finish(cols)?;
        return Ok(true);
    }
    // A window of rows at a time, its slice of every range and key part.
    for win in 0..windows {
        let first = win * window;
        let len = (rows - first).min(window) as usize;
        let slice = bases[s] + win as usize;
        let mut rank = vec![u64::MAX; len];
        let mut rep = vec![NO_REP; if layout.exact { len } else { 0 }];
        let mut group = vec![0u32; if layout.grouped { len } else { 0 }];
        let mut filled = 0usize;
        for (r, sum) in sorts.iter().enumerate() {
            let path = work.rank_task(format!("sort-{r:05}.ranks"));
            let bytes = SlicedFile::open(&path, &step("sort", Some(r)))?.read(&sum.ranks[slice])?;
            for o in bytes.chunks_exact(RANK_BYTES) {
                let (row, row_rank, row_group) = rank_fields(o);
                let at = row.wrapping_sub(first) as usize;
                if at >= len || rank[at] != u64::MAX {
                    return Err(bad(
                        &path,
                        format!("row {row} of shard {s} is ranked twice or out of its place"),
                    ));
                }
                rank[at] = row_rank;
                if layout.grouped {
                    group[at] = row_group;
                }
                filled += 1;
            }
        }
        if filled != len {
            return Err(bad(
                &work.rank_task(String::new()),
                format!(
                    "the ranges ranked {filled} of the {len} documents of shard {s} from row \
                     {first}"
                ),
            ));
        }
        for (k, sum) in exacts.iter().enumerate() {
            let path = work.rank_task(format!("exact-{k:05}.reps"));
            let bytes = SlicedFile::open(&path, &step("exact", Some(k)))?.read(&sum.reps[slice])?;
            for o in bytes.chunks_exact(REP_BYTES) {
                let (row, row_rep) = rep_fields(o);
                let at = row.wrapping_sub(first) as usize;
                if at >= len {
                    return Err(bad(
                        &path,
                        format!("row {row} of shard {s} is out of its place"),
                    ));
                }
                rep[at] = row_rep;
            }
        }
        // The batches `rank` writes: windows are whole batches.
        let mut at = 0;
        while at < len {
            let to = (at + BATCH_ROWS).min(len);
            let mut cols: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(rank[at..to].to_vec()))];
            if layout.exact {
                cols.push(Arc::new(UInt64Array::from(rep[at..to].to_vec())));
            }
            if layout.grouped {
                cols.push(Arc::new(UInt32Array::from(group[at..to].to_vec())));
            }
            out.write(cols)?;
            at = to;
        }
    }
    out.finish()?;
    Ok(true)
}

/// Step 6: the stage's summary, once every shard's rank file is written; the task files
/// removed. `None` when done already.
pub fn finish(work: &WorkDir) -> Result<Option<RankSummary>, Error> {
    let _lock = work.lock("rank")?;
    if ranked(work)? {
        return Ok(None);
    }
    let plan = read_plan(work)?;
    let splits = splits(work)?;
    let mut summary = RankSummary {
        rows: splits.iter().map(|s| s.rows).collect(),
        wordless: splits.iter().map(|s| s.wordless).sum(),
        groups: group_maps(&splits).1,
        buckets: plan.ranges,
        ..Default::default()
    };
    summary.seconds = splits.iter().map(|s| s.seconds).sum();
    for s in sorts(work, &plan)? {
        summary.seconds += s.seconds;
    }
    if work.config().exact {
        for k in 0..plan.ranges {
            let e: ExactSummary = work.need_json(&exact_json(work, k), &step("exact", Some(k)))?;
            summary.exact_duplicates += e.exact_duplicates;
            summary.seconds += e.seconds;
        }
    }
    for s in 0..work.shards() {
        if !work.table_done(&work.rank_file(s))? {
            return Err(work.missing(&work.rank_file(s), &step("write", Some(s))));
        }
    }
    work.write_json(&work.rank_summary(), &summary)?;
    super::remove_tasks(work)?;
    Ok(Some(summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_weigh_each_first_id_by_its_records_and_never_repeat() {
        let f = [("a", 10), ("b", 10), ("c", 10), ("d", 10)];
        assert_eq!(cuts(&f, 2), ["c"]);
        assert_eq!(cuts(&f, 4), ["b", "c", "d"]);
        assert_eq!(cuts(&[("a", 1), ("b", 100), ("c", 1)], 3), ["c"]);
        assert!(cuts(&f, 1).is_empty());
        assert!(cuts(&[("a", 5)], 8).is_empty());
        let many: Vec<(String, u64)> = (0..1000).map(|i| (format!("{i:04}"), 3)).collect();
        let many: Vec<(&str, u64)> = many.iter().map(|(s, w)| (s.as_str(), *w)).collect();
        let c = cuts(&many, 10);
        assert_eq!(c.len(), 9);
        assert!(c.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(c[4], "0500");
    }

    #[test]
    fn blocks_stay_few_and_bounded() {
        assert_eq!(block_records(0), 1);
        assert_eq!(block_records(1), 1);
        assert_eq!(block_records(256), 1);
        assert_eq!(block_records(257), 2);
        assert_eq!(block_records(1 << 20), 4096);
        assert_eq!(block_records(1 << 30), 4096);
    }
}
