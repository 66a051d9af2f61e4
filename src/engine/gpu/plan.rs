//! Cutting batches into GPU-sized pieces ("sub-batches") and laying each out as the shaders read
//! it. Shared by the GPU engine and its CPU ports, so the ports test the very layout the GPU gets.
//!
//! A job is a list of *parts* (batches tokenized side by side on different threads); a
//! sub-batch may take documents from several parts, so the parts are never concatenated. The
//! plan holds only offsets ([`SubPlan`]); [`fill`] then copies each piece of a sub-batch (a run
//! of one part's words) into the memory it is uploaded from, the pieces in parallel. A piece's
//! bytes and word starts are copied as the part holds them: the word starts stay relative to
//! the part, and each document's entry carries the shift that turns them into offsets in the
//! sub-batch (the shaders add it), so no word is laid out again for the device.
//!
//! A sub-batch is either a run of whole documents, or one *fragment* of a document too big for
//! a sub-batch on its own: fragments are windows of words overlapping by `k - 1`, so every
//! `k`-word shingle of the document lies in exactly one fragment, and the host merges the
//! fragments' signatures with `min`. A document that cannot be cut this way (one shingle alone
//! is larger than a sub-batch, say a 100 MB "word"), or that holds a shingle longer than
//! [`MAX_SHINGLE_BYTES`], is left to the host's CPU routine.

use crate::batch::PackedBatch;
use crate::hash::{PermParams, P};
use crate::text::shingle_layout;

/// Shingles per chunk of the min-reduction stage (mirrors `CHUNK` in `shaders/minhash.wgsl`).
pub const CHUNK: usize = 256;

/// The longest shingle, in bytes, that one shader invocation hashes. Mesa's llvmpipe (the
/// software adapter the GPU engine is tested on without a GPU) ends every invocation's loops
/// after 65,535 iterations in all, so a longer shingle would come out hashed short there: a
/// document holding one is signed on the host instead, on every adapter alike. The bound
/// leaves room for the hash shader's other loop (the search for a shingle's document).
pub const MAX_SHINGLE_BYTES: usize = 1 << 15;

/// Whether document `d` has a shingle of more than [`MAX_SHINGLE_BYTES`] bytes. Only a document
/// of more bytes than that can have one, so ordinary documents are not looked into.
fn has_long_shingle(batch: &PackedBatch, k: usize, d: usize) -> bool {
    let r = batch.doc_words(d);
    let ws = &batch.word_start;
    if ((ws[r.end] - ws[r.start]) as usize) <= MAX_SHINGLE_BYTES {
        return false;
    }
    let (count, width) = shingle_layout(r.len(), k);
    // Shingle j spans words j .. j + width and ends before the space after its last word.
    (0..count).any(|j| {
        let (s, e) = (ws[r.start + j], ws[r.start + j + width]);
        (e - s - 1) as usize > MAX_SHINGLE_BYTES
    })
}

/// The most a sub-batch may hold (from the device's buffer limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubBatchLimits {
    pub max_bytes: usize,
    pub max_words: usize,
    pub max_shingles: usize,
    pub max_docs: usize,
    pub max_chunks: usize,
}

impl SubBatchLimits {
    /// Limits for buffers of at most `max_binding` bytes each, `num_perm` permutations, and
    /// word bytes capped at `batch_bytes`.
    pub fn new(max_binding: u64, num_perm: usize, batch_bytes: usize) -> Self {
        let max_binding = max_binding.min(u32::MAX as u64) as usize;
        let max_bytes = (batch_bytes.min(max_binding) / 4 * 4).max(16);
        let u32_slots = max_binding / 4;
        // Buffers are sized for words of four bytes on average (with their space; English text
        // averages near six). Text of shorter words simply makes more, smaller sub-batches: the
        // planner checks every limit, and counts the slot each piece's end takes.
        let max_words = (max_bytes / 4).clamp(16, u32_slots);
        let max_shingles = max_words;
        // 64Ki documents a sub-batch is plenty (a 32 MiB sub-batch of 512-byte documents) and
        // keeps the signature and readback buffers at 32 MiB each for 128 permutations. A
        // smaller sub-batch gets room for documents of 256 bytes on average (at least 4Ki):
        // its signature buffers shrink with it, and shorter documents only cut it sooner.
        let max_docs = (max_binding / (num_perm * 4))
            .min(max_binding / 16)
            .min((max_bytes / 256).max(1 << 12))
            .clamp(1, 1 << 16);
        let max_chunks = (max_binding / 16).min(max_shingles / CHUNK + max_docs + 1);
        SubBatchLimits {
            max_bytes,
            max_words,
            max_shingles,
            max_docs,
            max_chunks,
        }
    }
}

