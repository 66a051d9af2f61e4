"""``neardup.ray.dedup`` on a two-node local Ray cluster equals ``neardup dedup`` byte for
byte, whatever the shards, partitions and workers, and when a worker dies mid-run."""

from __future__ import annotations

import json
import os

import pytest

from conftest import need, run, split_lines


@pytest.fixture(scope="module")
def want(cli, example, tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    out, clusters, report = d / "out.jsonl", d / "clusters.jsonl", d / "report.json"
    run(cli, "dedup", str(example), "-o", str(out), "--clusters", str(clusters),
        "--report", str(report))
    return {"out": out.read_bytes(), "clusters": clusters.read_bytes(),
            "report": json.loads(report.read_text())}


def outputs_of(paths, out_dir):
    return b"".join((out_dir / p.name).read_bytes() for p in paths)


@pytest.mark.parametrize("shards,partitions,empty", [(4, 1, -1), (4, 3, -1), (7, 1, 2), (7, 3, 6)])
def test_ray_dedup_equals_the_command_line(ray_cluster, example, want, tmp_path, shards,
                                           partitions, empty):
    nray = need("neardup.ray")
    paths = split_lines(example, tmp_path / "in", shards, empty)
    out_dir = tmp_path / "out"
    s = nray.dedup(paths, out_dir, work_dir=tmp_path / "work", partitions=partitions,
                   engine="cpu", verbose=False)
    assert outputs_of(paths, out_dir) == want["out"]
    assert (out_dir / "clusters.jsonl").read_bytes() == want["clusters"]
    assert sorted(os.listdir(out_dir)) == sorted([p.name for p in paths] + ["clusters.jsonl", "report.json"])
    report = json.loads((out_dir / "report.json").read_text())
    # Every count but the sets loaded, which out of core is once per partition that needed them.
    counts = lambda r: {k: v for k, v in r["counts"].items() if k != "shingle_sets_loaded"}
    assert counts(report) == counts(want["report"])
    assert report["parameters"] == want["report"]["parameters"]
    assert s["documents_written"] == want["report"]["counts"]["documents_written"]
    assert len(s["workers"]) > 1, f"every task ran in one worker process: {s['workers']}"
    assert s["tasks"]["sign"] == s["tasks"]["bands"] == s["tasks"]["apply"] == shards
    # rank: a split and a write task per shard, one sort task for the one range this corpus
    # needs at the default task memory.
    assert s["tasks"]["rank"] == 2 * shards + 1
    # cluster: edges per partition; locate, attributes and verdicts per shard; star rounds,
    # roots and clusters for the one part.
    assert s["tasks"]["cluster"] >= partitions + 3 * shards + 3
    # confirm: needs per partition, texts per shard (each shard read once), then the groups.
    assert partitions + shards + 1 <= s["tasks"]["confirm"] <= 2 * partitions + shards
    assert set(s["peak_rss"]) == set(s["tasks"]) and min(s["peak_rss"].values()) > 1 << 20
    assert len({w.split(":")[0] for w in s["workers"]}) == 2, "tasks ran on both nodes"


@pytest.mark.parametrize("stage,when", [("apply", "after"), ("confirm", "before"), ("sign", "after"),
                                        ("rank-split", "after"), ("rank-write", "before"),
                                        ("cluster-locate", "after"),
                                        ("cluster-verdicts", "before")])
def test_a_killed_worker_is_retried_and_the_bytes_are_the_same(ray_cluster, example, want,
                                                                tmp_path, stage, when):
    nray = need("neardup.ray")
    marker = ray_cluster["faults"] / f"kill-{stage}-1"
    marker.write_text(when)
    paths = split_lines(example, tmp_path / "in", 4)
    out_dir = tmp_path / "out"
    nray.dedup(paths, out_dir, work_dir=tmp_path / "work", partitions=3, engine="cpu",
               verbose=False)
    assert not marker.exists() and marker.with_name(marker.name + ".done").exists(), \
        "the worker was not killed"
    assert outputs_of(paths, out_dir) == want["out"]
    assert (out_dir / "clusters.jsonl").read_bytes() == want["clusters"]


def test_rank_and_cluster_in_several_tasks_within_a_small_task_memory(ray_cluster, cli, example,
                                                                       tmp_path):
    """``task_memory=1`` on 20,000 documents cuts several id ranges and parts: rank runs a sort
    and an exact task per range and cluster its rounds per part, one task of each killed and
    retried, and the bytes are the command line's."""
    nray = need("neardup.ray")
    corpus = tmp_path / "corpus.jsonl"
    run(cli, "synth", "20000", "--words", "30", "-o", str(corpus))
    with open(corpus, "ab") as f:
        f.write(example.read_bytes())
    want, want_cl = tmp_path / "want.jsonl", tmp_path / "want.clusters.jsonl"
    run(cli, "dedup", str(corpus), "-o", str(want), "--exact", "--clusters", str(want_cl))
    paths = split_lines(corpus, tmp_path / "in", 3)
    markers = [ray_cluster["faults"] / m for m in ("kill-rank-sort-1", "kill-cluster-star0-1")]
    for m in markers:
        m.write_text("before")
    out_dir = tmp_path / "out"
    s = nray.dedup(paths, out_dir, work_dir=tmp_path / "work", partitions=2, engine="cpu",
                   exact=True, task_memory=1, verbose=False)
    for m in markers:
        assert m.with_name(m.name + ".done").exists(), f"{m.name}: the worker was not killed"
    assert outputs_of(paths, out_dir) == want.read_bytes()
    assert (out_dir / "clusters.jsonl").read_bytes() == want_cl.read_bytes()
    ranges = (s["tasks"]["rank"] - 2 * 3) // 2
    assert ranges >= 2 and s["tasks"]["rank"] == 2 * 3 + 2 * ranges, s["tasks"]
    # At least two parts, each in two rounds or more.
    assert s["tasks"]["cluster"] >= 2 + 3 * 3 + 2 * 2 + 2 * 2, s["tasks"]


@pytest.mark.parametrize("partitions,kill", [(1, None), (3, "greedy_round"), (3, "greedy_settle")])
def test_greedy_on_ray_equals_the_command_line(ray_cluster, cli, example, tmp_path, partitions,
                                               kill):
    nray = need("neardup.ray")
    d = tmp_path / "cli"
    d.mkdir()
    run(cli, "dedup", str(example), "-o", str(d / "out.jsonl"), "--clusters",
        str(d / "clusters.jsonl"), "--cluster", "greedy", "--keep", "longest")
    marker = None
    if kill is not None:
        marker = ray_cluster["faults"] / f"kill-{kill}-1"
        marker.write_text("after")
    paths = split_lines(example, tmp_path / "in", 4)
    out_dir = tmp_path / "out"
    s = nray.dedup(paths, out_dir, work_dir=tmp_path / "work", partitions=partitions,
                   engine="cpu", verbose=False, cluster="greedy", keep="longest")
    if marker is not None:
        assert not marker.exists() and marker.with_name(marker.name + ".done").exists(), \
            "the worker was not killed"
    assert outputs_of(paths, out_dir) == (d / "out.jsonl").read_bytes()
    assert (out_dir / "clusters.jsonl").read_bytes() == (d / "clusters.jsonl").read_bytes()
    # Round 0's jobs are confirm's; every later round runs a job per partition.
    assert s["tasks"]["greedy_settle"] >= 3
    assert s["tasks"]["greedy_round"] == (s["tasks"]["greedy_settle"] - 1) * partitions


def test_parquet_shards(ray_cluster, cli, example, tmp_path):
    pa = need("pyarrow")
    pq = need("pyarrow.parquet")
    nray = need("neardup.ray")
    jsonl = split_lines(example, tmp_path / "in", 3)
    paths = []
    for p in jsonl:
        q = p.with_suffix(".parquet")
        pq.write_table(pa.Table.from_pylist([json.loads(l) for l in p.read_text().splitlines()]), q)
        paths.append(q)
    want = tmp_path / "want.parquet"
    run(cli, "dedup", *map(str, paths), "-o", str(want))
    out_dir = tmp_path / "out"
    nray.dedup(paths, out_dir, work_dir=tmp_path / "work", partitions=2, engine="cpu",
               verbose=False)
    got = pa.concat_tables([pq.read_table(out_dir / p.name) for p in paths])
    assert got.equals(pq.read_table(want))


def test_against_an_index(ray_cluster, cli, example, tmp_path):
    """Checked against an index of half the corpus, the driver's outputs are the command
    line's."""
    nray = need("neardup.ray")
    lines = example.read_bytes().splitlines(keepends=True)
    old = tmp_path / "old.jsonl"
    old.write_bytes(b"".join(lines[::2]))
    index = tmp_path / "old.index"
    run(cli, "index", "build", str(old), "-o", str(index))
    paths = split_lines(example, tmp_path / "in", 3)
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want), "--against", str(index))
    out_dir = tmp_path / "out"
    s = nray.dedup(paths, out_dir, work_dir=tmp_path / "work", partitions=2, engine="cpu",
                   verbose=False, against=[index])
    assert outputs_of(paths, out_dir) == want.read_bytes()
    report = json.loads((out_dir / "report.json").read_text())
    assert report["against"]["matched"] > 100, report["against"]
    assert s["documents_written"] == len(want.read_bytes().splitlines())


