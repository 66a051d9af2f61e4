//! The CPU hot loops: shingle hashing and the permutation min-reduction.
//!
//! Kept apart from the engine so benchmarks can time each stage alone.

use crate::batch::PackedBatch;
use crate::hash::{mod_p, shingle_hash, P};

/// Which kernel variant runs on this machine (for reports).
pub fn describe() -> &'static str {
    "scalar kernel"
}

/// Append `x(s)` of every shingle of document `d` (repeats included, text order) to `xs`.
pub fn hash_shingles(batch: &PackedBatch, d: usize, k: usize, xs: &mut Vec<u32>) {
    xs.extend(batch.shingles(d, k).map(shingle_hash));
}

/// `row[i] = min(row[i], min over x in xs of (a[i]*x + b[i]) mod P)`.
pub fn permute_min(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    debug_assert_eq!(a.len(), row.len());
    debug_assert_eq!(b.len(), row.len());
    for &x in xs {
        let x = x as u64;
        for ((slot, &ai), &bi) in row.iter_mut().zip(a).zip(b) {
            let h = mod_p(ai as u64 * x + bi as u64);
            if h < *slot {
                *slot = h;
            }
        }
    }
    debug_assert!(row.iter().all(|&v| v <= P));
}
