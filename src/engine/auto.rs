//! `--engine auto`: the engine that signs this run faster, and why, in words the summary line
//! and the report carry.
//!
//! The CPU engine, unless a hardware GPU is there and faster for this run:
//! - a machine without a GPU device node, or where wgpu finds no hardware adapter, runs on
//!   the CPU (a software adapter such as llvmpipe is the CPU under another name);
//! - an input smaller than what the CPU engine signs in a GPU's start-up runs on the CPU;
//! - otherwise both engines sign the same synthetic sample and the faster one runs. The
//!   measurement is kept in the pipeline cache's directory, keyed by adapter, driver, shingle
//!   settings, permutations, threads and sub-batch size, so only a machine's first run of a
//!   kind pays for it (a damaged or missing file is measured again).
//!
//! `NEARDUP_AUTO_SOFTWARE=1` lets a software adapter take part, so the measuring runs where CI
//! has no GPU; nothing else changes.

use std::path::{Path, PathBuf};
use std::time::Instant;

#[cfg(test)]
use super::gpu::CacheDir;
#[cfg(feature = "gpu")]
use super::gpu::GpuEngine;
use super::gpu::GpuOptions;
use super::{CpuEngine, Engine, EngineError, EngineInfo, PieceSigner, StreamSigner};
use crate::batch::PackedBatch;
use crate::sign::minhash::MinHashParams;

/// Input bytes a thread of the CPU engine signs in about a GPU's start-up: below this many
/// bytes per CPU thread, the GPU cannot pay for its start-up whatever its speed.
pub const SMALL_INPUT_PER_THREAD: u64 = 4 << 20;

/// Text bytes of the sample both engines sign when no measurement is kept.
pub const PROBE_BYTES: usize = 16 << 20;

/// How much faster the GPU must sign the sample to be chosen: a near tie goes to the CPU
/// engine, which holds no device memory and starts at once.
pub const GPU_MARGIN: f64 = 1.1;

/// An engine `auto` chose, and why: everything is the chosen engine's but [`Engine::info`],
/// which carries the reason.
pub struct Chosen {
    inner: Box<dyn Engine>,
    why: String,
}

impl Chosen {
    /// The sentence the summary line and the report show (`auto chose cpu: ...`).
    pub fn why(&self) -> &str {
        &self.why
    }
}

impl Engine for Chosen {
    fn params(&self) -> &MinHashParams {
        self.inner.params()
    }
    fn info(&self) -> EngineInfo {
        EngineInfo {
            auto: Some(self.why.clone()),
            ..self.inner.info()
        }
    }
    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError> {
        self.inner.sign(batch, out)
    }
    fn preferred_chunk_bytes(&self) -> usize {
        self.inner.preferred_chunk_bytes()
    }
    fn piece_signer(&self) -> Option<&dyn PieceSigner> {
        self.inner.piece_signer()
    }
    fn sign_texts(&mut self, texts: &[&str], out: &mut [u32]) -> Result<(), EngineError> {
        self.inner.sign_texts(texts, out)
    }
    fn sign_parts(&mut self, parts: &[PackedBatch], out: &mut [u32]) -> Result<(), EngineError> {
        self.inner.sign_parts(parts, out)
    }
    fn streamer(&mut self) -> Option<&mut dyn StreamSigner> {
        self.inner.streamer()
    }
}

/// Whether software adapters take part in `auto` (`NEARDUP_AUTO_SOFTWARE=1`).
fn software_allowed() -> bool {
    std::env::var_os("NEARDUP_AUTO_SOFTWARE").is_some_and(|v| v == "1")
}

/// The CPU engine, with `auto`'s reason.
fn on_cpu(cpu: CpuEngine, why: String) -> Box<dyn Engine> {
    Box::new(Chosen {
        inner: Box::new(cpu),
        why: format!("auto chose cpu: {why}"),
    })
}

