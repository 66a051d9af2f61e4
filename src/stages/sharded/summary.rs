//! The whole run's summary, read back from the stages' files: what in-memory `dedup` returns,
//! for the reports of a run whose stages ran as separate jobs.

use super::codec::fields;
use super::gather::{Docs, Gatherer};
use super::{apply, cluster, confirm, sign, WorkDir};
use crate::engine::EngineInfo;
use crate::error::Error;
use crate::pipeline::ScanStats;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    index_confirmation, sample_docs, similarity_curve, test_pair, AgainstSummary, BucketTables,
    Chaining, ClusterExample, Confirm, DedupSummary, IndexCounts, JaccardCache, SimilarityBucket,
};
use rayon::prelude::*;

/// Sum the pass-1 counts of the shards.
fn add_scan(total: &mut ScanStats, s: &ScanStats) {
    total.documents += s.documents;
    total.words += s.words;
    total.shingles += s.shingles;
    total.text_bytes += s.text_bytes;
    total.jsonl_bytes += s.jsonl_bytes;
    total.parse_seconds += s.parse_seconds;
    total.sign_seconds += s.sign_seconds;
    total.wait_seconds += s.wait_seconds;
    total.seconds += s.seconds;
}

/// The summary of a run whose every stage is done (`apply` for every shard included), as
/// in-memory `dedup` would return it; `seconds` is the run's wall time, which only its driver
/// knows. The stages' own times are summed, so on a cluster they are CPU time, not wall. With
/// `measure` (a report will be written), the S-curve is measured as in memory.
pub fn dedup_summary(
    work: &WorkDir,
    seconds: f64,
    measure: bool,
    progress: &ProgressFactory,
) -> Result<DedupSummary, Error> {
    let mut scan = ScanStats::default();
    let mut base = vec![0u64];
    for s in 0..work.shards() {
        let x = sign::scan_stats(work, s)?;
        add_scan(&mut scan, &x);
        base.push(base[s] + x.documents);
    }
    let c = cluster::summary(work)?;
    let mut written = 0;
    let mut write_seconds = 0.0;
    let (mut candidates, mut matched) = (0, 0);
    let mut snippets: Vec<(usize, u64, String)> = Vec::new();
    for s in 0..work.shards() {
        let a = apply::apply_summary(work, s)?;
        written += a.written;
        write_seconds += a.seconds;
        candidates += a.index_candidates;
        matched += a.index_matched;
        snippets.extend(a.snippets.into_iter().map(|(row, text)| (s, row, text)));
    }
    let snippet = |s: usize, row: u64| {
        snippets
            .iter()
            .find(|x| x.0 == s && x.1 == row)
            .map(|x| x.2.clone())
            .unwrap_or_default()
    };
    let examples = c
        .largest
        .iter()
        .map(|l| ClusterExample {
            root: l.root.clone(),
            size: l.size,
            members: l
                .members
                .iter()
                .map(|(s, row, id)| (id.clone(), snippet(*s, *row)))
                .collect(),
        })
        .collect();
    let cfg = work.config();
    let against = (!work.manifest.against.is_empty()).then(|| AgainstSummary {
        indexes: work
            .manifest
            .against
            .iter()
            .map(|r| IndexCounts {
                path: r.path.clone(),
                documents: r.documents,
                segments: r.segments,
            })
            .collect(),
        confirm: index_confirmation(cfg.confirm),
        candidates,
        matched,
        added: 0,
        seconds: 0.0,
    });
    let mut stats = c.stats;
    if measure {
        stats.chaining = Some(Chaining {
            dropped_without_kept_duplicate: unconfirmed_survivors(work, &base, progress)?,
            largest_cluster: c.largest_cluster,
            largest_cluster_diameter: c.largest_cluster_diameter,
        });
    }
    Ok(DedupSummary {
        against,
        scan,
        cluster: stats,
        similarity_buckets: if measure && cfg.confirm == Confirm::Jaccard {
            similarity_buckets(work, &base, progress)?
        } else {
            Vec::new()
        },
        examples,
        documents_written: written,
        write_seconds,
        seconds,
        table_bytes: c.table_bytes,
        groups: c.groups,
    })
}

/// Documents a run pairs to survivors for a report's chaining count, gathered at a time.
const CHAINING_BATCH: usize = 64 << 10;

