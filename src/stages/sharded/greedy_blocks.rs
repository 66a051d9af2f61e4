//! Round 0 of the greedy rule (`greedy.rs`) for a partition whose buckets need more documents
//! than a job holds (a giant bucket of templated pages): its documents are gathered once into
//! a [`Spill`] in blocks, and every unit's first answer is found over the blocks, one or two
//! held at a time, so that a job holds two blocks' signatures and sets however large a bucket
//! grows.
//!
//! In round 0 nothing is decided yet, so a unit's answer is its first confirmed neighbour in
//! place order. Walking its neighbours among the held blocks finds the first confirmed one
//! there, and the partition's is the earliest placed of those. Blocks are taken in the order
//! of their first placed unit; for each, every earlier block it shares a bucket with, then
//! itself. A walk tests only the neighbours in the other block (in its own, when one is held)
//! placed before its answer so far, so what it finds replaces that answer. A unit walks only
//! when the other block's first unit is placed before its answer, a pair of blocks is left out
//! when no unit of either does, and a unit neither walking nor placed before some walk's end
//! is left out of the held buckets. On a bucket of near copies the earliest blocks answer
//! nearly every unit, and most pairs are left out. The members and buckets files and the
//! answers are those of walking the partition whole; the work counted (`checked`,
//! `rejected`, ...) is the blocks'.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use rayon::prelude::*;

use super::blocks::{Input, Spilled};
use super::gather::Docs;
use super::greedy::{
    self, decide, write_events, Cross, Event, Member, Part, PartRound, Place, Status, Tests,
};
use super::spill::Spill;
use super::WorkDir;
use crate::error::Error;
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    Against, BucketCounts, BucketTables, JaccardCache, ShingleSets, INDEX_FROM,
};

/// What round 0 in blocks found.
pub(super) struct FirstRound {
    pub counts: BucketCounts,
    /// Buckets of two or more documents.
    pub buckets: u64,
    /// Seconds spent gathering the documents.
    pub gather_seconds: f64,
}

