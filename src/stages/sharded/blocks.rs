//! Confirming a partition whose buckets need more documents than a job holds (a giant bucket
//! of templated pages, or one component of millions): its documents are gathered once into a
//! [`Spill`] in blocks, and its buckets are confirmed over blocks, one or two at a time, so
//! that a job holds two blocks' signatures and sets however large a bucket grows.
//!
//! What a bucket yields ([`confirm_bucket`]) is the minimum spanning forest of its confirmed
//! pairs, each pair weighed by its later member, then its earlier one (Kruskal's rule in that
//! order; the weights are distinct). A pair that is the heaviest on some cycle of confirmed
//! pairs lies in no such forest (the cycle property). So confirming a bucket restricted to two
//! blocks drops no pair of the whole bucket's forest that lies within them, and the forest of
//! what every pair of blocks kept is the whole bucket's forest: the pairs written are those of
//! confirming each bucket whole. A bucket within one block is confirmed with that block alone;
//! one across several blocks, once for each two of them (which covers every pair of its
//! members). Under `jaccard` a bucket across several blocks is also confirmed with each of its
//! blocks alone, and with two blocks only its pairs across them are tested, from the two
//! blocks' own forests ([`confirm_bucket_across`]): each pair within a block is settled once.
//! (Under the other rules a pair within a block is tested again with each other block its
//! bucket reaches.) The work counted (`checked`, `filtered`, ...) is that of the blocks.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;

use super::gather::Docs;
use super::spill::{Block, BlockDocs, Spill};
use super::WorkDir;
use crate::error::Error;
use crate::index::lsh::{split_by_band, Buckets};
use crate::index::simjoin::Sides;
use crate::index::unionfind::UnionFind;
use crate::progress::ProgressFactory;
use crate::sign::minhash::agreement;
use crate::stages::dedup::{
    confirm_bucket, confirm_bucket_across, BucketCounts, BucketTables, Confirm, JaccardCache,
    ShingleSets,
};

/// A confirmed pair of a bucket: its members by local number, the signatures' agreement (the
/// estimate is `agree / num_perm`, as `fill_estimates` computes it) and the Jaccard (NaN
/// when not computed). 24 bytes: a giant bucket's forest is most of what a job holds besides
/// its two blocks.
#[derive(Clone, Copy)]
struct Edge {
    bucket: u32,
    a: u32,
    b: u32,
    agree: u32,
    jaccard: f64,
}

/// A pair a bucket over held blocks yields: its members by place among them.
struct Found {
    a: u32,
    b: u32,
    agree: u32,
    jaccard: Option<f64>,
}

/// A partition to confirm in blocks: its buckets before their documents are gathered.
pub(super) struct Input {
    pub partition: usize,
    /// Each band row of some run: its shard and row.
    pub places: Vec<(u32, u64)>,
    /// Runs of equal band and digest, two or more long, as ranges of `places`.
    pub runs: Vec<std::ops::Range<usize>>,
    /// Each run's band.
    pub bands: Vec<u32>,
    /// The documents in some run, per shard, ascending.
    pub needed: Vec<Vec<u64>>,
}

/// A partition's documents gathered into a [`Spill`] in blocks.
pub(super) struct Spilled {
    pub partition: usize,
    pub docs: Docs,
    pub spill: Spill,
    pub blocks: Vec<Block>,
    /// Each band row's document, by local number.
    pub locals: Vec<u32>,
    /// Runs of equal band and digest, as ranges of `locals`, and each one's band.
    pub runs: Vec<std::ops::Range<usize>>,
    pub bands: Vec<u32>,
}

impl Input {
    /// Gather the documents once, into a spill in blocks of about `block_bytes`.
    pub fn spill(
        self,
        work: &WorkDir,
        block_bytes: u64,
        progress: &ProgressFactory,
    ) -> Result<Spilled, Error> {
        let Input {
            partition,
            places,
            runs,
            bands,
            needed,
        } = self;
        let jaccard = work.config().confirm == Confirm::Jaccard;
        let mut spill = Spill::create(
            work,
            "pairs",
            &format!("{partition:04}"),
            jaccard,
            block_bytes,
        )?;
        let docs = Docs::gather_into(work, needed, &[partition], Some(&mut spill), progress)?;
        let blocks = spill.finish()?.to_vec();
        let locals: Vec<u32> = places
            .par_iter()
            .map(|&(shard, row)| docs.local_at(shard as usize, row).expect("a needed row"))
            .collect();
        Ok(Spilled {
            partition,
            docs,
            spill,
            blocks,
            locals,
            runs,
            bands,
        })
    }
}

