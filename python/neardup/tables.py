"""Dedup and decontamination of a whole table, returned as the kind of table it was given.

A pyarrow ``Table``, a polars or pandas ``DataFrame`` or a Hugging Face ``datasets.Dataset``
goes in; the same kind comes out, with the dropped rows gone (their other columns untouched,
in order) or, with ``tag=True``, every row and the columns a ``neardup dedup --tag-only`` (or
``decontam --mode tag``) Parquet output adds.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import dedup as _dedup
from .decontam import Protected

__all__ = ["dedup_table", "decontaminate_table", "CLUSTER_TAG", "SURVIVOR_TAG", "DECONTAM_TAG"]

#: The column naming each clustered row's cluster root (``--tag-only``'s ``minhash_cluster``).
CLUSTER_TAG = "minhash_cluster"
#: The column naming the row a dropping run keeps of the cluster, where ``keep`` may choose
#: another than the root (``minhash_survivor``).
SURVIVOR_TAG = "minhash_survivor"
#: The column of ``decontam --mode tag``: what caught a row, as JSON.
DECONTAM_TAG = "decontam"


def _kind(table: Any) -> str:
    mod = type(table).__module__
    for prefix, kind in (
        ("pyarrow", "arrow"),
        ("polars", "polars"),
        ("pandas", "pandas"),
        ("datasets", "dataset"),
    ):
        if mod.startswith(prefix):
            if kind == "dataset" and not hasattr(table, "column_names"):
                break
            return kind
    raise TypeError(
        f"a table is a pyarrow Table, a polars or pandas DataFrame or a datasets.Dataset, "
        f"not {type(table).__name__}"
    )


def _columns_of(table: Any) -> List[str]:
    kind = _kind(table)
    if kind == "arrow":
        return list(table.column_names)
    if kind == "dataset":
        return list(table.column_names)
    return [str(c) for c in table.columns]


def _arrow(table: Any, columns: Sequence[str]) -> Any:
    """The ``columns`` of ``table`` as a pyarrow Table (read in place where the kind allows)."""
    import pyarrow as pa

    have = _columns_of(table)
    for c in columns:
        if c not in have:
            raise ValueError(f"the table has no column {c!r} (columns: {', '.join(have)})")
    kind = _kind(table)
    cols = list(dict.fromkeys(columns))
    if kind == "arrow":
        return table.select(cols)
    if kind == "polars":
        return table.select(cols).to_arrow()
    if kind == "pandas":
        return pa.Table.from_pandas(table[cols], preserve_index=False)
    from . import _arrow_or_list

    return _arrow_or_list(table.select_columns(cols))


def _strings(col: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col
    return pc.cast(col, pa.string())


def row_ids(n: int, prefix: str = "", width: Optional[int] = None) -> List[str]:
    """Ids for rows without an id column: each row's position, zero-padded so that ids sort as
    the rows do (the smallest id, a cluster's root, is its first row), after ``prefix``."""
    w = width if width is not None else len(str(max(n - 1, 0)))
    return [f"{prefix}{i:0{w}d}" for i in range(n)]


def _inputs(
    table: Any,
    column: str,
    id_column: Optional[str],
    keep_values: Any,
    groups: Any,
    prefix: str = "",
    width: Optional[int] = None,
) -> Tuple[Any, Any, Optional[List[Optional[float]]], Optional[List[Optional[str]]]]:
    """The ids, texts, keep values and groups of ``table``'s rows (a column name for
    ``keep_values`` or ``groups`` names a column of the table); without an id column, the
    :func:`row_ids` with ``prefix`` and ``width``."""
    wanted = [column]
    for c in (id_column, keep_values, groups):
        if isinstance(c, str):
            wanted.append(c)
    t = _arrow(table, wanted)
    texts = t.column(column)
    ids: Any = row_ids(t.num_rows, prefix, width) if id_column is None else _strings(t.column(id_column))
    if isinstance(keep_values, str):
        keep_values = t.column(keep_values).to_pylist()
    if isinstance(groups, str):
        groups = _strings(t.column(groups)).to_pylist()
    return ids, texts, keep_values, groups


def _tags(result: Any, options: Dict[str, Any]) -> Dict[str, List[Optional[str]]]:
    """The tag columns of ``--tag-only``: each clustered row's root and, where ``keep`` may
    choose another row than the root under components, the row a dropping run keeps; ``None``
    for a row in no cluster."""
    clustered = (result.cluster_size > 1).tolist()
    tags = {CLUSTER_TAG: [r if c else None for r, c in zip(result.root_id, clustered)]}
    keep = options.get("keep", "smallest-id")
    if keep != "smallest-id" and options.get("cluster", "components") == "components":
        tags[SURVIVOR_TAG] = [s if c else None for s, c in zip(result.survivor_id, clustered)]
    return tags


def _keep_rows(table: Any, mask: np.ndarray) -> Any:
    """``table`` with the rows of ``mask`` only, in order; the same kind of table."""
    kind = _kind(table)
    if kind == "arrow":
        import pyarrow as pa

        return table.filter(pa.array(mask, type=pa.bool_()))
    if kind == "polars":
        import polars as pl

        return table.filter(pl.Series(mask))
    if kind == "pandas":
        return table[mask]
    return table.select(np.flatnonzero(mask).tolist())


def _add_columns(table: Any, columns: Dict[str, List[Optional[str]]]) -> Any:
    """``table`` with string ``columns`` added after its own (a name it has is an error)."""
    have = _columns_of(table)
    for name in columns:
        if name in have:
            raise ValueError(f"the table already has a column {name!r}, which tagging would add")
    kind = _kind(table)
    if kind == "arrow":
        import pyarrow as pa

        for name, values in columns.items():
            table = table.append_column(name, pa.array(values, type=pa.string()))
        return table
    if kind == "polars":
        import polars as pl

        return table.with_columns(
            [pl.Series(name, values, dtype=pl.Utf8) for name, values in columns.items()]
        )
    if kind == "pandas":
        return table.assign(**columns)
    for name, values in columns.items():
        table = table.add_column(name, values)
    return table


def dedup_table(
    table: Any,
    *,
    column: str = "text",
    id_column: Optional[str] = None,
    tag: bool = False,
    keep_values: Union[str, Sequence[Optional[float]], None] = None,
    groups: Union[str, Sequence[Optional[str]], None] = None,
    **options: Any,
) -> Any:
    """Near-dedup a table's rows, as ``neardup dedup`` does a Parquet file of them, and return
    the same kind of table: the surviving rows or, with ``tag=True``, every row with
    ``minhash_cluster`` (the cluster root's id; ``None`` for a row in no cluster) and, where
    ``keep`` may keep another row than the root, ``minhash_survivor``: the columns
    ``neardup dedup --tag-only`` adds to a Parquet output.

    ``column`` holds the texts; ``id_column`` the ids (as strings; unique), or without one
    each row's zero-padded position is its id, so a cluster's root is its first row.
    ``keep_values`` and ``groups`` may name a column (``keep="max", keep_values="quality"``).
    The other options are :func:`neardup.dedup`'s.
    """
    ids, texts, kv, gr = _inputs(table, column, id_column, keep_values, groups)
    r = _dedup(ids, texts, keep_values=kv, groups=gr, **options)
    if tag:
        return _add_columns(table, _tags(r, options))
    return _keep_rows(table, r.survives)


def _protected(protected: Any, n: Optional[int]) -> Protected:
    if isinstance(protected, Protected):
        if n is not None and n != protected.n:
            raise ValueError(f"n={n}, but the protected set holds {protected.n}-grams")
        return protected
    if isinstance(protected, (str, bytes)) or hasattr(protected, "__fspath__"):
        protected = [protected]
    return Protected.from_files(protected, **({} if n is None else {"n": n}))


def decontaminate_table(
    table: Any,
    protected: Any,
    *,
    column: str = "text",
    tag: bool = False,
    min_score: Optional[float] = None,
    n: Optional[int] = None,
) -> Any:
    """Drop a table's rows that leak protected text, as ``neardup decontam`` does, and return
    the same kind of table: the clean rows or, with ``tag=True``, every row with a ``decontam``
    column (the JSON ``--mode tag`` writes; ``None`` for a clean row). ``protected`` is a
    :class:`neardup.Protected` or protected files' paths (then read with ``n``-grams, 13 by
    default)."""
    p = _protected(protected, n)
    t = _arrow(table, [column])
    if tag:
        _, tags = p.tags(t.column(column), min_score=min_score)
        return _add_columns(table, {DECONTAM_TAG: tags})
    return _keep_rows(table, ~p.check(t.column(column), min_score=min_score))
