//! Gathered documents kept on disk in blocks: a confirm partition whose buckets need more
//! documents than a job holds (`blocks.rs`) writes each one's signature and shingle set here as
//! it is gathered, in local order, and reads them back a block at a time.
//!
//! The file is private to the job that writes it: a temporary file in the stage's folder
//! (`pairs/` for `confirm`, `greedy/` for a greedy round), named as a partial of the job's
//! unit, so that the next run of the unit removes what a killed one left, and removed when the
//! job drops it.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;

use super::codec::{as_fields, fields};
use super::WorkDir;
use crate::error::Error;
use crate::stages::dedup::ShingleSets;

/// Documents in a row of the file, by local number, and where they lie in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    pub docs: Range<u32>,
    bytes: Range<u64>,
}

impl Block {
    /// Which of `blocks` (in order, as [`Spill::finish`] gives them) holds local number `l`.
    pub fn of(blocks: &[Block], l: u32) -> usize {
        blocks.partition_point(|b| b.docs.end <= l)
    }
}

/// A block read back: row `i` of `sigs` and entry `i` of `sets` are its `i`-th document's.
#[derive(Debug, Default)]
pub(super) struct BlockDocs {
    pub sigs: Vec<u32>,
    /// Empty when the spill holds no sets.
    pub sets: Vec<Vec<u64>>,
}

/// A spill being written, then read.
pub(super) struct Spill {
    file: tempfile::NamedTempFile,
    out: Option<BufWriter<File>>,
    num_perm: usize,
    /// Whether sets are kept (`--confirm jaccard`).
    sets: bool,
    /// A block closes once it holds this many bytes (or more: a document is never split).
    block_bytes: u64,
    blocks: Vec<Block>,
    /// Where the open block starts.
    open: (u32, u64),
    docs: u32,
    bytes: u64,
}

impl Spill {
    /// An empty spill in blocks of about `block_bytes`, in stage `stage`'s folder, a partial
    /// of the unit whose files start `unit` (`0007` for partition 7's `confirm`).
    pub fn create(
        work: &WorkDir,
        stage: &str,
        unit: &str,
        sets: bool,
        block_bytes: u64,
    ) -> Result<Self, Error> {
        let dir = work.root().join(stage);
        let np = work.config().params.num_perm;
        Spill::in_dir(&dir, unit, np, sets, block_bytes)
    }

