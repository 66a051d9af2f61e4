"""``neardup.datatrove``: neardup's steps in datatrove pipelines equal datatrove's own MinHash
pipeline on the planted example, ``neardup dedup`` on the same files, and datatrove's filter
after them; the guards refuse what would remove the wrong documents."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from conftest import REQUIRED, need, read_jsonl, run

try:
    from datatrove.data import Document
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.word_tokenizers import WordTokenizer
except ImportError as e:
    if REQUIRED:
        pytest.fail(f"datatrove cannot be imported ({e}) and NEARDUP_REQUIRE_PYTHON=1", pytrace=False)
    pytest.skip(f"datatrove is not installed ({e})", allow_module_level=True)

import neardup  # noqa: E402
from neardup.datatrove import (  # noqa: E402
    NeardupConfig,
    NeardupDecontFilter,
    NeardupDedup,
    NeardupDedupBuckets,
    NeardupDedupCluster,
    NeardupDedupFilter,
    NeardupDedupSignature,
)


class Words(WordTokenizer):
    """``\\w+`` words: datatrove's tokenizer without NLTK's downloads."""

    def word_tokenize(self, text):
        return re.findall(r"\w+", text)

    def sent_tokenize(self, text):
        return [text]

    def span_tokenize(self, text):
        return [m.span() for m in re.finditer(r"\w+", text)]


def split(example: Path, folder: Path, files: int, score: bool = False) -> list:
    """The example's records in ``files`` contiguous JSONL files (with a numeric ``score``)."""
    records = read_jsonl(example)
    folder.mkdir(parents=True)
    per = -(-len(records) // files)
    paths = []
    for i in range(files):
        p = folder / f"part-{i}.jsonl"
        with open(p, "w") as f:
            for r in records[i * per:(i + 1) * per]:
                if score:
                    r["score"] = (len(r["text"]) * 7919) % 101
                f.write(json.dumps(r) + "\n")
        paths.append(p)
    return paths


def execute(pipeline, tasks, logs):
    LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1, logging_dir=str(logs)).run()


def neardup_steps(tmp, inputs, config, files, buckets_tasks=1, filter_cls=None, save=True, index=None):
    """neardup's four steps over the folder ``inputs``; returns (kept, dropped) records."""
    spool, work, verdicts, out, excl = (tmp / n for n in ("spool", "work", "verdicts", "out", "excl"))
    execute([JsonlReader(str(inputs)), NeardupDedupSignature(str(spool), config=config)], files, tmp / "l1")
    execute([NeardupDedupBuckets(str(spool), str(work), config=config, index_folder=index)], buckets_tasks,
            tmp / "l2")
    execute([NeardupDedupCluster(str(work), str(verdicts), config=config, save_cluster_id=save,
                                 save_cluster_size=save, removed="removed.parquet")], 1, tmp / "l3")
    if filter_cls is None:
        step = NeardupDedupFilter(str(verdicts), exclusion_writer=JsonlWriter(str(excl), compression=None),
                                  load_cluster_ids=True, load_cluster_sizes=True, config=config)
    else:
        step = filter_cls(str(verdicts), exclusion_writer=JsonlWriter(str(excl), compression=None),
                          load_cluster_ids=True, load_cluster_sizes=True)
    execute([JsonlReader(str(inputs)), step, JsonlWriter(str(out), compression=None)], files, tmp / "l4")
    return records(out), records(excl)


def records(folder: Path):
    return [r for p in sorted(folder.glob("*.jsonl")) for r in read_jsonl(p)] if folder.exists() else []


def partition(kept, dropped):
    """The clusters, as sets of ids, by datatrove's cluster id."""
    by = {}
    for r in kept + dropped:
        c = r["metadata"]["minhash_cluster_id"]
        if c != -1:
            by.setdefault(c, set()).add(r["id"])
    return by


