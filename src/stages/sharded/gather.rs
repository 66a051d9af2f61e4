//! A few documents of a shard, computed again from their text ([`Docs`]: a confirm group's,
//! which the greedy rule's first round reads too): their signatures and, for
//! `--confirm jaccard` and the report's S-curve, their shingle sets. `sign` keeps only the
//! band digests (a quarter of a signature's bytes) and `confirm` needs full signatures for
//! just the documents that share a bucket, so it signs those again on the CPU engine, which
//! gives the same bits as whichever engine signed the shard.
//!
//! Of a plain JSONL shard only those lines are read (`sign/S.lines` says where each starts); of
//! any other, one pass over the shard parses only them.

use std::time::Instant;

use rayon::prelude::*;

use super::codec::fields;
use super::raw::RawRows;
use super::ship::{self, TextsReader, TextsSummary, TextsWriter};
use super::spill::Spill;
use super::table::{u32s, u64s};
use super::WorkDir;
use crate::engine::{CpuEngine, Engine};
use crate::error::Error;
use crate::index::lsh::band_digest;
use crate::io::Chunk;
use crate::pipeline::pipelined;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{Confirm, ShingleSets};

/// The gathered documents of a group: each one's local number is its place among them, shard
/// by shard, rows ascending.
pub(super) struct Docs {
    pub needed: Vec<Vec<u64>>,
    /// Shard `s`'s first local number.
    base: Vec<u32>,
    pub rank: Vec<u64>,
    pub groups: Vec<u32>,
    pub sigs: Vec<u32>,
    pub sets: ShingleSets,
    pub seconds: f64,
}

impl Docs {
    /// The local number of shard `shard`'s row `row`, if gathered.
    pub fn local_at(&self, shard: usize, row: u64) -> Option<u32> {
        let i = self.needed[shard].binary_search(&row).ok()?;
        Some(self.base[shard] + i as u32)
    }

    /// The shard and row of local number `l`.
    pub fn at(&self, l: u32) -> (usize, u64) {
        let s = self.base.partition_point(|&b| b <= l) - 1;
        (s, self.needed[s][(l - self.base[s]) as usize])
    }

    /// The ranks (and groups) of the documents `needed`, their signatures and (for `jaccard`)
    /// shingle sets. `parts`: the partitions whose buckets need exactly these documents, when
    /// their texts may have been shipped (`ship.rs`); a shard whose texts were is not read.
    pub fn gather(
        work: &WorkDir,
        needed: Vec<Vec<u64>>,
        parts: &[usize],
        progress: &ProgressFactory,
    ) -> Result<Docs, Error> {
        Docs::gather_into(work, needed, parts, None, progress)
    }