/// Where a sub-batch's pieces start, and (for the whole sub-batch) how much it holds: bytes,
/// word slots (each piece's words and one for its end), documents, shingles and 256-shingle
/// chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub bytes: u32,
    pub words: u32,
    pub docs: u32,
    pub shingles: u32,
    pub chunks: u32,
}

impl Counts {
    /// One more word slot: the end of a piece's last word.
    const PIECE_END: Counts = Counts {
        bytes: 0,
        words: 1,
        docs: 0,
        shingles: 0,
        chunks: 0,
    };

    fn plus(self, o: Counts) -> Counts {
        Counts {
            bytes: self.bytes + o.bytes,
            words: self.words + o.words,
            docs: self.docs + o.docs,
            shingles: self.shingles + o.shingles,
            chunks: self.chunks + o.chunks,
        }
    }

    fn fits(&self, l: &SubBatchLimits) -> bool {
        self.bytes as usize <= l.max_bytes
            && self.words as usize <= l.max_words
            && self.shingles as usize <= l.max_shingles
            && self.chunks as usize <= l.max_chunks
            && self.docs as usize <= l.max_docs
    }
}

/// What document `d` of `b` adds to a sub-batch, within a piece already open.
fn doc_counts(b: &PackedBatch, k: usize, d: usize) -> Counts {
    let r = b.doc_words(d);
    let s = shingle_layout(r.len(), k).0;
    Counts {
        bytes: b.word_start[r.end] - b.word_start[r.start],
        words: r.len() as u32,
        docs: 1,
        shingles: s as u32,
        chunks: s.div_ceil(CHUNK) as u32,
    }
}

/// One run of a part's words in a sub-batch: documents `d0 .. d1` of part `part`, whose words
/// are `w0 .. w1` (a fragment's window of its one document), starting at `at`. Its word slots
/// hold the part's word starts `w0 ..= w1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub part: u32,
    pub d0: u32,
    pub d1: u32,
    pub w0: u32,
    pub w1: u32,
    pub at: Counts,
}

/// One sub-batch, as offsets into the parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubPlan {
    pub pieces: Vec<Piece>,
    /// What the whole sub-batch holds.
    pub size: Counts,
    /// The job's document (counted over all parts) whose signature is the first row.
    pub first_target: u32,
    /// Whether this is a fragment of one document (its row is min-merged, not copied).
    pub fragment: bool,
}

impl SubPlan {
    pub fn num_docs(&self) -> usize {
        self.size.docs as usize
    }

    /// Bytes of each region of the upload: word bytes (padded to four), word starts,
    /// documents, chunks.
    pub fn region_bytes(&self) -> [usize; 4] {
        let s = &self.size;
        [
            (s.bytes as usize).next_multiple_of(4),
            s.words as usize * 4,
            s.docs as usize * 16,
            s.chunks as usize * 16,
        ]
    }
}

/// A document left to the host: document `doc` of part `part`, the job's document `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostDoc {
    pub part: u32,
    pub doc: u32,
    pub target: u32,
}

/// How a job is cut: the sub-batches, and the documents left to the host.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub subs: Vec<SubPlan>,
    /// Documents no sub-batch can hold (a single shingle beyond `max_bytes`, or beyond
    /// [`MAX_SHINGLE_BYTES`]).
    pub host_docs: Vec<HostDoc>,
}

