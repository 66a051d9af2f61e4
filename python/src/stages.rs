//! The sharded run over a work directory: its tasks, and its stages one by one.

use super::*;
use neardup::options::Mib;

pub(crate) fn open(dir: &std::path::Path) -> PyResult<WorkDir> {
    WorkDir::open(dir).map_err(err)
}

/// Make (or reopen, when made for the same run) the work directory; returns (shards,
/// partitions).
#[pyfunction]
#[pyo3(signature = (work_dir, inputs, partitions, options, against, out = None, out_clusters = None, out_pairs = None, out_report = None, glob = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_init(
    py: Python<'_>,
    work_dir: PathBuf,
    inputs: Vec<String>,
    partitions: usize,
    options: &Bound<'_, PyDict>,
    against: Vec<PathBuf>,
    out: Option<PathBuf>,
    out_clusters: Option<String>,
    out_pairs: Option<String>,
    out_report: Option<String>,
    glob: Option<String>,
) -> PyResult<(usize, usize)> {
    let (cfg, fields) = parse_options(options)?;
    let inputs = neardup::io::expand_inputs(&inputs, glob.as_deref()).map_err(err)?;
    let out = out.map(|dir| sharded::OutDir {
        dir: dir.display().to_string(),
        clusters: out_clusters,
        pairs: out_pairs,
        report: out_report,
    });
    detached(py, || {
        let w = sharded::init(&work_dir, &inputs, cfg, fields, partitions, &against, out)
            .map_err(err)?;
        Ok((w.shards(), w.partitions()))
    })
}

/// The tasks that may run now (`neardup stage next`), as their text; empty once the run is
/// complete. `steps=False` runs `rank`, the greedy rounds and `cluster` each as one task.
#[pyfunction]
#[pyo3(signature = (work_dir, task_memory, confirm_tasks, steps = true))]
pub(crate) fn stage_next(
    py: Python<'_>,
    work_dir: PathBuf,
    task_memory: u64,
    confirm_tasks: usize,
    steps: bool,
) -> PyResult<Vec<String>> {
    let task_memory = budget("task_memory", task_memory)?;
    detached(py, || {
        let w = open(&work_dir)?;
        let how = sharded::Waves {
            steps,
            task_memory,
            confirm_tasks,
            ..sharded::Waves::default()
        };
        let wave = sharded::next_wave(&w, &how).map_err(err)?;
        Ok(wave.iter().map(|t| t.to_string()).collect())
    })
}

/// What a task's text names: `(kind, stage, index, round, light)`.
pub(crate) type TaskInfo = (String, String, Option<usize>, Option<u32>, bool);

/// What a task's text names ([`TaskInfo`]).
#[pyfunction]
pub(crate) fn stage_task(task: &str) -> PyResult<TaskInfo> {
    let t: sharded::Task = task.parse().map_err(err)?;
    Ok((
        t.kind().to_string(),
        t.stage().to_string(),
        t.index(),
        t.round(),
        t.is_light(),
    ))
}

/// Run one task (`neardup stage run`); returns its report as JSON (`TaskReport::to_json`).
#[pyfunction]
#[pyo3(signature = (work_dir, task, engine, threads, gpu_kernels, gpu_int64, clusters = None, pairs = None, progress = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_run(
    py: Python<'_>,
    work_dir: PathBuf,
    task: &str,
    engine: &str,
    threads: usize,
    gpu_kernels: &str,
    gpu_int64: bool,
    clusters: Option<String>,
    pairs: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    use sharded::task::{GivenEngine, NoEngine, TaskEnv};
    let t: sharded::Task = task.parse().map_err(err)?;
    // Paths given for the clusters and pairs files replace the copy into the run's --out.
    let copies = (clusters.is_some() || pairs.is_some()).then_some((clusters, pairs));
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let run = |engines: &mut dyn sharded::task::Engines| {
            let mut env = TaskEnv {
                engines,
                progress,
                reports: Some(neardup::report::write_stage_reports),
                copies: copies.clone(),
            };
            t.run(&w, &mut env).map_err(err)
        };
        let r = match t {
            sharded::Task::Sign { .. } => {
                let params = w.config().params;
                with_engine(engine, params, threads, gpu_kernels, gpu_int64, |e| {
                    run(&mut GivenEngine(e))
                })?
            }
            _ => run(&mut NoEngine)?,
        };
        Ok(r.to_json().to_string())
    })
}

/// A work directory's (shards, partitions).
#[pyfunction]
pub(crate) fn stage_shape(work_dir: PathBuf) -> PyResult<(usize, usize)> {
    let w = open(&work_dir)?;
    Ok((w.shards(), w.partitions()))
}

#[pyfunction]
#[pyo3(signature = (work_dir, shard, engine, threads, gpu_kernels, gpu_int64, progress = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_sign(
    py: Python<'_>,
    work_dir: PathBuf,
    shard: usize,
    engine: &str,
    threads: usize,
    gpu_kernels: &str,
    gpu_int64: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let params = w.config().params;
        let s = with_engine(engine, params, threads, gpu_kernels, gpu_int64, |e| {
            sharded::sign::sign(&w, shard, e, progress).map_err(err)
        })?;
        Ok(s.map(|s| json(&s)))
    })
}

