//! Stage 4b, with `--cluster greedy`: the greedy survivor rule (SPEC §3) in fixed-priority
//! rounds, so that no job holds more than one partition's buckets.
//!
//! A unit is a bucketed document and its exact copies (`--exact`); its place in the survivor
//! policy's order is that of its best copy, the unit's lead. The rule makes a unit survive
//! unless a surviving unit placed before it is its confirmed near duplicate, and joins a
//! dropped one to the first such unit. So a unit is decided as soon as every confirmed
//! neighbour placed before it is: each round, each partition's job walks every undecided
//! unit's earlier neighbours in its buckets in place order, skips the dropped ones, tests the
//! others, and stops at the first confirmed one: `found` when it survives, `blocked` when it is
//! undecided; it answers nothing when no neighbour is confirmed. A walk resumes where the round
//! before left it, so no pair is tested twice in a partition. The round's settling then takes,
//! for each undecided unit, the earliest of its partitions' answers: `found` drops it (that
//! neighbour's lead is its root), `blocked` leaves it for the next round, and no answer keeps
//! it.
//! The earliest undecided unit is always decided, so the rounds end; the result is the
//! sequential rule's whatever the partitions, since a unit's outcome depends only on its first
//! confirmed neighbour that survives.
//!
//! Round 0's partition jobs are `confirm`'s (it has the documents gathered), the later rounds'
//! are `jobs.rs`'s; a job whose walks need more documents than a group holds walks them in
//! blocks (`blocks.rs`). The files:
//! `greedy/P.members` and `P.buckets` (written by `confirm`), each round's `R-P.events` and
//! `R-P.json`, and its settling's `R.state` (the units dropped or undecided so far, by rank:
//! the others survive) and `R.json`. Every file is sorted by rank, so settling streams them;
//! settling round R removes the answers and state of round R - 1, which no job reads again.

pub(super) mod blocks;
pub mod jobs;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::codec::fields;
use super::gather::Docs;
use super::rank::NO_REP;
use super::raw::RawRows;
use super::table::{f64s, u32s, u64s};
use super::WorkDir;
use crate::error::Error;
use crate::index::lsh::{memberships, shares_bucket};
use crate::index::simjoin::{Key, PrefixIndex};
use crate::progress::ProgressFactory;
use crate::stages::dedup::{
    estimate, keep_key, test_pair, BucketCounts, BucketTables, Confirm, JaccardCache, Keep,
    INDEX_FROM,
};

/// A unit's place in the survivor policy's order, ascending: the keep key's bits (best
/// first), then its lead's rank. Leads' ranks are distinct, so places are.
pub(super) type Place = (u64, u64);

/// The place of a document valued `key` by the keep policy, whose rank is `rank`.
pub(super) fn place(key: f64, rank: u64) -> Place {
    // `total_cmp`'s order as unsigned bits, reversed: larger keys first.
    let bits = key.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    (!ordered, rank)
}

/// A bucketed unit, as a partition holds it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Member {
    /// The rank of the unit's representative (its smallest id), the document in the buckets.
    pub rank: u64,
    pub shard: u32,
    pub row: u64,
    pub place: Place,
    pub group: u32,
}

/// Each of `shards` shards' rows of the members `m[k]` that `want(k)` picks, ascending: the
/// documents a round's job gathers.
fn rows_of(shards: usize, m: &[Member], want: impl Fn(usize) -> bool) -> Vec<Vec<u64>> {
    let mut needed: Vec<Vec<u64>> = vec![Vec::new(); shards];
    for (k, mem) in m.iter().enumerate() {
        if want(k) {
            needed[mem.shard as usize].push(mem.row);
        }
    }
    for v in &mut needed {
        v.sort_unstable();
        v.dedup();
    }
    needed
}

const MEMBER_BYTES: usize = 48;
const EVENT_BYTES: usize = 56;
const STATE_BYTES: usize = 48;

/// What a unit is, as far as the rounds have gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Undecided = 0,
    Survives = 1,
    Dropped = 2,
}

impl Status {
    fn of(v: u64) -> Option<Self> {
        match v {
            0 => Some(Status::Undecided),
            1 => Some(Status::Survives),
            2 => Some(Status::Dropped),
            _ => None,
        }
    }
}

/// What a partition's job found for an undecided unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    None = 0,
    Found = 1,
    Blocked = 2,
}

/// A partition job's answer for one undecided unit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Event {
    pub rank: u64,
    kind: Kind,
    /// The neighbour it stopped at: its place (whose second half is its lead's rank) and
    /// its representative's rank.
    pub at: Place,
    target: u64,
    estimate: f64,
    jaccard: Option<f64>,
}

impl Event {
    /// An answer for the unit of rank `rank`: its first confirmed neighbour not dropped,
    /// placed at `at`, of rank `target`, which survives or is undecided (as every unit is in
    /// round 0).
    pub(super) fn answer(
        rank: u64,
        at: Place,
        target: u64,
        survives: bool,
        estimate: f64,
        jaccard: Option<f64>,
    ) -> Self {
        Event {
            rank,
            kind: if survives { Kind::Found } else { Kind::Blocked },
            at,
            target,
            estimate,
            jaccard,
        }
    }

    /// The neighbour's rank, the pair's estimate and Jaccard.
    pub(super) fn pair(&self) -> (u64, f64, Option<f64>) {
        (self.target, self.estimate, self.jaccard)
    }
}

/// A unit's verdict after a round.
#[derive(Debug, Clone, Copy)]
pub(super) struct Verdict {
    pub rank: u64,
    status: Status,
    /// For a dropped unit: the rank of its root (the surviving unit's lead), and the pair's
    /// estimate and Jaccard.
    pub root: u64,
    pub estimate: f64,
    pub jaccard: Option<f64>,
    /// For a dropped unit: the first half of its root's place (`(root_key, root)` is it).
    pub root_key: u64,
}

