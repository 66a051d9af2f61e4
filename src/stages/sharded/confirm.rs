//! Stage 4, per partition: the partition's buckets (runs of equal band and digest, split by
//! full-band equality, as in memory), each confirmed on its own by
//! [`confirm_bucket`](crate::stages::dedup::confirm_bucket). Only
//! the documents in some bucket matter here: their ranks are looked up in `rank`'s files, and
//! their signatures and (for `jaccard`) shingle sets computed again from their text
//! (`gather.rs`: from the shards, or from the texts `ship.rs` shipped once a run goes task by
//! task; [`needs`] is that step's first half). Out: `rank_a`, `rank_b`, `estimate`, `jaccard`
//! (null unless computed), one row per confirmed pair, sorted.
//!
//! It holds the partition's band rows (24 bytes each) and the bucketed documents' signatures
//! and sets; a partition whose documents alone are more than a group holds is confirmed in
//! blocks instead (`blocks.rs`), two blocks held at a time.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::bands::{band_and_row, band_row, BAND_ROW_BYTES};
use super::codec::fields;
use super::gather::Docs;
use super::ship::{self, NeedsSummary};
use super::table::{col, u32s, u64s};
use super::{blocks, greedy, WorkDir};
use crate::error::Error;
use crate::index::lsh::{split_by_band, Buckets};
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    confirm_distinct, fill_estimates, Against, BucketCounts, BucketTables, ClusterRule, Confirm,
    JaccardCache,
};

/// The metadata key of a partition's counts (JSON).
const COUNTS_KEY: &str = "neardup.confirm";

/// What confirming a partition did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConfirmSummary {
    pub counts: BucketCounts,
    /// Buckets of two or more documents.
    pub buckets: u64,
    /// Documents whose shingle sets were gathered.
    pub sets_loaded: u64,
    pub seconds: f64,
    /// Of `seconds`, gathering the bucketed documents: their ranks, and their signatures and
    /// sets from their text.
    pub sets_seconds: f64,
}

/// A band row as the partition holds it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct BandRow {
    digest: u64,
    row: u64,
    band: u32,
    shard: u32,
}

impl BandRow {
    /// The order of a partition's rows: buckets are runs of equal band and digest.
    fn key(&self) -> (u32, u64, u32, u64) {
        (self.band, self.digest, self.shard, self.row)
    }
}

/// Marks which band rows may share their band and digest with another row, over a partition's
/// band rows read once: a row alone makes no bucket, and most rows are alone, so only the
/// others are worth holding and sorting.
///
/// Each row is a 32-bit [`fingerprint`] of its band and digest, held in [`FP_BUCKETS`] lists
/// by its top bits (4 bytes a row). Each list is then checked for repeats in bitmaps the size
/// of a cache, not of the partition (a table marked at random past the caches costs a memory
/// round trip a row), and the repeated fingerprints are marked in a bitmap of at most
/// 2^[`MAX_DUP_BITS`] bits that every row is tested against: rows whose band and digest repeat
/// always pass, and a lone row passes when its fingerprint clashes, a few percent of them.
struct Fingerprints {
    lists: Vec<Vec<u32>>,
}

/// Lists of [`Fingerprints`], by their top bits: each one's bitmaps (2^(32 - 8) bits, twice)
/// fit a cache.
const FP_BUCKET_BITS: u32 = 8;
const FP_BUCKETS: usize = 1 << FP_BUCKET_BITS;

/// The most bits of a fingerprint that [`SharedFilter`] marks (8 MiB).
const MAX_DUP_BITS: u32 = 26;

/// A band row's fingerprint: the top half of its digest (digests are uniform hashes whose low
/// bits chose the partition) mixed with its band, so equal bands with equal digests agree.
fn fingerprint(band: u32, digest: u64) -> u32 {
    ((digest >> 32) as u32) ^ band.wrapping_mul(0x9e37_79b9)
}

