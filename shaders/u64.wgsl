// Emulated 64-bit arithmetic for neardup's shaders. WGSL has only 32-bit integers, so a 64-bit
// value is a vec2<u32> (x = low half, y = high half). This file is composed in front of
// hash.wgsl and minhash.wgsl when they are loaded; it has no entry point of its own.
//
// Each function has a Rust twin of the same name and shape in src/engine/gpu/ports.rs, tested
// against native u64/u128 arithmetic, so a mismatch points at the stage.

// P = 2^31 - 1, the Mersenne prime of the permutations.
const P: u32 = 0x7fffffffu;

// FNV-1a 64 offset basis 0xcbf29ce484222325, as 32-bit halves.
const FNV_OFFSET_LO: u32 = 0x84222325u;
const FNV_OFFSET_HI: u32 = 0xcbf29ce4u;
// The FNV-1a 64 prime is 2^40 + 0x1b3.
const FNV_PRIME_LOW_PART: u32 = 0x1b3u;

// b as the 16-bit limbs the products below take: x = low 16 bits, y = high 16 bits. The
// kernels split each shingle value once, as they fill their workgroup's tile, rather than
// once for every permutation that reads it.
fn limbs(b: u32) -> vec2<u32> {
    return vec2<u32>(b & 0xffffu, b >> 16u);
}

// The full 64-bit product of a and b = bl.x + bl.y * 2^16, by 16-bit limbs.
// mid = a0*b1 + hi16(a0*b0) + lo16(a1*b0) is at most 2^32 - 1, so nothing overflows.
fn mul32x32_limbs(a: u32, bl: vec2<u32>) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = bl.x;
    let b1 = bl.y;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = p01 + (p00 >> 16u) + (p10 & 0xffffu);
    let lo = (mid << 16u) | (p00 & 0xffffu);
    let hi = p11 + (mid >> 16u) + (p10 >> 16u);
    return vec2<u32>(lo, hi);
}

// The full 64-bit product of two 32-bit values.
fn mul32x32(a: u32, b: u32) -> vec2<u32> {
    return mul32x32_limbs(a, limbs(b));
}

// h * (2^40 + 0x1b3) mod 2^64: the 2^40 term only moves the low half into the high half
// (shifted by 8); the 0x1b3 term needs the full low product.
fn fnv_mul(h: vec2<u32>) -> vec2<u32> {
    let low = mul32x32(h.x, FNV_PRIME_LOW_PART);
    let hi = low.y + h.y * FNV_PRIME_LOW_PART + (h.x << 8u);
    return vec2<u32>(low.x, hi);
}

// v mod P for any 64-bit v. Split v into 31-bit pieces c0 + c1*2^31 + c2*2^62; since
// 2^31 = 1 (mod P), v = c0 + c1 + c2 (mod P). c0 + c1 < 2^32; one fold leaves at most P + 1;
// c2 < 4 adds at most 3; one subtraction finishes.
fn mod_p_u64(v: vec2<u32>) -> u32 {
    let c0 = v.x & P;
    let c1 = (v.x >> 31u) | ((v.y & 0x3fffffffu) << 1u);
    let c2 = v.y >> 30u;
    var s = c0 + c1;
    s = (s & P) + (s >> 31u);
    s = s + c2;
    if (s >= P) {
        s = s - P;
    }
    return s;
}

// (a*x + b) mod P for a, x, b < P, x given as its limbs: the 62-bit product plus b, with the
// carry, then mod P.
// Since a, x, b <= P - 1, v = a*x + b < 2^62 - 3*2^31 + 3, so its top two bits are zero and
// f = (v >> 31) + (v & P) = ((hi << 1) | (lo >> 31)) + (lo & P) is below 2P: v mod P is the
// smaller of f and f - P (which wraps around when f < P). Cheaper than mod_p_u64.
fn permute_limbs(a: u32, b: u32, xl: vec2<u32>) -> u32 {
    let prod = mul32x32_limbs(a, xl);
    let lo = prod.x + b;
    let hi = prod.y + select(0u, 1u, lo < b);
    let f = ((hi << 1u) | (lo >> 31u)) + (lo & P);
    return min(f, f - P);
}

// (a*x + b) mod P for a, x, b < P.
fn permute(a: u32, b: u32, x: u32) -> u32 {
    return permute_limbs(a, b, limbs(x));
}
