//! Stage 4, per partition: the partition's buckets (runs of equal band and digest, split by
//! full-band equality, as in memory), each confirmed on its own by
//! [`confirm_bucket`]. The signatures, and for `jaccard` the shingle sets, of just the
//! documents in some bucket are gathered: the signatures from `sign`'s raw rows at their
//! offsets; the sets from just those lines of a plain JSONL shard (where `sign` kept them), or
//! from one pass over any other shard that parses only those documents. Out: `rank_a`,
//! `rank_b`, `estimate`, `jaccard` (null unless computed), one row per confirmed pair, sorted.
//!
//! It holds the partition's band rows (32 bytes each) and the gathered signatures and sets.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::raw::{le_u64s, RawRows};
use super::table::{col, u32s, u64s};
use super::WorkDir;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    confirm_bucket, fill_estimates, load_shingle_sets, shingle_set, BucketCounts, BucketTables,
    Confirm, JaccardCache, ShingleSets,
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

/// The band rows whose digest another row shares, in no particular order: a row alone makes no
/// bucket, and most rows are alone, so only the others are worth sorting. A first pass marks
/// each digest's top bits in two bitmaps, seen once and seen twice (digests are uniform
/// hashes, but their low bits chose the partition; with 32 to 64 bits of each bitmap a row, a
/// few percent of the lone rows pass by a clash); the rows that pass are sorted by digest and
/// kept where a neighbour has the same.
fn shared_digests(rows: Vec<BandRow>) -> Vec<BandRow> {
    let n = rows.len();
    if n < 2 {
        return Vec::new();
    }
    let bits = (usize::BITS - n.leading_zeros() + 5).clamp(10, 34);
    let key = |r: &BandRow| {
        let k = r.digest >> (64 - bits);
        ((k >> 6) as usize, 1u64 << (k & 63))
    };
    // Seen once and seen twice side by side: one cache miss a row, not two.
    let mut seen = vec![[0u64; 2]; 1 << (bits - 6)];
    for r in &rows {
        let (w, b) = key(r);
        let s = &mut seen[w];
        s[1] |= s[0] & b;
        s[0] |= b;
    }
    let mut maybe: Vec<BandRow> = rows
        .into_iter()
        .filter(|r| {
            let (w, b) = key(r);
            seen[w][1] & b != 0
        })
        .collect();
    drop(seen);
    maybe.par_sort_unstable_by_key(|r| r.digest);
    let mut shared = Vec::new();
    let mut i = 0;
    while i < maybe.len() {
        let mut e = i + 1;
        while e < maybe.len() && maybe[e].digest == maybe[i].digest {
            e += 1;
        }
        if e - i >= 2 {
            shared.extend_from_slice(&maybe[i..e]);
        }
        i = e;
    }
    shared
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
    let mut rows = shared_digests(rows);
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
    if cfg.confirm == Confirm::Jaccard {
        write_bucketed(work, partition, &needed)?;
    }
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
        RawRows::sigs(work, s, None)?
            .read_u32s_at(&needed[s], &mut sigs[base[s] as usize * num_perm..])?;
        if work.fields().group.is_some() {
            let file = work.rank_file(s);
            for batch in work.open_rows(&file, "rank", &["group"], Some(&needed[s]))? {
                groups.extend_from_slice(u32s(&batch?, "group"));
            }
        }
        if cfg.confirm == Confirm::Jaccard {
            let t = Instant::now();
            for (at, set) in shard_sets(work, s, &needed[s], progress)?
                .into_iter()
                .enumerate()
            {
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

/// The shingle sets of shard `shard`'s rows `rows` (ascending), in that order. Of a plain JSONL
/// shard, only those lines are read (where `sign` recorded that they start); of any other,
/// one pass over the shard parses only them.
pub(super) fn shard_sets(
    work: &WorkDir,
    shard: usize,
    rows: &[u64],
    progress: &ProgressFactory,
) -> Result<Vec<Vec<u64>>, Error> {
    let params = &work.config().params;
    let fields = work.fields();
    let inputs = work.inputs(&[shard])?;
    if let Some(mut lines) = RawRows::lines(work, shard)? {
        // Each line's span: from its start to the next document's (or the end of the shard).
        let next: Vec<u64> = rows
            .iter()
            .map(|&r| r + 1)
            .filter(|&r| r < lines.rows)
            .collect();
        let ends: Vec<u64> = le_u64s(lines.read_at(&next)?).step_by(2).collect();
        let shard_bytes = work.manifest.shards[shard].bytes;
        let at: Vec<u64> = le_u64s(lines.read_at(rows)?).collect();
        let spans: Vec<(u64, u64, u64)> = at
            .chunks_exact(2)
            .enumerate()
            .map(|(i, x)| (x[0], ends.get(i).copied().unwrap_or(shard_bytes), x[1]))
            .collect();
        if spans.iter().any(|&(s, e, _)| s >= e || e > shard_bytes) {
            return Err(Error::Work {
                path: work.lines_file(shard).display().to_string(),
                msg: "holds a line outside its shard: run `neardup stage sign` again in an \
                      empty work directory"
                    .into(),
            });
        }
        let chunk = inputs.read_spans(0, &spans)?;
        let name = inputs.name(0);
        return (0..chunk.len())
            .into_par_iter()
            .map(|i| shingle_set(&chunk, i, fields, name, params))
            .collect();
    }
    let mut mask = vec![false; rows.last().map_or(0, |&r| r as usize + 1)];
    for &r in rows {
        mask[r as usize] = true;
    }
    let mut found: Vec<(u32, Vec<u64>)> =
        load_shingle_sets(&inputs, fields, params, &mask, progress, None)?
            .into_iter()
            .collect();
    found.sort_unstable_by_key(|x| x.0);
    Ok(found.into_iter().map(|x| x.1).collect())
}

/// Record which documents of each shard lie in some bucket of the partition, `shard` and
/// `row`: the measured S-curve samples the union of all partitions' as in-memory `dedup`
/// samples the documents whose sets it loaded.
fn write_bucketed(work: &WorkDir, partition: usize, needed: &[Vec<u64>]) -> Result<(), Error> {
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

    /// The rows kept are exactly those whose digest some other row has, for digests that share
    /// their low bits (as a partition's do) and for sizes around the bitmaps' steps.
    #[test]
    fn shared_digests_keeps_exactly_the_rows_whose_digest_repeats() {
        let mut rng = crate::hash::Pcg32::new(7);
        for n in [0usize, 1, 2, 3, 63, 64, 65, 1023, 1024, 1025, 5000] {
            let rows: Vec<BandRow> = (0..n)
                .map(|i| {
                    // About one row in four repeats an earlier digest; every digest is a
                    // multiple of 8, as in partition 0 of 8.
                    let fresh = ((rng.next_u32() as u64) << 32 | rng.next_u32() as u64) << 3;
                    let digest = if i > 0 && rng.below(4) == 0 {
                        (rng.below(i as u32) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) << 3
                    } else {
                        fresh
                    };
                    BandRow {
                        band: rng.below(16),
                        digest,
                        rank: i as u64,
                        shard: 0,
                        row: i as u64,
                    }
                })
                .collect();
            let mut count: std::collections::HashMap<u64, usize> = Default::default();
            for r in &rows {
                *count.entry(r.digest).or_default() += 1;
            }
            let mut want: Vec<u64> = rows
                .iter()
                .filter(|r| count[&r.digest] >= 2)
                .map(|r| r.row)
                .collect();
            let mut got: Vec<u64> = shared_digests(rows).iter().map(|r| r.row).collect();
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "{n} rows");
        }
    }
}
