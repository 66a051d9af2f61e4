"""Shared fixtures of the Python package's tests.

With ``NEARDUP_REQUIRE_PYTHON=1`` (as CI sets) a missing package or a missing ``neardup``
binary fails the test instead of skipping it. ``NEARDUP_BIN`` names the command-line binary
the package is compared with (``cargo test`` sets it); else ``target/release/neardup``, then
``target/debug/neardup``, then ``neardup`` on ``PATH``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = os.environ.get("NEARDUP_REQUIRE_PYTHON") == "1"


def need(module: str):
    """Import ``module``, or skip (fail under ``NEARDUP_REQUIRE_PYTHON=1``)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if REQUIRED:
            pytest.fail(f"{module} cannot be imported ({e}) and NEARDUP_REQUIRE_PYTHON=1")
        pytest.skip(f"{module} is not installed")


@pytest.fixture(scope="session")
def cli() -> str:
    """The ``neardup`` binary."""
    candidates = [
        os.environ.get("NEARDUP_BIN"),
        str(ROOT / "target" / "release" / "neardup"),
        str(ROOT / "target" / "debug" / "neardup"),
        shutil.which("neardup"),
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    msg = "no neardup binary: set NEARDUP_BIN or run cargo build --release"
    if REQUIRED:
        pytest.fail(msg)
    pytest.skip(msg)


def run(cli: str, *args: str) -> subprocess.CompletedProcess:
    """Run the binary; fail the test, with its stderr, when it fails."""
    quiet = [] if args[0] == "synth" else ["--quiet"]
    p = subprocess.run([cli, *args, *quiet], capture_output=True, text=True)
    assert p.returncode == 0, f"neardup {' '.join(args)} failed:\n{p.stderr}"
    return p


def read_jsonl(path: Path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def example() -> Path:
    return ROOT / "fixtures" / "example.jsonl"


def split_lines(src: Path, out_dir: Path, shards: int, empty: int = -1) -> list:
    """``src``'s lines cut into ``shards`` contiguous files (``empty``: the index of one left
    empty), named ``shard-I.jsonl``; returns their paths in order."""
    lines = src.read_bytes().splitlines(keepends=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    full = [i for i in range(shards) if i != empty]
    per = -(-len(lines) // len(full))
    paths = []
    taken = 0
    for i in range(shards):
        p = out_dir / f"shard-{i}.jsonl"
        if i == empty:
            chunk = []
        else:
            chunk = lines[taken : taken + per]
            taken += len(chunk)
        p.write_bytes(b"".join(chunk))
        paths.append(p)
    assert taken == len(lines)
    return paths


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """A two-node local Ray cluster, one CPU each, started once for the whole run (a start
    can fail on a loaded two-core machine: it is tried twice). Workers see
    ``NEARDUP_RAY_FAULTS``, the directory the fault-injection test writes into."""
    ray = need("ray")
    cluster_utils = need("ray.cluster_utils")
    faults = tmp_path_factory.mktemp("ray-faults")
    os.environ["NEARDUP_RAY_FAULTS"] = str(faults)
    last = None
    for attempt in range(2):
        cluster = None
        try:
            cluster = cluster_utils.Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 1,
                    "include_dashboard": False,
                    "object_store_memory": 100 * 1024 * 1024,
                },
            )
            cluster.add_node(num_cpus=1, object_store_memory=100 * 1024 * 1024)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
            # A worker process on each node before the tests: the stages' tasks are short, and
            # without one ready the second node would still be starting its worker when the
            # first has run them all.
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # (A lambda travels by value: the workers cannot import this conftest.)
            warm = ray.remote(num_cpus=1)(lambda: os.getpid())
            ray.get([
                warm.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
                ).remote()
                for n in ray.nodes()
            ])
            break
        except Exception as e:  # a failed start is retried once
            last = e
            try:
                ray.shutdown()
                if cluster is not None:
                    cluster.shutdown()
            except Exception:
                pass
            time.sleep(5)
    else:
        raise RuntimeError(f"the Ray cluster did not start twice: {last}")
    yield {"cluster": cluster, "faults": faults}
    ray.shutdown()
    cluster.shutdown()
