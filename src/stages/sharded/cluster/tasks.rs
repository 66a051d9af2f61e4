//! Stage 5 ([`cluster`](super)) as parallel tasks, none holding more than its part of
//! the members and pairs, writing the same files. Members are split into parts by a hash of
//! their rank (as many as the task budget asks for), and every output the parts share is
//! merged in rank order by `finish`:
//!
//! 1. `plan`, once: the parts.
//! 2. `edges`, per confirm partition: its pairs, each as two directed edges by the part of
//!    their first end, and as a pair by the part of its smaller rank.
//!    `locate`, per shard: each document's shard and row by the part of its rank, and its
//!    exact-duplicate relation as two edges.
//! 3. `star`, per part and round: connected components by the alternating large-star and
//!    small-star rounds (Kiveris et al., "Connected Components in MapReduce and Beyond"),
//!    each round's edges shuffled through files; each round first checks whether its part's
//!    edges are stars around their smallest member already. Once every part's are, each
//!    member's root is its star's centre: the smallest rank of its component, as union-find
//!    finds it.
//! 4. `roots`, per part: each member's root, sent to its shard (for its attributes), and each
//!    pair and exact relation sent to the part of its root.
//! 5. `attributes`, per shard: each member's id, words, keep value and group, sent to the part
//!    of its root, so that every cluster is whole in one part.
//! 6. `clusters`, per part: its clusters' survivors, lines, pairs' lines, chaining rows,
//!    counts and each member's verdict, sent to its shard.
//! 7. `verdicts`, per shard: the shard's cluster file.
//! 8. `finish`, once: the clusters file (the parts' lines in order), the pairs file and the
//!    chaining rows (the parts' sorted runs merged) and the summary; the task files removed.
//!
//! Under `--cluster greedy` the edges are each dropped unit's to its root (from the rounds'
//! verdicts, a rank range of them per `edges` task) and the exact copies', so a component is a
//! cluster, and `clusters` gives it the root and pairs of the greedy rule.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, BooleanArray, StringArray};
use arrow_schema::{DataType, Field};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{ClusterSummary, LargeCluster};
use crate::error::Error;
use crate::io::Output;
use crate::stages::dedup::{
    keep_key, pair_line, put_cluster_line, ClusterRule, ClusterStats, Confirm, GroupCounts, Keep,
    EXAMPLE_CLUSTERS, EXAMPLE_MEMBERS,
};
use crate::stages::sharded::codec::{as_fields, put, put_bytes, Fill, Take};
use crate::stages::sharded::rank::NO_REP;
use crate::stages::sharded::sliced::{Slice, SlicedFile, SlicedWriter};
use crate::stages::sharded::table::{col, f64s, strings, u32s, u64s, BATCH_ROWS};
use crate::stages::sharded::WorkDir;

/// Bytes a task holds for each pair or exact relation (its edges both ways, sorted, and its
/// members' attributes) and for each document it locates.
const PER_LINK: u64 = 256;
const PER_DOC: u64 = 64;

/// The most parts a plan cuts.
const MAX_PARTS: usize = 1 << 14;

/// The parts of the members.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterPlan {
    pub parts: usize,
    pub documents: u64,
    pub budget: u64,
}

impl ClusterPlan {
    /// The part of the member of rank `rank`: by a hash of it, not by rank range, so that
    /// members, edges and clusters spread evenly over the parts whatever the ids (a corpus whose
    /// near copies share an id prefix would put every cluster's root in one range).
    fn part(&self, rank: u64) -> usize {
        let mut x = rank.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((x ^ (x >> 31)) % self.parts as u64) as usize
    }
}

/// What a step wrote: its files' slices for the tasks of the next steps, and its counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StepSummary {
    /// Per named output (`edges`, `pairs`, ...), the file and its slices.
    outputs: BTreeMap<String, (String, Vec<Slice>)>,
    /// Whether a `star` round's input edges were stars already.
    #[serde(default)]
    stars: bool,
    #[serde(default)]
    edges: u64,
    #[serde(default)]
    counts: PartCounts,
    seconds: f64,
}

/// A `clusters` task's counts, and an `attributes` task's documents per group.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct PartCounts {
    sizes: BTreeMap<u64, u64>,
    members: u64,
    not_written: u64,
    id_bytes: u64,
    pairs: u64,
    /// Per group: documents (of a shard), clusters, members not written.
    groups: Vec<(u64, u64, u64)>,
    largest: Vec<LargeCluster>,
    /// Their roots' ranks.
    largest_roots: Vec<u64>,
    /// The part's largest cluster: size, its root's rank, diameter.
    biggest: Option<(u64, u64, u64)>,
}

impl WorkDir {
    fn cluster_task(&self, name: &str) -> PathBuf {
        self.root().join("cluster").join("tasks").join(name)
    }
}

/// How `neardup stage` names a step, for the errors that ask for it.
fn step(name: &str, index: Option<(&str, usize)>) -> String {
    match index {
        Some((flag, i)) => format!("cluster --step {name} --{flag} {i}"),
        None => format!("cluster --step {name}"),
    }
}

/// A step's prologue: its unit's lock, then `None` when the step ran already (or the whole
/// stage did); else the lock, held for the step, its start and the plan.
fn begin(
    work: &WorkDir,
    name: &str,
) -> Result<Option<(crate::stages::sharded::UnitLock, Instant, ClusterPlan)>, Error> {
    let lock = unit(work, name)?;
    if clustered(work)? || summary_of(work, name)?.is_some() {
        return Ok(None);
    }
    Ok(Some((lock, Instant::now(), read_plan(work)?)))
}

fn unit(work: &WorkDir, name: &str) -> Result<crate::stages::sharded::UnitLock, Error> {
    let lock = work.lock(&format!("cluster-{name}"))?;
    work.remove_partials("cluster/tasks", name)?;
    Ok(lock)
}

fn clustered(work: &WorkDir) -> Result<bool, Error> {
    Ok(work
        .read_json::<ClusterSummary>(&work.cluster_summary())?
        .is_some())
}

/// Whether the step `name` (`edges-00003`, `star-0001-00002`) ran.
pub(in crate::stages::sharded) fn step_done(work: &WorkDir, name: &str) -> Result<bool, Error> {
    Ok(summary_of(work, name)?.is_some())
}

/// The plan, once `plan` made it.
pub(in crate::stages::sharded) fn plan_if_made(
    work: &WorkDir,
) -> Result<Option<ClusterPlan>, Error> {
    work.read_json(&work.cluster_task("plan.json"))
}

/// A step's summary, `None` when not there yet.
fn summary_of(work: &WorkDir, name: &str) -> Result<Option<StepSummary>, Error> {
    work.read_json(&work.cluster_task(&format!("{name}.json")))
}

fn need_summary(work: &WorkDir, name: &str, step: &str) -> Result<StepSummary, Error> {
    work.need_json(&work.cluster_task(&format!("{name}.json")), step)
}

