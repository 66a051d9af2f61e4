"""neardup: near-duplicate removal for text corpora, from Python.

MinHash signatures under the ``neardup-minhash-v1`` contract (``docs/SPEC.md``), bit for bit
the same as the ``neardup`` command line, from the CPU engine or the GPU engine; in-memory
near-dedup with the command line's options, of tables of any kind (:func:`dedup_table`; Hugging
Face datasets in :mod:`neardup.hf`); decontamination against a protected set
(:class:`Protected`); the sharded stages over files
(:mod:`neardup.stages`); and a driver that runs them on a Ray cluster (:mod:`neardup.ray`).

Errors are :class:`NeardupError`, with the message the command line prints. The engines run
with the GIL released, and are kept from one call to the next (see :func:`release_engines`).
"""

from __future__ import annotations

from dataclasses import dataclass
import json
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np

from . import _neardup
from ._neardup import CONTRACT_VERSION, NeardupError

__all__ = [
    "CONTRACT_VERSION",
    "DedupResult",
    "NeardupError",
    "dedup",
    "Protected",
    "decontaminate_table",
    "dedup_table",
    "defaults",
    "release_engines",
    "signatures",
]
__version__: str = _neardup.__version__

# Every option's default, from the library: the command line shows the same ones.
_D: Dict[str, Any] = json.loads(_neardup.defaults())


def defaults() -> Dict[str, Any]:
    """Every option's default, by its keyword (``k``, ``num_perm``, ``threshold``, ...), as the
    library holds them; the command line's flags show the same ones."""
    return dict(_D)


def _arrow_or_list(texts: Any, column: Optional[str] = None) -> Any:
    """Arrow data for a Hugging Face ``datasets.Dataset`` or ``Column``; anything else as it is.

    A ``Dataset`` made by ``shuffle``, ``filter``, ``select`` or a split is a view: its rows
    are an indices mapping over a backing table that holds other rows, in another order. The
    Arrow formatter applies that mapping, so the rows read are the view's, in its order (of
    an unmapped dataset, a slice of the table, without a copy). Of a table only ``column`` is
    taken, where it has one, so a mapping copies that column alone.
    """
    if not type(texts).__module__.startswith("datasets."):
        return texts
    if hasattr(texts, "source") and hasattr(texts, "column_name"):
        # ``ds["text"]`` (datasets 4 and later): a lazy column of its source dataset or column.
        source = _arrow_or_list(texts.source, texts.column_name)
        name = texts.column_name
        if hasattr(source, "column"):
            return source.column(name)
        import pyarrow as pa
        import pyarrow.compute as pc

        return pa.chunked_array(
            [pc.struct_field(c, name) for c in source.chunks], type=source.type.field(name).type
        )
    if hasattr(texts, "with_format") and hasattr(texts, "column_names"):
        mapped = getattr(texts, "_indices", None) is not None
        if column is not None and column in texts.column_names:
            texts = texts.select_columns([column])
        table = texts.with_format("arrow")[:]
        if mapped:
            # Gathered through the mapping, the rows come in runs of their own: one array, not
            # thousands of small ones (the gather copied them anyway).
            try:
                table = table.combine_chunks()
            except Exception:  # past 2 GiB of strings in one array: left in chunks
                pass
        return table
    return texts


def signatures(
    texts: Any,
    *,
    k: int = _D["k"],
    num_perm: int = _D["num_perm"],
    seed: int = _D["seed"],
    shingle: str = _D["shingle"],
    normalize: str = _D["normalize"],
    engine: str = _D["engine"],
    threads: int = _D["threads"],
    column: str = "text",
    gpu_kernels: str = _D["gpu_kernels"],
    gpu_int64: bool = _D["gpu_int64"],
) -> np.ndarray:
    """MinHash signatures of ``texts``: a ``uint32`` array of shape ``[len(texts), num_perm]``.

    ``texts`` is a list of ``str``, or Arrow strings from anything that speaks the Arrow
    PyCapsule interface (a pyarrow ``Array``, ``ChunkedArray`` or ``Table``, a polars
    ``Series`` or ``DataFrame``, a Hugging Face ``datasets.Dataset``); a table's column
    ``column`` is read. Arrow strings are read in place, without a copy. Row ``i`` equals the
    ``neardup signatures`` row of the same text with the same ``k``, ``num_perm`` and ``seed``
    (and ``shingle``, ``"word"`` or ``"char"``, and ``normalize``, ``"none"``, ``"nfc"`` or
    ``"nfkc"``: the contract's text options).

    ``engine`` is ``"auto"`` (a hardware GPU where it signs faster, else the CPU; the result's
    ``engine`` says which and why), ``"cpu"`` or
    ``"gpu"``; ``threads`` sizes the CPU engine (0: all cores). ``gpu_kernels`` (``"split"``
    or ``"fused"``, the command line's ``--gpu-kernels``) picks the GPU engine's kernels, and
    ``gpu_int64=True`` (``--gpu-int64``) runs them on the adapter's native 64-bit integers; the
    signatures are the same bits either way.
    """
    buf, n, _info = _neardup.signatures(
        _arrow_or_list(texts, column),
        k=k,
        num_perm=num_perm,
        seed=seed,
        shingle=shingle,
        normalize=normalize,
        engine=engine,
        threads=threads,
        column=column,
        gpu_kernels=gpu_kernels,
        gpu_int64=gpu_int64,
    )
    return np.frombuffer(buf, dtype=np.uint32).reshape(n, num_perm)


