//! `neardup index build` and `index add`: sign inputs into an LSH index on disk
//! ([`crate::index::store`]), for `dedup --against` to check new documents against.
//!
//! Each call adds one segment and holds its inputs' ids and signatures in memory while it
//! signs (as `dedup` does); an index past one machine's memory is built shard by shard with
//! `index add`, a segment each.

use std::path::Path;
use std::time::Instant;

use crate::engine::Engine;
use crate::error::Error;
use crate::ids::{DocLoc, UniqueIds};
use crate::index::lsh::LshParams;
use crate::index::store::{self, SegmentEntry};
use crate::io::Inputs;
use crate::jsonl::Fields;
use crate::pipeline::{scan, ScanStats};
use crate::progress::ProgressFactory;

/// What `index build` or `index add` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexSummary {
    pub scan: ScanStats,
    /// The segment written (none for inputs without documents, or when every input was in
    /// the index already: [`IndexSummary::already`]).
    pub segment: Option<SegmentEntry>,
    /// Every input was in the index already (a rerun of an addition that landed): nothing was
    /// signed or added.
    pub already: bool,
    /// Documents in the index now.
    pub index_documents: u64,
    pub seconds: f64,
}

/// Sign `inputs` and add them to the index in `dir`: a new index when `create` (`dir` missing
/// or empty), else an existing one, whose parameters must be the engine's and `lsh`.
pub fn index_inputs(
    dir: &Path,
    create: bool,
    inputs: &Inputs,
    fields: &Fields,
    lsh: LshParams,
    engine: &mut dyn Engine,
    progress: &ProgressFactory,
) -> Result<IndexSummary, Error> {
    let t0 = Instant::now();
    let params = *engine.params();
    lsh.check_num_perm(params.num_perm)?;
    // Refuse a bad target before the work: an existing index for `build`, a missing one or one
    // of other parameters for `add`.
    if create {
        store::check_new(dir)?;
    }
    // The inputs' checksums: an input already in the index is not added twice.
    let mut sources = Vec::new();
    for i in 0..inputs.len() {
        // Standard input has no bytes to hash before it is read, and an empty file no
        // documents to add twice.
        if inputs.is_stdin(i) || std::fs::metadata(inputs.path(i)).is_ok_and(|m| m.len() == 0) {
            continue;
        }
        let (sum, _) = crate::io::checksum::file_checksum(inputs.path(i), None)?;
        sources.push((inputs.name(i).to_string(), sum));
    }
    if !create {
        let m = store::read_manifest(dir)?;
        m.check(dir, params, lsh)?;
        if !sources.is_empty() && store::check_sources(dir, &m, &sources)? {
            return Ok(IndexSummary {
                scan: ScanStats::default(),
                segment: None,
                already: true,
                index_documents: m.documents,
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
    }
    let mut ids = UniqueIds::default();
    let mut sigs: Vec<u32> = Vec::new();
    let place_of = |l: DocLoc| inputs.place(l.file as usize, l.line);
    let bar = progress.pass("signatures", inputs.total_bytes());
    let stats = scan(inputs, fields, engine, false, None, &bar, |sc| {
        let file = sc.file_index as u32;
        let locs = sc.lines.iter().map(|&line| DocLoc { file, line });
        ids.extend(&sc.ids, locs, &place_of)?;
        sigs.extend_from_slice(&sc.sigs);
        Ok(())
    })?;
    drop(bar);
    let docs: Vec<u32> = (0..ids.ids().len() as u32).collect();
    // `Some(made the directory)` once this run's `create` published the manifest: a build
    // refused there made nothing, and must not remove the index another run is making.
    let mut made: Option<bool> = None;
    let written = (|| {
        if create {
            made = Some(store::create(dir, params, lsh)?);
        }
        store::add_segment(dir, params, lsh, ids.ids(), &sigs, &docs, &sources)
    })();
    let segment = match written {
        Ok(s) => s,
        Err(e) => {
            // Nothing of a failed build stays: the directory, when it made it, or else the
            // files it made in the empty one.
            match made {
                Some(true) => {
                    let _ = std::fs::remove_dir_all(dir);
                }
                Some(false) => {
                    let _ = std::fs::remove_file(dir.join(store::MANIFEST));
                    let _ = std::fs::remove_file(dir.join(".lock"));
                }
                None => {}
            }
            return Err(e);
        }
    };
    let already = segment.is_none() && !docs.is_empty();
    Ok(IndexSummary {
        scan: stats,
        segment,
        already,
        index_documents: store::read_manifest(dir)?.documents,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
