"""The sharded stages of ``neardup stage``, over a work directory, from Python.

The simplest way to run them is as tasks: :func:`init` with ``out``, then, until
:func:`next_wave` returns nothing, :func:`run` every task of the wave (in any order, in any
process, all at once)::

    stages.init(work, shards, out="out")
    while wave := stages.next_wave(work):
        for task in wave:          # or hand each to a worker
            stages.run(work, task)

Each task is a line of text (``"sign shard=3"``), what ``neardup stage next`` prints.

Stage by stage, a run over shards (one input file each) is: :func:`init`; :func:`sign` for every shard;
:func:`rank`; :func:`bands` for every shard; :func:`confirm` for every partition;
under ``cluster="greedy"``, the rounds (:func:`greedy_rounds`, or per round
:func:`greedy_round` for every partition, then :func:`greedy_settle`); :func:`cluster`;
:func:`apply` for every shard; :func:`report`. Each step is an independent
job on files in the work directory (on shared storage when the jobs run on several machines),
safe to run again after a crash: its outputs appear atomically, and a finished step is skipped.
The shards' outputs in shard order are byte-identical to ``neardup dedup`` over the same
inputs. ``docs/GUIDE.md`` describes the layout.

Functions that can skip return the stage's summary as a dict, or ``None`` when it was done
already.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

#: A progress callback: ``progress(stage, done, total, docs)``, as :func:`neardup.dedup` calls it.
Progress = Optional[Callable[[str, int, Optional[int], int], Any]]

import numpy as np

from . import _neardup

# Every option's default, from the library.
_D: Dict[str, Any] = json.loads(_neardup.defaults())

__all__ = [
    "apply",
    "bands",
    "cluster",
    "cluster_step",
    "confirm",
    "greedy_round",
    "greedy_rounds",
    "greedy_settle",
    "init",
    "next_wave",
    "rank",
    "rank_step",
    "removed",
    "report",
    "run",
    "shape",
    "sign",
    "task_info",
    "verdicts",
    "Verdicts",
]


def _json(s: Optional[str]) -> Optional[Dict[str, Any]]:
    return None if s is None else json.loads(s)


def init(
    work_dir: "str | os.PathLike[str]",
    inputs: Sequence["str | os.PathLike[str]"],
    *,
    partitions: int = _D["partitions"],
    k: int = _D["k"],
    num_perm: int = _D["num_perm"],
    seed: int = _D["seed"],
    shingle: str = _D["shingle"],
    normalize: str = _D["normalize"],
    bands: int = _D["bands"],
    rows: int = _D["rows"],
    threshold: float = _D["threshold"],
    confirm: str = _D["confirm"],
    exact: bool = _D["exact"],
    tag_only: bool = False,
    keep: str = _D["keep"],
    cluster: str = _D["cluster"],
    group_field: Optional[str] = None,
    group_missing: str = _D["group_missing"],
    id_field: str = _D["id_field"],
    text_field: str = _D["text_field"],
    numeric_ids: bool = False,
    against: Sequence["str | os.PathLike[str]"] = (),
    out: "str | os.PathLike[str] | None" = None,
    out_clusters: Optional[str] = "clusters.jsonl",
    out_pairs: Optional[str] = None,
    out_report: Optional[str] = "report.json",
    glob: Optional[str] = None,
) -> Tuple[int, int]:
    """Make the work directory for ``inputs`` (JSONL or Parquet shards) and the options of
    ``neardup dedup`` (``keep`` as the command line spells it: ``field:NAME:max`` reads a
    field; ``against``: indexes of documents already kept, made by ``neardup index build``,
    that ``apply`` checks every document against). Reopening one made for the same run is
    fine; one made for other inputs or options is refused, naming what differs.

    ``out``: the directory (made if missing) the run's tasks (:func:`next_wave`) write into:
    each shard's output under the shard's file name, and the files named ``out_clusters``,
    ``out_pairs`` and ``out_report`` (``None``: not written; a report named ``.html`` is a
    page). A directory among ``inputs`` stands for the data files under it (or those whose path
    below it matches ``glob``), sorted, as on the command line. Returns ``(shards,
    partitions)``."""
    options = {
        "k": k,
        "num_perm": num_perm,
        "seed": seed,
        "shingle": shingle,
        "normalize": normalize,
        "bands": bands,
        "rows": rows,
        "threshold": threshold,
        "confirm": confirm,
        "exact": exact,
        "tag_only": tag_only,
        "keep": keep,
        "cluster": cluster,
        "group_field": group_field,
        "group_missing": group_missing,
        "id_field": id_field,
        "text_field": text_field,
        "numeric_ids": numeric_ids,
    }
    return _neardup.stage_init(
        os.fspath(work_dir),
        [os.fspath(p) for p in inputs],
        partitions,
        options,
        [os.fspath(p) for p in against],
        None if out is None else os.fspath(out),
        out_clusters,
        out_pairs,
        out_report,
        glob,
    )


def next_wave(
    work_dir: "str | os.PathLike[str]",
    *,
    task_memory: int = _D["task_memory"],
    confirm_tasks: int = 0,
) -> List[str]:
    """The tasks that may run now, as ``neardup stage next`` prints them; empty once the run is
    complete (a work directory made with ``out``). The tasks of a wave are independent: run
    them in any order, in any processes, all at once, then ask again.

    ``task_memory``: MiB a task of ``rank`` or ``cluster`` holds at most (their plans cut as
    many id ranges and parts as that needs). ``confirm_tasks``: how many tasks confirm the
    partitions, each a group of them (0: one per partition)."""
    return _neardup.stage_next(os.fspath(work_dir), task_memory, confirm_tasks)


def task_info(task: str) -> Dict[str, Any]:
    """What a task's text names: ``kind`` (``"sign"``, ``"rank-sort"``, ...), ``stage``
    (``"rank"``, ...), ``index`` (its shard, range, partition or part; a confirm group's first
    partition), ``round`` (of a greedy job or a ``cluster-star`` task) and ``light`` (it reads
    and writes a few small files: a scheduler may run it in its own process)."""
    kind, stage, index, round_, light = _neardup.stage_task(task)
    return {"kind": kind, "stage": stage, "index": index, "round": round_, "light": light}


def run(
    work_dir: "str | os.PathLike[str]",
    task: str,
    *,
    engine: str = _D["engine"],
    threads: int = _D["threads"],
    gpu_kernels: str = _D["gpu_kernels"],
    gpu_int64: bool = _D["gpu_int64"],
    progress: Progress = None,
) -> Dict[str, Any]:
    """Run one task (``neardup stage run``): a no-op when it is done, and safe to run twice at
    once. ``engine``, ``threads``, ``gpu_kernels`` and ``gpu_int64`` are :func:`sign`'s (only a
    ``sign`` task signs). Returns ``{"task", "ran", "seconds", "lines", "result"}``: whether it
    ran now, the lines ``neardup stage run`` prints, and the stage's summary (``None`` when it
    was done already)."""
    return json.loads(
        _neardup.stage_run(
            os.fspath(work_dir), task, engine, threads, gpu_kernels, gpu_int64,
            progress=progress,
        )
    )


def shape(work_dir: "str | os.PathLike[str]") -> Tuple[int, int]:
    """A work directory's ``(shards, partitions)``."""
    return _neardup.stage_shape(os.fspath(work_dir))


