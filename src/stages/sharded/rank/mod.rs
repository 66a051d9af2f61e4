//! Stage 2, over all shards: each document's place in id order (`rank`), a repeated id refused
//! with both places named, the exact-duplicate pre-pass (`exact_rep`: the rank of the identical
//! document with the smallest id, or `u64::MAX`), and each document's group (`group`, an index
//! into the groups in order of first appearance).
//!
//! Its two forms write the same files: [`job`], one process sorting within a memory budget, and
//! [`tasks`], parallel tasks each within one. What both read and write is here.

pub mod job;
pub mod tasks;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::codec::{put, put_bytes, Fill, Take};
use super::table::{strings, u32s, u64s};
use super::WorkDir;
use crate::error::Error;

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
    /// Id-range buckets the documents were sorted in (1: all in memory at once).
    #[serde(default)]
    pub buckets: usize,
}

/// Of exact-key records `(key, group, rank, document)` sorted, each copy's document and its
/// representative (the rank of the first record of its key and group: its smallest id).
pub(super) fn each_copy(
    rows: &[(u128, u32, u64, u64)],
    mut f: impl FnMut(u64, u64) -> Result<(), Error>,
) -> Result<(), Error> {
    for run in rows.chunk_by(|a, b| a.0 == b.0 && a.1 == b.1) {
        for &(_, _, _, d) in &run[1..] {
            f(d, run[0].2)?;
        }
    }
    Ok(())
}

/// The summary of a finished `rank`.
pub fn summary(work: &WorkDir) -> Result<RankSummary, Error> {
    work.need_json(&work.rank_summary(), "rank")
}

/// The input line of row `row` of shard `s` (for naming a repeated id's places: records do
/// not carry lines).
pub(super) fn line_at(work: &WorkDir, s: usize, row: u64) -> Result<u64, Error> {
    let mut at = 0u64;
    for batch in work.open_table(&work.sign_file(s), "sign", &["line"])? {
        let batch = batch?;
        let line = u64s(&batch, "line");
        if row < at + line.len() as u64 {
            return Ok(line[(row - at) as usize]);
        }
        at += line.len() as u64;
    }
    Err(Error::Work {
        path: work.sign_file(s).display().to_string(),
        msg: format!("row {row} is missing; sign shard {s} again"),
    })
}

/// Reads the sign files' columns `rank` needs, as records.
pub(super) struct Reader<'w> {
    work: &'w WorkDir,
    layout: Layout,
    group_index: HashMap<Option<String>, u32>,
    pub(super) group_names: Vec<Option<String>>,
    pub(super) wordless: u64,
    /// Whether shard `s` was read already (its wordless documents and groups counted).
    seen: Vec<bool>,
}

impl<'w> Reader<'w> {
    pub(super) fn new(work: &'w WorkDir, layout: Layout) -> Self {
        Reader {
            work,
            layout,
            group_index: HashMap::new(),
            group_names: Vec::new(),
            wordless: 0,
            seen: vec![false; work.shards()],
        }
    }

    /// Calls `f` with the record of each document of shard `s` in order, its first document
    /// numbered `first`; returns the shard's rows.
    pub(super) fn shard(
        &mut self,
        s: usize,
        first: u64,
        f: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<u64, Error> {
        let Layout { exact, grouped } = self.layout;
        let mut cols = vec!["id", "words"];
        if exact {
            cols.extend(["exact_lo", "exact_hi"]);
        }
        if grouped {
            cols.push("group");
        }
        let table = self
            .work
            .open_table(&self.work.sign_file(s), "sign", &cols)?;
        let rows = table.rows;
        let counting = !std::mem::replace(&mut self.seen[s], true);
        let mut doc = first;
        let mut rec = Vec::new();
        for batch in table {
            let batch = batch?;
            let id = strings(&batch, "id");
            let words = u32s(&batch, "words");
            let (lo, hi) = if exact {
                (u64s(&batch, "exact_lo"), u64s(&batch, "exact_hi"))
            } else {
                (&[][..], &[][..])
            };
            let g = grouped.then(|| strings(&batch, "group"));
            for i in 0..batch.num_rows() {
                let group = match g {
                    Some(g) => {
                        let name =
                            (!arrow_array::Array::is_null(g, i)).then(|| g.value(i).to_string());
                        let next = self.group_index.len() as u32;
                        *self.group_index.entry(name.clone()).or_insert_with(|| {
                            self.group_names.push(name);
                            next
                        })
                    }
                    None => 0,
                };
                if counting && words[i] == 0 {
                    self.wordless += 1;
                }
                let key = if exact {
                    (hi[i] as u128) << 64 | lo[i] as u128
                } else {
                    0
                };
                let r = Record {
                    doc,
                    key,
                    group,
                    has_words: words[i] > 0,
                    id: id.value(i).as_bytes(),
                };
                self.layout.encode(&r, &mut rec);
                f(&rec)?;
                doc += 1;
            }
        }
        Ok(rows)
    }
}

/// One document as `rank` sorts it.
pub(super) struct Record<'a> {
    pub(super) doc: u64,
    pub(super) key: u128,
    pub(super) group: u32,
    pub(super) has_words: bool,
    pub(super) id: &'a [u8],
}

/// An identical-text key record: the key, the group, the rank and the document (or row),
/// sorted by the first two to find copies.
pub(super) fn key_record(key: u128, group: u32, rank: u64, doc: u64) -> [u8; KEY_BYTES] {
    Fill::new().le(key).le(group).le(rank).le(doc).done()
}

/// Bytes of a [`key_record`].
pub(super) const KEY_BYTES: usize = 36;

/// The fields of a [`key_record`].
pub(super) fn key_fields(k: &[u8]) -> (u128, u32, u64, u64) {
    let mut t = Take::new(k);
    (t.le(), t.le(), t.le(), t.le())
}