/// The slice `slice` of the output `output` of the step `name`.
fn read_output(
    work: &WorkDir,
    name: &str,
    step: &str,
    output: &str,
    slice: usize,
) -> Result<Vec<u8>, Error> {
    let s = need_summary(work, name, step)?;
    let Some((file, slices)) = s.outputs.get(output) else {
        return Ok(Vec::new());
    };
    SlicedFile::open(&work.cluster_task(file), step)?.read(&slices[slice])
}

/// Every slice of part `k` of the output `output` of the step `name`, whose slices come in
/// windows of one per part (`locate`'s), in order.
fn read_part(
    work: &WorkDir,
    name: &str,
    step: &str,
    output: &str,
    parts: usize,
    k: usize,
) -> Result<Vec<u8>, Error> {
    let s = need_summary(work, name, step)?;
    let Some((file, slices)) = s.outputs.get(output) else {
        return Ok(Vec::new());
    };
    let f = SlicedFile::open(&work.cluster_task(file), step)?;
    let mut out = Vec::new();
    for slice in slices.iter().skip(k).step_by(parts) {
        out.extend(f.read(slice)?);
    }
    Ok(out)
}

/// Writes a step's outputs, each sliced, and its summary.
struct Outputs<'w> {
    work: &'w WorkDir,
    name: String,
    files: BTreeMap<String, (SlicedWriter, usize)>,
}

impl<'w> Outputs<'w> {
    fn new(work: &'w WorkDir, name: &str) -> Self {
        Outputs {
            work,
            name: name.to_string(),
            files: BTreeMap::new(),
        }
    }

    /// Write `records` (slice, bytes), sorted by slice, as the output `output` of `slices`.
    fn write<B: AsRef<[u8]>>(
        &mut self,
        output: &str,
        slices: usize,
        records: &[(usize, B)],
    ) -> Result<(), Error> {
        let w = self.open(output, slices)?;
        for (s, bytes) in records {
            w.push(*s, bytes.as_ref())?;
        }
        Ok(())
    }

    /// The output `output` of `slices`, to be written slice after slice as records come.
    fn open(&mut self, output: &str, slices: usize) -> Result<&mut SlicedWriter, Error> {
        let file = format!("{}.{output}", self.name);
        let w = SlicedWriter::create(&self.work.cluster_task(&file))?;
        self.files.insert(output.to_string(), (w, slices));
        Ok(&mut self.files.get_mut(output).expect("just inserted").0)
    }

    fn finish(self, mut summary: StepSummary, t0: Instant) -> Result<StepSummary, Error> {
        for (output, (w, slices)) in self.files {
            let file = format!("{}.{output}", self.name);
            summary.outputs.insert(output, (file, w.finish(slices)?));
        }
        summary.seconds = t0.elapsed().as_secs_f64();
        self.work.write_json(
            &self.work.cluster_task(&format!("{}.json", self.name)),
            &summary,
        )?;
        Ok(summary)
    }
}

/// Two `u64` fields, without an allocation (edges, held by the million).
fn le2(a: u64, b: u64) -> [u8; 16] {
    Fill::new().le(a).le(b).done()
}

/// Three `u64` fields, without an allocation (places, held by the million).
fn le3(a: u64, b: u64, c: u64) -> [u8; 24] {
    Fill::new().le(a).le(b).le(c).done()
}

/// Step 1: the parts for tasks of about `budget` bytes each. A plan made already is kept.
pub fn plan(work: &WorkDir, budget: usize) -> Result<ClusterPlan, Error> {
    plan_status(work, budget).map(|(p, _)| p)
}

/// [`plan`], and whether it planned now, before (that plan stands, whatever its budget), or
/// found `cluster` done: then nothing is written (its task files are gone) and every other
/// step skips.
pub fn plan_status(
    work: &WorkDir,
    budget: usize,
) -> Result<(ClusterPlan, crate::stages::sharded::rank::tasks::Planned), Error> {
    use crate::stages::sharded::rank::tasks::Planned;
    let _lock = unit(work, "plan")?;
    if clustered(work)? {
        let n: u64 = crate::stages::sharded::rank::summary(work)?
            .rows
            .iter()
            .sum();
        let done = ClusterPlan {
            parts: 1,
            documents: n,
            budget: 0,
        };
        return Ok((done, Planned::Done));
    }
    let path = work.cluster_task("plan.json");
    if let Some(p) = work.read_json::<ClusterPlan>(&path)? {
        return Ok((p, Planned::Before));
    }
    let rs = crate::stages::sharded::rank::summary(work)?;
    let n: u64 = rs.rows.iter().sum();
    let mut links = rs.exact_duplicates;
    for p in 0..work.partitions() {
        links += crate::stages::sharded::confirm::summary(work, p)?
            .counts
            .confirmed;
    }
    if work.config().cluster == ClusterRule::Greedy {
        // Each dropped unit's edge to its root; the last round counts them all.
        let mut r = 0;
        while let Some(s) = crate::stages::sharded::greedy::round_summary(work, r)? {
            if s.undecided == 0 {
                links += s.dropped;
                break;
            }
            r += 1;
        }
    }
    let cost = n * PER_DOC + links * PER_LINK;
    let parts = (cost.div_ceil(budget.max(1) as u64) as usize).clamp(1, MAX_PARTS);
    let plan = ClusterPlan {
        parts: parts.min(n.max(1) as usize),
        documents: n,
        budget: budget as u64,
    };
    work.write_json(&path, &plan)?;
    Ok((plan, Planned::Now))
}

/// The plan `plan` made.
pub fn read_plan(work: &WorkDir) -> Result<ClusterPlan, Error> {
    work.need_json(&work.cluster_task("plan.json"), &step("plan", None))
}

