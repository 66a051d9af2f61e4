//! The GPU engine: WGSL compute shaders through wgpu (Vulkan, Metal, DX12, GL).
//!
//! Three dispatches per sub-batch: `init_signatures` (every entry `P`), `hash_shingles` (one
//! invocation per shingle: FNV-1a 64 with emulated 64-bit arithmetic, reduced mod P) and
//! `minhash` (one workgroup per chunk of at most 256 shingles and 64 permutations, merged with
//! `atomicMin`). With [`Kernels::Fused`] the middle one is skipped and `minhash_fused` hashes
//! each chunk into its workgroup's tile for every permutation. Pipelines, the bind group and
//! every buffer are made once, at their largest, and reused for every batch; a batch is cut
//! into sub-batches that fit them ([`plan`]).
//!
//! The host side is built so that the GPU never waits for one thread: chunks arrive as the
//! parts the workers tokenized (never joined), each sub-batch is laid out by several threads
//! straight into a mapped staging buffer, up to [`ring::RING`] sub-batches are in flight (one
//! filling, one signing, one reading back), and rows are read back straight into the signature
//! matrix. [`crate::pipeline`] streams chunk after chunk through [`StreamSigner`].

pub mod cache;
pub mod plan;
pub mod ports;
pub mod ring;
pub mod shaders;

pub use super::gpu_options::{
    AdapterSummary, BackendChoice, CacheDir, CacheUse, GpuOptions, Kernels, StartupSeconds,
    DEFAULT_WAIT_TIMEOUT,
};

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytemuck::{Pod, Zeroable};

use self::plan::{SubBatch, SubBatchLimits, SubPlan};
use self::ring::{HostSeconds, Ring};
use super::{Engine, EngineError, EngineInfo, SignJob, StreamSigner};
use crate::batch::PackedBatch;
use crate::hash::PermParams;
use crate::sign::minhash::MinHashParams;

/// The uniform block of every shader. Mirrors `struct Config` in `shaders/bindings.wgsl`; keep
/// the two in step (field order and size).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GpuConfig {
    pub k: u32,
    pub num_docs: u32,
    pub num_shingles: u32,
    pub num_perm: u32,
    pub num_chunks: u32,
    /// Workgroups along x of the 2-D `hash_shingles` grid (y covers the rest).
    pub hash_groups_x: u32,
    /// Workgroups along x of the 2-D chunk grid of `minhash`.
    pub min_groups_x: u32,
    /// Workgroups along x of the 2-D `init_signatures` grid.
    pub init_groups_x: u32,
}

/// Most workgroups along one dimension that every adapter allows.
const MAX_GROUPS: u32 = 65_535;
/// Invocations per workgroup of `hash_shingles` and `init_signatures`.
const HASH_WG: u32 = 256;
/// Permutations per workgroup of `minhash`.
const PERM_WG: u32 = 64;

/// Split `groups` workgroups over a 2-D grid: `(x, y)` with `x <= 65535`.
fn grid(groups: u32) -> (u32, u32) {
    if groups == 0 {
        (0, 0)
    } else {
        let x = groups.min(MAX_GROUPS);
        (x, groups.div_ceil(x))
    }
}

impl GpuConfig {
    /// The configuration of a sub-batch of `docs` documents, `shingles` shingles and `chunks`
    /// chunks.
    pub fn new(k: usize, num_perm: usize, docs: u32, shingles: u32, chunks: u32) -> Self {
        GpuConfig {
            k: k as u32,
            num_docs: docs,
            num_shingles: shingles,
            num_perm: num_perm as u32,
            num_chunks: chunks,
            hash_groups_x: grid(shingles.div_ceil(HASH_WG)).0,
            min_groups_x: grid(chunks).0,
            init_groups_x: grid((docs * num_perm as u32).div_ceil(HASH_WG)).0,
        }
    }

    /// The configuration of one sub-batch laid out.
    pub fn for_sub_batch(sb: &SubBatch, k: usize, num_perm: usize) -> Self {
        Self::new(
            k,
            num_perm,
            sb.num_docs() as u32,
            sb.num_shingles,
            sb.chunks.len() as u32,
        )
    }

    /// The configuration of one planned sub-batch.
    pub fn for_plan(sub: &SubPlan, k: usize, num_perm: usize) -> Self {
        Self::new(
            k,
            num_perm,
            sub.size.docs,
            sub.size.shingles,
            sub.size.chunks,
        )
    }