def sign(
    work_dir: "str | os.PathLike[str]",
    shard: int,
    *,
    engine: str = _D["engine"],
    threads: int = _D["threads"],
    gpu_kernels: str = _D["gpu_kernels"],
    gpu_int64: bool = _D["gpu_int64"],
    progress: Progress = None,
) -> Optional[Dict[str, Any]]:
    """Stage 1: sign shard ``shard`` (``engine``: ``"auto"``, ``"cpu"`` or ``"gpu"``;
    ``gpu_kernels`` and ``gpu_int64``: :func:`neardup.signatures`'s, the same bits either
    way). ``progress``, here and in the other stages: a callback as :func:`neardup.dedup`
    takes it."""
    return _json(
        _neardup.stage_sign(
            os.fspath(work_dir), shard, engine, threads, gpu_kernels, gpu_int64, progress=progress
        )
    )


def rank(
    work_dir: "str | os.PathLike[str]",
    sort_memory: int = _D["sort_memory"],
    *,
    progress: Progress = None,
) -> Optional[Dict[str, Any]]:
    """Stage 2, once every shard is signed: ids in order, and exact duplicates.

    ``sort_memory``: MiB of id records sorted at once; a larger corpus is sorted in id-range
    buckets through files in the work directory (the peak is about twice this).
    """
    return _json(_neardup.stage_rank(os.fspath(work_dir), sort_memory, progress=progress))


