"""``neardup.dedup`` in memory equals ``neardup dedup`` on the same documents, and the stages
from Python equal it byte for byte."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import neardup
from neardup import stages
from conftest import need, read_jsonl, run, split_lines


def cli_tags(cli, path, tmp_path, *flags):
    """Each document's cluster tag and whether the dropping run keeps it."""
    tagged = tmp_path / "tagged.jsonl"
    kept = tmp_path / "kept.jsonl"
    run(cli, "dedup", str(path), "-o", str(tagged), "--tag-only", *flags)
    run(cli, "dedup", str(path), "-o", str(kept), *flags)
    tags = [r["meta"]["minhash_cluster"] for r in read_jsonl(tagged)]
    kept_ids = {r["id"] for r in read_jsonl(kept)}
    return tags, kept_ids


@pytest.mark.parametrize(
    "flags,kw",
    [
        ((), {}),
        (("--exact",), {"exact": True}),
        (("--keep", "longest"), {"keep": "longest"}),
        (("--keep", "first", "--threshold", "0.6"), {"keep": "first", "threshold": 0.6}),
        (("--confirm", "estimate"), {"confirm": "estimate"}),
        (("--num-perm", "64", "--bands", "16", "--rows", "4"), {"num_perm": 64, "bands": 16, "rows": 4}),
        (("--cluster", "greedy"), {"cluster": "greedy"}),
        (("--cluster", "greedy", "--keep", "longest", "--exact"),
         {"cluster": "greedy", "keep": "longest", "exact": True}),
    ],
)
def test_in_memory_dedup_equals_the_command_line(cli, example, tmp_path, flags, kw):
    records = read_jsonl(example)
    ids = [r["id"] for r in records]
    texts = [r["text"] for r in records]
    tags, kept_ids = cli_tags(cli, example, tmp_path, *flags)
    got = neardup.dedup(ids, texts, **kw)
    assert got.root_id == tags
    assert [ids[r] for r in got.root] == tags
    assert {i for i, s in zip(ids, got.survives) if s} == kept_ids
    assert got.stats["clusters"] > 0
    size = {t: tags.count(t) for t in set(tags)}
    assert got.cluster_size.tolist() == [size[t] for t in tags]
    kept_in = {t: i for i, t in zip(ids, tags) if i in kept_ids}
    assert got.survivor_id == [kept_in[t] for t in tags]


def test_in_memory_dedup_reads_arrow(example):
    pa = need("pyarrow")
    records = read_jsonl(example)
    ids = [r["id"] for r in records]
    texts = [r["text"] for r in records]
    a = neardup.dedup(ids, texts)
    b = neardup.dedup(pa.array(ids), pa.array(texts))
    np.testing.assert_array_equal(a.root, b.root)
    np.testing.assert_array_equal(a.survives, b.survives)
    assert a.root_id == b.root_id


def test_the_defaults_are_the_command_lines(cli):
    """``neardup.defaults()`` comes from the library, as the flags' defaults do."""
    import inspect
    import re
    import subprocess

    d = neardup.defaults()
    shown = {}
    for command in (["dedup"], ["stage", "init"], ["stage", "rank"]):
        help_text = subprocess.run([cli, *command, "--help"], capture_output=True, text=True).stdout
        for flag, value in re.findall(r"--([a-z0-9-]+)[^\n]*\n(?:(?!\n      --).)*?\[default: ([^\]]+)\]", help_text, re.S):
            shown[flag.replace("-", "_")] = value
    checked = 0
    for key, value in d.items():
        if key in shown:
            assert str(value).lower() == shown[key].lower(), (key, value, shown[key])
            checked += 1
    assert checked >= 15, shown
    # The wrappers' keyword defaults are the same values.
    for fn in (neardup.dedup, neardup.signatures, stages.init, stages.sign, stages.rank):
        for name, p in inspect.signature(fn).parameters.items():
            if name in d and p.default is not inspect.Parameter.empty:
                assert p.default == d[name], (fn.__name__, name)
    with pytest.raises(ValueError, match="confirm \"exact\": jaccard, estimate or none"):
        neardup.dedup(["a"], ["b"], confirm="exact")