/// An input's size, for the reasons.
fn size(bytes: u64) -> String {
    if bytes < 100_000 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// The engine `auto` picks for `params` with `threads` CPU threads (0: all) and `gpu`'s
/// adapter options, `gpu.input_bytes` the run's input when known.
pub fn choose(
    params: MinHashParams,
    threads: usize,
    gpu: &GpuOptions,
) -> Result<Box<dyn Engine>, crate::error::Error> {
    let cpu = CpuEngine::new(params, threads)?;
    let cores = cpu.threads();
    let software = software_allowed();
    if let Some(n) = gpu.input_bytes {
        if n < SMALL_INPUT_PER_THREAD * cores as u64 {
            return Ok(on_cpu(
                cpu,
                format!(
                    "{} of input is less than {cores} CPU threads sign in a GPU's start-up",
                    size(n)
                ),
            ));
        }
    }
    if !software && super::gpu_device_nodes(Path::new("/dev")) == Some(false) {
        return Ok(on_cpu(cpu, "this machine has no GPU device".into()));
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (params, software);
        Ok(on_cpu(cpu, "this build has no GPU engine".into()))
    }
    #[cfg(feature = "gpu")]
    with_gpu(cpu, params, gpu, software)
}

/// `auto` where a GPU may be faster: open it, and let the kept or a new measurement decide.
#[cfg(feature = "gpu")]
fn with_gpu(
    cpu: CpuEngine,
    params: MinHashParams,
    gpu: &GpuOptions,
    software: bool,
) -> Result<Box<dyn Engine>, crate::error::Error> {
    let cores = cpu.threads();
    let opts = GpuOptions {
        allow_software: software,
        ..gpu.clone()
    };
    let mut g = match GpuEngine::new(params, &opts) {
        Ok(g) => g,
        Err(crate::error::Error::Engine(EngineError::NoAdapter(_))) => {
            return Ok(on_cpu(cpu, "wgpu found no hardware GPU adapter".into()));
        }
        Err(e) => {
            return Ok(on_cpu(cpu, format!("the GPU could not be opened ({e})")));
        }
    };
    debug_startup(&g);
    let key = probe_key(&g, cores);
    let file = gpu.cache.resolve().map(|d| {
        d.join(format!(
            "auto-{:016x}.json",
            xxhash_rust::xxh3::xxh3_64(key.as_bytes())
        ))
    });
    let (m, fresh) = match file.as_deref().and_then(|f| read_probe(f, &key)) {
        Some(m) => (m, false),
        None => {
            let m = match probe(&mut cpu_for_probe(&cpu), &mut g) {
                Ok(m) => m,
                Err(e) => {
                    return Ok(on_cpu(cpu, format!("the GPU failed its measurement ({e})")));
                }
            };
            if let Some(f) = &file {
                // A cache that cannot be written costs the next run this probe, no more.
                let _ = write_probe(f, &key, &m);
            }
            (m, true)
        }
    };
    let source = match (&file, fresh) {
        (_, true) => "measured now".to_string(),
        (Some(f), false) => format!("measured before, kept in {}", f.display()),
        (None, false) => unreachable!("a kept measurement has a file"),
    };
    let name = g.adapter().name.clone();
    if m.gpu_mb_per_s >= GPU_MARGIN * m.cpu_mb_per_s {
        Ok(Box::new(Chosen {
            inner: Box::new(g),
            why: format!(
                "auto chose gpu: {name} signs {:.0} MB/s, {:.1}x the CPU engine's {:.0} MB/s on \
                 {cores} threads ({source})",
                m.gpu_mb_per_s,
                m.gpu_mb_per_s / m.cpu_mb_per_s,
                m.cpu_mb_per_s
            ),
        }))
    } else {
        Ok(on_cpu(
            cpu,
            format!(
                "{cores} CPU threads sign {:.0} MB/s, {name} {:.0} MB/s, less than {GPU_MARGIN}x \
                 ({source})",
                m.cpu_mb_per_s, m.gpu_mb_per_s
            ),
        ))
    }
}

#[cfg(feature = "gpu")]
/// With `NEARDUP_DEBUG_STAGES`, a GPU engine's start-up, step by step, on stderr.
pub fn debug_startup(g: &GpuEngine) {
    if std::env::var_os("NEARDUP_DEBUG_STAGES").is_some() {
        eprintln!("neardup: gpu {}: {}", g.adapter().name, g.startup());
    }
}

#[cfg(feature = "gpu")]
/// The CPU engine the probe measures: the chosen one's threads, its own pool.
fn cpu_for_probe(cpu: &CpuEngine) -> CpuEngine {
    CpuEngine::new(*cpu.params(), cpu.threads()).expect("the same parameters were valid")
}

#[cfg(feature = "gpu")]
/// Everything a kept measurement depends on.
fn probe_key(g: &GpuEngine, cores: usize) -> String {
    let a = g.adapter();
    let p = g.params();
    format!(
        "neardup {} probe v1\nadapter {} | {} | {} | {}\nengine {}\nk {} perms {}{}\nthreads \
         {cores}\nsub-batch {}",
        env!("CARGO_PKG_VERSION"),
        a.name,
        a.backend,
        a.driver,
        a.driver_info,
        g.info().detail,
        p.k,
        p.num_perm,
        p.rule_words(),
        g.limits().max_bytes
    )
}

/// What the probe measured: text megabytes a second of each engine on the sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Measured {
    pub cpu_mb_per_s: f64,
    pub gpu_mb_per_s: f64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct KeptProbe {
    key: String,
    #[serde(flatten)]
    measured: Measured,
}

#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
/// The measurement kept at `file` for `key`, when it is whole and of this key.
fn read_probe(file: &Path, key: &str) -> Option<Measured> {
    let bytes = std::fs::read(file).ok()?;
    let k: KeptProbe = serde_json::from_slice(&bytes).ok()?;
    let m = k.measured;
    let fine = |v: f64| v.is_finite() && v > 0.0;
    (k.key == key && fine(m.cpu_mb_per_s) && fine(m.gpu_mb_per_s)).then_some(m)
}

#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
fn write_probe(file: &Path, key: &str, m: &Measured) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp: PathBuf = dir.join(format!(".auto.{}.tmp", std::process::id()));
    let body = serde_json::to_vec_pretty(&KeptProbe {
        key: key.to_string(),
        measured: *m,
    })
    .map_err(std::io::Error::other)?;
    let r = std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, file));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
