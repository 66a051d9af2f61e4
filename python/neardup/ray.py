"""``neardup dedup`` on a Ray cluster: the sharded stages (:mod:`neardup.stages`) as Ray tasks.

:func:`dedup` runs the run's tasks (:func:`neardup.stages.next_wave`), wave after wave,
each wave's tasks in parallel on the cluster that ``ray.init()`` connects to (a local one when
none is running): ``sign`` and ``bands`` per input shard, ``confirm`` per group of partitions
(as many groups as the cluster runs tasks at once, so that a document in buckets of several
partitions of a group is signed again once) after its two shipping steps
(``confirm-needs`` per partition, ``confirm-texts`` per shard: each shard read once for all the
groups), ``rank`` and ``cluster`` as parallel
steps (per shard, per id range, per partition and per part of the members, with rounds per
part), under ``cluster="greedy"`` the rule's rounds, and ``apply`` per shard; the plans, the
finishing steps and the report, which read and write a few small files, on the driver. Its
outputs are byte-identical to ``neardup dedup`` over the same inputs in the same order, for
any number of nodes, workers and partitions: the same functions run, on the same files.

The band rows are shuffled through files in the work directory, not through Ray's object
store or Ray Data: the stage files already are the shuffle (each ``bands`` and
``confirm-texts`` task writes one file per partition, each ``confirm`` task reads its
partitions'); they outlive a dead worker, so a
retried task finds what the others wrote instead of Ray re-running their stages to rebuild lost
objects; and no band row has to sit in the object store's memory. The price is that
``work_dir`` and ``output_dir`` must be on storage every node sees (NFS or another shared file
system; on one machine, any directory), and ``neardup`` must be installed on every node.

Each task's outputs appear atomically and a finished stage is skipped, so Ray's retries of a
task whose worker died (``max_retries``) give the same bytes.

For fault-injection tests, ``NEARDUP_RAY_FAULTS`` names a directory in the workers'
environment: a file ``kill-STAGE-INDEX`` there (for example ``kill-apply-1``, or for a step of
``rank`` or ``cluster`` ``kill-STAGE-STEP-INDEX``, as ``kill-rank-sort-0`` or
``kill-cluster-star0-1``, round 0's ``star`` task of part 1) makes the first
task of that stage and index kill its own worker process, before its work when the file says
``before`` and after it otherwise; the file is renamed so the retry runs normally.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _neardup, stages
from .stages import _D  # every option's default, from the library

__all__ = ["dedup"]

log = logging.getLogger("neardup.ray")


def _fault(name: str, index: Optional[int], when: str) -> None:
    """Kill this worker if a test asked for it (see the module's documentation)."""
    faults = os.environ.get("NEARDUP_RAY_FAULTS")
    if not faults:
        return
    marker = os.path.join(faults, f"kill-{name}-{index if index is not None else 0}")
    try:
        with open(marker) as f:
            wanted = f.read().strip() or "after"
    except OSError:
        return
    if wanted != when:
        return
    try:
        os.rename(marker, marker + ".done")
    except OSError:
        return  # another attempt took it
    os.kill(os.getpid(), signal.SIGKILL)


def _run_task(fault: str, index: Optional[int], work_dir: str, text: str,
              kwargs: Dict[str, Any], threads: int) -> Dict[str, Any]:
    """One task (:func:`neardup.stages.run`) in a Ray worker; ``fault`` and ``index`` name it
    for fault injection."""
    # The stages that run on rayon's global pool get the task's CPUs, not every core.
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(threads, 1)))
    import ray

    _fault(fault, index, "before")
    exact_peak = _reset_peak()
    t0 = time.time()
    result = stages.run(work_dir, text, **kwargs)
    _fault(fault, index, "after")
    ctx = ray.get_runtime_context()
    return {
        "result": result,
        "worker": f"{ctx.get_node_id()}:{os.getpid()}",
        "seconds": time.time() - t0,
        "peak_rss": _peak(exact_peak),
    }