def test_neardup_steps_find_datatrove_s_clusters_on_the_planted_example(example, tmp_path):
    inputs = tmp_path / "in"
    split(example, inputs, 2)
    mh = MinhashConfig(hash_config=HashConfig(precision=64), num_buckets=14, hashes_per_bucket=8)
    dt = tmp_path / "dt"
    execute([JsonlReader(str(inputs)), MinhashDedupSignature(str(dt / "sigs"), config=mh, language=Words())],
            2, dt / "l1")
    execute([MinhashDedupBuckets(str(dt / "sigs"), str(dt / "buckets"), config=mh)], mh.num_buckets, dt / "l2")
    execute([MinhashDedupCluster(str(dt / "buckets"), str(dt / "remove"), config=mh, save_cluster_id=True)],
            1, dt / "l3")
    execute([JsonlReader(str(inputs)),
             MinhashDedupFilter(str(dt / "remove"), exclusion_writer=JsonlWriter(str(dt / "excl"), compression=None),
                                load_cluster_ids=True),
             JsonlWriter(str(dt / "out"), compression=None)], 2, dt / "l4")
    dt_kept, dt_dropped = records(dt / "out"), records(dt / "excl")

    nd = tmp_path / "nd"
    kept, dropped = neardup_steps(nd, inputs, NeardupConfig(), files=2, buckets_tasks=2)
    want = partition(dt_kept, dt_dropped)
    got = partition(kept, dropped)
    assert len(want) == len(got) == 56
    assert sorted(map(sorted, want.values())) == sorted(map(sorted, got.values()))
    assert len(dt_dropped) == len(dropped) == 92
    assert len(dt_kept) == len(kept) == 482 - 92, "the reader skips the one empty text"
    # One survivor per cluster, the smallest id; cluster ids and their files as datatrove's.
    for members in got.values():
        assert len(members & {r["id"] for r in kept}) == 1
        assert min(members) in {r["id"] for r in kept}
    for r in range(2):
        assert (nd / "verdicts" / f"{r:06d}.clusters").read_bytes() == (dt / "remove" / f"{r:06d}.clusters").read_bytes()
    # Every document's cluster id is datatrove's (its survivor may be another member: datatrove
    # keeps the root union-by-size leaves).
    assert {r["id"]: r["metadata"]["minhash_cluster_id"] for r in kept + dropped} == {
        r["id"]: r["metadata"]["minhash_cluster_id"] for r in dt_kept + dt_dropped}


CONFIGS = [
    ({}, ()),
    ({"keep": "longest", "exact": True}, ("--keep", "longest", "--exact")),
    ({"cluster": "greedy", "keep": "longest"}, ("--cluster", "greedy", "--keep", "longest")),
    ({"keep": "max", "keep_field": "score", "threshold": 0.6},
     ("--keep", "field:score:max", "--threshold", "0.6")),
]


@pytest.mark.parametrize("kw,flags", CONFIGS)
@pytest.mark.parametrize("tasks", [1, 2, 3])
def test_neardup_steps_keep_what_neardup_dedup_keeps(cli, example, tmp_path, kw, flags, tasks):
    """For 1, 2 and 3 tasks (the reader's files and every executor's tasks)."""
    inputs = tmp_path / "in"
    paths = split(example, inputs, tasks, score=True)
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want), *flags)
    empty = {r["id"] for r in read_jsonl(example) if not r["text"]}
    want_ids = [r["id"] for r in read_jsonl(want) if r["id"] not in empty]
    config = NeardupConfig(**kw, partitions=2, engine="cpu")
    kept, dropped = neardup_steps(tmp_path / "nd", inputs, config, files=tasks, buckets_tasks=tasks)
    assert [r["id"] for r in kept] == want_ids
    # The removed ids, for NeMo Curator's removal workflow: what the filter dropped.
    pq = need("pyarrow.parquet")
    removed = pq.read_table(tmp_path / "nd" / "verdicts" / "removed.parquet")
    assert removed.column_names == ["id", "root", "survivor"]
    assert removed.column("id").to_pylist() == [r["id"] for r in dropped]
    assert removed.column("root").to_pylist() == [r["metadata"]["minhash_cluster"] for r in dropped]
    # datatrove's own filter after neardup's first three steps keeps the same documents.
    dt_kept, _ = neardup_steps(tmp_path / "dt", inputs, config, files=tasks, filter_cls=MinhashDedupFilter)
    assert [r["id"] for r in dt_kept] == want_ids
    # The verdicts tag each document with its cluster's root, as the command line does.
    tags = {r["id"]: r["meta"]["minhash_cluster"] for r in read_jsonl(want)}
    assert all(r["metadata"]["minhash_cluster"] == tags[r["id"]] for r in kept)
    sizes = {}
    for r in kept + dropped:
        sizes[r["metadata"]["minhash_cluster"]] = sizes.get(r["metadata"]["minhash_cluster"], 0) + 1
    assert all(r["metadata"]["minhash_cluster_size"] == sizes[r["metadata"]["minhash_cluster"]] for r in kept)


