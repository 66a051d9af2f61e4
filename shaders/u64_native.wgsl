// Native 64-bit arithmetic for neardup's shaders (`--gpu-int64`), composed in place of u64.wgsl
// on an adapter with 64-bit shader integers (wgpu's SHADER_INT64). It has u64.wgsl's functions,
// names and signatures, so every stage is composed after either file unchanged, and gives the
// same bits: a 64-bit value still crosses a function boundary as vec2<u32> (x = low half,
// y = high half), and the arithmetic inside is on u64. No entry point of its own.
//
// Each function has a Rust twin in src/engine/gpu/ports.rs (module `native`), tested against
// the twins of u64.wgsl.

// P = 2^31 - 1, the Mersenne prime of the permutations.
const P: u32 = 0x7fffffffu;

// FNV-1a 64 offset basis 0xcbf29ce484222325, as 32-bit halves.
const FNV_OFFSET_LO: u32 = 0x84222325u;
const FNV_OFFSET_HI: u32 = 0xcbf29ce4u;
// The FNV-1a 64 prime, 2^40 + 0x1b3.
const FNV_PRIME: u64 = 0x100000001b3lu;

fn join64(v: vec2<u32>) -> u64 {
    return (u64(v.y) << 32u) | u64(v.x);
}

fn halves(v: u64) -> vec2<u32> {
    return vec2<u32>(u32(v & 0xfffffffflu), u32(v >> 32u));
}

// The form `permute_limbs` takes a value in: with a native multiply, the value itself.
fn limbs(b: u32) -> vec2<u32> {
    return vec2<u32>(b, 0u);
}

// a times the value `bl` holds (see `limbs`), all 64 bits.
fn mul32x32_limbs(a: u32, bl: vec2<u32>) -> vec2<u32> {
    return halves(u64(a) * u64(bl.x));
}

// The full 64-bit product of two 32-bit values.
fn mul32x32(a: u32, b: u32) -> vec2<u32> {
    return mul32x32_limbs(a, limbs(b));
}

// h * FNV prime mod 2^64.
fn fnv_mul(h: vec2<u32>) -> vec2<u32> {
    return halves(join64(h) * FNV_PRIME);
}

// v mod P for any 64-bit v, by folding (2^31 = 1 mod P): s = (v & P) + (v >> 31) is below
// 2^33 + 2^31; a second fold leaves at most P + 4; one subtraction finishes.
fn mod_p_u64(v: vec2<u32>) -> u32 {
    let x = join64(v);
    let s = (x & u64(P)) + (x >> 31u);
    var t = u32(s & u64(P)) + u32(s >> 31u);
    if (t >= P) {
        t = t - P;
    }
    return t;
}

// (a*x + b) mod P for a, x, b < P, x as `limbs` gives it: v = a*x + b is below 2^62, so
// f = (v >> 31) + (v & P) is below 2P, and v mod P is the smaller of f and f - P (which wraps
// around when f < P), as in u64.wgsl.
fn permute_limbs(a: u32, b: u32, xl: vec2<u32>) -> u32 {
    let v = u64(a) * u64(xl.x) + u64(b);
    let f = u32(v >> 31u) + u32(v & u64(P));
    return min(f, f - P);
}

// (a*x + b) mod P for a, x, b < P.
fn permute(a: u32, b: u32, x: u32) -> u32 {
    return permute_limbs(a, b, limbs(x));
}