def test_options_are_checked_by_name_and_type():
    """Every dedup option is a keyword of ``stages.init``; a value of the wrong type is a
    ``TypeError`` and one the option does not take a ``ValueError``, each naming the option."""
    import inspect

    d = neardup.defaults()
    not_init = {"engine", "threads", "gpu_kernels", "gpu_int64", "sort_memory", "task_memory"}
    assert set(d) - not_init <= set(inspect.signature(stages.init).parameters)
    with pytest.raises(TypeError, match="option k: invalid type: floating point"):
        neardup.dedup(["a"], ["x"], k=2.5)
    with pytest.raises(TypeError, match="option k: invalid type: boolean"):
        neardup.dedup(["a"], ["x"], k=True)
    with pytest.raises(TypeError, match="option num_perm: invalid value"):
        neardup.dedup(["a"], ["x"], num_perm=-1)
    with pytest.raises(TypeError, match="option exact: invalid type: integer"):
        neardup.dedup(["a"], ["x"], exact=1)
    with pytest.raises(TypeError, match="option threshold: list is not a bool"):
        neardup.dedup(["a"], ["x"], threshold=[0.5])
    with pytest.raises(ValueError, match='normalize "nfd": none, nfc or nfkc'):
        neardup.dedup(["a"], ["x"], normalize="nfd")
    # NumPy's scalars are numbers as Python's are.
    a = neardup.dedup(["a", "b"], ["x y z", "x y z"], k=np.int64(2), threshold=np.float64(0.5))
    b = neardup.dedup(["a", "b"], ["x y z", "x y z"], k=2, threshold=0.5)
    np.testing.assert_array_equal(a.root, b.root)


def test_a_progress_callback_sees_every_stage_and_changes_nothing(example):
    records = read_jsonl(example)
    ids = [r["id"] for r in records]
    # Enough documents that signing reports between slices.
    ids = [f"{i}-{n}" for n in range(20) for i in ids]
    texts = [r["text"] for r in records] * 20
    calls = []
    got = neardup.dedup(ids, texts, engine="cpu", progress=lambda *a: calls.append(a))
    plain = neardup.dedup(ids, texts, engine="cpu")
    np.testing.assert_array_equal(got.root, plain.root)
    np.testing.assert_array_equal(got.survives, plain.survives)
    signing = [c for c in calls if c[0] == "signing"]
    total = sum(len(t.encode()) for t in texts)
    assert signing[0] == ("signing", 0, total, 0)
    assert signing[-1] == ("signing", total, total, len(texts))
    assert all(a[1] <= b[1] for a, b in zip(signing, signing[1:]))
    assert len({c[0] for c in calls}) > 1, calls

    def broken(*_):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        neardup.dedup(ids, texts, engine="cpu", progress=broken)


def test_the_stages_report_progress(example, tmp_path):
    work = tmp_path / "work"
    stages.init(work, [str(example)], partitions=2)
    calls = []
    progress = lambda *a: calls.append(a)
    stages.sign(work, 0, engine="cpu", progress=progress)
    size = example.stat().st_size
    signing = [c for c in calls if c[1] == size]
    assert signing and signing[-1][2] == size and signing[-1][3] == 483, calls
    stages.rank(work, progress=progress)
    stages.bands(work, 0)
    stages.confirm(work, [0, 1], progress=progress)
    stages.cluster(work, progress=progress)
    before = len(calls)
    stages.apply(work, 0, tmp_path / "out.jsonl", progress=progress)
    assert len(calls) > before, "apply reports"
    assert all(isinstance(c[0], str) and c[1] >= 0 for c in calls)

    def broken(*_):
        raise KeyError("from the callback")

    other = tmp_path / "other"
    stages.init(other, [str(example)], partitions=2)
    with pytest.raises(KeyError, match="from the callback"):
        stages.sign(other, 0, engine="cpu", progress=broken)


def test_keep_by_value_and_groups():
    base = " ".join(f"word{i}" for i in range(60))
    ids = ["a", "b", "c", "d"]
    texts = [base, base + " tail", base, base + " tail"]
    r = neardup.dedup(ids, texts, keep="max", keep_values=[0.1, 0.9, 0.5, 0.2])
    assert r.root_id == ["a"] * 4, "the root is the smallest id whoever survives"
    assert r.survives.tolist() == [False, True, False, False]
    # Ties go to the smallest id.
    r = neardup.dedup(ids, texts, keep="min", keep_values=[0.3, 0.3, 0.3, 0.3])
    assert r.survives.tolist() == [True, False, False, False]
    r = neardup.dedup(ids, texts, groups=["x", "y", "x", "y"])
    assert r.root_id == ["a", "b", "a", "b"]
    with pytest.raises(neardup.NeardupError, match=r"row 2 \(id \"c\"\): it has no group"):
        neardup.dedup(ids, texts, groups=["x", "y", None, "y"])
    r = neardup.dedup(ids, texts, groups=["x", None, "x", None], group_missing="own")
    assert r.root_id == ["a", "b", "a", "b"]
    with pytest.raises(neardup.NeardupError, match=r"row 1 \(id \"b\"\): the keep value"):
        neardup.dedup(ids, texts, keep="max", keep_values=[1.0, None, 2.0, 3.0])