def test_against_an_index_folder(cli, example, tmp_path):
    """``index_folder``: documents already kept (an index) are dropped where matched, as
    ``dedup --against`` drops them."""
    inputs = tmp_path / "in"
    paths = split(example, inputs, 2)
    index = tmp_path / "ix"
    run(cli, "index", "build", str(paths[0]), "-o", str(index))
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want), "--against", str(index))
    want_ids = [r["id"] for r in read_jsonl(want) if r["text"]]
    assert len(want_ids) < 200, "the first file's documents match themselves in the index"
    config = NeardupConfig(engine="cpu", partitions=2)
    kept, dropped = neardup_steps(tmp_path / "nd", inputs, config, files=2, index=str(index))
    assert [r["id"] for r in kept] == want_ids
    dt_kept, _ = neardup_steps(tmp_path / "dt", inputs, config, files=2, index=str(index),
                               filter_cls=MinhashDedupFilter)
    assert [r["id"] for r in dt_kept] == want_ids


@pytest.mark.parametrize("kw", [{}, {"keep": "longest"}, {"cluster": "greedy"}, {"cluster": "greedy", "keep": "longest"}])
def test_the_single_step_equals_neardup_dedup(cli, example, tmp_path, kw):
    inputs = tmp_path / "in"
    paths = split(example, inputs, 3)
    out, out_of_core = tmp_path / "out", tmp_path / "ooc"
    execute([JsonlReader(str(inputs)), NeardupDedup(NeardupConfig(**kw, engine="cpu")),
             JsonlWriter(str(out), compression=None)], 1, tmp_path / "logs")
    got = records(out)
    # Out of core, through the stages in a work directory: the same documents, the same tags;
    # run again, the stages are reused.
    for again in range(2):
        execute([JsonlReader(str(inputs)),
                 NeardupDedup(NeardupConfig(**kw, engine="cpu", partitions=2), work_dir=str(tmp_path / "w")),
                 JsonlWriter(str(out_of_core / str(again)), compression=None)], 1, tmp_path / f"logs{again}")
        assert records(out_of_core / str(again)) == got
    flags = sum((["--" + k, v] for k, v in kw.items()), [])
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want), *flags)
    records_in = [r for r in read_jsonl(example) if r["text"]]
    r = neardup.dedup([x["id"] for x in records_in], [x["text"] for x in records_in], **kw)
    assert [x["id"] for x in got] == [x["id"] for x, s in zip(records_in, r.survives) if s] == [
        x["id"] for x in read_jsonl(want) if x["text"]]
    assert [x["metadata"]["minhash_cluster"] for x in got] == [t for t, s in zip(r.root_id, r.survives) if s]
    # tag_only: every document, each marked.
    tagged = list(NeardupDedup(NeardupConfig(**kw, engine="cpu"), tag_only=True).run(
        JsonlReader(str(inputs)).run()))
    assert [d.id for d in tagged] == [x["id"] for x in records_in]
    assert [d.metadata["minhash_survives"] for d in tagged] == r.survives.tolist()


