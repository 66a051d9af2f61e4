//! What `confirm` needs of each shard, shipped to the partitions in one pass over the shard,
//! so that a run's confirm tasks read the shards once between them, not once each.
//!
//! Two steps come before the confirm groups when a run goes task by task:
//! `confirm-needs partition=P` reads the partition's band rows and writes those of its
//! buckets (`ship/bucketed-P.rows`, which the partition's confirm task reads instead of every
//! shard's band rows again) and, for each shard, the rows its buckets hold
//! (`ship/needs-P-S.rows`, u64 each, ascending); `confirm-texts
//! shard=S` reads those lists for its shard, reads the shard once and writes each partition
//! its rows' texts, with their ranks, groups and the band digests `sign` recorded
//! (`ship/shipped-S-P.rows`). A confirm group then signs its documents from those files and
//! checks them against those digests, reading no shard's own files. Both are keyed row files
//! (`raw.rs`), so a file of another run or a damaged one is refused; each step ends with a
//! summary (`ship/needs-P.json`, `ship/shipped-S.json`) that says it is done.
//!
//! A shipped file is a run of records, rows ascending, each: the row, the rank, the group (0
//! without groups) and the text's length in bytes (u64 each), the band digests (u64 each, one
//! a band), then the text (UTF-8).

use std::io::Read;

use serde::{Deserialize, Serialize};

use super::codec::{fields, Take};
use super::raw::RawWriter;
use super::WorkDir;
use crate::error::Error;

/// Bytes of a row of a needs file.
pub(super) const NEED_ROW_BYTES: usize = 8;

/// What `confirm-needs` wrote for a partition.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NeedsSummary {
    /// Rows named, over the shards.
    pub documents: u64,
    pub seconds: f64,
}

/// What `confirm-texts` wrote for a shard.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TextsSummary {
    /// Documents of the shard some partition needs.
    pub documents: u64,
    /// Texts written, over the partitions (a document in buckets of two partitions is
    /// written to both).
    pub written: u64,
    /// Bytes of text written.
    pub bytes: u64,
    pub seconds: f64,
}

/// Whether partition `partition`'s needs are written.
pub(super) fn needs_done(work: &WorkDir, partition: usize) -> Result<bool, Error> {
    Ok(work
        .read_json::<NeedsSummary>(&work.needs_summary(partition))?
        .is_some())
}

/// Whether shard `shard`'s texts are written.
pub(super) fn texts_done(work: &WorkDir, shard: usize) -> Result<bool, Error> {
    Ok(work
        .read_json::<TextsSummary>(&work.texts_summary(shard))?
        .is_some())
}

/// Bytes of a row of a partition's bucketed band rows: the digest, `band << 48 | row`, the
/// shard, u64 each.
pub(super) const BUCKETED_ROW_BYTES: usize = 24;

/// Write partition `partition`'s needs: `needed[s]`, shard `s`'s rows (ascending), and
/// `bucketed`, the band rows of its buckets (see [`BUCKETED_ROW_BYTES`]), which its confirm
/// task reads instead of every shard's band rows again.
pub(super) fn write_needs(
    work: &WorkDir,
    partition: usize,
    needed: &[Vec<u64>],
    bucketed: &[[u64; 3]],
    seconds: f64,
) -> Result<NeedsSummary, Error> {
    let mut w = work.create_keyed(&work.bucketed_rows_file(partition))?;
    w.values::<u64>(bytemuck::cast_slice(bucketed))?;
    w.finish()?;
    for (s, rows) in needed.iter().enumerate() {
        let mut w = work.create_keyed(&work.needs_file(partition, s))?;
        w.values::<u64>(rows)?;
        w.finish()?;
    }
    let summary = NeedsSummary {
        documents: needed.iter().map(|v| v.len() as u64).sum(),
        seconds,
    };
    work.write_json(&work.needs_summary(partition), &summary)?;
    Ok(summary)
}

/// Shard `shard`'s rows that partition `partition` needs (ascending).
pub(super) fn read_needs(
    work: &WorkDir,
    partition: usize,
    shard: usize,
) -> Result<Vec<u64>, Error> {
    if !needs_done(work, partition)? {
        return Err(work.missing(&work.needs_summary(partition), "confirm-needs"));
    }
    let path = work.needs_file(partition, shard);
    let mut f = work.open_keyed(&path, "confirm-needs", NEED_ROW_BYTES)?;
    let n = f.rows as usize;
    let rows: Vec<u64> = fields::<u64>(f.read_next(n)?).collect();
    if rows.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::Work {
            path: path.display().to_string(),
            msg: "holds rows out of order: run the confirm steps again in an empty work \
                  directory"
                .into(),
        });
    }
    Ok(rows)
}