    /// The workgroups of each dispatch: `init_signatures`, `hash_shingles`, then `minhash`
    /// (its permutations in blocks of 64 along z) or, with [`Kernels::Fused`], no
    /// `hash_shingles` and `minhash_fused` (every permutation in each workgroup).
    pub fn dispatches(&self, kernels: Kernels) -> [(u32, u32, u32); 3] {
        let init = grid((self.num_docs * self.num_perm).div_ceil(HASH_WG));
        let hash = grid(self.num_shingles.div_ceil(HASH_WG));
        let chunks = grid(self.num_chunks);
        match kernels {
            Kernels::Split => [
                (init.0, init.1, 1),
                (hash.0, hash.1, 1),
                (chunks.0, chunks.1, self.num_perm.div_ceil(PERM_WG)),
            ],
            Kernels::Fused => [(init.0, init.1, 1), (0, 0, 0), (chunks.0, chunks.1, 1)],
        }
    }

    /// The block as the shaders read it (little-endian).
    fn le_bytes(&self) -> [u8; 32] {
        let words: [u32; 8] = bytemuck::cast(*self);
        let mut out = [0u8; 32];
        for (o, w) in out.chunks_exact_mut(4).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

impl BackendChoice {
    pub fn backends(self) -> wgpu::Backends {
        match self {
            BackendChoice::Vulkan => wgpu::Backends::VULKAN,
            BackendChoice::Metal => wgpu::Backends::METAL,
            BackendChoice::Dx12 => wgpu::Backends::DX12,
            BackendChoice::Gl => wgpu::Backends::GL,
            BackendChoice::All => wgpu::Backends::all(),
        }
    }
}

impl GpuOptions {
    /// The backends to search: `--backend`, else `WGPU_BACKEND`, else all.
    pub fn backends(&self) -> wgpu::Backends {
        match self.backend {
            Some(b) => b.backends(),
            None => wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all()),
        }
    }
}

fn is_software(info: &wgpu::AdapterInfo) -> bool {
    let name = info.name.to_ascii_lowercase();
    info.device_type == wgpu::DeviceType::Cpu
        || [
            "llvmpipe",
            "lavapipe",
            "swiftshader",
            "softpipe",
            "warp",
            "microsoft basic render",
        ]
        .iter()
        .any(|s| name.contains(s))
}

fn summarize(a: &wgpu::Adapter) -> AdapterSummary {
    let info = a.get_info();
    let l = a.limits();
    AdapterSummary {
        software: is_software(&info),
        name: info.name,
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        driver: info.driver,
        driver_info: info.driver_info,
        max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
        max_buffer_size: l.max_buffer_size,
        max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
        max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
        max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
        max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
        shader_int64: a.features().contains(wgpu::Features::SHADER_INT64),
        timestamp_query: a.features().contains(wgpu::Features::TIMESTAMP_QUERY),
    }
}

/// How an adapter ranks for the best pick, lower first: hardware before software, then a
/// native API (Vulkan, Metal, DX12) before GL (a hardware GPU often shows through both, and GL
/// is the weaker path to it), then discrete, integrated, virtual, other.
pub fn adapter_rank(software: bool, backend: wgpu::Backend, device_type: wgpu::DeviceType) -> u8 {
    let kind = match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let gl = u8::from(backend == wgpu::Backend::Gl);
    u8::from(software || device_type == wgpu::DeviceType::Cpu) * 100 + gl * 10 + kind
}

fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    wgpu::Instance::new(desc)
}

/// Every adapter wgpu sees on the chosen backends.
pub fn list_adapters(opts: &GpuOptions) -> Vec<AdapterSummary> {
    let inst = instance(opts.backends());
    pollster::block_on(inst.enumerate_adapters(opts.backends()))
        .iter()
        .map(summarize)
        .collect()
}