    /// [`Docs::gather`], with the signatures and sets written to `spill` a slice at a time
    /// when there is one, not held (`sigs` and `sets` are left empty).
    pub fn gather_into(
        work: &WorkDir,
        needed: Vec<Vec<u64>>,
        parts: &[usize],
        mut spill: Option<&mut Spill>,
        progress: &ProgressFactory,
    ) -> Result<Docs, Error> {
        let t0 = Instant::now();
        let mut base = vec![0u32; work.shards() + 1];
        for (s, v) in needed.iter().enumerate() {
            base[s + 1] = base[s] + v.len() as u32;
        }
        let total = base[work.shards()] as usize;
        let num_perm = work.config().params.num_perm;
        let grouped = work.fields().group.is_some();
        let mut docs = Docs {
            base,
            rank: Vec::with_capacity(total),
            groups: Vec::new(),
            sigs: Vec::with_capacity(if spill.is_some() { 0 } else { total * num_perm }),
            sets: ShingleSets::new(),
            seconds: 0.0,
            needed: Vec::new(),
        };
        let step = progress.step("confirm, gathering documents");
        let mut gather = Gatherer::new(work, work.config().confirm == Confirm::Jaccard)?;
        for (s, rows) in needed.iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            step.set_message(format!("shard {s}"));
            // Shipped documents bring their ranks; others' are read from the shard's file.
            let shipped = !parts.is_empty() && ship::texts_done(work, s)?;
            if !shipped {
                let (rank, groups) = ranks_of(work, s, rows)?;
                docs.rank.extend(rank);
                docs.groups.extend(groups);
            }
            // Signatures straight into the reserved table, not copied from a shard's.
            let mut got = Gathered {
                sigs: std::mem::take(&mut docs.sigs),
                sets: Vec::new(),
            };
            let mut taken = |got: &mut Gathered| match spill.as_deref_mut() {
                Some(spill) => spill.write(&mut got.sigs, &mut got.sets),
                None => Ok(()),
            };
            let r = if shipped {
                let ranks = (&mut docs.rank, grouped.then_some(&mut docs.groups));
                gather.shipped_into(work, s, rows, parts, &mut got, &mut taken, ranks)
            } else {
                gather.shard_into(work, s, rows, progress, &mut got, &mut taken)
            };
            // Emptied slice by slice into a spill, the vector's room is not kept.
            docs.sigs = if spill.is_some() {
                Vec::new()
            } else {
                got.sigs
            };
            r?;
            for (at, set) in got.sets.into_iter().enumerate() {
                docs.sets.insert(docs.base[s] + at as u32, set);
            }
        }
        let signed = match &spill {
            Some(spill) => spill.docs(),
            None => docs.sigs.len() / num_perm,
        };
        if docs.rank.len() != total || signed != total {
            return Err(work.refuse(format!(
                "the buckets need {total} documents, and {} ranks and {signed} signatures \
                 were found: run the stages again in an empty work directory",
                docs.rank.len(),
            )));
        }
        docs.needed = needed;
        docs.seconds = t0.elapsed().as_secs_f64();
        Ok(docs)
    }
}

/// Gathered documents, in the order asked for.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    /// `num_perm` u32 a document.
    pub sigs: Vec<u32>,
    /// Empty unless asked for.
    pub sets: Vec<Vec<u64>>,
}

/// What is gathered of each document.
pub(super) struct Gatherer {
    engine: CpuEngine,
    sets: bool,
}

impl Gatherer {
    /// Signatures, and shingle sets when `sets`, on the global thread pool.
    pub fn new(work: &WorkDir, sets: bool) -> Result<Self, Error> {
        Ok(Gatherer {
            engine: CpuEngine::new(work.config().params, 0)?,
            sets,
        })
    }

    /// Shard `shard`'s rows `rows` (ascending).
    pub fn shard(
        &mut self,
        work: &WorkDir,
        shard: usize,
        rows: &[u64],
        progress: &ProgressFactory,
    ) -> Result<Gathered, Error> {
        let mut out = Gathered::default();
        self.shard_into(work, shard, rows, progress, &mut out, &mut |_| Ok(()))?;
        Ok(out)
    }

    /// [`Gatherer::shard`], appended to `out` (whose signatures may have room reserved for
    /// them: they are written in place, not copied). After each slice of documents, once
    /// their digests are checked, `taken(out)` is called: it may take them out.
    pub fn shard_into(
        &mut self,
        work: &WorkDir,
        shard: usize,
        rows: &[u64],
        progress: &ProgressFactory,
        out: &mut Gathered,
        taken: Taken,
    ) -> Result<(), Error> {
        let mut checked = Checked::new(work, shard, out);
        visit(work, shard, rows, progress, |chunk, at, name| {
            self.add(work, chunk, at, name, out)?;
            checked.slice(work, rows, out, taken)
        })
    }