/// What confirming a partition in blocks found.
pub(super) struct Confirmed {
    /// Each confirmed pair once: the two ranks, the estimate and the Jaccard.
    pub pairs: Vec<(u64, u64, f64, Option<f64>)>,
    pub counts: BucketCounts,
    /// Buckets of two or more documents.
    pub buckets: u64,
    /// Seconds spent gathering the documents.
    pub gather_seconds: f64,
}

/// Confirm a partition over its documents in blocks of about `block_bytes`.
pub(super) fn confirm(
    work: &WorkDir,
    input: Input,
    block_bytes: u64,
    progress: &ProgressFactory,
) -> Result<Confirmed, Error> {
    let cfg = work.config();
    let jaccard = cfg.confirm == Confirm::Jaccard;
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
    let block_of = |l: u32| Block::of(&blocks, l) as u32;
    // The runs to confirm with each block alone, and with each two blocks; under `jaccard`,
    // which runs span blocks (confirmed with each of their blocks alone too).
    let mut alone: Vec<Vec<u32>> = vec![Vec::new(); blocks.len()];
    let mut across: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
    let mut spans = vec![false; if jaccard { runs.len() } else { 0 }];
    for (r, run) in runs.iter().enumerate() {
        let mut touched: Vec<u32> = locals[run.clone()].iter().map(|&l| block_of(l)).collect();
        touched.sort_unstable();
        touched.dedup();
        if let [c] = touched[..] {
            alone[c as usize].push(r as u32);
            continue;
        }
        if jaccard {
            spans[r] = true;
            for &c in &touched {
                alone[c as usize].push(r as u32);
            }
        }
        for (x, &i) in touched.iter().enumerate() {
            for &k in &touched[x + 1..] {
                across.entry((i, k)).or_default().push(r as u32);
            }
        }
    }
    let whole = Whole {
        work,
        bands: &bands,
        runs: &runs,
        locals: &locals,
        docs: &docs,
        blocks: &blocks,
        spans: &spans,
    };
    let mut state = State {
        keys: HashMap::new(),
        own: HashMap::new(),
        edges: Vec::new(),
        merged: 0,
        uf: UnionFind::new(docs.rank.len()),
        counts: BucketCounts::default(),
    };
    let most = blocks
        .iter()
        .map(|b| (b.docs.end - b.docs.start) as usize)
        .max()
        .unwrap_or(0);
    for (k, alone) in alone.iter().enumerate() {
        let mut held = spill.read(k)?;
        let nk = held.sigs.len() / cfg.params.num_perm;
        // Room for any other block's beside it, taken once.
        held.sigs.reserve_exact(most * cfg.params.num_perm);
        let mut sets = ShingleSets::new();
        held.sets_into(&mut sets, 0);
        step.set_message(format!("block {} of {}", k + 1, blocks.len()));
        whole.confirm(alone, &[k], &held.sigs, &sets, &mut state);
        for (i, other_block) in blocks.iter().enumerate().take(k) {
            let Some(rs) = across.get(&(i as u32, k as u32)) else {
                continue;
            };
            // Block `i`'s signatures after block `k`'s, in the room kept for them.
            let mut other = BlockDocs {
                sigs: std::mem::take(&mut held.sigs),
                sets: Vec::new(),
            };
            spill.read_into(i, &mut other)?;
            let ni = (other_block.docs.end - other_block.docs.start) as usize;
            other.sets_into(&mut sets, nk as u32);
            let mut sigs = other.sigs;
            whole.confirm(rs, &[k, i], &sigs, &sets, &mut state);
            for l in nk..nk + ni {
                sets.remove(&(l as u32));
            }
            sigs.truncate(nk * cfg.params.num_perm);
            held.sigs = sigs;
        }
    }
    state.merge(&docs.rank);
    let np = cfg.params.num_perm as f64;
    let pairs = state
        .edges
        .iter()
        .map(|e| {
            (
                docs.rank[e.a as usize],
                docs.rank[e.b as usize],
                e.agree as f64 / np,
                jaccard.then_some(e.jaccard),
            )
        })
        .collect();
    Ok(Confirmed {
        pairs,
        counts: state.counts,
        buckets: state.keys.len() as u64,
        gather_seconds: docs.seconds,
    })
}

