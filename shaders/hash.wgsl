// Stage 1: one invocation per shingle -> x = fnv1a64(shingle bytes) mod P.
// Composed after u64.wgsl and bindings.wgsl at load time.

const HASH_WG: u32 = 256u;

fn byte_at(i: u32) -> u32 {
    return (bytes[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// The document holding shingle g: the last d with docs[d].y <= g (binary search).
fn doc_of(g: u32) -> u32 {
    var lo = 0u;
    var hi = cfg.num_docs;
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (docs[mid].y <= g) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

@compute @workgroup_size(256)
fn hash_shingles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let g = (wid.y * cfg.hash_groups_x + wid.x) * HASH_WG + lid.x;
    if (g >= cfg.num_shingles) {
        return;
    }
    let doc = docs[doc_of(g)];
    let w0 = doc.x + (g - doc.y);
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
    xs[g] = mod_p_u64(h);
}
