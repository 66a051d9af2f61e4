//! Cutting a [`PackedBatch`] into GPU-sized pieces ("sub-batches") and laying each out as the
//! shaders read it. Shared by the GPU engine and its CPU ports, so the ports test the very
//! layout the GPU gets.
//!
//! A sub-batch is either a run of whole documents, or one *fragment* of a document too big for
//! a sub-batch on its own: fragments are windows of words overlapping by `k - 1`, so every
//! `k`-word shingle of the document lies in exactly one fragment, and the host merges the
//! fragments' signatures with `min`. A document that cannot be cut this way (one shingle alone
//! is larger than a sub-batch, say a 100 MB "word"), or that holds a shingle longer than
//! [`MAX_SHINGLE_BYTES`], is left to the host's CPU routine.

use crate::batch::PackedBatch;
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
        // planner checks every limit. The sentinel needs one more slot.
        let max_words = (max_bytes / 4).clamp(16, u32_slots - 1);
        let max_shingles = max_words;
        // 64Ki documents a sub-batch is plenty (a 32 MiB sub-batch of 512-byte documents) and
        // keeps the signature and readback buffers at 32 MiB each for 128 permutations.
        let max_docs = (max_binding / (num_perm * 4))
            .min(max_binding / 8 - 1)
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

/// One sub-batch laid out for the shaders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubBatch {
    /// Word bytes, four to a u32, little-endian, zero padded.
    pub bytes: Vec<u32>,
    /// Byte offset of each word (rebased to this sub-batch), plus a sentinel.
    pub word_start: Vec<u32>,
    /// Per document plus a sentinel: `[first word, first shingle]`.
    pub docs: Vec<[u32; 2]>,
    /// Per chunk: `[document, first shingle, end shingle, 0]`.
    pub chunks: Vec<[u32; 4]>,
    pub num_shingles: u32,
    /// For each document of the sub-batch, the batch document its signature belongs to.
    pub targets: Vec<u32>,
    /// Whether this is a fragment (its signature is min-merged, not copied).
    pub fragment: bool,
}

impl SubBatch {
    pub fn num_docs(&self) -> usize {
        self.targets.len()
    }
}

/// How a batch is cut: the sub-batches, and the documents left to the host.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub subs: Vec<SubBatch>,
    /// Documents no sub-batch can hold (a single shingle beyond `max_bytes`, or beyond
    /// [`MAX_SHINGLE_BYTES`]).
    pub host_docs: Vec<u32>,
}

/// The requirements of words `w0 .. w1` with `shingles` shingles.
fn fits(
    batch: &PackedBatch,
    w0: usize,
    w1: usize,
    shingles: usize,
    chunks: usize,
    docs: usize,
    l: &SubBatchLimits,
) -> bool {
    let bytes = (batch.word_start[w1] - batch.word_start[w0]) as usize;
    bytes <= l.max_bytes
        && w1 - w0 <= l.max_words
        && shingles <= l.max_shingles
        && chunks <= l.max_chunks
        && docs <= l.max_docs
}

/// Cut `batch` for shingle width `k` under `limits`. Documents keep their order.
pub fn plan(batch: &PackedBatch, k: usize, limits: &SubBatchLimits) -> Plan {
    let mut out = Plan::default();
    let n = batch.num_docs();
    let mut d = 0;
    while d < n {
        // Grow a run of whole documents from d.
        let w0 = batch.doc_word_start[d] as usize;
        let (mut shingles, mut chunks) = (0usize, 0usize);
        let mut e = d;
        while e < n {
            if has_long_shingle(batch, k, e) {
                break;
            }
            let s = shingle_layout(batch.doc_words(e).len(), k).0;
            let c = s.div_ceil(CHUNK);
            let w1 = batch.doc_word_start[e + 1] as usize;
            if !fits(batch, w0, w1, shingles + s, chunks + c, e - d + 1, limits) {
                break;
            }
            shingles += s;
            chunks += c;
            e += 1;
        }
        if e > d {
            out.subs.push(layout_docs(batch, k, d, e));
            d = e;
            continue;
        }
        // Document d does not fit alone, or holds a shingle too long for one invocation:
        // fragments, or the host.
        if has_long_shingle(batch, k, d) {
            out.host_docs.push(d as u32);
            d += 1;
            continue;
        }
        match fragments(batch, k, d, limits) {
            Some(frags) => out.subs.extend(frags),
            None => out.host_docs.push(d as u32),
        }
        d += 1;
    }
    out
}

