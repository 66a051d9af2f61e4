//! The device side of the GPU engine: the pipelines, the buffers the shaders bind, and a ring of
//! [`RING`] upload/readback slots, so that the host fills sub-batch N+1 and reads back N-1 while
//! the GPU signs N.
//!
//! Each slot has a staging buffer (mapped for writing: [`plan::fill`] lays the sub-batch straight
//! into it, its pieces on several threads) and a readback buffer (mapped for reading: rows are
//! copied straight into the caller's signature matrix). The buffers the shaders bind are shared
//! by the slots: one queue runs the submissions in order, and each submission copies its inputs
//! in before its dispatches and its signatures out after them.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::plan::{self, SubBatchLimits, SubPlan};
use super::GpuConfig;
use crate::batch::PackedBatch;
use crate::engine::EngineError;

/// Slots in the ring: sub-batches that may be in flight at once.
pub const RING: usize = 3;

/// Timestamps: the beginning and end of each of the three passes.
const TIMESTAMPS: u32 = 6;

/// Bytes of a staging buffer: the configuration block, then word bytes, word starts,
/// documents and chunks, each at its largest. A sub-batch packs its regions one after the other
/// from the start, and maps only what it uses (wgpu zeroes a range the first time it is mapped,
/// so mapping all of a large buffer would fault in memory a small sub-batch never needs).
fn staging_bytes(l: &SubBatchLimits) -> u64 {
    let lens = [
        l.max_bytes.next_multiple_of(4),
        l.max_words * 4,
        l.max_docs * 16,
        l.max_chunks * 16,
    ];
    (CONFIG_BYTES + lens.iter().sum::<usize>()).next_multiple_of(8) as u64
}

/// Bytes of the configuration block at the start of an upload.
const CONFIG_BYTES: usize = std::mem::size_of::<GpuConfig>();

/// Copy signature rows from mapped memory (little-endian u32) into `dst`, or min-merge them
/// into it for a fragment; in pieces on the pool, so that the thread driving the GPU is not the
/// one copying.
fn read_rows(src: &[u8], dst: &mut [u32], fragment: bool) {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 15;
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE * 4))
        .for_each(|(d, s)| {
            if fragment {
                for (d, b) in d.iter_mut().zip(s.chunks_exact(4)) {
                    let v = u32::from_le_bytes(b.try_into().expect("four bytes"));
                    *d = (*d).min(v);
                }
            } else {
                bytemuck::cast_slice_mut::<u32, u8>(d).copy_from_slice(s);
                if cfg!(target_endian = "big") {
                    for v in d.iter_mut() {
                        *v = u32::from_le(*v);
                    }
                }
            }
        });
}

/// The first `n` bytes of `r`.
fn cut(r: wgpu::WriteOnly<'_, [u8]>, n: usize) -> wgpu::WriteOnly<'_, [u8]> {
    r.split_at(n).0
}

/// What a slot's submission is signing, for its readback.
struct Pending {
    submission: wgpu::SubmissionIndex,
    readback: Receiver<Result<(), wgpu::BufferAsyncError>>,
    /// The first row of the caller's matrix, the rows, and whether they are min-merged.
    first_target: u32,
    docs: u32,
    fragment: bool,
    /// The caller's tag (the stream's job number).
    pub job: u64,
    timed: bool,
}

struct Slot {
    staging: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// The slot's last submission.
    last: Option<wgpu::SubmissionIndex>,
    pending: Option<Pending>,
}

/// GPU timestamps around each of the three passes.
pub struct Timing {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f64,
}

pub use crate::engine::gpu_options::HostSeconds;

/// Run `f`, adding this thread's CPU seconds in it to `sum`.
fn driver<T>(sum: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = crate::sys::threads::this_thread_cpu_seconds();
    let r = f();
    if let (Some(a), Some(b)) = (t, crate::sys::threads::this_thread_cpu_seconds()) {
        *sum += b - a;
    }
    r
}

/// The shared buffers the shaders bind.
pub struct Shared {
    pub config: wgpu::Buffer,
    pub bytes: wgpu::Buffer,
    pub word_start: wgpu::Buffer,
    pub docs: wgpu::Buffer,
    pub chunks: wgpu::Buffer,
    pub sigs: wgpu::Buffer,
}

/// The device, its pipelines and buffers, and the slots.
pub struct Ring {
    pub dev: RingParts,
    pub timing: Option<Timing>,
    /// Whether `timing` is used now.
    pub timing_on: bool,
    /// Whether the kernels run (see [`crate::GpuEngine::set_kernels`]).
    pub kernels_on: bool,
    slots: Vec<Slot>,
    next: usize,
    /// Slots with a submission, oldest first.
    inflight: VecDeque<usize>,
    pub host: HostSeconds,
    pub kernel_seconds: [f64; 3],
    pub sub_batches: u64,
}

/// Build the slots and, when asked, the timestamp queries.
fn slots_and_timing(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    limits: &SubBatchLimits,
    num_perm: usize,
    profile: bool,
) -> (Vec<Slot>, Option<Timing>) {
    let buffer = |label: &str, size: u64, usage: wgpu::BufferUsages, mapped: bool| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(8).next_multiple_of(8),
            usage,
            mapped_at_creation: mapped,
        })
    };
    let sig_bytes = (limits.max_docs * num_perm * 4) as u64;
    let slots = (0..RING)
        .map(|_| Slot {
            staging: buffer(
                "staging",
                staging_bytes(limits),
                wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                false,
            ),
            readback: buffer(
                "readback",
                sig_bytes,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                false,
            ),
            last: None,
            pending: None,
        })
        .collect();
    let timing = profile.then(|| Timing {
        queries: device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("kernel timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: TIMESTAMPS,
        }),
        resolve: buffer(
            "timestamps",
            TIMESTAMPS as u64 * 8,
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            false,
        ),
        readback: buffer(
            "timestamps readback",
            TIMESTAMPS as u64 * 8,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            false,
        ),
        period: queue.get_timestamp_period() as f64,
    });
    (slots, timing)
}