impl Verdict {
    pub fn dropped(&self) -> bool {
        self.status == Status::Dropped
    }
}

fn jaccard_bits(j: Option<f64>) -> u64 {
    j.map_or(f64::NAN.to_bits(), f64::to_bits)
}

fn jaccard_of(bits: u64) -> Option<f64> {
    let j = f64::from_bits(bits);
    (!j.is_nan()).then_some(j)
}

/// What one partition's job did in a round.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PartRound {
    /// Undecided members of the partition (0 when it had no work: see `answers`).
    pub undecided: u64,
    /// Answers written: with none, the partition has no work in any later round (a member
    /// without an answer had none to give, and will have none).
    #[serde(default)]
    pub answers: u64,
    pub counts: BucketCounts,
    /// Documents gathered from their text for the round's tests.
    pub gathered: u64,
    pub seconds: f64,
}

/// What a round decided, over all partitions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoundSummary {
    pub round: u32,
    /// Units still undecided: another round is needed unless 0.
    pub undecided: u64,
    /// Units dropped so far.
    pub dropped: u64,
    /// The tests of the round's partition jobs.
    pub counts: BucketCounts,
    pub seconds: f64,
}

impl WorkDir {
    fn greedy_file(&self, name: String) -> PathBuf {
        self.root().join("greedy").join(name)
    }

    fn members_file(&self, partition: usize) -> PathBuf {
        self.greedy_file(format!("{partition:04}.members"))
    }

    fn buckets_file(&self, partition: usize) -> PathBuf {
        self.greedy_file(format!("{partition:04}.buckets"))
    }

    fn events_file(&self, round: u32, partition: usize) -> PathBuf {
        self.greedy_file(format!("{round:05}-{partition:04}.events"))
    }

    fn part_summary(&self, round: u32, partition: usize) -> PathBuf {
        self.greedy_file(format!("{round:05}-{partition:04}.json"))
    }

    fn state_file(&self, round: u32) -> PathBuf {
        self.greedy_file(format!("{round:05}.state"))
    }

    fn round_summary(&self, round: u32) -> PathBuf {
        self.greedy_file(format!("{round:05}.json"))
    }
}

/// A partition's buckets: its units sorted by rank, and each bucket's units (indices into
/// them) in place order.
pub(super) struct Part {
    pub members: Vec<Member>,
    starts: Vec<usize>,
    list: Vec<u32>,
}

impl Part {
    /// From buckets of member numbers (places in `members`).
    pub fn new(members: Vec<Member>, buckets: Vec<Vec<u32>>) -> Self {
        let mut starts = vec![0];
        let mut list = Vec::new();
        for mut b in buckets {
            b.sort_unstable_by_key(|&i| members[i as usize].place);
            list.extend_from_slice(&b);
            starts.push(list.len());
        }
        Part {
            members,
            starts,
            list,
        }
    }

    pub fn bucket(&self, b: usize) -> &[u32] {
        &self.list[self.starts[b]..self.starts[b + 1]]
    }