/// Step 2 for confirm partition `p`: its pairs as edges and pairs by part. `false` when done.
pub fn edges(work: &WorkDir, p: usize) -> Result<bool, Error> {
    work.check_partition(p)?;
    let name = format!("edges-{p:05}");
    let Some((_lock, t0, plan)) = begin(work, &name)? else {
        return Ok(false);
    };
    let n = plan.documents;
    let mut edges: Vec<(usize, [u8; 16])> = Vec::new();
    let mut pairs: Vec<(usize, Vec<u8>)> = Vec::new();
    let pair_record = |a: u64, b: u64, est: f64, j: Option<f64>| {
        let mut rec = as_fields(&[a, b]).into_owned();
        put(&mut rec, est);
        put(&mut rec, j.is_some() as u8);
        put(&mut rec, j.unwrap_or(0.0));
        rec
    };
    if work.config().cluster == ClusterRule::Greedy {
        // The dropped units of this task's rank range, each to its root.
        let of = work.partitions() as u128;
        let lo = (p as u128 * n as u128 / of) as u64;
        let hi = ((p as u128 + 1) * n as u128 / of) as u64;
        crate::stages::sharded::greedy::verdicts(work, |v| {
            if v.dropped() && (lo..hi).contains(&v.rank) {
                if v.root >= n {
                    return Err(Error::Work {
                        path: work.root().display().to_string(),
                        msg: format!(
                            "a verdict of ranks {} and {} in a corpus of {n} documents: run \
                             the greedy rounds again in an empty work directory",
                            v.rank, v.root
                        ),
                    });
                }
                edges.push((plan.part(v.rank), le2(v.rank, v.root)));
                edges.push((plan.part(v.root), le2(v.root, v.rank)));
                let rec = pair_record(v.rank, v.root, v.estimate, v.jaccard);
                pairs.push((plan.part(v.rank), rec));
            }
            Ok(())
        })?;
    }
    super::for_each_pair(work, p, n, |a, b, est, j| {
        edges.push((plan.part(a), le2(a, b)));
        edges.push((plan.part(b), le2(b, a)));
        pairs.push((plan.part(a), pair_record(a, b, est, j)));
    })?;
    edges.par_sort_by_key(|e| e.0);
    pairs.par_sort_by_key(|e| e.0);
    let mut out = Outputs::new(work, &name);
    out.write("edges", plan.parts, &edges)?;
    out.write("pairs", plan.parts, &pairs)?;
    out.finish(StepSummary::default(), t0)?;
    Ok(true)
}

/// Step 2 for shard `s`: each document's place by the part of its rank, and its exact
/// relation as edges. `false` when done.
pub fn locate(work: &WorkDir, s: usize) -> Result<bool, Error> {
    work.check_shard(s)?;
    let name = format!("locate-{s:05}");
    let Some((_lock, t0, plan)) = begin(work, &name)? else {
        return Ok(false);
    };
    let exact = work.config().exact;
    let mut cols = vec!["rank"];
    if exact {
        cols.push("exact_rep");
    }
    // A window of rows at a time, so that the task's memory does not grow with the shard:
    // window `w`'s records for part `k` are slice `w * parts + k` of each output.
    let window = (plan.budget / 64).max(BATCH_ROWS as u64);
    let parts = plan.parts;
    let file = |output: &str| work.cluster_task(&format!("{name}.{output}"));
    let mut out_places = SlicedWriter::create(&file("places"))?;
    let mut out_edges = SlicedWriter::create(&file("edges"))?;
    let mut out_exact = SlicedWriter::create(&file("exact"))?;
    let mut places: Vec<(usize, [u8; 24])> = Vec::new();
    let mut edges: Vec<(usize, [u8; 16])> = Vec::new();
    let mut links: Vec<(usize, [u8; 16])> = Vec::new();
    let mut win = 0usize;
    let mut flush = |win: usize,
                     places: &mut Vec<(usize, [u8; 24])>,
                     edges: &mut Vec<(usize, [u8; 16])>,
                     links: &mut Vec<(usize, [u8; 16])>|
     -> Result<(), Error> {
        places.par_sort_by_key(|e| e.0);
        edges.par_sort_by_key(|e| e.0);
        links.par_sort_by_key(|e| e.0);
        for (k, rec) in places.drain(..) {
            out_places.push(win * parts + k, &rec)?;
        }
        for (k, rec) in edges.drain(..) {
            out_edges.push(win * parts + k, &rec)?;
        }
        for (k, rec) in links.drain(..) {
            out_exact.push(win * parts + k, &rec)?;
        }
        Ok(())
    };
    let mut row = 0u64;
    for batch in work.open_table(&work.rank_file(s), "rank", &cols)? {
        let batch = batch?;
        let rank = u64s(&batch, "rank");
        let rep = if exact {
            u64s(&batch, "exact_rep")
        } else {
            &[]
        };
        for (i, &r) in rank.iter().enumerate() {
            let at = row + i as u64;
            while at >= (win as u64 + 1) * window {
                flush(win, &mut places, &mut edges, &mut links)?;
                win += 1;
            }
            places.push((plan.part(r), le3(r, s as u64, at)));
            if exact && rep[i] != NO_REP {
                let e = rep[i];
                edges.push((plan.part(r), le2(r, e)));
                edges.push((plan.part(e), le2(e, r)));
                links.push((plan.part(r), le2(r, e)));
            }
        }
        row += rank.len() as u64;
    }
    flush(win, &mut places, &mut edges, &mut links)?;
    let slices = (win + 1) * parts;
    let mut summary = StepSummary::default();
    for (output, w) in [
        ("places", out_places),
        ("edges", out_edges),
        ("exact", out_exact),
    ] {
        let f = format!("{name}.{output}");
        summary
            .outputs
            .insert(output.to_string(), (f, w.finish(slices)?));
    }
    summary.seconds = t0.elapsed().as_secs_f64();
    work.write_json(&work.cluster_task(&format!("{name}.json")), &summary)?;
    Ok(true)
}

/// The edges of part `k` that round `r` reads: the `edges` and `locate` steps' for round 0,
/// else round `r - 1`'s; sorted, each once.
fn round_input(
    work: &WorkDir,
    plan: &ClusterPlan,
    r: u32,
    k: usize,
) -> Result<Vec<(u64, u64)>, Error> {
    let mut bytes = Vec::new();
    if r == 0 {
        for p in 0..work.partitions() {
            let name = format!("edges-{p:05}");
            bytes.extend(read_output(
                work,
                &name,
                &step("edges", Some(("partition", p))),
                "edges",
                k,
            )?);
        }
        for s in 0..work.shards() {
            let name = format!("locate-{s:05}");
            bytes.extend(read_part(
                work,
                &name,
                &step("locate", Some(("shard", s))),
                "edges",
                plan.parts,
                k,
            )?);
        }
    } else {
        for j in 0..plan.parts {
            let name = format!("star-{:04}-{j:05}", r - 1);
            let st = step(&format!("star --round {}", r - 1), Some(("part", j)));
            bytes.extend(read_output(work, &name, &st, "edges", k)?);
        }
    }
    let mut e: Vec<(u64, u64)> = bytes
        .chunks_exact(16)
        .map(|c| {
            let mut r = Take::new(c);
            (r.le::<u64>(), r.le::<u64>())
        })
        .collect();
    drop(bytes);
    e.par_sort_unstable();
    e.dedup();
    Ok(e)
}

/// Each node of `edges` (sorted) with its neighbours.
fn nodes(edges: &[(u64, u64)]) -> impl Iterator<Item = (u64, &[(u64, u64)])> {
    edges.chunk_by(|a, b| a.0 == b.0).map(|c| (c[0].0, c))
}

/// Whether every node of `edges` is a centre (all its neighbours larger) or a leaf (one
/// neighbour, smaller): then, over every part, the edges are stars around each component's
/// smallest node.
fn are_stars(edges: &[(u64, u64)]) -> bool {
    nodes(edges).all(|(u, n)| n[0].1 > u || (n.len() == 1 && n[0].1 < u))
}