def rank_step(
    work_dir: "str | os.PathLike[str]",
    step: str,
    index: Optional[int] = None,
    *,
    task_memory: int = _D["task_memory"],
) -> Any:
    """One parallel job of stage 2 (``neardup stage rank --step``), writing the same files as
    :func:`rank`. In order: ``"split"`` per shard (``index``), ``"plan"`` once (returns the
    number of ranges), ``"sort"`` per range, ``"exact"`` per range (runs with ``exact=True``
    only), ``"write"`` per shard, ``"finish"`` once (returns the stage's summary, ``None`` when
    done already). ``task_memory``: MiB a job holds at most (``split`` sorts runs of half this,
    ``plan`` cuts as many ranges as the records need at this much each). The other steps
    return whether they ran (``False``: done already).
    """
    return json.loads(
        _neardup.stage_rank_step(os.fspath(work_dir), step, index, task_memory)
    )


def bands(work_dir: "str | os.PathLike[str]", shard: int) -> bool:
    """Stage 3: shard ``shard``'s band rows, split into partitions. ``False``: done already."""
    return _neardup.stage_bands(os.fspath(work_dir), shard)


def confirm(
    work_dir: "str | os.PathLike[str]",
    partition: "int | Sequence[int]",
    *,
    progress: Progress = None,
) -> "Optional[Dict[str, Any]] | List[Optional[Dict[str, Any]]]":
    """Stage 4, once every shard is banded: partition ``partition``'s confirmed pairs.

    Given a list of partitions, confirms them in one job and returns each one's summary: a
    document in buckets of several of them is read and signed again once, not once for each
    (the files are those of confirming each alone)."""
    if isinstance(partition, int):
        return _json(_neardup.stage_confirm(os.fspath(work_dir), partition, progress=progress))
    done = _neardup.stage_confirm_group(
        os.fspath(work_dir), [int(p) for p in partition], progress=progress
    )
    return [_json(d) for d in done]


def greedy_round(
    work_dir: "str | os.PathLike[str]",
    round: int,
    partition: int,
    *,
    progress: Progress = None,
) -> Optional[Dict[str, Any]]:
    """Stage 4b, under ``cluster="greedy"``: partition ``partition``'s job of round ``round``
    (1 on; :func:`confirm` ran round 0's), once round ``round - 1`` is settled. Each partition's
    job of a round is independent of the others'."""
    return _json(
        _neardup.stage_greedy_round(os.fspath(work_dir), round, partition, progress=progress)
    )


def greedy_settle(
    work_dir: "str | os.PathLike[str]",
    round: int,
    *,
    progress: Progress = None,
) -> Dict[str, Any]:
    """Settle round ``round`` once every partition's job of it ran. The summary's
    ``undecided`` is 0 when the rounds are over; otherwise round ``round + 1`` comes next."""
    return json.loads(_neardup.stage_greedy_settle(os.fspath(work_dir), round, progress=progress))


def greedy_rounds(work_dir: "str | os.PathLike[str]", *, progress: Progress = None) -> int:
    """Every greedy round still to run, in this process. Returns the number of the last
    round."""
    return run(work_dir, "greedy", progress=progress)["result"]["last"]


def cluster(
    work_dir: "str | os.PathLike[str]",
    *,
    clusters: "str | os.PathLike[str] | None" = None,
    pairs: "str | os.PathLike[str] | None" = None,
    progress: Progress = None,
) -> Dict[str, Any]:
    """Stage 5, once every partition is confirmed: clusters and survivors. ``clusters`` and
    ``pairs`` receive copies of the files ``dedup --clusters`` and ``--pairs`` write."""
    return json.loads(
        _neardup.stage_cluster(
            os.fspath(work_dir),
            None if clusters is None else os.fspath(clusters),
            None if pairs is None else os.fspath(pairs),
            progress=progress,
        )
    )