def test_bad_dedup_inputs_are_clear_errors():
    with pytest.raises(neardup.NeardupError, match='"a": at row 0 and again at row 2'):
        neardup.dedup(["a", "b", "a"], ["x y", "y z", "z w"])
    with pytest.raises(neardup.NeardupError, match="3 ids but 2 texts"):
        neardup.dedup(["a", "b", "c"], ["x", "y"])
    with pytest.raises(neardup.NeardupError, match="bands x rows"):
        neardup.dedup(["a"], ["x"], num_perm=64)
    with pytest.raises(ValueError, match="not a policy"):
        neardup.dedup(["a"], ["x"], keep="oldest")


def apply_all(work, shards, tmp_path):
    """Every shard's ``apply`` into ``out-S.jsonl``; their bytes, in shard order."""
    outs = []
    for s in range(shards):
        out = tmp_path / f"out-{s}.jsonl"
        stages.apply(work, s, out)
        outs.append(out.read_bytes())
    return outs


@pytest.mark.parametrize("shards,partitions,empty", [(1, 1, -1), (3, 2, 1), (5, 4, -1)])
def test_stages_from_python_equal_the_command_line(cli, example, tmp_path, shards, partitions, empty):
    want = tmp_path / "want.jsonl"
    want_clusters = tmp_path / "want-clusters.jsonl"
    run(cli, "dedup", str(example), "-o", str(want), "--clusters", str(want_clusters), "--exact")
    paths = split_lines(example, tmp_path / "in", shards, empty)
    work = tmp_path / "work"
    assert stages.init(work, paths, partitions=partitions, exact=True) == (shards, partitions)
    assert stages.shape(work) == (shards, partitions)
    with pytest.raises(ValueError, match="gpu_kernels"):
        stages.sign(work, 0, engine="cpu", gpu_kernels="fast")
    for s in range(shards):
        assert stages.sign(work, s, engine="cpu") is not None
        assert stages.sign(work, s, engine="cpu") is None, "a finished stage is skipped"
    with pytest.raises(ValueError, match="at least 1"):
        stages.rank(work, sort_memory=0)
    ranked = stages.rank(work, sort_memory=1)
    assert ranked is not None and ranked["buckets"] == 1, "483 ids sort within 1 MiB"
    assert stages.rank(work) is None, "a finished stage is skipped"
    for s in range(shards):
        assert stages.bands(work, s)
    if partitions == 4:
        # Several partitions in one job: each one's summary, in order, the files the same.
        done = stages.confirm(work, [3, 0, 2])
        assert len(done) == 3 and all(d is not None for d in done)
        again = stages.confirm(work, [0, 1])
        assert again[0] is None and again[1] is not None, "the finished one is skipped"
        assert stages.confirm(work, 1) is None
    else:
        for p in range(partitions):
            assert stages.confirm(work, p) is not None
    got_clusters = tmp_path / "clusters.jsonl"
    summary = stages.cluster(work, clusters=got_clusters)
    assert summary["stats"]["clusters"] > 0
    outs = apply_all(work, shards, tmp_path)
    assert b"".join(outs) == want.read_bytes()
    assert got_clusters.read_bytes() == want_clusters.read_bytes()
    rep = tmp_path / "report.json"
    counts = stages.report(work, [rep], output="out", seconds=1.5)
    r = json.loads(rep.read_text())
    assert r["counts"]["documents_written"] == counts["documents_written"] == sum(
        o.count(b"\n") for o in outs
    )
    assert r["seconds"] == 1.5
    with pytest.raises(neardup.NeardupError, match="other inputs or parameters"):
        stages.init(work, paths, partitions=partitions + 1, exact=True)
    with pytest.raises(neardup.NeardupError, match="shard 99 does not exist"):
        stages.sign(work, 99)


