//! The WGSL sources, embedded at build time, and their composition: `u64.wgsl` (the emulated
//! 64-bit helpers), or `u64_native.wgsl` (the same functions on native 64-bit integers, for
//! `--gpu-int64`), then `bindings.wgsl` (the uniform block and the buffers every stage binds),
//! are prepended to each stage's source when it is loaded.

/// Shared helpers: 32x32->64 multiply, the FNV multiply, reduction mod P, the permutation.
pub const U64: &str = include_str!("../../../shaders/u64.wgsl");
/// [`U64`]'s functions on native 64-bit shader integers (`SHADER_INT64`).
pub const U64_NATIVE: &str = include_str!("../../../shaders/u64_native.wgsl");
/// The `Config` uniform block and the buffers of bind group 0, shared by every stage.
pub const BINDINGS: &str = include_str!("../../../shaders/bindings.wgsl");
/// Stage 1: shingle hashing.
pub const HASH: &str = include_str!("../../../shaders/hash.wgsl");
/// Stage 2: permutation min-reduction.
pub const MINHASH: &str = include_str!("../../../shaders/minhash.wgsl");
/// Stages 1 and 2 in one dispatch (`--gpu-kernels fused`): each chunk hashed into its tile.
pub const FUSED: &str = include_str!("../../../shaders/fused.wgsl");

/// Every stage shader, by file name (for validation tests and error messages).
pub const STAGES: [(&str, &str); 3] = [
    ("hash.wgsl", HASH),
    ("minhash.wgsl", MINHASH),
    ("fused.wgsl", FUSED),
];

/// A stage's source with the shared helpers in front.
pub fn composed(stage: &str) -> String {
    composed_with(U64, stage)
}

/// A stage's source with `prelude` ([`U64`] or [`U64_NATIVE`]) and [`BINDINGS`] in front.
pub fn composed_with(prelude: &str, stage: &str) -> String {
    let mut s = String::with_capacity(prelude.len() + BINDINGS.len() + stage.len() + 2);
    for part in [prelude, BINDINGS, stage] {
        s.push_str(part);
        s.push('\n');
    }
    s
}