/// Cut the documents of `parts` (in order, part after part) for shingle width `k` under
/// `limits`. Documents keep their order; a run of whole documents may span parts. No byte is
/// copied here: each part's documents are measured on the pool (a long document is looked
/// into for a shingle past [`MAX_SHINGLE_BYTES`]), then the cuts take a few operations a
/// document on the calling thread.
pub fn plan(parts: &[PackedBatch], k: usize, limits: &SubBatchLimits) -> Plan {
    use rayon::prelude::*;
    // Per document: its counts, or `None` when it holds a shingle too long for the device.
    let measured: Vec<Vec<Option<Counts>>> = parts
        .par_iter()
        .map(|b| {
            (0..b.num_docs())
                .map(|d| (!has_long_shingle(b, k, d)).then(|| doc_counts(b, k, d)))
                .collect()
        })
        .collect();
    let mut out = Plan::default();
    let mut cur = SubPlan::default();
    let mut target = 0u32;
    for (p, (b, counts)) in parts.iter().zip(&measured).enumerate() {
        for (d, &c) in counts.iter().enumerate() {
            let t = target;
            target += 1;
            let Some(c) = c else {
                close(&mut cur, &mut out);
                out.host_docs.push(HostDoc {
                    part: p as u32,
                    doc: d as u32,
                    target: t,
                });
                continue;
            };
            if cur.size.docs > 0 && cur.size.plus(cost(&cur, p, d, c)).fits(limits) {
                push_doc(&mut cur, b, p, d, c);
                continue;
            }
            close(&mut cur, &mut out);
            if c.plus(Counts::PIECE_END).fits(limits) {
                cur.first_target = t;
                push_doc(&mut cur, b, p, d, c);
                continue;
            }
            // Too big alone: fragments, or the host when even one shingle does not fit.
            match fragments(b, k, p, d, t, limits) {
                Some(frags) => out.subs.extend(frags),
                None => out.host_docs.push(HostDoc {
                    part: p as u32,
                    doc: d as u32,
                    target: t,
                }),
            }
        }
    }
    close(&mut cur, &mut out);
    out
}

/// Whether document `d` of part `p` extends the last piece of `cur` (which ends just before it
/// in the same part).
fn extends(cur: &SubPlan, p: usize, d: usize) -> bool {
    cur.pieces
        .last()
        .is_some_and(|last| last.part == p as u32 && last.d1 == d as u32)
}

/// What document `d` of part `p` (with counts `c`) adds to `cur`: a new piece takes a slot for
/// its end too.
fn cost(cur: &SubPlan, p: usize, d: usize, c: Counts) -> Counts {
    if extends(cur, p, d) {
        c
    } else {
        c.plus(Counts::PIECE_END)
    }
}

/// Add document `d` of part `p` (with counts `c`) to `cur`: to its last piece when that one
/// ends just before it in the same part.
fn push_doc(cur: &mut SubPlan, b: &PackedBatch, p: usize, d: usize, c: Counts) {
    let r = b.doc_words(d);
    if extends(cur, p, d) {
        let last = cur.pieces.last_mut().expect("a piece to extend");
        last.d1 += 1;
        last.w1 = r.end as u32;
        cur.size = cur.size.plus(c);
    } else {
        cur.pieces.push(Piece {
            part: p as u32,
            d0: d as u32,
            d1: d as u32 + 1,
            w0: r.start as u32,
            w1: r.end as u32,
            at: cur.size,
        });
        cur.size = cur.size.plus(c.plus(Counts::PIECE_END));
    }
}

fn close(cur: &mut SubPlan, out: &mut Plan) {
    if cur.size.docs > 0 {
        out.subs.push(std::mem::take(cur));
    }
}

/// The counts of words `s .. e` of one document as a fragment (one piece, with its end slot).
fn window(b: &PackedBatch, k: usize, s: usize, e: usize) -> Counts {
    let sh = (e - s + 1).saturating_sub(k).max(1) as u32;
    Counts {
        bytes: b.word_start[e] - b.word_start[s],
        words: (e - s + 1) as u32,
        docs: 1,
        shingles: sh,
        chunks: sh.div_ceil(CHUNK as u32),
    }
}

/// Fragments of document `d` of part `p` (the job's document `target`): word windows `[s, e)`
/// with consecutive windows overlapping by `k - 1` words, each as large as the limits allow.
/// `None` when even one shingle is too big (or the document has fewer than `k` words and
/// still does not fit).
fn fragments(
    b: &PackedBatch,
    k: usize,
    p: usize,
    d: usize,
    target: u32,
    l: &SubBatchLimits,
) -> Option<Vec<SubPlan>> {
    let r = b.doc_words(d);
    if r.len() < k {
        return None;
    }
    let mut out = Vec::new();
    let mut s = r.start;
    loop {
        // The largest e with k <= e - s words that fits.
        if !window(b, k, s, s + k).fits(l) {
            return None;
        }
        let (mut lo, mut hi) = (s + k, r.end);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if window(b, k, s, mid).fits(l) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let e = lo;
        out.push(SubPlan {
            pieces: vec![Piece {
                part: p as u32,
                d0: d as u32,
                d1: d as u32 + 1,
                w0: s as u32,
                w1: e as u32,
                at: Counts::default(),
            }],
            size: window(b, k, s, e),
            first_target: target,
            fragment: true,
        });
        if e == r.end {
            break;
        }
        s = e - (k - 1);
    }
    Some(out)
}