def test_guards(example, tmp_path):
    inputs = tmp_path / "in"
    split(example, inputs, 2)
    config = NeardupConfig(engine="cpu", partitions=2)
    neardup_steps(tmp_path / "nd", inputs, config, files=2)
    verdicts = tmp_path / "nd" / "verdicts"
    # The filter with other tasks than step 1: the documents at a position are not the signed ones.
    with pytest.raises(neardup.NeardupError, match="rank 0: step 1 ran as 2 tasks, this filter as 3"):
        list(NeardupDedupFilter(str(verdicts), config=config).run(
            JsonlReader(str(inputs)).run(rank=0, world_size=3), rank=0, world_size=3))
    (verdicts / "verdicts" / "tasks.json").unlink()
    with pytest.raises(neardup.NeardupError, match="rank 0, position 241: step 1 signed 241 documents"):
        list(NeardupDedupFilter(str(verdicts), config=config).run(
            JsonlReader(str(inputs)).run(rank=0, world_size=1), rank=0, world_size=1))
    # A reader that changed since step 1: two lines swapped.
    lines = (inputs / "part-1.jsonl").read_text().splitlines(keepends=True)
    lines[3], lines[4] = lines[4], lines[3]
    (inputs / "part-1.jsonl").write_text("".join(lines))
    with pytest.raises(neardup.NeardupError, match="rank 1, position 3: the document is"):
        list(NeardupDedupFilter(str(verdicts), config=config).run(
            JsonlReader(str(inputs)).run(rank=1, world_size=2), rank=1, world_size=2))
    # A reader that yields fewer documents.
    lines[3], lines[4] = lines[4], lines[3]
    (inputs / "part-1.jsonl").write_text("".join(lines[:10]))
    with pytest.raises(neardup.NeardupError, match="rank 1, position 10: the reader ended"):
        list(NeardupDedupFilter(str(verdicts), config=config).run(
            JsonlReader(str(inputs)).run(rank=1, world_size=2), rank=1, world_size=2))
    # Repeated ids.
    docs = [Document(text="a b c", id="x"), Document(text="d e f", id="x")]
    with pytest.raises(neardup.NeardupError, match="positions 0 and 1"):
        list(NeardupDedupSignature(str(tmp_path / "s2")).run(iter(docs)))
    with pytest.raises(neardup.NeardupError, match="positions 0 and 1"):
        list(NeardupDedup().run(iter(docs)))
    # Remote folders, and the single step with several tasks.
    with pytest.raises(ValueError, match="not on a local file system"):
        NeardupDedupSignature("memory://bucket/spool")
    with pytest.raises(neardup.NeardupError, match="use NeardupDedupSignature"):
        list(NeardupDedup().run(iter(docs), rank=0, world_size=2))
    with pytest.raises(neardup.NeardupError, match="one task"):
        list(NeardupDedupCluster(str(tmp_path / "nd" / "work"), str(tmp_path / "v2")).run(None, 0, 2))
    # Step 2 before step 1 finished every task.
    (tmp_path / "nd" / "spool" / "shards" / "00001.json").unlink()
    with pytest.raises(neardup.NeardupError, match="task 1 of NeardupDedupSignature has not finished"):
        list(NeardupDedupBuckets(str(tmp_path / "nd" / "spool"), str(tmp_path / "w2"), config=config).run())
    with pytest.raises(ValueError, match="keep_field"):
        NeardupConfig(keep="max")


def test_steps_pickle_and_copy(tmp_path, example):
    dill = need("dill")
    steps = [
        NeardupDedupSignature(str(tmp_path / "a")),
        NeardupDedupBuckets(str(tmp_path / "a"), str(tmp_path / "b")),
        NeardupDedupCluster(str(tmp_path / "b"), str(tmp_path / "c")),
        NeardupDedupFilter(str(tmp_path / "c")),
        NeardupDedup(),
        NeardupDecontFilter([str(Path(example).parent / "protected.jsonl")]),
    ]
    for s in steps:
        assert dill.loads(dill.dumps(s)).__dict__.keys() == s.__dict__.keys()
        assert copy.deepcopy(s).__dict__.keys() == s.__dict__.keys()


