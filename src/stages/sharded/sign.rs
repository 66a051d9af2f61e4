//! Stage 1, per shard: what clustering needs of each document, and no text. One row per
//! document in input order: `id`, `line` (the line, or the Parquet row, that errors name),
//! `words`; `exact_lo`/`exact_hi` with `--exact`; `keep` with a keep field; `group` with a
//! group field. Beside it, as raw rows (`raw.rs`): `S.dig`, each document's band digests
//! ([`band_digest`]), which `bands` reads in order; of a plain JSONL shard, `S.lines`, where
//! each document's line is, so that `confirm` reads only the lines it needs; with `--against`,
//! `S.sig`, the signatures, which `apply` checks against the indexes. Signatures are not kept
//! otherwise: a band's digest is 8 bytes where the band is `4 x rows` (a quarter, at the
//! default 16 x 8), and the few documents that share a bucket are signed again in `confirm`.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field};
use rayon::prelude::*;

use super::raw::RawWriter;
use super::table::col;
use super::WorkDir;
use crate::engine::Engine;
use crate::error::Error;
use crate::index::lsh::band_digest;
use crate::pipeline::{scan, ScanStats};
use crate::progress::ProgressFactory;
use crate::stages::dedup::GroupMissing;

/// Sign shard `shard` with `engine`. Returns the pass's counts, or `None` when the shard was
/// signed already.
pub fn sign(
    work: &WorkDir,
    shard: usize,
    engine: &mut dyn Engine,
    progress: &ProgressFactory,
) -> Result<Option<ScanStats>, Error> {
    work.check_shard(shard)?;
    let _lock = work.lock(&format!("sign-{shard:05}"))?;
    work.remove_partials("sign", &format!("{shard:05}."))?;
    let path = work.sign_file(shard);
    if work.table_done(&path)? {
        return Ok(None);
    }
    let cfg = work.config();
    if engine.params() != &cfg.params {
        return Err(Error::Param(
            "the engine was built with other parameters than the work directory's".into(),
        ));
    }
    let fields = work.fields();
    let inputs = work.inputs(&[shard])?.with_content_checksums();
    let num_perm = cfg.params.num_perm;
    let mut columns = vec![
        col("id", DataType::Utf8),
        col("line", DataType::UInt64),
        col("words", DataType::UInt32),
    ];
    if cfg.exact {
        columns.push(col("exact_lo", DataType::UInt64));
        columns.push(col("exact_hi", DataType::UInt64));
    }
    if fields.keep.is_some() {
        columns.push(col("keep", DataType::Float64));
    }
    if fields.group.is_some() {
        columns.push(Field::new("group", DataType::Utf8, true));
    }
    // The pass's counts are known only at the end, after the table's metadata: they go to a
    // JSON file beside it, written before the table appears, so a finished table has them.
    let mut out = work.create_table(&path, columns, &[])?;
    let mut digests = RawWriter::create(&work.digests_file(shard))?;
    let mut dig: Vec<u64> = Vec::new();
    let mut raw = match work.manifest.against.is_empty() {
        true => None,
        false => Some(RawWriter::create(&work.sig_rows_file(shard))?),
    };
    let lsh = cfg.lsh;
    let mut lines = match inputs.line_cursor(0)? {
        Some(cursor) => Some((cursor, RawWriter::create(&work.lines_file(shard))?)),
        None => None,
    };
    let mut at: Vec<u64> = Vec::new();
    let bar = progress.pass(&format!("signatures, shard {shard}"), inputs.total_bytes());
    let stats = scan(&inputs, fields, engine, cfg.exact, None, &bar, |sc| {
        let n = sc.len();
        let sigs = &sc.sigs[..n * num_perm];
        dig.resize(n * lsh.bands, 0);
        dig.par_chunks_mut(lsh.bands)
            .zip(sigs.par_chunks(num_perm))
            .for_each(|(d, sig)| {
                for (j, d) in d.iter_mut().enumerate() {
                    *d = band_digest(&sig[j * lsh.rows..(j + 1) * lsh.rows], j);
                }
            });
        digests.values(&dig)?;
        if let Some(raw) = raw.as_mut() {
            raw.values(sigs)?;
        }
        if let Some((cursor, file)) = lines.as_mut() {
            at.clear();
            for &line in &sc.lines {
                at.extend([cursor.offset_of(line)?, line]);
            }
            file.values(&at)?;
        }
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values((0..n).map(|i| sc.ids.get(i)))),
            Arc::new(UInt64Array::from(sc.lines.clone())),
            Arc::new(UInt32Array::from(sc.words.clone())),
        ];
        if cfg.exact {
            let lo = sc.exact_keys.iter().map(|&k| k as u64);
            let hi = sc.exact_keys.iter().map(|&k| (k >> 64) as u64);
            cols.push(Arc::new(UInt64Array::from_iter_values(lo)));
            cols.push(Arc::new(UInt64Array::from_iter_values(hi)));
        }
        if fields.keep.is_some() {
            let v = sc.extras.iter().map(|x| x.keep.unwrap_or(f64::NAN));
            cols.push(Arc::new(Float64Array::from_iter_values(v)));
        }
        if let Some(g) = &fields.group {
            for (i, x) in sc.extras.iter().enumerate() {
                if x.group.is_none() && cfg.group_missing == GroupMissing::Error {
                    return Err(Error::Record(format!(
                        "{}: field `{g}` is missing or null (--group-missing own puts \
                         documents without it in a group of their own)",
                        inputs.place(sc.file_index, sc.lines[i])
                    )));
                }
            }
            let v = sc.extras.iter().map(|x| x.group.as_deref());
            cols.push(Arc::new(StringArray::from_iter(v)));
        }
        out.write(cols)
    })?;
    let info = engine.info();
    // The whole shard's checksum: `apply` compares it before it publishes anything, so a
    // shard edited after this pass is refused even where its size and ends stayed the same.
    let content = work.content_checksum(&inputs, shard)?;
    let summary = SignSummary {
        scan: stats.clone(),
        engine_kind: info.kind.to_string(),
        engine_detail: info.detail,
        engine_auto: info.auto,
        content,
    };
    work.write_json(&scan_file(work, shard), &summary)?;
    digests.finish()?;
    if let Some(raw) = raw {
        raw.finish()?;
    }
    if let Some((_, file)) = lines {
        file.finish()?;
    }
    out.finish()?;
    Ok(Some(stats))
}

/// What `sign` keeps beside a shard's table: the pass's counts and the engine that signed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SignSummary {
    #[serde(flatten)]
    pub scan: ScanStats,
    pub engine_kind: String,
    pub engine_detail: String,
    /// With `--engine auto`: what it chose and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_auto: Option<String>,
    /// The checksum of the shard's bytes as this pass read them ([`crate::io::checksum`]).
    #[serde(default)]
    pub content: String,
}

/// Where `sign` keeps a shard's pass-1 counts.
pub(crate) fn scan_file(work: &WorkDir, shard: usize) -> std::path::PathBuf {
    work.sign_file(shard).with_extension("json")
}

/// A signed shard's pass-1 counts.
pub fn scan_stats(work: &WorkDir, shard: usize) -> Result<ScanStats, Error> {
    Ok(sign_summary(work, shard)?.scan)
}

/// A signed shard's summary.
pub fn sign_summary(work: &WorkDir, shard: usize) -> Result<SignSummary, Error> {
    work.need_json(&scan_file(work, shard), "sign")
}