/// Run round 0 of partition `input.partition` over its documents in blocks of about
/// `block_bytes`: write its members, buckets and answers as `greedy::first_round` writes them.
pub(super) fn first_round(
    work: &WorkDir,
    input: Input,
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<FirstRound, Error> {
    let t0 = Instant::now();
    let cfg = work.config();
    let (np, rows_of) = (cfg.params.num_perm, cfg.lsh.rows);
    let Spilled {
        partition,
        docs,
        spill,
        blocks,
        locals,
        runs,
        bands,
    } = input.spill(work, block_bytes, progress)?;
    let step = progress.step(&format!("confirm, partition {partition}"));
    let block_of = |l: u32| blocks.partition_point(|b| b.docs.end <= l);
    let places = greedy::places(work, &docs.needed, &docs.rank)?;

    // One pass over the blocks' signatures: each band row's value numbered within its run
    // (the split `split_by_band` makes), and, under `--against`, which documents an index
    // matches (no unit of the rule, as in `greedy::first_round`).
    let against = if work.manifest.against.is_empty() {
        None
    } else {
        Some(Against::open_recorded(
            &work.manifest.against_resolved(),
            cfg,
        )?)
    };
    let mut matched = vec![false; docs.rank.len()];
    let mut run_of = vec![0u32; locals.len()];
    let mut by_block: Vec<Vec<u32>> = vec![Vec::new(); blocks.len()];
    for (r, run) in runs.iter().enumerate() {
        for x in run.clone() {
            run_of[x] = r as u32;
            by_block[block_of(locals[x])].push(x as u32);
        }
    }
    let mut value = vec![0u32; locals.len()];
    let mut ids: HashMap<(u32, Vec<u32>), u32> = HashMap::new();
    for (k, rows) in by_block.iter().enumerate() {
        step.set_message(format!("band values, block {} of {}", k + 1, blocks.len()));
        let held = spill.read_sigs(k)?;
        let first = blocks[k].docs.start;
        if let Some(a) = &against {
            let (m, _) = a.matches(&held.sigs, cfg)?;
            for (i, x) in m.iter().enumerate() {
                matched[first as usize + i] = x.is_some();
            }
        }
        for &x in rows {
            let x = x as usize;
            let j = bands[run_of[x] as usize] as usize;
            let off = (locals[x] - first) as usize * np + j * rows_of;
            let next = ids.len() as u32;
            let band = held.sigs[off..off + rows_of].to_vec();
            value[x] = *ids.entry((run_of[x], band)).or_insert(next);
        }
    }
    drop((ids, by_block, run_of));

    // The buckets, each its members in rank order, in the order `greedy::first_round` takes
    // them: by their members' ranks.
    let rank = &docs.rank;
    let mut order: Vec<u32> = (0..locals.len() as u32).collect();
    order.par_sort_unstable_by_key(|&x| (value[x as usize], rank[locals[x as usize] as usize]));
    let mut all: Vec<Vec<u32>> = Vec::new();
    for same in order.chunk_by(|&x, &y| value[x as usize] == value[y as usize]) {
        if same.len() >= 2 {
            all.push(same.iter().map(|&x| locals[x as usize]).collect());
        }
    }
    drop((order, value, locals));
    let buckets = all.len() as u64;
    all.par_sort_by_cached_key(|b| {
        let mut ranks: Vec<u64> = b.iter().map(|&l| rank[l as usize]).collect();
        ranks.sort_unstable();
        ranks
    });
    let lists: Vec<&[u32]> = all.iter().map(Vec::as_slice).collect();
    let (part, unit_local) = greedy::units(&docs, &lists, &|l| places[l as usize], &matched);
    drop(lists);
    drop((all, matched, places));
    part.write(work, partition)?;

    let walk = Blocked::new(&part, &unit_local, &blocks, block_of);
    let mut state = Answers {
        best: vec![NONE; part.members.len()],
        estimate: vec![0.0; part.members.len()],
        jaccard: vec![f64::NAN; part.members.len()],
        counts: BucketCounts::default(),
    };
    let tables = Held {
        work,
        docs: &docs,
        spill: &spill,
        unit_local: &unit_local,
        blocks: &blocks,
        most: blocks.iter().map(|b| b.docs.len()).max().unwrap_or(0),
    };
    for (x, &k) in walk.order.iter().enumerate() {
        step.set_message(format!("block {} of {}", x + 1, walk.order.len()));
        // The earlier blocks first: they hold the earlier neighbours, so that a unit's own
        // block is walked with its answer from them, and often not at all.
        let mut held = None;
        for &i in &walk.order[..x] {
            let Some(list) = walk.across.get(&(i, k)) else {
                continue;
            };
            if walk.worth(&part, list, i, k, &state) {
                tables.walk(&part, &walk, &[k, i], list, &mut held, &mut state)?;
            }
        }
        if !walk.alone[k].is_empty() {
            tables.walk(&part, &walk, &[k], &walk.alone[k], &mut held, &mut state)?;
        }
    }
    let m = &part.members;
    let events: Vec<Event> = (0..m.len())
        .filter(|&u| state.best[u] != NONE)
        .map(|u| {
            let t = &m[state.best[u] as usize];
            let j = state.jaccard[u];
            Event::first(
                m[u].rank,
                t.place,
                t.rank,
                state.estimate[u],
                (!j.is_nan()).then_some(j),
            )
        })
        .collect();
    let summary = PartRound {
        undecided: part.members.len() as u64,
        answers: events.len() as u64,
        counts: state.counts,
        gathered: 0,
        seconds: t0.elapsed().as_secs_f64(),
    };
    write_events(work, 0, partition, &events, &summary)?;
    Ok(FirstRound {
        counts: state.counts,
        buckets,
        gather_seconds: docs.seconds,
    })
}

/// Which buckets each block, and each two blocks, walk.
struct Blocked {
    /// Each unit's block.
    block: Vec<usize>,
    /// Blocks holding units, by their first placed unit.
    order: Vec<usize>,
    /// Each bucket's units by block, then place, and where each block's stretch lies:
    /// `(block, start, end)` in `by_block`, per bucket from `stretches[b]`.
    by_block: Vec<u32>,
    stretches: Vec<Vec<(usize, usize, usize)>>,
    /// The buckets with two or more units in a block.
    alone: Vec<Vec<u32>>,
    /// The buckets with units in both of two blocks, `(earlier, later)` in `order`.
    across: BTreeMap<(usize, usize), Vec<u32>>,
}

impl Blocked {
    fn new(
        part: &Part,
        unit_local: &[u32],
        blocks: &[super::spill::Block],
        block_of: impl Fn(u32) -> usize,
    ) -> Self {
        let m = &part.members;
        let block: Vec<usize> = unit_local.iter().map(|&l| block_of(l)).collect();
        let mut first: Vec<Option<Place>> = vec![None; blocks.len()];
        for (u, &b) in block.iter().enumerate() {
            let p = m[u].place;
            first[b] = Some(first[b].map_or(p, |q| q.min(p)));
        }
        let mut order: Vec<usize> = (0..blocks.len()).filter(|&b| first[b].is_some()).collect();
        order.sort_unstable_by_key(|&b| first[b]);
        let mut pos = vec![usize::MAX; blocks.len()];
        for (x, &b) in order.iter().enumerate() {
            pos[b] = x;
        }
        let mut by_block = Vec::new();
        let mut stretches = Vec::with_capacity(part.buckets());
        let mut alone: Vec<Vec<u32>> = vec![Vec::new(); blocks.len()];
        let mut across: BTreeMap<(usize, usize), Vec<u32>> = BTreeMap::new();
        for b in 0..part.buckets() {
            let start = by_block.len();
            by_block.extend_from_slice(part.bucket(b));
            // Stable: each block's stretch stays in place order.
            by_block[start..].sort_by_key(|&u| pos[block[u as usize]]);
            let mut s = Vec::new();
            let mut at = start;
            while at < by_block.len() {
                let c = block[by_block[at] as usize];
                let mut end = at + 1;
                while end < by_block.len() && block[by_block[end] as usize] == c {
                    end += 1;
                }
                s.push((c, at, end));
                at = end;
            }
            for (x, &(c, from, to)) in s.iter().enumerate() {
                if to - from >= 2 {
                    alone[c].push(b as u32);
                }
                for &(k, _, _) in &s[x + 1..] {
                    across.entry((c, k)).or_default().push(b as u32);
                }
            }
            stretches.push(s);
        }
        Blocked {
            block,
            order,
            by_block,
            stretches,
            alone,
            across,
        }
    }

    /// Bucket `b`'s units in block `c`, in place order.
    fn stretch(&self, b: u32, c: usize) -> &[u32] {
        self.stretches[b as usize]
            .iter()
            .find(|s| s.0 == c)
            .map_or(&[], |&(_, from, to)| &self.by_block[from..to])
    }

    /// Whether some unit of block `i` or `k` in buckets `list` has a neighbour in the other
    /// block placed before its answer so far (and before itself).
    fn worth(&self, part: &Part, list: &[u32], i: usize, k: usize, answers: &Answers) -> bool {
        let m = &part.members;
        let bound = |u: u32| m[u as usize].place.min(answers.before(m, u));
        list.iter().any(|&b| {
            let (si, sk) = (self.stretch(b, i), self.stretch(b, k));
            let (pi, pk) = (m[si[0] as usize].place, m[sk[0] as usize].place);
            sk.iter().any(|&u| bound(u) > pi) || si.iter().any(|&u| bound(u) > pk)
        })
    }
}

/// No answer.
const NONE: u32 = u32::MAX;

/// Each unit's answer so far (its first confirmed neighbour among the blocks walked, or
/// [`NONE`]) with the pair's estimate and Jaccard (NaN when not computed), and the tests run.
struct Answers {
    best: Vec<u32>,
    estimate: Vec<f64>,
    jaccard: Vec<f64>,
    counts: BucketCounts,
}

impl Answers {
    /// Where unit `u`'s walk stops: at its answer so far, if any.
    fn before(&self, m: &[Member], u: u32) -> Place {
        match self.best[u as usize] {
            NONE => (u64::MAX, u64::MAX),
            t => m[t as usize].place,
        }
    }
}

/// What a walk over held blocks reads.
struct Held<'a> {
    work: &'a WorkDir,
    docs: &'a Docs,
    spill: &'a Spill,
    unit_local: &'a [u32],
    blocks: &'a [super::spill::Block],
    /// The most documents a block holds.
    most: usize,
}