/// The adapter `opts.adapter` names, else the best by [`adapter_rank`] (a software one only
/// when allowed), with the instance's and the search's seconds in `startup`.
fn pick_adapter(
    opts: &GpuOptions,
    startup: &mut StartupSeconds,
) -> Result<(wgpu::Instance, wgpu::Adapter), EngineError> {
    let backends = opts.backends();
    // The native APIs first: a hardware adapter there outranks anything GL offers, and GL's
    // start-up (EGL, and every GL driver) is then skipped. An adapter named by its index is
    // looked up among all backends at once, as `neardup devices` lists them.
    let native = backends & !wgpu::Backends::GL;
    let first = if opts.adapter.is_none() && !native.is_empty() {
        native
    } else {
        backends
    };
    let t = std::time::Instant::now();
    let mut inst = instance(first);
    startup.instance = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let mut adapters = pollster::block_on(inst.enumerate_adapters(first));
    startup.adapter = t.elapsed().as_secs_f64();
    let hardware = adapters.iter().any(|a| !is_software(&a.get_info()));
    if first != backends && !hardware {
        let t = std::time::Instant::now();
        let gl = instance(wgpu::Backends::GL);
        startup.instance += t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let more = pollster::block_on(gl.enumerate_adapters(wgpu::Backends::GL));
        startup.adapter += t.elapsed().as_secs_f64();
        if adapters.is_empty() {
            inst = gl;
        }
        adapters.extend(more);
    }
    let seen: Vec<String> = adapters
        .iter()
        .map(|a| {
            let i = a.get_info();
            format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
        })
        .collect();
    let rank = |a: &wgpu::Adapter| {
        let i = a.get_info();
        adapter_rank(is_software(&i), i.backend, i.device_type)
    };
    if let Some(want) = &opts.adapter {
        return pick_named(inst, adapters, want, &seen);
    }
    let best = adapters
        .into_iter()
        .filter(|a| opts.allow_software || !is_software(&a.get_info()))
        .min_by_key(|a| rank(a));
    match best {
        Some(a) => Ok((inst, a)),
        None => Err(EngineError::NoAdapter(format!(
            "wgpu found {} on backends {:?}{}. Install a GPU driver with Vulkan (or Metal/DX12) \
             support; without a GPU, Mesa's software Vulkan driver works too \
             (Debian/Ubuntu: apt-get install mesa-vulkan-drivers libvulkan1)",
            if seen.is_empty() {
                "no adapter".to_string()
            } else {
                format!("only software adapters [{}]", seen.join(", "))
            },
            backends,
            if opts.allow_software {
                ""
            } else {
                " (software adapters were not asked for)"
            }
        ))),
    }
}

/// The adapter `--adapter` names: an index into the adapters as listed, or a part of one name
/// (any case; several matches are an error that lists them).
fn pick_named(
    inst: wgpu::Instance,
    adapters: Vec<wgpu::Adapter>,
    want: &str,
    seen: &[String],
) -> Result<(wgpu::Instance, wgpu::Adapter), EngineError> {
    let listed = || {
        if seen.is_empty() {
            "wgpu found no adapter".to_string()
        } else {
            let all: Vec<String> = seen
                .iter()
                .enumerate()
                .map(|(i, s)| format!("[{i}] {s}"))
                .collect();
            format!("the adapters are {}", all.join(", "))
        }
    };
    if let Ok(i) = want.parse::<usize>() {
        return match adapters.into_iter().nth(i) {
            Some(a) => Ok((inst, a)),
            None => Err(EngineError::NoAdapter(format!(
                "--adapter {i}: there is no adapter {i}; {}",
                listed()
            ))),
        };
    }
    let needle = want.to_lowercase();
    let mut hits: Vec<(usize, wgpu::Adapter)> = adapters
        .into_iter()
        .enumerate()
        .filter(|(_, a)| a.get_info().name.to_lowercase().contains(&needle))
        .collect();
    match hits.len() {
        1 => Ok((inst, hits.remove(0).1)),
        0 => Err(EngineError::NoAdapter(format!(
            "--adapter {want:?} names no adapter; {}",
            listed()
        ))),
        _ => {
            let which: Vec<String> = hits.iter().map(|(i, _)| seen[*i].clone()).collect();
            Err(EngineError::NoAdapter(format!(
                "--adapter {want:?} names {} adapters ({}): give its index instead",
                hits.len(),
                which.join(", ")
            )))
        }
    }
}

/// Most word bytes of a sub-batch sized by its input: the buffers, the ring's three slots and
/// the chunks being tokenized hold about 20 times a sub-batch (on a software adapter all of it
/// in the process's memory), and at this size a sub-batch is still over a million shingles.
pub const INPUT_SIZED_MAX: usize = 8 << 20;

/// [`INPUT_SIZED_MAX`] on a software adapter, whose device buffers are the process's own
/// memory: half, and there a sub-batch covers a 24th of the input, not a twelfth, which halves
/// the buffers' share of peak RSS at no cost in speed (docs/BENCHMARKS.md, "Software adapters:
/// sub-batches of a 24th of the input").
pub const SOFTWARE_SIZED_MAX: usize = 4 << 20;