    pub fn buckets(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn write(&self, work: &WorkDir, partition: usize) -> Result<(), Error> {
        let mut w = work.create_keyed(&work.buckets_file(partition))?;
        for b in 0..self.buckets() {
            let m = self.bucket(b);
            w.values(&[m.len() as u32])?;
            w.values(m)?;
        }
        w.finish()?;
        let mut w = work.create_keyed(&work.members_file(partition))?;
        for m in &self.members {
            w.values(&[
                m.rank,
                m.shard as u64,
                m.row,
                m.place.0,
                m.place.1,
                m.group as u64,
            ])?;
        }
        w.finish()
    }

    fn read(work: &WorkDir, partition: usize) -> Result<Self, Error> {
        let mut f = work.open_keyed(&work.members_file(partition), "confirm", MEMBER_BYTES)?;
        let n = f.rows as usize;
        let members: Vec<Member> = fields::<u64>(f.read_next(n)?)
            .collect::<Vec<u64>>()
            .chunks_exact(6)
            .map(|v| Member {
                rank: v[0],
                shard: v[1] as u32,
                row: v[2],
                place: (v[3], v[4]),
                group: v[5] as u32,
            })
            .collect();
        let mut f = work.open_keyed(&work.buckets_file(partition), "confirm", 4)?;
        let n = f.rows as usize;
        let values: Vec<u32> = fields::<u32>(f.read_next(n)?).collect();
        let bad = || Error::Work {
            path: work.buckets_file(partition).display().to_string(),
            msg: "its buckets do not match its members: run `neardup stage confirm` again in an \
                  empty work directory"
                .into(),
        };
        let (mut starts, mut list) = (vec![0], Vec::with_capacity(values.len()));
        let mut at = 0;
        while at < values.len() {
            let len = values[at] as usize;
            let m = values.get(at + 1..at + 1 + len).ok_or_else(bad)?;
            if m.iter().any(|&i| i as usize >= members.len()) {
                return Err(bad());
            }
            list.extend_from_slice(m);
            starts.push(list.len());
            at += 1 + len;
        }
        Ok(Part {
            members,
            starts,
            list,
        })
    }

    /// Each member's buckets ([`memberships`]).
    fn buckets_of(&self) -> (Vec<usize>, Vec<u32>) {
        memberships(
            self.members.len(),
            (0..self.buckets()).map(|b| self.bucket(b)),
        )
    }
}

/// The places of the bucketed documents `ranks` (their ranks; `needed[s]`: their rows, shard
/// by shard, in that order): each one's unit's, from its keep value and those of its exact
/// copies.
pub(super) fn places(
    work: &WorkDir,
    needed: &[Vec<u64>],
    ranks: &[u64],
) -> Result<Vec<Place>, Error> {
    let cfg = work.config();
    let keep = cfg.keep;
    if keep == Keep::SmallestId {
        return Ok(ranks.iter().map(|&r| place(0.0, r)).collect());
    }
    let rs = super::rank::summary(work)?;
    let mut base = vec![0u64];
    for &r in &rs.rows {
        base.push(base.last().unwrap() + r);
    }
    let keep_field = work.fields().keep.is_some();
    // The keep key of each document of shard `s` at `rows`.
    let keys = |s: usize, rows: &[u64]| -> Result<Vec<f64>, Error> {
        let mut cols = vec!["words"];
        if keep_field {
            cols.push("keep");
        }
        let mut out = Vec::with_capacity(rows.len());
        let mut k = 0;
        for batch in work.open_rows(&work.sign_file(s), "sign", &cols, Some(rows))? {
            let batch = batch?;
            let w = u32s(&batch, "words");
            let v = if keep_field {
                f64s(&batch, "keep")
            } else {
                &[]
            };
            for (i, &words) in w.iter().enumerate() {
                let value = v.get(i).copied().unwrap_or(0.0);
                out.push(keep_key(keep, words, value, base[s] + rows[k]));
                k += 1;
            }
        }
        Ok(out)
    };
    let mut out = Vec::with_capacity(ranks.len());
    for (s, rows) in needed.iter().enumerate() {
        if !rows.is_empty() {
            let at = out.len();
            out.extend(
                keys(s, rows)?
                    .into_iter()
                    .zip(&ranks[at..])
                    .map(|(k, &r)| place(k, r)),
            );
        }
    }
    // Identical copies have identical words: only a policy by position or field value can
    // prefer a copy to its representative.
    if cfg.exact && matches!(keep, Keep::First | Keep::FieldMax | Keep::FieldMin) {
        let mut by_rank: Vec<(u64, usize)> =
            ranks.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        by_rank.sort_unstable();
        for s in 0..work.shards() {
            let (mut rows, mut reps) = (Vec::new(), Vec::new());
            let mut row = 0u64;
            for batch in work.open_table(&work.rank_file(s), "rank", &["rank", "exact_rep"])? {
                let batch = batch?;
                let (rank, rep) = (u64s(&batch, "rank"), u64s(&batch, "exact_rep"));
                for (k, &e) in rep.iter().enumerate() {
                    if e != NO_REP {
                        if let Ok(i) = by_rank.binary_search_by_key(&e, |p| p.0) {
                            rows.push(row + k as u64);
                            reps.push((by_rank[i].1, rank[k]));
                        }
                    }
                }
                row += batch.num_rows() as u64;
            }
            if rows.is_empty() {
                continue;
            }
            for (key, (i, r)) in keys(s, &rows)?.into_iter().zip(reps) {
                out[i] = out[i].min(place(key, r));
            }
        }
    }
    Ok(out)
}

/// The tests a round's partition job runs: over its group's gathered documents, `local(m)`
/// being member `m`'s number among them.
pub(super) struct Tests<'a> {
    pub tables: BucketTables<'a>,
    pub grouped: bool,
    pub local: Vec<u32>,
    pub confirm: Confirm,
    pub threshold: f64,
    /// Members a walk's buckets hold from which it looks its neighbours up in the prefix
    /// index (the in-memory rule's `INDEX_FROM`).
    pub index_from: usize,
    /// A round over one or two held blocks (`blocks.rs`), else `None`.
    pub cross: Option<Cross>,
}

/// A round over the members of one or two held blocks (`blocks.rs`): who walks, and
/// which neighbours a walk tests.
pub(super) struct Cross {
    /// Whether member `d` walks.
    pub walks: Vec<bool>,
    /// Each member's block, when two are held: a walk tests only the neighbours in the
    /// other one (empty when one is held).
    pub side: Vec<bool>,
    /// Where each member's answer so far is placed (`(u64::MAX, u64::MAX)` for none): a walk
    /// stops at a neighbour placed there or after.
    pub before: Vec<Place>,
    /// Where each member's walk starts: after the neighbour placed here (from the first when
    /// `None`, or when empty).
    pub after: Vec<Option<Place>>,
}

/// A walk's scratch: its neighbours to test (last first), or the heads of the prefix index's
/// groups it merges by place: `(the next member's place, group, next member, end)`.
#[derive(Default)]
struct Walk {
    /// Whether the walk merges the index's groups (else it pops `cands`).
    merging: bool,
    cands: Vec<u32>,
    heads: BinaryHeap<Reverse<(Place, u32, usize, usize)>>,
    prefix: Vec<Key>,
    groups: Vec<u32>,
}

/// Where an undecided member's walk starts this round, from its answer of the round before in
/// this partition: every neighbour before that answer's was dropped or not confirmed, and stays
/// so, so no pair is tested twice.
pub(super) enum Start {
    /// No neighbour before it in this partition is confirmed, and none will be.
    Nothing,
    /// The answer stands as it was, or becomes `found` now that its neighbour survives.
    Answer(Event),
    /// Walk the neighbours placed after this one (all of them when `None`).
    After(Option<Place>),
}

/// `prior` is empty in round 0 (nothing was answered before); after it, a member without an
/// answer had none to give.
pub(super) fn start(part: &Part, status: &[Status], prior: &[Option<Event>], d: usize) -> Start {
    if prior.is_empty() {
        return Start::After(None);
    }
    let Some(e) = prior[d] else {
        return Start::Nothing;
    };
    if e.kind != Kind::Blocked {
        return Start::Answer(e);
    }
    let m = &part.members;
    let t = m.partition_point(|x| x.rank < e.target);
    match status[t] {
        Status::Survives => Start::Answer(Event {
            kind: Kind::Found,
            ..e
        }),
        Status::Undecided => Start::Answer(e),
        Status::Dropped => Start::After(Some(e.at)),
    }
}

