"""``neardup.ray.dedup`` on a local Ray cluster of several nodes, against the same run on one.

Each node is a Ray node of its own (its own raylet and workers, ``ray.cluster_utils.Cluster``)
on this machine, with ``--cpus`` CPUs; the work and output directories are local paths, which
every node of such a cluster sees. For each node count the script prints, per stage, the tasks
it ran, the largest peak resident memory of a worker that ran one of them, and its wall time,
then checks that the outputs of every run are identical.

    python benches/ray/nodes.py SHARD... --nodes 1 4 --partitions 16 --task-memory 256 \
        --out /tmp/nodes

``neardup`` must be installed (``pip install .``) with ``ray``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time


def run(shards, nodes, cpus, partitions, task_memory, out):
    import ray
    from ray import cluster_utils

    import neardup.ray

    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": cpus, "include_dashboard": False},
    )
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        work, outputs = os.path.join(out, f"work-{nodes}"), os.path.join(out, f"out-{nodes}")
        for d in (work, outputs):
            shutil.rmtree(d, ignore_errors=True)
        t0 = time.time()
        s = neardup.ray.dedup(shards, outputs, work_dir=work, partitions=partitions,
                              task_memory=task_memory, engine="cpu", exact=True,
                              verbose=False)
        wall = time.time() - t0
        digest = hashlib.sha256()
        for p in shards:
            with open(os.path.join(outputs, os.path.basename(p)), "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(outputs, ignore_errors=True)
        return {
            "nodes": len({w.split(":")[0] for w in s["workers"]}),
            "wall": wall,
            "tasks": s["tasks"],
            "seconds": s["stage_seconds"],
            "peak_rss": s["peak_rss"],
            "written": s["documents_written"],
            "sha256": digest.hexdigest(),
        }
    finally:
        ray.shutdown()
        cluster.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shards", nargs="+")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--cpus", type=int, default=1, help="CPUs of each node")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--task-memory", type=int, default=1024,
                    help="MiB a task of rank holds at most (task_memory=)")
    ap.add_argument("--out", required=True, help="a directory for the work and outputs")
    a = ap.parse_args()
    shards = [os.path.abspath(p) for p in a.shards]
    os.makedirs(a.out, exist_ok=True)
    runs = [run(shards, n, a.cpus, a.partitions, a.task_memory, a.out) for n in a.nodes]
    for r in runs:
        print(f"{r['nodes']} node(s), {a.cpus} CPU(s) each: {r['wall']:.1f} s, "
              f"{r['written']} documents written")
        for stage, n in r["tasks"].items():
            print(f"  {stage:14} {n:4} tasks  {r['peak_rss'][stage] / 2**20:8.0f} MiB  "
                  f"{r['seconds'][stage]:7.1f} s")
    json.dump(runs, sys.stdout if a.out == "-" else open(os.path.join(a.out, "nodes.json"), "w"),
              indent=1)
    if len({r["sha256"] for r in runs}) != 1:
        sys.exit("the runs' outputs differ")
    print("outputs identical")


if __name__ == "__main__":
    main()