/// Step 3: round `r` of part `k` (large-star when `r` is even, small-star when odd). `None`
/// when done already, else whether its input edges were stars already.
pub fn star(work: &WorkDir, r: u32, k: usize) -> Result<Option<bool>, Error> {
    let name = format!("star-{r:04}-{k:05}");
    let Some((_lock, t0, plan)) = begin(work, &name)? else {
        return Ok(None);
    };
    check_part(&plan, k)?;
    let input = round_input(work, &plan, r, k)?;
    let stars = are_stars(&input);
    let mut out: Vec<(usize, [u8; 16])> = Vec::new();
    let mut emit = |v: u64, m: u64| {
        out.push((plan.part(v), le2(v, m)));
        out.push((plan.part(m), le2(m, v)));
    };
    for (u, n) in nodes(&input) {
        if r.is_multiple_of(2) {
            // Large-star: every larger neighbour to the smallest of the neighbourhood.
            let m = u.min(n[0].1);
            for &(_, v) in n.iter().filter(|e| e.1 > u) {
                emit(v, m);
            }
        } else if n[0].1 < u {
            // Small-star: the node and its smaller neighbours to the smallest of them.
            let m = n[0].1;
            for v in n.iter().map(|e| e.1).filter(|&v| v < u).chain([u]) {
                if v != m {
                    emit(v, m);
                }
            }
        }
    }
    out.par_sort_by_key(|e| e.0);
    let mut o = Outputs::new(work, &name);
    o.write("edges", plan.parts, &out)?;
    let summary = StepSummary {
        stars,
        edges: input.len() as u64,
        ..Default::default()
    };
    o.finish(summary, t0)?;
    Ok(Some(stars))
}

fn check_part(plan: &ClusterPlan, k: usize) -> Result<(), Error> {
    if k >= plan.parts {
        return Err(Error::Param(format!(
            "part {k} does not exist: the plan has {} (0 to {})",
            plan.parts,
            plan.parts - 1
        )));
    }
    Ok(())
}

/// Whether round `r`'s every part found its edges stars (the rounds are over, and round `r`'s
/// input holds the roots); `None` while some part of it has not run.
pub fn round_done(work: &WorkDir, r: u32) -> Result<Option<bool>, Error> {
    // Once `cluster` is done its task files are gone: every round is over (a rerun's loop of
    // `star` rounds, as `neardup.ray` runs it, ends at once instead of never).
    if clustered(work)? {
        return Ok(Some(true));
    }
    let plan = read_plan(work)?;
    let mut all = true;
    for k in 0..plan.parts {
        match summary_of(work, &format!("star-{r:04}-{k:05}"))? {
            Some(s) => all &= s.stars,
            None => return Ok(None),
        }
    }
    Ok(Some(all))
}

/// The last round, whose input edges were stars in every part.
fn last_round(work: &WorkDir) -> Result<u32, Error> {
    let mut r = 0;
    loop {
        match round_done(work, r)? {
            Some(true) => return Ok(r),
            Some(false) => r += 1,
            None => {
                return Err(Error::Work {
                    path: work.cluster_task("").display().to_string(),
                    msg: format!(
                        "round {r} of the components has not run in every part: run `neardup \
                         stage cluster --step star --round {r}` for each part first"
                    ),
                })
            }
        }
    }
}

/// Step 3, every round in this process, each round's parts in parallel: returns the rounds.
pub fn stars(work: &WorkDir) -> Result<u32, Error> {
    let plan = read_plan(work)?;
    let mut r = 0;
    loop {
        (0..plan.parts)
            .into_par_iter()
            .map(|k| star(work, r, k).map(|_| ()))
            .collect::<Result<Vec<()>, Error>>()?;
        if round_done(work, r)? == Some(true) {
            return Ok(r + 1);
        }
        r += 1;
    }
}

/// Step 4 for part `k`: its members' roots, to their shards; its pairs and exact relations,
/// to their roots' parts. `false` when done.
pub fn roots(work: &WorkDir, k: usize) -> Result<bool, Error> {
    let name = format!("roots-{k:05}");
    let Some((_lock, t0, plan)) = begin(work, &name)? else {
        return Ok(false);
    };
    check_part(&plan, k)?;
    let last = last_round(work)?;
    let input = round_input(work, &plan, last, k)?;
    // Each member of the part and its root (its star's centre).
    let root: Vec<(u64, u64)> = nodes(&input).map(|(u, n)| (u, u.min(n[0].1))).collect();
    drop(input);
    let root_of = |r: u64| -> Option<u64> {
        root.binary_search_by_key(&r, |x| x.0)
            .ok()
            .map(|i| root[i].1)
    };
    let mut places = Vec::new();
    for s in 0..work.shards() {
        let name = format!("locate-{s:05}");
        places.extend(read_part(
            work,
            &name,
            &step("locate", Some(("shard", s))),
            "places",
            plan.parts,
            k,
        )?);
    }
    let mut requests: Vec<(usize, [u8; 24])> = Vec::new();
    for c in places.chunks_exact(24) {
        let mut rd = Take::new(c);
        let (rank, s, row) = (rd.le::<u64>(), rd.le::<u64>() as usize, rd.le::<u64>());
        if let Some(root) = root_of(rank) {
            requests.push((s, le3(row, rank, root)));
        }
    }
    drop(places);
    if requests.len() != root.len() {
        return Err(Error::Work {
            path: work.cluster_task("").display().to_string(),
            msg: format!(
                "{} of part {k}'s {} members were located: run the cluster steps again in an \
                 empty work directory",
                requests.len(),
                root.len()
            ),
        });
    }
    requests.par_sort_unstable();
    // Pairs, each once, and exact relations, to the part of their root.
    let mut pairs: Vec<Vec<u8>> = Vec::new();
    for p in 0..work.partitions() {
        let name = format!("edges-{p:05}");
        let bytes = read_output(
            work,
            &name,
            &step("edges", Some(("partition", p))),
            "pairs",
            k,
        )?;
        pairs.extend(bytes.chunks_exact(33).map(|c| c.to_vec()));
    }
    pairs.par_sort_unstable_by(|a, b| a[..16].cmp(&b[..16]).then(a.cmp(b)));
    pairs.dedup_by(|a, b| a[..16] == b[..16]);
    let mut links: Vec<(usize, Vec<u8>)> = Vec::new();
    for p in pairs {
        let a = Take::new(&p).le::<u64>();
        let root = root_of(a).expect("a pair's ends are members");
        let mut rec = vec![0u8];
        rec.extend_from_slice(&p);
        links.push((plan.part(root), rec));
    }
    for s in 0..work.shards() {
        let name = format!("locate-{s:05}");
        let st = step("locate", Some(("shard", s)));
        let bytes = read_part(work, &name, &st, "exact", plan.parts, k)?;
        for c in bytes.chunks_exact(16) {
            let r = Take::new(c).le::<u64>();
            let root = root_of(r).expect("an exact copy is a member");
            let mut rec = vec![1u8];
            rec.extend_from_slice(c);
            links.push((plan.part(root), rec));
        }
    }
    links.par_sort_by_key(|l| l.0);
    let mut out = Outputs::new(work, &name);
    out.write("requests", work.shards(), &requests)?;
    out.write("links", plan.parts, &links)?;
    out.finish(StepSummary::default(), t0)?;
    Ok(true)
}

