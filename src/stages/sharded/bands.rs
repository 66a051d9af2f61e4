//! Stage 3, per shard: one row per document and band into the partition
//! `digest % partitions`, where the digest is `sign`'s
//! [`band_digest`](crate::index::lsh::band_digest). Equal bands have equal digests, so every
//! bucket lies whole in one partition. Documents without words and exact duplicates get no
//! rows, as in memory.
//!
//! The rows are the shuffle's bytes, written once and read once by `confirm`, so they are a
//! keyed row file (`raw.rs`), not a table: 16 bytes a row, the digest, then
//! `band << 48 | row` (the document's row in its shard), both u64 little-endian. Most
//! documents share no bucket: `confirm` looks up the ranks of just the documents that do.

use super::codec::fields;
use super::rank::NO_REP;
use super::raw::{RawRows, RawWriter};
use super::table::{u32s, u64s, BATCH_ROWS};
use super::WorkDir;
use crate::error::Error;

/// Bytes of a band row.
pub(crate) const BAND_ROW_BYTES: usize = 16;

/// Rows of a shard and bands past these do not fit a band row.
pub(crate) const MAX_ROWS: u64 = 1 << 48;
pub(crate) const MAX_BANDS: usize = 1 << 16;

/// A band row: the digest, then `band << 48 | row`.
pub(crate) fn band_row(digest: u64, band: usize, row: u64) -> [u64; 2] {
    [digest, (band as u64) << 48 | row]
}

/// The band and row of a band row's second half.
pub(crate) fn band_and_row(x: u64) -> (u32, u64) {
    ((x >> 48) as u32, x & (MAX_ROWS - 1))
}

/// Whether shard `shard`'s band rows are written, every partition's.
pub(super) fn banded(work: &WorkDir, shard: usize) -> Result<bool, Error> {
    for p in 0..work.partitions() {
        if !work.keyed_done(&work.bands_file(shard, p), "bands", BAND_ROW_BYTES)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Band shard `shard`. Returns false when it was banded already.
pub fn bands(work: &WorkDir, shard: usize) -> Result<bool, Error> {
    work.check_shard(shard)?;
    let _lock = work.lock(&format!("bands-{shard:05}"))?;
    work.remove_partials("bands", &format!("{shard:05}-"))?;
    let parts = work.partitions();
    if banded(work, shard)? {
        return Ok(false);
    }
    // The work directory may have been made under a higher open-file limit than this job has.
    crate::sys::check_partition_files(parts, parts)?;
    let cfg = work.config();
    let bands = cfg.lsh.bands;
    // The exact representatives of the shard (`--exact`), whole: 8 bytes a document.
    let mut exact_rep: Vec<u64> = Vec::new();
    let cols: &[&str] = if cfg.exact { &["exact_rep"] } else { &[] };
    let ranked = work.open_table(&work.rank_file(shard), "rank", cols)?;
    let ranked_rows = ranked.rows;
    if cfg.exact {
        for batch in ranked {
            exact_rep.extend_from_slice(u64s(&batch?, "exact_rep"));
        }
    }
    let table = work.open_table(&work.sign_file(shard), "sign", &["words"])?;
    if table.rows != ranked_rows {
        return Err(work.refuse(format!(
            "shard {shard} has {} signed documents and {ranked_rows} ranked ones: run \
             `neardup stage rank` again in an empty work directory",
            table.rows,
        )));
    }
    if table.rows > MAX_ROWS || bands > MAX_BANDS {
        return Err(work.refuse(format!(
            "shard {shard} has {} documents in {bands} bands: band rows hold at most 2^48 \
             documents a shard and 2^16 bands; cut the shard",
            table.rows
        )));
    }
    let mut raw = RawRows::digests(work, shard, Some(table.rows))?;
    let mut outs: Vec<RawWriter> = (0..parts)
        .map(|p| work.create_keyed(&work.bands_file(shard, p)))
        .collect::<Result<_, _>>()?;
    let mut rows: Vec<Vec<[u64; 2]>> = vec![Vec::new(); parts];
    let mut digests: Vec<u64> = Vec::new();
    let mut row = 0usize;
    for batch in table {
        let batch = batch?;
        let words = u32s(&batch, "words");
        digests.clear();
        digests.extend(fields::<u64>(raw.read_next(words.len())?));
        for (i, &w) in words.iter().enumerate() {
            let d = row + i;
            if w == 0 || exact_rep.get(d).is_some_and(|&r| r != NO_REP) {
                continue;
            }
            for (j, &digest) in digests[i * bands..(i + 1) * bands].iter().enumerate() {
                let p = (digest % parts as u64) as usize;
                rows[p].push(band_row(digest, j, d as u64));
                if rows[p].len() >= BATCH_ROWS {
                    outs[p].values::<u64>(bytemuck::cast_slice(&rows[p]))?;
                    rows[p].clear();
                }
            }
        }
        row += words.len();
    }
    for (mut out, r) in outs.into_iter().zip(rows) {
        out.values::<u64>(bytemuck::cast_slice(&r))?;
        out.finish()?;
    }
    Ok(true)
}
