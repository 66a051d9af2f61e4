//! The greedy rounds' jobs after round 0 (round 0's are `confirm`'s): each partition's job of
//! a round, over its documents gathered whole or, when its walks need more than a group holds,
//! in blocks (`blocks.rs`); and every round in one process.

use std::time::Instant;

use rayon::prelude::*;

use super::blocks;
use super::{
    decide, event_of, need_round_before, read_state, round_summary, rows_of, settle, start,
    write_events, Cursor, Event, Kind, Part, PartRound, Start, Status, Tests, EVENT_BYTES,
};
use crate::error::Error;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{BucketTables, JaccardCache, INDEX_FROM};
use crate::stages::sharded::confirm::{block_bytes, GROUP_DOCS};
use crate::stages::sharded::gather::Docs;
use crate::stages::sharded::WorkDir;
/// The job of partition `partition` in round `round` (1 on; round 0's is `confirm`'s), once
/// round `round - 1` is settled, within the default task memory. Returns its summary, or
/// `None` when it ran already.
pub fn round(
    work: &WorkDir,
    round: u32,
    partition: usize,
    progress: &ProgressFactory,
) -> Result<Option<PartRound>, Error> {
    let memory = crate::options::Mib(crate::options::defaults::TASK_MEMORY_MIB);
    round_within(
        work,
        round,
        partition,
        GROUP_DOCS,
        block_bytes(memory),
        progress,
    )
}