/// Step 5 for shard `s`: its members' attributes, to their roots' parts; its documents per
/// group. `false` when done.
pub fn attributes(work: &WorkDir, s: usize) -> Result<bool, Error> {
    work.check_shard(s)?;
    let name = format!("attributes-{s:05}");
    let Some((_lock, t0, plan)) = begin(work, &name)? else {
        return Ok(false);
    };
    let rs = crate::stages::sharded::rank::summary(work)?;
    let base: u64 = rs.rows[..s].iter().sum();
    let mut want: Vec<(u64, u64, u64)> = Vec::new();
    for k in 0..plan.parts {
        let bytes = read_output(
            work,
            &format!("roots-{k:05}"),
            &step("roots", Some(("part", k))),
            "requests",
            s,
        )?;
        want.extend(bytes.chunks_exact(24).map(|c| {
            let mut r = Take::new(c);
            (r.le::<u64>(), r.le::<u64>(), r.le::<u64>())
        }));
    }
    want.sort_unstable();
    let grouped = work.fields().group.is_some();
    let keep_field = work.fields().keep.is_some();
    let mut groups = vec![0u64; rs.groups.len()];
    if grouped {
        for batch in work.open_table(&work.rank_file(s), "rank", &["group"])? {
            for &g in u32s(&batch?, "group") {
                groups[g as usize] += 1;
            }
        }
    } else if let Some(g) = groups.first_mut() {
        *g = rs.rows[s];
    }
    let mut member_group = vec![0u32; want.len()];
    if grouped {
        let mut at = 0usize;
        let mut row = 0u64;
        for batch in work.open_table(&work.rank_file(s), "rank", &["group"])? {
            let batch = batch?;
            let g = u32s(&batch, "group");
            while at < want.len() && want[at].0 < row + g.len() as u64 {
                member_group[at] = g[(want[at].0 - row) as usize];
                at += 1;
            }
            row += g.len() as u64;
        }
    }
    let mut cols = vec!["id", "words"];
    if keep_field {
        cols.push("keep");
    }
    let mut out: Vec<(usize, Vec<u8>)> = Vec::with_capacity(want.len());
    let mut at = 0usize;
    let mut row = 0u64;
    for batch in work.open_table(&work.sign_file(s), "sign", &cols)? {
        let batch = batch?;
        let id = strings(&batch, "id");
        let w = u32s(&batch, "words");
        let kv = if keep_field {
            f64s(&batch, "keep")
        } else {
            &[]
        };
        while at < want.len() && want[at].0 < row + batch.num_rows() as u64 {
            let (r, rank, root) = want[at];
            let i = (r - row) as usize;
            let mut rec = as_fields(&[root, rank, base + r]).into_owned();
            put(&mut rec, kv.get(i).copied().unwrap_or(0.0));
            put(&mut rec, w[i]);
            put(&mut rec, member_group[at]);
            put_bytes(&mut rec, id.value(i).as_bytes());
            out.push((plan.part(root), rec));
            at += 1;
        }
        row += batch.num_rows() as u64;
    }
    if at != want.len() {
        return Err(Error::Work {
            path: work.sign_file(s).display().to_string(),
            msg: format!("holds {row} rows, fewer than its members ask for: sign shard {s} again"),
        });
    }
    out.par_sort_by_key(|e| e.0);
    let mut o = Outputs::new(work, &name);
    o.write("members", plan.parts, &out)?;
    let summary = StepSummary {
        counts: PartCounts {
            groups: groups.into_iter().map(|d| (d, 0, 0)).collect(),
            ..Default::default()
        },
        ..Default::default()
    };
    o.finish(summary, t0)?;
    Ok(true)
}

/// One member of a part's clusters.
struct Member {
    root: u64,
    rank: u64,
    doc: u64,
    value: f64,
    words: u32,
    group: u32,
    /// Its id: `len` bytes from `at` of the part's id arena.
    at: u64,
    len: u32,
}