/// Write-only memory that may be handed to another thread: a [`wgpu::WriteOnly`] of bytes is
/// exclusive access like `&mut [u8]`, but the type's `Send` covers only sized targets.
struct Region<'a>(wgpu::WriteOnly<'a, [u8]>);

// SAFETY: `WriteOnly<'a, [u8]>` is an exclusive, write-only borrow of plain bytes for `'a`
// (it stands for `&'a mut [u8]`, which is `Send`); sending it moves that exclusive access.
unsafe impl Send for Region<'_> {}

/// Split `r` at the given ends (increasing, the last at most `r.len()`): one region each, then
/// what is left.
fn split_at_ends<'a>(
    mut r: wgpu::WriteOnly<'a, [u8]>,
    lens: impl Iterator<Item = usize>,
) -> (Vec<Region<'a>>, wgpu::WriteOnly<'a, [u8]>) {
    let mut out = Vec::new();
    for n in lens {
        let (a, rest) = r.split_at(n);
        out.push(Region(a));
        r = rest;
    }
    (out, r)
}

/// Write u32 values, little-endian (as the GPU reads them), into `r` (exactly `4 * n` bytes):
/// a block at a time through a buffer on the stack, so that mapped memory (perhaps
/// write-combined) sees whole copies.
fn write_u32s(mut r: wgpu::WriteOnly<'_, [u8]>, values: impl Iterator<Item = u32>) {
    let mut buf = [0u32; WRITE_BLOCK];
    let mut n = 0;
    for v in values {
        buf[n] = v.to_le();
        n += 1;
        if n == WRITE_BLOCK {
            let (mut head, rest) = r.split_at(WRITE_BLOCK * 4);
            head.copy_from_slice(bytemuck::cast_slice(&buf));
            r = rest;
            n = 0;
        }
    }
    r.copy_from_slice(bytemuck::cast_slice(&buf[..n]));
}

/// u32 values a block of [`write_u32s`] holds (16 KiB on the stack).
const WRITE_BLOCK: usize = 4096;

/// Copy u32 values into `r` (exactly `4 * src.len()` bytes) as the GPU reads them: one copy of
/// the bytes on a little-endian host.
fn copy_u32s(mut r: wgpu::WriteOnly<'_, [u8]>, src: &[u32]) {
    if cfg!(target_endian = "little") {
        r.copy_from_slice(bytemuck::cast_slice(src));
    } else {
        write_u32s(r, src.iter().copied());
    }
}

