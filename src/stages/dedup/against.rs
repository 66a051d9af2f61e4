//! `dedup --against INDEX`: new documents checked against indexes of documents already kept
//! ([`crate::index::store`]). A new document with a confirmed near duplicate in an index is
//! dropped (or, with `--tag-only`, tagged with that document's id); the new documents are
//! deduplicated among themselves as always; `--update-index` adds the survivors to the index.
//!
//! An index holds signatures, not texts, so a pair of a new and an indexed document is
//! confirmed by its MinHash estimate (`--confirm jaccard` and `estimate` alike), or not at all
//! with `--confirm none`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::Error;
use crate::ids::IdArena;
use crate::index::store::{self, Index, IndexDoc};
use crate::sign::minhash::{agreement, is_empty_signature};

use super::{Confirm, DedupConfig};

/// The column (Parquet) or `meta` key (JSONL) that names, with `--against` and `--tag-only`, the
/// indexed document a new document duplicates.
pub const INDEX_TAG: &str = "minhash_index_match";

/// What `--against` found, for the summary and the report.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct AgainstSummary {
    pub indexes: Vec<IndexCounts>,
    /// How pairs of a new and an indexed document were confirmed.
    pub confirm: Confirm,
    /// Pairs of a new and an indexed document that share a band.
    pub candidates: u64,
    /// New documents with a confirmed near duplicate in an index.
    pub matched: u64,
    /// With `--update-index`: the documents added to the index.
    pub added: u64,
    pub seconds: f64,
}

/// One index a run was checked against, as it was when the run opened it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct IndexCounts {
    pub path: String,
    pub documents: u64,
    pub segments: usize,
}

/// The indexed document a new document duplicates.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexMatch {
    /// Which of the run's indexes.
    pub index: usize,
    pub doc: IndexDoc,
    pub id: String,
    pub estimate: f64,
}

/// The indexes of a run, opened and checked before any work.
pub struct Against {
    pub indexes: Vec<Index>,
    /// `--update-index`: add the run's survivors to the one index.
    pub update: bool,
}

/// An index as a work directory records it: its path and how many segments it had, so every
/// stage sees the same documents whatever is added to the index meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordedIndex {
    pub path: String,
    pub segments: usize,
    pub documents: u64,
    /// xxh3 of those segments' entries (file, documents, bytes, checksum): an index rebuilt
    /// or replaced at the same path is refused, not read as the one recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
}

/// The [`RecordedIndex::fingerprint`] of the first `n` segments of `manifest`.
fn segments_fingerprint(manifest: &store::IndexManifest, n: usize) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for e in manifest.segments.iter().take(n) {
        for part in [e.file.as_bytes(), e.checksum.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&e.documents.to_le_bytes());
        h.update(&e.bytes.to_le_bytes());
    }
    format!("{:016x}", h.digest())
}

impl Against {
    /// The indexes of `paths` as a work directory records them (checked for `cfg` as
    /// [`Against::open`] checks them).
    pub fn record(
        paths: &[PathBuf],
        cfg: &DedupConfig,
        grouped: bool,
    ) -> Result<Vec<RecordedIndex>, Error> {
        Ok(match Self::open(paths, cfg, grouped, false)? {
            None => Vec::new(),
            Some(a) => a
                .indexes
                .iter()
                .map(|ix| RecordedIndex {
                    path: ix.dir.display().to_string(),
                    segments: ix.segments.len(),
                    documents: ix.manifest.documents,
                    fingerprint: segments_fingerprint(&ix.manifest, ix.segments.len()),
                })
                .collect(),
        })
    }

