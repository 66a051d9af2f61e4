//! What the GPU engine is asked for (backends, adapter, kernels, sizes) and what it reports
//! of an adapter: plain types, there whether or not the build has the `gpu` feature, so that
//! options parse the same in every build and a missing feature is a clear error, not an
//! unknown flag.

/// `--backend`: which wgpu backends to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Vulkan,
    Metal,
    Dx12,
    Gl,
    All,
}

crate::named!(
    BackendChoice,
    "backend",
    [
        ("vulkan", BackendChoice::Vulkan, ""),
        ("metal", BackendChoice::Metal, ""),
        ("dx12", BackendChoice::Dx12, ""),
        ("gl", BackendChoice::Gl, ""),
        ("all", BackendChoice::All, ""),
    ]
);

/// `--gpu-kernels`: how a sub-batch's shingles are hashed and reduced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// `hash_shingles` writes every shingle's value to device memory, then `minhash` reads it
    /// back: one workgroup per chunk and 64 permutations.
    #[default]
    Split,
    /// `minhash_fused`: one workgroup per chunk and every permutation hashes the chunk into
    /// its tile, so each value is computed once and never stored.
    Fused,
}

crate::named!(
    Kernels,
    "gpu_kernels",
    [
        (
            "split",
            Kernels::Split,
            "Hash every shingle into device memory, then reduce it (64 permutations a workgroup)"
        ),
        (
            "fused",
            Kernels::Fused,
            "Hash each chunk of shingles into the reducing workgroup's memory (every permutation a workgroup)"
        ),
    ]
);

/// How the GPU engine finds and sizes its device.
#[derive(Debug, Clone)]
pub struct GpuOptions {
    /// Backends to search; `None`: `WGPU_BACKEND` if set, else all.
    pub backend: Option<BackendChoice>,
    /// Accept a software adapter (llvmpipe, lavapipe, SwiftShader, WARP).
    pub allow_software: bool,
    /// Cap on the word bytes of one sub-batch (default 32 MiB, or the device's binding limit).
    pub batch_bytes: usize,
    /// Time each kernel with GPU timestamps, when the adapter supports them (`bench`).
    pub profile: bool,
    /// The adapter to take, as `neardup devices` lists them: its index, or a part of its name
    /// (any case); `None`: the best one (see `gpu::adapter_rank`). A named adapter is taken
    /// whatever its kind, a software one included.
    pub adapter: Option<String>,
    /// The longest wait for one sub-batch's results: a device that stops answering is then an
    /// error naming the adapter, never a hang.
    pub wait_timeout: std::time::Duration,
    /// The kernels that sign (the same bits either way).
    pub kernels: Kernels,
    /// Native 64-bit shader integers (`u64_native.wgsl`) in place of the emulated arithmetic
    /// (the same bits); an adapter without them is an error.
    pub int64: bool,
    /// Where compiled pipelines are kept between runs ([`CacheDir`]).
    pub cache: CacheDir,
    /// The bytes of input the engine is built for, when known: `auto` weighs them and, with
    /// `input_sized`, buffers are sized for them. More input than this is still signed, in
    /// more sub-batches.
    pub input_bytes: Option<u64>,
    /// Size sub-batches by `input_bytes` when it is known (`batch_bytes` not asked for): see
    /// `gpu::batch_bytes_for`.
    pub input_sized: bool,
}

/// Where the GPU engine keeps compiled pipelines (and `auto` its measurements) between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheDir {
    /// `NEARDUP_CACHE_DIR` when set (empty: no cache), else `$XDG_CACHE_HOME/neardup`, else
    /// `$HOME/.cache/neardup`.
    #[default]
    User,
    /// No cache: every run compiles its pipelines.
    Off,
    /// This directory.
    At(std::path::PathBuf),
}

impl CacheDir {
    /// The directory, or `None` for no cache.
    pub fn resolve(&self) -> Option<std::path::PathBuf> {
        match self {
            CacheDir::Off => None,
            CacheDir::At(p) => Some(p.clone()),
            CacheDir::User => {
                if let Some(v) = std::env::var_os("NEARDUP_CACHE_DIR") {
                    return (!v.is_empty()).then(|| v.into());
                }
                let xdg = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty());
                let base = match xdg {
                    Some(x) => std::path::PathBuf::from(x),
                    None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
                };
                Some(base.join("neardup"))
            }
        }
    }
}