/// Step 6 for part `k`: the clusters whose roots it holds. `false` when done.
pub fn clusters(work: &WorkDir, k: usize) -> Result<bool, Error> {
    let name = format!("clusters-{k:05}");
    let Some((_lock, t0, plan)) = begin(work, &name)? else {
        return Ok(false);
    };
    let cfg = work.config();
    check_part(&plan, k)?;
    let rs = crate::stages::sharded::rank::summary(work)?;
    let mut offsets = vec![0u64];
    for &r in &rs.rows {
        offsets.push(offsets.last().unwrap() + r);
    }
    let mut members: Vec<Member> = Vec::new();
    // Every member's id, one after another (a `String` apiece would cost its allocation).
    let mut names = String::new();
    for s in 0..work.shards() {
        let bytes = read_output(
            work,
            &format!("attributes-{s:05}"),
            &step("attributes", Some(("shard", s))),
            "members",
            k,
        )?;
        let mut rd = Take::new(&bytes);
        while !rd.done() {
            let (root, rank, doc) = (rd.le::<u64>(), rd.le::<u64>(), rd.le::<u64>());
            let (value, words, group) = (rd.le::<f64>(), rd.le::<u32>(), rd.le::<u32>());
            let id = rd.str();
            members.push(Member {
                root,
                rank,
                doc,
                value,
                words,
                group,
                at: names.len() as u64,
                len: id.len() as u32,
            });
            names.push_str(id);
        }
    }
    members.par_sort_unstable_by_key(|m| m.rank);
    let m = members.len();
    let index = |r: u64| -> u32 {
        members
            .binary_search_by_key(&r, |x| x.rank)
            .expect("a member of the part's clusters") as u32
    };
    // Pairs (by ranks; under the greedy rule each dropped unit's verdict) and exact relations,
    // of these clusters.
    let mut pairs: Vec<(u64, u64, f64, Option<f64>)> = Vec::new();
    let mut exact: Vec<(u64, u64)> = Vec::new();
    for j in 0..plan.parts {
        let bytes = read_output(
            work,
            &format!("roots-{j:05}"),
            &step("roots", Some(("part", j))),
            "links",
            k,
        )?;
        let mut rd = Take::new(&bytes);
        while !rd.done() {
            if rd.le::<u8>() == 0 {
                let (a, b, est) = (rd.le::<u64>(), rd.le::<u64>(), rd.le::<f64>());
                let has = rd.le::<u8>() == 1;
                let j = rd.le::<f64>();
                pairs.push((a, b, est, has.then_some(j)));
            } else {
                exact.push((rd.le::<u64>(), rd.le::<u64>()));
            }
        }
    }
    pairs.par_sort_unstable_by_key(|p| (p.0, p.1));
    let greedy = cfg.cluster == ClusterRule::Greedy;
    let (root, pairs): (Vec<u32>, _) = if greedy {
        let rank_of: Vec<u64> = members.iter().map(|x| x.rank).collect();
        super::greedy_roots(
            m,
            &rank_of,
            &exact,
            &pairs,
            index,
            |i| {
                let x = &members[i];
                crate::stages::sharded::greedy::place(
                    keep_key(cfg.keep, x.words, x.value, x.doc),
                    x.rank,
                )
            },
            cfg.confirm == Confirm::Jaccard,
        )
    } else {
        (members.iter().map(|x| index(x.root)).collect(), pairs)
    };

    let mut counts = PartCounts {
        members: m as u64,
        pairs: pairs.len() as u64,
        groups: vec![(0, 0, 0); rs.groups.len()],
        id_bytes: names.len() as u64,
        ..Default::default()
    };
    let mut size: BTreeMap<u32, u64> = BTreeMap::new();
    for (i, &r) in root.iter().enumerate() {
        if r as usize != i {
            *size.entry(r).or_insert(1) += 1;
        }
    }
    for &s in size.values() {
        *counts.sizes.entry(s).or_default() += 1;
    }
    let survives: Vec<bool> = if greedy || cfg.keep == Keep::SmallestId {
        (0..m).map(|i| root[i] as usize == i).collect()
    } else {
        crate::stages::dedup::best_of_clusters(
            &root,
            |i| keep_key(cfg.keep, members[i].words, members[i].value, members[i].doc),
            |i| members[i].rank,
        )
    };
    let (largest_size, diameter) =
        super::largest_hops(&root, |i| members[i].rank, index, &pairs, &exact);
    if largest_size > 0 {
        let big = size
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(&r, _)| members[r as usize].rank)
            .expect("a cluster");
        counts.biggest = Some((largest_size, big, diameter));
    }

    // Clusters by root in id order, members in id order: as `dedup --clusters`.
    let mut by_root: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (i, &r) in root.iter().enumerate() {
        by_root.entry(r).or_default().push(i as u32);
    }
    let id = |i: u32| {
        let x = &members[i as usize];
        &names[x.at as usize..x.at as usize + x.len as usize]
    };
    let mut o = Outputs::new(work, &name);
    // Keyed by the root's rank (merged over the parts by `finish`: a greedy root may lie in
    // another part's range).
    let out = o.open("lines", 1)?;
    let (mut line, mut rec) = (Vec::new(), Vec::new());
    for (&r, ms) in &by_root {
        line.clear();
        put_cluster_line(&mut line, id(r), ms.iter().map(|&i| id(i)));
        rec.clear();
        rec.extend_from_slice(&as_fields(&[members[r as usize].rank, 0]));
        put_bytes(&mut rec, &line);
        out.push(0, &rec)?;
    }
    let shard_of = |d: u64| offsets.partition_point(|&o| o <= d) - 1;
    let mut largest: Vec<(&u32, &Vec<u32>)> = by_root.iter().collect();
    largest.sort_by_key(|(_, m)| std::cmp::Reverse(m.len()));
    largest.truncate(EXAMPLE_CLUSTERS);
    counts.largest_roots = largest
        .iter()
        .map(|(&r, _)| members[r as usize].rank)
        .collect();
    counts.largest = largest
        .into_iter()
        .map(|(&r, ms)| LargeCluster {
            root: id(r).to_string(),
            size: ms.len(),
            members: ms
                .iter()
                .take(EXAMPLE_MEMBERS)
                .map(|&i| {
                    let d = members[i as usize].doc;
                    let s = shard_of(d);
                    (s, d - offsets[s], id(i).to_string())
                })
                .collect(),
        })
        .collect();
    // Pairs' lines, by ranks (merged over the parts by `finish`).
    let out = o.open("pairs", 1)?;
    for &(a, b, est, jac) in &pairs {
        let line = pair_line(id(index(a)), id(index(b)), est, jac);
        rec.clear();
        rec.extend_from_slice(&as_fields(&[a, b]));
        put_bytes(&mut rec, line.as_bytes());
        out.push(0, &rec)?;
    }
    let written = |i: usize| !cfg.drop || survives[i];
    let grouped = work.fields().group.is_some();
    for (i, x) in members.iter().enumerate() {
        if !written(i) {
            counts.not_written += 1;
        }
        if grouped {
            let c = &mut counts.groups[x.group as usize];
            if root[i] as usize == i {
                c.1 += 1;
            }
            if !written(i) {
                c.2 += 1;
            }
        }
    }
    // Chaining rows: each dropped member and its cluster's survivor, unless identical copies
    // or a confirmed pair already; by the dropped member's rank.
    let mut unit: Vec<u32> = (0..m as u32).collect();
    for &(r, e) in &exact {
        unit[index(r) as usize] = index(e);
    }
    let mut survivor: HashMap<u32, u32> = HashMap::new();
    for i in (0..m).filter(|&i| survives[i]) {
        survivor.insert(root[i], i as u32);
    }
    // Asked without the greedy rule only, whose `pairs` are sorted by their ranks (which
    // follow the members' order).
    let confirmed = |a: u32, b: u32| {
        let key = (members[a as usize].rank, members[b as usize].rank);
        pairs.binary_search_by_key(&key, |p| (p.0, p.1)).is_ok()
    };
    let out = o.open("chaining", 1)?;
    // Under the greedy rule every dropped document joined a confirmed surviving near
    // duplicate: there is none to test.
    for i in (0..m).filter(|&i| !greedy && !survives[i]) {
        let s = survivor[&root[i]] as usize;
        let (a, b) = (unit[i].min(unit[s]), unit[i].max(unit[s]));
        if a != b && !confirmed(a, b) {
            let r = members[i].rank;
            out.push(0, &as_fields(&[r, r, members[i].doc, members[s].doc]))?;
        }
    }
    // Each member's verdict, to its shard: row, survives, tag, survivor; in the order of the
    // documents, which is that of (shard, row).
    let mut by_doc: Vec<u32> = (0..m as u32).collect();
    by_doc.par_sort_unstable_by_key(|&i| members[i as usize].doc);
    let out = o.open("verdicts", work.shards())?;
    for i in by_doc {
        let (x, i) = (&members[i as usize], i as usize);
        let s = shard_of(x.doc);
        rec.clear();
        rec.extend_from_slice(&as_fields(&[x.doc - offsets[s]]));
        rec.push(survives[i] as u8);
        put_bytes(&mut rec, id(root[i]).as_bytes());
        put_bytes(&mut rec, id(survivor[&root[i]]).as_bytes());
        out.push(s, &rec)?;
    }
    o.finish(
        StepSummary {
            counts,
            ..Default::default()
        },
        t0,
    )?;
    Ok(true)
}

