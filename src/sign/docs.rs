//! Signing documents of a packed batch into signature rows: runs of documents hashed in one go,
//! each document's values permuted, and a very long document signed in parts on the pool. The
//! CPU engine and the GPU plan's CPU port both sign this way.

use rayon::prelude::*;

use crate::batch::PackedBatch;
use crate::hash::{mod_p, PermParams, P};
use crate::sign::fnv::{batch_fnv_set, fnv64_docs, hash_docs, hash_word_list, sets_of_docs};
use crate::sign::permute::permute_min;
use crate::sign::repeats::{RepeatFilter, REPEAT_FILTER_MIN_SHINGLES};
use crate::text::shingle_layout;

/// Documents of at least this many shingles are signed in parts on the pool, their minima
/// merged: one such document otherwise holds one thread while the others run out of work (the
/// real-text benchmark corpus has a few, a large share of its bytes, and each showed as a
/// stretch with one core busy while it was signed: docs/BENCHMARKS.md).
pub const SPLIT_DOC_SHINGLES: usize = 1 << 16;

/// Shingles per part of a split document (a part is hashed, filtered and permuted on its own).
pub const SPLIT_PART_SHINGLES: usize = 1 << 15;

/// The signatures of documents `docs` into `rows` (one row each, in order), with `xs` as
/// scratch for their shingle hashes; with `sets`, each document's shingle set (sorted 64-bit
/// FNV-1a values) appended to it, from the values `x(s)` is taken from, hashed once for both. Runs of documents are hashed in one go (the hasher's
/// lockstep blocks run across documents), then each document's slice is permuted; a document
/// of [`SPLIT_DOC_SHINGLES`] or more is signed in parts on the pool.
pub fn sign_docs(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
    perms: &PermParams,
    xs: &mut Vec<u32>,
    rows: &mut [u32],
    mut sets: Option<&mut Vec<Vec<u64>>>,
) {
    let np = perms.len();
    debug_assert_eq!(rows.len(), docs.len() * np);
    let mut rows = rows;
    let mut d = docs.start;
    while d < docs.end {
        let run_end = (d..docs.end)
            .find(|&e| batch.shingle_count(e, k) >= SPLIT_DOC_SHINGLES)
            .unwrap_or(docs.end);
        let (run_rows, rest) = rows.split_at_mut((run_end - d) * np);
        sign_run(
            batch,
            d..run_end,
            k,
            perms,
            xs,
            run_rows,
            sets.as_deref_mut(),
        );
        rows = rest;
        d = run_end;
        if d < docs.end {
            let (row, rest) = rows.split_at_mut(np);
            sign_split_doc(batch, d, k, perms, row);
            if let Some(sets) = sets.as_deref_mut() {
                sets.push(batch_fnv_set(batch, d, k));
            }
            rows = rest;
            d += 1;
        }
    }
}

/// The shingle ranges `[s, e)` of the parts a document of `count` shingles is signed in:
/// contiguous, in order, covering every shingle once, each about [`SPLIT_PART_SHINGLES`].
pub fn split_parts(count: usize) -> impl Iterator<Item = (usize, usize)> {
    let parts = count.div_ceil(SPLIT_PART_SHINGLES).max(1);
    (0..parts).map(move |p| (p * count / parts, (p + 1) * count / parts))
}

/// Document `d`'s signature into `row`, its shingles cut into [`split_parts`] that are hashed,
/// filtered and permuted as tasks on the pool; a signature is a minimum, so the parts' rows
/// merge into it by `min`, whatever the cut.
fn sign_split_doc(batch: &PackedBatch, d: usize, k: usize, perms: &PermParams, row: &mut [u32]) {
    let np = perms.len();
    let words = batch.doc_words(d);
    let starts = &batch.word_start[words.start..words.end + 1];
    let (count, width) = shingle_layout(words.len(), k);
    let parts: Vec<(usize, usize)> = split_parts(count).collect();
    let merged = parts
        .into_par_iter()
        .map(|(s, e)| {
            // A per-thread buffer: a fresh one per part (128 KiB, glibc's mmap threshold)
            // cost page faults, and TLB flushes when freed.
            let mut xs = PART_XS.take();
            xs.clear();
            // Shingle j of the document is bytes[starts[j] .. starts[j + width] - 1], so
            // these starts hold exactly shingles s..e.
            hash_word_list(&batch.bytes, &starts[s..e + width], k, &mut xs);
            debug_assert_eq!(xs.len(), e - s);
            let fresh = REPEATS.with_borrow_mut(|f| f.keep_first_seen(&mut xs));
            let mut part = vec![P; np];
            permute_min(&xs[..fresh], &perms.a, &perms.b, &mut part);
            PART_XS.set(xs);
            part
        })
        .reduce(
            || vec![P; np],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, &y)| *x = (*x).min(y));
                a
            },
        );
    row.copy_from_slice(&merged);
}

/// [`sign_docs`] for a run of documents none of which is split.
fn sign_run(
    batch: &PackedBatch,
    docs: std::ops::Range<usize>,
    k: usize,
    perms: &PermParams,
    xs: &mut Vec<u32>,
    rows: &mut [u32],
    sets: Option<&mut Vec<Vec<u64>>>,
) {
    let np = perms.len();
    debug_assert_eq!(rows.len(), docs.len() * np);
    xs.clear();
    match sets {
        None => hash_docs(batch, docs.clone(), k, xs),
        Some(sets) => RUN_VALUES.with_borrow_mut(|values| {
            values.clear();
            fnv64_docs(batch, docs.clone(), k, values);
            xs.extend(values.iter().map(|&v| mod_p(v)));
            sets_of_docs(batch, docs.clone(), k, values, sets);
        }),
    }
    let mut at = 0;
    REPEATS.with_borrow_mut(|filter| {
        for (d, row) in docs.zip(rows.chunks_exact_mut(np)) {
            let n = batch.shingle_count(d, k);
            row.fill(P);
            // A long document's repeated shingles are mostly dropped first.
            let doc = &mut xs[at..at + n];
            let fresh = if n >= REPEAT_FILTER_MIN_SHINGLES {
                filter.keep_first_seen(doc)
            } else {
                n
            };
            permute_min(&doc[..fresh], &perms.a, &perms.b, row);
            at += n;
        }
    });
    debug_assert_eq!(at, xs.len());
}

thread_local! {
    /// Per-thread table of [`sign_docs`]'s repeat filter.
    static REPEATS: std::cell::RefCell<RepeatFilter> = Default::default();
    /// Per-thread full FNV-1a values of a run signed with its sets.
    static RUN_VALUES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Per-thread shingle hashes of one part of a split document.
    static PART_XS: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parts_cover_every_shingle_once_in_order() {
        for count in [
            0,
            1,
            SPLIT_PART_SHINGLES - 1,
            SPLIT_PART_SHINGLES,
            SPLIT_PART_SHINGLES + 1,
            SPLIT_DOC_SHINGLES,
            3 * SPLIT_PART_SHINGLES + 5,
            1_000_003,
        ] {
            let parts: Vec<(usize, usize)> = split_parts(count).collect();
            assert_eq!(parts[0].0, 0);
            assert_eq!(parts.last().unwrap().1, count);
            assert!(parts.windows(2).all(|w| w[0].1 == w[1].0), "{count}");
            assert!(parts
                .iter()
                .all(|&(s, e)| (count == 0 || s < e) && e - s <= SPLIT_PART_SHINGLES));
        }
    }
}
