// What every stage shader binds: the uniform block and the buffers of group 0, one bind
// group layout for all three pipelines. Composed after u64.wgsl (or u64_native.wgsl) and
// before the stage at load time; a stage uses the bindings it needs.
//
// Mirror of `GpuConfig` in src/engine/gpu/mod.rs; keep the two in step.
struct Config {
    k: u32,
    num_docs: u32,
    num_shingles: u32,
    num_perm: u32,
    num_chunks: u32,
    hash_groups_x: u32,
    min_groups_x: u32,
    init_groups_x: u32,
}

@group(0) @binding(0) var<uniform> cfg: Config;
// Word bytes, four to a u32 (little-endian); every word is followed by one space.
@group(0) @binding(1) var<storage, read> bytes: array<u32>;
// Start of each word, as the batch it was tokenized into holds it (see `docs`).
@group(0) @binding(2) var<storage, read> word_start: array<u32>;
// Per document: x = first word, y = first shingle, z = end word (the slot after its last
// word, holding where that word ends), w = the shift (wrapping) that turns its word starts
// into offsets in `bytes`.
@group(0) @binding(3) var<storage, read> docs: array<vec4<u32>>;
// x of every shingle: hash.wgsl writes it, minhash.wgsl reads it.
@group(0) @binding(4) var<storage, read_write> xs: array<u32>;
// Per chunk: x = document, y = first shingle, z = one past the last shingle, w unused.
@group(0) @binding(5) var<storage, read> chunks: array<vec4<u32>>;
// Per permutation: x = a_i, y = b_i.
@group(0) @binding(6) var<storage, read> perms: array<vec2<u32>>;
// Output: num_docs rows of num_perm entries.
@group(0) @binding(7) var<storage, read_write> sigs: array<atomic<u32>>;
