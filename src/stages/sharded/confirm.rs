//! Stage 4, per partition: the partition's buckets (runs of equal band and digest, split by
//! full-band equality, as in memory), each confirmed on its own by
//! [`confirm_bucket`]. The signatures, and for `jaccard` the shingle sets, of just the
//! documents in some bucket are gathered from the shards: the sets by one pass over each shard
//! that parses only those documents. Out: `rank_a`, `rank_b`, `estimate`, `jaccard` (null
//! unless computed), one row per confirmed pair, sorted.
//!
//! It holds the partition's band rows (32 bytes each) and the gathered signatures and sets.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, UInt64Array};
use arrow_schema::{DataType, Field};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::table::{col, u32s, u64s};
use super::WorkDir;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    confirm_bucket, fill_estimates, load_shingle_sets, BucketCounts, BucketTables, Confirm,
    JaccardCache, ShingleSets,
};
use crate::Error;

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
    pub sets_seconds: f64,
}

/// A band row as the partition holds it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct BandRow {
    band: u32,
    digest: u64,
    rank: u64,
    shard: u32,
    row: u64,
}

/// Confirm partition `partition`. Returns its summary, or `None` when it was confirmed
/// already.
pub fn confirm(
    work: &WorkDir,
    partition: usize,
    progress: &ProgressFactory,
) -> Result<Option<ConfirmSummary>, Error> {
    work.check_partition(partition)?;
    let path = work.pairs_file(partition);
    if work.table_done(&path)? {
        return Ok(None);
    }
    let t0 = Instant::now();
    let cfg = work.config();
    let step = progress.step(&format!("confirm, partition {partition}"));
    let mut rows: Vec<BandRow> = Vec::new();
    for s in 0..work.shards() {
        let table = work.open_table(
            &work.bands_file(s, partition),
            "bands",
            &["band", "digest", "rank", "row"],
        )?;
        for batch in table {
            let batch = batch?;
            let (band, digest) = (u32s(&batch, "band"), u64s(&batch, "digest"));
            let (rank, row) = (u64s(&batch, "rank"), u64s(&batch, "row"));
            rows.extend((0..batch.num_rows()).map(|i| BandRow {
                band: band[i],
                digest: digest[i],
                rank: rank[i],
                shard: s as u32,
                row: row[i],
            }));
        }
    }
    rows.par_sort_unstable();
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
    // Each needed document's local number: shard by shard, rows ascending.
    let mut needed: Vec<Vec<u64>> = vec![Vec::new(); work.shards()];
    for r in &runs {
        for b in &rows[r.clone()] {
            needed[b.shard as usize].push(b.row);
        }
    }
    let mut base = vec![0u32; work.shards() + 1];
    for (s, v) in needed.iter_mut().enumerate() {
        v.sort_unstable();
        v.dedup();
        base[s + 1] = base[s] + v.len() as u32;
    }
    let local = |b: &BandRow| -> u32 {
        let s = b.shard as usize;
        base[s] + needed[s].binary_search(&b.row).expect("a needed row") as u32
    };
    let total = base[work.shards()] as usize;
    let num_perm = cfg.params.num_perm;
    let mut sigs = vec![0u32; total * num_perm];
    let mut groups: Vec<u32> = Vec::new();
    let mut sets = ShingleSets::new();
    let mut sets_seconds = 0.0;
    for s in 0..work.shards() {
        if needed[s].is_empty() {
            continue;
        }
        step.set_message(format!("gathering signatures, shard {s}"));
        read_sig_rows(
            work,
            s,
            &needed[s],
            num_perm,
            &mut sigs[base[s] as usize * num_perm..],
        )?;
        if work.fields().group.is_some() {
            let file = work.rank_file(s);
            for batch in work.open_rows(&file, "rank", &["group"], Some(&needed[s]))? {
                groups.extend_from_slice(u32s(&batch?, "group"));
            }
        }
        if cfg.confirm == Confirm::Jaccard {
            let t = Instant::now();
            let rows_s = *needed[s].last().expect("not empty") as usize + 1;
            let mut mask = vec![false; rows_s];
            for &r in &needed[s] {
                mask[r as usize] = true;
            }
            let inputs = work.inputs(&[s])?;
            let found =
                load_shingle_sets(&inputs, work.fields(), &cfg.params, &mask, progress, None)?;
            for (r, set) in found {
                let at = needed[s].binary_search(&(r as u64)).expect("a needed row");
                sets.insert(base[s] + at as u32, set);
            }
            sets_seconds += t.elapsed().as_secs_f64();
        }
    }
    let mut summary = ConfirmSummary {
        sets_loaded: sets.len() as u64,
        sets_seconds,
        ..Default::default()
    };
    step.set_message("confirming pairs");
    let mut local_rank = vec![0u64; total];
    for r in &runs {
        for b in &rows[r.clone()] {
            local_rank[local(b) as usize] = b.rank;
        }
    }
    let tables = BucketTables {
        num_perm,
        sigs: &sigs,
        sets: &sets,
        cache: &JaccardCache::default(),
        groups: &groups,
    };
    let rows_of = cfg.lsh.rows;
    // Each run, split by full-band equality: the buckets (members stay in rank order).
    let (pairs, counts, buckets) = runs
        .par_iter()
        .fold(
            || (Vec::new(), BucketCounts::default(), 0u64),
            |(mut pairs, mut counts, mut buckets), r| {
                let j = rows[r.start].band as usize;
                let band = |l: u32| {
                    let off = l as usize * num_perm + j * rows_of;
                    &sigs[off..off + rows_of]
                };
                let mut members: Vec<u32> = rows[r.clone()].iter().map(local).collect();
                members.sort_by(|&x, &y| band(x).cmp(band(y)));
                let mut s = 0;
                while s < members.len() {
                    let mut t = s + 1;
                    while t < members.len() && band(members[t]) == band(members[s]) {
                        t += 1;
                    }
                    if t - s >= 2 {
                        buckets += 1;
                        confirm_bucket(
                            &members[s..t],
                            &tables,
                            cfg.confirm,
                            cfg.threshold,
                            &mut pairs,
                            &mut counts,
                        );
                    }
                    s = t;
                }
                (pairs, counts, buckets)
            },
        )
        .reduce(
            || (Vec::new(), BucketCounts::default(), 0),
            |(mut pa, mut ca, ba), (pb, cb, bb)| {
                pa.extend(pb);
                ca += cb;
                (pa, ca, ba + bb)
            },
        );
    let mut pairs = pairs;
    pairs.par_sort_unstable_by_key(|p| (p.a, p.b));
    pairs.dedup_by_key(|p| (p.a, p.b));
    fill_estimates(&mut pairs, &sigs, num_perm);
    let mut out: Vec<(u64, u64, f64, Option<f64>)> = pairs
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
    out.par_sort_unstable_by_key(|p| (p.0, p.1));
    out.dedup_by_key(|p| (p.0, p.1));
    summary.counts = counts;
    summary.buckets = buckets;
    summary.seconds = t0.elapsed().as_secs_f64();
    let columns = vec![
        col("rank_a", DataType::UInt64),
        col("rank_b", DataType::UInt64),
        col("estimate", DataType::Float64),
        Field::new("jaccard", DataType::Float64, true),
    ];
    let meta = [(COUNTS_KEY, serde_json::to_string(&summary).expect("JSON"))];
    let w = work.create_table(&path, columns, &meta)?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(out.iter().map(|p| p.0))),
        Arc::new(UInt64Array::from_iter_values(out.iter().map(|p| p.1))),
        Arc::new(Float64Array::from_iter_values(out.iter().map(|p| p.2))),
        Arc::new(Float64Array::from_iter(out.iter().map(|p| p.3))),
    ];
    w.write_then_finish(cols)?;
    Ok(Some(summary))
}