impl Fingerprints {
    /// Room for about `n` rows.
    fn new(n: u64) -> Self {
        let each = (n as usize / FP_BUCKETS) + (n as usize / FP_BUCKETS / 16) + 16;
        Fingerprints {
            lists: (0..FP_BUCKETS).map(|_| Vec::with_capacity(each)).collect(),
        }
    }

    fn add(&mut self, band: u32, digest: u64) {
        let f = fingerprint(band, digest);
        self.lists[(f >> (32 - FP_BUCKET_BITS)) as usize].push(f);
    }

    /// The filter of the fingerprints that repeat.
    fn into_filter(self) -> SharedFilter {
        let n: usize = self.lists.iter().map(Vec::len).sum();
        let bits = (usize::BITS - n.leading_zeros() + 1).clamp(6, MAX_DUP_BITS);
        let low = 32 - FP_BUCKET_BITS;
        // Each list's repeats, found in a seen-once/seen-twice bitmap of its low bits, which
        // is left clear for the next list by unmarking what the list marked.
        let repeats: Vec<Vec<u32>> = self
            .lists
            .into_par_iter()
            .map_init(
                || vec![[0u64; 2]; 1 << (low - 6)],
                |seen, list| {
                    let key = |f: u32| {
                        let k = f & ((1 << low) - 1);
                        ((k >> 6) as usize, 1u64 << (k & 63))
                    };
                    for &f in &list {
                        let (w, b) = key(f);
                        let s = &mut seen[w];
                        s[1] |= s[0] & b;
                        s[0] |= b;
                    }
                    let mut out = Vec::new();
                    for &f in &list {
                        let (w, b) = key(f);
                        if seen[w][1] & b != 0 {
                            out.push(f);
                        }
                    }
                    for &f in &list {
                        seen[key(f).0] = [0, 0];
                    }
                    out
                },
            )
            .collect();
        let mut dup = vec![0u64; (1usize << bits).div_ceil(64)];
        for f in repeats.into_iter().flatten() {
            let k = (f >> (32 - bits)) as usize;
            dup[k >> 6] |= 1 << (k & 63);
        }
        SharedFilter { bits, dup }
    }
}

/// Which fingerprints repeat ([`Fingerprints`]).
struct SharedFilter {
    bits: u32,
    dup: Vec<u64>,
}

impl SharedFilter {
    /// Whether another row may have this band and digest (always, when one has).
    fn maybe_shared(&self, band: u32, digest: u64) -> bool {
        let k = (fingerprint(band, digest) >> (32 - self.bits)) as usize;
        self.dup[k >> 6] & (1 << (k & 63)) != 0
    }
}

/// Of rows that passed the [`SharedFilter`], those whose band and digest another row has, in
/// [`BandRow::key`] order.
fn shared_digests(mut maybe: Vec<BandRow>) -> Vec<BandRow> {
    maybe.par_sort_unstable_by_key(BandRow::key);
    let same = |a: &BandRow, b: &BandRow| a.band == b.band && a.digest == b.digest;
    let mut shared = Vec::new();
    let mut i = 0;
    while i < maybe.len() {
        let mut e = i + 1;
        while e < maybe.len() && same(&maybe[e], &maybe[i]) {
            e += 1;
        }
        if e - i >= 2 {
            shared.extend_from_slice(&maybe[i..e]);
        }
        i = e;
    }
    shared
}

/// Rows read from a band row file at a time.
const READ_ROWS: usize = 64 * 1024;