/// Lay sub-batch `sub` of `parts` out for the shaders, into `regions` (each exactly
/// [`SubPlan::region_bytes`] long): word bytes (zero padded); each piece's word starts
/// `w0 ..= w1` as its part holds them; per document `[first word, first shingle, end word,
/// shift]`, where the shift (wrapping) turns the document's word starts into byte offsets in
/// the sub-batch; per chunk `[document, first shingle, end shingle, 0]`. The pieces are written
/// in parallel.
pub fn fill(
    sub: &SubPlan,
    parts: &[PackedBatch],
    k: usize,
    regions: [wgpu::WriteOnly<'_, [u8]>; 4],
) {
    let [bytes, words, docs, chunks] = regions;
    let piece_counts = |i: usize| -> Counts {
        let next = sub.pieces.get(i + 1).map_or(sub.size, |p| p.at);
        let at = sub.pieces[i].at;
        Counts {
            bytes: next.bytes - at.bytes,
            words: next.words - at.words,
            docs: next.docs - at.docs,
            shingles: next.shingles - at.shingles,
            chunks: next.chunks - at.chunks,
        }
    };
    let n = sub.pieces.len();
    let (b_out, mut pad) = split_at_ends(bytes, (0..n).map(|i| piece_counts(i).bytes as usize));
    pad.fill(0);
    let (w_out, _) = split_at_ends(words, (0..n).map(|i| piece_counts(i).words as usize * 4));
    let (d_out, _) = split_at_ends(docs, (0..n).map(|i| piece_counts(i).docs as usize * 16));
    let (c_out, _) = split_at_ends(chunks, (0..n).map(|i| piece_counts(i).chunks as usize * 16));
    let work: Vec<_> = sub
        .pieces
        .iter()
        .zip(b_out)
        .zip(w_out)
        .zip(d_out)
        .zip(c_out)
        .map(|((((p, b), w), d), c)| (p, b, w, d, c))
        .collect();
    let fragment = sub.fragment;
    let one = move |(p, b, w, d, c): (&Piece, Region, Region, Region, Region)| {
        fill_piece(
            p,
            &parts[p.part as usize],
            k,
            fragment,
            [b.0, w.0, d.0, c.0],
        );
    };
    if work.len() > 1 {
        use rayon::prelude::*;
        work.into_par_iter().for_each(one);
    } else {
        work.into_iter().for_each(one);
    }
}

fn fill_piece(
    p: &Piece,
    b: &PackedBatch,
    k: usize,
    fragment: bool,
    regions: [wgpu::WriteOnly<'_, [u8]>; 4],
) {
    let [mut bytes, words, docs, chunks] = regions;
    let ws = &b.word_start;
    let (w0, w1) = (p.w0 as usize, p.w1 as usize);
    let base = ws[w0];
    bytes.copy_from_slice(&b.bytes[base as usize..ws[w1] as usize]);
    copy_u32s(words, &ws[w0..=w1]);
    let shift = p.at.bytes.wrapping_sub(base);
    let counts: Vec<u32> = if fragment {
        vec![window(b, k, w0, w1).shingles]
    } else {
        (p.d0..p.d1)
            .map(|d| shingle_layout(b.doc_words(d as usize).len(), k).0 as u32)
            .collect()
    };
    let mut entries = Vec::with_capacity(counts.len() * 4);
    let mut runs = Vec::new();
    let mut s = p.at.shingles;
    for (i, &n) in counts.iter().enumerate() {
        let slot = |w: u32| p.at.words + w - p.w0;
        let (first_word, end_word) = if fragment {
            (slot(p.w0), slot(p.w1))
        } else {
            let d = p.d0 as usize + i;
            (slot(b.doc_word_start[d]), slot(b.doc_word_start[d + 1]))
        };
        entries.extend([first_word, s, end_word, shift]);
        let doc = p.at.docs + i as u32;
        let mut c = s;
        while c < s + n {
            let e = (c + CHUNK as u32).min(s + n);
            runs.extend([doc, c, e, 0]);
            c = e;
        }
        s += n;
    }
    write_u32s(docs, entries.into_iter());
    write_u32s(chunks, runs.into_iter());
}

/// One sub-batch laid out in vectors, as [`fill`] writes it (for the CPU ports and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubBatch {
    /// Word bytes, four to a u32, little-endian, zero padded.
    pub bytes: Vec<u32>,
    /// Each piece's word starts, as its part holds them (the end of its last word included).
    pub word_start: Vec<u32>,
    /// Per document: `[first word, first shingle, end word, shift]`; word `w` of the document
    /// starts at byte `word_start[w] + shift` (wrapping) of the sub-batch.
    pub docs: Vec<[u32; 4]>,
    /// Per chunk: `[document, first shingle, end shingle, 0]`.
    pub chunks: Vec<[u32; 4]>,
    pub num_shingles: u32,
    /// For each document of the sub-batch, the job's document its signature belongs to.
    pub targets: Vec<u32>,
    /// Whether this is a fragment (its signature is min-merged, not copied).
    pub fragment: bool,
}

impl SubBatch {
    pub fn num_docs(&self) -> usize {
        self.targets.len()
    }

    /// `sub` of `parts` laid out by [`fill`].
    pub fn layout(sub: &SubPlan, parts: &[PackedBatch], k: usize) -> SubBatch {
        let mut mem: [Vec<u8>; 4] = sub.region_bytes().map(|n| vec![0xa5u8; n]);
        {
            let [a, b, c, d] = &mut mem;
            fill(
                sub,
                parts,
                k,
                [a, b, c, d].map(|v| wgpu::WriteOnly::from_mut(v.as_mut_slice())),
            );
        }
        let u32s = |v: &[u8]| -> Vec<u32> {
            v.chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("four bytes")))
                .collect()
        };
        let [bytes, words, docs, chunks] = &mem;
        SubBatch {
            bytes: u32s(bytes),
            word_start: u32s(words),
            docs: u32s(docs)
                .chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect(),
            chunks: u32s(chunks)
                .chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect(),
            num_shingles: sub.size.shingles,
            targets: (sub.first_target..sub.first_target + sub.size.docs).collect(),
            fragment: sub.fragment,
        }
    }
}

