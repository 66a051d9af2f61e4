//! What this CPU can run, detected once for every hot loop, and the x86 helpers that more
//! than one of them uses.
//!
//! `NEARDUP_KERNEL=scalar` turns every SIMD path off (the shingle hasher, the tokenizer's
//! packers, the record scanner and the permutation kernel), so the scalar references can be
//! timed and tested on any machine; `portable`, `avx2` or `avx512` pick the permutation
//! kernel alone ([`crate::sign::permute::Kernel::detect`]).

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// The instruction sets the SIMD paths need, as this CPU has them (all `false` off x86-64 and
/// under `NEARDUP_KERNEL=scalar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cpu {
    /// AVX2 with POPCNT and BMI1 (every AVX2 CPU has them): the AVX2 hasher, the tokenizer's
    /// AVX2 packer, the record scanner's AVX2 stop finder and unescaper.
    pub avx2: bool,
    /// AVX-512 F and DQ (the 64-bit multiply): the AVX-512 hasher.
    pub avx512_dq: bool,
    /// AVX-512 F and BW (byte compares): the record scanner's 64-byte stop finder.
    pub avx512_bw: bool,
    /// AVX-512 F, BW and VBMI2 (byte compress) with POPCNT, BMI1 and BMI2: the tokenizer's
    /// AVX-512 packer and the record scanner's block unescaper.
    pub avx512_vbmi2: bool,
}

/// The value of `NEARDUP_KERNEL`, read once.
pub fn kernel_override() -> Option<&'static str> {
    static K: OnceLock<Option<String>> = OnceLock::new();
    K.get_or_init(|| std::env::var("NEARDUP_KERNEL").ok())
        .as_deref()
}

/// This CPU's [`Cpu`], detected on the first call.
pub fn cpu() -> Cpu {
    static CPU: OnceLock<Cpu> = OnceLock::new();
    *CPU.get_or_init(|| {
        if kernel_override() == Some("scalar") {
            return Cpu::default();
        }
        detect()
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Cpu {
    use std::arch::is_x86_feature_detected as has;
    let f = has!("avx512f");
    let bits = has!("popcnt") && has!("bmi1");
    Cpu {
        avx2: has!("avx2") && bits,
        avx512_dq: f && has!("avx512dq"),
        avx512_bw: f && has!("avx512bw"),
        avx512_vbmi2: f && has!("avx512bw") && has!("avx512vbmi2") && bits && has!("bmi2"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Cpu {
    Cpu::default()
}