/// The band rows of partition `partition` whose digest another row shares, in [`BandRow::key`]
/// order: every shard's file is read twice, once for the rows' [`Fingerprints`] and once to
/// keep the rows their [`SharedFilter`] passes, so that only those are ever held whole.
fn partition_rows(work: &WorkDir, partition: usize) -> Result<Vec<BandRow>, Error> {
    let mut files = (0..work.shards())
        .map(|s| work.open_keyed(&work.bands_file(s, partition), "bands", BAND_ROW_BYTES))
        .collect::<Result<Vec<_>, _>>()?;
    let n: u64 = files.iter().map(|f| f.rows).sum();
    if n < 2 {
        return Ok(Vec::new());
    }
    let mut prints = Fingerprints::new(n);
    for f in &mut files {
        let mut left = f.rows as usize;
        while left > 0 {
            let take = left.min(READ_ROWS);
            let mut values = fields::<u64>(f.read_next(take)?);
            while let (Some(digest), Some(x)) = (values.next(), values.next()) {
                prints.add(band_and_row(x).0, digest);
            }
            left -= take;
        }
    }
    let filter = prints.into_filter();
    let mut maybe = Vec::new();
    for (s, f) in files.iter_mut().enumerate() {
        f.rewind()?;
        let mut left = f.rows as usize;
        while left > 0 {
            let take = left.min(READ_ROWS);
            let mut values = fields::<u64>(f.read_next(take)?);
            while let (Some(digest), Some(x)) = (values.next(), values.next()) {
                let (band, row) = band_and_row(x);
                if filter.maybe_shared(band, digest) {
                    maybe.push(BandRow {
                        digest,
                        row,
                        band,
                        shard: s as u32,
                    });
                }
            }
            left -= take;
        }
    }
    drop(filter);
    Ok(shared_digests(maybe))
}

/// Documents that [`confirm_together`] gathers for a group of partitions, for the drivers that
/// confirm several in one job: their signatures and sets, about 3 KB a document of 300 words,
/// are what a group holds (a partition that needs more is confirmed alone, in blocks).
pub const GROUP_DOCS: usize = 128 << 10;

/// The most partitions confirmed in one group: each holds its unit lock, an open file, until
/// it is written.
const GROUP_PARTS: usize = 32;

/// Confirm partition `partition`. Returns its summary, or `None` when it was confirmed
/// already.
pub fn confirm(
    work: &WorkDir,
    partition: usize,
    progress: &ProgressFactory,
) -> Result<Option<ConfirmSummary>, Error> {
    let mut done = confirm_together(work, &[partition], GROUP_DOCS, progress)?;
    Ok(done.pop().flatten())
}

/// Confirm the partitions `parts`, in groups that gather their documents once: a document in
/// buckets of several partitions of a group is read and signed again once, not once for each.
/// A group closes when the documents it needs reach `max_docs` (they and their sets are what
/// a group holds). Returns each partition's summary, or `None` where it was confirmed already;
/// the files are those of confirming each on its own.
pub fn confirm_together(
    work: &WorkDir,
    parts: &[usize],
    max_docs: usize,
    progress: &ProgressFactory,
) -> Result<Vec<Option<ConfirmSummary>>, Error> {
    let memory = crate::options::Mib(crate::options::defaults::TASK_MEMORY_MIB);
    confirm_within(work, parts, max_docs, block_bytes(memory), progress)
}

/// The bytes of a block of signatures and sets when a confirm task may hold `memory`. It
/// holds two, and joining them takes about 0.7 times their bytes again (the sets' map, the
/// join's index of their tokens), beside the partition's rows and its giant bucket's forest
/// (24 bytes a pair): a quarter of the budget each, and 32 MiB of the 256 above it, keeps a
/// job within `memory` + 256 MiB (measured in docs/BENCHMARKS.md).
pub fn block_bytes(memory: crate::options::Mib) -> u64 {
    (memory.bytes() / 4 + (32 << 20)) as u64
}