/// Step 7 for shard `s`: its cluster file. `false` when done.
pub fn verdicts(work: &WorkDir, s: usize) -> Result<bool, Error> {
    work.check_shard(s)?;
    let _lock = unit(work, &format!("verdicts-{s:05}"))?;
    work.remove_partials("cluster", &format!("{s:05}"))?;
    if clustered(work)? || work.table_done(&work.cluster_file(s))? {
        return Ok(false);
    }
    let cfg = work.config();
    let plan = read_plan(work)?;
    let rows = crate::stages::sharded::rank::summary(work)?.rows[s] as usize;
    // Each member row's verdict: survives, tag, survivor.
    let mut got: Vec<(u64, bool, String, String)> = Vec::new();
    for k in 0..plan.parts {
        let bytes = read_output(
            work,
            &format!("clusters-{k:05}"),
            &step("clusters", Some(("part", k))),
            "verdicts",
            s,
        )?;
        let mut rd = Take::new(&bytes);
        while !rd.done() {
            let row = rd.le::<u64>();
            let survives = rd.le::<u8>() == 1;
            let (tag, survivor) = (rd.str().to_string(), rd.str().to_string());
            got.push((row, survives, tag, survivor));
        }
    }
    got.sort_unstable_by_key(|g| g.0);
    if got.windows(2).any(|w| w[0].0 == w[1].0) || got.last().is_some_and(|g| g.0 >= rows as u64) {
        return Err(Error::Work {
            path: work.cluster_task("").display().to_string(),
            msg: format!(
                "shard {s} has a member row twice or past its end: run the cluster steps again \
                 in an empty work directory"
            ),
        });
    }
    let mut columns = vec![
        Field::new("tag", DataType::Utf8, true),
        col("survives", DataType::Boolean),
    ];
    if cfg.records_survivor() {
        columns.push(Field::new("survivor", DataType::Utf8, true));
    }
    let mut w = work.create_table(&work.cluster_file(s), columns, &[])?;
    let mut next = 0usize;
    let mut at = 0;
    loop {
        let end = (at + BATCH_ROWS).min(rows);
        let (mut tags, mut survive, mut survivor) = (Vec::new(), Vec::new(), Vec::new());
        for r in at..end {
            match got.get(next).filter(|g| g.0 == r as u64) {
                Some(g) => {
                    tags.push(Some(g.2.as_str()));
                    survive.push(g.1);
                    survivor.push(Some(g.3.as_str()));
                    next += 1;
                }
                None => {
                    tags.push(None);
                    survive.push(true);
                    survivor.push(None);
                }
            }
        }
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(tags)),
            Arc::new(BooleanArray::from(survive)),
        ];
        if cfg.records_survivor() {
            cols.push(Arc::new(StringArray::from(survivor)));
        }
        if end == rows {
            w.write_then_finish(cols)?;
            break;
        }
        w.write(cols)?;
        at = end;
    }
    Ok(true)
}

/// The sorted runs of every part's output `output`, merged by their keys, streaming: `head`
/// bytes a record begin with, the first 16 its keys (two u64), and `tail(head)` the bytes
/// after them.
fn merge_runs(
    work: &WorkDir,
    plan: &ClusterPlan,
    output: &str,
    head: usize,
    tail: impl Fn(&[u8]) -> usize,
    mut f: impl FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    use crate::stages::sharded::sliced::SliceReader;
    let mut readers: Vec<SliceReader> = Vec::new();
    for k in 0..plan.parts {
        let name = format!("clusters-{k:05}");
        let st = step("clusters", Some(("part", k)));
        let s = need_summary(work, &name, &st)?;
        let (file, slices) = &s.outputs[output];
        readers.push(SlicedFile::open(&work.cluster_task(file), &st)?.stream(&slices[0])?);
    }
    let next = |r: &mut SliceReader| -> Result<Option<Vec<u8>>, Error> {
        let mut rec = vec![0u8; head];
        if !r.next(&mut rec)? {
            return Ok(None);
        }
        let more = tail(&rec);
        rec.resize(head + more, 0);
        if more > 0 && !r.next(&mut rec[head..])? {
            unreachable!("a record's tail is checked to lie in its slice");
        }
        Ok(Some(rec))
    };
    let key = |rec: &[u8]| {
        let mut rd = Take::new(rec);
        (rd.le::<u64>(), rd.le::<u64>())
    };
    let mut heads: Vec<Option<Vec<u8>>> = Vec::new();
    let mut heap = std::collections::BinaryHeap::new();
    for (k, r) in readers.iter_mut().enumerate() {
        let rec = next(r)?;
        if let Some(rec) = &rec {
            heap.push(std::cmp::Reverse((key(rec), k)));
        }
        heads.push(rec);
    }
    while let Some(std::cmp::Reverse((_, k))) = heap.pop() {
        let rec = heads[k].take().expect("a record");
        f(&rec[16..])?;
        heads[k] = next(&mut readers[k])?;
        if let Some(rec) = &heads[k] {
            heap.push(std::cmp::Reverse((key(rec), k)));
        }
    }
    Ok(())
}

