"""neardup's MinHash dedup as datatrove pipeline steps.

A datatrove MinHash pipeline (``MinhashDedupSignature -> MinhashDedupBuckets ->
MinhashDedupCluster -> MinhashDedupFilter``, one executor each) runs neardup by swapping the
class names; the readers, writers and executors stay datatrove's::

    from neardup.datatrove import (NeardupConfig, NeardupDedupSignature, NeardupDedupBuckets,
                                   NeardupDedupCluster, NeardupDedupFilter)

What each step does:

- :class:`NeardupDedupSignature` (any number of tasks, after the reader): spools each task's
  documents (id and text, plus the keep and group values when configured) to
  ``OUTPUT/shards/RANK.jsonl``, in stream order.
- :class:`NeardupDedupBuckets` (any number of tasks): makes the neardup work directory in its
  output folder (every task may start it; they agree) and signs the spooled shards, shard
  ``s`` by the task ``s mod world_size``.
- :class:`NeardupDedupCluster` (one task, multi-threaded, out of core): ranks, bands, confirms
  and clusters; writes ``verdicts/RANK.parquet`` per input task (``id``, ``kept``,
  ``cluster``, ``survivor``, ``cluster_id``, ``cluster_size``) and datatrove's own
  ``RANK.remove``/``.clusters``/``.sizes`` files, so datatrove's ``MinhashDedupFilter`` works
  after it unchanged.
- :class:`NeardupDedupFilter` (the first executor's reader and tasks): drops what the verdicts
  drop, after checking that each document is the one that was signed at its position.

:class:`NeardupDedup` is the whole run as one step for a single-task pipeline.

Only plain configuration lives on a step (executors pickle and copy them); folders must be
local paths every task can see, since neardup's stages read and write them directly.
This module imports datatrove; ``import neardup`` does not import it.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

import numpy as np
from datatrove.data import Document, DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.typeshelper import StatHints

from . import NeardupError, _neardup, stages
from . import dedup as _dedup
from .decontam import Protected
from .stages import _D  # every option's default, from the library

__all__ = [
    "NeardupConfig",
    "NeardupDecontFilter",
    "NeardupDedup",
    "NeardupDedupBuckets",
    "NeardupDedupCluster",
    "NeardupDedupFilter",
    "NeardupDedupSignature",
]


@dataclass
class NeardupConfig:
    """The dedup's options, under datatrove's names where they mean the same thing.

    ``n_grams`` is neardup's ``k``, ``num_buckets`` x ``hashes_per_bucket`` its bands x rows
    (their product the signature's length), ``seed`` the contract's seed. The rest are
    ``neardup dedup``'s options. ``keep_field`` (a metadata key) with ``keep="max"`` or
    ``"min"`` keeps the member with the largest or smallest value; ``group_field`` (a metadata
    key, e.g. ``dump``) keeps clusters within groups. ``id_source="doc"`` takes each document's
    ``id`` (ids must be unique); ``"position"`` names documents ``RANK/POSITION``, so that
    ``keep="smallest-id"`` keeps the first in stream order.
    """

    n_grams: int = _D["k"]
    num_buckets: int = 16
    hashes_per_bucket: int = 8
    seed: int = _D["seed"]
    threshold: float = _D["threshold"]
    confirm: str = _D["confirm"]
    exact: bool = _D["exact"]
    keep: str = _D["keep"]
    keep_field: Optional[str] = None
    cluster: str = _D["cluster"]
    group_field: Optional[str] = None
    shingle: str = _D["shingle"]
    normalize: str = _D["normalize"]
    partitions: int = 16
    engine: str = _D["engine"]
    threads: int = _D["threads"]
    id_source: str = "doc"

    def __post_init__(self) -> None:
        if self.id_source not in ("doc", "position"):
            raise ValueError(f"id_source {self.id_source!r} is not 'doc' or 'position'")
        if (self.keep in ("max", "min")) != (self.keep_field is not None):
            raise ValueError("keep='max' or 'min' needs keep_field (a metadata key), and only they use it")

    @classmethod
    def from_minhash_config(cls, config: Any, **options: Any) -> "NeardupConfig":
        """The neardup configuration with a datatrove ``MinhashConfig``'s n-grams, buckets and
        hashes per bucket. Its text normalisation and hash configuration do not carry over:
        neardup's words and hashes are the contract's (``\\w+`` lower-cased; FNV-1a under
        ``(a*x+b) mod 2^31-1``)."""
        return cls(
            n_grams=config.n_grams,
            num_buckets=config.num_buckets,
            hashes_per_bucket=config.hashes_per_bucket,
            **options,
        )

    def key(self) -> str:
        """What the steps of one run must agree on, as text."""
        return json.dumps(asdict(self), sort_keys=True)

    def dedup_options(self) -> Dict[str, Any]:
        """The keyword arguments of :func:`neardup.dedup`."""
        return {
            "k": self.n_grams,
            "num_perm": self.num_buckets * self.hashes_per_bucket,
            "bands": self.num_buckets,
            "rows": self.hashes_per_bucket,
            "seed": self.seed,
            "threshold": self.threshold,
            "confirm": self.confirm,
            "exact": self.exact,
            "keep": self.keep,
            "cluster": self.cluster,
            "shingle": self.shingle,
            "normalize": self.normalize,
        }

    def stage_options(self) -> Dict[str, Any]:
        """The keyword arguments of :func:`neardup.stages.init` over the spooled shards."""
        o = self.dedup_options()
        if self.keep_field is not None:
            o["keep"] = f"field:keep:{self.keep}"
        if self.group_field is not None:
            o["group_field"] = "group"
            o["group_missing"] = "own"
        return o


def _local(folder: Any, what: str) -> str:
    """The local path of a datatrove folder argument; a remote one is refused: neardup's
    stages read and write their files directly, so every task must see them on a file system."""
    df = get_datafolder(folder)
    if not df.is_local():
        raise ValueError(
            f"{what} {df.path!r} is not on a local file system: neardup's stages read and write "
            f"its files directly, so it must be a path every task sees (shared storage); "
            f"readers and writers may stay remote"
        )
    return df.path


def _write_new(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _read_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def _doc_id(doc: Document, rank: int, position: int, config: NeardupConfig) -> str:
    if config.id_source == "position":
        return f"{rank:05d}/{position:012d}"
    if doc.id is None or doc.id == "":
        raise NeardupError(
            f"rank {rank}, position {position}: the document has no id (give the reader an "
            f"id_key, or use NeardupConfig(id_source='position'))"
        )
    return str(doc.id)


def _keep_value(doc: Document, config: NeardupConfig, rank: int, position: int) -> Optional[float]:
    v = doc.metadata.get(config.keep_field) if config.keep_field else None
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise NeardupError(
            f"rank {rank}, position {position}, id {doc.id!r}: metadata {config.keep_field!r} "
            f"is {v!r}, not a number"
        ) from None


def _group_value(doc: Document, config: NeardupConfig) -> Optional[str]:
    v = doc.metadata.get(config.group_field) if config.group_field else None
    return None if v is None else str(v)


def _unique_id(doc: Document, config: NeardupConfig, rank: int, pos: int, seen: Dict[str, int]) -> str:
    """The id of the document at ``pos`` of task ``rank``; ``seen`` maps the ids so far to
    their positions, and a repeated one is an error naming both."""
    i = _doc_id(doc, rank, pos, config)
    if i in seen:
        raise NeardupError(
            f"rank {rank}: id {i!r} is at positions {seen[i]} and {pos}; "
            f"ids must be unique (or use NeardupConfig(id_source='position'))"
        )
    seen[i] = pos
    return i


def _spool_line(doc: Document, config: NeardupConfig, rank: int, pos: int, seen: Dict[str, int]) -> bytes:
    """The JSONL line the stages read for the document at ``pos`` of task ``rank``: its id
    (see :func:`_unique_id`), text, and the keep and group values when configured."""
    rec: Dict[str, Any] = {"id": _unique_id(doc, config, rank, pos, seen), "text": doc.text or ""}
    if config.keep_field:
        rec["keep"] = _keep_value(doc, config, rank, pos)
    if config.group_field:
        rec["group"] = _group_value(doc, config)
    return json.dumps(rec, ensure_ascii=False).encode() + b"\n"


class _Step(PipelineStep):
    type = "🫂 - DEDUP"

    def __init__(self, config: Optional[NeardupConfig]) -> None:
        super().__init__()
        self.config = config or NeardupConfig()

    def _passes(self, doc: Document, kept: bool, exclusion: Any, rank: int) -> bool:
        """Count the document as forwarded or dropped; a dropped one goes to ``exclusion``."""
        if kept:
            self.stat_update(StatHints.forwarded)
            return True
        self.stat_update(StatHints.dropped)
        if exclusion:
            exclusion.write(doc, rank)
        return False


class NeardupDedupSignature(_Step):
    """Step 1 (any number of tasks): spool each task's documents for the stages.

    Writes ``output_folder/shards/RANK.jsonl`` (each document's id and text, in stream order,
    empty texts too, so a row is a position) and ``RANK.json`` (the count and the
    configuration), each whole or not at all. Passes no document on."""

    name = "🎯 neardup 1: spool"

    def __init__(self, output_folder: Any, config: Optional[NeardupConfig] = None) -> None:
        super().__init__(config)
        self.output_folder = _local(output_folder, "output_folder")

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        seen: Dict[str, int] = {}
        shards = os.path.join(self.output_folder, "shards")
        path = os.path.join(shards, f"{rank:05d}.jsonl")
        os.makedirs(shards, exist_ok=True)
        with self.track_time():
            # Streamed to a temporary name: the spool appears whole, and holds no text in memory.
            with open(f"{path}.tmp-{os.getpid()}", "wb") as f:
                for pos, doc in enumerate(data or ()):
                    self.stat_update(StatHints.total)
                    f.write(_spool_line(doc, self.config, rank, pos, seen))
            os.replace(f.name, path)
            meta = {"rank": rank, "world_size": world_size, "documents": len(seen),
                    "config": self.config.key()}
            _write_new(os.path.join(shards, f"{rank:05d}.json"), json.dumps(meta).encode())
        return
        yield  # a generator that passes nothing on


def _spooled(folder: str, config: NeardupConfig) -> List[str]:
    """The spooled shards in rank order, once every task of step 1 has finished."""
    shards = os.path.join(folder, "shards")
    metas = sorted(f for f in os.listdir(shards) if f.endswith(".json")) if os.path.isdir(shards) else []
    if not metas:
        raise NeardupError(f"{shards} holds no spooled shard: run NeardupDedupSignature first")
    world = _read_json(os.path.join(shards, metas[0]))["world_size"]
    paths = []
    for r in range(world):
        meta = os.path.join(shards, f"{r:05d}.json")
        if not os.path.exists(meta):
            raise NeardupError(f"{meta} is missing: task {r} of NeardupDedupSignature has not finished")
        m = _read_json(meta)
        if m["world_size"] != world or m["config"] != config.key():
            raise NeardupError(
                f"{meta} was written by another run (other tasks or configuration): spool again "
                f"into an empty folder"
            )
        paths.append(os.path.join(shards, f"{r:05d}.jsonl"))
    if len(metas) != world:
        raise NeardupError(f"{shards} holds {len(metas)} spooled shards, not {world}: spool again into an empty folder")
    return paths


class NeardupDedupBuckets(_Step):
    """Step 2 (any number of tasks): make the work directory in ``output_folder`` and sign the
    spooled shards; shard ``s`` is signed by task ``s mod world_size``. ``index_folder`` (or a
    list of them): indexes made by ``neardup index build`` whose documents count as kept."""

    name = "🎯 neardup 2: sign"

    def __init__(self, input_folder: Any, output_folder: Any, config: Optional[NeardupConfig] = None,
                 index_folder: Any = None) -> None:
        super().__init__(config)
        self.input_folder = _local(input_folder, "input_folder")
        self.output_folder = _local(output_folder, "output_folder")
        if index_folder is None:
            self.index_folders: List[str] = []
        elif isinstance(index_folder, (list, tuple)):
            self.index_folders = [_local(f, "index_folder") for f in index_folder]
        else:
            self.index_folders = [_local(index_folder, "index_folder")]

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with self.track_time():
            shards = _spooled(self.input_folder, self.config)
            stages.init(self.output_folder, shards, partitions=self.config.partitions,
                        against=self.index_folders, **self.config.stage_options())
            for s in range(rank, len(shards), world_size):
                if stages.sign(self.output_folder, s, engine=self.config.engine,
                               threads=self.config.threads) is not None:
                    self.stat_update("shards_signed")
        return
        yield


def _verdict_files(folder: str, rank: int) -> str:
    return os.path.join(folder, "verdicts", f"{rank:05d}.parquet")


class NeardupDedupCluster(_Step):
    """Step 3 (one task): the rest of the run, over the work directory ``input_folder``.

    Signs any shard left unsigned, then ranks, bands, confirms and clusters, on every core and
    in bounded memory. Writes, into ``output_folder``, ``verdicts/RANK.parquet`` per input task
    and datatrove's ``RANK.remove`` (and with ``save_cluster_id``/``save_cluster_size``,
    ``.clusters``/``.sizes``; cluster ids numbered by each cluster's first member in (rank,
    position) order, as datatrove numbers them), plus ``clusters`` (neardup's clusters file),
    ``report`` and ``removed`` (``dedup --removed``'s Parquet, which NeMo Curator's removal
    workflow reads) when named."""

    name = "🎯 neardup 3: cluster"

    def __init__(self, input_folder: Any, output_folder: Any, config: Optional[NeardupConfig] = None,
                 save_cluster_id: bool = False, save_cluster_size: bool = False,
                 clusters: Optional[str] = "clusters.jsonl", report: Optional[str] = "report.json",
                 removed: Optional[str] = None) -> None:
        super().__init__(config)
        self.input_folder = _local(input_folder, "input_folder")
        self.output_folder = _local(output_folder, "output_folder")
        self.save_cluster_id = save_cluster_id
        self.save_cluster_size = save_cluster_size
        self.clusters = clusters
        self.report = report
        self.removed = removed

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if world_size != 1:
            raise NeardupError(
                f"NeardupDedupCluster runs as one task (it uses every core itself), not {world_size}"
            )
        import pyarrow as pa
        import pyarrow.parquet as pq

        w, out = self.input_folder, self.output_folder
        os.makedirs(out, exist_ok=True)
        with self.track_time():
            shards, _ = stages.shape(w)
            for s in range(shards):
                stages.sign(w, s, engine=self.config.engine, threads=self.config.threads)
            stages.rank(w)
            for s in range(shards):
                stages.bands(w, s)
            stages.confirm(w, list(range(stages.shape(w)[1])))
            if self.config.cluster == "greedy":
                stages.greedy_rounds(w)
            clusters = None if self.clusters is None else os.path.join(out, self.clusters)
            summary = stages.cluster(w, clusters=clusters) or {}
            # Cluster sizes, and ids numbered by first member in (rank, position) order: a
            # first pass over every shard's verdicts, since a cluster's members span shards;
            # the second writes each shard's files.
            size: Dict[str, int] = {}
            number: Dict[str, int] = {}
            for s in range(shards):
                for c in stages.verdicts(w, s).cluster:
                    if c is not None:
                        size[c] = size.get(c, 0) + 1
                        number.setdefault(c, len(number))
            dropped = 0
            for s in range(shards):
                v = stages.verdicts(w, s)
                cid = np.array([-1 if c is None else number[c] for c in v.cluster], dtype=np.int64)
                csize = np.array([1 if c is None else size[c] for c in v.cluster], dtype=np.int64)
                table = pa.table({
                    "id": pa.array(v.ids, pa.string()),
                    "kept": pa.array(v.kept),
                    "cluster": pa.array(v.cluster, pa.string()),
                    "survivor": pa.array(v.survivor, pa.string()),
                    "matched": pa.array(v.matched, pa.string()),
                    "cluster_id": pa.array(cid),
                    "cluster_size": pa.array(csize),
                })
                path = _verdict_files(out, s)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                pq.write_table(table, path + ".tmp")
                os.replace(path + ".tmp", path)
                removed = np.flatnonzero(~v.kept).astype("<u4")
                dropped += len(removed)
                _write_new(os.path.join(out, f"{s:06d}.remove"), removed.tobytes())
                member = np.flatnonzero(cid >= 0).astype("<u4")
                if self.save_cluster_id:
                    pairs = np.stack([member, cid[member].astype("<u4")], axis=1)
                    _write_new(os.path.join(out, f"{s:06d}.clusters"), pairs.astype("<u4").tobytes())
                if self.save_cluster_size:
                    pairs = np.stack([member, csize[member].astype("<u4")], axis=1)
                    _write_new(os.path.join(out, f"{s:06d}.sizes"), pairs.astype("<u4").tobytes())
            if self.removed is not None:
                stages.removed(w, os.path.join(out, self.removed))
            _write_new(os.path.join(out, "verdicts", "tasks.json"), json.dumps({"tasks": shards}).encode())
            stats = summary.get("stats", {})
            self.stat_update("clusters", value=len(number))
            self.stat_update("to_remove", value=dropped)
            self.stat_update("pairs_confirmed", value=int(stats.get("pairs_confirmed", 0)))
            if self.report is not None:
                report = {"shards": shards, "clusters": len(number), "dropped": dropped,
                          "cluster": summary}
                _write_new(os.path.join(out, self.report), json.dumps(report, indent=2).encode())
        return
        yield


def _read_verdicts(folder: str, rank: int) -> Dict[str, Any]:
    import pyarrow.parquet as pq

    path = _verdict_files(folder, rank)
    if not os.path.exists(path):
        raise NeardupError(f"{path} is missing: run NeardupDedupCluster first (or this is not its output folder)")
    t = pq.read_table(path)
    return {c: t.column(c).to_pylist() for c in t.column_names}


def _tag(doc: Document, v: Dict[str, Any], i: int, ids: bool, sizes: bool) -> None:
    doc.metadata["minhash_cluster"] = v["cluster"][i] if v["cluster"][i] is not None else v["id"][i]
    if ids:
        doc.metadata["minhash_cluster_id"] = v["cluster_id"][i]
    if sizes:
        doc.metadata["minhash_cluster_size"] = v["cluster_size"][i]


class NeardupDedupFilter(_Step):
    """Step 4 (the reader and tasks of step 1): drop what the verdicts in ``input_folder`` drop.

    Each document is checked against the one signed at its position (its id, under
    ``id_source="doc"``, and the task's count), so a reader that changed since step 1 is an
    error naming the rank and position, never a silent removal of the wrong documents. Kept
    documents get ``metadata["minhash_cluster"]`` (their cluster's root id, their own when in
    none), and with ``load_cluster_ids``/``load_cluster_sizes`` datatrove's
    ``minhash_cluster_id`` (-1 when in none) and ``minhash_cluster_size``; dropped ones go to
    ``exclusion_writer``."""

    name = "🎯 neardup 4: filter"

    def __init__(self, input_folder: Any, exclusion_writer: Any = None, load_cluster_ids: bool = False,
                 load_cluster_sizes: bool = False, config: Optional[NeardupConfig] = None) -> None:
        super().__init__(config)
        self.input_folder = _local(input_folder, "input_folder")
        self.exclusion_writer = exclusion_writer
        self.load_cluster_ids = load_cluster_ids
        self.load_cluster_sizes = load_cluster_sizes

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        import contextlib

        tasks = os.path.join(self.input_folder, "verdicts", "tasks.json")
        signed = _read_json(tasks)["tasks"] if os.path.exists(tasks) else world_size
        if signed != world_size:
            raise NeardupError(
                f"rank {rank}: step 1 ran as {signed} tasks, this filter as {world_size} (run the "
                f"filter with step 1's reader and tasks)"
            )
        v = _read_verdicts(self.input_folder, rank)
        n = len(v["id"])
        with self.exclusion_writer if self.exclusion_writer else contextlib.nullcontext() as exc:
            pos = -1
            for pos, doc in enumerate(data):
                with self.track_time():
                    if pos >= n:
                        raise NeardupError(
                            f"rank {rank}, position {pos}: step 1 signed {n} documents for this task; "
                            f"the reader yields more (run the filter with step 1's reader and tasks)"
                        )
                    if self.config.id_source == "doc" and str(doc.id) != v["id"][pos]:
                        raise NeardupError(
                            f"rank {rank}, position {pos}: the document is {doc.id!r}, step 1 signed "
                            f"{v['id'][pos]!r} there (run the filter with step 1's reader and tasks)"
                        )
                    self.stat_update(StatHints.total)
                    _tag(doc, v, pos, self.load_cluster_ids, self.load_cluster_sizes)
                    kept = self._passes(doc, v["kept"][pos], exc, rank)
                if kept:
                    yield doc
            if pos + 1 != n:
                raise NeardupError(
                    f"rank {rank}, position {pos + 1}: the reader ended after {pos + 1} documents; "
                    f"step 1 signed {n} for this task (run the filter with step 1's reader and tasks)"
                )


class NeardupDedup(_Step):
    """The whole dedup as one step, for a single-task pipeline: passes on the kept documents in
    input order, tagged as :class:`NeardupDedupFilter` tags them (every document under
    ``tag_only``, with ``metadata["minhash_survives"]``); dropped ones go to
    ``exclusion_writer``. Without ``work_dir`` it holds the stream and dedups it in memory
    (:func:`neardup.dedup`); with one (a local path, empty or of an earlier run of this step)
    it spools the documents there and runs the stages out of core, in bounded memory. With
    several tasks, use the four steps."""

    name = "🎯 neardup: dedup"

    def __init__(self, config: Optional[NeardupConfig] = None, exclusion_writer: Any = None,
                 tag_only: bool = False, work_dir: Any = None) -> None:
        super().__init__(config)
        self.exclusion_writer = exclusion_writer
        self.tag_only = tag_only
        self.work_dir = None if work_dir is None else _local(work_dir, "work_dir")

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        if world_size != 1:
            raise NeardupError(
                f"NeardupDedup sees one task's documents only; with {world_size} tasks it would miss "
                f"duplicates across them: use NeardupDedupSignature/Buckets/Cluster/Filter"
            )
        if self.work_dir is None:
            docs, verdicts = self._in_memory(data, rank)
        else:
            docs, verdicts = self._out_of_core(data, rank)
        yield from self._emit(docs, verdicts, rank)

    def _in_memory(self, data: DocumentsPipeline, rank: int):
        docs: List[Document] = []
        ids: List[str] = []
        seen: Dict[str, int] = {}
        with self.track_time():
            for pos, doc in enumerate(data or ()):
                ids.append(_unique_id(doc, self.config, rank, pos, seen))
                docs.append(doc)
            c = self.config
            r = _dedup(
                ids, [d.text or "" for d in docs], engine=c.engine, threads=c.threads,
                keep_values=[_keep_value(d, c, rank, p) for p, d in enumerate(docs)] if c.keep_field else None,
                groups=[_group_value(d, c) for d in docs] if c.group_field else None,
                group_missing="own",
                **c.dedup_options(),
            )
            self.stat_update("clusters", value=int(r.stats.get("clusters", 0)))
        verdicts = ((r.root_id[p], int(r.cluster_size[p]), bool(r.survives[p])) for p in range(len(docs)))
        return iter(docs), verdicts

    def _out_of_core(self, data: DocumentsPipeline, rank: int):
        import pickle

        w = self.work_dir
        os.makedirs(w, exist_ok=True)
        shard, spool = os.path.join(w, "shard.jsonl"), os.path.join(w, "documents.pickle")
        seen: Dict[str, int] = {}
        with self.track_time():
            # Ids and texts for the stages; whole documents, one pickle each, for the way out.
            with open(shard + ".tmp", "wb") as lines, open(spool, "wb") as whole:
                for pos, doc in enumerate(data or ()):
                    lines.write(_spool_line(doc, self.config, rank, pos, seen))
                    pickle.dump(doc, whole, protocol=pickle.HIGHEST_PROTOCOL)
            seen.clear()
            # A run over other documents starts again; the same documents reuse the stages.
            if not (os.path.exists(shard) and filecmp.cmp(shard, shard + ".tmp", shallow=False)):
                shutil.rmtree(os.path.join(w, "work"), ignore_errors=True)
            os.replace(shard + ".tmp", shard)
            work = os.path.join(w, "work")
            stages.init(work, [shard], partitions=self.config.partitions, **self.config.stage_options())
            while wave := stages.next_wave(work):
                for task in wave:
                    stages.run(work, task, engine=self.config.engine, threads=self.config.threads)
            v = stages.verdicts(work, 0)
            size: Dict[str, int] = {}
            for c in v.cluster:
                if c is not None:
                    size[c] = size.get(c, 0) + 1
            self.stat_update("clusters", value=len(size))

        def documents():
            with open(spool, "rb") as f:
                for _ in range(len(v)):
                    yield pickle.load(f)

        verdicts = ((v.ids[p] if v.cluster[p] is None else v.cluster[p],
                     1 if v.cluster[p] is None else size[v.cluster[p]], bool(v.kept[p]))
                    for p in range(len(v)))
        return documents(), verdicts

    def _emit(self, docs, verdicts, rank: int) -> DocumentsPipeline:
        import contextlib

        with self.exclusion_writer if self.exclusion_writer else contextlib.nullcontext() as exc:
            for doc, (cluster, size, survives) in zip(docs, verdicts):
                self.stat_update(StatHints.total)
                doc.metadata["minhash_cluster"] = cluster
                doc.metadata["minhash_cluster_size"] = size
                if self.tag_only:
                    doc.metadata["minhash_survives"] = survives
                if self._passes(doc, survives or self.tag_only, exc, rank):
                    yield doc


class NeardupDecontFilter(BaseFilter):
    """Drop (or, with ``mode="tag"``, only mark) documents that share an n-gram with protected
    (benchmark) text, as ``neardup decontam`` does.

    ``protected`` is what builds the protected set (each task builds its own): paths of
    protected files (JSONL, Parquet, or plain text) or Documents shaped like datatrove's decontamination
    indexer's input (``text`` the gold answer, ``metadata["query"]`` the question,
    ``metadata["task"]`` the benchmark; ``join_fields`` protects the two as one text). Sets
    datatrove's ``contaminated_task`` (the task, else the source that matched) and
    ``contaminated_ngram`` (how many protected n-grams the document shares: neardup keeps no
    n-gram text), and neardup's ``decontam`` tag."""

    name = "🧹 neardup decontam"

    def __init__(self, protected: Any, n: int = _neardup.DECONTAM_N,
                 protect_short: int = _neardup.DECONTAM_PROTECT_SHORT, join_fields: bool = False,
                 task_field: Optional[str] = None, mode: str = "drop", exclusion_writer: Any = None,
                 batch_size: int = 1000) -> None:
        super().__init__(exclusion_writer=exclusion_writer, batch_size=batch_size)
        if mode not in ("drop", "tag"):
            raise ValueError(f"mode {mode!r} is not 'drop' or 'tag'")
        self.mode = mode
        self.n, self.protect_short, self.join_fields = n, protect_short, join_fields
        self.task_field = task_field
        if isinstance(protected, Protected):
            raise TypeError(
                "pass what builds the protected set (paths or Documents), not a Protected: a step "
                "holds plain configuration, and each task builds its own"
            )
        self.paths: List[str] = []
        self.items: List[Dict[str, Any]] = []
        for p in protected if isinstance(protected, (list, tuple)) else [protected]:
            if isinstance(p, Document):
                item = {"text": p.text}
                if "query" in p.metadata:
                    item["query"] = p.metadata["query"]
                if "task" in p.metadata:
                    item["task"] = p.metadata["task"]
                self.items.append(item)
            else:
                self.paths.append(os.fspath(p))
        self._protected: Optional[Protected] = None

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_protected"] = None
        return state

    def _set(self) -> Protected:
        if self._protected is None:
            p = Protected(n=self.n, protect_short=self.protect_short, join_fields=self.join_fields,
                          task_field=self.task_field)
            for path in self.paths:
                p.add_file(path)
            # Documents: one source per task, so a catch names the task.
            by_task: Dict[str, List[str]] = {}
            for i in self.items:
                parts = [t for t in (i.get("query"), i["text"]) if t]
                texts = [" ".join(parts)] if self.join_fields else parts
                by_task.setdefault(str(i.get("task") or "documents"), []).extend(texts)
            for task, texts in by_task.items():
                p.add_texts(task, texts)
            self._protected = p
        return self._protected

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.filter_batch([doc])[0]

    def filter_batch(self, batch: List[Document]) -> List[bool | tuple[bool, str]]:
        caught, tags = self._set().tags([d.text or "" for d in batch])
        out: List[bool | tuple[bool, str]] = []
        for d, c, t in zip(batch, caught, tags):
            if not c:
                out.append(True)
                continue
            tag = json.loads(t)
            d.metadata["decontam"] = tag
            d.metadata["contaminated_ngram"] = tag["matched"]
            d.metadata["contaminated_task"] = (tag.get("tasks") or tag["sources"])[0]
            out.append(True if self.mode == "tag" else (False, "contaminated"))
        return out