/// [`confirm_together`], where a partition whose buckets alone need more than `max_docs`
/// documents is confirmed over its documents in blocks of about `block_bytes` of signatures
/// and sets, two blocks held at a time (`blocks.rs`; under greedy, `greedy/blocks.rs`): the
/// pairs (the greedy answers) are the same, the work counted is the blocks'.
pub fn confirm_within(
    work: &WorkDir,
    parts: &[usize],
    max_docs: usize,
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<Vec<Option<ConfirmSummary>>, Error> {
    for &p in parts {
        work.check_partition(p)?;
    }
    // Ascending, each once: two runs taking overlapping sets take their locks in one order.
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| parts[i]);
    order.dedup_by_key(|i| parts[*i]);
    let mut out = vec![None; parts.len()];
    let mut group: Vec<(usize, Loaded)> = Vec::new();
    // The locks of the group's partitions, held until they are written: a lock is an open
    // file, so a group holds at most `GROUP_PARTS`.
    let mut locks = Vec::new();
    let mut union: Vec<Vec<u64>> = vec![Vec::new(); work.shards()];
    let finish_group = |group: &mut Vec<(usize, Loaded)>,
                        union: &mut Vec<Vec<u64>>,
                        out: &mut Vec<Option<ConfirmSummary>>|
     -> Result<(), Error> {
        let parts: Vec<usize> = group.iter().map(|(_, l)| l.partition).collect();
        let docs = Docs::gather(work, std::mem::take(union), &parts, progress)?;
        *union = vec![Vec::new(); work.shards()];
        let cache = JaccardCache::default();
        let greedy = work.config().cluster == ClusterRule::Greedy;
        let places = if greedy {
            greedy::places(work, &docs.needed, &docs.rank)?
        } else {
            Vec::new()
        };
        // `--against` under greedy: which gathered documents have a near duplicate in an index
        // (as `apply` finds them, from the same signatures).
        let matched: Vec<bool> = if greedy && !work.manifest.against.is_empty() {
            let against = Against::open_recorded(&work.manifest.against_resolved(), work.config())?;
            let (m, _) = against.matches(&docs.sigs, work.config())?;
            m.iter().map(Option::is_some).collect()
        } else {
            Vec::new()
        };
        let total: usize = group.iter().map(|(_, l)| l.docs()).sum::<usize>().max(1);
        for (i, loaded) in group.drain(..) {
            let share = docs.seconds * loaded.docs() as f64 / total as f64;
            out[i] = Some(finish(
                work, loaded, &docs, &places, &matched, &cache, share, progress,
            )?);
        }
        Ok(())
    };
    for &i in &order {
        let p = parts[i];
        let lock = work.lock(&format!("confirm-{p:04}"))?;
        work.remove_partials("pairs", &format!("{p:04}."))?;
        work.remove_partials("pairs", &format!("{p:04}-docs."))?;
        work.remove_partials("greedy", &format!("{p:04}."))?;
        work.remove_partials("greedy", &format!("00000-{p:04}."))?;
        if work.table_done(&work.pairs_file(p))? {
            continue;
        }
        let loaded = load(work, p, progress)?;
        if loaded.docs() > max_docs {
            // More than a group holds, alone: confirmed over its documents in blocks.
            if !group.is_empty() {
                finish_group(&mut group, &mut union, &mut out)?;
                locks.clear();
            }
            out[i] = Some(finish_in_blocks(work, loaded, block_bytes, progress)?);
            drop(lock);
            continue;
        }
        // A group holds at most `max_docs` documents unless one partition alone needs more:
        // a partition that would take it past them starts the next group.
        if !group.is_empty() {
            let joined: usize = union
                .iter()
                .zip(&loaded.needed)
                .map(|(u, v)| merged_len(u, v))
                .sum();
            if joined > max_docs {
                finish_group(&mut group, &mut union, &mut out)?;
                locks.clear();
            }
        }
        for (u, v) in union.iter_mut().zip(&loaded.needed) {
            u.extend_from_slice(v);
            u.sort_unstable();
            u.dedup();
        }
        group.push((i, loaded));
        locks.push(lock);
        let docs: usize = union.iter().map(|v| v.len()).sum();
        if docs >= max_docs || group.len() >= GROUP_PARTS {
            finish_group(&mut group, &mut union, &mut out)?;
            locks.clear();
        }
    }
    if !group.is_empty() {
        finish_group(&mut group, &mut union, &mut out)?;
    }
    Ok(out)
}