@pytest.mark.parametrize("cluster", ["components", "greedy"])
def test_the_task_loop_from_python_equals_the_command_line(cli, example, tmp_path, cluster):
    want, want_cl = tmp_path / "want.jsonl", tmp_path / "want.clusters.jsonl"
    run(cli, "dedup", str(example), "-o", str(want), "--clusters", str(want_cl), "--exact",
        "--cluster", cluster)
    paths = split_lines(example, tmp_path / "in", 3)
    work, out = tmp_path / "work", tmp_path / "out"
    stages.init(work, paths, partitions=2, exact=True, cluster=cluster, out=out,
                out_report=None)
    kinds = []
    while wave := stages.next_wave(work, task_memory=1, confirm_tasks=1):
        assert len(kinds) < 100, kinds
        kinds.append(stages.task_info(wave[0])["kind"])
        # The wave's tasks in reverse order, each twice: the second is a no-op.
        for task in reversed(wave):
            done = stages.run(work, task, engine="cpu")
            assert done["task"] == task and done["ran"] and done["lines"]
            assert not stages.run(work, task, engine="cpu")["ran"] or task.startswith(
                ("cluster-star", "greedy-settle", "rank-plan", "cluster-plan"))
    assert kinds.count("confirm") == 1 and ("greedy-settle" in kinds) == (cluster == "greedy")
    assert b"".join((out / p.name).read_bytes() for p in paths) == want.read_bytes()
    assert (out / "clusters.jsonl").read_bytes() == want_cl.read_bytes()
    assert sorted(os.listdir(out)) == sorted([p.name for p in paths] + ["clusters.jsonl"])
    assert stages.task_info("cluster-star round=2 part=1") == {
        "kind": "cluster-star", "stage": "cluster", "index": 1, "round": 2, "light": False}
    with pytest.raises(neardup.NeardupError, match="not a task"):
        stages.run(work, "sign shard=zero")


@pytest.mark.parametrize("shards,partitions", [(1, 1), (3, 4)])
def test_greedy_stages_from_python_equal_the_command_line(cli, example, tmp_path, shards,
                                                          partitions):
    want = tmp_path / "want.jsonl"
    want_pairs = tmp_path / "want-pairs.jsonl"
    run(cli, "dedup", str(example), "-o", str(want), "--pairs", str(want_pairs), "--exact",
        "--keep", "longest", "--cluster", "greedy")
    paths = split_lines(example, tmp_path / "in", shards)
    work = tmp_path / "work"
    stages.init(work, paths, partitions=partitions, exact=True, keep="longest", cluster="greedy")
    for s in range(shards):
        stages.sign(work, s, engine="cpu")
    stages.rank(work)
    for s in range(shards):
        stages.bands(work, s)
    stages.confirm(work, list(range(partitions)))
    with pytest.raises(neardup.NeardupError, match="stage greedy"):
        stages.cluster(work)
    # Round by round, the partitions' jobs in reverse order; then every round is done.
    r = 0
    while True:
        if r > 0:
            for p in reversed(range(partitions)):
                assert stages.greedy_round(work, r, p) is not None
                assert stages.greedy_round(work, r, p) is None, "a finished job is skipped"
        settled = stages.greedy_settle(work, r)
        assert settled["round"] == r and settled["dropped"] >= 0
        if settled["undecided"] == 0:
            break
        r += 1
    assert r >= 2, "the example needs several rounds"
    assert stages.greedy_rounds(work) == r
    with pytest.raises(neardup.NeardupError, match="no round"):
        stages.greedy_round(work, r + 1, 0)
    got_pairs = tmp_path / "pairs.jsonl"
    summary = stages.cluster(work, pairs=got_pairs)
    assert summary["rounds"] == r + 1
    outs = apply_all(work, shards, tmp_path)
    assert b"".join(outs) == want.read_bytes()
    assert got_pairs.read_bytes() == want_pairs.read_bytes()


