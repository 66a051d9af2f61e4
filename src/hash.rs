//! The hash family of SPEC §2: FNV-1a 64, the PCG32 generator that draws the permutation
//! parameters, and the Carter-Wegman permutations `(a*x + b) mod (2^31 - 1)`.

/// The Mersenne prime `2^31 - 1`; every signature entry is below it, and an empty signature is
/// `P` in every entry.
pub const P: u32 = 0x7fff_ffff;

/// FNV-1a 64 offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime (`2^40 + 0x1b3`).
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The `initseq` of `PCG32(seed)` (SPEC §2), giving `inc = 1442695040888963407`.
pub const PCG_INITSEQ: u64 = 721_347_520_444_481_703;
const PCG_MULT: u64 = 6_364_136_223_846_793_005;

/// `fnv1a64(bytes)`.
#[inline]
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// `v mod P` for any 64-bit `v`, by Mersenne folding (`2^31 ≡ 1 mod P`).
#[inline]
pub fn mod_p(v: u64) -> u32 {
    // Two folds take any u64 below 2^32 + 2; one conditional subtraction finishes.
    let f = (v & P as u64) + (v >> 31);
    let f = (f & P as u64) + (f >> 31);
    let f = f as u32;
    if f >= P {
        f - P
    } else {
        f
    }
}

/// SPEC `x(s) = fnv1a64(utf8(s)) mod P`.
#[inline]
pub fn shingle_hash(s: &[u8]) -> u32 {
    mod_p(fnv1a64(s))
}

/// SPEC `h_i(x) = (a*x + b) mod P`, with `a, x, b < 2^31` so the sum fits in 63 bits.
#[inline]
pub fn permute(a: u32, b: u32, x: u32) -> u32 {
    mod_p(a as u64 * x as u64 + b as u64)
}

/// PCG-XSH-RR 64/32 (O'Neill's `pcg32_random_r`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pcg32 {
    state: u64,
    inc: u64,
}

impl Pcg32 {
    /// The reference `pcg32_srandom_r(initstate, initseq)`.
    pub fn with_stream(initstate: u64, initseq: u64) -> Self {
        let mut rng = Pcg32 {
            state: 0,
            inc: (initseq << 1) | 1,
        };
        rng.step();
        rng.state = rng.state.wrapping_add(initstate);
        rng.step();
        rng
    }

    /// SPEC `PCG32(seed)`: the reference seeding with `initseq = 721347520444481703`.
    pub fn new(seed: u64) -> Self {
        Self::with_stream(seed, PCG_INITSEQ)
    }

    #[inline]
    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    /// The next 32-bit output.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.step();
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rot = (old >> 59) as u32;
        xorshifted.rotate_right(rot)
    }

    /// SPEC `below(bound)`: an unbiased draw from `0 .. bound` by rejection (`bound > 0`).
    pub fn below(&mut self, bound: u32) -> u32 {
        assert!(bound > 0, "below(0) has no value to return");
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let r = self.next_u32();
            if r >= threshold {
                return r % bound;
            }
        }
    }

    /// A float in `[0, 1)` from 32 random bits (for generators and tests, not the contract).
    pub fn next_f64(&mut self) -> f64 {
        self.next_u32() as f64 / 4_294_967_296.0
    }
}

/// The `a` and `b` vectors of SPEC `perm_params(num_perm, seed)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermParams {
    pub a: Vec<u32>,
    pub b: Vec<u32>,
}

impl PermParams {
    pub fn len(&self) -> usize {
        self.a.len()
    }

    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }
}

/// SPEC `perm_params(num_perm, seed)`: `a_i = 1 + below(P-1)`, then `b_i = below(P)`,
/// interleaved.
pub fn perm_params(num_perm: usize, seed: u64) -> PermParams {
    let mut rng = Pcg32::new(seed);
    let mut a = Vec::with_capacity(num_perm);
    let mut b = Vec::with_capacity(num_perm);
    for _ in 0..num_perm {
        a.push(1 + rng.below(P - 1));
        b.push(rng.below(P));
    }
    PermParams { a, b }
}

/// Fisher-Yates with the crate's generator.
pub fn shuffle<T>(v: &mut [T], rng: &mut Pcg32) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u32 + 1) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mod_p_edges() {
        for v in [
            0u64,
            1,
            P as u64 - 1,
            P as u64,
            P as u64 + 1,
            2 * P as u64,
            (1 << 32) - 1,
            1 << 32,
            (1 << 62) - 1,
            u64::MAX,
            u64::MAX - 1,
            (P as u64) * (P as u64),
        ] {
            assert_eq!(mod_p(v) as u64, v % P as u64, "v = {v}");
        }
    }
}
