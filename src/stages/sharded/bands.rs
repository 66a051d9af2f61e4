//! Stage 3, per shard: one row per document and band, `band`, `digest`
//! ([`band_digest`]), `rank` and `row` (the document's row in its shard), into the partition
//! `digest % partitions`. Equal bands have equal digests, so every bucket lies whole in one
//! partition. Documents without words and exact duplicates get no rows, as in memory.

use std::sync::Arc;

use arrow_array::{ArrayRef, UInt32Array, UInt64Array};
use arrow_schema::DataType;

use super::rank::NO_REP;
use super::raw::{le_u32s, RawRows};
use super::table::{col, u32s, u64s, BATCH_ROWS};
use super::WorkDir;
use crate::index::lsh::band_digest;
use crate::Error;

/// One partition's rows being gathered.
#[derive(Default)]
struct Rows {
    band: Vec<u32>,
    digest: Vec<u64>,
    rank: Vec<u64>,
    row: Vec<u64>,
}

impl Rows {
    fn take(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(UInt32Array::from(std::mem::take(&mut self.band))),
            Arc::new(UInt64Array::from(std::mem::take(&mut self.digest))),
            Arc::new(UInt64Array::from(std::mem::take(&mut self.rank))),
            Arc::new(UInt64Array::from(std::mem::take(&mut self.row))),
        ]
    }
}

/// Band shard `shard`. Returns false when it was banded already.
pub fn bands(work: &WorkDir, shard: usize) -> Result<bool, Error> {
    work.check_shard(shard)?;
    let parts = work.partitions();
    let mut done = true;
    for p in 0..parts {
        done &= work.table_done(&work.bands_file(shard, p))?;
    }
    if done {
        return Ok(false);
    }
    let cfg = work.config();
    let (num_perm, lsh) = (cfg.params.num_perm, cfg.lsh);
    // The ranks (and exact representatives) of the shard, whole: 16 bytes a document.
    let mut rank: Vec<u64> = Vec::new();
    let mut exact_rep: Vec<u64> = Vec::new();
    let mut cols = vec!["rank"];
    if cfg.exact {
        cols.push("exact_rep");
    }
    for batch in work.open_table(&work.rank_file(shard), "rank", &cols)? {
        let batch = batch?;
        rank.extend_from_slice(u64s(&batch, "rank"));
        if cfg.exact {
            exact_rep.extend_from_slice(u64s(&batch, "exact_rep"));
        }
    }
    let columns = vec![
        col("band", DataType::UInt32),
        col("digest", DataType::UInt64),
        col("rank", DataType::UInt64),
        col("row", DataType::UInt64),
    ];
    let mut outs = (0..parts)
        .map(|p| work.create_table(&work.bands_file(shard, p), columns.clone(), &[]))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows: Vec<Rows> = (0..parts).map(|_| Rows::default()).collect();
    let table = work.open_table(&work.sign_file(shard), "sign", &["words"])?;
    let mut raw = RawRows::sigs(work, shard, Some(table.rows))?;
    let mut sigs: Vec<u32> = Vec::new();
    if table.rows != rank.len() as u64 {
        return Err(work.refuse(format!(
            "shard {shard} has {} signed documents and {} ranked ones: run `neardup stage rank` \
             again in an empty work directory",
            table.rows,
            rank.len()
        )));
    }
    let mut row = 0usize;
    for batch in table {
        let batch = batch?;
        let words = u32s(&batch, "words");
        sigs.clear();
        sigs.extend(le_u32s(raw.read_next(words.len())?));
        for (i, &w) in words.iter().enumerate() {
            let d = row + i;
            if w == 0 || exact_rep.get(d).is_some_and(|&r| r != NO_REP) {
                continue;
            }
            let sig = &sigs[i * num_perm..(i + 1) * num_perm];
            for j in 0..lsh.bands {
                let digest = band_digest(&sig[j * lsh.rows..(j + 1) * lsh.rows], j);
                let p = (digest % parts as u64) as usize;
                let r = &mut rows[p];
                r.band.push(j as u32);
                r.digest.push(digest);
                r.rank.push(rank[d]);
                r.row.push(d as u64);
                if r.band.len() >= BATCH_ROWS {
                    outs[p].write(r.take())?;
                }
            }
        }
        row += words.len();
    }
    for (out, mut r) in outs.into_iter().zip(rows) {
        out.write_then_finish(r.take())?;
    }
    Ok(true)
}
