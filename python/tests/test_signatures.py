"""``neardup.signatures`` equals ``neardup signatures`` bit for bit, from every kind of input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import neardup
from neardup import stages
from conftest import need, read_jsonl, run


def cli_signatures(cli, path, tmp_path, *flags):
    out = tmp_path / "sig.npy"
    run(cli, "signatures", str(path), "-o", str(out), "--format", "npy", "--engine", "cpu", *flags)
    ids = [line for line in (tmp_path / "sig.npy.ids").read_text().splitlines()]
    return np.load(out), ids


@pytest.fixture(scope="module")
def synthetic(cli, tmp_path_factory):
    p = tmp_path_factory.mktemp("synth") / "synth.jsonl"
    run(cli, "synth", "700", "--seed", "5", "-o", str(p))
    return p


@pytest.mark.parametrize("params", [(5, 128, 0), (3, 64, 7), (1, 1, 42), (9, 7, 2**40)])
def test_lists_equal_the_command_line(cli, example, synthetic, tmp_path, params):
    k, num_perm, seed = params
    for path in (example, synthetic):
        want, _ = cli_signatures(
            cli, path, tmp_path, "--k", str(k), "--num-perm", str(num_perm), "--seed", str(seed)
        )
        texts = [r["text"] for r in read_jsonl(path)]
        got = neardup.signatures(texts, k=k, num_perm=num_perm, seed=seed, engine="cpu")
        assert got.dtype == np.uint32
        assert got.shape == (len(texts), num_perm)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shingle,normalize", [("char", "none"), ("char", "nfkc"), ("word", "nfc")])
def test_text_options_equal_the_command_line(cli, tmp_path, shingle, normalize):
    texts = ["中华人民共和国成立于一九四九年", "cafe\u0301 ｃａｆé", "Ｈello ｗorld", "", "  a  "]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
    want, _ = cli_signatures(cli, path, tmp_path, "--k", "3", "--shingle", shingle,
                             "--normalize", normalize)
    got = neardup.signatures(texts, k=3, shingle=shingle, normalize=normalize, engine="cpu")
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, neardup.signatures(texts, k=3, engine="cpu"))
    with pytest.raises(ValueError, match='shingle "syllable": word or char'):
        neardup.signatures(texts, shingle="syllable")


def test_arrow_inputs_equal_the_command_line(cli, synthetic, tmp_path):
    pa = need("pyarrow")
    pl = need("polars")
    want, _ = cli_signatures(cli, synthetic, tmp_path)
    texts = [r["text"] for r in read_jsonl(synthetic)]
    half = len(texts) // 2
    kinds = {
        "pyarrow string": pa.array(texts),
        "pyarrow large_string": pa.array(texts, type=pa.large_string()),
        "pyarrow string_view": pa.array(texts, type=pa.string_view()),
        "pyarrow chunked": pa.chunked_array([texts[:half], texts[half:]]),
        "pyarrow table": pa.table({"id": list(range(len(texts))), "text": texts}),
        "pyarrow sliced": pa.array(["skip me"] + texts + ["and me"]).slice(1, len(texts)),
        "polars series": pl.Series("text", texts),
        "polars frame": pl.DataFrame({"text": texts}),
    }
    for name, texts_in in kinds.items():
        got = neardup.signatures(texts_in, engine="cpu")
        np.testing.assert_array_equal(got, want, err_msg=name)
    np.testing.assert_array_equal(neardup.signatures(texts, engine="auto"), want)


def test_a_hugging_face_dataset_is_read_through_its_arrow_table(synthetic):
    datasets = need("datasets")
    records = read_jsonl(synthetic)
    ds = datasets.Dataset.from_dict(
        {"id": [r["id"] for r in records], "text": [r["text"] for r in records]}
    )
    want = neardup.signatures([r["text"] for r in records], engine="cpu")
    np.testing.assert_array_equal(neardup.signatures(ds, engine="cpu"), want)
    r = neardup.dedup(ds["id"], ds["text"])
    assert r.root_id == neardup.dedup([x["id"] for x in records], [x["text"] for x in records]).root_id


def test_hugging_face_views_sign_the_rows_they_hold_in_their_order(synthetic):
    # shuffle, filter, select and a split are index mappings over a backing table that holds
    # other rows in another order: each must equal the plain list of its own rows.
    datasets = need("datasets")
    records = read_jsonl(synthetic)
    ds = datasets.Dataset.from_dict(
        {"id": [r["id"] for r in records], "text": [r["text"] for r in records]}
    )
    split = ds.train_test_split(test_size=0.3, seed=3)
    views = {
        "shuffle": ds.shuffle(seed=7),
        "filter": ds.filter(lambda r: len(r["text"]) % 3 != 0),
        "select": ds.select([len(records) - 1, 5, 0, 17, 301]),
        "select_range": ds.select(range(10, 40)),
        "train": split["train"],
        "test": split["test"],
        "shuffle_then_filter": ds.shuffle(seed=1).filter(lambda r: len(r["text"]) % 2 == 0),
        "empty": ds.select([]),
    }
    for name, v in views.items():
        rows = [v[i] for i in range(len(v))]
        texts = [r["text"] for r in rows]
        ids = [r["id"] for r in rows]
        assert v["text"][:] == texts, name
        want = neardup.signatures(texts, engine="cpu")
        np.testing.assert_array_equal(neardup.signatures(v, engine="cpu"), want, err_msg=name)
        # ``v["text"]``: a lazy Column in datasets 4 and later, a list before.
        np.testing.assert_array_equal(
            neardup.signatures(v["text"], engine="cpu"), want, err_msg=name
        )
        if not rows:
            continue
        got = neardup.dedup(v["id"], v["text"])
        plain = neardup.dedup(ids, texts)
        assert got.root_id == plain.root_id, name
        np.testing.assert_array_equal(got.survives, plain.survives, err_msg=name)
        np.testing.assert_array_equal(got.root, plain.root, err_msg=name)


def test_empty_and_wordless_inputs():
    assert neardup.signatures([]).shape == (0, 128)
    got = neardup.signatures(["", "   ", "one"], num_perm=8)
    assert got.shape == (3, 8)
    # A text without shingles has P = 2^31 - 1 in every entry (SPEC).
    assert (got[0] == 2**31 - 1).all() and (got[1] == 2**31 - 1).all()
    assert not (got[2] == 2**31 - 1).all()


def test_bad_inputs_are_clear_errors():
    pa = need("pyarrow")
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        neardup.signatures(["a", 3])
    with pytest.raises(TypeError, match="one str"):
        neardup.signatures("a text")
    with pytest.raises(ValueError, match=r"texts\[1\] is null"):
        neardup.signatures(pa.array(["a", None]))
    with pytest.raises(TypeError, match="not of strings"):
        neardup.signatures(pa.array([1, 2]))
    with pytest.raises(ValueError, match="no column"):
        neardup.signatures(pa.table({"body": ["x"]}))
    with pytest.raises(neardup.NeardupError, match="num_perm"):
        neardup.signatures(["x"], num_perm=0)
    with pytest.raises(ValueError, match="engine"):
        neardup.signatures(["x"], engine="tpu")
    with pytest.raises(ValueError, match="gpu_kernels"):
        neardup.signatures(["x"], engine="cpu", gpu_kernels="fast")


def test_the_gil_is_released_while_the_engine_runs():
    pa = need("pyarrow")
    words = [f"w{i % 5003}" for i in range(4000)]
    texts = pa.array([" ".join(words[j:] + words[:j]) for j in range(3000)])
    span = {}

    def sign():
        span["start"] = time.perf_counter()
        neardup.signatures(texts, engine="cpu", threads=1)
        span["end"] = time.perf_counter()

    t = threading.Thread(target=sign)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    took = span["end"] - span["start"]
    assert took > 0.2, f"the call took {took:.3f} s, too short to tell"
    inside = [x for x in ticks if span["start"] + 0.05 < x < span["end"] - 0.05]
    # With the GIL held, this thread could not run at all while the engine signed.
    assert len(inside) > 10, f"{len(inside)} ticks during a {took:.2f} s call"


@pytest.mark.parametrize("kernels", ["split", "fused"])
@pytest.mark.parametrize("int64", [False, True])
def test_the_gpu_engine_gives_the_cpu_engines_bits_with_either_kernels(kernels, int64):
    # A software adapter (llvmpipe) serves where there is no GPU; NEARDUP_REQUIRE_GPU=1 (as
    # CI sets) makes a missing adapter a failure.
    texts = ["", "one", "two words", " ".join(f"w{i % 97}" for i in range(3000)),
             "x" * 70_000, "naïve Straße " * 40]
    texts.append(texts[3].replace("w5 ", "v5 ", 1))  # a near duplicate of texts[3]
    want = neardup.signatures(texts, num_perm=64, engine="cpu")
    try:
        got = neardup.signatures(texts, num_perm=64, engine="gpu", gpu_kernels=kernels,
                                 gpu_int64=int64)
    except neardup.NeardupError as e:
        if int64 and "no 64-bit shader integers" in str(e):
            if os.environ.get("NEARDUP_REQUIRE_GPU_INT64") == "1":
                pytest.fail(f"NEARDUP_REQUIRE_GPU_INT64=1 but the adapter has none: {e}")
            pytest.skip(f"the adapter has no 64-bit shader integers: {e}")
        if os.environ.get("NEARDUP_REQUIRE_GPU") == "1":
            pytest.fail(f"no GPU engine and NEARDUP_REQUIRE_GPU=1: {e}")
        pytest.skip(f"no GPU engine: {e}")
    np.testing.assert_array_equal(got, want)
    ids = [str(i) for i in range(len(texts))]
    gpu = neardup.dedup(ids, texts, engine="gpu", gpu_kernels=kernels, gpu_int64=int64)
    cpu = neardup.dedup(ids, texts, engine="cpu")
    assert gpu.engine.startswith("gpu") and cpu.engine.startswith("cpu")
    assert ("fused kernels" in gpu.engine) == (kernels == "fused"), gpu.engine
    assert ("native 64-bit" in gpu.engine) == int64, gpu.engine
    np.testing.assert_array_equal(gpu.root, cpu.root)
    np.testing.assert_array_equal(gpu.survives, cpu.survives)
    assert gpu.root[-1] == 3


def test_an_engine_is_kept_between_calls_made_with_the_same_options(tmp_path):
    texts = ["alpha beta gamma delta epsilon zeta", "eta theta iota kappa lambda", ""]
    neardup.release_engines()
    first = neardup.signatures(texts, seed=1, engine="cpu", threads=1)
    again = neardup.signatures(texts, seed=1, engine="cpu", threads=1)
    np.testing.assert_array_equal(first, again)
    # The second call took the first one's engine: one is kept, not two.
    assert neardup.release_engines() == 1
    assert neardup.release_engines() == 0
    # An engine kept for other options is never taken: each call's bits are those of an engine
    # built for it alone.
    options = [dict(seed=1), dict(seed=2), dict(seed=1, k=3), dict(seed=1, num_perm=64),
               dict(seed=1, shingle="char"), dict(seed=1, normalize="nfkc"),
               dict(seed=1, threads=2)]
    fresh = []
    for o in options:
        neardup.release_engines()
        fresh.append(neardup.signatures(texts, engine="cpu", **{"threads": 1, **o}))
    for o, want in zip(options * 2, fresh * 2):
        np.testing.assert_array_equal(
            neardup.signatures(texts, engine="cpu", **{"threads": 1, **o}), want, err_msg=str(o))
    assert neardup.release_engines() == 2, "at most two are kept"
    # A call that fails keeps no engine: its state is unknown.
    work = tmp_path / "work"
    (tmp_path / "in.jsonl").write_text('{"id": "a", "text": "x y z"}\n')
    stages.init(work, [tmp_path / "in.jsonl"], partitions=1)
    with pytest.raises(neardup.NeardupError):
        stages.sign(work, 5, engine="cpu", threads=1)
    assert neardup.release_engines() == 0
    assert stages.sign(work, 0, engine="cpu", threads=1) is not None
    assert neardup.release_engines() == 1
    # In-memory dedup and the signatures share the kept engines.
    neardup.signatures(texts, engine="cpu", threads=1)
    neardup.dedup([str(i) for i in range(len(texts))], texts, engine="cpu", threads=1)
    assert neardup.release_engines() == 1


def _in_forked_child(work) -> bytes:
    """Run ``work`` in a forked child; what it returns (bytes), or a failure past 60 s."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.write(write, work())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child did not finish within 60 s")
    assert os.waitstatus_to_exitcode(status) == 0
    return os.read(read, 4096)


