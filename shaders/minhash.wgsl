// Stage 2: sig[d][i] = min over the shingles of d of (a_i * x + b_i) mod P.
// Composed after u64.wgsl and bindings.wgsl at load time.
//
// Work is cut into chunks of at most CHUNK shingles of one document (a long document spans
// several chunks, even several workgroups at once); each workgroup takes one chunk and
// PERM_WG permutations, and merges its minima into the signature with atomicMin, so the order
// in which chunks finish cannot change a bit.

const PERM_WG: u32 = 64u;
const CHUNK: u32 = 256u;

// The chunk's shingle values, split into limbs once for all the permutations.
var<workgroup> tile: array<vec2<u32>, CHUNK>;

// Every entry starts at P: a document with no shingles keeps it.
@compute @workgroup_size(256)
fn init_signatures(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * cfg.init_groups_x + wid.x) * 256u + lid.x;
    if (i < cfg.num_docs * cfg.num_perm) {
        atomicStore(&sigs[i], P);
    }
}

@compute @workgroup_size(64)
fn minhash(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let c = wid.y * cfg.min_groups_x + wid.x;
    // Uniform control flow: every invocation of the workgroup takes the same branch.
    if (c >= cfg.num_chunks) {
        return;
    }
    let chunk = chunks[c];
    let n = chunk.z - chunk.y;
    for (var t = lid.x; t < n; t = t + PERM_WG) {
        tile[t] = limbs(xs[chunk.y + t]);
    }
    workgroupBarrier();
    let i = wid.z * PERM_WG + lid.x;
    if (i >= cfg.num_perm) {
        return;
    }
    let ab = perms[i];
    var m = P;
    for (var t = 0u; t < n; t = t + 1u) {
        m = min(m, permute_limbs(ab.x, ab.y, tile[t]));
    }
    atomicMin(&sigs[chunk.x * cfg.num_perm + i], m);
}