/// Of the dropped documents `cluster` listed with their clusters' survivors
/// (`cluster/chaining.rows`), those that their survivor is not a confirmed near duplicate of
/// (no band in common, or the confirmation's test fails), as in memory: both are signed again
/// from their text, a batch of pairs at a time.
fn unconfirmed_survivors(
    work: &WorkDir,
    base: &[u64],
    progress: &ProgressFactory,
) -> Result<u64, Error> {
    let mut rows = work.open_keyed(&work.chaining_file(), "cluster", 16)?;
    let cfg = work.config();
    let (num_perm, bands, band_rows) = (cfg.params.num_perm, cfg.lsh.bands, cfg.lsh.rows);
    let shard_row = |d: u64| {
        let s = base.partition_point(|&b| b <= d) - 1;
        (s, d - base[s])
    };
    let mut left = rows.rows as usize;
    let mut count = 0;
    while left > 0 {
        let take = left.min(CHAINING_BATCH);
        let pairs: Vec<u64> = fields::<u64>(rows.read_next(take)?).collect();
        left -= take;
        let mut needed: Vec<Vec<u64>> = vec![Vec::new(); work.shards()];
        for &d in &pairs {
            let (s, r) = shard_row(d);
            needed[s].push(r);
        }
        for v in &mut needed {
            v.sort_unstable();
            v.dedup();
        }
        let docs = Docs::gather(work, needed, &[], progress)?;
        let cache = JaccardCache::default();
        let tables = BucketTables {
            num_perm,
            sigs: &docs.sigs,
            sets: &docs.sets,
            cache: &cache,
            groups: &[],
        };
        let local = |d: u64| {
            let (s, r) = shard_row(d);
            docs.local_at(s, r).expect("a gathered document")
        };
        let sig = |l: u32| &docs.sigs[l as usize * num_perm..(l as usize + 1) * num_perm];
        count += pairs
            .par_chunks_exact(2)
            .filter(|p| {
                let (a, b) = (local(p[0]), local(p[1]));
                let (sa, sb) = (sig(a), sig(b));
                let candidates = (0..bands).any(|j| {
                    let band = j * band_rows..(j + 1) * band_rows;
                    sa[band.clone()] == sb[band]
                });
                !(candidates
                    && test_pair(&tables, cfg.confirm, cfg.threshold, a.min(b), a.max(b)).0)
            })
            .count() as u64;
    }
    Ok(count)
}

/// The measured S-curve of reports, as in-memory `dedup` measures it: the same sample of the
/// documents in some bucket (`base[s]`: shard `s`'s first document index), their signatures
/// and shingle sets read back from the work directory and the shards.
fn similarity_buckets(
    work: &WorkDir,
    base: &[u64],
    progress: &ProgressFactory,
) -> Result<Vec<SimilarityBucket>, Error> {
    let docs = sample_docs(confirm::bucketed(work, base)?);
    if docs.is_empty() {
        return Ok(Vec::new());
    }
    let cfg = work.config();
    let num_perm = cfg.params.num_perm;
    let mut sigs: Vec<u32> = Vec::with_capacity(docs.len() * num_perm);
    let mut sets: Vec<Vec<u64>> = Vec::with_capacity(docs.len());
    let mut gather = Gatherer::new(work, true)?;
    let mut at = 0;
    for s in 0..work.shards() {
        let rows: Vec<u64> = docs[at..]
            .iter()
            .take_while(|&&d| d < base[s + 1])
            .map(|&d| d - base[s])
            .collect();
        if rows.is_empty() {
            continue;
        }
        let got = gather.shard(work, s, &rows, progress)?;
        sigs.extend_from_slice(&got.sigs);
        sets.extend(got.sets);
        at += rows.len();
    }
    let sampled: Vec<&[u64]> = sets.iter().map(|v| v.as_slice()).collect();
    let sig = |i: usize| &sigs[i * num_perm..(i + 1) * num_perm];
    Ok(similarity_curve(&sampled, sig, cfg.lsh))
}

/// The engine that signed the shards, for reports: shard 0's (`cpu` or `gpu`, and its details);
/// when shards were signed by different engines, the others are named in the details.
pub fn engine_info(work: &WorkDir) -> Result<EngineInfo, Error> {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut auto = None;
    for s in 0..work.shards() {
        let x = sign::sign_summary(work, s)?;
        if s == 0 {
            auto = x.engine_auto;
        }
        let e = (x.engine_kind, x.engine_detail);
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    let Some((kind, detail)) = seen.first().cloned() else {
        return Ok(EngineInfo {
            kind: "cpu",
            detail: "no shards".into(),
            auto: None,
        });
    };
    let mut detail = detail;
    for (k, d) in &seen[1..] {
        detail.push_str(&format!("; also {k} ({d})"));
    }
    Ok(EngineInfo {
        kind: if kind == "gpu" { "gpu" } else { "cpu" },
        detail,
        auto,
    })
}