#[pyfunction]
#[pyo3(signature = (work_dir, sort_memory, progress = None))]
pub(crate) fn stage_rank(
    py: Python<'_>,
    work_dir: PathBuf,
    sort_memory: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    let budget = budget("sort_memory", sort_memory)?.bytes();
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::rank::job::rank_within(&w, progress, budget).map_err(err)?;
        Ok(s.map(|s| json(&s)))
    })
}

/// A memory budget given as `name=` in MiB, at least 1.
pub(crate) fn budget(name: &str, mib: u64) -> PyResult<Mib> {
    if mib == 0 {
        return Err(PyValueError::new_err(format!(
            "{name} must be at least 1 (MiB)"
        )));
    }
    Ok(Mib(mib))
}

/// One parallel job of `rank` (`neardup stage rank --step`): its result as JSON (`null` when
/// done already).
#[pyfunction]
#[pyo3(signature = (work_dir, step, index = None, task_memory = 1024))]
pub(crate) fn stage_rank_step(
    py: Python<'_>,
    work_dir: PathBuf,
    step: &str,
    index: Option<usize>,
    task_memory: u64,
) -> PyResult<String> {
    let task_memory = budget("task_memory", task_memory)?;
    let at = sharded::StepIndex {
        shard: index,
        range: index,
        ..Default::default()
    };
    let t = sharded::Task::step("rank", step, at, task_memory).map_err(err)?;
    let r = run_task(py, &work_dir, &t, None)?;
    // `split`, `sort` and `exact` say whether they ran; `plan` its ranges, `finish` the
    // stage's summary.
    let v = match t {
        sharded::Task::RankSplit { .. }
        | sharded::Task::RankSort { .. }
        | sharded::Task::RankExact { .. } => serde_json::json!(r.ran()),
        _ => r.result,
    };
    Ok(v.to_string())
}

/// Run `task` (no `sign` task) with the GIL released; `copies`: where `cluster` copies its
/// files.
pub(crate) fn run_task(
    py: Python<'_>,
    work_dir: &std::path::Path,
    task: &sharded::Task,
    copies: Option<(Option<String>, Option<String>)>,
) -> PyResult<sharded::TaskReport> {
    detached(py, || {
        let w = open(work_dir)?;
        let progress = ProgressFactory::hidden();
        let mut env = sharded::TaskEnv {
            engines: &mut sharded::task::NoEngine,
            progress: &progress,
            reports: Some(neardup::report::write_stage_reports),
            copies,
        };
        task.run(&w, &mut env).map_err(err)
    })
}

#[pyfunction]
pub(crate) fn stage_bands(py: Python<'_>, work_dir: PathBuf, shard: usize) -> PyResult<bool> {
    detached(py, || {
        sharded::bands::bands(&open(&work_dir)?, shard).map_err(err)
    })
}

#[pyfunction]
#[pyo3(signature = (work_dir, partition, progress = None))]
pub(crate) fn stage_confirm(
    py: Python<'_>,
    work_dir: PathBuf,
    partition: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::confirm::confirm(&w, partition, progress).map_err(err)?;
        Ok(s.map(|s| json(&s)))
    })
}

/// Confirm several partitions in one job, their documents gathered once a group.
#[pyfunction]
#[pyo3(signature = (work_dir, partitions, progress = None))]
pub(crate) fn stage_confirm_group(
    py: Python<'_>,
    work_dir: PathBuf,
    partitions: Vec<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<Option<String>>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let done = sharded::confirm::confirm_together(
            &w,
            &partitions,
            sharded::confirm::GROUP_DOCS,
            progress,
        )
        .map_err(err)?;
        Ok(done.into_iter().map(|s| s.map(|s| json(&s))).collect())
    })
}

/// Under `--cluster greedy`: partition `partition`'s job of round `round` (1 on). Returns its
/// summary as JSON, or `None` when it ran already.
#[pyfunction]
#[pyo3(signature = (work_dir, round, partition, progress = None))]
pub(crate) fn stage_greedy_round(
    py: Python<'_>,
    work_dir: PathBuf,
    round: u32,
    partition: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<String>> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::greedy::jobs::round(&w, round, partition, progress).map_err(err)?;
        Ok(s.map(|s| json(&s)))
    })
}

/// Under `--cluster greedy`: settle round `round` once its partitions' jobs ran. Returns its
/// summary as JSON (whether settled now or before).
#[pyfunction]
#[pyo3(signature = (work_dir, round, progress = None))]
pub(crate) fn stage_greedy_settle(
    py: Python<'_>,
    work_dir: PathBuf,
    round: u32,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        sharded::greedy::settle(&w, round, progress).map_err(err)?;
        let s = sharded::greedy::round_summary(&w, round).map_err(err)?;
        Ok(json(&s.expect("settled")))
    })
}