@pytest.mark.parametrize(
    "kw,flags",
    [
        ({}, ()),
        ({"keep": "longest", "exact": True}, ("--keep", "longest", "--exact")),
        ({"cluster": "greedy", "keep": "longest"}, ("--cluster", "greedy", "--keep", "longest")),
        ({"keep": "first", "tag_only": True}, ("--keep", "first")),
    ],
)
def test_shard_verdicts_equal_in_memory_dedup(cli, example, tmp_path, kw, flags):
    """Each shard's verdicts, read back, are the in-memory run's on the same documents: the
    cluster, whether it survives and its cluster's survivor, in row order."""
    records = read_jsonl(example)
    ids = [r["id"] for r in records]
    want = neardup.dedup(ids, [r["text"] for r in records],
                         **{k: v for k, v in kw.items() if k != "tag_only"})
    paths = split_lines(example, tmp_path / "in", 3, 1)
    work, out = tmp_path / "work", tmp_path / "out"
    stages.init(work, paths, partitions=2, out=out, **kw)
    with pytest.raises(neardup.NeardupError, match="cluster"):
        stages.verdicts(work, 0)
    while wave := stages.next_wave(work):
        for task in wave:
            stages.run(work, task, engine="cpu")
    got = [stages.verdicts(work, s) for s in range(3)]
    assert len(got[1]) == 0
    assert sum((v.ids for v in got), []) == ids
    cluster = sum((v.cluster for v in got), [])
    size = {t: want.root_id.count(t) for t in set(want.root_id)}
    assert cluster == [t if size[t] > 1 else None for t in want.root_id]
    assert np.concatenate([v.survives for v in got]).tolist() == want.survives.tolist()
    assert np.concatenate([v.kept for v in got]).tolist() == want.survives.tolist()
    assert sum((v.survivor for v in got), []) == want.survivor_id
    assert all(m is None for v in got for m in v.matched)
    # What the run wrote is what the verdicts say it keeps (all of it, tagged, under tag_only).
    written = [r["id"] for p in paths for r in read_jsonl(out / p.name)]
    kept = [i for v in got for i, k in zip(v.ids, v.kept) if k]
    assert written == (ids if kw.get("tag_only") else kept)
    with pytest.raises(neardup.NeardupError, match="shard 7 does not exist"):
        stages.verdicts(work, 7)


def test_a_directory_of_shards_is_its_files_in_path_order(cli, example, tmp_path):
    paths = split_lines(example, tmp_path / "in" / "sub", 3)
    (tmp_path / "in" / "notes.txt").write_text("not a shard\n")
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want))
    work, out = tmp_path / "work", tmp_path / "out"
    assert stages.init(work, [tmp_path / "in"], partitions=2, out=out) == (3, 2)
    while wave := stages.next_wave(work):
        for task in wave:
            stages.run(work, task, engine="cpu")
    assert b"".join((out / p.name).read_bytes() for p in paths) == want.read_bytes()
    with pytest.raises(neardup.NeardupError, match="matches --glob"):
        stages.init(tmp_path / "w3", [tmp_path / "in"], glob="*.parquet")
    assert stages.init(tmp_path / "w4", [tmp_path / "in"], glob="sub/shard-1.jsonl")[0] == 1


def test_a_hugging_face_snapshot_without_ids(cli, example, tmp_path):
    """Parquet files without an id column under a snapshot's folders: ``--id-field @row`` and a
    glob give the same run from the command line and from the stages."""
    pa = need("pyarrow")
    pq = need("pyarrow.parquet")
    texts = [r["text"] for r in read_jsonl(example)]
    snap = tmp_path / "snap"
    for i, split in enumerate(["train", "train", "test"]):
        d = snap / "data" / f"part{i}"
        d.mkdir(parents=True)
        pq.write_table(pa.table({"text": texts[i::3]}), d / f"{split}-0000{i}.parquet")
    (snap / "README.md").write_text("a dataset card\n")
    want, want_cl = tmp_path / "want.parquet", tmp_path / "want.clusters.jsonl"
    run(cli, "dedup", str(snap), "--glob", "data/*/train-*.parquet", "--id-field", "@row",
        "-o", str(want), "--clusters", str(want_cl))
    roots = [json.loads(l)["root"] for l in want_cl.read_text().splitlines()]
    assert roots and all(":0000000" in r and "/train-" in r for r in roots)
    work, out = tmp_path / "work", tmp_path / "out"
    assert stages.init(work, [snap], glob="data/*/train-*.parquet", id_field="@row", out=out)[0] == 2
    while wave := stages.next_wave(work):
        for task in wave:
            stages.run(work, task, engine="cpu")
    assert (out / "clusters.jsonl").read_bytes() == want_cl.read_bytes()
    got = pa.concat_tables([pq.read_table(out / n) for n in ("train-00000.parquet", "train-00001.parquet")])
    assert got.equals(pq.read_table(want))
