//! A round of the greedy rule ([`greedy`](super)) over a partition's documents in blocks, for a
//! job whose walks need more documents than it holds (a giant bucket of templated pages): the
//! documents are gathered once into a [`Spill`] in blocks, and the walks are made over the
//! blocks, one or two held at a time, so that a job holds two blocks' signatures and sets
//! however large a bucket grows. Round 0 of a partition past a group runs here from `confirm`
//! ([`first_round`]), and so does a later round's job whose walks reach past a group
//! ([`later_round`], from `jobs.rs`).
//!
//! A walk's answer is its first confirmed neighbour in place order, not dropped, placed after
//! where the round before left it (in round 0 nothing is decided yet, and every walk starts
//! at the first). Walking its neighbours among the held blocks finds the first such one
//! there, and the partition's is the earliest placed of those. Blocks are taken in the order
//! of their first placed unit; for each, every earlier block it shares a bucket with, then
//! itself. A walk tests only the neighbours in the other block (in its own, when one is held)
//! placed before its answer so far, so what it finds replaces that answer. A unit walks only
//! when the other block holds a unit placed where its walk goes, a pair of blocks is left out
//! when no unit of either does, and a unit neither walking nor placed where some walk goes is
//! left out of the held buckets. On a bucket of near copies the earliest blocks answer nearly
//! every unit, and most pairs are left out. The files written (members, buckets, answers) are
//! those of walking the partition whole; the work counted (`checked`, `rejected`, ...) is the
//! blocks'. A later round gathers only the documents its walks reach (no dropped unit among
//! them), and the units whose answer stands keep it.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use rayon::prelude::*;

use super::{
    self as greedy, decide, write_events, Cross, Event, Member, Part, PartRound, Place, Start,
    Status, Tests,
};
use crate::error::Error;
use crate::progress::{Progress, ProgressFactory};
use crate::stages::dedup::{
    Against, BucketCounts, BucketTables, Confirm, JaccardCache, ShingleSets, INDEX_FROM,
};
use crate::stages::sharded::blocks::{Input, Spilled};
use crate::stages::sharded::gather::Docs;
use crate::stages::sharded::spill::{Block, BlockDocs, Spill};
use crate::stages::sharded::WorkDir;

/// What round 0 in blocks found.
pub(in crate::stages::sharded) struct FirstRound {
    pub counts: BucketCounts,
    /// Buckets of two or more documents.
    pub buckets: u64,
    /// Seconds spent gathering the documents.
    pub gather_seconds: f64,
}