    /// [`Spill::create`] in directory `dir`, for signatures of `num_perm` values.
    fn in_dir(
        dir: &std::path::Path,
        unit: &str,
        num_perm: usize,
        sets: bool,
        block_bytes: u64,
    ) -> Result<Self, Error> {
        let name = dir.display().to_string();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(&name, e))?;
        let file = tempfile::Builder::new()
            .prefix(&format!(".{unit}.spill."))
            .suffix(".partial")
            .tempfile_in(dir)
            .map_err(|e| Error::io(&name, e))?;
        let out = file.reopen().map_err(|e| Error::io(&name, e))?;
        Ok(Spill {
            file,
            out: Some(BufWriter::with_capacity(1 << 20, out)),
            num_perm,
            sets,
            block_bytes: block_bytes.max(1),
            blocks: Vec::new(),
            open: (0, 0),
            docs: 0,
            bytes: 0,
        })
    }

    fn err(&self, e: std::io::Error) -> Error {
        Error::io(&self.file.path().display().to_string(), e)
    }

    /// Documents written.
    pub fn docs(&self) -> usize {
        self.docs as usize
    }

    /// Append the documents of `sigs` (`num_perm` values each) and `sets` (one each, when
    /// kept), and empty both.
    pub fn write(&mut self, sigs: &mut Vec<u32>, sets: &mut Vec<Vec<u64>>) -> Result<(), Error> {
        let np = self.num_perm;
        let n = sigs.len() / np;
        assert!(!self.sets || sets.len() == n, "a set for each signature");
        for i in 0..n {
            let sig = &sigs[i * np..(i + 1) * np];
            let set = if self.sets { Some(&sets[i]) } else { None };
            self.put(sig, set).map_err(|e| self.err(e))?;
            if self.bytes - self.open.1 >= self.block_bytes {
                self.close_block();
            }
        }
        sigs.clear();
        sets.clear();
        Ok(())
    }

    /// Append one document.
    fn put(&mut self, sig: &[u32], set: Option<&Vec<u64>>) -> std::io::Result<()> {
        let out = self.out.as_mut().expect("a spill being written");
        out.write_all(&as_fields(sig))?;
        self.bytes += 4 * sig.len() as u64;
        if let Some(set) = set {
            out.write_all(&as_fields(&[set.len() as u32]))?;
            out.write_all(&as_fields(set))?;
            self.bytes += 4 + 8 * set.len() as u64;
        }
        self.docs += 1;
        Ok(())
    }

    /// End the open block here (unless it is empty).
    fn close_block(&mut self) {
        if self.docs > self.open.0 {
            self.blocks.push(Block {
                docs: self.open.0..self.docs,
                bytes: self.open.1..self.bytes,
            });
            self.open = (self.docs, self.bytes);
        }
    }

    /// Close the last block and make the file ready to read (flushed, not synced: it is
    /// read back by this job alone, and gone with it). Returns the blocks.
    pub fn finish(&mut self) -> Result<&[Block], Error> {
        self.close_block();
        if let Some(out) = self.out.take() {
            out.into_inner()
                .map_err(|e| e.into_error())
                .map_err(|e| self.err(e))?;
        }
        Ok(&self.blocks)
    }

    /// The documents of block `b` (after [`Spill::finish`]).
    pub fn read(&self, b: usize) -> Result<BlockDocs, Error> {
        let mut got = BlockDocs::default();
        self.read_block(b, true, &mut got)?;
        Ok(got)
    }

    /// The signatures alone of block `b`'s documents (`sets` left empty).
    pub fn read_sigs(&self, b: usize) -> Result<BlockDocs, Error> {
        let mut got = BlockDocs::default();
        self.read_block(b, false, &mut got)?;
        Ok(got)
    }

    /// Block `b`'s documents appended to `got`: its signatures after those there, so that a
    /// block read beside another is not held twice.
    pub fn read_into(&self, b: usize, got: &mut BlockDocs) -> Result<(), Error> {
        self.read_block(b, true, got)
    }

    fn read_block(&self, b: usize, keep_sets: bool, got: &mut BlockDocs) -> Result<(), Error> {
        let block = &self.blocks[b];
        let np = self.num_perm;
        let n = (block.docs.end - block.docs.start) as usize;
        let mut f = self.file.reopen().map_err(|e| self.err(e))?;
        f.seek(SeekFrom::Start(block.bytes.start))
            .map_err(|e| self.err(e))?;
        let mut f = BufReader::with_capacity(1 << 20, f.take(block.bytes.end - block.bytes.start));
        got.sigs.reserve_exact(n * np);
        if self.sets && keep_sets {
            got.sets.reserve_exact(n);
        }
        let mut buf = Vec::new();
        let read = |f: &mut BufReader<_>, len: usize, buf: &mut Vec<u8>| {
            buf.resize(len, 0);
            f.read_exact(buf).map_err(|e| self.err(e))
        };
        for _ in 0..n {
            read(&mut f, np * 4, &mut buf)?;
            got.sigs.extend(fields::<u32>(&buf));
            if self.sets {
                read(&mut f, 4, &mut buf)?;
                let len = fields::<u32>(&buf).next().expect("a length") as usize;
                read(&mut f, len * 8, &mut buf)?;
                if keep_sets {
                    got.sets.push(fields::<u64>(&buf).collect());
                }
            }
        }
        Ok(())
    }
}