/// [`round`], where walks that need more than `max_docs` documents are walked over them in
/// blocks of about `block_bytes` of signatures and sets (`blocks.rs`): the answers are
/// the same, the work counted is the blocks'.
pub fn round_within(
    work: &WorkDir,
    round: u32,
    partition: usize,
    max_docs: usize,
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<Option<PartRound>, Error> {
    match job(
        work,
        round,
        partition,
        max_docs,
        block_bytes,
        false,
        progress,
    )? {
        Job::Ran(s) => Ok(s),
        Job::Deferred => unreachable!("a job in blocks runs when not deferred"),
    }
}

/// What [`job`] did.
enum Job {
    /// Its summary, or `None` when it ran already.
    Ran(Option<PartRound>),
    /// Nothing: its walks need blocks, and it was asked to leave those for later.
    Deferred,
}

/// [`round_within`]; with `defer`, a job whose walks need blocks stops before gathering and
/// writes nothing.
fn job(
    work: &WorkDir,
    round: u32,
    partition: usize,
    max_docs: usize,
    block_bytes: u64,
    defer: bool,
    progress: &ProgressFactory,
) -> Result<Job, Error> {
    work.check_partition(partition)?;
    if round == 0 {
        return Err(Error::Param(
            "round 0's partition jobs are `neardup stage confirm`".into(),
        ));
    }
    let _lock = work.lock(&format!("greedy-{round:05}-{partition:04}"))?;
    work.remove_partials("greedy", &format!("{round:05}-{partition:04}."))?;
    if work
        .read_json::<PartRound>(&work.part_summary(round, partition))?
        .is_some()
    {
        return Ok(Job::Ran(None));
    }
    need_round_before(work, round)?;
    let t0 = Instant::now();
    let stage = if round == 1 { "confirm" } else { "greedy" };
    let last: PartRound = work.need_json(&work.part_summary(round - 1, partition), stage)?;
    if last.answers == 0 {
        let summary = PartRound {
            seconds: t0.elapsed().as_secs_f64(),
            ..Default::default()
        };
        write_events(work, round, partition, &[], &summary)?;
        return Ok(Job::Ran(Some(summary)));
    }
    let step = progress.step(&format!("greedy round {round}, partition {partition}"));
    // The answers of the round before in this partition, and the verdicts of their units and
    // neighbours (a unit the state does not hold survives).
    let path = work.events_file(round - 1, partition);
    let mut answers = Vec::with_capacity(last.answers as usize);
    let mut c = Cursor::new(work.open_keyed(&path, stage, EVENT_BYTES)?, EVENT_BYTES);
    while let Some(v) = c.peek()? {
        answers.push(event_of(v).ok_or_else(|| {
            Error::Work {
                path: path.display().to_string(),
                msg: "an unreadable answer: run the greedy rounds again in an empty work directory"
                    .into(),
            }
        })?);
        c.advance();
    }
    let mut named: Vec<u64> = answers.iter().flat_map(|e| [e.rank, e.target]).collect();
    named.sort_unstable();
    named.dedup();
    let mut verdict = vec![Status::Survives; named.len()];
    let mut i = 0;
    read_state(work, round - 1, |v| {
        while i < named.len() && named[i] < v.rank {
            i += 1;
        }
        if i < named.len() && named[i] == v.rank {
            verdict[i] = v.status;
        }
        Ok(())
    })?;
    let status_of = |r: u64| verdict[named.binary_search(&r).expect("a named unit")];
    // Without an undecided unit whose neighbour was dropped, no walk goes on: the answers
    // stand, and those whose neighbour survives are found, without the partition's buckets.
    let waiting = |e: &Event| status_of(e.rank) == Status::Undecided;
    if !answers
        .iter()
        .any(|e| waiting(e) && e.kind == Kind::Blocked && status_of(e.target) == Status::Dropped)
    {
        let events: Vec<Event> = answers
            .iter()
            .filter(|e| waiting(e))
            .map(|&e| match status_of(e.target) {
                Status::Survives => Event {
                    kind: Kind::Found,
                    ..e
                },
                _ => e,
            })
            .collect();
        let summary = PartRound {
            undecided: events.len() as u64,
            answers: events.len() as u64,
            seconds: t0.elapsed().as_secs_f64(),
            ..Default::default()
        };
        write_events(work, round, partition, &events, &summary)?;
        return Ok(Job::Ran(Some(summary)));
    }
    let part = Part::read(work, partition)?;
    let m = &part.members;
    let mut status = vec![Status::Survives; m.len()];
    let mut prior: Vec<Option<Event>> = vec![None; m.len()];
    let mut i = 0;
    read_state(work, round - 1, |v| {
        while i < m.len() && m[i].rank < v.rank {
            i += 1;
        }
        if i < m.len() && m[i].rank == v.rank {
            status[i] = v.status;
        }
        Ok(())
    })?;
    let mut i = 0;
    for e in answers {
        while i < m.len() && m[i].rank < e.rank {
            i += 1;
        }
        if i < m.len() && m[i].rank == e.rank {
            prior[i] = Some(e);
        }
    }
    // What the walks test: each walking member, and the members of its buckets placed between
    // where it starts and itself that are not dropped. Each walk's stretch of a bucket is
    // marked at its two ends and the marks summed along the bucket once, so that the cost
    // is the buckets', not the walks' (every walk of a bucket of templated pages spans
    // most of it).
    let mut want = vec![false; m.len()];
    let (at, of) = part.buckets_of();
    let mut marks: Vec<i32> = vec![0; part.starts[part.buckets()] + part.buckets()];
    for d in 0..m.len() {
        if status[d] != Status::Undecided {
            continue;
        }
        let Start::After(after) = start(&part, &status, &prior, d) else {
            continue;
        };
        want[d] = true;
        for &b in &of[at[d]..at[d + 1]] {
            let list = part.bucket(b as usize);
            let end = list.partition_point(|&x| m[x as usize].place < m[d].place);
            let next = after.map_or(0, |a| list.partition_point(|&x| m[x as usize].place <= a));
            if next < end {
                // A bucket's marks lie at its start in the list, plus its number.
                let base = part.starts[b as usize] + b as usize;
                marks[base + next] += 1;
                marks[base + end] -= 1;
            }
        }
    }
    for b in 0..part.buckets() {
        let base = part.starts[b] + b;
        let mut open = 0;
        for (k, &x) in part.bucket(b).iter().enumerate() {
            open += marks[base + k];
            if open > 0 && status[x as usize] != Status::Dropped {
                want[x as usize] = true;
            }
        }
    }
    drop((at, of, marks));
    if want.iter().filter(|&&w| w).count() > max_docs {
        drop(step);
        if defer {
            return Ok(Job::Deferred);
        }
        let (events, counts, gathered) = blocks::later_round(
            work,
            round,
            partition,
            &part,
            &status,
            &prior,
            &want,
            block_bytes,
            progress,
        )?;
        let summary = PartRound {
            undecided: status.iter().filter(|&&s| s == Status::Undecided).count() as u64,
            answers: events.len() as u64,
            counts,
            gathered,
            seconds: t0.elapsed().as_secs_f64(),
        };
        write_events(work, round, partition, &events, &summary)?;
        return Ok(Job::Ran(Some(summary)));
    }
    step.set_message("gathering documents");
    let needed = rows_of(work.shards(), m, |k| want[k]);
    let docs = Docs::gather(work, needed, &[], progress)?;
    let local: Vec<u32> = m
        .iter()
        .zip(&want)
        .map(|(mem, &w)| {
            if w {
                docs.local_at(mem.shard as usize, mem.row)
                    .expect("a gathered member")
            } else {
                u32::MAX
            }
        })
        .collect();
    step.set_message("testing");
    let cfg = work.config();
    let cache = JaccardCache::default();
    let tests = Tests {
        tables: BucketTables {
            num_perm: cfg.params.num_perm,
            sigs: &docs.sigs,
            sets: &docs.sets,
            cache: &cache,
            groups: &docs.groups,
        },
        grouped: work.fields().group.is_some(),
        local,
        confirm: cfg.confirm,
        threshold: cfg.threshold,
        index_from: INDEX_FROM,
        cross: None,
    };
    let (events, counts) = decide(&part, &status, &prior, &tests);
    let summary = PartRound {
        undecided: status.iter().filter(|&&s| s == Status::Undecided).count() as u64,
        answers: events.len() as u64,
        counts,
        gathered: docs.rank.len() as u64,
        seconds: t0.elapsed().as_secs_f64(),
    };
    write_events(work, round, partition, &events, &summary)?;
    Ok(Job::Ran(Some(summary)))
}

/// Every round still to run, in this process: each partition's job, then the settling, until
/// every unit is decided. Returns the rounds run now.
pub fn rounds(work: &WorkDir, progress: &ProgressFactory) -> Result<u32, Error> {
    let memory = crate::options::Mib(crate::options::defaults::TASK_MEMORY_MIB);
    rounds_within(work, GROUP_DOCS, block_bytes(memory), progress)
}

/// [`rounds`], each partition's job as [`round_within`] runs it.
pub fn rounds_within(
    work: &WorkDir,
    max_docs: usize,
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<u32, Error> {
    let mut ran = 0;
    let mut r = 0;
    loop {
        if let Some(s) = round_summary(work, r)? {
            if s.undecided == 0 {
                return Ok(ran);
            }
            r += 1;
            continue;
        }
        if r > 0 {
            // The partitions' jobs are independent; most of each is reading its files. Those
            // in blocks run after, one at a time, so that the process holds one job's blocks
            // (each walks its blocks on every thread).
            let deferred: Vec<usize> = (0..work.partitions())
                .into_par_iter()
                .map(|p| job(work, r, p, max_docs, block_bytes, true, progress).map(|j| (p, j)))
                .collect::<Result<Vec<_>, Error>>()?
                .into_iter()
                .filter_map(|(p, j)| matches!(j, Job::Deferred).then_some(p))
                .collect();
            for p in deferred {
                round_within(work, r, p, max_docs, block_bytes, progress)?;
            }
        }
        settle(work, r, progress)?;
        ran += 1;
    }
}
