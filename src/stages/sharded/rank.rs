//! Stage 2, over all shards: each document's place in id order (`rank`), a repeated id refused
//! with both places named, the exact-duplicate pre-pass (`exact_rep`: the rank of the identical
//! document with the smallest id, or `u64::MAX`), and each document's group (`group`, an index
//! into the groups in order of first appearance).
//!
//! It holds every id once (its bytes and 16 more), and 28 bytes a document besides.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, UInt32Array, UInt64Array};
use arrow_schema::DataType;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::table::{col, strings, u32s, u64s, BATCH_ROWS};
use super::WorkDir;
use crate::ids::{id_order, DocLoc, IdArena};
use crate::progress::ProgressFactory;
use crate::Error;

/// No identical document with a smaller id.
pub const NO_REP: u64 = u64::MAX;

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
}

/// Rank every document. Returns the summary, or `None` when ranked already.
pub fn rank(work: &WorkDir, progress: &ProgressFactory) -> Result<Option<RankSummary>, Error> {
    if work
        .read_json::<RankSummary>(&work.rank_summary())?
        .is_some()
    {
        return Ok(None);
    }
    let t0 = Instant::now();
    let cfg = work.config();
    let step = progress.step("rank");
    let grouped = work.fields().group.is_some();
    let mut ids = IdArena::default();
    let mut locs: Vec<DocLoc> = Vec::new();
    let mut words: Vec<u32> = Vec::new();
    let mut keys: Vec<u128> = Vec::new();
    let mut groups: Vec<u32> = Vec::new();
    let mut group_index: HashMap<Option<String>, u32> = HashMap::new();
    let mut summary = RankSummary::default();
    for s in 0..work.shards() {
        step.set_message(format!("reading ids, shard {s}"));
        let mut cols = vec!["id", "line", "words"];
        if cfg.exact {
            cols.extend(["exact_lo", "exact_hi"]);
        }
        if grouped {
            cols.push("group");
        }
        let table = work.open_table(&work.sign_file(s), "sign", &cols)?;
        summary.rows.push(table.rows);
        for batch in table {
            let batch = batch?;
            let id = strings(&batch, "id");
            for i in 0..batch.num_rows() {
                ids.push(id.value(i));
            }
            locs.extend(u64s(&batch, "line").iter().map(|&line| DocLoc {
                file: s as u32,
                line,
            }));
            words.extend_from_slice(u32s(&batch, "words"));
            if cfg.exact {
                let (lo, hi) = (u64s(&batch, "exact_lo"), u64s(&batch, "exact_hi"));
                keys.extend(
                    lo.iter()
                        .zip(hi)
                        .map(|(&l, &h)| (h as u128) << 64 | l as u128),
                );
            }
            if grouped {
                let g = strings(&batch, "group");
                for i in 0..batch.num_rows() {
                    let name = (!arrow_array::Array::is_null(g, i)).then(|| g.value(i).to_string());
                    let next = group_index.len() as u32;
                    let gi = *group_index.entry(name.clone()).or_insert_with(|| {
                        summary.groups.push(name);
                        next
                    });
                    groups.push(gi);
                }
            }
        }
    }
    let n = ids.len();
    if n > u32::MAX as usize {
        return Err(Error::Param(format!(
            "{n} documents: the stages number documents with 32 bits; split the corpus into \
             runs of at most {} documents",
            u32::MAX
        )));
    }
    step.set_message("sorting ids");
    let inputs = work.inputs(&(0..work.shards()).collect::<Vec<_>>())?;
    let order = id_order(&ids, &locs, &|l| inputs.place(l.file as usize, l.line))?;
    drop(ids);
    drop(locs);
    let mut rank = vec![0u32; n];
    for (r, &d) in order.iter().enumerate() {
        rank[d as usize] = r as u32;
    }
    summary.wordless = words.iter().filter(|&&w| w == 0).count() as u64;

    // Identical word sequences (never wordless ones) within a group: the smallest id is the
    // representative, as the in-memory pre-pass.
    let mut exact_rep = vec![NO_REP; if cfg.exact { n } else { 0 }];
    if cfg.exact {
        step.set_message("exact duplicates");
        let group = |d: usize| groups.get(d).copied().unwrap_or(0);
        let mut keyed: Vec<(u128, u32, u32)> = (0..n)
            .filter(|&d| words[d] > 0)
            .map(|d| (keys[d], group(d), rank[d]))
            .collect();
        keyed.par_sort_unstable();
        let mut i = 0;
        while i < keyed.len() {
            let mut e = i + 1;
            while e < keyed.len() && keyed[e].0 == keyed[i].0 && keyed[e].1 == keyed[i].1 {
                e += 1;
            }
            for &(_, _, r) in &keyed[i + 1..e] {
                exact_rep[order[r as usize] as usize] = keyed[i].2 as u64;
            }
            i = e;
        }
        summary.exact_duplicates = exact_rep.iter().filter(|&&r| r != NO_REP).count() as u64;
    }

    let mut columns = vec![col("rank", DataType::UInt64)];
    if cfg.exact {
        columns.push(col("exact_rep", DataType::UInt64));
    }
    if grouped {
        columns.push(col("group", DataType::UInt32));
    }
    let mut base = 0usize;
    for (s, &rows) in summary.rows.iter().enumerate() {
        step.set_message(format!("writing ranks, shard {s}"));
        let mut out = work.create_table(&work.rank_file(s), columns.clone(), &[])?;
        let end = base + rows as usize;
        let mut at = base;
        while at < end || (at == base && rows == 0) {
            let to = (at + BATCH_ROWS).min(end);
            let mut cols: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from_iter_values(
                rank[at..to].iter().map(|&r| r as u64),
            ))];
            if cfg.exact {
                cols.push(Arc::new(UInt64Array::from(exact_rep[at..to].to_vec())));
            }
            if grouped {
                cols.push(Arc::new(UInt32Array::from(groups[at..to].to_vec())));
            }
            out.write(cols)?;
            if to == end {
                break;
            }
            at = to;
        }
        out.finish()?;
        base = end;
    }
    summary.seconds = t0.elapsed().as_secs_f64();
    work.write_json(&work.rank_summary(), &summary)?;
    Ok(Some(summary))
}

/// The summary of a finished `rank`.
pub fn summary(work: &WorkDir) -> Result<RankSummary, Error> {
    work.need_json(&work.rank_summary(), "rank")
}
