//! The CPU ports of the shader arithmetic (`src/engine/gpu/ports.rs`, same shape as the WGSL)
//! against native u64/u128 arithmetic: exhaustively at the edges, randomly elsewhere. A failure
//! names the stage: the 32x32 multiply, the FNV multiply, the reduction mod P, the permutation,
//! or the whole shingle hash; and the twins of the native 64-bit prelude against them.

use neardup::engine::gpu::ports::{
    fnv_mul, limbs, mod_p_u64, mul32x32, mul32x32_limbs, permute, shingle_hash, U64,
};
use neardup::hash::{fnv1a64, FNV_PRIME, P};
use proptest::prelude::*;

fn split(v: u64) -> U64 {
    (v as u32, (v >> 32) as u32)
}

fn join(v: U64) -> u64 {
    v.0 as u64 | (v.1 as u64) << 32
}

/// Values around every power of two and around P, and the extremes.
fn edges32() -> Vec<u32> {
    let mut v = vec![
        0,
        1,
        2,
        3,
        0xffff,
        0x10000,
        0x10001,
        0x1b3,
        P - 1,
        P,
        P + 1,
        u32::MAX - 1,
        u32::MAX,
    ];
    for b in 0..32 {
        let x = 1u32 << b;
        v.extend([x, x.wrapping_sub(1), x.wrapping_add(1)]);
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn edges64() -> Vec<u64> {
    let mut v = vec![
        0,
        1,
        P as u64,
        P as u64 * 2,
        P as u64 * P as u64,
        u64::MAX,
        u64::MAX - 1,
        (1 << 62) - 1,
        1 << 62,
    ];
    for b in 0..64 {
        let x = 1u64 << b;
        v.extend([
            x,
            x.wrapping_sub(1),
            x.wrapping_add(1),
            x.wrapping_mul(P as u64),
        ]);
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn stage_mul32x32_exhaustive_at_edges() {
    let e = edges32();
    for &a in &e {
        for &b in &e {
            assert_eq!(
                join(mul32x32(a, b)),
                a as u64 * b as u64,
                "mul32x32({a}, {b})"
            );
        }
    }
}

#[test]
fn stage_fnv_mul_exhaustive_at_edges() {
    for v in edges64() {
        assert_eq!(
            join(fnv_mul(split(v))),
            v.wrapping_mul(FNV_PRIME),
            "fnv_mul({v:#x})"
        );
    }
}

#[test]
fn stage_mod_p_u64_exhaustive_at_edges() {
    for v in edges64() {
        assert_eq!(
            mod_p_u64(split(v)) as u64,
            v % P as u64,
            "mod_p_u64({v:#x})"
        );
    }
    // Every value whose 31-bit pieces sit at their extremes.
    for c0 in [0u64, 1, P as u64 - 1, P as u64] {
        for c1 in [0u64, 1, P as u64 - 1, P as u64] {
            for c2 in 0u64..4 {
                let v = c0 | c1 << 31 | c2 << 62;
                assert_eq!(
                    mod_p_u64(split(v)) as u64,
                    v % P as u64,
                    "c0={c0} c1={c1} c2={c2}"
                );
            }
        }
    }
}

#[test]
fn stage_permute_exhaustive_at_edges() {
    let e: Vec<u32> = edges32().into_iter().filter(|&x| x < P).collect();
    for &a in &e {
        for &x in &e {
            for &b in &[0, 1, P - 1, 12345, 1 << 30] {
                let want = ((a as u128 * x as u128 + b as u128) % P as u128) as u32;
                assert_eq!(permute(a, b, x), want, "permute(a={a}, b={b}, x={x})");
            }
        }
    }
}

#[test]
fn stage_shingle_hash_matches_fnv1a64_mod_p() {
    let mut s: Vec<u8> = Vec::new();
    for i in 0..600u32 {
        assert_eq!(
            shingle_hash(&s),
            (fnv1a64(&s) % P as u64) as u32,
            "length {}",
            s.len()
        );
        s.push((i.wrapping_mul(2654435761) >> 24) as u8);
    }
    assert_eq!(shingle_hash("héllo wörld".as_bytes()), 1686484370);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn mul32x32_random(a in any::<u32>(), b in any::<u32>()) {
        prop_assert_eq!(join(mul32x32(a, b)), a as u64 * b as u64);
    }

    #[test]
    fn fnv_mul_random(v in any::<u64>()) {
        prop_assert_eq!(join(fnv_mul(split(v))), v.wrapping_mul(FNV_PRIME));
    }

    #[test]
    fn mod_p_random(v in any::<u64>()) {
        prop_assert_eq!(mod_p_u64(split(v)) as u64, v % P as u64);
    }

    #[test]
    fn permute_random(a in 1u32..P, b in 0u32..P, x in 0u32..P) {
        prop_assert_eq!(permute(a, b, x), ((a as u64 * x as u64 + b as u64) % P as u64) as u32);
    }

    #[test]
    fn shingle_hash_random(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
        prop_assert_eq!(shingle_hash(&bytes), (fnv1a64(&bytes) % P as u64) as u32);
    }
}

/// The twins of `u64_native.wgsl` give the emulated twins' bits at every edge and for random
/// values: either prelude signs the same.
#[test]
fn native_twins_agree_with_the_emulated_ones_at_the_edges() {
    use neardup::engine::gpu::ports::native;
    let e = edges32();
    for &a in &e {
        for &b in &e {
            assert_eq!(native::mul32x32(a, b), mul32x32(a, b), "mul32x32({a}, {b})");
            if a < P && b < P {
                for &x in e.iter().filter(|&&x| x < P) {
                    assert_eq!(native::permute(a, b, x), permute(a, b, x), "{a} {b} {x}");
                }
            }
        }
    }
    for &a in &e {
        for &b in &e {
            // Each prelude's split form of a value, multiplied: the same product.
            assert_eq!(
                native::mul32x32_limbs(a, native::limbs(b)),
                mul32x32_limbs(a, limbs(b)),
                "mul32x32_limbs({a}, {b})"
            );
        }
    }
    for &lo in &e {
        for &hi in &e {
            let v = (lo, hi);
            assert_eq!(native::fnv_mul(v), fnv_mul(v), "fnv_mul({v:?})");
            assert_eq!(native::mod_p_u64(v), mod_p_u64(v), "mod_p_u64({v:?})");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn native_mod_p_random(v in any::<u64>()) {
        use neardup::engine::gpu::ports::native;
        prop_assert_eq!(native::mod_p_u64(split(v)) as u64, v % P as u64);
        prop_assert_eq!(join(native::fnv_mul(split(v))), v.wrapping_mul(FNV_PRIME));
    }

    #[test]
    fn native_permute_random(a in 1u32..P, b in 0u32..P, x in 0u32..P) {
        use neardup::engine::gpu::ports::native;
        prop_assert_eq!(
            native::permute(a, b, x),
            ((a as u64 * x as u64 + b as u64) % P as u64) as u32
        );
    }
}