def _reset_peak() -> bool:
    """Reset this process's peak resident memory, so that the peak read after a task is the
    task's own (Linux 4.0 and later); ``False`` where it cannot be reset."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak(exact: bool) -> int:
    """The peak resident bytes since :func:`_reset_peak`, or, where it could not reset, the
    process's peak so far (an upper bound: a worker runs one task after another)."""
    if exact:
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
    # Linux counts KiB, macOS bytes; the bound is what matters here.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _logger(verbose: bool) -> logging.Logger:
    if verbose and not log.handlers and not logging.getLogger().handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
    return log


def dedup(
    inputs: Sequence["str | os.PathLike[str]"],
    output_dir: "str | os.PathLike[str]",
    *,
    work_dir: "str | os.PathLike[str]",
    partitions: int = _D["partitions"],
    sort_memory: int = _D["sort_memory"],
    task_memory: int = _D["task_memory"],
    engine: str = _D["engine"],
    gpu_kernels: str = _D["gpu_kernels"],
    gpu_int64: bool = _D["gpu_int64"],
    threads: Optional[int] = _D["threads"],
    num_cpus: float = 1,
    max_retries: int = 3,
    scheduling_strategy: Any = "SPREAD",
    clusters: Optional[str] = "clusters.jsonl",
    pairs: Optional[str] = None,
    report: Optional[str] = "report.json",
    removed: Optional[str] = None,
    verbose: bool = True,
    progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Near-dedup ``inputs`` (JSONL or Parquet shards, one task each) on a Ray cluster.

    Writes into ``output_dir`` one output per input, with the input file's name, and
    ``clusters`` and ``report`` (names inside ``output_dir``; ``None`` for none; ``pairs`` and
    ``removed``, the removed documents as ``dedup --removed`` writes them, too when given). A
    directory among ``inputs`` stands for its data files (``glob=`` picks them), as on the
    command line. ``options`` are :func:`neardup.stages.init`'s (the command line's dedup
    options: ``threshold``, ``bands``, ``rows``, ``exact``, ``tag_only``, ``keep`` ...).
    ``partitions`` splits the band rows for ``confirm``, whose tasks each take a group of
    partitions (one task per ``num_cpus`` CPUs of the cluster). ``task_memory`` is the MiB a
    task of ``rank`` and ``cluster`` holds at most: ``rank`` runs as parallel steps
    (:func:`neardup.stages.rank_step`: a ``split`` task per shard, a ``sort`` and, with
    ``exact``, an ``exact`` task per id range, as many ranges as the records need at
    ``task_memory`` each, and a ``write`` task per shard), and so does ``cluster``
    (:func:`neardup.stages.cluster_step`: tasks per partition, per shard, and per part of the
    members, as many parts as the pairs and documents need at ``task_memory`` each, with
    rounds of tasks per part until the components are found). ``sort_memory`` is unused and kept for callers that pass it. Each task asks Ray for
    ``num_cpus`` CPUs and signs with ``threads`` threads (default: ``num_cpus``); ``engine`` is
    ``"auto"``, ``"cpu"`` or ``"gpu"`` (``gpu_kernels`` and ``gpu_int64``:
    :func:`neardup.stages.sign`'s). A task whose worker dies is retried up to ``max_retries``
    times.
    ``scheduling_strategy`` is Ray's (by default ``"SPREAD"``: a stage's tasks go to as many
    nodes as there are, so their reads and writes spread too).

    Stage progress goes to the ``neardup.ray`` logger (to stderr when ``verbose`` and logging
    is not configured), and to ``progress`` when given: it is called on the driver as
    ``progress(stage, done, total, docs)`` when a stage starts and each time one of its tasks
    ends, with the stage's tasks done and their total (for ``rank`` and ``cluster``, each
    step's: they start at 0 again for every step), and the documents signed so far (as
    :func:`neardup.dedup`'s callback, but counting tasks where that counts bytes). An
    exception it raises is raised when the run is over. Returns the run's counts, seconds per stage, and ``workers``: the
    distinct ``node:pid`` of the worker processes that ran tasks, ``tasks``: how many tasks each
    stage ran, and ``peak_rss``: per stage, the largest peak resident bytes of a worker while one
    of its tasks ran (on Linux the peak is reset as each task starts, so it is the task's, with
    what the worker process already held; elsewhere the worker's peak so far).
    """
    import ray

    say = _logger(verbose)
    t_start = time.time()
    if not ray.is_initialized():
        ray.init()
    inputs = [os.path.abspath(os.fspath(p)) for p in inputs]
    output_dir = os.path.abspath(os.fspath(output_dir))
    work_dir = os.path.abspath(os.fspath(work_dir))
    inputs = _neardup.expand_inputs(inputs, options.pop("glob", None))
    names: Dict[str, str] = {}
    for p in inputs:
        name = os.path.basename(p)
        if name in names:
            raise ValueError(
                f"two inputs are named {name!r} ({names[name]} and {p}): each input's output "
                f"in {output_dir} takes the input's name"
            )
        names[name] = p
    side = [n for n in (clusters, pairs, report, removed) if n is not None]
    for n in side:
        if n in names:
            raise ValueError(f"{n!r} is both an input's name and an output of the run's own")
    os.makedirs(output_dir, exist_ok=True)
    outputs = [os.path.join(output_dir, os.path.basename(p)) for p in inputs]
    threads = int(threads if threads is not None else max(1, int(num_cpus)))

    shards, parts = stages.init(work_dir, inputs, partitions=partitions, out=output_dir,
                                out_clusters=clusters, out_pairs=pairs, out_report=report,
                                **options)
    say.info("%d shards, %d partitions, work directory %s", shards, parts, work_dir)
    task = ray.remote(_run_task).options(
        num_cpus=num_cpus, max_retries=max_retries, scheduling_strategy=scheduling_strategy
    )
    workers: set = set()
    seconds: Dict[str, float] = {}
    task_counts: Dict[str, int] = {}
    peak_rss: Dict[str, int] = {}
    callback_error: List[BaseException] = []
    signed_docs = [0]

    def report_progress(name: str, done: int, total: int) -> None:
        if progress is None or callback_error:
            return
        try:
            progress(name, done, total, signed_docs[0])
        except BaseException as e:  # raised when the run is over
            callback_error.append(e)

    def stage(name: str, calls: List[Tuple[str, Optional[int], str]]) -> List[Any]:
        """Run the tasks ``calls`` (each its fault name, index and text) of the stage ``name``
        and wait for them all."""
        t0 = time.time()
        refs = [task.remote(fault, i, work_dir, t, run_kw, threads) for (fault, i, t) in calls]
        # A stage run in several waves (its steps, the greedy rounds) adds up.
        task_counts[name] = task_counts.get(name, 0) + len(refs)
        results: List[Any] = [None] * len(refs)
        index = {r: n for n, r in enumerate(refs)}
        pending = list(refs)
        done = 0
        report_progress(name, 0, len(refs))
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                out = ray.get(r)
                results[index[r]] = out["result"]["result"]
                workers.add(out["worker"])
                peak_rss[name] = max(peak_rss.get(name, 0), out["peak_rss"])
                done += 1
                if name == "sign" and out["result"]["result"] is not None:
                    signed_docs[0] += out["result"]["result"]["documents"]
                say.debug("%s: %d/%d done", name, done, len(refs))
                report_progress(name, done, len(refs))
        seconds[name] = seconds.get(name, 0.0) + time.time() - t0
        return results

    run_kw = {"engine": engine, "threads": threads, "gpu_kernels": gpu_kernels,
              "gpu_int64": gpu_int64}
    # One confirm task per slot the cluster has for a task, each confirming its partitions
    # together.
    slots = int(ray.cluster_resources().get("CPU", 1) // (num_cpus or 1))
    confirm_tasks = max(1, min(parts, slots))
    # What each stage's log line says, gathered from its tasks' results.
    seen: Dict[str, Any] = {"docs": 0, "ranges": None, "ranked": None, "checked": 0,
                            "rounds": 0, "clustered": None, "written": 0, "report": {}}

    def log_stage(name: str) -> None:
        secs = seconds.get(name, 0.0)
        if name == "sign":
            say.info("sign: %d shards, %d documents signed now, %.2f s", shards, seen["docs"],
                     secs)
        elif name == "rank":
            ranked = seen["ranked"]
            say.info("rank: %s ranges, %s, %.2f s", seen["ranges"],
                     "done already" if ranked is None
                     else f"{ranked['exact_duplicates']} exact duplicates", secs)
        elif name == "bands":
            say.info("bands: %d shards, %.2f s", shards, secs)
        elif name == "confirm":
            say.info("confirm: %d partitions, %d pairs checked, %.2f s", parts, seen["checked"],
                     secs)
        elif name == "greedy":
            say.info("greedy: %d rounds, %.2f s", seen["rounds"],
                     seconds.get("greedy_round", 0.0) + seconds.get("greedy_settle", 0.0))
        elif name == "cluster" and seen["clustered"] is not None:
            c = seen["clustered"]["stats"]
            say.info("cluster: %d near duplicates, %d clusters, %.2f s", c["near_duplicates"],
                     c["clusters"], secs)
        elif name == "apply":
            say.info("apply: %d shards, %d documents written to %s, %.2f s",
                     shards, seen["written"], output_dir, secs)

    current = None
    last: List[str] = []
    while True:
        wave = stages.next_wave(work_dir, task_memory=task_memory, confirm_tasks=confirm_tasks)
        if wave == last and wave:
            raise RuntimeError(f"the tasks {wave} ran and are due again: something in the work "
                               f"directory {work_dir} is not as they left it")
        infos = [stages.task_info(t) for t in wave]
        group = infos[0]["stage"] if wave else None
        if group != current:
            if current is not None:
                log_stage(current)
            current = group
        if not wave:
            break
        last = wave
        first = infos[0]
        if first["light"]:
            # A plan, a finish or the report: a few small files, read and written here.
            t0 = time.time()
            results = [stages.run(work_dir, t)["result"] for t in wave]
            seconds[first["stage"]] = seconds.get(first["stage"], 0.0) + time.time() - t0
        else:
            name = first["kind"].replace("-", "_") if group == "greedy" else first["stage"]
            calls = []
            for g, (t, info) in enumerate(zip(wave, infos)):
                fault = info["kind"]
                if fault == "cluster-star":
                    fault = f"cluster-star{info['round']}"
                elif group == "greedy":
                    fault = name
                index = g if info["kind"] == "confirm" else info["index"]
                calls.append((fault, index, t))
            results = stage(name, calls)
        kind = first["kind"]
        for r in results:
            if r is None:
                continue
            if kind == "sign":
                seen["docs"] += r["documents"]
            elif kind == "rank-plan":
                seen["ranges"] = r
            elif kind == "rank-finish":
                seen["ranked"] = r
            elif kind == "confirm":
                seen["checked"] += sum(x["counts"]["checked"] for x in r if x is not None)
            elif kind == "greedy-settle":
                seen["rounds"] = r["round"] + 1
            elif kind == "cluster-finish":
                seen["clustered"] = r
            elif kind == "apply":
                seen["written"] += r["written"]
            elif kind == "report":
                seen["report"] = r
    if seen["clustered"] is None:
        # Done before this call: the stage's summary, read back (the copy is made again).
        seen["clustered"] = stages.run(work_dir, "cluster-finish")["result"]
    if not seen["report"]:
        seen["report"] = stages.report(work_dir, [], output=output_dir)
    if removed is not None:
        stages.removed(work_dir, os.path.join(output_dir, removed))
    total = time.time() - t_start
    c = seen["clustered"]
    summary = dict(seen["report"])
    written = summary.get("documents_written", seen["written"])
    summary.update(
        {
            "documents_written": written,
            "near_duplicates": c["stats"]["near_duplicates"],
            "clusters": c["stats"]["clusters"],
            "outputs": outputs,
            "seconds": total,
            "stage_seconds": seconds,
            "tasks": task_counts,
            "peak_rss": peak_rss,
            "workers": sorted(workers),
        }
    )
    say.info(
        "neardup.ray.dedup: %d documents written, %d near duplicates, %d clusters; "
        "%.2f s, %d worker processes",
        written, summary["near_duplicates"], summary["clusters"], total, len(workers),
    )
    if callback_error:
        raise callback_error[0]
    return summary