/// Seeded text of at least `bytes` bytes, in documents of about 300 words: a vocabulary of
/// 20,000 lowercase words of 2 to 9 letters, drawn uniformly, so most shingles are distinct
/// as in real text. The same on every machine, for every call.
fn sample(bytes: usize) -> Vec<String> {
    let mut rng = crate::hash::Pcg32::new(0x9e37_79b9);
    let vocab: Vec<String> = (0..20_000)
        .map(|_| {
            let n = 2 + rng.below(8) as usize;
            (0..n)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect()
        })
        .collect();
    let (mut out, mut total) = (Vec::new(), 0);
    while total < bytes {
        let words = 150 + rng.below(301) as usize;
        let mut t = String::with_capacity(words * 7);
        for i in 0..words {
            if i > 0 {
                t.push(' ');
            }
            t.push_str(&vocab[rng.below(vocab.len() as u32) as usize]);
        }
        total += t.len();
        out.push(t);
    }
    out
}

/// Both engines sign the same sample (seeded text of [`PROBE_BYTES`]), each twice;
/// the better pass counts (the first also faults in buffers).
pub fn probe(cpu: &mut dyn Engine, gpu: &mut dyn Engine) -> Result<Measured, EngineError> {
    let texts = sample(PROBE_BYTES);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bytes: usize = refs.iter().map(|t| t.len()).sum();
    let np = cpu.params().num_perm;
    let mut out = vec![0u32; refs.len() * np];
    let mut rate = |e: &mut dyn Engine| -> Result<f64, EngineError> {
        let mut best = f64::INFINITY;
        for _ in 0..2 {
            let t = Instant::now();
            e.sign_texts(&refs, &mut out)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(bytes as f64 / 1e6 / best.max(1e-9))
    };
    Ok(Measured {
        cpu_mb_per_s: rate(cpu)?,
        gpu_mb_per_s: rate(gpu)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_seeded_and_as_large_as_asked() {
        let a = sample(100_000);
        assert_eq!(a, sample(100_000));
        let bytes: usize = a.iter().map(|t| t.len()).sum();
        assert!((100_000..100_000 + 5_000).contains(&bytes), "{bytes}");
        assert!(a
            .iter()
            .all(|t| (150..=450).contains(&t.split(' ').count())));
        assert!(sample(0).is_empty());
    }

    #[test]
    fn kept_measurements_are_read_only_whole_and_of_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("auto-x.json");
        assert_eq!(read_probe(&f, "k"), None, "nothing kept");
        let m = Measured {
            cpu_mb_per_s: 250.0,
            gpu_mb_per_s: 900.0,
        };
        write_probe(&f, "k", &m).unwrap();
        assert_eq!(read_probe(&f, "k"), Some(m));
        assert_eq!(read_probe(&f, "another key"), None);
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
        assert_eq!(read_probe(&f, "k"), None, "half a file");
        write_probe(
            &f,
            "k",
            &Measured {
                cpu_mb_per_s: 0.0,
                gpu_mb_per_s: 900.0,
            },
        )
        .unwrap();
        assert_eq!(
            read_probe(&f, "k"),
            None,
            "a rate of zero is no measurement"
        );
    }

    #[test]
    fn a_machine_without_a_gpu_device_chooses_the_cpu_and_says_why() {
        if software_allowed() || super::super::gpu_device_nodes(Path::new("/dev")) != Some(false) {
            eprintln!("this machine has a GPU device node: the rule is tested where none is");
            return;
        }
        let e = choose(MinHashParams::default(), 1, &GpuOptions::default()).unwrap();
        let info = e.info();
        assert_eq!(info.kind, "cpu");
        assert_eq!(
            info.auto.as_deref(),
            Some("auto chose cpu: this machine has no GPU device")
        );
    }

    #[test]
    fn a_small_input_stays_on_the_cpu_before_any_adapter_is_searched() {
        let opts = GpuOptions {
            input_bytes: Some(1000),
            cache: CacheDir::Off,
            ..GpuOptions::default()
        };
        let e = choose(MinHashParams::default(), 2, &opts).unwrap();
        let info = e.info();
        assert_eq!(info.kind, "cpu");
        assert_eq!(
            info.auto.as_deref(),
            Some(
                "auto chose cpu: 1000 bytes of input is less than 2 CPU threads sign in a GPU's \
                  start-up"
            )
        );
    }
}