impl Held<'_> {
    /// Walk the buckets `list` restricted to the blocks `held` (one, or two: the first is
    /// kept in `first` between calls, read on the first), and keep each unit's earliest answer.
    fn walk(
        &self,
        part: &Part,
        walk: &Blocked,
        held: &[usize],
        list: &[u32],
        first: &mut Option<(Vec<u32>, ShingleSets)>,
        state: &mut Answers,
    ) -> Result<(), Error> {
        let cfg = self.work.config();
        let np = cfg.params.num_perm;
        if first.is_none() {
            let mut b = self.spill.read(held[0])?;
            // Room for any other block's beside it, taken once.
            b.sigs.reserve_exact(self.most * np);
            let mut sets = ShingleSets::new();
            b.sets_into(&mut sets, 0);
            *first = Some((b.sigs, sets));
        }
        let (kept_sigs, sets) = first.as_mut().expect("read");
        let n0 = self.blocks[held[0]].docs.len() as u32;
        let mut sigs = std::mem::take(kept_sigs);
        let mut n1 = 0;
        if let Some(&other) = held.get(1) {
            let mut o = self.spill.read(other)?;
            sigs.extend_from_slice(&o.sigs);
            n1 = self.blocks[other].docs.len() as u32;
            o.sets_into(sets, n0);
        }
        let sets = &*sets;
        // The held units, by rank (unit numbers are), and each bucket's among them.
        let m = &part.members;
        let two = held.len() == 2;
        // The held units of the buckets, by rank (unit numbers are), each with its side (the
        // second block's or not) and where its walk stops: its answer so far, or itself.
        let mut units: Vec<u32> = list
            .iter()
            .flat_map(|&b| held.iter().flat_map(move |&c| walk.stretch(b, c)))
            .copied()
            .collect();
        units.sort_unstable();
        units.dedup();
        let side_of = |u: u32| two && walk.block[u as usize] == held[1];
        let before_of = |u: u32| state.before(m, u);
        let bound = |u: u32| m[u as usize].place.min(before_of(u));
        // A unit walks the other side (its own block, when one is held): it walks when that
        // side's first unit is placed before where it stops.
        let walked = |u: u32| (side_of(u) ^ two) as usize;
        let mut firsts = [(u64::MAX, u64::MAX); 2];
        for &u in &units {
            let f = &mut firsts[side_of(u) as usize];
            *f = (*f).min(m[u as usize].place);
        }
        let walks_at = |u: u32| bound(u) > firsts[walked(u)];
        // How far the walks into each side go: a unit placed after that is tested by none,
        // and is left out with the units that do not walk.
        let mut reach = [(0u64, 0u64); 2];
        for &u in &units {
            if walks_at(u) {
                let r = &mut reach[walked(u)];
                *r = (*r).max(bound(u));
            }
        }
        units.retain(|&u| walks_at(u) || m[u as usize].place < reach[side_of(u) as usize]);
        let sub = units;
        let sub_of = |u: u32| sub.binary_search(&u).ok().map(|x| x as u32);
        let buckets: Vec<Vec<u32>> = list
            .iter()
            .map(|&b| {
                held.iter()
                    .flat_map(|&c| walk.stretch(b, c))
                    .filter_map(|&u| sub_of(u))
                    .collect()
            })
            .collect();
        let members: Vec<Member> = sub.iter().map(|&u| m[u as usize]).collect();
        let local: Vec<u32> = sub
            .iter()
            .map(|&u| {
                let (l, c) = (self.unit_local[u as usize], walk.block[u as usize]);
                let at = self.blocks[c].docs.start;
                if c == held[0] {
                    l - at
                } else {
                    n0 + l - at
                }
            })
            .collect();
        let groups: Vec<u32> = if self.docs.groups.is_empty() {
            Vec::new()
        } else {
            let mut g = vec![0u32; sigs.len() / np];
            for (x, &u) in sub.iter().enumerate() {
                g[local[x] as usize] = self.docs.groups[self.unit_local[u as usize] as usize];
            }
            g
        };
        let walks: Vec<bool> = sub.iter().map(|&u| walks_at(u)).collect();
        let before: Vec<Place> = sub.iter().map(|&u| before_of(u)).collect();
        let side: Vec<bool> = if two {
            sub.iter().map(|&u| side_of(u)).collect()
        } else {
            Vec::new()
        };
        let part_held = Part::new(members, buckets);
        let cache = JaccardCache::default();
        let tests = Tests {
            tables: BucketTables {
                num_perm: np,
                sigs: &sigs,
                sets,
                cache: &cache,
                groups: &groups,
            },
            grouped: self.work.fields().group.is_some(),
            local,
            confirm: cfg.confirm,
            threshold: cfg.threshold,
            index_from: INDEX_FROM,
            cross: Some(Cross {
                walks,
                side,
                before,
            }),
        };
        let status = vec![Status::Undecided; part_held.members.len()];
        let (events, counts) = decide(&part_held, &status, &[], &tests);
        state.counts += counts;
        // A walk stops before the answer it had: what it finds is earlier.
        let unit = |rank: u64| m.partition_point(|x| x.rank < rank);
        for e in events {
            let u = unit(e.rank);
            let (target, estimate, jaccard) = e.pair();
            state.best[u] = unit(target) as u32;
            state.estimate[u] = estimate;
            state.jaccard[u] = jaccard.unwrap_or(f64::NAN);
        }
        drop(tests);
        let (kept_sigs, sets) = first.as_mut().expect("read");
        for l in n0..n0 + n1 {
            sets.remove(&l);
        }
        sigs.truncate(n0 as usize * np);
        *kept_sigs = sigs;
        Ok(())
    }
}