    /// [`Gatherer::shard_into`] from the texts `confirm-texts` shipped to the partitions
    /// `parts` (`ship.rs`), which must hold exactly the rows `rows` between them.
    #[allow(clippy::too_many_arguments)]
    pub fn shipped_into(
        &mut self,
        work: &WorkDir,
        shard: usize,
        rows: &[u64],
        parts: &[usize],
        out: &mut Gathered,
        taken: Taken,
        (ranks, mut groups): (&mut Vec<u64>, Option<&mut Vec<u32>>),
    ) -> Result<(), Error> {
        let mut checked = Checked::new(work, shard, out);
        // The digests `sign` recorded of the documents not checked yet, as shipped.
        let mut digests: Vec<u64> = Vec::new();
        let mut readers = parts
            .iter()
            .map(|&p| TextsReader::open(work, shard, p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut heads = readers
            .iter_mut()
            .map(|r| r.next_text())
            .collect::<Result<Vec<_>, _>>()?;
        let mut texts: Vec<String> = Vec::new();
        let (mut bytes, mut at) = (0u64, 0usize);
        let wrong = |what: String| Error::Work {
            path: work.texts_summary(shard).display().to_string(),
            msg: format!(
                "{what}: the shipped texts are not those the buckets need; run the confirm \
                 steps again in an empty work directory"
            ),
        };
        // The partitions' records merged by row: a document two of them need is taken once.
        while let Some(row) = heads.iter().flatten().map(|h| h.row).min() {
            let mut doc = None;
            for (h, r) in heads.iter_mut().zip(&mut readers) {
                if h.as_ref().is_some_and(|h| h.row == row) {
                    doc = h.take();
                    *h = r.next_text()?;
                }
            }
            if rows.get(at) != Some(&row) {
                return Err(wrong(format!(
                    "shard {shard}'s row {row} is not needed here"
                )));
            }
            at += 1;
            let doc = doc.expect("a record of this row");
            ranks.push(doc.rank);
            if let Some(g) = groups.as_deref_mut() {
                g.push(doc.group);
            }
            digests.extend_from_slice(&doc.digests);
            bytes += doc.text.len() as u64;
            texts.push(doc.text);
            if bytes >= SLICE_BYTES {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                self.add_texts(work, &refs, out)?;
                checked.slice_against(work, rows, &digests, out, taken)?;
                texts.clear();
                digests.clear();
                bytes = 0;
            }
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.add_texts(work, &refs, out)?;
        checked.slice_against(work, rows, &digests, out, taken)?;
        if at != rows.len() {
            return Err(wrong(format!(
                "{at} of shard {shard}'s {} needed documents were shipped",
                rows.len()
            )));
        }
        Ok(())
    }

    /// Records `at` of `chunk`, appended to `out`.
    fn add(
        &mut self,
        work: &WorkDir,
        chunk: &Chunk,
        at: &[usize],
        name: &str,
        out: &mut Gathered,
    ) -> Result<(), Error> {
        let fields = work.fields();
        let texts: Vec<std::borrow::Cow<str>> = self.engine.install(|| {
            at.par_iter()
                .map(|&i| Ok(crate::corpus::record(chunk, i, fields, name)?.text))
                .collect::<Result<_, Error>>()
        })?;
        let refs: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
        self.add_texts(work, &refs, out)
    }

    /// The documents of `texts`, appended to `out`.
    fn add_texts(
        &mut self,
        work: &WorkDir,
        texts: &[&str],
        out: &mut Gathered,
    ) -> Result<(), Error> {
        if texts.is_empty() {
            return Ok(());
        }
        let np = work.config().params.num_perm;
        let start = out.sigs.len();
        out.sigs.resize(start + texts.len() * np, 0);
        if self.sets {
            self.engine
                .sign_texts_and_sets(texts, &mut out.sigs[start..], &mut out.sets)?;
        } else {
            self.engine.sign_texts(texts, &mut out.sigs[start..])?;
        }
        Ok(())
    }
}

/// What a gathering calls after each slice of documents it adds to its [`Gathered`].
pub(super) type Taken<'a> = &'a mut dyn FnMut(&mut Gathered) -> Result<(), Error>;

/// How far a gathering of one shard's rows has checked its signatures against the digests
/// `sign` recorded, a slice at a time.
struct Checked {
    shard: usize,
    /// The shard's name, for errors.
    name: String,
    /// Rows checked so far.
    rows: usize,
    /// The first document of the [`Gathered`] not checked yet.
    from: usize,
}

impl Checked {
    fn new(work: &WorkDir, shard: usize, out: &Gathered) -> Self {
        Checked {
            shard,
            name: work.manifest.shards[shard].path.clone(),
            rows: 0,
            from: out.sigs.len() / work.config().params.num_perm,
        }
    }

    /// Check the documents added to `out` since the last slice (the next of `rows`) against
    /// the digests `sign` recorded, then hand `out` to `taken`.
    fn slice(
        &mut self,
        work: &WorkDir,
        rows: &[u64],
        out: &mut Gathered,
        taken: Taken,
    ) -> Result<(), Error> {
        self.check(work, rows, None, out, taken)
    }

    /// [`Checked::slice`] against `digests`, those of the slice's documents as shipped.
    fn slice_against(
        &mut self,
        work: &WorkDir,
        rows: &[u64],
        digests: &[u64],
        out: &mut Gathered,
        taken: Taken,
    ) -> Result<(), Error> {
        self.check(work, rows, Some(digests), out, taken)
    }

    fn check(
        &mut self,
        work: &WorkDir,
        rows: &[u64],
        digests: Option<&[u64]>,
        out: &mut Gathered,
        taken: Taken,
    ) -> Result<(), Error> {
        let np = work.config().params.num_perm;
        let n = out.sigs.len() / np - self.from;
        if n == 0 {
            return Ok(());
        }
        let at = &rows[self.rows..self.rows + n];
        let sigs = &out.sigs[self.from * np..];
        let read;
        let recorded = match digests {
            Some(d) => d,
            None => {
                let mut file = RawRows::digests(work, self.shard, None)?;
                read = fields::<u64>(file.read_at(at)?).collect::<Vec<u64>>();
                &read
            }
        };
        compare_digests(work, self.shard, at, sigs, recorded, &self.name)?;
        self.rows += n;
        taken(out)?;
        self.from = out.sigs.len() / np;
        Ok(())
    }
}

/// Shard `shard`'s records at rows `rows` (ascending), handed to `f` a chunk at a time with
/// the places in it of the wanted ones, in row order, and the shard's name. Of a plain JSONL
/// shard only those lines are read; of any other, the whole shard once.
fn visit(
    work: &WorkDir,
    shard: usize,
    rows: &[u64],
    progress: &ProgressFactory,
    mut f: impl FnMut(&Chunk, &[usize], &str) -> Result<(), Error>,
) -> Result<(), Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let fields = work.fields();
    let inputs = work.inputs(&[shard])?;
    let name = inputs.name(0).to_string();
    if let Some(spans) = spans_of(work, shard, rows)? {
        // A slice of lines at a time: all of them at once would hold every gathered
        // document's text beside the sets and signatures made of it.
        for slice in slices(&spans, SLICE_BYTES) {
            let chunk = inputs.read_spans(0, &spans[slice])?;
            let all: Vec<usize> = (0..chunk.len()).collect();
            f(&chunk, &all, &name)?;
        }
        return Ok(());
    }
    let mut wanted = vec![false; rows.last().map_or(0, |&r| r as usize + 1)];
    for &r in rows {
        wanted[r as usize] = true;
    }
    let bar = progress.pass(&format!("gathering, shard {shard}"), inputs.total_bytes());
    let (mut next, mut got) = (0usize, 0usize);
    pipelined(
        &inputs,
        crate::io::ReadPlan::needed(fields),
        crate::corpus::DEFAULT_CHUNK_BYTES,
        &bar,
        |chunk, _| Ok(chunk),
        |chunk: Chunk| {
            // Chunks come in input order: a running count gives each line its row.
            let at: Vec<usize> = (0..chunk.len())
                .filter(|&i| wanted.get(next + i).copied().unwrap_or(false))
                .collect();
            next += chunk.len();
            got += at.len();
            if at.is_empty() {
                return Ok(());
            }
            f(&chunk, &at, &name)
        },
    )?;
    if got != rows.len() {
        return Err(Error::Work {
            path: name,
            msg: format!(
                "holds {got} of the {} documents the work directory needs from it: it \
                 changed since `sign`; start again in an empty work directory",
                rows.len()
            ),
        });
    }
    Ok(())
}

/// The ranks of shard `shard`'s rows `rows` (ascending), and their groups when the run has
/// groups (else none).
fn ranks_of(work: &WorkDir, shard: usize, rows: &[u64]) -> Result<(Vec<u64>, Vec<u32>), Error> {
    let grouped = work.fields().group.is_some();
    let mut cols = vec!["rank"];
    if grouped {
        cols.push("group");
    }
    let (mut ranks, mut groups) = (Vec::with_capacity(rows.len()), Vec::new());
    for batch in work.open_rows(&work.rank_file(shard), "rank", &cols, Some(rows))? {
        let batch = batch?;
        ranks.extend_from_slice(u64s(&batch, "rank"));
        if grouped {
            groups.extend_from_slice(u32s(&batch, "group"));
        }
    }
    Ok((ranks, groups))
}

/// Ship shard `shard`'s documents to the partitions that need them (`ship.rs`), reading the
/// shard once. Returns `None` when they were shipped already.
pub fn ship_texts(
    work: &WorkDir,
    shard: usize,
    progress: &ProgressFactory,
) -> Result<Option<TextsSummary>, Error> {
    let t0 = Instant::now();
    work.check_shard(shard)?;
    let _lock = work.lock(&format!("texts-{shard:05}"))?;
    work.remove_partials("ship", &format!("texts-{shard:05}"))?;
    if ship::texts_done(work, shard)? {
        return Ok(None);
    }
    let parts = work.partitions();
    crate::sys::check_partition_files(parts, parts)?;
    // Each needed row with the partitions that need it, by row.
    let mut wants: Vec<(u64, u32)> = Vec::new();
    for p in 0..parts {
        wants.extend(
            ship::read_needs(work, p, shard)?
                .into_iter()
                .map(|r| (r, p as u32)),
        );
    }
    wants.sort_unstable();
    let mut rows: Vec<u64> = wants.iter().map(|w| w.0).collect();
    rows.dedup();
    // What each partition would otherwise read from this shard's rank and digest files,
    // which are then read (and their seals checked) once, here.
    let (ranks, groups) = ranks_of(work, shard, &rows)?;
    let bands = work.config().lsh.bands;
    let digests: Vec<u64> = if rows.is_empty() {
        Vec::new()
    } else {
        fields::<u64>(RawRows::digests(work, shard, None)?.read_at(&rows)?).collect()
    };
    let mut outs: Vec<TextsWriter> = (0..parts)
        .map(|p| TextsWriter::create(work, shard, p))
        .collect::<Result<_, _>>()?;
    let fields = work.fields();
    let (mut at, mut written, mut bytes) = (0usize, 0u64, 0u64);
    let mut doc = 0usize;
    visit(work, shard, &rows, progress, |chunk, places, name| {
        for &i in places {
            let text = crate::corpus::record(chunk, i, fields, name)?.text;
            let row = wants[at].0;
            let (rank, group) = (ranks[doc], groups.get(doc).copied().unwrap_or(0));
            let digest = &digests[doc * bands..(doc + 1) * bands];
            doc += 1;
            while at < wants.len() && wants[at].0 == row {
                outs[wants[at].1 as usize].push(row, rank, group, digest, &text)?;
                written += 1;
                bytes += text.len() as u64;
                at += 1;
            }
        }
        Ok(())
    })?;
    for o in outs {
        o.finish()?;
    }
    let summary = TextsSummary {
        documents: rows.len() as u64,
        written,
        bytes,
        seconds: t0.elapsed().as_secs_f64(),
    };
    work.write_json(&work.texts_summary(shard), &summary)?;
    Ok(Some(summary))
}

/// Refuse gathered signatures `sigs` (of shard `shard`'s rows `rows`) whose band digests are
/// not the ones `sign` recorded: the shard's text changed since `sign` read it (an edit its
/// fingerprint does not cover), and a result from it would be neither the old run's nor the
/// new text's.
fn compare_digests(
    work: &WorkDir,
    shard: usize,
    rows: &[u64],
    sigs: &[u32],
    recorded: &[u64],
    name: &str,
) -> Result<(), Error> {
    let lsh = work.config().lsh;
    let np = work.config().params.num_perm;
    debug_assert_eq!(recorded.len(), rows.len() * lsh.bands);
    for ((row, sig), dig) in rows
        .iter()
        .zip(sigs.chunks_exact(np))
        .zip(recorded.chunks_exact(lsh.bands))
    {
        let same = (0..lsh.bands)
            .all(|j| band_digest(&sig[j * lsh.rows..(j + 1) * lsh.rows], j) == dig[j]);
        if !same {
            return Err(Error::Work {
                path: name.to_string(),
                msg: format!(
                    "shard {shard} changed since `sign` read it: its document {} (counting \
                     from 1) now signs differently; start again in an empty work directory",
                    row + 1
                ),
            });
        }
    }
    Ok(())
}

/// Text bytes of the lines [`Gatherer::shard`] reads and signs at once.
const SLICE_BYTES: u64 = 16 << 20;

/// Where a line lies in its shard: `(start, end, line)`.
type Span = (u64, u64, u64);

/// Consecutive ranges of `spans` (`(start, end, line)`) of about `max` bytes each: a range
/// ends with the span that takes it to `max` or past it, so each holds at least one span.
fn slices(spans: &[Span], max: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &(s, e, _)) in spans.iter().enumerate() {
        bytes += e - s;
        if bytes >= max {
            out.push(start..i + 1);
            (start, bytes) = (i + 1, 0);
        }
    }
    if start < spans.len() {
        out.push(start..spans.len());
    }
    out
}

/// Of a plain JSONL shard, where its rows `rows` lie: `(start, end, line)`, in that order;
/// `None` for any other shard.
fn spans_of(work: &WorkDir, shard: usize, rows: &[u64]) -> Result<Option<Vec<Span>>, Error> {
    let Some(mut lines) = RawRows::lines(work, shard)? else {
        return Ok(None);
    };
    // Each line's span: from its start to the next document's (or the end of the shard).
    let next: Vec<u64> = rows
        .iter()
        .map(|&r| r + 1)
        .filter(|&r| r < lines.rows)
        .collect();
    let ends: Vec<u64> = fields::<u64>(lines.read_at(&next)?).step_by(2).collect();
    let shard_bytes = work.manifest.shards[shard].bytes;
    let at: Vec<u64> = fields::<u64>(lines.read_at(rows)?).collect();
    let spans: Vec<(u64, u64, u64)> = at
        .chunks_exact(2)
        .enumerate()
        .map(|(i, x)| (x[0], ends.get(i).copied().unwrap_or(shard_bytes), x[1]))
        .collect();
    if spans.iter().any(|&(s, e, _)| s >= e || e > shard_bytes) {
        return Err(Error::Work {
            path: work.lines_file(shard).display().to_string(),
            msg: "holds a line outside its shard: run `neardup stage sign` again in an empty \
                  work directory"
                .into(),
        });
    }
    Ok(Some(spans))
}

#[cfg(test)]
mod tests {
    use super::slices;