/// What every block's confirmation reads.
struct Whole<'a> {
    work: &'a WorkDir,
    /// Each run's band.
    bands: &'a [u32],
    runs: &'a [std::ops::Range<usize>],
    locals: &'a [u32],
    docs: &'a Docs,
    blocks: &'a [Block],
    /// Under `jaccard`, whether each run spans blocks; empty otherwise.
    spans: &'a [bool],
}

/// What the blocks' confirmations have found so far.
struct State {
    /// Each bucket (its run and band value) by number.
    keys: HashMap<(u32, Vec<u32>), u32>,
    /// Under `jaccard`, each bucket's own forest in each block it spans (by bucket and
    /// block: its pairs by local number, the earlier first), found with the block alone.
    own: HashMap<(u32, u32), Vec<(u32, u32)>>,
    /// Each bucket's confirmed pairs: its forest, as far as [`State::merged`] goes, then
    /// pairs found since.
    edges: Vec<Edge>,
    /// Edges reduced to forests.
    merged: usize,
    /// All singletons between merges.
    uf: UnionFind,
    counts: BucketCounts,
}

impl State {
    /// Keep of each bucket's pairs its minimum spanning forest (Kruskal's rule by later
    /// member, then earlier, in rank order).
    fn merge(&mut self, rank: &[u64]) {
        let edges = &mut self.edges;
        edges.par_sort_unstable_by_key(|e| (e.bucket, rank[e.b as usize], rank[e.a as usize]));
        edges.dedup_by_key(|e| (e.bucket, e.a, e.b));
        let uf = &mut self.uf;
        let mut kept = 0;
        let mut s = 0;
        while s < edges.len() {
            let (bucket, from) = (edges[s].bucket, kept);
            while s < edges.len() && edges[s].bucket == bucket {
                let e = edges[s];
                if uf.union(e.a, e.b) {
                    edges[kept] = e;
                    kept += 1;
                }
                s += 1;
            }
            // Every document the bucket's union-find touched is an end of a pair kept.
            for e in &edges[from..kept] {
                uf.reset(e.a);
                uf.reset(e.b);
            }
        }
        edges.truncate(kept);
        self.merged = kept;
    }
}