/// The word bytes of a sub-batch for `input` bytes of input (when known), at most `cap`: about
/// a twelfth of the input (a 24th on a `software` adapter), so that the ring and the chunks
/// being tokenized hold a part of the input, never all of it, rounded up to a power of two, at
/// least 1 MiB and at most [`INPUT_SIZED_MAX`] ([`SOFTWARE_SIZED_MAX`] on a software
/// adapter). Buffers follow: a small input does not pay for (nor, on a software adapter, hold
/// in memory) buffers it cannot fill. Without a known size: `cap`.
pub fn batch_bytes_for(cap: usize, input: Option<u64>, software: bool) -> usize {
    let (most, share) = if software {
        (SOFTWARE_SIZED_MAX, 24)
    } else {
        (INPUT_SIZED_MAX, 12)
    };
    match input {
        None => cap,
        Some(n) => {
            let part = usize::try_from(n / share).unwrap_or(usize::MAX);
            part.max(1 << 20)
                .checked_next_power_of_two()
                .unwrap_or(usize::MAX)
                .min(most)
                .min(cap)
        }
    }
}

/// The GPU engine. Everything it allocates is made in [`GpuEngine::new`] and reused.
///
/// It signs a job's parts without joining them ([`plan`]), keeps up to [`ring::RING`]
/// sub-batches in flight, and, through [`StreamSigner`], several jobs: a run hands in chunk
/// after chunk and gets each back signed, in order, while the GPU works on the next ones.
pub struct GpuEngine {
    params: MinHashParams,
    ref_perms: PermParams,
    adapter: AdapterSummary,
    limits: SubBatchLimits,
    ring: Ring,
    /// Jobs handed in through [`StreamSigner::submit`] and not handed back yet, oldest first.
    stream: VecDeque<StreamJob>,
    /// The number of the oldest job in `stream`.
    stream_front: u64,
    /// Set by the first error of a stream: the engine's state is then unknown, and it refuses
    /// further work with this message.
    broken: Option<String>,
    /// Documents signed on the host because one of their shingles outgrew a sub-batch or
    /// [`plan::MAX_SHINGLE_BYTES`].
    pub host_docs: u64,
    /// The parts of finished jobs, for the next chunks to tokenize into: as many as the stream
    /// holds at once (the ring's jobs, the one being prepared and the one handed over), kept
    /// while the engine lives, so a later run starts warm too.
    spare_parts: std::sync::Arc<crate::batch::SpareParts>,
    /// Whether the shaders run on native 64-bit integers ([`GpuOptions::int64`]).
    int64: bool,
    /// What the start-up cost, step by step.
    startup: StartupSeconds,
}

/// A job of the stream, with its plan and how far it has come.
struct StreamJob {
    job: SignJob,
    plan: plan::Plan,
    /// Sub-batches submitted, and of those, not read back yet.
    submitted: usize,
    outstanding: usize,
}