/// Cluster, then copy the clusters and pairs files where asked (whether or not the stage ran
/// now). Returns the stage's summary as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, clusters=None, pairs=None, progress=None))]
pub(crate) fn stage_cluster(
    py: Python<'_>,
    work_dir: PathBuf,
    clusters: Option<String>,
    pairs: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        sharded::cluster_to(&w, clusters.as_deref(), pairs.as_deref(), progress).map_err(err)?;
        Ok(json(&sharded::cluster::summary(&w).map_err(err)?))
    })
}

/// One parallel job of `cluster` (`neardup stage cluster --step`): its result as JSON
/// (`converged`: whether round `round` found the components, `null` while it runs).
#[pyfunction]
#[pyo3(signature = (work_dir, step, index = None, round = None, task_memory = 1024, clusters = None, pairs = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn stage_cluster_step(
    py: Python<'_>,
    work_dir: PathBuf,
    step: &str,
    index: Option<usize>,
    round: Option<u32>,
    task_memory: u64,
    clusters: Option<String>,
    pairs: Option<String>,
) -> PyResult<String> {
    let task_memory = budget("task_memory", task_memory)?;
    if step == "converged" {
        let round = round.ok_or_else(|| PyValueError::new_err("converged needs round"))?;
        return detached(py, || {
            let w = open(&work_dir)?;
            let done = sharded::cluster::tasks::round_done(&w, round).map_err(err)?;
            Ok(serde_json::json!(done).to_string())
        });
    }
    let at = sharded::StepIndex {
        shard: index,
        partition: index,
        part: index,
        round,
        ..Default::default()
    };
    let t = sharded::Task::step("cluster", step, at, task_memory).map_err(err)?;
    Ok(run_task(py, &work_dir, &t, Some((clusters, pairs)))?
        .result
        .to_string())
}

/// Write shard `shard`'s kept records to `output` (atomically); returns the summary as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, shard, output, progress = None))]
pub(crate) fn stage_apply(
    py: Python<'_>,
    work_dir: PathBuf,
    shard: usize,
    output: String,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached_with_progress(py, progress, |progress| {
        let w = open(&work_dir)?;
        let s = sharded::apply_to(&w, shard, &output, progress).map_err(err)?;
        Ok(json(&s))
    })
}

/// Write the run's reports (JSON, or a page for `.html`) once every shard is applied; returns
/// the run's summary as JSON.
#[pyfunction]
#[pyo3(signature = (work_dir, reports, output, seconds=None))]
pub(crate) fn stage_report(
    py: Python<'_>,
    work_dir: PathBuf,
    reports: Vec<String>,
    output: String,
    seconds: Option<f64>,
) -> PyResult<String> {
    detached(py, || {
        let w = open(&work_dir)?;
        let s =
            neardup::report::write_stage_reports(&w, &reports, &output, seconds).map_err(err)?;
        Ok(sharded::task::run_counts(&w, &s).map_err(err)?.to_string())
    })
}

/// Shard `shard`'s verdicts once `cluster` has run, in row order: (ids, cluster root ids or
/// `None`, survives as one byte each, survivor ids, index matches or `None`, kept as one byte
/// each: what a dropping run writes).
type ShardVerdictLists = (
    Vec<String>,
    Vec<Option<String>>,
    Vec<u8>,
    Vec<String>,
    Vec<Option<String>>,
    Vec<u8>,
);

#[pyfunction]
pub(crate) fn stage_verdicts(
    py: Python<'_>,
    work_dir: PathBuf,
    shard: usize,
) -> PyResult<ShardVerdictLists> {
    detached(py, || {
        let w = open(&work_dir)?;
        let v = sharded::apply::shard_verdicts(&w, shard).map_err(err)?;
        let n = v.len();
        Ok((
            (0..n).map(|d| v.id(d).to_string()).collect(),
            (0..n).map(|d| v.cluster(d).map(str::to_string)).collect(),
            (0..n).map(|d| v.survives(d) as u8).collect(),
            (0..n).map(|d| v.survivor_id(d).to_string()).collect(),
            (0..n).map(|d| v.matched(d).map(str::to_string)).collect(),
            (0..n).map(|d| v.kept(d) as u8).collect(),
        ))
    })
}

/// Write the run's removed documents (`dedup --removed`: `id`, `root`, `survivor`) to `path`
/// as Parquet once `cluster` has run; returns how many.
#[pyfunction]
pub(crate) fn stage_removed(py: Python<'_>, work_dir: PathBuf, path: String) -> PyResult<u64> {
    detached(py, || {
        let w = open(&work_dir)?;
        sharded::apply::write_removed(&w, &path).map_err(err)
    })
}

/// `inputs` with each directory replaced by the data files under it (or those `glob` matches),
/// as the command line reads them.
#[pyfunction]
#[pyo3(signature = (inputs, glob = None))]
pub(crate) fn expand_inputs(inputs: Vec<String>, glob: Option<String>) -> PyResult<Vec<String>> {
    neardup::io::expand_inputs(&inputs, glob.as_deref()).map_err(err)
}