/// Interleave `a` and `b` as the shaders read them.
pub fn interleave(perms: &PermParams) -> Vec<[u32; 2]> {
    perms
        .a
        .iter()
        .zip(&perms.b)
        .map(|(&a, &b)| [a, b])
        .collect()
}

/// Set the rows of fragmented documents to `P` before their fragments are min-merged in.
pub fn init_fragment_rows(subs: &[SubPlan], num_perm: usize, out: &mut [u32]) {
    for sub in subs.iter().filter(|s| s.fragment) {
        let t = sub.first_target as usize;
        out[t * num_perm..(t + 1) * num_perm].fill(P);
    }
}

/// Documents no sub-batch can hold are signed by the CPU engine's routine, into their rows of
/// `out` (the job's documents over all `parts`).
pub fn sign_on_host(
    parts: &[PackedBatch],
    docs: &[HostDoc],
    k: usize,
    perms: &PermParams,
    out: &mut [u32],
) {
    let np = perms.len();
    let mut xs = Vec::new();
    for h in docs {
        let (d, t) = (h.doc as usize, h.target as usize);
        let row = &mut out[t * np..(t + 1) * np];
        crate::sign::docs::sign_docs(
            &parts[h.part as usize],
            d..d + 1,
            k,
            perms,
            &mut xs,
            row,
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(max_bytes: usize) -> SubBatchLimits {
        SubBatchLimits {
            max_bytes,
            max_words: max_bytes,
            max_shingles: max_bytes,
            max_docs: 1000,
            max_chunks: 1000,
        }
    }

    fn laid(parts: &[PackedBatch], k: usize, l: &SubBatchLimits) -> (Vec<SubBatch>, Vec<u32>) {
        let p = plan(parts, k, l);
        (
            p.subs
                .iter()
                .map(|s| SubBatch::layout(s, parts, k))
                .collect(),
            p.host_docs.iter().map(|h| h.target).collect(),
        )
    }

    #[test]
    fn whole_documents_stay_whole_and_in_order() {
        let b = PackedBatch::from_texts(&["a b c", "", "d e f g h i"]);
        let (subs, host) = laid(&[b], 3, &tiny(1 << 20));
        assert!(host.is_empty());
        assert_eq!(subs.len(), 1);
        let sb = &subs[0];
        assert_eq!(sb.targets, [0, 1, 2]);
        assert_eq!(sb.docs, [[0, 0, 3, 0], [3, 1, 3, 0], [3, 1, 9, 0]]);
        assert_eq!(sb.word_start, [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
        assert_eq!(sb.chunks, [[0, 0, 1, 0], [2, 1, 5, 0]]);
        assert_eq!(sb.num_shingles, 5);
        // "a b c d e f g h i " little-endian, zero padded to a multiple of four.
        let bytes: Vec<u8> = sb.bytes.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(&bytes[..18], b"a b c d e f g h i ");
        assert_eq!(&bytes[18..], [0, 0]);
    }

    /// Pieces from two parts, and a piece that starts inside its part: word starts as the
    /// parts hold them, one end slot a piece, and each document's shift (wrapping when the
    /// piece starts later in its part than in the sub-batch).
    #[test]
    fn pieces_keep_their_parts_word_starts_and_shift_them_per_document() {
        // "a b c " (starts 0 2 4, end 6) and "dd e " (starts 0 3, end 5).
        let parts = [
            PackedBatch::from_texts(&["a b", "c"]),
            PackedBatch::from_texts(&["dd e"]),
        ];
        let (subs, host) = laid(&parts, 1, &tiny(1 << 20));
        assert!(host.is_empty());
        assert_eq!(subs.len(), 1);
        let sb = &subs[0];
        assert_eq!(sb.word_start, [0, 2, 4, 6, 0, 3, 5]);
        assert_eq!(
            sb.docs,
            [[0, 0, 2, 0], [2, 2, 3, 0], [4, 3, 6, 6]],
            "the second part's words start 6 bytes into the sub-batch"
        );
        assert_eq!(sb.chunks, [[0, 0, 2, 0], [1, 2, 3, 0], [2, 3, 5, 0]]);
        let bytes: Vec<u8> = sb.bytes.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(&bytes[..11], b"a b c dd e ");

        let mut one_doc = tiny(1 << 20);
        one_doc.max_docs = 1;
        let (subs, _) = laid(&parts, 1, &one_doc);
        assert_eq!(subs.len(), 3);
        // "c" starts 4 bytes into its part and at 0 in its sub-batch.
        assert_eq!(subs[1].word_start, [4, 6]);
        assert_eq!(subs[1].docs, [[0, 0, 1, 4u32.wrapping_neg()]]);
        let bytes: Vec<u8> = subs[1].bytes.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(bytes, b"c \0\0");
    }

    /// Each document's shingles as the shaders read them out of a laid-out sub-batch.
    fn shingles_read_back(sb: &SubBatch, k: u32) -> Vec<(u32, Vec<Vec<u8>>)> {
        let bytes: Vec<u8> = sb.bytes.iter().flat_map(|w| w.to_le_bytes()).collect();
        (0..sb.num_docs())
            .map(|i| {
                let [first, s0, end, shift] = sb.docs[i];
                let s1 = sb.docs.get(i + 1).map_or(sb.num_shingles, |d| d[1]);
                let shingles = (0..s1 - s0)
                    .map(|j| {
                        let w0 = first + j;
                        let w_end = (w0 + k).min(end);
                        let b0 = sb.word_start[w0 as usize].wrapping_add(shift);
                        let b1 = sb.word_start[w_end as usize].wrapping_add(shift) - 1;
                        bytes[b0 as usize..b1 as usize].to_vec()
                    })
                    .collect();
                (sb.targets[i], shingles)
            })
            .collect()
    }

    /// Parts planned side by side, whatever their cut and the limits (runs across parts,
    /// fragments, documents for the host): every sub-batch fits, each laid out exactly fills
    /// its regions, and reading the layout as the shaders do gives every shingle of the same
    /// documents packed into one batch, once, in order; the documents left to the host are
    /// those the one batch leaves to it.
    #[test]
    fn parts_lay_out_the_shingles_of_their_concatenation() {
        let mut rng = crate::hash::Pcg32::new(7);
        for round in 0..60 {
            let n = rng.below(40) as usize;
            let texts: Vec<String> = (0..n)
                .map(|_| {
                    let words = match rng.below(10) {
                        0 => 0,
                        1 => 200 + rng.below(300),
                        _ => rng.below(30),
                    };
                    (0..words)
                        .map(|_| {
                            let len = if rng.below(50) == 0 {
                                90
                            } else {
                                1 + rng.below(9)
                            };
                            "x".repeat(len as usize) + &rng.below(10).to_string()
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
            let whole = PackedBatch::from_texts(&texts);
            // Random cut points, empty parts included.
            let mut cuts: Vec<usize> = (0..rng.below(6))
                .map(|_| rng.below(n as u32 + 1) as usize)
                .collect();
            cuts.extend([0, n]);
            cuts.sort();
            let parts: Vec<PackedBatch> = cuts
                .windows(2)
                .map(|w| PackedBatch::from_texts(&texts[w[0]..w[1]]))
                .collect();
            let k = 1 + rng.below(5) as usize;
            let max = [64usize, 300, 1000, 1 << 20][rng.below(4) as usize];
            let mut l = tiny(max);
            l.max_docs = 1 + rng.below(20) as usize;
            l.max_chunks = 1 + rng.below(30) as usize;
            let ctx = format!("round {round}: k {k}, limits {l:?}, cuts {cuts:?}");
            let p = plan(&parts, k, &l);
            let (_, want_host) = laid(std::slice::from_ref(&whole), k, &l);
            let host: Vec<u32> = p.host_docs.iter().map(|h| h.target).collect();
            assert_eq!(host, want_host, "{ctx}");
            let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
            for sub in &p.subs {
                assert!(sub.size.fits(&l), "{ctx}");
                let sb = SubBatch::layout(sub, &parts, k);
                assert_eq!(sb.word_start.len(), sub.size.words as usize, "{ctx}");
                for (t, shingles) in shingles_read_back(&sb, k as u32) {
                    got[t as usize].extend(shingles);
                }
            }
            for (d, got) in got.iter().enumerate() {
                let want: Vec<Vec<u8>> = if host.contains(&(d as u32)) {
                    Vec::new()
                } else {
                    whole.shingles(d, k).map(<[u8]>::to_vec).collect()
                };
                assert_eq!(*got, want, "{ctx}: document {d}");
            }
        }
    }

    #[test]
    fn fragments_cover_every_shingle_once() {
        let text: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
        let b = PackedBatch::from_texts(&[text.join(" ")]);
        let p = plan(std::slice::from_ref(&b), 5, &tiny(40));
        assert!(p.subs.len() > 1 && p.subs.iter().all(|s| s.fragment));
        let total: u32 = p.subs.iter().map(|s| s.size.shingles).sum();
        assert_eq!(total as usize, 50 - 5 + 1);
        assert!(p.host_docs.is_empty());
    }

    #[test]
    fn a_shingle_larger_than_a_batch_goes_to_the_host() {
        let big = "x".repeat(100);
        let b = PackedBatch::from_texts(&["small doc", big.as_str()]);
        let p = plan(&[b], 5, &tiny(64));
        assert_eq!(
            p.host_docs,
            [HostDoc {
                part: 0,
                doc: 1,
                target: 1
            }]
        );
        assert_eq!(p.subs.len(), 1);
    }

    /// Each limit of a sub-batch, met exactly and passed by one: one sub-batch, then two.
    #[test]
    fn every_limit_holds_at_its_cap_and_splits_one_past_it() {
        let big = SubBatchLimits {
            max_bytes: 1 << 20,
            max_words: 1 << 20,
            max_shingles: 1 << 20,
            max_docs: 1 << 20,
            max_chunks: 1 << 20,
        };
        // 40 one-word documents ("a " each: 2 bytes, 1 word, 1 shingle, 1 chunk).
        let texts: Vec<&str> = vec!["a"; 40];
        let b = PackedBatch::from_texts(&texts);
        type Cap = fn(&mut SubBatchLimits, usize);
        let cases: [(&str, Cap); 5] = [
            ("bytes", |l, n| l.max_bytes = 2 * n),
            // One slot more than the words: the end of the piece.
            ("words", |l, n| l.max_words = n + 1),
            ("shingles", |l, n| l.max_shingles = n),
            ("docs", |l, n| l.max_docs = n),
            ("chunks", |l, n| l.max_chunks = n),
        ];
        for (name, set) in cases {
            for (docs, subs) in [(40, 1), (39, 2)] {
                let mut l = big;
                set(&mut l, docs);
                let p = plan(std::slice::from_ref(&b), 1, &l);
                assert_eq!(
                    p.subs.len(),
                    subs,
                    "{name} capped at {docs} documents' worth"
                );
                assert!(p.subs.iter().all(|s| s.size.fits(&l)), "{name}");
            }
        }
    }

    #[test]
    fn a_shingle_longer_than_an_invocation_hashes_sends_its_document_to_the_host() {
        let big = SubBatchLimits::new(1 << 30, 8, 64 << 20);
        for k in [1, 3] {
            // Shingles of exactly the cap and one past it, as one word or as k words.
            let word = |n: usize| "a".repeat(n);
            let parts = |n: usize| {
                // k words of lengths summing to n - (k - 1) (the spaces make up the rest).
                let body = n - (k - 1);
                let mut ws: Vec<String> = (0..k).map(|_| word(body / k)).collect();
                ws[0].push_str(&word(body % k));
                ws.join(" ")
            };
            for n in [MAX_SHINGLE_BYTES, MAX_SHINGLE_BYTES + 1] {
                let texts = ["x y z".to_string(), parts(n), "p q r".to_string()];
                let b = PackedBatch::from_texts(&texts);
                assert_eq!(
                    has_long_shingle(&b, k, 1),
                    n > MAX_SHINGLE_BYTES,
                    "k={k} n={n}"
                );
                let p = plan(std::slice::from_ref(&b), k, &big);
                let want: &[u32] = if n > MAX_SHINGLE_BYTES { &[1] } else { &[] };
                let got: Vec<u32> = p.host_docs.iter().map(|h| h.target).collect();
                assert_eq!(got, want, "k={k} n={n}");
                let planned: usize = p.subs.iter().map(|s| s.num_docs()).sum();
                assert_eq!(
                    planned + p.host_docs.len(),
                    3,
                    "every document is signed once"
                );
            }
        }
    }
}