def test_refusals(ray_cluster, example, tmp_path):
    nray = need("neardup.ray")
    a = tmp_path / "a" / "x.jsonl"
    b = tmp_path / "b" / "x.jsonl"
    for p in (a, b):
        p.parent.mkdir()
        p.write_bytes(example.read_bytes())
    with pytest.raises(ValueError, match="two inputs are named 'x.jsonl'"):
        nray.dedup([a, b], tmp_path / "out", work_dir=tmp_path / "work", verbose=False)


def test_the_driver_logs_each_stage_and_a_summary(ray_cluster, example, tmp_path, caplog):
    nray = need("neardup.ray")
    import logging

    caplog.set_level(logging.INFO, logger="neardup.ray")
    paths = split_lines(example, tmp_path / "in", 2)
    calls = []
    nray.dedup(paths, tmp_path / "out", work_dir=tmp_path / "work", partitions=2, engine="cpu",
               progress=lambda *a: calls.append(a))
    lines = [r.getMessage() for r in caplog.records if r.name == "neardup.ray"]
    for stage in ("sign:", "rank:", "bands:", "confirm:", "cluster:", "apply:"):
        assert any(line.startswith(stage) for line in lines), f"no {stage} line in {lines}"
    assert "483 documents signed now" in "\n".join(lines)
    assert lines[-1].startswith("neardup.ray.dedup: 391 documents written, 92 near duplicates")
    # The callback sees each stage start and each of its tasks end, in stage order (each step
    # of rank and cluster starts at 0 again).
    import itertools

    starts = [c[0] for c in calls if c[1] == 0]
    assert [k for k, _ in itertools.groupby(starts)] == ["sign", "rank", "bands", "confirm",
                                                          "cluster", "apply"]
    assert starts.count("rank") == 3 and starts.count("cluster") >= 8
    sign = [c for c in calls if c[0] == "sign"]
    assert [c[:3] for c in sign] == [("sign", 0, 2), ("sign", 1, 2), ("sign", 2, 2)]
    assert sign[0][3] == 0 and 0 < sign[1][3] < 483 and sign[2][3] == 483
    assert all(c[3] == 483 for c in calls if c[0] == "apply")

    def broken(*_):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        nray.dedup(paths, tmp_path / "out2", work_dir=tmp_path / "work2", partitions=2,
                   engine="cpu", verbose=False, progress=broken)
    assert (tmp_path / "out2" / "report.json").exists(), "the run finished before the raise"


def test_a_directory_of_shards_and_the_removed_file(ray_cluster, cli, example, want, tmp_path):
    nray = need("neardup.ray")
    paths = split_lines(example, tmp_path / "in", 3)
    removed = tmp_path / "removed.parquet"
    run(cli, "dedup", str(example), "-o", str(tmp_path / "o.jsonl"), "--removed", str(removed))
    out_dir = tmp_path / "out"
    nray.dedup([tmp_path / "in"], out_dir, work_dir=tmp_path / "work", engine="cpu",
               removed="removed.parquet", report=None, verbose=False)
    assert outputs_of(paths, out_dir) == want["out"]
    assert (out_dir / "removed.parquet").read_bytes() == removed.read_bytes()
    with pytest.raises(ValueError, match="both an input's name"):
        nray.dedup([tmp_path / "in"], tmp_path / "o2", work_dir=tmp_path / "w2",
                   removed=paths[0].name, verbose=False)