/// The length of the union of two ascending lists without repeats.
fn merged_len(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
        n += 1;
    }
    n + (a.len() - i) + (b.len() - j)
}

/// Write partition `partition`'s needs (`ship.rs`): for each shard, the rows its buckets
/// hold. Returns `None` when they were written already.
pub fn needs(
    work: &WorkDir,
    partition: usize,
    progress: &ProgressFactory,
) -> Result<Option<NeedsSummary>, Error> {
    work.check_partition(partition)?;
    let _lock = work.lock(&format!("needs-{partition:04}"))?;
    work.remove_partials("ship", &format!("needs-{partition:04}"))?;
    if ship::needs_done(work, partition)? {
        return Ok(None);
    }
    let loaded = load(work, partition, progress)?;
    let bucketed: Vec<[u64; 3]> = loaded
        .runs
        .iter()
        .flat_map(|r| &loaded.rows[r.clone()])
        .map(|b| {
            let [digest, x] = band_row(b.digest, b.band as usize, b.row);
            [digest, x, b.shard as u64]
        })
        .collect();
    ship::write_needs(work, partition, &loaded.needed, &bucketed, loaded.seconds).map(Some)
}

/// A partition's buckets, before their documents are gathered.
struct Loaded {
    partition: usize,
    /// The band rows whose band and digest another row has, in [`BandRow::key`] order.
    rows: Vec<BandRow>,
    /// Runs of equal band and digest, two or more long.
    runs: Vec<std::ops::Range<usize>>,
    /// The documents in some run, per shard, ascending.
    needed: Vec<Vec<u64>>,
    seconds: f64,
}

impl Loaded {
    fn docs(&self) -> usize {
        self.needed.iter().map(|v| v.len()).sum()
    }
}

