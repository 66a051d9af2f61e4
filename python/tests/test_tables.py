"""Tables in, the same kind of table out: ``dedup_table``, ``decontaminate_table`` and
``neardup.hf`` equal ``neardup dedup`` and ``neardup decontam`` on a Parquet file of the same
rows, for pyarrow, polars, pandas and Hugging Face datasets (views and splits included)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import neardup
import neardup.hf
from conftest import ROOT, need, read_jsonl, run

PROTECTED = ROOT / "fixtures" / "protected.jsonl"
PROBES = ROOT / "fixtures" / "decontam_probes.jsonl"


def _table(path):
    pa = need("pyarrow")
    rows = read_jsonl(path)
    return pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]})


def _parquet(path, tmp_path, name="in.parquet"):
    pq = need("pyarrow.parquet")
    out = tmp_path / name
    pq.write_table(_table(path), out)
    return out


def _of_kind(table, kind):
    if kind == "arrow":
        return table
    if kind == "polars":
        return need("polars").from_arrow(table)
    if kind == "pandas":
        need("pandas")
        return table.to_pandas()
    return need("datasets").Dataset(table)


def _column(table, name):
    """A column of a table of any kind, as a list."""
    if hasattr(table, "column_names") and hasattr(table, "num_rows") and hasattr(table, "column"):
        return table.column(name).to_pylist()
    if hasattr(table, "get_column"):
        return table.get_column(name).to_list()
    if hasattr(table, "iloc"):
        return [None if v is None or v != v else v for v in table[name].tolist()]
    return list(table[name])


def _cli_parquet(cli, src, tmp_path, *flags):
    """The tagged rows' columns and the kept rows' ids of ``neardup dedup`` on ``src``."""
    pq = need("pyarrow.parquet")
    tagged, kept = tmp_path / "tagged.parquet", tmp_path / "kept.parquet"
    run(cli, "dedup", str(src), "-o", str(tagged), "--tag-only", *flags)
    run(cli, "dedup", str(src), "-o", str(kept), *flags)
    return pq.read_table(tagged), pq.read_table(kept).column("id").to_pylist()


@pytest.mark.parametrize("kind", ["arrow", "polars", "pandas", "dataset"])
@pytest.mark.parametrize(
    "flags,kw",
    [
        ((), {}),
        (("--keep", "longest", "--exact"), {"keep": "longest", "exact": True}),
        (("--cluster", "greedy", "--keep", "longest"), {"cluster": "greedy", "keep": "longest"}),
    ],
)
def test_a_table_of_each_kind_dedups_as_the_command_line_does_its_parquet(
    cli, example, tmp_path, kind, flags, kw
):
    tagged, kept = _cli_parquet(cli, _parquet(example, tmp_path), tmp_path, *flags)
    table = _of_kind(_table(example), kind)

    got = neardup.dedup_table(table, id_column="id", tag=True, **kw)
    assert type(got) is type(table)
    assert _column(got, "id") == tagged.column("id").to_pylist()
    assert _column(got, "text") == tagged.column("text").to_pylist()
    names = [n for n in tagged.column_names if n.startswith("minhash_")]
    assert names == (
        ["minhash_cluster", "minhash_survivor"] if kw.get("keep") and "cluster" not in kw
        else ["minhash_cluster"]
    )
    for n in names:
        assert _column(got, n) == tagged.column(n).to_pylist(), n

    dropped = neardup.dedup_table(table, id_column="id", **kw)
    assert type(dropped) is type(table)
    assert _column(dropped, "id") == kept
    by_id = dict(zip(_column(table, "id"), _column(table, "text")))
    assert _column(dropped, "text") == [by_id[i] for i in kept]
    assert len(kept) < len(by_id)


def test_keep_values_and_groups_may_name_columns(cli, example, tmp_path):
    pa = need("pyarrow")
    pq = need("pyarrow.parquet")
    t = _table(example)
    t = t.append_column("quality", pa.array([float((i * 7) % 11) for i in range(t.num_rows)]))
    t = t.append_column("dump", pa.array([f"d{i % 2}" for i in range(t.num_rows)]))
    src = tmp_path / "scored.parquet"
    pq.write_table(t, src)
    tagged, kept = _cli_parquet(
        cli, src, tmp_path, "--keep", "field:quality:max", "--group-field", "dump"
    )
    got = neardup.dedup_table(t, id_column="id", tag=True, keep="max", keep_values="quality",
                              groups="dump")
    for n in ("minhash_cluster", "minhash_survivor"):
        assert got.column(n).to_pylist() == tagged.column(n).to_pylist(), n
    assert neardup.dedup_table(t, id_column="id", keep="max", keep_values="quality",
                               groups="dump").column("id").to_pylist() == kept


def _positions_jsonl(texts, path, prefix="", width=None, **fields):
    w = width if width is not None else len(str(max(len(texts) - 1, 0)))
    with open(path, "w") as f:
        for i, t in enumerate(texts):
            rec = {"id": f"{prefix}{i:0{w}d}", "text": t}
            rec.update({k: v[i] for k, v in fields.items()})
            f.write(json.dumps(rec) + "\n")
    return path


def test_a_dataset_view_is_read_in_its_own_order_with_positions_for_ids(cli, example, tmp_path):
    datasets = need("datasets")
    texts = [r["text"] for r in read_jsonl(example)]
    ds = datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))})
    view = ds.shuffle(seed=3).filter(lambda r: r["n"] % 7 != 0)
    assert getattr(view, "_indices", None) is not None
    src = _positions_jsonl(view["text"], tmp_path / "view.jsonl")
    tagged = tmp_path / "tagged.jsonl"
    kept = tmp_path / "kept.jsonl"
    run(cli, "dedup", str(src), "-o", str(tagged), "--tag-only")
    run(cli, "dedup", str(src), "-o", str(kept))
    in_cluster = {}
    for r in read_jsonl(tagged):
        in_cluster.setdefault(r["meta"]["minhash_cluster"], []).append(r["id"])
    want = [
        r["meta"]["minhash_cluster"] if len(in_cluster[r["meta"]["minhash_cluster"]]) > 1 else None
        for r in read_jsonl(tagged)
    ]
    got = neardup.hf.dedup(view, tag=True)
    assert got["minhash_cluster"][:] == want
    assert got["n"][:] == view["n"][:]
    out = neardup.hf.dedup(view)
    assert isinstance(out, datasets.Dataset)
    assert out["text"][:] == [r["text"] for r in read_jsonl(kept)]
    assert len(out) < len(view)


def _splits(example):
    """A DatasetDict whose test split holds every fifth document of the example, its train
    split the others: near duplicates fall across the two."""
    datasets = need("datasets")
    texts = [r["text"] for r in read_jsonl(example)]
    train = [t for i, t in enumerate(texts) if i % 5]
    test = [t for i, t in enumerate(texts) if not i % 5]
    return datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"text": train}),
        "test": datasets.Dataset.from_dict({"text": test}),
    })


def test_splits_are_one_corpus_and_the_priority_split_keeps_its_copy(cli, example, tmp_path):
    datasets = need("datasets")
    dd = _splits(example)
    w = len(str(max(len(dd["train"]), len(dd["test"])) - 1))
    src = tmp_path / "all.jsonl"
    with open(src, "w") as f:
        for s, rank in (("train", 0.0), ("test", 1.0)):
            for i, t in enumerate(dd[s]["text"]):
                f.write(json.dumps({"id": f"{s}/{i:0{w}d}", "text": t, "rank": rank}) + "\n")
    tagged, kept = tmp_path / "tagged.jsonl", tmp_path / "kept.jsonl"
    run(cli, "dedup", str(src), "-o", str(tagged), "--tag-only", "--keep", "field:rank:max")
    run(cli, "dedup", str(src), "-o", str(kept), "--keep", "field:rank:max")
    kept_ids = [r["id"] for r in read_jsonl(kept)]

    out = neardup.hf.dedup(dd, split_priority=["test"])
    assert isinstance(out, datasets.DatasetDict)
    by_id = {r["id"]: r["text"] for r in read_jsonl(src)}
    for s in ("train", "test"):
        assert out[s]["text"][:] == [by_id[i] for i in kept_ids if i.startswith(s + "/")], s

    tags = neardup.hf.dedup(dd, split_priority=["test"], tag=True)
    rows = read_jsonl(tagged)
    members = {}
    for r in rows:
        members.setdefault(r["meta"]["minhash_cluster"], []).append(r)
    got = tags["train"]["minhash_survivor"][:] + tags["test"]["minhash_survivor"][:]
    want = [
        r["meta"]["minhash_survivor"] if len(members[r["meta"]["minhash_cluster"]]) > 1 else None
        for r in rows
    ]
    assert got == want
    # Every cluster that spans both splits keeps its test copy: a test document always beats
    # its train twin.
    spanning = [m for m in members.values() if {r["id"][:5] for r in m} == {"train", "test/"}]
    assert spanning
    for m in spanning:
        assert m[0]["meta"]["minhash_survivor"].startswith("test/")
    # The other way round, the train copies survive and test copies are dropped.
    other = neardup.hf.dedup(dd, split_priority=["train"])
    assert len(other["test"]) < len(out["test"])
    assert len(other["train"]) > len(out["train"])


def test_bad_table_calls_are_clear_errors(example):
    datasets = need("datasets")
    t = _table(example)
    with pytest.raises(ValueError, match="no column 'body'"):
        neardup.dedup_table(t, column="body")
    tagged = neardup.dedup_table(t, tag=True)
    with pytest.raises(ValueError, match="already has a column 'minhash_cluster'"):
        neardup.dedup_table(tagged, tag=True)
    with pytest.raises(TypeError, match="not list"):
        neardup.dedup_table([1, 2])
    dd = _splits(example)
    with pytest.raises(ValueError, match="'dev'"):
        neardup.hf.dedup(dd, split_priority=["dev"])
    with pytest.raises(ValueError, match="split_priority is the keep policy"):
        neardup.hf.dedup(dd, split_priority=["test"], keep="longest")
    with pytest.raises(ValueError, match="DatasetDict"):
        neardup.hf.dedup(datasets.Dataset(t), split_priority=["test"])
    with pytest.raises(ValueError, match=r"min_score 0 is outside \(0, 1\]"):
        neardup.Protected.from_files([PROTECTED]).check(["a b c"], min_score=0)
    with pytest.raises(ValueError, match="holds 13-grams"):
        neardup.decontaminate_table(t, neardup.Protected.from_files([PROTECTED]), n=8)
    with pytest.raises(neardup.NeardupError, match="protected.missing"):
        neardup.Protected.from_files([ROOT / "fixtures" / "protected.missing"])


@pytest.mark.parametrize(
    "flags,kw",
    [((), {}), (("--min-score", "0.3"), {"min_score": 0.3}), (("--n", "8"), {"n": 8})],
)
@pytest.mark.parametrize("kind", ["arrow", "dataset"])
def test_decontamination_from_python_equals_the_command_line(cli, tmp_path, flags, kw, kind):
    pq = need("pyarrow.parquet")
    src = _parquet(PROBES, tmp_path)
    clean, tagged = tmp_path / "clean.parquet", tmp_path / "tagged.parquet"
    run(cli, "decontam", str(src), "--protected", str(PROTECTED), "-o", str(clean), *flags)
    run(cli, "decontam", str(src), "--protected", str(PROTECTED), "-o", str(tagged),
        "--mode", "tag", *flags)
    want_clean = pq.read_table(clean).column("id").to_pylist()
    want_tags = pq.read_table(tagged).column("decontam").to_pylist()
    assert any(want_tags) and not all(want_tags)

    table = _of_kind(_table(PROBES), kind)
    p = neardup.Protected.from_files([str(PROTECTED)], **({"n": kw["n"]} if "n" in kw else {}))
    score = {"min_score": kw["min_score"]} if "min_score" in kw else {}
    caught, tags = p.tags(_table(PROBES), **score)
    assert tags == want_tags
    assert caught.tolist() == [t is not None for t in want_tags]
    assert p.check(_table(PROBES)["text"], **score).tolist() == caught.tolist()

    got = neardup.decontaminate_table(table, p, **score)
    assert _column(got, "id") == want_clean
    assert _column(neardup.decontaminate_table(table, p, tag=True, **score), "decontam") == want_tags
    if kind == "dataset":
        assert _column(neardup.hf.decontaminate(table, str(PROTECTED), **kw), "id") == want_clean


def test_a_protected_set_from_texts_and_tasks(cli, tmp_path):
    pq = need("pyarrow.parquet")
    items = read_jsonl(PROTECTED)
    bench = tmp_path / "bench.jsonl"
    with open(bench, "w") as f:
        for i, it in enumerate(items):
            f.write(json.dumps(dict(it, task=f"t{i % 3}")) + "\n")
    src = _parquet(PROBES, tmp_path)
    tagged = tmp_path / "tagged.parquet"
    run(cli, "decontam", str(src), "--protected", str(bench), "-o", str(tagged), "--mode", "tag",
        "--task-field", "task")
    want = pq.read_table(tagged).column("decontam").to_pylist()
    assert any(w and "tasks" in json.loads(w) for w in want)
    p = neardup.Protected(task_field="task").add_file(bench)
    assert p.tags(_table(PROBES))[1] == want
    s = p.summary()
    assert s["n"] == 13 and s["ngrams"] > 0 and {x["task"] for x in s["sources"]} == {"t0", "t1", "t2"}

    # A plain text file is one protected text: added as a file or as a text, the same catch.
    txt = ROOT / "fixtures" / "protected.txt"
    by_file = neardup.Protected().add_file(txt)
    by_text = neardup.Protected().add_texts(str(txt), [txt.read_text()])
    probes = _table(PROBES)
    assert by_file.tags(probes)[1] == by_text.tags(probes)[1]
    assert by_file.check(probes).any()
    assert len(by_file) == len(by_text) > 0
    # Short items: off leaves texts under n words unprotected.
    short = neardup.Protected(protect_short=0).add_texts("s", ["one two three four five six seven eight nine"])
    assert len(short) == 0 and "NOTHING IS PROTECTED" in short.summary()["warning"]
    whole = neardup.Protected().add_texts("s", ["one two three four five six seven eight nine"])
    assert whole.check(["so one two three four five six seven eight nine ten", "one two"]).tolist() == [True, False]
    assert isinstance(np.asarray(whole.check([])), np.ndarray) and len(whole.check([])) == 0
