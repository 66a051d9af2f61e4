//! CPU ports of the WGSL shaders, function for function and stage for stage, in the same 32-bit
//! arithmetic (vello's habit). They are tested against native u64/u128 arithmetic at the
//! edges, and [`PortsEngine`] runs the GPU's exact plan and stages on the CPU, so when the GPU
//! and CPU engines disagree, the ports say which stage is wrong.

use super::plan::{
    init_fragment_rows, interleave, plan, sign_on_host, SubBatch, SubBatchLimits, CHUNK,
};
use super::{GpuConfig, Kernels};
use crate::batch::PackedBatch;
use crate::engine::{check_output, Engine, EngineError, EngineInfo};
use crate::hash::{PermParams, P};
use crate::sign::minhash::MinHashParams;

/// FNV-1a 64 offset basis, low and high halves (as in `u64.wgsl`).
pub const FNV_OFFSET_LO: u32 = 0x8422_2325;
pub const FNV_OFFSET_HI: u32 = 0xcbf2_9ce4;
/// The FNV prime is `2^40 + FNV_PRIME_LOW_PART`.
pub const FNV_PRIME_LOW_PART: u32 = 0x1b3;

/// A 64-bit value as the shaders hold it: `(low, high)`.
pub type U64 = (u32, u32);

/// `u64.wgsl: limbs`.
pub fn limbs(b: u32) -> (u32, u32) {
    (b & 0xffff, b >> 16)
}

/// `u64.wgsl: mul32x32_limbs`.
pub fn mul32x32_limbs(a: u32, bl: (u32, u32)) -> U64 {
    let a0 = a & 0xffff;
    let a1 = a >> 16;
    let (b0, b1) = bl;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // At most 2^32 - 1: plain `+` would panic in debug builds if the reasoning were wrong.
    let mid = p01 + (p00 >> 16) + (p10 & 0xffff);
    let lo = (mid << 16) | (p00 & 0xffff);
    let hi = p11 + (mid >> 16) + (p10 >> 16);
    (lo, hi)
}

/// `u64.wgsl: mul32x32`.
pub fn mul32x32(a: u32, b: u32) -> U64 {
    mul32x32_limbs(a, limbs(b))
}

/// `u64.wgsl: fnv_mul`.
pub fn fnv_mul(h: U64) -> U64 {
    let low = mul32x32(h.0, FNV_PRIME_LOW_PART);
    let hi = low
        .1
        .wrapping_add(h.1.wrapping_mul(FNV_PRIME_LOW_PART))
        .wrapping_add(h.0 << 8);
    (low.0, hi)
}

/// `u64.wgsl: mod_p_u64`.
pub fn mod_p_u64(v: U64) -> u32 {
    let c0 = v.0 & P;
    let c1 = (v.0 >> 31) | ((v.1 & 0x3fff_ffff) << 1);
    let c2 = v.1 >> 30;
    let mut s = c0 + c1;
    s = (s & P) + (s >> 31);
    s += c2;
    if s >= P {
        s -= P;
    }
    s
}

/// `u64.wgsl: permute_limbs` (valid for `a, b, x < P`, as every permutation parameter and `x`
/// is).
pub fn permute_limbs(a: u32, b: u32, xl: (u32, u32)) -> u32 {
    let prod = mul32x32_limbs(a, xl);
    let lo = prod.0.wrapping_add(b);
    let hi = prod.1 + u32::from(lo < b);
    let f = ((hi << 1) | (lo >> 31)) + (lo & P);
    f.min(f.wrapping_sub(P))
}

/// `u64.wgsl: permute`.
pub fn permute(a: u32, b: u32, x: u32) -> u32 {
    permute_limbs(a, b, limbs(x))
}

/// Twins of `u64_native.wgsl` (`--gpu-int64`): the same functions as the emulated ones above,
/// on native 64-bit integers, as the shaders compute them.
pub mod native {
    use super::U64;
    use crate::hash::P;

    const FNV_PRIME: u64 = 0x100_0000_01b3;

    pub fn join64(v: U64) -> u64 {
        (v.1 as u64) << 32 | v.0 as u64
    }

    pub fn halves(v: u64) -> U64 {
        (v as u32, (v >> 32) as u32)
    }

    /// `u64_native.wgsl: limbs`: the value itself, a native multiply needs no limbs.
    pub fn limbs(b: u32) -> (u32, u32) {
        (b, 0)
    }