/// Read partition `partition`'s band rows into its runs: those `confirm-needs` kept when it
/// ran, else every shard's.
fn load(work: &WorkDir, partition: usize, progress: &ProgressFactory) -> Result<Loaded, Error> {
    let t0 = Instant::now();
    let step = progress.step(&format!("confirm, partition {partition}"));
    step.set_message("reading band rows");
    let rows = match ship::read_bucketed(work, partition)? {
        Some(kept) => kept
            .into_iter()
            .map(|[digest, x, shard]| {
                let (band, row) = band_and_row(x);
                BandRow {
                    digest,
                    row,
                    band,
                    shard: shard as u32,
                }
            })
            .collect(),
        None => partition_rows(work, partition)?,
    };
    // Runs of equal band and digest, two or more long: the documents worth gathering.
    let same = |a: &BandRow, b: &BandRow| a.band == b.band && a.digest == b.digest;
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let mut e = i + 1;
        while e < rows.len() && same(&rows[i], &rows[e]) {
            e += 1;
        }
        if e - i >= 2 {
            runs.push(i..e);
        }
        i = e;
    }
    let mut needed: Vec<Vec<u64>> = vec![Vec::new(); work.shards()];
    for r in &runs {
        for b in &rows[r.clone()] {
            needed[b.shard as usize].push(b.row);
        }
    }
    for v in &mut needed {
        v.sort_unstable();
        v.dedup();
    }
    Ok(Loaded {
        partition,
        rows,
        runs,
        needed,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The local number among `docs` of the document of band row `b`.
fn local(docs: &Docs, b: &BandRow) -> u32 {
    docs.local_at(b.shard as usize, b.row)
        .expect("a needed row")
}

/// Confirm a loaded partition over its group's gathered documents and write its pairs;
/// `gather_seconds` is its share of the gathering.
#[allow(clippy::too_many_arguments)]
fn finish(
    work: &WorkDir,
    loaded: Loaded,
    docs: &Docs,
    places: &[greedy::Place],
    matched: &[bool],
    cache: &JaccardCache,
    gather_seconds: f64,
    progress: &ProgressFactory,
) -> Result<ConfirmSummary, Error> {
    let t0 = Instant::now();
    let cfg = work.config();
    let Loaded {
        partition,
        rows,
        runs,
        needed,
        seconds: load_seconds,
    } = loaded;
    let step = progress.step(&format!("confirm, partition {partition}"));
    step.set_message("confirming pairs");
    let sets_loaded = record_bucketed(work, partition, &needed)?;
    let num_perm = cfg.params.num_perm;
    let tables = BucketTables {
        num_perm,
        sigs: &docs.sigs,
        sets: &docs.sets,
        cache,
        groups: &docs.groups,
    };
    let rows_of = cfg.lsh.rows;
    let local_rank = &docs.rank;
    let sigs = &docs.sigs;
    let greedy = cfg.cluster == ClusterRule::Greedy;
    // Each run, split by full-band equality: the buckets, each its members in rank order.
    let all: Buckets = runs
        .par_iter()
        .fold(Buckets::default, |mut kept, r| {
            let j = rows[r.start].band as usize;
            let band = |l: u32| {
                let off = l as usize * num_perm + j * rows_of;
                &sigs[off..off + rows_of]
            };
            // In rank order within each band value: the order `confirm_bucket` takes.
            let mut members: Vec<u32> = rows[r.clone()].iter().map(|b| local(docs, b)).collect();
            split_by_band(
                &mut members,
                band,
                |l| local_rank[l as usize],
                |bucket| kept.push(bucket.iter().copied()),
            );
            kept
        })
        .reduce(Buckets::default, |mut ka, kb| {
            ka.append(&kb);
            ka
        });
    let buckets = all.len() as u64;
    let (mut pairs, counts) = if !greedy {
        // Members in rank order already.
        confirm_distinct(&all, |_| {}, &tables, cfg.confirm, cfg.threshold)
    } else {
        // Buckets in a fixed order, by their members' ranks: the files are the same whatever
        // the threads (two buckets with the same members are alike).
        let mut kept: Vec<&[u32]> = all.iter().collect();
        kept.par_sort_by_cached_key(|b| {
            let mut ranks: Vec<u64> = b.iter().map(|&l| local_rank[l as usize]).collect();
            ranks.sort_unstable();
            ranks
        });
        let counts = greedy::first_round(
            work,
            partition,
            docs,
            &kept,
            &|l| places[l as usize],
            cache,
            matched,
        )?;
        (Vec::new(), counts)
    };
    pairs.par_sort_unstable_by_key(|p| (p.a, p.b));
    pairs.dedup_by_key(|p| (p.a, p.b));
    fill_estimates(&mut pairs, sigs, num_perm);
    let out: Vec<PairRow> = pairs
        .iter()
        .map(|p| {
            (
                local_rank[p.a as usize],
                local_rank[p.b as usize],
                p.estimate,
                p.jaccard,
            )
        })
        .collect();
    let summary = ConfirmSummary {
        counts,
        buckets,
        sets_loaded,
        seconds: load_seconds + gather_seconds + t0.elapsed().as_secs_f64(),
        sets_seconds: gather_seconds,
    };
    write_pairs(work, partition, out, &summary)?;
    Ok(summary)
}

/// A confirmed pair as written: the two ranks, the estimate and the Jaccard.
type PairRow = (u64, u64, f64, Option<f64>);

/// Write partition `partition`'s pairs `out` (in rank order, each once) and its summary.
fn write_pairs(
    work: &WorkDir,
    partition: usize,
    mut out: Vec<PairRow>,
    summary: &ConfirmSummary,
) -> Result<(), Error> {
    out.par_sort_unstable_by_key(|p| (p.0, p.1));
    out.dedup_by_key(|p| (p.0, p.1));
    let columns = vec![
        col("rank_a", DataType::UInt64),
        col("rank_b", DataType::UInt64),
        col("estimate", DataType::Float64),
        Field::new("jaccard", DataType::Float64, true),
    ];
    let meta = [(COUNTS_KEY, serde_json::to_string(summary).expect("JSON"))];
    let w = work.create_table(&work.pairs_file(partition), columns, &meta)?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(out.iter().map(|p| p.0))),
        Arc::new(UInt64Array::from_iter_values(out.iter().map(|p| p.1))),
        Arc::new(Float64Array::from_iter_values(out.iter().map(|p| p.2))),
        Arc::new(Float64Array::from_iter(out.iter().map(|p| p.3))),
    ];
    w.write_then_finish(cols)
}