@dataclass(frozen=True)
class DedupResult:
    """What :func:`dedup` found, one entry per document in input order."""

    #: The index of each document's cluster root (the cluster's smallest id; under
    #: ``cluster="greedy"`` its surviving document; a document in no cluster is its own root).
    root: np.ndarray
    #: The root's id, per document (``meta.minhash_cluster`` of the command line's output).
    root_id: list
    #: Whether each document survives a dropping run (in no cluster, or its cluster's survivor
    #: under the keep policy).
    survives: np.ndarray
    #: Whether each document is an exact duplicate of one with a smaller id (``exact=True``).
    exact_duplicate: np.ndarray
    #: The size of each document's cluster (1 for a document in none).
    cluster_size: np.ndarray
    #: The id of the document of each document's cluster that a dropping run keeps (its own id
    #: for a document in no cluster): the root, unless ``keep`` chose another member.
    survivor_id: list
    #: The clustering's counts: ``clusters``, ``near_duplicates``, ``exact_duplicates``,
    #: ``pairs_checked``, ``pairs_confirmed``, ``cluster_sizes`` and the stages' seconds.
    stats: Dict[str, Any]
    #: The engine that signed.
    engine: str


def _options(**kw: Any) -> Dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def release_engines() -> int:
    """Free the engines kept between calls, and return how many there were.

    Building an engine costs more than signing a small batch (a GPU engine opens its device and
    compiles its shaders; a CPU engine starts its threads), so each call of :func:`signatures`,
    :func:`dedup` and :func:`neardup.stages.sign` takes an idle engine an earlier call made
    with the same options (``engine``, ``threads``, the signature parameters and the GPU
    options), and keeps it afterwards if the call succeeded: up to two (past that, the one idle
    longest is freed). They hold their threads, and a GPU engine its device memory, until this
    is called (or the process ends).
    A child forked after a call can use none of them, nor call at all (it raises
    :class:`NeardupError`): start such children with ``multiprocessing.get_context("spawn")``.
    """
    return _neardup.release_engines()


def dedup(
    ids: Any,
    texts: Any,
    *,
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
    keep: str = _D["keep"],
    keep_values: Optional[Sequence[Optional[float]]] = None,
    groups: Optional[Sequence[Optional[str]]] = None,
    group_missing: str = _D["group_missing"],
    cluster: str = _D["cluster"],
    engine: str = _D["engine"],
    threads: int = _D["threads"],
    gpu_kernels: str = _D["gpu_kernels"],
    gpu_int64: bool = _D["gpu_int64"],
    progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None,
) -> DedupResult:
    """Near-dedup documents in memory, as ``neardup dedup`` does files.

    ``ids`` and ``texts`` are lists of ``str`` or Arrow string arrays, one per document; ids
    are unique. The options are the command line's, with its defaults: ``bands`` x ``rows``
    must equal ``num_perm``; ``confirm`` is ``"jaccard"``, ``"estimate"`` or ``"none"``;
    ``keep`` is ``"smallest-id"``, ``"first"``, ``"longest"``, or ``"max"``/``"min"`` of
    ``keep_values`` (one number per document); ``groups`` (one name, or ``None``, per
    document) keeps clusters within groups, and ``group_missing="own"`` puts documents without
    one in a group of their own. ``cluster="greedy"`` drops a document only when an already
    kept document (in ``keep`` order) is its confirmed near duplicate, and makes that document
    its root (``"components"``, the default: connected components, one survivor each).
    ``engine``, ``threads``, ``gpu_kernels`` and
    ``gpu_int64`` are :func:`signatures`'s.

    ``progress``, when given, is called as ``progress(stage, done, total, docs)`` while the
    run goes: the stage's name (``"signing"``, then the clustering steps), input bytes done and
    their total (``None`` for a step without a size) and documents so far; at most ten times a
    second per stage, and once when it ends. A notebook can drive a ``tqdm`` bar with it. An
    exception it raises is raised when the run is over.
    """
    options = _options(
        k=k,
        num_perm=num_perm,
        seed=seed,
        shingle=shingle,
        normalize=normalize,
        bands=bands,
        rows=rows,
        threshold=threshold,
        confirm=confirm,
        exact=exact,
        keep=keep,
        group_missing=group_missing,
        cluster=cluster,
    )
    ids = _arrow_or_list(ids, "id")
    texts = _arrow_or_list(texts, "text")
    root, survives, exact_dup, stats, info = _neardup.dedup(
        ids,
        texts,
        options,
        keep_values=None if keep_values is None else [None if v is None else float(v) for v in keep_values],
        groups=None if groups is None else list(groups),
        engine=engine,
        threads=threads,
        gpu_kernels=gpu_kernels,
        gpu_int64=gpu_int64,
        progress=progress,
    )
    root_a = np.frombuffer(root, dtype=np.uint32)
    if hasattr(ids, "column_names") and "id" in ids.column_names:
        ids = ids.column("id")
    id_list = ids.to_pylist() if hasattr(ids, "to_pylist") else (ids.to_list() if hasattr(ids, "to_list") else list(ids))
    survives_a = np.frombuffer(survives, dtype=np.uint8).astype(bool)
    size_of_root = np.bincount(root_a, minlength=len(root_a))
    # Each cluster's surviving member, by root (every cluster has one).
    survivor_of_root = np.arange(len(root_a), dtype=np.int64)
    survivor_of_root[root_a[survives_a]] = np.flatnonzero(survives_a)
    roots = root_a.tolist()
    survivor = survivor_of_root[root_a].tolist()
    return DedupResult(
        root=root_a,
        root_id=[id_list[r] for r in roots],
        survives=survives_a,
        exact_duplicate=np.frombuffer(exact_dup, dtype=np.uint8).astype(bool),
        cluster_size=size_of_root[root_a],
        survivor_id=[id_list[d] for d in survivor],
        stats=json.loads(stats),
        engine=info,
    )


# Built on dedup above: imported last.
from .decontam import Protected  # noqa: E402
from .tables import decontaminate_table, dedup_table  # noqa: E402