/// A rank record: the document (or row of its shard), its rank and its group.
pub(super) fn rank_record(doc: u64, rank: u64, group: u32) -> [u8; RANK_BYTES] {
    Fill::new().le(doc).le(rank).le(group).done()
}

/// Bytes of a [`rank_record`].
pub(super) const RANK_BYTES: usize = 20;

/// The fields of a [`rank_record`].
pub(super) fn rank_fields(o: &[u8]) -> (u64, u64, u32) {
    let mut t = Take::new(o);
    (t.le(), t.le(), t.le())
}

/// A representative record: the document (or row of its shard) and its representative.
pub(super) fn rep_record(doc: u64, rep: u64) -> [u8; REP_BYTES] {
    Fill::new().le(doc).le(rep).done()
}

/// Bytes of a [`rep_record`].
pub(super) const REP_BYTES: usize = 16;

/// The fields of a [`rep_record`].
pub(super) fn rep_fields(o: &[u8]) -> (u64, u64) {
    let mut t = Take::new(o);
    (t.le(), t.le())
}

/// The `u32` length of the id that ends a run record's head: the head is `head` bytes
/// from `at`.
pub(super) fn id_len(buf: &[u8], at: usize, head: usize) -> usize {
    Take::new(&buf[at + head - 4..]).le::<u32>() as usize
}

/// Which fields a run's records carry: the document number, with `exact` its key and whether
/// it has words, with `grouped` its group, then the id's length and bytes.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    pub(super) exact: bool,
    pub(super) grouped: bool,
}

impl Layout {
    /// Bytes of a record before its id.
    pub(super) fn head(self) -> usize {
        8 + if self.exact { 17 } else { 0 } + if self.grouped { 4 } else { 0 } + 4
    }

    pub(super) fn encode(self, r: &Record, out: &mut Vec<u8>) {
        out.clear();
        put(out, r.doc);
        if self.exact {
            put(out, r.key);
            put(out, r.has_words as u8);
        }
        if self.grouped {
            put(out, r.group);
        }
        put_bytes(out, r.id);
    }

    /// The record at the start of `b`.
    pub(super) fn parse(self, b: &[u8]) -> Record<'_> {
        let mut t = Take::new(b);
        let doc = t.le::<u64>();
        let (key, has_words) = match self.exact {
            true => (t.le::<u128>(), t.le::<u8>() != 0),
            false => (0, true),
        };
        let group = if self.grouped { t.le::<u32>() } else { 0 };
        Record {
            doc,
            key,
            group,
            has_words,
            id: t.bytes(),
        }
    }

    /// The records of a buffer, in order.
    pub(super) fn records(self, mut b: &[u8]) -> impl Iterator<Item = Record<'_>> {
        std::iter::from_fn(move || {
            if b.is_empty() {
                return None;
            }
            let r = self.parse(b);
            b = &b[self.head() + r.id.len()..];
            Some(r)
        })
    }
}

/// Remove the task files (`rank/tasks/`), then the directory if that leaves it empty: nothing
/// else in it is neardup's to delete.
pub(super) fn remove_tasks(work: &WorkDir) -> Result<(), Error> {
    super::remove_own_files(&work.root().join("rank").join("tasks"), is_task_name)
}

/// Whether `name` is the name of a task file.
fn is_task_name(name: &str) -> bool {
    if name == "plan.json" {
        return true;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    match (stem.split_once('-'), ext) {
        (Some(("split", rest)), "run") => rest
            .split_once('-')
            .is_some_and(|(a, b)| digits(a) && digits(b)),
        (Some(("split" | "sort" | "exact", n)), "json") => digits(n),
        (Some(("sort", n)), "ranks" | "keys") | (Some(("exact", n)), "reps") => digits(n),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_follow_each_other_in_every_layout() {
        for (exact, grouped) in [(false, false), (true, false), (false, true), (true, true)] {
            let layout = Layout { exact, grouped };
            let mut buf = Vec::new();
            let mut rec = Vec::new();
            for (i, id) in ["", "a", "ü-long-id"].iter().enumerate() {
                let r = Record {
                    doc: i as u64 + (1 << 40),
                    key: u128::MAX - i as u128,
                    group: i as u32 + 7,
                    has_words: i % 2 == 0,
                    id: id.as_bytes(),
                };
                layout.encode(&r, &mut rec);
                assert_eq!(rec.len(), layout.head() + id.len());
                buf.extend_from_slice(&rec);
            }
            let got: Vec<_> = layout
                .records(&buf)
                .map(|r| (r.doc, r.key, r.group, r.has_words, r.id.to_vec()))
                .collect();
            assert_eq!(got.len(), 3);
            assert_eq!(got[2].0, 2 + (1 << 40));
            assert_eq!(got[2].4, "ü-long-id".as_bytes());
            assert_eq!(got[1].1, if exact { u128::MAX - 1 } else { 0 });
            assert_eq!(got[1].2, if grouped { 8 } else { 0 });
            assert_eq!((got[0].3, got[1].3), (true, !exact));
        }
    }

    #[test]
    fn only_task_files_are_task_names() {
        for n in [
            "plan.json",
            "split-00001.json",
            "split-00001-00000.run",
            "sort-00002.json",
            "sort-00002.ranks",
            "sort-00002.keys",
            "exact-00003.reps",
            "exact-00003.json",
        ] {
            assert!(is_task_name(n), "{n}");
        }
        for n in [
            "mine.json",
            "split-1.json",
            "split-00001.run",
            "sort-00002.reps",
            ".sort-00002.keys.x.partial",
            "notes",
        ] {
            assert!(!is_task_name(n), "{n}");
        }
    }
}