/// Lay out whole documents `d0 .. d1`.
fn layout_docs(batch: &PackedBatch, k: usize, d0: usize, d1: usize) -> SubBatch {
    let w0 = batch.doc_word_start[d0] as usize;
    let w1 = batch.doc_word_start[d1] as usize;
    let mut sb = SubBatch::default();
    lay_words(batch, w0, w1, &mut sb);
    let mut shingle = 0u32;
    for d in d0..d1 {
        let local = d - d0;
        let s = shingle_layout(batch.doc_words(d).len(), k).0 as u32;
        sb.docs.push([batch.doc_word_start[d] - w0 as u32, shingle]);
        push_chunks(&mut sb.chunks, local as u32, shingle, shingle + s);
        shingle += s;
        sb.targets.push(d as u32);
    }
    sb.docs.push([(w1 - w0) as u32, shingle]);
    sb.num_shingles = shingle;
    sb
}

/// Copy words `w0 .. w1` (bytes and rebased offsets, with sentinel) into `sb`.
fn lay_words(batch: &PackedBatch, w0: usize, w1: usize, sb: &mut SubBatch) {
    let b0 = batch.word_start[w0];
    let b1 = batch.word_start[w1];
    let src = &batch.bytes[b0 as usize..b1 as usize];
    sb.bytes = vec![0u32; src.len().div_ceil(4)];
    bytemuck::cast_slice_mut::<u32, u8>(&mut sb.bytes)[..src.len()].copy_from_slice(src);
    // The GPU reads little-endian u32s; on a big-endian host the words would need swapping.
    if cfg!(target_endian = "big") {
        for w in &mut sb.bytes {
            *w = w.swap_bytes();
        }
    }
    sb.word_start = batch.word_start[w0..=w1].iter().map(|&s| s - b0).collect();
}

fn push_chunks(chunks: &mut Vec<[u32; 4]>, doc: u32, s0: u32, s1: u32) {
    let mut s = s0;
    while s < s1 {
        let e = (s + CHUNK as u32).min(s1);
        chunks.push([doc, s, e, 0]);
        s = e;
    }
}

/// Fragments of document `d`: word windows `[s, e)` with consecutive windows overlapping by
/// `k - 1` words, each as large as the limits allow. `None` when even one shingle is too big
/// (or the document has fewer than `k` words and still does not fit).
fn fragments(batch: &PackedBatch, k: usize, d: usize, l: &SubBatchLimits) -> Option<Vec<SubBatch>> {
    let r = batch.doc_words(d);
    if r.len() < k {
        return None;
    }
    let mut out = Vec::new();
    let mut s = r.start;
    loop {
        // The largest e with k <= e - s words that fits.
        if !fits(batch, s, s + k, 1, 1, 1, l) {
            return None;
        }
        let (mut lo, mut hi) = (s + k, r.end);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let sh = mid - s - k + 1;
            if fits(batch, s, mid, sh, sh.div_ceil(CHUNK), 1, l) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let e = lo;
        let mut sb = SubBatch::default();
        lay_words(batch, s, e, &mut sb);
        let sh = (e - s - k + 1) as u32;
        sb.docs = vec![[0, 0], [(e - s) as u32, sh]];
        push_chunks(&mut sb.chunks, 0, 0, sh);
        sb.num_shingles = sh;
        sb.targets = vec![d as u32];
        sb.fragment = true;
        out.push(sb);
        if e == r.end {
            break;
        }
        s = e - (k - 1);
    }
    Some(out)
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

    #[test]
    fn whole_documents_stay_whole_and_in_order() {
        let b = PackedBatch::from_texts(&["a b c", "", "d e f g h i"]);
        let p = plan(&b, 3, &tiny(1 << 20));
        assert_eq!(p.subs.len(), 1);
        let sb = &p.subs[0];
        assert_eq!(sb.targets, [0, 1, 2]);
        assert_eq!(sb.docs, [[0, 0], [3, 1], [3, 1], [9, 5]]);
        assert_eq!(sb.num_shingles, 5);
    }

    #[test]
    fn fragments_cover_every_shingle_once() {
        let text: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
        let b = PackedBatch::from_texts(&[text.join(" ")]);
        let p = plan(&b, 5, &tiny(40));
        assert!(p.subs.len() > 1 && p.subs.iter().all(|s| s.fragment));
        let total: u32 = p.subs.iter().map(|s| s.num_shingles).sum();
        assert_eq!(total as usize, 50 - 5 + 1);
        assert!(p.host_docs.is_empty());
    }

    #[test]
    fn a_shingle_larger_than_a_batch_goes_to_the_host() {
        let big = "x".repeat(100);
        let b = PackedBatch::from_texts(&["small doc", big.as_str()]);
        let p = plan(&b, 5, &tiny(64));
        assert_eq!(p.host_docs, [1]);
        assert_eq!(p.subs.len(), 1);
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
                let p = plan(&b, k, &big);
                let want: &[u32] = if n > MAX_SHINGLE_BYTES { &[1] } else { &[] };
                assert_eq!(p.host_docs, want, "k={k} n={n}");
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
