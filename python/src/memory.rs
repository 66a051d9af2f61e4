//! Signatures and in-memory dedup.

use super::*;

/// Signatures of `texts` as native-endian u32 rows in a bytearray; with the row count and the
/// engine's description.
#[pyfunction]
#[pyo3(signature = (texts, *, k, num_perm, seed, shingle, normalize, engine, threads, column, gpu_kernels, gpu_int64))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn signatures<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
    k: usize,
    num_perm: usize,
    seed: u64,
    shingle: &str,
    normalize: &str,
    engine: &str,
    threads: usize,
    column: &str,
    gpu_kernels: &str,
    gpu_int64: bool,
) -> PyResult<(Bound<'py, PyByteArray>, usize, String)> {
    let params = neardup::ops::HashOptions {
        k,
        num_perm,
        seed,
        shingle: named(shingle)?,
        normalize: named(normalize)?,
    }
    .params()
    .map_err(err)?;
    let t = texts_of(texts, column, "texts")?;
    let strs = t.strs("texts")?;
    let n = strs.len();
    let (out, info) = detached(py, || -> PyResult<(Vec<u32>, String)> {
        with_engine(engine, params, threads, gpu_kernels, gpu_int64, |e| {
            let mut out = vec![0u32; n * num_perm];
            e.sign_texts(&strs, &mut out).map_err(engine_err)?;
            Ok((out, e.info().summary()))
        })
    })?;
    Ok((PyByteArray::new(py, bytemuck::cast_slice(&out)), n, info))
}

/// In-memory dedup: each document's root (document index, native-endian u32) and survival (a
/// byte per document), whether it is an exact duplicate, and the counts as JSON.
#[pyfunction]
#[pyo3(signature = (ids, texts, options, *, keep_values, groups, engine, threads, gpu_kernels, gpu_int64, progress = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn dedup<'py>(
    py: Python<'py>,
    ids: &Bound<'py, PyAny>,
    texts: &Bound<'py, PyAny>,
    options: &Bound<'py, PyDict>,
    keep_values: Option<Vec<Option<f64>>>,
    groups: Option<Vec<Option<String>>>,
    engine: &str,
    threads: usize,
    gpu_kernels: &str,
    gpu_int64: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<(
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    Bound<'py, PyByteArray>,
    String,
    String,
)> {
    let (cfg, _) = parse_options(options)?;
    let id_t = texts_of(ids, "id", "ids")?;
    let text_t = texts_of(texts, "text", "texts")?;
    let id_s = id_t.strs("ids")?;
    let text_s = text_t.strs("texts")?;
    let group_s: Option<Vec<Option<&str>>> = groups
        .as_ref()
        .map(|g| g.iter().map(|x| x.as_deref()).collect());
    let (c, info) = detached_with_progress(py, progress, |progress| -> PyResult<_> {
        let docs = MemoryDocs {
            ids: &id_s,
            texts: &text_s,
            keep_values: keep_values.as_deref(),
            groups: group_s.as_deref(),
        };
        with_engine(engine, cfg.params, threads, gpu_kernels, gpu_int64, |e| {
            let c = neardup::stages::dedup::cluster_docs_with_progress(&docs, &cfg, e, progress)
                .map_err(err)?;
            Ok((c, e.info().summary()))
        })
    })?;
    let survives: Vec<u8> = c.survives.iter().map(|&b| b as u8).collect();
    let exact: Vec<u8> = c.exact_duplicate.iter().map(|&b| b as u8).collect();
    Ok((
        PyByteArray::new(py, bytemuck::cast_slice(&c.root)),
        PyByteArray::new(py, &survives),
        PyByteArray::new(py, &exact),
        json(&c.stats),
        info,
    ))
}