/// Walk each undecided member's earlier neighbours in place order (see the module's docs),
/// from where `prior` (each member's answer of the round before, if any) left it.
pub(super) fn decide(
    part: &Part,
    status: &[Status],
    prior: &[Option<Event>],
    tests: &Tests,
) -> (Vec<Event>, BucketCounts) {
    let (at, of) = part.buckets_of();
    let m = &part.members;
    let cross = tests.cross.as_ref();
    let undecided: Vec<u32> = (0..m.len() as u32)
        .filter(|&i| status[i as usize] == Status::Undecided)
        .filter(|&i| cross.is_none_or(|x| x.walks[i as usize]))
        .collect();
    let grouped = tests.grouped;
    let p = tests.tables.num_perm;
    let sig = |l: u32| &tests.tables.sigs[l as usize * p..(l as usize + 1) * p];
    // Under exact Jaccard, the members (those gathered, with a set) by prefix: a walk tests
    // only the neighbours that the filters leave.
    let set_of = |i: usize| {
        let l = tests.local[i];
        tests
            .tables
            .sets
            .get(&l)
            .map(Vec::as_slice)
            .filter(|s| !s.is_empty())
    };
    let buckets_of = |i: usize| &of[at[i]..at[i + 1]];
    // Walks through buckets of fewer members go through them all.
    let walks_many = |d: usize| {
        buckets_of(d)
            .iter()
            .map(|&b| part.bucket(b as usize).len())
            .sum::<usize>()
            >= tests.index_from
    };
    // Over two held blocks a walk tests only the other block's members: an index apiece, so
    // that a walk never steps through its own block's (a bucket of near copies, all in each
    // probe's groups, would make each walk as long as the block).
    let two = cross.is_some_and(|x| !x.side.is_empty());
    let side = |i: usize| two && cross.is_some_and(|x| x.side[i]);
    let indexes: Option<Vec<PrefixIndex>> = (tests.confirm == Confirm::Jaccard
        && undecided.iter().any(|&d| walks_many(d as usize)))
    .then(|| {
        let mut by_place: Vec<u32> = (0..m.len() as u32).collect();
        by_place.sort_unstable_by_key(|&i| m[i as usize].place);
        [false, true][..1 + two as usize]
            .iter()
            .map(|&s| {
                let mine = |i: usize| side(i) == s;
                let mut index = PrefixIndex::new(
                    tests.threshold,
                    (0..m.len()).filter(|&i| mine(i)).filter_map(&set_of),
                );
                // In place order, so that each group's members are.
                let mut prefix = Vec::new();
                for &i in by_place.iter().filter(|&&i| mine(i as usize)) {
                    if let Some(set) = set_of(i as usize) {
                        index.prefix(set, &mut prefix);
                        index.insert(&prefix, set.len(), i);
                    }
                }
                index
            })
            .collect()
    });
    // The index of the members walk `d` tests.
    let index_of = |d: u32| {
        indexes
            .as_ref()
            .map(|x| &x[(two && !side(d as usize)) as usize])
    };
    let placed_before = |x: u32, d: u32| m[x as usize].place < m[d as usize].place;
    let found = undecided
        .par_iter()
        .fold(
            || (Vec::new(), BucketCounts::default(), Walk::default()),
            |(mut events, mut counts, mut walk): (Vec<Event>, BucketCounts, Walk), &d| {
                let after = match cross {
                    Some(x) => x.after.get(d as usize).copied().flatten(),
                    None => match start(part, status, prior, d as usize) {
                        Start::Nothing => return (events, counts, walk),
                        Start::Answer(e) => {
                            events.push(e);
                            return (events, counts, walk);
                        }
                        Start::After(a) => a,
                    },
                };
                // The neighbours placed between `after` and `d`, in place order: under exact
                // Jaccard those the filters leave, merged from the groups as the walk needs
                // them (the first is often confirmed).
                walk.cands.clear();
                walk.heads.clear();
                walk.merging = false;
                let index = index_of(d);
                match (index, set_of(d as usize)) {
                    (Some(index), Some(set)) if walks_many(d as usize) => {
                        walk.merging = true;
                        index.prefix(set, &mut walk.prefix);
                        index.viable_groups(&walk.prefix, set.len(), &mut walk.groups);
                        for &g in &walk.groups {
                            let list = index.members(g);
                            let end = list.partition_point(|&x| placed_before(x, d));
                            let next = after
                                .map_or(0, |a| list.partition_point(|&x| m[x as usize].place <= a));
                            if next < end {
                                walk.heads.push(Reverse((
                                    m[list[next] as usize].place,
                                    g,
                                    next,
                                    end,
                                )));
                            }
                        }
                    }
                    _ => {
                        for &b in buckets_of(d as usize) {
                            let list = part.bucket(b as usize);
                            walk.cands.extend(list.iter().copied().filter(|&x| {
                                placed_before(x, d) && after.is_none_or(|a| m[x as usize].place > a)
                            }));
                        }
                        walk.cands.sort_unstable_by_key(|&x| m[x as usize].place);
                        walk.cands.dedup();
                        walk.cands.reverse();
                    }
                }
                let next_candidate = |walk: &mut Walk| -> Option<u32> {
                    let (Some(index), true) = (index, walk.merging) else {
                        return walk.cands.pop();
                    };
                    let Reverse((_, g, k, end)) = walk.heads.pop()?;
                    let list = index.members(g);
                    if k + 1 < end {
                        walk.heads
                            .push(Reverse((m[list[k + 1] as usize].place, g, k + 1, end)));
                    }
                    Some(list[k])
                };
                let mut last = u32::MAX;
                let mut event = Event {
                    rank: m[d as usize].rank,
                    kind: Kind::None,
                    at: (0, 0),
                    target: 0,
                    estimate: f64::NAN,
                    jaccard: None,
                };
                while let Some(c) = next_candidate(&mut walk) {
                    if c == last || status[c as usize] == Status::Dropped {
                        continue;
                    }
                    last = c;
                    if let Some(x) = cross {
                        // Candidates come in place order: none after this one is earlier
                        // than the answer already found.
                        if m[c as usize].place >= x.before[d as usize] {
                            break;
                        }
                        if !x.side.is_empty() && x.side[c as usize] == x.side[d as usize] {
                            continue;
                        }
                    }
                    if walk.merging
                        && !shares_bucket(buckets_of(d as usize), buckets_of(c as usize))
                    {
                        continue;
                    }
                    if grouped && m[c as usize].group != m[d as usize].group {
                        counts.other_group += 1;
                        continue;
                    }
                    counts.checked += 1;
                    let (ld, lc) = (tests.local[d as usize], tests.local[c as usize]);
                    let (ok, _, jaccard) = test_pair(
                        &tests.tables,
                        tests.confirm,
                        tests.threshold,
                        ld.min(lc),
                        ld.max(lc),
                    );
                    if !ok {
                        counts.rejected += 1;
                        continue;
                    }
                    counts.confirmed += 1;
                    event.kind = if status[c as usize] == Status::Survives {
                        Kind::Found
                    } else {
                        Kind::Blocked
                    };
                    event.at = m[c as usize].place;
                    event.target = m[c as usize].rank;
                    event.estimate = estimate(sig(ld), sig(lc), p);
                    event.jaccard = jaccard;
                    break;
                }
                if event.kind != Kind::None {
                    events.push(event);
                }
                (events, counts, walk)
            },
        )
        .map(|(e, c, _)| (e, c))
        .reduce(
            || (Vec::new(), BucketCounts::default()),
            |(mut ea, mut ca), (eb, cb)| {
                ea.extend(eb);
                ca += cb;
                (ea, ca)
            },
        );
    let (mut events, counts) = found;
    events.sort_unstable_by_key(|e| e.rank);
    (events, counts)
}

