"""Hugging Face ``datasets``: dedup and decontamination that return datasets.

A ``Dataset`` (a view made by ``shuffle``, ``filter`` or ``select`` included: its rows are
read through its indices mapping, in its order) comes back as a ``Dataset`` of the rows kept,
made by ``select`` over the same backing table, or with tag columns added. A ``DatasetDict``
is deduped across its splits, as one corpus: a test document and its train twin are one
cluster, and ``split_priority`` says which split's copy survives.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from . import dedup as _dedup
from .tables import (
    _add_columns,
    _inputs,
    _keep_rows,
    _protected,
    _tags,
    decontaminate_table,
    dedup_table,
)

__all__ = ["dedup", "decontaminate"]


def _is_dict(ds: Any) -> bool:
    return isinstance(ds, dict) and type(ds).__module__.startswith("datasets.")


def dedup(
    ds: Any,
    *,
    column: str = "text",
    id_column: Optional[str] = None,
    tag: bool = False,
    split_priority: Optional[Sequence[str]] = None,
    keep_values: Any = None,
    groups: Any = None,
    **options: Any,
) -> Any:
    """Near-dedup a ``Dataset`` or a ``DatasetDict``, as ``neardup dedup`` does files.

    Returns the same kind: the rows kept or, with ``tag=True``, every row with
    ``minhash_cluster`` (and ``minhash_survivor`` where ``keep`` may keep another row than the
    root), as :func:`neardup.dedup_table`. Without ``id_column``, a row's id is its position,
    zero-padded; in a ``DatasetDict`` prefixed by its split (``"test/0042"``), so tags name
    the split and row. A ``DatasetDict``'s splits are one corpus: a cluster may span splits,
    and with ``split_priority`` (split names, the one to keep first) the survivor comes from
    the first split listed that has a member (then the smallest id); a split not listed comes
    after those listed. ``keep_values`` and ``groups`` name columns there. The other options
    are :func:`neardup.dedup`'s.
    """
    if not _is_dict(ds):
        if split_priority is not None:
            raise ValueError("split_priority orders the splits of a DatasetDict")
        return dedup_table(
            ds, column=column, id_column=id_column, tag=tag, keep_values=keep_values,
            groups=groups, **options
        )
    names = list(ds.keys())
    priority = list(split_priority or [])
    unknown = [s for s in priority if s not in names]
    if unknown:
        raise ValueError(f"split_priority names {unknown}, not splits of this DatasetDict ({names})")
    for what, v in (("keep_values", keep_values), ("groups", groups)):
        if v is not None and not isinstance(v, str):
            raise TypeError(f"{what} of a DatasetDict names a column, not values")
    if priority:
        if options.get("keep", "smallest-id") != "smallest-id" or keep_values is not None:
            raise ValueError(
                "split_priority is the keep policy (keep='max' over each split's rank): "
                "it takes no keep or keep_values of its own"
            )
        options = dict(options, keep="max")
    width = len(str(max(max((len(ds[s]) for s in names), default=1) - 1, 0)))
    ids: List[Any] = []
    texts: List[Any] = []
    kv: Optional[List[Optional[float]]] = [] if (priority or keep_values) else None
    gr: Optional[List[Optional[str]]] = [] if groups else None
    sizes: List[int] = []
    for s in names:
        i, t, k, g = _inputs(ds[s], column, id_column, keep_values, groups, f"{s}/", width)
        n = len(t)
        sizes.append(n)
        ids.extend(i.to_pylist() if hasattr(i, "to_pylist") else i)
        texts.extend(t.chunks)
        if priority:
            rank = float(len(priority) - priority.index(s)) if s in priority else 0.0
            kv.extend([rank] * n)  # type: ignore[union-attr]
        elif kv is not None:
            kv.extend(k)  # type: ignore[arg-type]
        if gr is not None:
            gr.extend(g)  # type: ignore[arg-type]
    r = _dedup(ids, _texts(texts), keep_values=kv, groups=gr, **options)
    bounds = np.cumsum([0] + sizes)
    out: Dict[str, Any] = {}
    tags = _tags(r, options) if tag else None
    for j, s in enumerate(names):
        lo, hi = int(bounds[j]), int(bounds[j + 1])
        if tags is not None:
            out[s] = _add_columns(ds[s], {k: v[lo:hi] for k, v in tags.items()})
        else:
            out[s] = _keep_rows(ds[s], r.survives[lo:hi])
    return type(ds)(out)


def _texts(chunks: List[Any]) -> Any:
    """One chunked array of every split's texts (a common string type where they differ)."""
    import pyarrow as pa

    types = {c.type for c in chunks}
    if len(types) > 1:
        chunks = [c.cast(pa.large_string()) for c in chunks]
    if not chunks:
        return pa.chunked_array([], type=pa.string())
    return pa.chunked_array(chunks)


def decontaminate(
    ds: Any,
    protected: Any,
    *,
    column: str = "text",
    tag: bool = False,
    min_score: Optional[float] = None,
    n: Optional[int] = None,
) -> Any:
    """Drop the rows of a ``Dataset`` (or of each split of a ``DatasetDict``) that leak
    protected text, as ``neardup decontam`` does, or with ``tag=True`` add the ``decontam``
    column. ``protected`` is a :class:`neardup.Protected` (built once, reused) or protected
    files' paths; see :func:`neardup.decontaminate_table`."""
    p = _protected(protected, n)
    if not _is_dict(ds):
        return decontaminate_table(ds, p, column=column, tag=tag, min_score=min_score)
    return type(ds)(
        {
            s: decontaminate_table(ds[s], p, column=column, tag=tag, min_score=min_score)
            for s in ds.keys()
        }
    )