    /// `u64_native.wgsl: mul32x32_limbs`.
    pub fn mul32x32_limbs(a: u32, bl: (u32, u32)) -> U64 {
        halves(a as u64 * bl.0 as u64)
    }

    /// `u64_native.wgsl: mul32x32`.
    pub fn mul32x32(a: u32, b: u32) -> U64 {
        mul32x32_limbs(a, limbs(b))
    }

    /// `u64_native.wgsl: fnv_mul`.
    pub fn fnv_mul(h: U64) -> U64 {
        halves(join64(h).wrapping_mul(FNV_PRIME))
    }

    /// `u64_native.wgsl: mod_p_u64`.
    pub fn mod_p_u64(v: U64) -> u32 {
        let x = join64(v);
        let s = (x & P as u64) + (x >> 31);
        let mut t = (s & P as u64) as u32 + (s >> 31) as u32;
        if t >= P {
            t -= P;
        }
        t
    }

    /// `u64_native.wgsl: permute_limbs` (valid for `a, b, x < P`).
    pub fn permute_limbs(a: u32, b: u32, xl: (u32, u32)) -> u32 {
        let v = a as u64 * xl.0 as u64 + b as u64;
        let f = (v >> 31) as u32 + (v & P as u64) as u32;
        f.min(f.wrapping_sub(P))
    }

    /// `u64_native.wgsl: permute`.
    pub fn permute(a: u32, b: u32, x: u32) -> u32 {
        permute_limbs(a, b, limbs(x))
    }
}

/// FNV-1a 64 of a byte string, reduced mod P, the way `hash.wgsl` computes it.
pub fn shingle_hash(bytes: &[u8]) -> u32 {
    let mut h = (FNV_OFFSET_LO, FNV_OFFSET_HI);
    for &b in bytes {
        h.0 ^= b as u32;
        h = fnv_mul(h);
    }
    mod_p_u64(h)
}

fn byte_at(bytes: &[u32], i: u32) -> u32 {
    (bytes[(i >> 2) as usize] >> ((i & 3) * 8)) & 0xff
}