/// Partition `partition`'s bucketed band rows, as [`write_needs`] wrote them; `None` before
/// its needs are written.
pub(super) fn read_bucketed(
    work: &WorkDir,
    partition: usize,
) -> Result<Option<Vec<[u64; 3]>>, Error> {
    if !needs_done(work, partition)? {
        return Ok(None);
    }
    let path = work.bucketed_rows_file(partition);
    let mut f = work.open_keyed(&path, "confirm-needs", BUCKETED_ROW_BYTES)?;
    let n = f.rows as usize;
    let values: Vec<u64> = fields::<u64>(f.read_next(n)?).collect();
    Ok(Some(
        values.chunks_exact(3).map(|x| [x[0], x[1], x[2]]).collect(),
    ))
}

/// One document as a partition receives it.
#[derive(Debug)]
pub(super) struct Shipped {
    pub row: u64,
    pub rank: u64,
    /// 0 without groups.
    pub group: u32,
    /// The band digests `sign` recorded, one a band.
    pub digests: Vec<u64>,
    pub text: String,
}

/// A shipped file being written.
pub(super) struct TextsWriter(RawWriter);

impl TextsWriter {
    pub fn create(work: &WorkDir, shard: usize, partition: usize) -> Result<Self, Error> {
        work.create_keyed(&work.texts_file(shard, partition))
            .map(TextsWriter)
    }

    /// One record: the document at `row`, of rank `rank` and group `group`, whose band
    /// digests are `digests`.
    pub fn push(
        &mut self,
        row: u64,
        rank: u64,
        group: u32,
        digests: &[u64],
        text: &str,
    ) -> Result<(), Error> {
        self.0
            .values::<u64>(&[row, rank, group as u64, text.len() as u64])?;
        self.0.values::<u64>(digests)?;
        self.0.values::<u8>(text.as_bytes())
    }

    pub fn finish(self) -> Result<(), Error> {
        self.0.finish()
    }
}

/// A shipped file being read, record by record.
pub(super) struct TextsReader {
    file: std::io::BufReader<std::fs::File>,
    /// Bytes not read yet.
    left: u64,
    name: String,
    bands: usize,
}

impl TextsReader {
    pub fn open(work: &WorkDir, shard: usize, partition: usize) -> Result<Self, Error> {
        let path = work.texts_file(shard, partition);
        let rows = work.open_keyed(&path, "confirm-texts", 1)?;
        Ok(TextsReader {
            left: rows.rows,
            file: std::io::BufReader::with_capacity(1 << 20, rows.into_file()),
            name: path.display().to_string(),
            bands: work.config().lsh.bands,
        })
    }

    fn bad(&self, what: &str) -> Error {
        Error::Work {
            path: self.name.clone(),
            msg: format!("{what}: run the confirm steps again in an empty work directory"),
        }
    }

    /// The next record, `None` at the end.
    pub fn next_text(&mut self) -> Result<Option<Shipped>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        let fixed = 32 + 8 * self.bands as u64;
        if self.left < fixed {
            return Err(self.bad("ends inside a record"));
        }
        let mut head = vec![0u8; fixed as usize];
        self.file
            .read_exact(&mut head)
            .map_err(|e| Error::io(&self.name, e))?;
        let mut t = Take::new(&head);
        let (row, rank, group, len) = (t.le::<u64>(), t.le::<u64>(), t.le::<u64>(), t.le::<u64>());
        let digests = (0..self.bands).map(|_| t.le::<u64>()).collect();
        if len > self.left - fixed {
            return Err(self.bad("ends inside a record"));
        }
        let group = u32::try_from(group).map_err(|_| self.bad("holds a group out of range"))?;
        let mut text = vec![0u8; len as usize];
        self.file
            .read_exact(&mut text)
            .map_err(|e| Error::io(&self.name, e))?;
        self.left -= fixed + len;
        let text =
            String::from_utf8(text).map_err(|_| self.bad("holds a text that is not UTF-8"))?;
        Ok(Some(Shipped {
            row,
            rank,
            group,
            digests,
            text,
        }))
    }
}