def cluster_step(
    work_dir: "str | os.PathLike[str]",
    step: str,
    index: Optional[int] = None,
    *,
    round: Optional[int] = None,
    task_memory: int = _D["task_memory"],
    clusters: "str | os.PathLike[str] | None" = None,
    pairs: "str | os.PathLike[str] | None" = None,
) -> Any:
    """One parallel job of stage 5 (``neardup stage cluster --step``), writing the same files
    as :func:`cluster`. In order: ``"plan"``
    once (returns the number of parts), ``"edges"`` per partition and ``"locate"`` per shard
    (``index``), ``"star"`` per part (``index``) for ``round`` 0, 1, ... until
    ``cluster_step(W, "converged", round=r)`` is true, ``"roots"`` per part, ``"attributes"``
    per shard, ``"clusters"`` per part, ``"verdicts"`` per shard, ``"finish"`` once (with
    ``clusters`` and ``pairs``, as :func:`cluster`; returns the stage's summary).
    ``task_memory``: MiB a job holds at most (``plan`` cuts as many parts as the pairs and
    documents need at this much each). The other steps return whether they ran (``False``:
    done already); ``"star"`` whether its part's edges were stars already, ``None`` when done.
    """
    return json.loads(
        _neardup.stage_cluster_step(
            os.fspath(work_dir),
            step,
            index,
            round,
            task_memory,
            None if clusters is None else os.fspath(clusters),
            None if pairs is None else os.fspath(pairs),
        )
    )


def apply(
    work_dir: "str | os.PathLike[str]",
    shard: int,
    output: "str | os.PathLike[str]",
    *,
    progress: Progress = None,
) -> Dict[str, Any]:
    """Stage 6: shard ``shard``'s kept records, tagged, in input order, written to ``output``
    (JSONL, or Parquet for a name ending in ``.parquet``; compressed by its extension)."""
    return json.loads(
        _neardup.stage_apply(os.fspath(work_dir), shard, os.fspath(output), progress=progress)
    )


def report(
    work_dir: "str | os.PathLike[str]",
    reports: List["str | os.PathLike[str]"],
    *,
    output: str = "",
    seconds: Optional[float] = None,
) -> Dict[str, Any]:
    """Once every shard is applied: the run's reports, as ``dedup --report`` writes them (a
    page for a name ending in ``.html``, JSON otherwise); ``output`` is what they name as the
    output, ``seconds`` the run's wall time (``None``: the stages' own times, summed). Returns
    the run's main counts."""
    return json.loads(
        _neardup.stage_report(
            os.fspath(work_dir),
            [os.fspath(r) for r in reports],
            output,
            None if seconds is None else float(seconds),
        )
    )


@dataclass(frozen=True)
class Verdicts:
    """One shard's verdicts, in row order (see :func:`verdicts`)."""

    #: Each document's id, as ``sign`` read it.
    ids: List[str]
    #: The root id of each document's cluster, ``None`` for a document in no cluster.
    cluster: List[Optional[str]]
    #: Whether the clustering keeps each document.
    survives: np.ndarray
    #: The id of the document of each document's cluster that the run keeps (its own id for
    #: a document in no cluster).
    survivor: List[str]
    #: With ``against``: the id of the indexed document each document matched, else ``None``.
    matched: List[Optional[str]]
    #: Whether a dropping run writes each document: it survives and matched no index.
    kept: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


def verdicts(work_dir: "str | os.PathLike[str]", shard: int) -> Verdicts:
    """Shard ``shard``'s verdicts once :func:`cluster` has run, in the shard's row order: for
    a caller that filters or tags the records itself instead of :func:`apply`. The stage files
    are checked as every stage checks them."""
    ids, cluster, survives, survivor, matched, kept = _neardup.stage_verdicts(os.fspath(work_dir), shard)
    return Verdicts(
        ids=ids,
        cluster=cluster,
        survives=np.frombuffer(survives, dtype=np.uint8).astype(bool),
        survivor=survivor,
        matched=matched,
        kept=np.frombuffer(kept, dtype=np.uint8).astype(bool),
    )


def removed(work_dir: "str | os.PathLike[str]", path: "str | os.PathLike[str]") -> int:
    """Once :func:`cluster` has run: write the documents a dropping run removes to ``path``, as
    ``neardup dedup --removed`` does (Parquet: ``id``, ``root``, ``survivor``, in input order;
    NeMo Curator's removal workflow reads it as its ids to remove). Returns how many."""
    return _neardup.stage_removed(os.fspath(work_dir), os.fspath(path))
