//! The GPU engine: WGSL compute shaders through wgpu (Vulkan, Metal, DX12, GL).
//!
//! Three dispatches per sub-batch: `init_signatures` (every entry `P`), `hash_shingles` (one
//! invocation per shingle: FNV-1a 64 with emulated 64-bit arithmetic, reduced mod P) and
//! `minhash` (one workgroup per chunk of at most 256 shingles and 64 permutations, merged with
//! `atomicMin`). Pipelines, the bind group and every buffer are made once, at their largest,
//! and reused for every batch; a batch is cut into sub-batches that fit them ([`plan`]).
//!
//! The host keeps tokenizing the next chunk while the GPU signs this one (see
//! [`crate::pipeline`]), so on a real GPU the pipeline is bound by host tokenization.

pub mod plan;
pub mod ports;
pub mod shaders;

use std::sync::{Arc, Mutex};

use bytemuck::{Pod, Zeroable};

use self::plan::{SubBatch, SubBatchLimits};
use super::{check_output, Engine, EngineError, EngineInfo};
use crate::batch::PackedBatch;
use crate::hash::PermParams;
use crate::sign::minhash::MinHashParams;

/// The uniform block of every shader. Mirrors `struct Config` in `shaders/hash.wgsl` and
/// `shaders/minhash.wgsl`; keep the three in step (field order and size).
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
    /// The configuration of one sub-batch.
    pub fn for_sub_batch(sb: &SubBatch, k: usize, num_perm: usize) -> Self {
        let num_docs = sb.num_docs() as u32;
        GpuConfig {
            k: k as u32,
            num_docs,
            num_shingles: sb.num_shingles,
            num_perm: num_perm as u32,
            num_chunks: sb.chunks.len() as u32,
            hash_groups_x: grid(sb.num_shingles.div_ceil(HASH_WG)).0,
            min_groups_x: grid(sb.chunks.len() as u32).0,
            init_groups_x: grid((num_docs * num_perm as u32).div_ceil(HASH_WG)).0,
        }
    }
}

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
    /// (any case); `None`: the best one (see [`adapter_rank`]). A named adapter is taken
    /// whatever its kind, a software one included.
    pub adapter: Option<String>,
    /// The longest wait for one sub-batch's results: a device that stops answering is then an
    /// error naming the adapter, never a hang.
    pub wait_timeout: std::time::Duration,
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
/// when allowed).
fn pick_adapter(opts: &GpuOptions) -> Result<(wgpu::Instance, wgpu::Adapter), EngineError> {
    let backends = opts.backends();
    let inst = instance(backends);
    let adapters = pollster::block_on(inst.enumerate_adapters(backends));
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

/// The GPU engine. Everything it allocates is made in [`GpuEngine::new`] and reused.
pub struct GpuEngine {
    params: MinHashParams,
    ref_perms: PermParams,
    adapter: AdapterSummary,
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: SubBatchLimits,
    init_pipeline: wgpu::ComputePipeline,
    hash_pipeline: wgpu::ComputePipeline,
    min_pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    config_buf: wgpu::Buffer,
    bytes_buf: wgpu::Buffer,
    word_start_buf: wgpu::Buffer,
    docs_buf: wgpu::Buffer,
    chunks_buf: wgpu::Buffer,
    sigs_buf: wgpu::Buffer,
    readback: wgpu::Buffer,
    errors: Arc<Mutex<Option<String>>>,
    timing: Option<Timing>,
    /// Whether `timing` is used now (see [`GpuEngine::set_profiling`]).
    timing_on: bool,
    /// The longest wait for one sub-batch ([`GpuOptions::wait_timeout`]).
    wait_timeout: std::time::Duration,
    /// Documents signed on the host because one of their shingles outgrew a sub-batch or
    /// [`plan::MAX_SHINGLE_BYTES`].
    pub host_docs: u64,
    /// Sub-batches dispatched.
    pub sub_batches: u64,
    /// With profiling: GPU seconds spent in `init_signatures`, `hash_shingles` and `minhash`.
    pub kernel_seconds: [f64; 3],
}

/// GPU timestamps around each of the three passes.
struct Timing {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f64,
}

const TIMESTAMPS: u32 = 6;

impl GpuEngine {
    /// Find an adapter, build the pipelines and buffers.
    pub fn new(params: MinHashParams, opts: &GpuOptions) -> Result<Self, crate::Error> {
        params.validate()?;
        let (_instance, adapter) = pick_adapter(opts)?;
        let summary = summarize(&adapter);
        let alimits = adapter.limits();
        let profile = opts.profile && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("neardup"),
            required_features: if profile {
                wgpu::Features::TIMESTAMP_QUERY
            } else {
                wgpu::Features::empty()
            },
            required_limits: alimits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| EngineError::Gpu(format!("cannot open {}: {e}", summary.name)))?;
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
        let limits = SubBatchLimits::new(max_binding, params.num_perm, opts.batch_bytes);

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = |label: &str, src: String| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            })
        };
        let hash_mod = module("hash.wgsl", shaders::composed(shaders::HASH));
        let min_mod = module("minhash.wgsl", shaders::composed(shaders::MINHASH));

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
                cache: None,
            })
        };
        let init_pipeline = pipeline(&min_mod, "init_signatures");
        let hash_pipeline = pipeline(&hash_mod, "hash_shingles");
        let min_pipeline = pipeline(&min_mod, "minhash");

        let buffer = |label: &str, size: usize, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: (size.max(4) as u64).next_multiple_of(4),
                usage,
                mapped_at_creation: false,
            })
        };
        let input = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let config_buf = buffer(
            "config",
            std::mem::size_of::<GpuConfig>(),
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        let bytes_buf = buffer("bytes", limits.max_bytes, input);
        let word_start_buf = buffer("word_start", (limits.max_words + 1) * 4, input);
        let docs_buf = buffer("docs", (limits.max_docs + 1) * 8, input);
        let xs_buf = buffer("xs", limits.max_shingles * 4, wgpu::BufferUsages::STORAGE);
        let chunks_buf = buffer("chunks", limits.max_chunks * 16, input);
        let perms_buf = buffer("perms", params.num_perm * 8, input);
        let sig_bytes = limits.max_docs * params.num_perm * 4;
        let sigs_buf = buffer(
            "sigs",
            sig_bytes,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        );
        let readback = buffer(
            "readback",
            sig_bytes,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let ref_perms = params.perms();
        queue.write_buffer(
            &perms_buf,
            0,
            bytemuck::cast_slice(&ports::interleave(&ref_perms)),
        );
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("neardup"),
            layout: &layout,
            entries: &[
                (0, &config_buf),
                (1, &bytes_buf),
                (2, &word_start_buf),
                (3, &docs_buf),
                (4, &xs_buf),
                (5, &chunks_buf),
                (6, &perms_buf),
                (7, &sigs_buf),
            ]
            .map(|(binding, b)| wgpu::BindGroupEntry {
                binding,
                resource: b.as_entire_binding(),
            }),
        });
        let timing = profile.then(|| Timing {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kernel timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: TIMESTAMPS,
            }),
            resolve: buffer(
                "timestamps",
                TIMESTAMPS as usize * 8,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(
                "timestamps readback",
                TIMESTAMPS as usize * 8,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            period: queue.get_timestamp_period() as f64,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(EngineError::Gpu(format!(
                "building the pipelines on {} failed: {e}",
                summary.name
            ))
            .into());
        }
        Ok(GpuEngine {
            params,
            ref_perms,
            adapter: summary,
            device,
            queue,
            limits,
            init_pipeline,
            hash_pipeline,
            min_pipeline,
            bind_group,
            config_buf,
            bytes_buf,
            word_start_buf,
            docs_buf,
            chunks_buf,
            sigs_buf,
            readback,
            errors,
            timing,
            timing_on: true,
            host_docs: 0,
            wait_timeout: opts.wait_timeout,
            sub_batches: 0,
            kernel_seconds: [0.0; 3],
        })
    }

    /// The adapter in use.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.adapter
    }

    /// Whether kernel times are being measured (profiling asked for, supported, and on).
    pub fn profiling(&self) -> bool {
        self.timing.is_some() && self.timing_on
    }

    /// Turn kernel timing off and on again (an engine built with profiling starts with it on).
    /// With it off, the three passes are one compute pass without timestamps, so a benchmark
    /// can time the engine as a run uses it, then turn timing on for the per-kernel figures.
    pub fn set_profiling(&mut self, on: bool) {
        self.timing_on = on;
    }

    /// The sub-batch limits derived from the device.
    pub fn limits(&self) -> &SubBatchLimits {
        &self.limits
    }

    fn check_errors(&self) -> Result<(), EngineError> {
        match self.errors.lock().expect("not poisoned").take() {
            Some(e) => Err(EngineError::Gpu(e)),
            None => Ok(()),
        }
    }

    /// Run one sub-batch and return its signature rows.
    fn run_sub_batch(&mut self, sb: &SubBatch, rows: &mut Vec<u32>) -> Result<(), EngineError> {
        let np = self.params.num_perm;
        let cfg = GpuConfig::for_sub_batch(sb, self.params.k, np);
        let q = &self.queue;
        q.write_buffer(&self.config_buf, 0, bytemuck::bytes_of(&cfg));
        if !sb.bytes.is_empty() {
            q.write_buffer(&self.bytes_buf, 0, bytemuck::cast_slice(&sb.bytes));
        }
        q.write_buffer(
            &self.word_start_buf,
            0,
            bytemuck::cast_slice(&sb.word_start),
        );
        q.write_buffer(&self.docs_buf, 0, bytemuck::cast_slice(&sb.docs));
        if !sb.chunks.is_empty() {
            q.write_buffer(&self.chunks_buf, 0, bytemuck::cast_slice(&sb.chunks));
        }
        let out_bytes = (sb.num_docs() * np * 4) as u64;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let init = grid((sb.num_docs() as u32 * np as u32).div_ceil(HASH_WG));
        let hash = grid(sb.num_shingles.div_ceil(HASH_WG));
        let chunks = grid(sb.chunks.len() as u32);
        let dispatches = [
            (&self.init_pipeline, (init.0, init.1, 1)),
            (&self.hash_pipeline, (hash.0, hash.1, 1)),
            (
                &self.min_pipeline,
                (chunks.0, chunks.1, (np as u32).div_ceil(PERM_WG)),
            ),
        ];
        // One pass per stage when profiling (each with its own timestamps), else one for all.
        let timing = self.timing.as_ref().filter(|_| self.timing_on);
        if let Some(t) = timing {
            for (i, (pipeline, (x, y, z))) in dispatches.iter().enumerate() {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("neardup stage"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &t.queries,
                        beginning_of_pass_write_index: Some(2 * i as u32),
                        end_of_pass_write_index: Some(2 * i as u32 + 1),
                    }),
                });
                pass.set_bind_group(0, &self.bind_group, &[]);
                if *x > 0 {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(*x, *y, *z);
                }
            }
            enc.resolve_query_set(&t.queries, 0..TIMESTAMPS, &t.resolve, 0);
            enc.copy_buffer_to_buffer(&t.resolve, 0, &t.readback, 0, TIMESTAMPS as u64 * 8);
        } else {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("neardup signatures"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, &self.bind_group, &[]);
            for (pipeline, (x, y, z)) in dispatches {
                if x > 0 {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(x, y, z);
                }
            }
        }
        enc.copy_buffer_to_buffer(&self.sigs_buf, 0, &self.readback, 0, out_bytes);
        q.submit([enc.finish()]);
        if let Some(t) = timing {
            t.readback.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        }
        let slice = self.readback.slice(..out_bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(self.wait_timeout),
            })
            .map_err(|e| match e {
                wgpu::PollError::Timeout => EngineError::Gpu(format!(
                    "the GPU {} ({}) did not finish a sub-batch within {:.1} s: it may have \
                     stopped answering (a slower adapter needs a longer --gpu-timeout)",
                    self.adapter.name,
                    self.adapter.backend,
                    self.wait_timeout.as_secs_f64()
                )),
                e => EngineError::Gpu(format!("waiting for the GPU {}: {e}", self.adapter.name)),
            })?;
        rx.recv()
            .map_err(|_| EngineError::Gpu("the readback was dropped".into()))?
            .map_err(|e| EngineError::Gpu(format!("reading signatures back: {e}")))?;
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| EngineError::Gpu(format!("reading signatures back: {e}")))?;
            rows.clear();
            rows.extend_from_slice(bytemuck::cast_slice(&view));
        }
        self.readback.unmap();
        if let Some(t) = timing {
            {
                let view = t
                    .readback
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| EngineError::Gpu(format!("reading timestamps: {e}")))?;
                let ts: &[u64] = bytemuck::cast_slice(&view);
                for (i, k) in self.kernel_seconds.iter_mut().enumerate() {
                    *k += ts[2 * i + 1].saturating_sub(ts[2 * i]) as f64 * t.period * 1e-9;
                }
            }
            t.readback.unmap();
        }
        self.sub_batches += 1;
        self.check_errors()
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
                "{} via {}{}",
                self.adapter.name,
                self.adapter.backend,
                if self.adapter.software {
                    ", software"
                } else {
                    ""
                }
            ),
        }
    }

    fn preferred_chunk_bytes(&self) -> usize {
        // Raw JSONL is a little larger than its word bytes; aim at about one sub-batch.
        self.limits.max_bytes.clamp(8 << 20, 64 << 20)
    }

    fn sign(&mut self, batch: &PackedBatch, out: &mut [u32]) -> Result<(), EngineError> {
        let np = self.params.num_perm;
        check_output(batch, np, out)?;
        if batch.is_empty() {
            return Ok(());
        }
        let p = plan::plan(batch, self.params.k, &self.limits);
        ports::init_fragment_rows(&p.subs, np, out);
        let mut rows = Vec::new();
        for sb in &p.subs {
            self.run_sub_batch(sb, &mut rows)?;
            ports::merge_rows(sb, &rows, np, out);
        }
        self.host_docs += p.host_docs.len() as u64;
        ports::sign_on_host(batch, &p.host_docs, self.params.k, &self.ref_perms, out);
        Ok(())
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
