//! `neardup._neardup`, the native module of the `neardup` Python package: thin wrappers over
//! the `neardup` crate. The Python side (`python/neardup/`) gives them their keyword
//! arguments, docstrings and NumPy arrays; every engine call and every stage runs with the GIL
//! released. Here: the errors and the module's table; beside it, one file per concern: texts
//! in (`texts`), options (`options`), kept engines and the GIL (`engines`), progress callbacks
//! (`progress`), signatures and in-memory dedup (`memory`), protected sets (`decontam`), the
//! sharded run (`stages`).

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::ArrayStreamReader;
use arrow_array::{make_array, Array, ArrayRef, StructArray};
use arrow_schema::DataType;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyCapsule, PyDict, PyString};

use neardup::engine::gpu::Kernels;
use neardup::engine::{build_engine, Engine, EngineChoice, GpuOptions};
use neardup::io::Fields;
use neardup::ops::DedupOptions;
use neardup::options::Named;
use neardup::progress::ProgressFactory;
use neardup::stages::dedup::{DedupConfig, MemoryDocs};
use neardup::stages::sharded::{self, WorkDir};
use neardup::MinHashParams;

mod decontam;
mod engines;
mod memory;
mod options;
mod progress;
mod stages;
mod texts;

use decontam::*;
use engines::*;
use memory::*;
use options::*;
use progress::*;
use stages::*;
use texts::*;

pyo3::create_exception!(
    _neardup,
    NeardupError,
    PyException,
    "An error of neardup's, with the message its command line prints."
);

/// The CLI's message for `e`: the error, then each cause it does not already say.
fn message(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !m.contains(&text) {
            m.push_str(&format!("\n  caused by: {text}"));
        }
        src = s.source();
    }
    m
}

fn err(e: neardup::Error) -> PyErr {
    NeardupError::new_err(message(&e))
}

fn engine_err(e: neardup::engine::EngineError) -> PyErr {
    NeardupError::new_err(message(&e))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("a summary is JSON")
}

#[pymodule]
fn _neardup(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NeardupError", m.py().get_type::<NeardupError>())?;
    m.add("CONTRACT_VERSION", neardup::CONTRACT_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DECONTAM_N", neardup::stages::decontam::DEFAULT_N)?;
    m.add(
        "DECONTAM_PROTECT_SHORT",
        neardup::stages::decontam::DEFAULT_PROTECT_SHORT,
    )?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_function(wrap_pyfunction!(signatures, m)?)?;
    m.add_function(wrap_pyfunction!(dedup, m)?)?;
    m.add_function(wrap_pyfunction!(release_engines, m)?)?;
    m.add_class::<Protected>()?;
    m.add_function(wrap_pyfunction!(stage_init, m)?)?;
    m.add_function(wrap_pyfunction!(stage_shape, m)?)?;
    m.add_function(wrap_pyfunction!(stage_next, m)?)?;
    m.add_function(wrap_pyfunction!(stage_task, m)?)?;
    m.add_function(wrap_pyfunction!(stage_run, m)?)?;
    m.add_function(wrap_pyfunction!(stage_sign, m)?)?;
    m.add_function(wrap_pyfunction!(stage_rank, m)?)?;
    m.add_function(wrap_pyfunction!(stage_rank_step, m)?)?;
    m.add_function(wrap_pyfunction!(stage_cluster_step, m)?)?;
    m.add_function(wrap_pyfunction!(stage_bands, m)?)?;
    m.add_function(wrap_pyfunction!(stage_confirm, m)?)?;
    m.add_function(wrap_pyfunction!(stage_confirm_group, m)?)?;
    m.add_function(wrap_pyfunction!(stage_greedy_round, m)?)?;
    m.add_function(wrap_pyfunction!(stage_greedy_settle, m)?)?;
    m.add_function(wrap_pyfunction!(stage_cluster, m)?)?;
    m.add_function(wrap_pyfunction!(stage_apply, m)?)?;
    m.add_function(wrap_pyfunction!(stage_report, m)?)?;
    m.add_function(wrap_pyfunction!(stage_verdicts, m)?)?;
    m.add_function(wrap_pyfunction!(stage_removed, m)?)?;
    m.add_function(wrap_pyfunction!(expand_inputs, m)?)?;
    Ok(())
}