def test_the_decontamination_filter_equals_neardup_decontam(cli, example, tmp_path):
    fixtures = Path(example).parent
    probes = fixtures / "decontam_probes.jsonl"
    protected = [str(fixtures / "protected.jsonl"), str(fixtures / "protected.txt")]
    want = tmp_path / "want.jsonl"
    run(cli, "decontam", str(probes), "--protected", protected[0], "--protected", protected[1],
        "--mode", "tag", "-o", str(want))
    tags = {r["id"]: r.get("meta", {}).get("decontam") for r in read_jsonl(want)}
    truth = {t["id"]: t["contaminated"] for t in json.loads((fixtures / "decontam_probes.truth.json").read_text())}
    out, tagged = tmp_path / "out", tmp_path / "tagged"
    step = NeardupDecontFilter(protected, batch_size=4)
    execute([JsonlReader(str(probes)), copy.deepcopy(step), JsonlWriter(str(out), compression=None)], 1, tmp_path / "l1")
    kept = {r["id"] for r in records(out)}
    assert kept == {i for i, t in tags.items() if t is None}
    assert kept == {i for i, c in truth.items() if not c}
    execute([JsonlReader(str(probes)), NeardupDecontFilter(protected, mode="tag"),
             JsonlWriter(str(tagged), compression=None)], 1, tmp_path / "l2")
    for r in records(tagged):
        assert r["metadata"].get("decontam") == tags[r["id"]]
        if tags[r["id"]] is not None:
            assert r["metadata"]["contaminated_ngram"] == tags[r["id"]]["matched"]
            assert r["metadata"]["contaminated_task"] == tags[r["id"]]["sources"][0]
    # Protected Documents shaped like datatrove's indexer input: caught by task name.
    gold = [r for r in read_jsonl(probes) if r["id"] == "leak-passage"][0]["text"]
    docs = [Document(text=gold, id="g0", metadata={"task": "trivia", "query": "what"})]
    (ok,) = NeardupDecontFilter(docs).filter_batch([Document(text=gold, id="p")])
    assert ok == (False, "contaminated")
    d = Document(text=gold, id="p")
    NeardupDecontFilter(docs, mode="tag").filter_batch([d])
    assert d.metadata["contaminated_task"] == "trivia"


def test_the_example_pipeline_runs(cli, example, tmp_path):
    import subprocess
    import sys

    inputs = tmp_path / "in"
    paths = split(example, inputs, 3)
    base = tmp_path / "base"
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, str(root / "examples" / "datatrove_minhash.py"), str(inputs), str(base), "3"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-4000:]
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want))
    assert [r["id"] for r in records(base / "deduplicated_output")] == [
        r["id"] for r in read_jsonl(want) if r["text"]]
    assert len(records(base / "removed")) == 92


def test_the_steps_under_datatrove_s_ray_executor(ray_cluster, cli, example, tmp_path):
    """The spool and filter steps run as Ray tasks (RayPipelineExecutor, on the local two-node
    cluster), the middle steps locally: the same kept documents as ``neardup dedup``."""
    from datatrove.executor.ray import RayPipelineExecutor

    inputs = tmp_path / "in"
    paths = split(example, inputs, 2)
    want = tmp_path / "want.jsonl"
    run(cli, "dedup", *map(str, paths), "-o", str(want))
    config = NeardupConfig(engine="cpu", partitions=2)
    spool, work, verdicts, out = (tmp_path / n for n in ("spool", "work", "verdicts", "out"))
    ray_run = dict(tasks=2, cpus_per_task=1, mem_per_cpu_gb=0.1)
    RayPipelineExecutor([JsonlReader(str(inputs)), NeardupDedupSignature(str(spool), config=config)],
                        logging_dir=str(tmp_path / "l1"), **ray_run).run()
    execute([NeardupDedupBuckets(str(spool), str(work), config=config)], 2, tmp_path / "l2")
    execute([NeardupDedupCluster(str(work), str(verdicts), config=config)], 1, tmp_path / "l3")
    RayPipelineExecutor([JsonlReader(str(inputs)), NeardupDedupFilter(str(verdicts), config=config),
                         JsonlWriter(str(out), compression=None)],
                        logging_dir=str(tmp_path / "l4"), **ray_run).run()
    assert [r["id"] for r in records(out)] == [r["id"] for r in read_jsonl(want) if r["text"]]
