"""Decontamination from Python: a protected set built once, checked against batches of texts.

The rule is SPEC §4's and ``neardup decontam``'s: a document is caught when it shares a word
``n``-gram with the protected texts (or holds a short protected text whole), or with
``min_score`` when that share of its words is at least ``min_score``. Building the set reads
the protected files once; each :meth:`Protected.check` runs on every core with the GIL
released, and returns NumPy.
"""

from __future__ import annotations

import json
from os import PathLike
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from . import _neardup
from ._neardup import DECONTAM_N, DECONTAM_PROTECT_SHORT

__all__ = ["Protected", "DECONTAM_N", "DECONTAM_PROTECT_SHORT"]


class Protected:
    """A protected set: ``n``-grams of benchmark texts that no kept document may share.

    ``n`` (13 by default), ``protect_short`` (texts of that many words up to ``n - 1`` are
    protected whole; 0 turns it off), ``join_fields`` (each item of a JSONL or Parquet file is
    one text, its string values joined) and ``task_field`` (the field naming each item's task)
    are ``neardup decontam``'s ``--n``, ``--protect-short``, ``--join-fields`` and
    ``--task-field``. Add files with :meth:`add_file` and texts with :meth:`add_texts`, or
    build one at once with :meth:`from_files`.
    """

    def __init__(
        self,
        n: int = DECONTAM_N,
        *,
        protect_short: int = DECONTAM_PROTECT_SHORT,
        join_fields: bool = False,
        task_field: Optional[str] = None,
    ) -> None:
        self._set = _neardup.Protected(
            n=n, protect_short=protect_short, join_fields=join_fields, task_field=task_field
        )

    @classmethod
    def from_files(
        cls, paths: Iterable[Union[str, "PathLike[str]"]], n: int = DECONTAM_N, **options: Any
    ) -> "Protected":
        """A set of the protected files ``paths``, read as ``decontam --protected`` reads them:
        in JSONL and Parquet every string value is a text (ids and scorer fields aside), any
        other file is one text."""
        p = cls(n, **options)
        for path in paths:
            p.add_file(path)
        return p

    def add_file(self, path: Union[str, "PathLike[str]"]) -> "Protected":
        """Add one protected file; returns the set."""
        self._set.add_file(str(path))
        return self

    def add_texts(self, name: str, texts: Any) -> "Protected":
        """Add protected texts (a list of ``str`` or Arrow strings) as one source named
        ``name``, which tags and :attr:`sources` show; returns the set."""
        self._set.add_texts(name, texts)
        return self

    def check(
        self, texts: Any, *, column: str = "text", min_score: Optional[float] = None
    ) -> np.ndarray:
        """Whether each text is caught: a ``bool`` array, one per text. ``texts`` is a list of
        ``str`` or Arrow strings (a table's column ``column``)."""
        caught, _ = self._set.check(texts, column=column, min_score=min_score, tags=False)
        return np.frombuffer(caught, dtype=np.uint8).astype(bool)

    def tags(
        self, texts: Any, *, column: str = "text", min_score: Optional[float] = None
    ) -> Tuple[np.ndarray, List[Optional[str]]]:
        """:meth:`check`, with each caught text's tag: the JSON ``neardup decontam --mode
        tag`` writes (``score``, ``matched``, ``sources`` and, with a task field, ``tasks``),
        ``None`` for a clean text."""
        caught, tags = self._set.check(texts, column=column, min_score=min_score, tags=True)
        return np.frombuffer(caught, dtype=np.uint8).astype(bool), tags

    def summary(self) -> Dict[str, Any]:
        """The set's shape: ``n``, ``protect_short``, the distinct ``ngrams`` and ``whole``
        texts protected, each file and source with its counts, and the ``warning`` the
        command line prints when some protected texts protect nothing (or ``None``)."""
        return json.loads(self._set.summary())

    @property
    def n(self) -> int:
        return int(self.summary()["n"])

    def __len__(self) -> int:
        s = self.summary()
        return int(s["ngrams"]) + int(s["whole"])

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Protected(n={s['n']}, {s['ngrams']} n-grams, {s['whole']} whole texts, "
            f"{len(s['files'])} sources)"
        )