/// What [`Ring::new`] takes: the device, its pipelines (`init_signatures`, `hash_shingles`,
/// `minhash` or `minhash_fused`) and the shared buffers they bind.
pub struct RingParts {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: String,
    pub backend: String,
    pub pipelines: [wgpu::ComputePipeline; 3],
    /// Which kernels the third pipeline runs (and whether `hash_shingles` runs at all).
    pub kernels: super::Kernels,
    pub bind_group: wgpu::BindGroup,
    pub shared: Shared,
    pub errors: Arc<Mutex<Option<String>>>,
    pub wait_timeout: Duration,
    pub k: usize,
    pub num_perm: usize,
}

impl Ring {
    /// The slots for sub-batches of at most `limits`, with timestamp queries when `profile`.
    pub fn new(p: RingParts, limits: &SubBatchLimits, profile: bool) -> Self {
        let (slots, timing) = slots_and_timing(&p.device, &p.queue, limits, p.num_perm, profile);
        Ring {
            dev: p,
            timing,
            timing_on: true,
            kernels_on: true,
            slots,
            next: 0,
            inflight: VecDeque::new(),
            host: HostSeconds::default(),
            kernel_seconds: [0.0; 3],
            sub_batches: 0,
        }
    }

    fn timed(&self) -> Option<&Timing> {
        self.timing.as_ref().filter(|_| self.timing_on)
    }

    /// How many sub-batches may be in flight: one while timing (the timestamps have one
    /// readback buffer), else the whole ring.
    fn depth(&self) -> usize {
        if self.timed().is_some() {
            1
        } else {
            RING
        }
    }

    /// Whether a slot must be read back before the next submission.
    pub fn full(&self) -> bool {
        self.inflight.len() >= self.depth()
    }

    /// The job tag of the oldest submission in flight, if any.
    pub fn oldest_job(&self) -> Option<u64> {
        let s = *self.inflight.front()?;
        self.slots[s].pending.as_ref().map(|p| p.job)
    }

    fn check_errors(&self) -> Result<(), EngineError> {
        match self.dev.errors.lock().expect("not poisoned").take() {
            Some(e) => Err(EngineError::Gpu(e)),
            None => Ok(()),
        }
    }

