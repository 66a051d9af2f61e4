// Hashing fused into the min-reduction: sig[d][i] = min over the shingles of d of
// (a_i * x + b_i) mod P, where each x = fnv1a64(shingle bytes) mod P is computed into the
// workgroup's tile instead of being read from the `xs` that `hash_shingles` writes.
// Composed after u64.wgsl and bindings.wgsl at load time; `init_signatures` (minhash.wgsl)
// runs first.
//
// One workgroup takes one chunk (at most CHUNK shingles of one document) and every
// permutation, so each shingle is hashed once: hash.wgsl's `doc_of` search is not needed (the
// chunk names its document) and x never goes through device memory. The minima are merged
// with atomicMin, as in minhash.wgsl, so the order in which chunks finish cannot change a bit.

const FUSED_WG: u32 = 64u;
const CHUNK: u32 = 256u;

// The chunk's shingle values, split into limbs once for all the permutations.
var<workgroup> tile: array<vec2<u32>, CHUNK>;

fn byte_at(i: u32) -> u32 {
    return (bytes[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn minhash_fused(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let c = wid.y * cfg.min_groups_x + wid.x;
    // Uniform control flow: every invocation of the workgroup takes the same branch.
    if (c >= cfg.num_chunks) {
        return;
    }
    let chunk = chunks[c];
    let d = chunk.x;
    let n = chunk.z - chunk.y;
    let doc = docs[d];
    for (var t = lid.x; t < n; t = t + FUSED_WG) {
        let w0 = doc.x + (chunk.y + t - doc.y);
        // A document of fewer than k words has one shingle of all its words.
        let w_end = min(w0 + cfg.k, doc.z);
        let b0 = word_start[w0] + doc.w;
        // The shingle ends before the space that follows its last word.
        let b1 = word_start[w_end] + doc.w - 1u;
        var h = vec2<u32>(FNV_OFFSET_LO, FNV_OFFSET_HI);
        for (var i = b0; i < b1; i = i + 1u) {
            h.x = h.x ^ byte_at(i);
            h = fnv_mul(h);
        }
        tile[t] = limbs(mod_p_u64(h));
    }
    workgroupBarrier();
    for (var i = lid.x; i < cfg.num_perm; i = i + FUSED_WG) {
        let ab = perms[i];
        var m = P;
        for (var t = 0u; t < n; t = t + 1u) {
            m = min(m, permute_limbs(ab.x, ab.y, tile[t]));
        }
        atomicMin(&sigs[d * cfg.num_perm + i], m);
    }
}