/// Confirm a loaded partition over its documents in blocks (`blocks.rs`) and write its pairs;
/// under greedy, answer round 0 over them (`greedy/blocks.rs`).
fn finish_in_blocks(
    work: &WorkDir,
    loaded: Loaded,
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<ConfirmSummary, Error> {
    let t0 = Instant::now();
    let partition = loaded.partition;
    let sets_loaded = record_bucketed(work, partition, &loaded.needed)?;
    // The runs' rows alone, as ranges of their own.
    let (rows, runs) = (loaded.rows, loaded.runs);
    let mut places = Vec::with_capacity(runs.iter().map(|r| r.len()).sum());
    let mut at = Vec::with_capacity(runs.len());
    for r in &runs {
        let start = places.len();
        places.extend(rows[r.clone()].iter().map(|b| (b.shard, b.row)));
        at.push(start..places.len());
    }
    let bands = runs.iter().map(|r| rows[r.start].band).collect();
    drop(rows);
    let input = blocks::Input {
        partition,
        places,
        runs: at,
        bands,
        needed: loaded.needed,
    };
    // Greedy writes round 0's answers, and no pairs.
    let got = if work.config().cluster == ClusterRule::Greedy {
        let got = greedy::blocks::first_round(work, input, block_bytes, progress)?;
        blocks::Confirmed {
            pairs: Vec::new(),
            counts: got.counts,
            buckets: got.buckets,
            gather_seconds: got.gather_seconds,
        }
    } else {
        blocks::confirm(work, input, block_bytes, progress)?
    };
    let summary = ConfirmSummary {
        counts: got.counts,
        buckets: got.buckets,
        sets_loaded,
        seconds: loaded.seconds + t0.elapsed().as_secs_f64(),
        sets_seconds: got.gather_seconds,
    };
    write_pairs(work, partition, got.pairs, &summary)?;
    Ok(summary)
}

/// Under `--confirm jaccard`, record the partition's bucketed documents (`needed`, per shard)
/// for the S-curve, and return how many sets are loaded for them; 0 otherwise.
fn record_bucketed(work: &WorkDir, partition: usize, needed: &[Vec<u64>]) -> Result<u64, Error> {
    if work.config().confirm != Confirm::Jaccard {
        return Ok(0);
    }
    write_bucketed(work, partition, needed)?;
    Ok(needed.iter().map(|v| v.len() as u64).sum())
}

/// Record which documents of each shard lie in some bucket of the partition, `shard` and
/// `row`: the measured S-curve samples the union of all partitions' as in-memory `dedup`
/// samples the documents whose sets it loaded.
pub(super) fn write_bucketed(
    work: &WorkDir,
    partition: usize,
    needed: &[Vec<u64>],
) -> Result<(), Error> {
    let columns = vec![col("shard", DataType::UInt32), col("row", DataType::UInt64)];
    let w = work.create_table(&work.bucketed_file(partition), columns, &[])?;
    let shard = needed
        .iter()
        .enumerate()
        .flat_map(|(s, v)| std::iter::repeat_n(s as u32, v.len()));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from_iter_values(shard)),
        Arc::new(UInt64Array::from_iter_values(
            needed.iter().flatten().copied(),
        )),
    ];
    w.write_then_finish(cols)
}