impl GpuEngine {
    /// Find an adapter, build the pipelines and buffers.
    pub fn new(params: MinHashParams, opts: &GpuOptions) -> Result<Self, crate::error::Error> {
        params.validate()?;
        let mut startup = StartupSeconds::default();
        let (_instance, adapter) = pick_adapter(opts, &mut startup)?;
        let summary = summarize(&adapter);
        let cache_path = match opts.cache.resolve() {
            Some(dir) if adapter.features().contains(wgpu::Features::PIPELINE_CACHE) => {
                let what = format!(
                    "{:?}{}",
                    opts.kernels,
                    if opts.int64 { "+int64" } else { "" }
                );
                let sources = [
                    shaders::U64,
                    shaders::U64_NATIVE,
                    shaders::BINDINGS,
                    shaders::HASH,
                    shaders::MINHASH,
                    shaders::FUSED,
                ];
                cache::file_name(&adapter.get_info(), &sources, &what).map(|n| dir.join(n))
            }
            _ => None,
        };
        let alimits = adapter.limits();
        let profile = opts.profile && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        if opts.int64 && !summary.shader_int64 {
            return Err(EngineError::Gpu(format!(
                "{} has no 64-bit shader integers (SHADER_INT64): leave out --gpu-int64",
                summary.name
            ))
            .into());
        }
        let mut required_features = wgpu::Features::empty();
        if profile {
            required_features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        if opts.int64 {
            required_features |= wgpu::Features::SHADER_INT64;
        }
        if cache_path.is_some() {
            required_features |= wgpu::Features::PIPELINE_CACHE;
        }
        let t = std::time::Instant::now();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("neardup"),
            required_features,
            required_limits: alimits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| EngineError::Gpu(format!("cannot open {}: {e}", summary.name)))?;
        startup.device = t.elapsed().as_secs_f64();
        let errors: Arc<Mutex<Option<String>>> = Arc::default();
        {
            let errors = errors.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                let mut slot = errors.lock().expect("not poisoned");
                if slot.is_none() {
                    *slot = Some(e.to_string());
                }
            }));
        }
        let max_binding = alimits
            .max_storage_buffer_binding_size
            .min(alimits.max_buffer_size);
        let limits = SubBatchLimits::new(
            max_binding,
            params.num_perm,
            match opts.input_sized {
                true => batch_bytes_for(opts.batch_bytes, opts.input_bytes, summary.software),
                false => opts.batch_bytes,
            },
        );

        let t = std::time::Instant::now();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = |label: &str, src: String| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            })
        };
        let prelude = if opts.int64 {
            shaders::U64_NATIVE
        } else {
            shaders::U64
        };
        let hash_mod = module("hash.wgsl", shaders::composed_with(prelude, shaders::HASH));
        let min_mod = module(
            "minhash.wgsl",
            shaders::composed_with(prelude, shaders::MINHASH),
        );
        let fused_mod = (opts.kernels == Kernels::Fused).then(|| {
            module(
                "fused.wgsl",
                shaders::composed_with(prelude, shaders::FUSED),
            )
        });
        startup.shaders = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let (kept, cache_use) = match &cache_path {
            Some(p) => cache::read(p),
            None => (None, CacheUse::None),
        };
        startup.cache_use = cache_use;
        let pipeline_cache = cache_path.as_ref().map(|_| {
            // SAFETY: `kept` is what `get_data` returned for an adapter of the same
            // `pipeline_cache_key` (the file's name holds it), sealed with a checksum since;
            // with `fallback`, data the driver does not take gives an empty cache.
            unsafe {
                device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                    label: Some("neardup pipelines"),
                    data: kept.as_deref(),
                    fallback: true,
                })
            }
        });
        startup.cache = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();

        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("neardup bindings"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                },
                storage(1, true),
                storage(2, true),
                storage(3, true),
                storage(4, false),
                storage(5, true),
                storage(6, true),
                storage(7, false),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("neardup"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = |m: &wgpu::ShaderModule, entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                module: m,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: pipeline_cache.as_ref(),
            })
        };
        let init_pipeline = pipeline(&min_mod, "init_signatures");
        let hash_pipeline = pipeline(&hash_mod, "hash_shingles");
        let min_pipeline = match &fused_mod {
            None => pipeline(&min_mod, "minhash"),
            Some(fused) => pipeline(fused, "minhash_fused"),
        };
        startup.pipelines = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        if let (Some(c), Some(path)) = (&pipeline_cache, &cache_path) {
            // Kept only when the driver's data changed: a warm start writes nothing. A cache
            // that cannot be written (a read-only home) costs the next run its compile, no
            // more.
            if let Some(data) = c.get_data() {
                if kept.as_deref() != Some(data.as_slice()) {
                    let _ = cache::write(path, &data);
                }
            }
        }
        startup.cache += t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();

        let buffer = |label: &str, size: usize, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: (size.max(4) as u64).next_multiple_of(4),
                usage,
                mapped_at_creation: false,
            })
        };
        let input = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let shared = ring::Shared {
            config: buffer(
                "config",
                std::mem::size_of::<GpuConfig>(),
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            ),
            bytes: buffer("bytes", limits.max_bytes, input),
            word_start: buffer("word_start", limits.max_words * 4, input),
            docs: buffer("docs", limits.max_docs * 16, input),
            chunks: buffer("chunks", limits.max_chunks * 16, input),
            sigs: buffer(
                "sigs",
                limits.max_docs * params.num_perm * 4,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            ),
        };
        let xs_buf = buffer("xs", limits.max_shingles * 4, wgpu::BufferUsages::STORAGE);
        let perms_buf = buffer("perms", params.num_perm * 8, input);
        let ref_perms = params.perms();
        queue.write_buffer(
            &perms_buf,
            0,
            bytemuck::cast_slice(&plan::interleave(&ref_perms)),
        );
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("neardup"),
            layout: &layout,
            entries: &[
                (0, &shared.config),
                (1, &shared.bytes),
                (2, &shared.word_start),
                (3, &shared.docs),
                (4, &xs_buf),
                (5, &shared.chunks),
                (6, &perms_buf),
                (7, &shared.sigs),
            ]
            .map(|(binding, b)| wgpu::BindGroupEntry {
                binding,
                resource: b.as_entire_binding(),
            }),
        });
        let ring = Ring::new(
            ring::RingParts {
                adapter: summary.name.clone(),
                backend: summary.backend.clone(),
                pipelines: [init_pipeline, hash_pipeline, min_pipeline],
                kernels: opts.kernels,
                bind_group,
                shared,
                errors,
                wait_timeout: opts.wait_timeout,
                k: params.k,
                num_perm: params.num_perm,
                device,
                queue,
            },
            &limits,
            profile,
        );
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(EngineError::Gpu(format!(
                "building the pipelines on {} failed: {e}",
                summary.name
            ))
            .into());
        }
        startup.buffers = t.elapsed().as_secs_f64();
        Ok(GpuEngine {
            params,
            ref_perms,
            adapter: summary,
            limits,
            ring,
            stream: VecDeque::new(),
            stream_front: 0,
            broken: None,
            host_docs: 0,
            spare_parts: std::sync::Arc::new(crate::batch::SpareParts::new(
                crate::batch::pieces_per_chunk() * (ring::RING + 3),
            )),
            int64: opts.int64,
            startup,
        })
    }

    /// What this engine's start-up cost, step by step.
    pub fn startup(&self) -> &StartupSeconds {
        &self.startup
    }

    /// The adapter in use.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.adapter
    }

    /// Whether kernel times are being measured (profiling asked for, supported, and on).
    pub fn profiling(&self) -> bool {
        self.ring.timing.is_some() && self.ring.timing_on
    }

    /// Turn kernel timing off and on again (an engine built with profiling starts with it on).
    /// With it off, the three passes are one compute pass without timestamps and sub-batches
    /// overlap, so a benchmark can time the engine as a run uses it, then turn timing on for
    /// the per-kernel figures.
    pub fn set_profiling(&mut self, on: bool) {
        self.ring.timing_on = on;
    }

    /// Run the kernels (the default), or leave them out: everything else (plan, fill, uploads,
    /// readback) runs as usual and the signatures are meaningless. `bench` measures the host's
    /// own cost this way, without a software adapter's threads competing for the same cores.
    pub fn set_kernels(&mut self, on: bool) {
        self.ring.kernels_on = on;
    }

    /// With profiling: GPU seconds spent in `init_signatures`, `hash_shingles` and `minhash`.
    pub fn kernel_seconds(&self) -> [f64; 3] {
        self.ring.kernel_seconds
    }

    /// Set the kernel seconds back to zero.
    pub fn reset_kernel_seconds(&mut self) {
        self.ring.kernel_seconds = [0.0; 3];
    }

    /// Wall seconds of the host's own stages so far (plan, fill, submit, wait, readback).
    pub fn host_seconds(&self) -> HostSeconds {
        self.ring.host
    }

    /// Sub-batches dispatched so far.
    pub fn sub_batches(&self) -> u64 {
        self.ring.sub_batches
    }

    /// The sub-batch limits derived from the device.
    pub fn limits(&self) -> &SubBatchLimits {
        &self.limits
    }

    fn check_usable(&self) -> Result<(), EngineError> {
        match &self.broken {
            Some(e) => Err(EngineError::Gpu(format!(
                "the GPU engine stopped after an earlier error: {e}"
            ))),
            None => Ok(()),
        }
    }

    /// Plan `parts`, set the fragments' rows to `P` and sign the host's documents, into `out`.
    fn prepare(&mut self, parts: &[PackedBatch], out: &mut [u32]) -> plan::Plan {
        let np = self.params.num_perm;
        let t = std::time::Instant::now();
        let p = plan::plan(parts, self.params.k, &self.limits);
        plan::init_fragment_rows(&p.subs, np, out);
        self.ring.host.plan += t.elapsed().as_secs_f64();
        p
    }

    fn sign_host_docs(&mut self, parts: &[PackedBatch], p: &plan::Plan, out: &mut [u32]) {
        if p.host_docs.is_empty() {
            return;
        }
        let t = std::time::Instant::now();
        plan::sign_on_host(parts, &p.host_docs, self.params.k, &self.ref_perms, out);
        self.host_docs += p.host_docs.len() as u64;
        self.ring.host.host_docs += t.elapsed().as_secs_f64();
    }

    /// Submit every sub-batch of the stream's jobs not submitted yet, reading back the oldest
    /// whenever the ring is full.
    fn pump(&mut self) -> Result<(), EngineError> {
        for j in 0..self.stream.len() {
            while self.stream[j].submitted < self.stream[j].plan.subs.len() {
                while self.ring.full() {
                    self.collect_oldest_job()?;
                }
                let sj = &mut self.stream[j];
                let job = self.stream_front + j as u64;
                self.ring
                    .submit(&sj.plan.subs[sj.submitted], &sj.job.parts, job)?;
                sj.submitted += 1;
                sj.outstanding += 1;
            }
        }
        Ok(())
    }

    fn collect_oldest_job(&mut self) -> Result<(), EngineError> {
        let Some(job) = self.ring.oldest_job() else {
            return Ok(());
        };
        let sj = &mut self.stream[(job - self.stream_front) as usize];
        self.ring.collect_oldest(&mut sj.job.sigs)?;
        sj.outstanding -= 1;
        Ok(())
    }

    /// The jobs at the front that are fully signed, in order.
    fn pop_done(&mut self) -> Vec<SignJob> {
        let mut out = Vec::new();
        while let Some(f) = self.stream.front() {
            if f.submitted < f.plan.subs.len() || f.outstanding > 0 {
                break;
            }
            out.push(self.stream.pop_front().expect("a front").job);
            self.stream_front += 1;
        }
        out
    }

    /// Plan chunk `i` of [`Engine::sign_texts`] (its parts tokenized), submit its sub-batches
    /// (reading back older ones whenever the ring is full) and sign its host documents.
    fn submit_chunk(
        &mut self,
        i: usize,
        parts: &[PackedBatch],
        chunks: &[(usize, usize)],
        out: &mut [u32],
    ) -> Result<(), EngineError> {
        let np = self.params.num_perm;
        let (start, end) = chunks[i];
        let p = self.prepare(parts, &mut out[start * np..end * np]);
        for sub in &p.subs {
            while self.ring.full() {
                self.collect_oldest_chunk(chunks, out)?;
            }
            self.ring.submit(sub, parts, i as u64)?;
        }
        // The host's documents are signed while the GPU works.
        self.sign_host_docs(parts, &p, &mut out[start * np..end * np]);
        Ok(())
    }

    /// Read the oldest sub-batch in flight back into the rows of its chunk.
    fn collect_oldest_chunk(
        &mut self,
        chunks: &[(usize, usize)],
        out: &mut [u32],
    ) -> Result<(), EngineError> {
        let Some(i) = self.ring.oldest_job() else {
            return Ok(());
        };
        let np = self.params.num_perm;
        let (start, end) = chunks[i as usize];
        self.ring.collect_oldest(&mut out[start * np..end * np])
    }

    /// Record the first error of a stream, and drop its jobs.
    fn fail<T>(&mut self, e: EngineError) -> Result<T, EngineError> {
        self.broken = Some(e.to_string());
        self.stream.clear();
        Err(e)
    }
}