impl Whole<'_> {
    /// Confirm the runs `runs` over the blocks `held` (one, or two: their documents in that
    /// order in `sigs` and `sets`, numbered from 0), restricted to the members in them.
    fn confirm(
        &self,
        runs: &[u32],
        held: &[usize],
        sigs: &[u32],
        sets: &ShingleSets,
        state: &mut State,
    ) {
        if runs.is_empty() {
            return;
        }
        let cfg = self.work.config();
        let np = cfg.params.num_perm;
        let rows_of = cfg.lsh.rows;
        // Local number <-> place among the held documents.
        let starts: Vec<(u32, u32, u32)> = {
            let mut at = 0;
            held.iter()
                .map(|&c| {
                    let b = &self.blocks[c];
                    let s = (b.docs.start, b.docs.end, at);
                    at += b.docs.end - b.docs.start;
                    s
                })
                .collect()
        };
        let place = |l: u32| {
            starts
                .iter()
                .find(|s| s.0 <= l && l < s.1)
                .map(|s| s.2 + l - s.0)
        };
        let n: u32 = starts.iter().map(|s| s.1 - s.0).sum();
        let mut global = vec![0u32; n as usize];
        for s in &starts {
            for l in s.0..s.1 {
                global[(s.2 + l - s.0) as usize] = l;
            }
        }
        let rank: Vec<u64> = global.iter().map(|&l| self.docs.rank[l as usize]).collect();
        let groups: Vec<u32> = if self.docs.groups.is_empty() {
            Vec::new()
        } else {
            global
                .iter()
                .map(|&l| self.docs.groups[l as usize])
                .collect()
        };
        // Each run, restricted and split by full-band equality: its buckets, each its members
        // in rank order, with its run and band value.
        let (buckets, keys) = runs
            .par_iter()
            .fold(
                || (Buckets::default(), Vec::new()),
                |(mut kept, mut keys), &r| {
                    let run = self.runs[r as usize].clone();
                    let j = self.bands[r as usize] as usize;
                    let band = |p: u32| {
                        let off = p as usize * np + j * rows_of;
                        &sigs[off..off + rows_of]
                    };
                    let mut members: Vec<u32> =
                        self.locals[run].iter().filter_map(|&l| place(l)).collect();
                    split_by_band(
                        &mut members,
                        band,
                        |p| rank[p as usize],
                        |bucket| {
                            kept.push(bucket.iter().copied());
                            keys.push((r, band(bucket[0]).to_vec()));
                        },
                    );
                    (kept, keys)
                },
            )
            .reduce(
                || (Buckets::default(), Vec::new()),
                |(mut ka, mut sa), (kb, sb)| {
                    ka.append(&kb);
                    sa.extend(sb);
                    (ka, sa)
                },
            );
        let of_run: Vec<u32> = keys.iter().map(|k| k.0).collect();
        let ids: Vec<u32> = keys
            .into_iter()
            .map(|k| {
                let next = state.keys.len() as u32;
                *state.keys.entry(k).or_insert(next)
            })
            .collect();
        // Each distinct list of members confirmed once, its work counted for each bucket.
        let firsts = buckets.firsts();
        let mut times = vec![0u64; buckets.len()];
        for &f in &firsts {
            times[f] += 1;
        }
        let cache = JaccardCache::default();
        let tables = BucketTables {
            num_perm: np,
            sigs,
            sets,
            cache: &cache,
            groups: &groups,
        };
        // With two blocks under `jaccard`: each member's side, and the two blocks' own forests.
        let two = held.len() == 2 && !self.spans.is_empty();
        let first_block = starts[0].1 - starts[0].0;
        let own = &state.own;
        let found: Vec<(usize, Vec<Found>, BucketCounts)> = (0..buckets.len())
            .into_par_iter()
            .filter(|&x| firsts[x] == x)
            .map(|x| {
                let (mut pairs, mut once) = (Vec::new(), BucketCounts::default());
                let members = buckets.get(x);
                if two {
                    let second: Vec<bool> = members.iter().map(|&p| p >= first_block).collect();
                    let at = |l: u32| {
                        let p = place(l).expect("a held member");
                        members
                            .binary_search_by_key(&rank[p as usize], |&q| rank[q as usize])
                            .expect("a member of the bucket") as u32
                    };
                    let mut known: Vec<(u32, u32)> = held
                        .iter()
                        .filter_map(|&c| own.get(&(ids[x], c as u32)))
                        .flatten()
                        .map(|&(a, b)| (at(a), at(b)))
                        .collect();
                    known.sort_unstable_by_key(|&(a, b)| (b, a));
                    let sides = Sides {
                        second: &second,
                        known: &known,
                    };
                    confirm_bucket_across(
                        members,
                        sides,
                        &tables,
                        cfg.threshold,
                        &mut pairs,
                        &mut once,
                    );
                } else {
                    confirm_bucket(
                        members,
                        &tables,
                        cfg.confirm,
                        cfg.threshold,
                        &mut pairs,
                        &mut once,
                    );
                }
                let sig = |d: u32| &sigs[d as usize * np..(d as usize + 1) * np];
                let pairs: Vec<Found> = pairs
                    .iter()
                    .map(|p| Found {
                        a: p.a,
                        b: p.b,
                        agree: agreement(sig(p.a), sig(p.b)) as u32,
                        jaccard: p.jaccard,
                    })
                    .collect();
                (x, pairs, once.times(times[x]))
            })
            .collect();
        let mut of_first: HashMap<usize, usize> = HashMap::with_capacity(found.len());
        for (at, (x, _, counts)) in found.iter().enumerate() {
            of_first.insert(*x, at);
            state.counts += *counts;
        }
        for (x, &id) in ids.iter().enumerate() {
            let pairs = &found[of_first[&firsts[x]]].1;
            if held.len() == 1 && self.spans.get(of_run[x] as usize) == Some(&true) {
                let forest = state.own.entry((id, held[0] as u32)).or_default();
                forest.extend(
                    pairs
                        .iter()
                        .map(|p| (global[p.a as usize], global[p.b as usize])),
                );
            }
            for p in pairs {
                state.edges.push(Edge {
                    bucket: id,
                    a: global[p.a as usize],
                    b: global[p.b as usize],
                    agree: p.agree,
                    jaccard: p.jaccard.unwrap_or(f64::NAN),
                });
            }
        }
        // Forests again once the pairs found since outnumber those kept.
        if state.edges.len() > 2 * state.merged {
            state.merge(&self.docs.rank);
        }
    }
}
