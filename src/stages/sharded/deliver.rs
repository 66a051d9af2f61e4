//! The run's files where the user asked for them: copies of the clusters and pairs files
//! `cluster` wrote (checked against their checksums), and a shard's kept records written to
//! its output. Every path is checked before the work ([`WorkDir::check_outputs`]).

use std::path::Path;

use super::{apply, cluster, WorkDir};
use crate::error::Error;
use crate::io::Output;
use crate::progress::ProgressFactory;
use crate::stages::dedup::record_tags;
use crate::stages::sink::RecordSink;

/// Copy a file the `cluster` stage wrote to where the user asked for it (which the caller
/// finishes), checking it against the checksum `cluster` recorded for it.
pub fn copy_out(from: &Path, to: &mut Output, checksum: &str) -> Result<(), Error> {
    use std::io::Read;
    let name = from.display().to_string();
    let mut f = std::fs::File::open(from).map_err(|e| Error::io(&name, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut sum = crate::io::checksum::Checksum::new();
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(&name, e))?;
        if n == 0 {
            break;
        }
        sum.update(&buf[..n]);
        to.write_all(&buf[..n])?;
    }
    if sum.hex() != checksum {
        return Err(Error::Work {
            path: name,
            msg: "its contents do not match their checksum (edited or damaged since `neardup \
                  stage cluster` wrote it): run it again in an empty work directory"
                .into(),
        });
    }
    Ok(())
}

/// Run `cluster` (unless it ran already), then copy its clusters and pairs files to `clusters`
/// and `pairs` where given, whether or not the stage ran now. The copies' paths are checked
/// first ([`WorkDir::check_outputs`]). Returns the stage's summary when it ran now.
pub fn cluster_to(
    work: &WorkDir,
    clusters: Option<&str>,
    pairs: Option<&str>,
    progress: &ProgressFactory,
) -> Result<Option<cluster::ClusterSummary>, Error> {
    copy_cluster_outputs(work, clusters, pairs, || {
        cluster::job::cluster(work, progress)
    })
}

/// [`cluster_to`] for the last of `cluster`'s parallel steps
/// ([`cluster::tasks::finish`](super::cluster::tasks::finish)).
pub fn cluster_finish_to(
    work: &WorkDir,
    clusters: Option<&str>,
    pairs: Option<&str>,
) -> Result<Option<cluster::ClusterSummary>, Error> {
    copy_cluster_outputs(work, clusters, pairs, || {
        super::cluster::tasks::finish(work)
    })
}

/// Check the copies' paths, run `stage`, then copy the clusters and pairs files out.
fn copy_cluster_outputs(
    work: &WorkDir,
    clusters: Option<&str>,
    pairs: Option<&str>,
    stage: impl FnOnce() -> Result<Option<cluster::ClusterSummary>, Error>,
) -> Result<Option<cluster::ClusterSummary>, Error> {
    let mut outs = Vec::new();
    outs.extend(clusters.map(|p| ("--clusters", p)));
    outs.extend(pairs.map(|p| ("--pairs", p)));
    work.check_outputs(("cluster", "cluster"), &outs)?;
    let ran = stage()?;
    let s = cluster::summary(work)?;
    for (to, from, sum) in [
        (clusters, work.clusters_jsonl(), &s.clusters_checksum),
        (pairs, work.pairs_jsonl(), &s.pairs_checksum),
    ] {
        if let Some(to) = to {
            let mut o = Output::create(to)?;
            copy_out(&from, &mut o, sum)?;
            o.finish()?;
        }
    }
    Ok(ran)
}

/// Write shard `shard`'s kept records to `output` (atomically), its path checked first
/// ([`WorkDir::check_outputs`]).
pub fn apply_to(
    work: &WorkDir,
    shard: usize,
    output: &str,
    progress: &ProgressFactory,
) -> Result<apply::ApplySummary, Error> {
    work.check_shard(shard)?;
    let key = format!("apply-{shard:05}");
    let label = format!("apply --shard {shard}");
    work.check_outputs((&key, &label), &[("-o", output)])?;
    let input = work.inputs(&[shard])?;
    let tags = record_tags(work.config(), !work.manifest.against.is_empty());
    let mut out = RecordSink::create(output, &input, &tags)?;
    let s = apply::apply(work, shard, &mut out, progress)?;
    out.finish()?;
    Ok(s)
}
