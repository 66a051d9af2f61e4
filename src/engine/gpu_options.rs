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