/// Write a round's events of `partition` and its job's summary (the job's mark of done).
pub(super) fn write_events(
    work: &WorkDir,
    round: u32,
    partition: usize,
    events: &[Event],
    summary: &PartRound,
) -> Result<(), Error> {
    let mut w = work.create_keyed(&work.events_file(round, partition))?;
    for e in events {
        w.values(&[
            e.rank,
            e.kind as u64,
            e.at.0,
            e.at.1,
            e.target,
            e.estimate.to_bits(),
            jaccard_bits(e.jaccard),
        ])?;
    }
    w.finish()?;
    work.write_json(&work.part_summary(round, partition), summary)
}

/// A partition's units from its buckets of gathered documents (`buckets`, each its local
/// numbers), without the documents an index matched (`matched`; empty for none): each bucket
/// left with two or more. Returns them and each unit's local number.
pub(super) fn units(
    docs: &Docs,
    buckets: &[&[u32]],
    places_of: &dyn Fn(u32) -> Place,
    matched: &[bool],
) -> (Part, Vec<u32>) {
    // `--against`: a document with a near duplicate in an index is no unit of the rule (the
    // indexed documents are kept before every new one; `apply` drops it for its match), as in
    // memory.
    let buckets: Vec<Vec<u32>> = buckets
        .iter()
        .map(|b| {
            b.iter()
                .copied()
                .filter(|&l| !matched.get(l as usize).copied().unwrap_or(false))
                .collect::<Vec<u32>>()
        })
        .filter(|b| b.len() >= 2)
        .collect();
    // The partition's documents, by rank.
    let mut locals: Vec<u32> = buckets.iter().flatten().copied().collect();
    locals.par_sort_unstable_by_key(|&l| docs.rank[l as usize]);
    locals.dedup();
    let members: Vec<Member> = locals
        .iter()
        .map(|&l| {
            let (shard, row) = docs.at(l);
            Member {
                rank: docs.rank[l as usize],
                shard: shard as u32,
                row,
                place: places_of(l),
                group: docs.groups.get(l as usize).copied().unwrap_or(0),
            }
        })
        .collect();
    // Members are in rank order, and ranks are distinct.
    let member_of = |l: u32| {
        let r = docs.rank[l as usize];
        members.partition_point(|m| m.rank < r) as u32
    };
    let buckets: Vec<Vec<u32>> = buckets
        .iter()
        .map(|b| b.iter().map(|&l| member_of(l)).collect())
        .collect();
    (Part::new(members, buckets), locals)
}

/// Round 0 of partition `partition`, run by `confirm` over its group's gathered documents:
/// write the partition's buckets (each a list of local document numbers) and every unit's
/// first answer. Returns the round's tests.
pub(super) fn first_round(
    work: &WorkDir,
    partition: usize,
    docs: &Docs,
    buckets: &[&[u32]],
    places_of: &dyn Fn(u32) -> Place,
    cache: &JaccardCache,
    matched: &[bool],
) -> Result<BucketCounts, Error> {
    let t0 = Instant::now();
    let (part, locals) = units(docs, buckets, places_of, matched);
    part.write(work, partition)?;
    let cfg = work.config();
    let tests = Tests {
        tables: BucketTables {
            num_perm: cfg.params.num_perm,
            sigs: &docs.sigs,
            sets: &docs.sets,
            cache,
            groups: &docs.groups,
        },
        grouped: work.fields().group.is_some(),
        local: locals,
        confirm: cfg.confirm,
        threshold: cfg.threshold,
        index_from: INDEX_FROM,
        cross: None,
    };
    let status = vec![Status::Undecided; part.members.len()];
    let (events, counts) = decide(&part, &status, &[], &tests);
    let summary = PartRound {
        undecided: status.len() as u64,
        answers: events.len() as u64,
        counts,
        gathered: 0,
        seconds: t0.elapsed().as_secs_f64(),
    };
    write_events(work, 0, partition, &events, &summary)?;
    Ok(counts)
}