/// Read the signatures of shard `shard`'s rows `rows` (ascending) from its raw rows file
/// into `out`, one after the other.
fn read_sig_rows(
    work: &WorkDir,
    shard: usize,
    rows: &[u64],
    num_perm: usize,
    out: &mut [u32],
) -> Result<(), Error> {
    use std::io::{Read, Seek, SeekFrom};
    let path = work.sig_rows_file(shard);
    let name = path.display().to_string();
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(work.missing(&path, "sign"))
        }
        Err(e) => return Err(Error::io(&name, e)),
    };
    let row_bytes = num_perm as u64 * 4;
    let len = f.metadata().map_err(|e| Error::io(&name, e))?.len();
    if rows.last().is_some_and(|&r| (r + 1) * row_bytes > len) {
        return Err(Error::Work {
            path: name,
            msg: "shorter than its shard's signed rows: run `neardup stage sign` again in an \
                  empty work directory"
                .into(),
        });
    }
    let mut buf = vec![0u8; row_bytes as usize];
    for (i, &r) in rows.iter().enumerate() {
        f.seek(SeekFrom::Start(r * row_bytes))
            .and_then(|_| f.read_exact(&mut buf))
            .map_err(|e| Error::io(&name, e))?;
        for (o, b) in out[i * num_perm..(i + 1) * num_perm]
            .iter_mut()
            .zip(buf.chunks_exact(4))
        {
            *o = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
    Ok(())
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