impl StreamSigner for GpuEngine {
    fn submit(&mut self, mut job: SignJob) -> Result<Vec<SignJob>, EngineError> {
        self.check_usable()?;
        let docs: usize = job.parts.iter().map(|b| b.num_docs()).sum();
        super::check_rows(docs, self.params.num_perm, &job.sigs)?;
        let plan = self.prepare(&job.parts, &mut job.sigs);
        self.sign_host_docs(&job.parts, &plan, &mut job.sigs);
        self.stream.push_back(StreamJob {
            job,
            plan,
            submitted: 0,
            outstanding: 0,
        });
        match self.pump() {
            Ok(()) => Ok(self.pop_done()),
            Err(e) => self.fail(e),
        }
    }

    fn finish(&mut self) -> Result<Vec<SignJob>, EngineError> {
        self.check_usable()?;
        let r = self.pump().and_then(|()| {
            while !self.ring.idle() {
                self.collect_oldest_job()?;
            }
            Ok(())
        });
        match r {
            Ok(()) => Ok(self.pop_done()),
            Err(e) => self.fail(e),
        }
    }

    fn spare_parts(&self) -> Option<std::sync::Arc<crate::batch::SpareParts>> {
        Some(self.spare_parts.clone())
    }
}

impl Engine for GpuEngine {
    fn params(&self) -> &MinHashParams {
        &self.params
    }