/// The report's counts of the rule, from its final verdicts, the same as in memory for any
/// number of partitions (a bucket lies whole in one): bucket by bucket, each unit against the
/// bucket's surviving units placed before it, up to and including its root. One partition's
/// buckets at a time, as a round's job holds them.
pub(super) fn final_counts(work: &WorkDir) -> Result<BucketCounts, Error> {
    let mut last = 0;
    loop {
        let Some(s) = round_summary(work, last)? else {
            return Err(Error::Work {
                path: work.round_summary(last).display().to_string(),
                msg: "not there yet: run `neardup stage greedy` first".into(),
            });
        };
        if s.undecided == 0 {
            break;
        }
        last += 1;
    }
    let grouped = work.fields().group.is_some();
    let mut counts = BucketCounts::default();
    for p in 0..work.partitions() {
        let part = Part::read(work, p)?;
        let m = &part.members;
        // Each member's verdict: a dropped one's cut is its root's place, a survivor's its own.
        let mut survives = vec![true; m.len()];
        let mut cut: Vec<Place> = m.iter().map(|x| x.place).collect();
        let mut i = 0;
        read_state(work, last, |v| {
            while i < m.len() && m[i].rank < v.rank {
                i += 1;
            }
            if i < m.len() && m[i].rank == v.rank && v.dropped() {
                survives[i] = false;
                cut[i] = (v.root_key, v.root);
            }
            Ok(())
        })?;
        let mut kept: Vec<u32> = Vec::new();
        for b in 0..part.buckets() {
            let list = part.bucket(b);
            kept.clear();
            kept.extend(list.iter().copied().filter(|&x| survives[x as usize]));
            for &d in list {
                let d = d as usize;
                if !grouped {
                    // The kept units placed up to the cut, less the unit itself when it is kept
                    // (its cut is its own place); the last of them, when it is at the cut, is
                    // the root.
                    let upto = kept.partition_point(|&s| m[s as usize].place <= cut[d]);
                    let upto = upto - survives[d] as usize;
                    let confirmed =
                        (!survives[d] && upto > 0 && m[kept[upto - 1] as usize].place == cut[d])
                            as u64;
                    counts.checked += upto as u64;
                    counts.confirmed += confirmed;
                    counts.rejected += upto as u64 - confirmed;
                    continue;
                }
                for &s in &kept {
                    let s = s as usize;
                    if s == d || m[s].place > cut[d] {
                        break;
                    }
                    if grouped && m[s].group != m[d].group {
                        counts.other_group += 1;
                        continue;
                    }
                    counts.checked += 1;
                    if m[s].place == cut[d] {
                        counts.confirmed += 1;
                    } else {
                        counts.rejected += 1;
                    }
                }
            }
        }
    }
    Ok(counts)
}

/// Rows read from a round's files at a time.
const READ_ROWS: usize = 16 * 1024;

/// A round file's rows, read in order a block at a time.
struct Cursor {
    rows: RawRows,
    left: u64,
    block: Vec<u64>,
    at: usize,
    width: usize,
}

impl Cursor {
    fn new(rows: RawRows, width: usize) -> Self {
        Cursor {
            left: rows.rows,
            rows,
            block: Vec::new(),
            at: 0,
            width: width / 8,
        }
    }

    /// The next row (`width` u64 values), or `None` at the end.
    fn peek(&mut self) -> Result<Option<&[u64]>, Error> {
        if self.at * self.width >= self.block.len() {
            if self.left == 0 {
                return Ok(None);
            }
            let n = (self.left as usize).min(READ_ROWS);
            self.block = fields::<u64>(self.rows.read_next(n)?).collect();
            self.left -= n as u64;
            self.at = 0;
        }
        let w = self.width;
        Ok(Some(&self.block[self.at * w..(self.at + 1) * w]))
    }

    fn advance(&mut self) {
        self.at += 1;
    }
}

fn event_of(v: &[u64]) -> Option<Event> {
    let kind = match v[1] {
        0 => Kind::None,
        1 => Kind::Found,
        2 => Kind::Blocked,
        _ => return None,
    };
    Some(Event {
        rank: v[0],
        kind,
        at: (v[2], v[3]),
        target: v[4],
        estimate: f64::from_bits(v[5]),
        jaccard: jaccard_of(v[6]),
    })
}

fn verdict_of(v: &[u64]) -> Option<Verdict> {
    Some(Verdict {
        rank: v[0],
        status: Status::of(v[1])?,
        root: v[2],
        estimate: f64::from_bits(v[3]),
        jaccard: jaccard_of(v[4]),
        root_key: v[5],
    })
}

/// The state after round `round`, in rank order, streamed to `f`.
fn read_state(
    work: &WorkDir,
    round: u32,
    mut f: impl FnMut(Verdict) -> Result<(), Error>,
) -> Result<(), Error> {
    let path = work.state_file(round);
    let rows = work.open_keyed(&path, "greedy", STATE_BYTES)?;
    let mut c = Cursor::new(rows, STATE_BYTES);
    while let Some(v) = c.peek()? {
        let v = verdict_of(v).ok_or_else(|| Error::Work {
            path: path.display().to_string(),
            msg: "not a state of `neardup stage greedy`: run it again in an empty work directory"
                .into(),
        })?;
        c.advance();
        f(v)?;
    }
    Ok(())
}

