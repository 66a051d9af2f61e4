"""The Python package side by side with the CLI and the Python peers, in one run.

    python benches/peers/python_api.py [CORPUS.jsonl] [--docs N] [--repeat R] [--neardup BIN]

Run it with a Python that has the package (`pip install .`), pyarrow, and, for the peers'
rows, rensa 0.5.0 and datasketch 2.0.0 (a missing one is reported and skipped); with `ray`
installed it also times `neardup.ray.dedup` on this machine against `neardup dedup`. The corpus
defaults to the peer comparison's (`make_corpus.py`, 50k documents of real text). Every row is
timed end to end as a user runs it: text in, signatures out, tokenizing included; the best of
`--repeat` runs. See README.md here for what the peers' rows mean.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import K, NUM_PERM, load, machine, shingles  # noqa: E402


def best(repeat, fn):
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default="/tmp/neardup_peers_corpus.jsonl")
    ap.add_argument("--docs", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--datasketch-docs", type=int, default=2000,
                    help="datasketch is timed on the first N documents (it is slow)")
    ap.add_argument("--neardup", default="target/release/neardup")
    ap.add_argument("--shards", type=int, default=8)
    args = ap.parse_args()

    import neardup

    recs = load(args.corpus, args.docs)
    ids = [r[0] for r in recs]
    texts = [r[1] for r in recs]
    n = len(texts)
    print(f"machine: {machine()}")
    print(f"corpus: {args.corpus}, {n} documents, {sum(map(len, texts)) / 1e6:.1f} MB of text")
    rows = []

    def row(what, secs, docs=n):
        rows.append((what, secs, docs / secs))
        print(f"  {what:<62} {secs:8.3f} s {docs / secs:12.0f} docs/s", flush=True)

    with tempfile.TemporaryDirectory() as d:
        corpus = os.path.join(d, "corpus.jsonl")
        with open(corpus, "w") as f:
            for i, t in zip(ids, texts):
                f.write(json.dumps({"id": i, "text": t}) + "\n")
        out = os.path.join(d, "sig.npy")
        cli = [args.neardup, "signatures", corpus, "-o", out, "--engine", "cpu", "--quiet"]
        row("CLI: neardup signatures (whole process, JSONL in, npy out)",
            best(args.repeat, lambda: subprocess.run(cli, check=True)))
        row("neardup.signatures(list of str), all cores",
            best(args.repeat, lambda: neardup.signatures(texts, engine="cpu")))
        try:
            import pyarrow as pa
            arr = pa.array(texts)
            row("neardup.signatures(pyarrow array), all cores",
                best(args.repeat, lambda: neardup.signatures(arr, engine="cpu")))
        except ImportError:
            print("!! SKIPPED pyarrow rows: pyarrow is not installed")
        row("neardup.signatures(list of str), threads=1",
            best(args.repeat, lambda: neardup.signatures(texts, engine="cpu", threads=1)))
        import numpy as np
        want = np.load(out)
        assert (neardup.signatures(texts, engine="cpu") == want).all(), "the package and the CLI differ"

        try:
            import rensa

            def rensa_sign():
                for t in texts:
                    m = rensa.RMinHash(num_perm=NUM_PERM, seed=42)
                    m.update(shingles(t))
                    m.digest()

            row("rensa 0.5.0: tokenize in Python + RMinHash.update + digest", best(args.repeat, rensa_sign))
        except ImportError:
            print("!! SKIPPED rensa: not installed")
        try:
            import datasketch

            sub = texts[: args.datasketch_docs]

            def ds_sign():
                for t in sub:
                    m = datasketch.MinHash(num_perm=NUM_PERM)
                    m.update_batch([s.encode() for s in shingles(t)])

            row(f"datasketch 2.0.0: tokenize + update_batch (first {len(sub)} docs)",
                best(1, ds_sign), docs=len(sub))
        except ImportError:
            print("!! SKIPPED datasketch: not installed")

        try:
            import ray
            import neardup.ray as nray
        except ImportError:
            print("!! SKIPPED the Ray rows: ray is not installed")
            return
        shards = []
        per = -(-n // args.shards)
        for s in range(args.shards):
            p = os.path.join(d, f"shard-{s}.jsonl")
            with open(p, "w") as f:
                for i, t in zip(ids[s * per:(s + 1) * per], texts[s * per:(s + 1) * per]):
                    f.write(json.dumps({"id": i, "text": t}) + "\n")
            shards.append(p)
        dedup = [args.neardup, "dedup", *shards, "-o", os.path.join(d, "cli.jsonl"),
                 "--clusters", os.path.join(d, "cli-clusters.jsonl"), "--engine", "cpu", "--quiet"]
        row(f"CLI: neardup dedup, {args.shards} shards (whole process)",
            best(args.repeat, lambda: subprocess.run(dedup, check=True)))
        k = [0]

        def work_dir_run():
            k[0] += 1
            w = os.path.join(d, f"cli-work-{k[0]}")
            subprocess.run(dedup + ["--work-dir", w, "--partitions", "8"], check=True)

        row(f"CLI: neardup dedup --work-dir, {args.shards} shards, 8 partitions",
            best(args.repeat, work_dir_run))
        t0 = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        print(f"  (ray.init: {time.perf_counter() - t0:.1f} s, not counted below)")
        stage_seconds = {}

        def ray_run(inputs, tag):
            k[0] += 1
            o = os.path.join(d, f"ray-out-{tag}-{k[0]}")
            s = nray.dedup(inputs, o, work_dir=os.path.join(d, f"ray-work-{tag}-{k[0]}"),
                           engine="cpu", verbose=False)
            stage_seconds[tag] = s["stage_seconds"]
            return o

        row(f"neardup.ray.dedup, {args.shards} shards, this machine",
            best(args.repeat, lambda: ray_run(shards, "big")))
        print("  (stages of the last run: " + ", ".join(
            f"{k} {v:.2f} s" for k, v in stage_seconds["big"].items()) + ")")
        o = ray_run(shards, "check")
        got = b"".join(open(os.path.join(o, os.path.basename(p)), "rb").read() for p in shards)
        assert got == open(os.path.join(d, "cli.jsonl"), "rb").read(), "ray and the CLI differ"
        tiny = os.path.join(d, "tiny.jsonl")
        with open(tiny, "w") as f:
            for i in range(10):
                f.write(json.dumps({"id": f"t{i}", "text": f"a tiny document number {i}"}) + "\n")
        row("neardup.ray.dedup fixed cost: 1 shard of 10 documents", best(args.repeat, lambda: ray_run([tiny], "tiny")), docs=10)
        ray.shutdown()


if __name__ == "__main__":
    main()