    #[test]
    fn slices_cover_every_span_once_and_stay_near_the_budget() {
        let spans = |lens: &[u64]| -> Vec<(u64, u64, u64)> {
            let mut at = 0;
            lens.iter()
                .enumerate()
                .map(|(i, &l)| {
                    at += l;
                    (at - l, at, i as u64 + 1)
                })
                .collect()
        };
        assert!(slices(&[], 10).is_empty());
        assert_eq!(slices(&spans(&[3]), 10), vec![0..1]);
        assert_eq!(slices(&spans(&[25]), 10), vec![0..1]);
        assert_eq!(slices(&spans(&[5, 5, 5]), 10), [0..2, 2..3]);
        assert_eq!(slices(&spans(&[9, 1, 1, 30, 2]), 10), [0..2, 2..4, 4..5]);
        for max in [1u64, 2, 7, 64, 1 << 20] {
            let lens: Vec<u64> = (0..200).map(|i| (i * 37 % 23) + 1).collect();
            let got = slices(&spans(&lens), max);
            let flat: Vec<usize> = got.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(flat, (0..lens.len()).collect::<Vec<_>>(), "max {max}");
            for r in &got[..got.len() - 1] {
                let b: u64 = lens[r.clone()].iter().sum();
                let before_last: u64 = lens[r.start..r.end - 1].iter().sum();
                assert!(b >= max && before_last < max, "max {max}: {r:?}");
            }
        }
    }
}