/// Whether partition `partition`'s job of round `round` ran.
pub(super) fn part_done(work: &WorkDir, round: u32, partition: usize) -> Result<bool, Error> {
    Ok(work
        .read_json::<PartRound>(&work.part_summary(round, partition))?
        .is_some())
}

/// A finished round's summary, if it is there.
pub fn round_summary(work: &WorkDir, round: u32) -> Result<Option<RoundSummary>, Error> {
    work.read_json(&work.round_summary(round))
}

/// The round that decided every unit, once the rounds have ended (`None` before).
pub fn converged(work: &WorkDir) -> Result<Option<u32>, Error> {
    let mut r = 0;
    while let Some(s) = round_summary(work, r)? {
        if s.undecided == 0 {
            return Ok(Some(r));
        }
        r += 1;
    }
    Ok(None)
}

/// The refusal of round `round`, past the round `last` that decided every unit.
pub fn past_the_last(round: u32, last: u32) -> String {
    format!(
        "the greedy rule converged at round {last} (every unit decided): there is no round \
         {round}, nothing to run; run `neardup stage cluster` next"
    )
}
/// Check that round `round - 1` is settled and left units undecided, so round `round` is due.
fn need_round_before(work: &WorkDir, round: u32) -> Result<(), Error> {
    if let Some(last) = converged(work)?.filter(|&last| round > last) {
        return Err(Error::Param(past_the_last(round, last)));
    }
    let r = round - 1;
    let before = round_summary(work, r)?.ok_or_else(|| Error::Work {
        path: work.round_summary(r).display().to_string(),
        msg: format!(
            "not there yet: settle round {r} first (`neardup stage greedy DIR --round {r}`)"
        ),
    })?;
    if before.undecided == 0 {
        return Err(Error::Param(past_the_last(round, r)));
    }
    Ok(())
}