    /// Open the indexes a work directory recorded, as they were then.
    pub fn open_recorded(recorded: &[RecordedIndex], cfg: &DedupConfig) -> Result<Against, Error> {
        let indexes = recorded
            .iter()
            .map(|r| {
                let dir = Path::new(&r.path);
                let manifest = store::read_manifest(dir)?;
                manifest.check(dir, cfg.params, cfg.lsh)?;
                if !r.fingerprint.is_empty()
                    && (manifest.segments.len() < r.segments
                        || segments_fingerprint(&manifest, r.segments) != r.fingerprint)
                {
                    return Err(Error::Index {
                        path: r.path.clone(),
                        msg: format!(
                            "is not the index the work directory was made against: its first \
                             {} segment(s) were rebuilt or replaced since (the work directory \
                             recorded their files and checksums); start again in an empty \
                             work directory",
                            r.segments
                        ),
                    });
                }
                Index::open_first(dir, Some(r.segments))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Against {
            indexes,
            update: false,
        })
    }

    /// Open `paths` for a run of `cfg`; `grouped` runs are refused (an index has no groups),
    /// as is `update` with other than one index.
    pub fn open(
        paths: &[PathBuf],
        cfg: &DedupConfig,
        grouped: bool,
        update: bool,
    ) -> Result<Option<Against>, Error> {
        if paths.is_empty() {
            if update {
                return Err(Error::Param(
                    "--update-index needs the index to update: --against INDEX".into(),
                ));
            }
            return Ok(None);
        }
        if update && paths.len() != 1 {
            return Err(Error::Param(format!(
                "--update-index adds the survivors to one index; {} were given with --against",
                paths.len()
            )));
        }
        if grouped {
            return Err(Error::Param(
                "--group-field cannot be combined with --against: an index holds no groups \
                 (check each group against an index of its own)"
                    .into(),
            ));
        }
        let indexes = paths
            .iter()
            .map(|p| {
                // The manifest first: an index of another contract or other parameters is
                // refused for that, before its segments are opened.
                store::read_manifest(p)?.check(p, cfg.params, cfg.lsh)?;
                Index::open(p)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        if update {
            // The survivors are added after the outputs are written: an index that cannot take
            // them is refused now, before any output appears.
            let dir = &paths[0];
            tempfile::Builder::new()
                .prefix(".neardup-probe-")
                .tempfile_in(dir)
                .map_err(|e| Error::Index {
                    path: dir.display().to_string(),
                    msg: format!(
                        "--update-index cannot add to it ({e}): give an index this run can \
                         write to, or leave out --update-index"
                    ),
                })?;
        }
        Ok(Some(Against { indexes, update }))
    }

    /// The indexes as the summary shows them.
    pub fn counts(&self) -> Vec<IndexCounts> {
        self.indexes
            .iter()
            .map(|ix| IndexCounts {
                path: ix.dir.display().to_string(),
                documents: ix.manifest.documents,
                segments: ix.segments.len(),
            })
            .collect()
    }

    /// For each document of the signature matrix `sigs` (`num_perm` entries a row), its match
    /// in the indexes, if any: of the confirmed pairs the one of highest estimate, ties to the
    /// smallest id (then the first index). Also the number of candidate pairs.
    pub fn matches(
        &self,
        sigs: &[u32],
        cfg: &DedupConfig,
    ) -> Result<(Vec<Option<IndexMatch>>, u64), Error> {
        let num_perm = cfg.params.num_perm;
        let n = sigs.len().checked_div(num_perm).unwrap_or(0);
        let sig = |q: usize| &sigs[q * num_perm..(q + 1) * num_perm];
        let mut best: Vec<Option<IndexMatch>> = vec![None; n];
        let mut candidates = 0u64;
        for (x, ix) in self.indexes.iter().enumerate() {
            let found = ix.candidates(sigs, |q| !is_empty_signature(sig(q)))?;
            candidates += found.len() as u64;
            for (q, d) in found {
                let estimate = agreement(sig(q as usize), ix.sig(d)) as f64 / num_perm as f64;
                if cfg.confirm != Confirm::None && estimate < cfg.threshold {
                    continue;
                }
                let better = match &best[q as usize] {
                    None => true,
                    Some(b) => {
                        estimate > b.estimate
                            || (estimate == b.estimate && ix.id(d)? < b.id.as_str())
                    }
                };
                if better {
                    best[q as usize] = Some(IndexMatch {
                        index: x,
                        doc: d,
                        id: ix.id(d)?.to_string(),
                        estimate,
                    });
                }
            }
        }
        Ok((best, candidates))
    }

    /// With `--update-index`, add the documents `docs` to the index; returns how many.
    pub fn update_index(
        &self,
        cfg: &DedupConfig,
        ids: &IdArena,
        sigs: &[u32],
        docs: &[u32],
    ) -> Result<u64, Error> {
        if !self.update {
            return Ok(0);
        }
        let dir: &Path = &self.indexes[0].dir;
        store::add_segment(dir, cfg.params, cfg.lsh, ids, sigs, docs, &[]).map_err(|e| {
            Error::Index {
                path: dir.display().to_string(),
                msg: format!(
                    "the outputs were written, but the survivors were not added to the \
                         index (it is as it was): {e}"
                ),
            }
        })?;
        Ok(docs.len() as u64)
    }
}

/// How pairs of a new and an indexed document are confirmed under `confirm`: by the estimate,
/// or with `none` not at all (an index holds no texts for exact Jaccard).
pub fn index_confirmation(confirm: Confirm) -> Confirm {
    match confirm {
        Confirm::None => Confirm::None,
        _ => Confirm::Estimate,
    }
}

/// What `--against` adds to a run: the summary of [`Against::matches`] and the update.
pub(crate) fn against_summary(
    against: &Against,
    cfg: &DedupConfig,
    candidates: u64,
    matched: u64,
    added: u64,
    t0: Instant,
) -> AgainstSummary {
    AgainstSummary {
        indexes: against.counts(),
        confirm: index_confirmation(cfg.confirm),
        candidates,
        matched,
        added,
        seconds: t0.elapsed().as_secs_f64(),
    }
}