def test_a_child_forked_after_a_call_gets_an_error_not_a_hang():
    # Its parent's worker threads did not come with it: work handed to them would wait
    # forever, so every call says how to start children instead.
    texts = [f"word{i} " * 20 + f"tail {i}" for i in range(300)]
    neardup.signatures(texts, engine="cpu")
    neardup.signatures(texts, engine="cpu", threads=2)

    def work():
        out = []
        for call in (lambda: neardup.signatures(texts, engine="cpu"),
                     lambda: neardup.dedup(["a", "b"], ["x y", "x y"], engine="cpu")):
            try:
                call()
                out.append("no error")
            except neardup.NeardupError as e:
                out.append(str(e))
        return "\n".join(out).encode()

    got = _in_forked_child(work).decode()
    for line in got.splitlines():
        assert "forked from process" in line and '"spawn"' in line, got


def test_a_process_that_forks_before_its_first_call_signs_in_the_child(tmp_path):
    # In a fresh interpreter: the pytest process has made calls already.
    script = tmp_path / "fork_first.py"
    script.write_text(
        "import os, sys, numpy as np, neardup\n"
        "texts = ['a b c d e f g', 'h i j k l m n']\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    got = neardup.signatures(texts, engine='cpu')\n"
        "    os._exit(0 if got.shape == (2, 128) else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "neardup.signatures(texts, engine='cpu')\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