/// Step 8: the clusters and pairs files, the chaining rows and the summary; the task files
/// removed. `None` when done already.
pub fn finish(work: &WorkDir) -> Result<Option<ClusterSummary>, Error> {
    let _lock = work.lock("cluster")?;
    work.remove_partials("cluster", "")?;
    if clustered(work)? {
        return Ok(None);
    }
    let t0 = Instant::now();
    let plan = read_plan(work)?;
    let rs = crate::stages::sharded::rank::summary(work)?;
    let n = plan.documents;
    for s in 0..work.shards() {
        if !work.table_done(&work.cluster_file(s))? {
            return Err(work.missing(&work.cluster_file(s), &step("verdicts", Some(("shard", s)))));
        }
    }
    let mut stats = ClusterStats {
        order_seconds: rs.seconds,
        wordless: rs.wordless,
        exact_duplicates: rs.exact_duplicates,
        ..Default::default()
    };
    super::add_confirm_stats(work, &mut stats)?;
    let mut seconds = 0.0;
    let mut groups: Vec<GroupCounts> = rs
        .groups
        .iter()
        .map(|g| GroupCounts {
            group: g.clone(),
            ..Default::default()
        })
        .collect();
    for s in 0..work.shards() {
        let a = need_summary(
            work,
            &format!("attributes-{s:05}"),
            &step("attributes", Some(("shard", s))),
        )?;
        seconds += a.seconds;
        for (g, &(docs, _, _)) in groups.iter_mut().zip(&a.counts.groups) {
            g.documents += docs;
        }
    }
    let mut members = 0u64;
    let mut id_bytes = 0u64;
    let mut not_written = 0u64;
    let mut largest: Vec<(u64, LargeCluster)> = Vec::new();
    let mut biggest: Option<(u64, u64, u64)> = None;
    let mut parts = Vec::new();
    for k in 0..plan.parts {
        let c = need_summary(
            work,
            &format!("clusters-{k:05}"),
            &step("clusters", Some(("part", k))),
        )?;
        seconds += c.seconds;
        let c = c.counts;
        members += c.members;
        id_bytes += c.id_bytes;
        not_written += c.not_written;
        stats.pairs_confirmed += c.pairs;
        for (&size, &count) in &c.sizes {
            *stats.cluster_sizes.entry(size).or_default() += count;
            stats.clusters += count;
            stats.documents_in_clusters += size * count;
        }
        for (g, &(_, clusters, dropped)) in groups.iter_mut().zip(&c.groups) {
            g.clusters += clusters;
            g.documents_written += dropped;
        }
        largest.extend(c.largest_roots.into_iter().zip(c.largest));
        if let Some(b) = c.biggest {
            if biggest.is_none_or(|x| b.0 > x.0 || (b.0 == x.0 && b.1 < x.1)) {
                biggest = Some(b);
            }
        }
        parts.push(k);
    }
    for g in &mut groups {
        // Counted as not written above.
        g.documents_written = g.documents - g.documents_written;
    }
    stats.near_duplicates = stats.documents_in_clusters - stats.clusters - stats.exact_duplicates;
    // Largest first, then by root in id order.
    largest.sort_by_key(|(r, c)| (std::cmp::Reverse(c.size), *r));
    largest.truncate(EXAMPLE_CLUSTERS);
    let largest: Vec<LargeCluster> = largest.into_iter().map(|(_, c)| c).collect();
    let mut rounds = 0;
    if work.config().cluster == ClusterRule::Greedy {
        let (last, _) = crate::stages::sharded::greedy::verdicts(work, |_| Ok(()))?;
        rounds = last + 1;
        let counts = crate::stages::sharded::greedy::final_counts(work)?;
        stats.pairs_checked += counts.checked;
        stats.pairs_rejected += counts.rejected;
        stats.pairs_other_group += counts.other_group;
    }

    let dir = work.clusters_jsonl();
    let dir = dir.parent().expect("a file in the work directory");
    std::fs::create_dir_all(dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
    let mut out = Output::with_checksum(&work.clusters_jsonl().display().to_string())?;
    // Clusters' lines: their roots' ranks (and a 0), the line's length, the line.
    let len = |h: &[u8]| Take::new(&h[16..]).le::<u32>() as usize;
    merge_runs(work, &plan, "lines", 20, len, |r| out.write_all(&r[4..]))?;
    let (clusters_checksum, _) = out.checksum().expect("kept");
    out.finish()?;
    let mut out = Output::with_checksum(&work.pairs_jsonl().display().to_string())?;
    // Pairs' lines: ranks a and b, the line's length, the line.
    merge_runs(work, &plan, "pairs", 20, len, |r| out.write_all(&r[4..]))?;
    let (pairs_checksum, _) = out.checksum().expect("kept");
    out.finish()?;
    // Chaining rows: the dropped member's rank (twice, as the keys), its document and its
    // survivor's.
    let mut w = work.create_keyed(&work.chaining_file())?;
    merge_runs(work, &plan, "chaining", 32, |_| 0, |row| w.values(row))?;
    w.finish()?;

    stats.cluster_seconds = seconds + t0.elapsed().as_secs_f64();
    let words = n.div_ceil(64);
    let heap_bytes = (words + words.div_ceil(8) + 1) * 8;
    let (largest_cluster, _, largest_cluster_diameter) = biggest.unwrap_or((0, 0, 0));
    let summary = ClusterSummary {
        stats,
        largest,
        groups,
        documents_written: n - not_written,
        table_bytes: heap_bytes + members * 60 + id_bytes,
        clusters_checksum,
        pairs_checksum,
        rounds,
        largest_cluster,
        largest_cluster_diameter,
    };
    work.write_json(&work.cluster_summary(), &summary)?;
    super::remove_tasks(work)?;
    Ok(Some(summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round of the alternating algorithm in memory, over one part.
    fn components(edges: &[(u64, u64)]) -> (Vec<(u64, u64)>, u32) {
        let mut e: Vec<(u64, u64)> = edges.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect();
        let mut r = 0;
        loop {
            e.sort_unstable();
            e.dedup();
            if are_stars(&e) {
                return (nodes(&e).map(|(u, n)| (u, u.min(n[0].1))).collect(), r);
            }
            let mut out = Vec::new();
            for (u, n) in nodes(&e) {
                if r % 2 == 0 {
                    let m = u.min(n[0].1);
                    for &(_, v) in n.iter().filter(|x| x.1 > u) {
                        out.extend([(v, m), (m, v)]);
                    }
                } else if n[0].1 < u {
                    let m = n[0].1;
                    for v in n.iter().map(|x| x.1).filter(|&v| v < u).chain([u]) {
                        if v != m {
                            out.extend([(v, m), (m, v)]);
                        }
                    }
                }
            }
            e = out;
            r += 1;
        }
    }

    fn union_find(edges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let n = edges
            .iter()
            .map(|e| e.0.max(e.1))
            .max()
            .map_or(0, |x| x + 1) as usize;
        let mut uf = crate::index::unionfind::UnionFind::new(n);
        let mut seen = std::collections::BTreeSet::new();
        for &(a, b) in edges {
            uf.union(a as u32, b as u32);
            seen.extend([a, b]);
        }
        seen.into_iter()
            .map(|v| (v, uf.find(v as u32) as u64))
            .collect()
    }

    #[test]
    fn stars_find_the_roots_union_find_finds_on_chains_stars_and_many_small_graphs() {
        let mut graphs: Vec<Vec<(u64, u64)>> = vec![
            vec![(0, 1)],
            (0..1000).map(|i| (i, i + 1)).collect(),
            (0..1000).rev().map(|i| (i + 1, i)).collect(),
            (1..500).map(|i| (0, i)).collect(),
            (0..499).map(|i| (i, 499)).collect(),
            (0..300).map(|i| (2 * i, 2 * i + 1)).collect(),
        ];
        // A chain in a shuffled order of ranks, and random graphs.
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let perm: Vec<u64> = {
            let mut p: Vec<u64> = (0..2000).collect();
            for i in (1..p.len()).rev() {
                p.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            p
        };
        graphs.push((0..1999).map(|i| (perm[i], perm[i + 1])).collect());
        for size in [10u64, 100, 3000] {
            graphs.push(
                (0..size)
                    .map(|_| (next() % size, next() % size))
                    .filter(|e| e.0 != e.1)
                    .collect(),
            );
        }
        for g in &graphs {
            let (roots, rounds) = components(g);
            assert_eq!(roots, union_find(g), "graph of {} edges", g.len());
            assert!(rounds < 60, "{rounds} rounds");
        }
    }
}