    fn info(&self) -> EngineInfo {
        EngineInfo {
            kind: "gpu",
            detail: format!(
                "{} via {}{}{}{}",
                self.adapter.name,
                self.adapter.backend,
                if self.adapter.software {
                    ", software"
                } else {
                    ""
                },
                match self.ring.dev.kernels {
                    Kernels::Split => "",
                    Kernels::Fused => ", fused kernels",
                },
                if self.int64 {
                    ", native 64-bit integers"
                } else {
                    ""
                }
            ),
            auto: None,
        }
    }

    fn preferred_chunk_bytes(&self) -> usize {
        // Raw JSONL is a little larger than its word bytes; aim at about one sub-batch (which
        // follows the input's size where it is known, so a small input keeps fewer bytes of
        // tokenized chunks in flight).
        self.limits.max_bytes.clamp(1 << 20, 64 << 20)
    }

    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError> {
        self.sign_parts(std::slice::from_ref(batch), out)
    }

    /// Texts in chunks of about one sub-batch of bytes, each tokenized in pieces on the pool
    /// (into the engine's spare parts) while the previous one is submitted; the ring stays
    /// full from one chunk to the next, and rows are read straight into `out`.
    fn sign_texts(&mut self, texts: &[&str], out: &mut [u32]) -> Result<(), EngineError> {
        self.check_usable()?;
        let np = self.params.num_perm;
        super::check_rows(texts.len(), np, out)?;
        if texts.is_empty() {
            return Ok(());
        }
        if !self.stream.is_empty() {
            return Err(EngineError::Gpu(
                "sign called while streamed jobs are in flight: finish the stream first".into(),
            ));
        }
        let total: usize = texts.iter().map(|t| t.len() + 1).sum();
        let chunks = super::split_lens(texts, total.div_ceil(self.limits.max_bytes));
        let (spare, rule) = (self.spare_parts.clone(), self.params.rule());
        let tokenize = |(start, end): (usize, usize)| -> Vec<PackedBatch> {
            use rayon::prelude::*;
            let texts = &texts[start..end];
            super::split_lens(texts, crate::batch::pieces_per_chunk())
                .into_par_iter()
                .map(|(a, b)| {
                    let mut part = spare.take(rule);
                    part.reserve_for(texts[a..b].iter().map(|t| t.len() + 1).sum(), b - a);
                    for t in &texts[a..b] {
                        part.push_text(t);
                    }
                    part
                })
                .collect()
        };
        let r = (|| {
            let mut next = Some(tokenize(chunks[0]));
            for i in 0..chunks.len() {
                let parts = next
                    .take()
                    .expect("each chunk is tokenized before it is signed");
                let following = chunks.get(i + 1).copied();
                let (submitted, tokenized) = rayon::join(
                    || self.submit_chunk(i, &parts, &chunks, out),
                    || following.map(&tokenize),
                );
                // Submitted sub-batches were copied into staging: the parts are free again.
                spare.give(parts);
                submitted?;
                next = tokenized;
            }
            while !self.ring.idle() {
                self.collect_oldest_chunk(&chunks, out)?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn sign_parts(&mut self, parts: &[PackedBatch], out: &mut [u32]) -> Result<(), EngineError> {
        self.check_usable()?;
        let docs: usize = parts.iter().map(|b| b.num_docs()).sum();
        super::check_rows(docs, self.params.num_perm, out)?;
        if docs == 0 {
            return Ok(());
        }
        if !self.stream.is_empty() {
            return Err(EngineError::Gpu(
                "sign called while streamed jobs are in flight: finish the stream first".into(),
            ));
        }
        let p = self.prepare(parts, out);
        let r = (|| {
            for sub in &p.subs {
                while self.ring.full() {
                    self.ring.collect_oldest(out)?;
                }
                self.ring.submit(sub, parts, 0)?;
            }
            // The host's documents are signed while the GPU works.
            self.sign_host_docs(parts, &p, out);
            while !self.ring.idle() {
                self.ring.collect_oldest(out)?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn streamer(&mut self) -> Option<&mut dyn StreamSigner> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::adapter_rank;
    use wgpu::{Backend, DeviceType};

    #[test]
    fn hardware_and_native_apis_rank_first() {
        let order = [
            (false, Backend::Vulkan, DeviceType::DiscreteGpu),
            (false, Backend::Metal, DeviceType::IntegratedGpu),
            (false, Backend::Dx12, DeviceType::VirtualGpu),
            (false, Backend::Vulkan, DeviceType::Other),
            (false, Backend::Gl, DeviceType::DiscreteGpu),
            (false, Backend::Gl, DeviceType::IntegratedGpu),
            (true, Backend::Vulkan, DeviceType::Cpu),
            (true, Backend::Gl, DeviceType::Cpu),
        ];
        let ranks: Vec<u8> = order
            .iter()
            .map(|&(s, b, t)| adapter_rank(s, b, t))
            .collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
        // A GL view of a discrete GPU never beats a Vulkan view of any hardware GPU.
        assert!(
            adapter_rank(false, Backend::Vulkan, DeviceType::Other)
                < adapter_rank(false, Backend::Gl, DeviceType::DiscreteGpu)
        );
        // A CPU device type is software whatever its name says.
        assert_eq!(
            adapter_rank(false, Backend::Vulkan, DeviceType::Cpu),
            adapter_rank(true, Backend::Vulkan, DeviceType::Cpu)
        );
    }
}