/// What the pipeline cache did for one engine's start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheUse {
    /// No cache: turned off, no directory, or a backend without application pipeline caches.
    #[default]
    None,
    /// Nothing kept for this adapter, driver and shaders yet: compiled, then kept.
    Cold,
    /// Compiled pipelines were read back.
    Warm,
    /// A kept file was damaged or of another version: ignored, compiled, kept anew.
    Damaged,
}

/// Wall seconds of a GPU engine's start-up, step by step.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct StartupSeconds {
    /// Making the wgpu instance (loading the backends' libraries).
    pub instance: f64,
    /// Listing the adapters and picking one (each driver starts up here).
    pub adapter: f64,
    /// Opening the device and its queue.
    pub device: f64,
    /// Parsing and validating the shader modules.
    pub shaders: f64,
    /// Compiling the pipelines (for the driver: its own compiler, or the cache).
    pub pipelines: f64,
    /// Reading and writing the pipeline cache.
    pub cache: f64,
    /// Making the buffers, the bind group and the ring's slots.
    pub buffers: f64,
    /// What the pipeline cache did.
    pub cache_use: CacheUse,
}

impl StartupSeconds {
    /// Each step's name and seconds, in order.
    pub fn steps(&self) -> [(&'static str, f64); 7] {
        [
            ("instance", self.instance),
            ("adapter", self.adapter),
            ("device", self.device),
            ("shaders", self.shaders),
            ("pipelines", self.pipelines),
            ("cache", self.cache),
            ("buffers", self.buffers),
        ]
    }

    /// The whole start-up.
    pub fn total(&self) -> f64 {
        self.steps().iter().map(|s| s.1).sum()
    }
}

impl std::fmt::Display for StartupSeconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |s: f64| s * 1e3;
        write!(
            f,
            "start-up {:.1} ms: instance {:.1}, adapter {:.1}, device {:.1}, shaders {:.1}, \
             pipelines {:.1}, cache {:.1} ({}), buffers {:.1}",
            ms(self.total()),
            ms(self.instance),
            ms(self.adapter),
            ms(self.device),
            ms(self.shaders),
            ms(self.pipelines),
            ms(self.cache),
            match self.cache_use {
                CacheUse::None => "none",
                CacheUse::Cold => "cold",
                CacheUse::Warm => "warm",
                CacheUse::Damaged => "damaged, rebuilt",
            },
            ms(self.buffers)
        )
    }
}

/// [`GpuOptions::wait_timeout`]'s default: far beyond any sub-batch's work on a working device,
/// software ones included.
pub const DEFAULT_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            backend: None,
            allow_software: true,
            batch_bytes: 32 << 20,
            profile: false,
            adapter: None,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            kernels: Kernels::Split,
            int64: false,
            cache: CacheDir::User,
            input_bytes: None,
            input_sized: true,
        }
    }
}

/// What `neardup devices` prints for each adapter.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub software: bool,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    /// 64-bit integers in shaders (`SHADER_INT64`).
    pub shader_int64: bool,
    /// GPU timestamps, which `bench` uses to time the kernels alone.
    pub timestamp_query: bool,
}

/// Wall seconds of the host's work on the GPU path, on the thread that drives the engine (the
/// fill runs on the pool; its wall time is counted here).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct HostSeconds {
    /// Cutting jobs into sub-batches.
    pub plan: f64,
    /// Mapping the staging buffers for writing.
    pub map: f64,
    /// Laying sub-batches out into the staging buffers.
    pub fill: f64,
    /// Encoding the copies and dispatches and handing them to the queue (wall seconds, the
    /// queue's own call included: a software adapter may run the whole work in it).
    pub submit: f64,
    /// Waiting for the GPU.
    pub wait: f64,
    /// Copying signature rows into the callers' matrices.
    pub readback: f64,
    /// Signing the documents left to the host.
    pub host_docs: f64,
    /// CPU seconds of this thread inside the calls that run the driver (`queue.submit`,
    /// `device.poll`): a software adapter does its copies there, a GPU's DMA engines do them
    /// elsewhere.
    pub driver_cpu: f64,
}
