//! The permutation min-reduction: `row[i] = min(row[i], (a[i]*x + b[i]) mod P)` over a
//! document's shingle values, in one variant per instruction set beside the scalar
//! reference: scalar, portable (blocks the compiler vectorizes), and AVX2 / AVX-512 in
//! [`x86`](self). Every variant is tested against the scalar one.

use std::sync::OnceLock;

use crate::hash::{mod_p, P};

/// A variant of the permutation kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, one permutation at a time: the reference.
    Scalar,
    /// Plain Rust in blocks of [`PORTABLE_BLOCK`] permutations, a shape the compiler
    /// vectorizes for whatever the target has (SSE2 on any x86-64, NEON on AArch64): the
    /// fastest kernel on a CPU without AVX2.
    Portable,
    /// AVX2: 8 permutations a vector.
    Avx2,
    /// AVX-512F: 16 permutations a vector.
    Avx512,
}

impl Kernel {
    /// Every variant this machine can run (always at least `Scalar` and `Portable`), slowest
    /// first.
    pub fn available() -> Vec<Kernel> {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut v = vec![Kernel::Scalar, Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Kernel::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Kernel::Avx512);
            }
        }
        v
    }

    /// The fastest available variant, or the one `NEARDUP_KERNEL=scalar|portable|avx2|avx512`
    /// names (for benchmarks; an unavailable name falls back to the fastest). It picks the
    /// permutation kernel; `scalar` also turns off the SIMD hasher, tokenizer and record
    /// scanner, any other name leaves them on.
    pub fn detect() -> Kernel {
        static K: OnceLock<Kernel> = OnceLock::new();
        *K.get_or_init(|| {
            let avail = Kernel::available();
            let wanted = crate::simd::kernel_override().and_then(|s| match s {
                "scalar" => Some(Kernel::Scalar),
                "portable" => Some(Kernel::Portable),
                "avx2" => Some(Kernel::Avx2),
                "avx512" => Some(Kernel::Avx512),
                _ => None,
            });
            match wanted {
                Some(k) if avail.contains(&k) => k,
                _ => *avail.last().expect("scalar is always available"),
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Portable => "portable",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }
}

/// Which kernel variant runs on this machine (for reports).
pub fn describe() -> String {
    format!("{} kernel", Kernel::detect().name())
}

/// `row[i] = min(row[i], min over x in xs of (a[i]*x + b[i]) mod P)`, with the machine's
/// fastest kernel.
pub fn permute_min(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    permute_min_with(Kernel::detect(), xs, a, b, row)
}

/// [`permute_min`] with a chosen kernel. Panics if the machine cannot run it. The values and
/// parameters must be below `P`, as the SPEC's are (`x(s)` is reduced mod `P`, and
/// `perm_params` draws below it): the kernels' folds rely on it.
pub fn permute_min_with(kernel: Kernel, xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    assert_eq!(a.len(), row.len());
    assert_eq!(b.len(), row.len());
    debug_assert!(xs.iter().all(|&x| x < P));
    debug_assert!(a.iter().chain(b).all(|&v| v < P));
    match kernel {
        Kernel::Scalar => permute_min_scalar(xs, a, b, row),
        Kernel::Portable => permute_min_portable(xs, a, b, row),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => {
            assert!(std::arch::is_x86_feature_detected!("avx2"));
            // SAFETY: the CPU supports AVX2 (checked above).
            unsafe { x86::permute_min_avx2(xs, a, b, row) }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => {
            assert!(std::arch::is_x86_feature_detected!("avx512f"));
            // SAFETY: the CPU supports AVX-512F (checked above).
            unsafe { x86::permute_min_avx512(xs, a, b, row) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => panic!("the {} kernel does not run on this CPU", kernel.name()),
    }
}

/// The reference: the SPEC's arithmetic on native `u64`.
pub fn permute_min_scalar(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    for (slot, (&ai, &bi)) in row.iter_mut().zip(a.iter().zip(b)) {
        let mut m = *slot;
        for &x in xs {
            m = m.min(mod_p(ai as u64 * x as u64 + bi as u64));
        }
        *slot = m;
    }
}

/// Permutations a block of [`permute_min_portable`]. On x86-64 without AVX2 (SSE2 only),
/// `permute+min` in criterion runs fastest with blocks of 16 (4 close behind, 8 slower), all
/// well ahead of the scalar reference (docs/BENCHMARKS.md).
pub const PORTABLE_BLOCK: usize = 16;

/// [`permute_min_scalar`]'s result, computed in blocks of [`PORTABLE_BLOCK`] permutations:
/// each block's doubled parameters and running minima sit in fixed-size arrays, and one pass
/// over `xs` updates the whole block: independent lanes of the same arithmetic, which the
/// compiler turns into SIMD (`pmuludq` with SSE2; with NEON, `umull`/`umlal` over four values
/// of `xs` at a time, as read in the AArch64 assembly, not timed on an ARM machine). The
/// arithmetic is [`fold_min_doubled`], as in the explicit kernels. Rows of any length: the
/// permutations past the last whole block take the scalar way.
pub fn permute_min_portable(xs: &[u32], a: &[u32], b: &[u32], row: &mut [u32]) {
    const B: usize = PORTABLE_BLOCK;
    assert!(a.len() >= row.len() && b.len() >= row.len());
    let full = row.len() / B * B;
    for off in (0..full).step_by(B) {
        // Doubled, below 2^32: 32-bit lanes, widened by the multiply (`umull`, `pmuludq`).
        let a2: [u32; B] = std::array::from_fn(|j| 2 * a[off + j]);
        let b2: [u32; B] = std::array::from_fn(|j| 2 * b[off + j]);
        let acc: &mut [u32; B] = (&mut row[off..off + B]).try_into().expect("B");
        let mut m = *acc;
        for &x in xs {
            let x = x as u64;
            let f: [u32; B] =
                std::array::from_fn(|j| fold_min_doubled(a2[j] as u64 * x + b2[j] as u64));
            for j in 0..B {
                m[j] = m[j].min(f[j]);
            }
        }
        *acc = m;
    }
    permute_min_scalar(
        xs,
        &a[full..row.len()],
        &b[full..row.len()],
        &mut row[full..],
    );
}

/// The reduction every SIMD variant uses, written out once in scalar form.
///
/// With `a, x, b <= P - 1`, `v = a*x + b <= 2^62 - 3*2^31 + 2`, so `v >> 31 <= 2^31 - 3` and
/// `f = (v & P) + (v >> 31) <= 2^32 - 4 < 2P`: `f` is congruent to `v` and below `2P`, and
/// `v mod P` is the smaller of `f` and `f - P` in wrapping 32-bit arithmetic (when `f < P` the
/// subtraction wraps to a value above `f`). One subtraction and one `min`, no compare.
#[inline]
pub fn fold_min(v: u64) -> u32 {
    let f = ((v & P as u64) + (v >> 31)) as u32;
    f.min(f.wrapping_sub(P))
}

/// [`fold_min`] as the SIMD kernels compute it, from `w = 2v = (2a)*x + 2b` (the doubled `a`
/// and `b` are made once per row): the high half of `w` is `v >> 31` and the low half is
/// `2 * (v & P)`, so `f` is one 32-bit shift and one add of the two halves, with no mask.
/// `w < 2^63`, so nothing is lost.
#[inline]
pub fn fold_min_doubled(w: u64) -> u32 {
    let f = ((w >> 32) as u32).wrapping_add((w as u32) >> 1);
    f.min(f.wrapping_sub(P))
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_min_is_mod_p_for_every_reachable_value() {
        for a in [1u32, 2, P - 1, P - 2, 1 << 30, 12345] {
            for x in [0u32, 1, P - 1, P - 2, 1 << 30, 777] {
                for b in [0u32, 1, P - 1] {
                    let v = a as u64 * x as u64 + b as u64;
                    assert_eq!(fold_min(v) as u64, v % P as u64, "a={a} x={x} b={b}");
                    assert_eq!(
                        fold_min_doubled(2 * v) as u64,
                        v % P as u64,
                        "doubled: a={a} x={x} b={b}"
                    );
                }
            }
        }
    }
}