/// The documents in some bucket of any partition, by document index over all shards in
/// order, ascending; `base[s]` is shard `s`'s first index.
pub(super) fn bucketed(work: &WorkDir, base: &[u64]) -> Result<Vec<u64>, Error> {
    let mut docs = Vec::new();
    for p in 0..work.partitions() {
        for batch in work.open_table(&work.bucketed_file(p), "confirm", &["shard", "row"])? {
            let batch = batch?;
            let (shard, row) = (u32s(&batch, "shard"), u64s(&batch, "row"));
            docs.extend(shard.iter().zip(row).map(|(&s, &r)| base[s as usize] + r));
        }
    }
    docs.sort_unstable();
    docs.dedup();
    Ok(docs)
}

/// A confirmed partition's summary.
pub fn summary(work: &WorkDir, partition: usize) -> Result<ConfirmSummary, Error> {
    let t = work.open_table(&work.pairs_file(partition), "confirm", &[])?;
    let bad = |msg: String| Error::Work {
        path: work.pairs_file(partition).display().to_string(),
        msg,
    };
    let json = t
        .meta
        .get(COUNTS_KEY)
        .ok_or_else(|| bad(format!("no `{COUNTS_KEY}` in its metadata")))?;
    serde_json::from_str(json).map_err(|e| bad(format!("unreadable counts: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_len_is_the_size_of_the_union() {
        let mut rng = crate::hash::Pcg32::new(11);
        for n in [0u32, 1, 2, 5, 40, 300] {
            let pick = |rng: &mut crate::hash::Pcg32| {
                let mut v: Vec<u64> = (0..n).map(|_| rng.below(2 * n.max(1)) as u64).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let union: std::collections::BTreeSet<u64> = a.iter().chain(&b).copied().collect();
            assert_eq!(merged_len(&a, &b), union.len(), "{a:?} {b:?}");
        }
    }

    /// The rows kept are exactly those whose band and digest some other row has, for digests
    /// that share their low bits (as a partition's do), for digests whose fingerprints clash,
    /// and for sizes around the bitmaps' steps.
    #[test]
    fn shared_digests_keeps_exactly_the_rows_whose_digest_repeats() {
        let mut rng = crate::hash::Pcg32::new(7);
        for n in [0usize, 1, 2, 3, 63, 64, 65, 1023, 1024, 1025, 5000] {
            let rows: Vec<BandRow> = (0..n)
                .map(|i| {
                    // About one row in four repeats an earlier digest; every digest is a
                    // multiple of 8, as in partition 0 of 8.
                    let fresh = ((rng.next_u32() as u64) << 32 | rng.next_u32() as u64) << 3;
                    let digest = if rng.below(8) == 0 {
                        // Distinct digests of one fingerprint: they pass, and must not stay.
                        0x5eed_5eed_0000_0000 | (rng.next_u32() as u64) << 3
                    } else if i > 0 && rng.below(4) == 0 {
                        (rng.below(i as u32) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) << 3
                    } else {
                        fresh
                    };
                    BandRow {
                        band: rng.below(2),
                        digest,
                        shard: 0,
                        row: i as u64,
                    }
                })
                .collect();
            let mut count: std::collections::HashMap<(u32, u64), usize> = Default::default();
            for r in &rows {
                *count.entry((r.band, r.digest)).or_default() += 1;
            }
            let mut want: Vec<u64> = rows
                .iter()
                .filter(|r| count[&(r.band, r.digest)] >= 2)
                .map(|r| r.row)
                .collect();
            let mut prints = Fingerprints::new(n as u64);
            for r in &rows {
                prints.add(r.band, r.digest);
            }
            let filter = prints.into_filter();
            let maybe: Vec<BandRow> = rows
                .into_iter()
                .filter(|r| filter.maybe_shared(r.band, r.digest))
                .collect();
            let kept = shared_digests(maybe);
            assert!(kept.windows(2).all(|w| w[0].key() <= w[1].key()));
            let mut got: Vec<u64> = kept.iter().map(|r| r.row).collect();
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "{n} rows");
        }
    }
}