    /// Wait for `submission` (at most the wait timeout): a device that stops answering is an
    /// error naming it.
    fn wait(&mut self, submission: Option<wgpu::SubmissionIndex>) -> Result<(), EngineError> {
        let t = Instant::now();
        let device = &self.dev.device;
        let r = driver(&mut self.host.driver_cpu, || {
            device.poll(wgpu::PollType::Wait {
                submission_index: submission,
                timeout: Some(self.dev.wait_timeout),
            })
        });
        self.host.wait += t.elapsed().as_secs_f64();
        r.map(|_| ()).map_err(|e| match e {
            wgpu::PollError::Timeout => EngineError::Gpu(format!(
                "the GPU {} ({}) did not finish a sub-batch within {:.1} s: it may have \
                 stopped answering (a slower adapter needs a longer --gpu-timeout)",
                self.dev.adapter,
                self.dev.backend,
                self.dev.wait_timeout.as_secs_f64()
            )),
            e => EngineError::Gpu(format!("waiting for the GPU {}: {e}", self.dev.adapter)),
        })
    }

    /// Map the first `used` bytes of slot `s`'s staging buffer for writing. The slot's last
    /// submission has been read back, so the buffer is idle and the mapping is ready at the
    /// next poll, which does not wait for the submissions of the other slots.
    fn map_staging(&mut self, s: usize, used: u64) -> Result<(), EngineError> {
        let t = Instant::now();
        let r = self.map_staging_now(s, used);
        self.host.map += t.elapsed().as_secs_f64();
        r
    }

    fn map_staging_now(&mut self, s: usize, used: u64) -> Result<(), EngineError> {
        let (tx, rx) = channel();
        self.slots[s]
            .staging
            .slice(..used)
            .map_async(wgpu::MapMode::Write, move |r| {
                let _ = tx.send(r);
            });
        let device = &self.dev.device;
        driver(&mut self.host.driver_cpu, || {
            let _ = device.poll(wgpu::PollType::Poll);
        });
        let r = match rx.try_recv() {
            Ok(r) => r,
            Err(_) => {
                self.wait(self.slots[s].last.clone())?;
                rx.recv()
                    .map_err(|_| EngineError::Gpu("a staging mapping was dropped".into()))?
            }
        };
        r.map_err(|e| EngineError::Gpu(format!("mapping a staging buffer: {e}")))
    }