/// Run round 0 of partition `input.partition` over its documents in blocks of about
/// `block_bytes`: write its members, buckets and answers as `greedy::first_round` writes them.
pub(in crate::stages::sharded) fn first_round(
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
    let block_of = |l: u32| Block::of(&blocks, l);
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

    let who = Who::first();
    let held = Held::new(work, &docs, &spill, &unit_local, &blocks, &who);
    let state = held.walk_blocks(&part, &step)?;
    let m = &part.members;
    let events: Vec<Event> = (0..m.len() as u32)
        .filter_map(|u| state.event(m, &who, u))
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

/// A later round of partition `partition` (`jobs::round`), its units' statuses `status` and
/// answers of the round before `prior`, whose walks need the members `want`: the documents
/// gathered into a spill in blocks of about `block_bytes`, and the walks made over them.
/// Returns the round's answers (those of walking the partition whole), the tests run and the
/// documents gathered.
#[allow(clippy::too_many_arguments)]
pub(super) fn later_round(
    work: &WorkDir,
    round: u32,
    partition: usize,
    part: &Part,
    status: &[Status],
    prior: &[Option<Event>],
    want: &[bool],
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<(Vec<Event>, BucketCounts, u64), Error> {
    let m = &part.members;
    let step = progress.step(&format!("greedy round {round}, partition {partition}"));
    // The members the walks need are the units here, numbered in rank order as members are.
    let held: Vec<u32> = (0..m.len() as u32).filter(|&i| want[i as usize]).collect();
    let mut sub_of = vec![NONE; m.len()];
    for (x, &i) in held.iter().enumerate() {
        sub_of[i as usize] = x as u32;
    }
    let needed = greedy::rows_of(work.shards(), m, |k| want[k]);
    let jaccard = work.config().confirm == Confirm::Jaccard;
    let unit = format!("{round:05}-{partition:04}");
    let mut spill = Spill::create(work, "greedy", &unit, jaccard, block_bytes)?;
    step.set_message("gathering documents");
    let docs = Docs::gather_into(work, needed, &[], Some(&mut spill), progress)?;
    let blocks = spill.finish()?.to_vec();
    // Each bucket's needed members (a walk's stretch holds every one not dropped).
    let buckets: Vec<Vec<u32>> = (0..part.buckets())
        .map(|b| {
            part.bucket(b)
                .iter()
                .map(|&i| sub_of[i as usize])
                .filter(|&x| x != NONE)
                .collect::<Vec<u32>>()
        })
        .filter(|b| b.len() >= 2)
        .collect();
    let members: Vec<Member> = held.iter().map(|&i| m[i as usize]).collect();
    let unit_local: Vec<u32> = members
        .iter()
        .map(|x| {
            docs.local_at(x.shard as usize, x.row)
                .expect("a gathered member")
        })
        .collect();
    let who = Who {
        status: held.iter().map(|&i| status[i as usize]).collect(),
        from: held
            .iter()
            .map(|&i| match status[i as usize] {
                Status::Undecided => match greedy::start(part, status, prior, i as usize) {
                    Start::After(a) => Some(a),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
    };
    let sub = Part::new(members, buckets);
    let held_blocks = Held::new(work, &docs, &spill, &unit_local, &blocks, &who);
    let state = held_blocks.walk_blocks(&sub, &step)?;
    // In rank order: each walk's answer, and the answers that stand.
    let mut events = Vec::new();
    for d in 0..m.len() {
        if status[d] != Status::Undecided {
            continue;
        }
        match greedy::start(part, status, prior, d) {
            Start::Nothing => {}
            Start::Answer(e) => events.push(e),
            Start::After(_) => events.extend(state.event(&sub.members, &who, sub_of[d])),
        }
    }
    Ok((events, state.counts, docs.rank.len() as u64))
}

/// Who walks among the units, and from where.
struct Who {
    /// Each unit's status (empty: every unit undecided, as in round 0).
    status: Vec<Status>,
    /// Where each unit's walk starts: after the neighbour placed at `Some(place)`, from the
    /// first at `Some(None)`; `None` for a unit that does not walk. Empty: every unit walks
    /// from the first.
    from: Vec<Option<Option<Place>>>,
}

impl Who {
    /// Round 0's.
    fn first() -> Self {
        Who {
            status: Vec::new(),
            from: Vec::new(),
        }
    }

    fn status(&self, u: u32) -> Status {
        self.status
            .get(u as usize)
            .copied()
            .unwrap_or(Status::Undecided)
    }

    fn walks(&self, u: u32) -> bool {
        self.from.get(u as usize).is_none_or(Option::is_some)
    }

    fn after(&self, u: u32) -> Option<Place> {
        self.from.get(u as usize).copied().flatten().flatten()
    }
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
        blocks: &[Block],
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

    /// Whether some walking unit of block `i` or `k` in buckets `list` has a neighbour in
    /// the other block placed after where its walk starts and before its answer so far (and
    /// before itself).
    fn worth(
        &self,
        part: &Part,
        who: &Who,
        (list, i, k): (&[u32], usize, usize),
        answers: &Answers,
    ) -> bool {
        let m = &part.members;
        list.iter().any(|&b| {
            let (si, sk) = (self.stretch(b, i), self.stretch(b, k));
            sk.iter().any(|&u| answers.opens(m, who, u, si))
                || si.iter().any(|&u| answers.opens(m, who, u, sk))
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

    /// Where unit `u`'s walk stops: at itself, or its answer so far if that is earlier.
    fn bound(&self, m: &[Member], u: u32) -> Place {
        m[u as usize].place.min(self.before(m, u))
    }

    /// Whether unit `u` walks, and some of the units `other` (in place order) is placed
    /// where its walk goes: after where it starts and before where it stops.
    fn opens(&self, m: &[Member], who: &Who, u: u32, other: &[u32]) -> bool {
        who.walks(u) && {
            let at = who
                .after(u)
                .map_or(0, |a| other.partition_point(|&x| m[x as usize].place <= a));
            other
                .get(at)
                .is_some_and(|&x| m[x as usize].place < self.bound(m, u))
        }
    }

    /// Unit `u`'s answer, if it found one.
    fn event(&self, m: &[Member], who: &Who, u: u32) -> Option<Event> {
        let t = self.best[u as usize];
        (t != NONE).then(|| {
            let j = self.jaccard[u as usize];
            Event::answer(
                m[u as usize].rank,
                m[t as usize].place,
                m[t as usize].rank,
                who.status(t) == Status::Survives,
                self.estimate[u as usize],
                (!j.is_nan()).then_some(j),
            )
        })
    }
}

/// What a walk over held blocks reads.
struct Held<'a> {
    work: &'a WorkDir,
    docs: &'a Docs,
    spill: &'a Spill,
    /// Each unit's document, by local number.
    unit_local: &'a [u32],
    blocks: &'a [Block],
    /// The most documents a block holds.
    most: usize,
    who: &'a Who,
}

impl<'a> Held<'a> {
    fn new(
        work: &'a WorkDir,
        docs: &'a Docs,
        spill: &'a Spill,
        unit_local: &'a [u32],
        blocks: &'a [Block],
        who: &'a Who,
    ) -> Self {
        Held {
            work,
            docs,
            spill,
            unit_local,
            blocks,
            most: blocks.iter().map(|b| b.docs.len()).max().unwrap_or(0),
            who,
        }
    }

    /// Every walking unit's first confirmed neighbour over the blocks (see the module's
    /// docs), and the tests run.
    fn walk_blocks(&self, part: &Part, step: &Progress) -> Result<Answers, Error> {
        let blocks = self.blocks;
        let walk = Blocked::new(part, self.unit_local, blocks, |l| Block::of(blocks, l));
        let n = part.members.len();
        let mut state = Answers {
            best: vec![NONE; n],
            estimate: vec![0.0; n],
            jaccard: vec![f64::NAN; n],
            counts: BucketCounts::default(),
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
                if walk.worth(part, self.who, (list, i, k), &state) {
                    self.walk(part, &walk, &[k, i], list, &mut held, &mut state)?;
                }
            }
            if !walk.alone[k].is_empty() {
                self.walk(part, &walk, &[k], &walk.alone[k], &mut held, &mut state)?;
            }
        }
        Ok(state)
    }

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
        let mut o = BlockDocs {
            sigs: std::mem::take(kept_sigs),
            sets: Vec::new(),
        };
        let mut n1 = 0;
        if let Some(&other) = held.get(1) {
            self.spill.read_into(other, &mut o)?;
            n1 = self.blocks[other].docs.len() as u32;
            o.sets_into(sets, n0);
        }
        let mut sigs = o.sigs;
        let sets = &*sets;
        let m = &part.members;
        let who = self.who;
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
        let bound = |u: u32| state.bound(m, u);
        // A unit walks the other side (its own block, when one is held): it walks when that
        // side holds a unit placed between where its walk starts and where it stops.
        let walked = |u: u32| (side_of(u) ^ two) as usize;
        let mut by_side: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
        for &u in &units {
            by_side[side_of(u) as usize].push(u);
        }
        for v in &mut by_side {
            v.sort_unstable_by_key(|&u| m[u as usize].place);
        }
        let walks_at = |u: u32| state.opens(m, who, u, &by_side[walked(u)]);
        // How far the walks into each side go, from the earliest start to the latest stop: a
        // unit placed outside is tested by none, and is left out with the units that do not
        // walk.
        let mut reach: [Option<(Option<Place>, Place)>; 2] = [None, None];
        for &u in &units {
            if walks_at(u) {
                let (from, to) = (who.after(u), bound(u));
                let r = &mut reach[walked(u)];
                *r = Some(r.map_or((from, to), |(a, b)| (a.min(from), b.max(to))));
            }
        }
        let tested = |u: u32| {
            let p = m[u as usize].place;
            reach[side_of(u) as usize].is_some_and(|(a, b)| p < b && a.is_none_or(|a| p > a))
        };
        units.retain(|&u| walks_at(u) || tested(u));
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
        let after: Vec<Option<Place>> = if who.from.is_empty() {
            Vec::new()
        } else {
            sub.iter().map(|&u| who.after(u)).collect()
        };
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
                after,
            }),
        };
        let status: Vec<Status> = sub.iter().map(|&u| who.status(u)).collect();
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