/// Settle round `round` once every partition's job of it has run: each undecided unit's
/// verdict, from the earliest of its partitions' answers. Returns the summary, or `None` when
/// settled already.
pub fn settle(
    work: &WorkDir,
    round: u32,
    progress: &ProgressFactory,
) -> Result<Option<RoundSummary>, Error> {
    let _lock = work.lock(&format!("greedy-{round:05}"))?;
    work.remove_partials("greedy", &format!("{round:05}."))?;
    if round_summary(work, round)?.is_some() {
        return Ok(None);
    }
    if round > 0 {
        need_round_before(work, round)?;
    }
    let t0 = Instant::now();
    let step = progress.step(&format!("greedy round {round}, settling"));
    let mut summary = RoundSummary {
        round,
        ..Default::default()
    };
    let mut cursors = Vec::with_capacity(work.partitions());
    for p in 0..work.partitions() {
        let stage = if round == 0 { "confirm" } else { "greedy" };
        let s: PartRound = work.need_json(&work.part_summary(round, p), stage)?;
        summary.counts += s.counts;
        let rows = work.open_keyed(&work.events_file(round, p), stage, EVENT_BYTES)?;
        cursors.push(Cursor::new(rows, EVENT_BYTES));
    }
    let mut state = if round > 0 {
        let rows = work.open_keyed(&work.state_file(round - 1), "greedy", STATE_BYTES)?;
        Some(Cursor::new(rows, STATE_BYTES))
    } else {
        None
    };
    // The cursors by their next rank, smallest first.
    let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::new();
    for (p, c) in cursors.iter_mut().enumerate() {
        if let Some(v) = c.peek()? {
            heap.push(std::cmp::Reverse((v[0], p)));
        }
    }
    let bad = |path: PathBuf, what: &str| Error::Work {
        path: path.display().to_string(),
        msg: format!("{what}: run the greedy rounds again in an empty work directory"),
    };
    let mut out = work.create_keyed(&work.state_file(round))?;
    // Survivors are left out: a unit the state does not hold survives.
    let mut write = |v: &Verdict, summary: &mut RoundSummary| -> Result<(), Error> {
        match v.status {
            Status::Undecided => summary.undecided += 1,
            Status::Dropped => summary.dropped += 1,
            Status::Survives => return Ok(()),
        }
        out.values(&[
            v.rank,
            v.status as u64,
            v.root,
            v.estimate.to_bits(),
            jaccard_bits(v.jaccard),
            v.root_key,
        ])
    };
    step.set_message("merging answers");
    loop {
        let next_event = heap.peek().map(|r| r.0 .0);
        let next_state = match &mut state {
            Some(c) => c.peek()?.map(|v| v[0]),
            None => None,
        };
        let rank = match (next_event, next_state) {
            (None, None) => break,
            (Some(e), Some(s)) => e.min(s),
            (Some(e), None) => e,
            (None, Some(s)) => s,
        };
        let mut before = None;
        if next_state == Some(rank) {
            let c = state.as_mut().expect("a state");
            let v = verdict_of(c.peek()?.expect("a row"))
                .ok_or_else(|| bad(work.state_file(round - 1), "an unreadable verdict"))?;
            c.advance();
            before = Some(v);
        }
        // The earliest answer for this unit.
        let mut first: Option<Event> = None;
        let mut answered = false;
        // Every answer names a neighbour: a partition with none to give writes no row.
        while heap.peek().is_some_and(|r| r.0 .0 == rank) {
            let std::cmp::Reverse((_, p)) = heap.pop().expect("a cursor");
            let c = &mut cursors[p];
            let e = event_of(c.peek()?.expect("a row"))
                .ok_or_else(|| bad(work.events_file(round, p), "an unreadable answer"))?;
            let kind = e.kind;
            c.advance();
            answered = true;
            if kind == Kind::None {
                return Err(bad(
                    work.events_file(round, p),
                    "an answer without a neighbour",
                ));
            }
            if first.is_none_or(|f| e.at < f.at) {
                first = Some(e);
            }
            if let Some(v) = c.peek()? {
                if v[0] <= rank {
                    return Err(bad(work.events_file(round, p), "answers out of rank order"));
                }
                heap.push(std::cmp::Reverse((v[0], p)));
            }
        }
        let v = match before {
            Some(v) if v.status != Status::Undecided => {
                if answered {
                    return Err(bad(
                        work.events_file(round, 0),
                        "an answer for a unit decided before",
                    ));
                }
                v
            }
            None if round > 0 => {
                return Err(bad(
                    work.events_file(round, 0),
                    "an answer for a unit decided before",
                ));
            }
            _ => match first {
                None => Verdict {
                    rank,
                    status: Status::Survives,
                    root: rank,
                    estimate: f64::NAN,
                    jaccard: None,
                    root_key: 0,
                },
                Some(e) if e.kind == Kind::Found => Verdict {
                    rank,
                    status: Status::Dropped,
                    root: e.at.1,
                    estimate: e.estimate,
                    jaccard: e.jaccard,
                    root_key: e.at.0,
                },
                Some(_) => Verdict {
                    rank,
                    status: Status::Undecided,
                    root: 0,
                    estimate: f64::NAN,
                    jaccard: None,
                    root_key: 0,
                },
            },
        };
        write(&v, &mut summary)?;
    }
    out.finish()?;
    summary.seconds = t0.elapsed().as_secs_f64();
    work.write_json(&work.round_summary(round), &summary)?;
    // What the next round reads is this round's: the files of the one before are done with
    // (a job of this round run again is skipped by its summary).
    if round > 0 {
        let gone = |p: PathBuf| match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(&p.display().to_string(), e))
            }
            _ => Ok(()),
        };
        for p in 0..work.partitions() {
            gone(work.events_file(round - 1, p))?;
        }
        gone(work.state_file(round - 1))?;
    }
    Ok(Some(summary))
}
/// The rounds' final verdicts, in rank order, streamed to `f`; an error naming the next step
/// when the rounds have not ended. Returns the last round's number and the tests of all.
pub(super) fn verdicts(
    work: &WorkDir,
    f: impl FnMut(Verdict) -> Result<(), Error>,
) -> Result<(u32, BucketCounts), Error> {
    let mut r = 0;
    let mut counts = BucketCounts::default();
    loop {
        let Some(s) = round_summary(work, r)? else {
            return Err(Error::Work {
                path: work.round_summary(r).display().to_string(),
                msg: "not there yet: run `neardup stage greedy` first".into(),
            });
        };
        if r > 0 {
            counts += s.counts;
        }
        if s.undecided == 0 {
            read_state(work, r, f)?;
            return Ok((r, counts));
        }
        r += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Templated sets in random buckets, members placed at random, some already dropped or
    /// surviving: the walks that look their neighbours up in the prefix index answer as the
    /// walks through every neighbour do.
    #[test]
    fn the_index_changes_the_walks_work_not_their_answers() {
        let mut rng = crate::hash::Pcg32::new(33);
        for round in 0..30u64 {
            let sets = crate::stages::dedup::templated_shingle_sets(&mut rng, 120);
            let n = sets.len();
            let members: Vec<Member> = (0..n as u64)
                .map(|r| Member {
                    rank: r,
                    shard: 0,
                    row: r,
                    place: (rng.below(4) as u64, r),
                    group: 0,
                })
                .collect();
            let mut buckets: Vec<Vec<u32>> = (0..1 + rng.below(4))
                .map(|_| (0..n as u32).filter(|_| rng.below(2) == 0).collect())
                .collect();
            buckets.retain(|b| b.len() >= 2);
            let part = Part::new(members, buckets);
            let status: Vec<Status> = (0..n)
                .map(|_| match rng.below(6) {
                    0 => Status::Dropped,
                    1 => Status::Survives,
                    _ => Status::Undecided,
                })
                .collect();
            let cache = JaccardCache::default();
            for threshold in [0.5, 0.8] {
                let walks = |index_from| {
                    let tests = Tests {
                        tables: BucketTables {
                            num_perm: 1,
                            sigs: &vec![0u32; n],
                            sets: &sets,
                            groups: &[],
                            cache: &cache,
                        },
                        grouped: false,
                        local: (0..n as u32).collect(),
                        confirm: Confirm::Jaccard,
                        threshold,
                        index_from,
                        cross: None,
                    };
                    let (events, _) = decide(&part, &status, &[], &tests);
                    events
                        .iter()
                        .map(|e| (e.rank, e.kind as u64, e.at, e.target, e.jaccard))
                        .collect::<Vec<_>>()
                };
                assert_eq!(walks(0), walks(usize::MAX), "round {round}, t {threshold}");
            }
        }
    }

    #[test]
    fn places_order_by_key_descending_then_rank() {
        let keys = [
            f64::NEG_INFINITY,
            -1e300,
            -2.0,
            -0.0,
            0.0,
            1.0,
            3.5,
            1e300,
            f64::INFINITY,
        ];
        for (i, &a) in keys.iter().enumerate() {
            for (j, &b) in keys.iter().enumerate() {
                for (ra, rb) in [(0u64, 1u64), (1, 0), (5, 5)] {
                    let want = b.total_cmp(&a).then(ra.cmp(&rb));
                    assert_eq!(place(a, ra).cmp(&place(b, rb)), want, "{i} {j} {ra} {rb}");
                }
            }
        }
    }
}