    /// Lay `sub` of `parts` out in the next slot and submit it, tagged `job`. The slot must be
    /// free (see [`Ring::full`]).
    pub fn submit(
        &mut self,
        sub: &SubPlan,
        parts: &[PackedBatch],
        job: u64,
    ) -> Result<(), EngineError> {
        debug_assert!(!self.full());
        let s = self.next;
        debug_assert!(self.slots[s].pending.is_none());
        let (k, np) = (self.dev.k, self.dev.num_perm);
        let cfg = GpuConfig::for_plan(sub, k, np);
        let lens = sub.region_bytes();
        let mut starts = [0usize; 4];
        let mut at = CONFIG_BYTES;
        for (s, n) in starts.iter_mut().zip(lens) {
            *s = at;
            at += n;
        }
        let used = at.next_multiple_of(8) as u64;
        self.map_staging(s, used)?;
        let t = Instant::now();
        {
            let slot = &self.slots[s];
            let mut view = slot
                .staging
                .slice(..used)
                .get_mapped_range_mut()
                .map_err(|e| EngineError::Gpu(format!("writing a sub-batch: {e}")))?;
            let (mut config, rest) = view.slice(..).split_at(CONFIG_BYTES);
            config.copy_from_slice(&cfg.le_bytes());
            let (bytes, rest) = rest.split_at(lens[0]);
            let (words, rest) = rest.split_at(lens[1]);
            let (docs, rest) = rest.split_at(lens[2]);
            plan::fill(sub, parts, k, [bytes, words, docs, cut(rest, lens[3])]);
        }
        self.host.fill += t.elapsed().as_secs_f64();
        let slot = &self.slots[s];
        let t = Instant::now();
        slot.staging.unmap();

        let mut enc = self
            .dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        enc.copy_buffer_to_buffer(
            &slot.staging,
            0,
            &self.dev.shared.config,
            0,
            CONFIG_BYTES as u64,
        );
        let dsts = [
            &self.dev.shared.bytes,
            &self.dev.shared.word_start,
            &self.dev.shared.docs,
            &self.dev.shared.chunks,
        ];
        for ((dst, start), len) in dsts.iter().zip(starts).zip(lens) {
            if len > 0 {
                enc.copy_buffer_to_buffer(&slot.staging, start as u64, dst, 0, len as u64);
            }
        }
        // The fields, not `timed()`: the host timings are written while `timing` is held.
        let timing = self.timing.as_ref().filter(|_| self.timing_on);
        let mut dispatches = cfg.dispatches(self.dev.kernels);
        if !self.kernels_on {
            dispatches = [(0, 0, 0); 3];
        }
        // One pass per stage when timing (each with its own timestamps), else one for all.
        if let Some(t) = timing {
            for (i, (pipeline, (x, y, z))) in self.dev.pipelines.iter().zip(dispatches).enumerate()
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("neardup stage"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &t.queries,
                        beginning_of_pass_write_index: Some(2 * i as u32),
                        end_of_pass_write_index: Some(2 * i as u32 + 1),
                    }),
                });
                pass.set_bind_group(0, &self.dev.bind_group, &[]);
                if x > 0 {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(x, y, z);
                }
            }
            enc.resolve_query_set(&t.queries, 0..TIMESTAMPS, &t.resolve, 0);
            enc.copy_buffer_to_buffer(&t.resolve, 0, &t.readback, 0, TIMESTAMPS as u64 * 8);
        } else {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("neardup signatures"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, &self.dev.bind_group, &[]);
            for (pipeline, (x, y, z)) in self.dev.pipelines.iter().zip(dispatches) {
                if x > 0 {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(x, y, z);
                }
            }
        }
        let out_bytes = (sub.num_docs() * np * 4) as u64;
        if out_bytes > 0 {
            enc.copy_buffer_to_buffer(&self.dev.shared.sigs, 0, &slot.readback, 0, out_bytes);
        }
        let cmd = enc.finish();
        let queue = &self.dev.queue;
        let submission = driver(&mut self.host.driver_cpu, || queue.submit([cmd]));
        if let Some(t) = timing {
            t.readback.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        }
        let (tx, readback) = channel();
        if out_bytes > 0 {
            slot.readback
                .slice(..out_bytes)
                .map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
        } else {
            let _ = tx.send(Ok(()));
        }
        let timed = timing.is_some();
        let slot = &mut self.slots[s];
        slot.last = Some(submission.clone());
        slot.pending = Some(Pending {
            submission,
            readback,
            first_target: sub.first_target,
            docs: sub.size.docs,
            fragment: sub.fragment,
            job,
            timed,
        });
        self.inflight.push_back(s);
        self.next = (s + 1) % RING;
        self.sub_batches += 1;
        self.host.submit += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Wait for the oldest submission and copy its rows into `out` (the matrix of its job):
    /// copied for whole documents, min-merged for a fragment (whose row starts at `P`).
    pub fn collect_oldest(&mut self, out: &mut [u32]) -> Result<(), EngineError> {
        let Some(s) = self.inflight.pop_front() else {
            return Ok(());
        };
        let p = self.slots[s]
            .pending
            .take()
            .expect("a slot in flight has a submission");
        self.wait(Some(p.submission))?;
        let r = p
            .readback
            .try_recv()
            .map_err(|_| EngineError::Gpu("the readback did not complete".into()))?;
        r.map_err(|e| EngineError::Gpu(format!("reading signatures back: {e}")))?;
        let t = Instant::now();
        let np = self.dev.num_perm;
        let n = p.docs as usize * np;
        if n > 0 {
            let slot = &self.slots[s];
            {
                let view = slot
                    .readback
                    .slice(..(n * 4) as u64)
                    .get_mapped_range()
                    .map_err(|e| EngineError::Gpu(format!("reading signatures back: {e}")))?;
                let at = p.first_target as usize * np;
                read_rows(&view, &mut out[at..at + n], p.fragment);
            }
            slot.readback.unmap();
        }
        self.host.readback += t.elapsed().as_secs_f64();
        if p.timed {
            if let Some(t) = &self.timing {
                {
                    let view = t
                        .readback
                        .slice(..)
                        .get_mapped_range()
                        .map_err(|e| EngineError::Gpu(format!("reading timestamps: {e}")))?;
                    let ts: &[u64] = bytemuck::cast_slice(&view);
                    // Fused kernels leave the hashing pass empty: it has no time of its own.
                    let fused = self.dev.kernels == super::Kernels::Fused;
                    for (i, k) in self.kernel_seconds.iter_mut().enumerate() {
                        if !(fused && i == 1) {
                            *k += ts[2 * i + 1].saturating_sub(ts[2 * i]) as f64 * t.period * 1e-9;
                        }
                    }
                }
                t.readback.unmap();
            }
        }
        self.check_errors()
    }

    /// Whether nothing is in flight.
    pub fn idle(&self) -> bool {
        self.inflight.is_empty()
    }
}