impl BlockDocs {
    /// Move the sets into `sets`, the `i`-th under `first + i`.
    pub fn sets_into(&mut self, sets: &mut ShingleSets, first: u32) {
        for (i, s) in self.sets.drain(..).enumerate() {
            sets.insert(first + i as u32, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every document comes back from its block as written, the blocks cover the documents in
    /// order, and each but the last closes with the document that takes it to the budget.
    #[test]
    fn blocks_give_back_what_was_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let np = 4;
        let mut rng = crate::hash::Pcg32::new(3);
        let docs: Vec<(Vec<u32>, Vec<u64>)> = (0..50u32)
            .map(|d| {
                let sig = (0..np as u32).map(|j| d * 10 + j).collect();
                let set = (0..rng.below(6) as u64)
                    .map(|x| x * 1000 + d as u64)
                    .collect();
                (sig, set)
            })
            .collect();
        let size = |d: &(Vec<u32>, Vec<u64>), sets: bool| {
            (4 * np + if sets { 4 + 8 * d.1.len() } else { 0 }) as u64
        };
        for sets in [true, false] {
            let one = size(&docs[0], sets);
            for budget in [0u64, 1, one - 1, one, one + 1, 100, 255, 256, 257, u64::MAX] {
                for n in [0usize, 1, 2, 17, 50] {
                    let mut spill = Spill::in_dir(dir.path(), "0003", np, sets, budget).unwrap();
                    // Written in slices of 7, as a gathering hands them over.
                    for slice in docs[..n].chunks(7) {
                        let (mut got_sigs, mut got_sets) = (Vec::new(), Vec::new());
                        for (sig, set) in slice {
                            got_sigs.extend_from_slice(sig);
                            if sets {
                                got_sets.push(set.clone());
                            }
                        }
                        spill.write(&mut got_sigs, &mut got_sets).unwrap();
                        assert!(got_sigs.is_empty() && got_sets.is_empty());
                    }
                    assert_eq!(spill.docs(), n);
                    // Named as a partial of partition 3's unit: a killed run's is removed by
                    // the next run of the unit (`WorkDir::remove_partials`).
                    let names: Vec<String> = std::fs::read_dir(dir.path())
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect();
                    assert!(
                        names.len() == 1
                            && names[0].starts_with(".0003.")
                            && names[0].ends_with(".partial"),
                        "{names:?}"
                    );
                    let blocks = spill.finish().unwrap().to_vec();
                    let mut next = 0u32;
                    for (b, block) in blocks.iter().enumerate() {
                        assert_eq!(block.docs.start, next, "{budget} {n}");
                        assert!(block.docs.end > block.docs.start);
                        next = block.docs.end;
                        let held = &docs[block.docs.start as usize..block.docs.end as usize];
                        let bytes: u64 = held.iter().map(|d| size(d, sets)).sum();
                        let last = size(held.last().unwrap(), sets);
                        if b + 1 < blocks.len() {
                            assert!(bytes >= budget.max(1) && bytes - last < budget.max(1));
                        }
                        let back = spill.read(b).unwrap();
                        let sigs: Vec<u32> = held.iter().flat_map(|d| d.0.clone()).collect();
                        assert_eq!(back.sigs, sigs);
                        let want: Vec<Vec<u64>> = if sets {
                            held.iter().map(|d| d.1.clone()).collect()
                        } else {
                            Vec::new()
                        };
                        assert_eq!(back.sets, want);
                        let back = spill.read_sigs(b).unwrap();
                        assert_eq!(back.sigs, sigs);
                        assert!(back.sets.is_empty());
                        // Appended after what is there.
                        let mut two = spill.read(b).unwrap();
                        two.sets.clear();
                        spill.read_into(b, &mut two).unwrap();
                        assert_eq!(two.sigs, [sigs.clone(), sigs].concat());
                        assert_eq!(two.sets, want);
                    }
                    assert_eq!(next as usize, n, "{budget} {n}");
                }
            }
        }
        // Nothing is left behind once the spills are dropped.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
