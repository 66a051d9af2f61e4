//! The GPU engine of a build without the `gpu` feature: the same names, and an error naming the
//! feature wherever a GPU is asked for. Nothing falls back to the CPU engine in silence.

pub use super::gpu_options::{
    AdapterSummary, BackendChoice, CacheDir, CacheUse, GpuOptions, Kernels, StartupSeconds,
    DEFAULT_WAIT_TIMEOUT,
};
use super::{Engine, EngineError, EngineInfo, SignJob, StreamSigner};
use crate::batch::PackedBatch;
use crate::sign::minhash::MinHashParams;

/// The ring's measurements, named as in a build with the feature.
pub mod ring {
    pub use crate::engine::gpu_options::HostSeconds;
}

/// What asking for the GPU engine says in this build.
pub fn missing() -> crate::error::Error {
    crate::error::Error::Feature {
        feature: "gpu",
        what: "the GPU engine".into(),
    }
}

/// No adapter is seen without the `gpu` feature.
pub fn list_adapters(_: &GpuOptions) -> Vec<AdapterSummary> {
    Vec::new()
}

/// The GPU engine, which this build cannot make: [`GpuEngine::new`] is always an error.
#[derive(Debug)]
pub enum GpuEngine {}

impl GpuEngine {
    pub fn new(_: MinHashParams, _: &GpuOptions) -> Result<Self, crate::error::Error> {
        Err(missing())
    }

    pub fn adapter(&self) -> &AdapterSummary {
        match *self {}
    }
    pub fn startup(&self) -> &StartupSeconds {
        match *self {}
    }
    pub fn profiling(&self) -> bool {
        match *self {}
    }
    pub fn set_profiling(&mut self, _: bool) {
        match *self {}
    }
    pub fn set_kernels(&mut self, _: bool) {
        match *self {}
    }
    pub fn kernel_seconds(&self) -> [f64; 3] {
        match *self {}
    }
    pub fn reset_kernel_seconds(&mut self) {
        match *self {}
    }
    pub fn host_seconds(&self) -> ring::HostSeconds {
        match *self {}
    }
}

impl Engine for GpuEngine {
    fn params(&self) -> &MinHashParams {
        match *self {}
    }
    fn info(&self) -> EngineInfo {
        match *self {}
    }
    fn sign(&mut self, _: &PackedBatch, _: &mut [u32]) -> Result<(), EngineError> {
        match *self {}
    }
}

impl StreamSigner for GpuEngine {
    fn submit(&mut self, _: SignJob) -> Result<Vec<SignJob>, EngineError> {
        match *self {}
    }
    fn finish(&mut self) -> Result<Vec<SignJob>, EngineError> {
        match *self {}
    }
}