/// `hash.wgsl: doc_of`.
fn doc_of(cfg: &GpuConfig, docs: &[[u32; 4]], g: u32) -> u32 {
    let (mut lo, mut hi) = (0u32, cfg.num_docs);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if docs[mid as usize][1] <= g {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The value of the shingle starting at word `w0` of document `doc` (its entry in
/// `SubBatch::docs`), as `hash_shingles` and `minhash_fused` compute it.
fn shingle_x(cfg: &GpuConfig, sb: &SubBatch, w0: u32, doc: [u32; 4]) -> u32 {
    let [_, _, doc_end, shift] = doc;
    let w_end = (w0 + cfg.k).min(doc_end);
    let b0 = sb.word_start[w0 as usize].wrapping_add(shift);
    let b1 = sb.word_start[w_end as usize].wrapping_add(shift) - 1;
    let mut h = (FNV_OFFSET_LO, FNV_OFFSET_HI);
    for i in b0..b1 {
        h.0 ^= byte_at(&sb.bytes, i);
        h = fnv_mul(h);
    }
    mod_p_u64(h)
}

/// `hash.wgsl: hash_shingles`, every invocation in turn.
pub fn hash_stage(cfg: &GpuConfig, sb: &SubBatch, xs: &mut [u32]) {
    for g in 0..cfg.num_shingles {
        let doc = sb.docs[doc_of(cfg, &sb.docs, g) as usize];
        let w0 = doc[0] + (g - doc[1]);
        xs[g as usize] = shingle_x(cfg, sb, w0, doc);
    }
}

/// `minhash.wgsl: init_signatures` then `minhash`, every workgroup in turn.
pub fn minhash_stage(
    cfg: &GpuConfig,
    sb: &SubBatch,
    xs: &[u32],
    perms: &[[u32; 2]],
    sigs: &mut [u32],
) {
    let n_perm = cfg.num_perm as usize;
    sigs[..cfg.num_docs as usize * n_perm].fill(P);
    let mut tile = [(0u32, 0u32); CHUNK];
    for chunk in &sb.chunks {
        let n = (chunk[2] - chunk[1]) as usize;
        let chunk_xs = &xs[chunk[1] as usize..chunk[2] as usize];
        assert_eq!(chunk_xs.len(), n, "a chunk's shingles");
        for (t, &x) in tile[..n].iter_mut().zip(chunk_xs) {
            *t = limbs(x);
        }
        for (i, &[a, b]) in perms.iter().enumerate() {
            let mut m = P;
            for &xl in &tile[..n] {
                m = m.min(permute_limbs(a, b, xl));
            }
            let slot = &mut sigs[chunk[0] as usize * n_perm + i];
            *slot = (*slot).min(m);
        }
    }
}

/// `minhash.wgsl: init_signatures` then `fused.wgsl: minhash_fused`, every workgroup in turn:
/// each chunk's tile hashed from its document's words, then reduced for every permutation.
pub fn fused_stage(cfg: &GpuConfig, sb: &SubBatch, perms: &[[u32; 2]], sigs: &mut [u32]) {
    let n_perm = cfg.num_perm as usize;
    sigs[..cfg.num_docs as usize * n_perm].fill(P);
    let mut tile = [(0u32, 0u32); CHUNK];
    for chunk in &sb.chunks {
        let d = chunk[0] as usize;
        let n = chunk[2] - chunk[1];
        let doc = sb.docs[d];
        for t in 0..n {
            let w0 = doc[0] + (chunk[1] + t - doc[1]);
            tile[t as usize] = limbs(shingle_x(cfg, sb, w0, doc));
        }
        for (i, &[a, b]) in perms.iter().enumerate() {
            let mut m = P;
            for &xl in &tile[..n as usize] {
                m = m.min(permute_limbs(a, b, xl));
            }
            let slot = &mut sigs[d * n_perm + i];
            *slot = (*slot).min(m);
        }
    }
}

/// Merge a sub-batch's signature rows into the batch's output: copied for whole documents,
/// min-merged for fragments (whose row was set to `P` before the first fragment).
pub fn merge_rows(sb: &SubBatch, rows: &[u32], num_perm: usize, out: &mut [u32]) {
    for (i, &t) in sb.targets.iter().enumerate() {
        let src = &rows[i * num_perm..(i + 1) * num_perm];
        let dst = &mut out[t as usize * num_perm..(t as usize + 1) * num_perm];
        if sb.fragment {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = (*d).min(s);
            }
        } else {
            dst.copy_from_slice(src);
        }
    }
}

/// The GPU engine's plan and stages, run on the CPU with the ports. Slow; for tests.
pub struct PortsEngine {
    params: MinHashParams,
    perms: Vec<[u32; 2]>,
    ref_perms: PermParams,
    limits: SubBatchLimits,
    kernels: Kernels,
}

impl PortsEngine {
    /// Sub-batches of at most `batch_bytes` word bytes (small values force fragments).
    pub fn new(params: MinHashParams, batch_bytes: usize) -> Result<Self, crate::error::Error> {
        params.validate()?;
        let ref_perms = params.perms();
        Ok(PortsEngine {
            perms: interleave(&ref_perms),
            ref_perms,
            limits: SubBatchLimits::new(128 << 20, params.num_perm, batch_bytes),
            params,
            kernels: Kernels::Split,
        })
    }

    /// The same, running the ports of `kernels`.
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.kernels = kernels;
        self
    }
}

impl Engine for PortsEngine {
    fn params(&self) -> &MinHashParams {
        &self.params
    }

    fn info(&self) -> EngineInfo {
        EngineInfo {
            kind: "ports",
            detail: match self.kernels {
                Kernels::Split => "the GPU stages ported to the CPU".into(),
                Kernels::Fused => "the fused GPU stage ported to the CPU".into(),
            },
            auto: None,
        }
    }

    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError> {
        let np = self.params.num_perm;
        let k = self.params.k;
        check_output(batch, np, out)?;
        let parts = std::slice::from_ref(batch);
        let p = plan(parts, k, &self.limits);
        init_fragment_rows(&p.subs, np, out);
        for sub in &p.subs {
            let sb = SubBatch::layout(sub, parts, k);
            let cfg = GpuConfig::for_sub_batch(&sb, k, np);
            let mut rows = vec![0u32; sb.num_docs() * np];
            match self.kernels {
                Kernels::Split => {
                    let mut xs = vec![0u32; sb.num_shingles as usize];
                    hash_stage(&cfg, &sb, &mut xs);
                    minhash_stage(&cfg, &sb, &xs, &self.perms, &mut rows);
                }
                Kernels::Fused => fused_stage(&cfg, &sb, &self.perms, &mut rows),
            }
            merge_rows(&sb, &rows, np, out);
        }
        sign_on_host(parts, &p.host_docs, k, &self.ref_perms, out);
        Ok(())
    }
}
