#!/usr/bin/env python3
"""Peer comparison: neardup vs datasketch, rensa and gaoya on one JSONL corpus, same parameters
(128 permutations, word 5-gram shingles, LSH 16 bands x 8 rows, threshold 0.8).

    python3 benches/peers/compare.py [CORPUS.jsonl] [--docs N] [--sample N] [--repeat R]
                                     [--pairs N] [--neardup PATH] [--json OUT.json]

Run with any python3: the script creates benches/peers/.venv, installs the pinned peers into it
(a failed install is reported and that peer skipped) and re-runs itself inside the venv.
See README.md next to this file for what each row of the table times.
"""
import argparse, glob, itertools, json, os, platform, random, re, resource, subprocess, sys, tempfile, time
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(HERE, ".venv")
PEERS = {"datasketch": "2.0.0", "rensa": "0.5.0", "gaoya": "0.2.2"}  # pinned; see README.md
K, NUM_PERM, BANDS, ROWS, THRESHOLD = 5, 128, 16, 8, 0.8
WORD = re.compile(r"\w+")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- venv bootstrap
def bootstrap():
    """Make sure the script runs inside .venv with the peers installed; re-exec there if not."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(py):
        log(f"creating virtualenv {VENV}")
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    failed = []
    for pkg, ver in PEERS.items():
        check = f"import importlib.metadata as m, sys; sys.exit(m.version('{pkg}') != '{ver}')"
        if subprocess.run([py, "-c", check], capture_output=True).returncode == 0:
            continue  # already installed at the pinned version
        log(f"installing {pkg}=={ver} into {VENV}")
        r = subprocess.run([py, "-m", "pip", "install", "-q", f"{pkg}=={ver}"], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"!! could not install {pkg}=={ver}; it will be skipped:\n{r.stderr.strip()[-800:]}")
            failed.append(pkg)
    os.environ["PEERS_INSTALL_FAILED"] = ",".join(failed)
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


# ---------------------------------------------------------------- the shared contract, in Python
def shingles(text):
    """neardup's shingles, as a list of occurrences (k consecutive words joined by one space)."""
    w = WORD.findall(text.lower())
    if not w:
        return []
    if len(w) < K:
        return [" ".join(w)]
    return [" ".join(w[i:i + K]) for i in range(len(w) - K + 1)]


def load(path, limit):
    with open(path, encoding="utf-8") as f:
        lines = itertools.islice((json.loads(line) for line in f if line.strip()), limit or None)
        return [(str(r["id"]), r["text"]) for r in lines]


def machine():
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = "unknown"
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version()}


def cpu_seconds():
    ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(r.ru_utime + r.ru_stime for r in ru)


def best_of(repeat, fn, before=None):
    """Best wall time of `repeat` calls of fn(), with the CPU/wall ratio of that call (~ cores busy).
    `before()`, when given, runs ahead of each call, untimed."""
    best = None
    for _ in range(repeat):
        if before:
            before()
        c0, t0 = cpu_seconds(), time.perf_counter()
        out = fn()
        t, c = time.perf_counter() - t0, cpu_seconds() - c0
        if best is None or t < best[0]:
            best = (t, c / t if t > 0 else 0.0, out)
    return best


def timed_once(fn, before=None):
    """Wall seconds of one fn() call; `before()`, when given, runs first, untimed. The result is
    freed after the clock stops (as `best_of` keeps it), so freeing it is not timed."""
    if before:
        before()
    t0 = time.perf_counter()
    out = fn()
    t = time.perf_counter() - t0
    del out
    return t


def paired(rounds, nd_run, nd_clear, contenders):
    """Ratios robust to the VM's slow and fast spells: each round times, for every contender in
    turn, one neardup run and one run of the contender back to back (neardup first in even rounds,
    the contender first in odd ones), so each ratio compares two timings a second or so apart.
    Returns, per contender, the per-round ratios neardup shingles/s / contender shingles/s
    (= contender seconds / neardup seconds, the shingles being the same)."""
    ratios = {name: [] for name, _ in contenders}
    for r in range(rounds):
        for name, fn in contenders:
            if r % 2 == 0:
                t_nd = timed_once(nd_run, nd_clear)
                t_c = timed_once(fn)
            else:
                t_c = timed_once(fn)
                t_nd = timed_once(nd_run, nd_clear)
            ratios[name].append(t_c / t_nd)
    return ratios


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def run_proc(repeat, cmd, outputs=()):
    """Best wall time of a whole subprocess (start, read, work, write, exit). The files in `outputs`
    (the previous call's) are removed before each call, untimed: a run that renames its output over
    an old one waits while the kernel drops the old file's pages (7 ms for a 26 MB npy), which is the
    previous run's cost, not this one's."""
    def clear():
        for o in outputs:
            for f in glob.glob(glob.escape(o) + "*"):
                os.remove(f)
    return best_of(repeat, lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), clear)


# ---------------------------------------------------------------- peers: signatures + LSH
# Each peer has: version; timings(texts, shs, repeat) yielding (kind, what, best_of result);
# candidates(texts, shs) -> {(i, j): MinHash estimate} for the LSH candidate pairs, i < j.
def lsh_pairs(lsh, sigs):
    """Insert every signature under its index, query each, return the candidate pairs (i < j)."""
    for i, m in enumerate(sigs):
        lsh.insert(i, m)
    return {(min(i, j), max(i, j)) for i, m in enumerate(sigs) for j in lsh.query(m) if j != i}


class Datasketch:
    def __init__(self):
        import datasketch
        self.ds, self.version = datasketch, version("datasketch")
        # Permutations are generated once and shared, so per-document MinHash() is cheap.
        self.tmpl = datasketch.MinHash(num_perm=NUM_PERM)

    def new(self):
        return self.ds.MinHash(num_perm=NUM_PERM, permutations=self.tmpl.permutations, scheme=self.tmpl.scheme)

    def sign_bytes(self, shb):
        out = []
        for s in shb:
            m = self.new()
            m.update_batch(s)
            out.append(m)
        return out

    def timings(self, texts, shs, repeat):
        shb = [[s.encode() for s in d] for d in shs]
        yield "sig", "update_batch over precomputed shingle bytes", best_of(repeat, lambda: self.sign_bytes(shb))
        yield "sig", "tokenize in Python + update_batch", best_of(
            repeat, lambda: self.sign_bytes([s.encode() for s in shingles(t)] for t in texts))
        yield "dedup", "update_batch + LSH(16x8) insert + query, precomputed shingles", best_of(
            repeat, lambda: self.lsh(self.sign_bytes(shb)))

    def lsh(self, sigs):
        lsh = self.ds.MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(BANDS, ROWS))
        return lsh_pairs(lsh, sigs)

    def candidates(self, texts, shs):
        sigs = self.sign_bytes([[s.encode() for s in d] for d in shs])
        return {(i, j): sigs[i].jaccard(sigs[j]) for i, j in self.lsh(sigs)}


class Rensa:
    def __init__(self):
        import rensa
        self.r, self.version = rensa, version("rensa")

    def sign(self, shs):
        out = []
        for s in shs:
            m = self.r.RMinHash(num_perm=NUM_PERM, seed=42)
            m.update(s)
            out.append(m)
        return out

    def timings(self, texts, shs, repeat):
        yield "sig", "RMinHash.update over precomputed shingles", best_of(repeat, lambda: self.sign(shs))
        yield "sig", "tokenize in Python + RMinHash.update", best_of(repeat, lambda: self.sign(shingles(t) for t in texts))
        yield "sig", "bulk digest_matrix_from_token_sets, precomputed shingles", best_of(
            repeat, lambda: self.r.RMinHash.digest_matrix_from_token_sets(shs, NUM_PERM, 42))
        yield "dedup", "update + RMinHashLSH(16x8) insert + query, precomputed shingles", best_of(
            repeat, lambda: self.lsh(self.sign(shs)))

    def lsh(self, sigs):
        lsh = self.r.RMinHashLSH(THRESHOLD, NUM_PERM, BANDS)  # 128 / 16 bands = 8 rows
        return lsh_pairs(lsh, sigs)

    def candidates(self, texts, shs):
        sigs = self.sign(shs)
        return {(i, j): sigs[i].jaccard(sigs[j]) for i, j in self.lsh(sigs)}


class Gaoya:
    """gaoya tokenizes itself: analyzer='word' splits on ASCII whitespace and ASCII punctuation,
    lowercase=True, ngram_range=(5, 5) gives word 5-grams (close to, not exactly, \\w+ words)."""

    def __init__(self):
        import gaoya
        self.g, self.version = gaoya, version("gaoya")

    def index(self, threshold):
        return self.g.minhash.MinHashStringIndex(hash_size=32, jaccard_threshold=threshold, num_bands=BANDS,
                                                 band_size=ROWS, analyzer="word", lowercase=True, ngram_range=(K, K))

    def timings(self, texts, shs, repeat):
        ix = self.index(THRESHOLD)
        yield "sig", "own tokenizing + signatures (bulk_hash_docs, rayon)", best_of(
            repeat, lambda: ix.minhash_index.bulk_hash_docs(texts))
        yield "dedup", "own tokenizing + sigs + LSH insert + query (estimate >= 0.8)", best_of(
            repeat, lambda: self.dedup(texts))

    def dedup(self, texts):
        ix = self.index(THRESHOLD)
        ix.par_bulk_insert_docs(list(range(len(texts))), texts)
        return ix.par_bulk_query(texts)

    def candidates(self, texts, shs):
        # query() filters by the MinHash estimate >= jaccard_threshold; threshold 0 gives raw candidates.
        ix = self.index(0.0)
        ix.par_bulk_insert_docs(list(range(len(texts))), texts)
        res = ix.par_bulk_query(texts, return_similarity=True)
        return {(min(i, j), max(i, j)): est for i, hits in enumerate(res) for j, est in hits if j != i}


# ---------------------------------------------------------------- accuracy helpers
def exact_pairs(sets, threshold):
    """All pairs with Jaccard >= threshold, exactly: prefix filtering (tokens ordered rarest first; two
    sets with J >= t must share a token among the first |A| - ceil(t*|A|) + 1 of each), then verify.
    The prefix used, |A| - floor(t*|A|) + 1, is never shorter, so float rounding cannot lose a pair."""
    freq = {}
    for s in sets:
        for x in s:
            freq[x] = freq.get(x, 0) + 1
    index, cand = {}, set()
    for i, s in enumerate(sets):
        if not s:
            continue
        toks = sorted(s, key=lambda x: (freq[x], x))
        for x in toks[:len(toks) - int(threshold * len(toks)) + 1]:
            for j in index.setdefault(x, []):
                cand.add((j, i))
            index[x].append(i)
    return {(i, j) for i, j in cand if len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= threshold}


def closure(n, pairs):
    """Pairs in the same connected component (union-find), i.e. 'same cluster'."""
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for a, b in pairs:
        parent[find(a)] = find(b)
    groups = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return {(a, b) for g in groups.values() for a, b in itertools.combinations(g, 2)}


def score(pred, truth):
    tp = len(pred & truth)
    return {"predicted": len(pred), "true_positives": tp,
            "recall": tp / len(truth) if truth else None, "precision": tp / len(pred) if pred else None}


def pick_sample(recs, sets, n, seed, min_pairs):
    """Seeded random sample; if it holds fewer than min_pairs true pairs, rebuild it biased: about half
    of it random documents plus documents sharing their rarest shared shingle, the rest random."""
    rng = random.Random(seed)
    idx = [i for i in range(len(recs)) if sets[i]]
    sample = sorted(rng.sample(idx, min(n, len(idx))))
    truth = exact_pairs([sets[i] for i in sample], THRESHOLD)
    if len(truth) >= min_pairs or n >= len(idx):
        return sample, truth, f"uniform random ({len(sample)} docs, seed {seed})"
    freq = {}
    for i in idx:
        for x in sets[i]:
            freq.setdefault(x, []).append(i)
    chosen, order = set(), idx[:]
    rng.shuffle(order)
    for i in order:
        if len(chosen) >= n // 2:
            break
        shared = [x for x in sets[i] if len(freq[x]) > 1]
        if shared:  # partners: up to 3 other docs holding i's rarest shared shingle (dups and near-misses)
            rare = min(shared, key=lambda x: (len(freq[x]), x))
            chosen.update([i] + [j for j in freq[rare] if j != i][:3])
    rest = [i for i in order if i not in chosen]
    chosen.update(rest[:max(0, n - len(chosen))])
    sample = sorted(chosen)
    truth = exact_pairs([sets[i] for i in sample], THRESHOLD)
    return sample, truth, (f"biased (a uniform sample had < {min_pairs} true pairs): about half are random docs "
                           f"plus up to 3 docs sharing their rarest shared shingle, the rest uniform; seed {seed}")


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", default="/tmp/neardup_peers_corpus.jsonl",
                    help="JSONL {id, text}; built with make_corpus.py if missing")
    ap.add_argument("--docs", type=int, default=0, help="use only the first N documents (0: all)")
    ap.add_argument("--build-docs", type=int, default=50000, help="documents to build when the corpus is missing")
    ap.add_argument("--sample", type=int, default=2000, help="documents in the accuracy sample (0: skip)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-true-pairs", type=int, default=20, help="below this, bias the sample")
    ap.add_argument("--repeat", type=int, default=3, help="best of R for each timing")
    ap.add_argument("--pairs", type=int, default=7,
                    help="rounds of paired runs (per fast peer a neardup run and a peer run back to back; "
                         "0 skips them)")
    ap.add_argument("--neardup", default=os.path.join(ROOT, "target", "release", "neardup"))
    ap.add_argument("--json", help="write all results here")
    a = ap.parse_args()
    if a.pairs < 0:
        ap.error("--pairs must be 0 or more")
    sys.stdout.reconfigure(line_buffering=True)  # keep stdout and the stderr progress lines in order

    if not os.path.exists(a.corpus):
        log(f"building {a.corpus} with make_corpus.py ({a.build_docs} docs)")
        subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), a.corpus,
                        "--docs", str(a.build_docs), "--words", "75"], check=True)
    recs = load(a.corpus, a.docs)
    texts = [t for _, t in recs]
    shs = [shingles(t) for t in texts]
    n_sh = sum(len(s) for s in shs)
    mach = machine()
    results = {"machine": mach, "corpus": os.path.abspath(a.corpus), "documents": len(recs), "shingles": n_sh,
               "params": {"k": K, "num_perm": NUM_PERM, "bands": BANDS, "rows": ROWS, "threshold": THRESHOLD},
               "repeat": a.repeat, "skipped": {}, "rows": [], "accuracy": None}
    print(f"machine: {mach['cpu']}, {mach['cores']} cores, Python {mach['python']}")
    print(f"corpus: {a.corpus}: {len(recs)} documents, {n_sh} shingle occurrences (k={K}); best of {a.repeat}")

    # Peers that failed to install or to import are skipped with a message.
    failed = [p for p in os.environ.get("PEERS_INSTALL_FAILED", "").split(",") if p]
    peers = {}
    for name, cls in (("datasketch", Datasketch), ("rensa", Rensa), ("gaoya", Gaoya)):
        if name in failed:
            results["skipped"][name] = "pip install failed"
            continue
        try:
            peers[name] = cls()
        except Exception as e:  # noqa: BLE001 - any import/API failure skips the peer
            results["skipped"][name] = f"{type(e).__name__}: {e}"
    for name, why in results["skipped"].items():
        print(f"!! SKIPPED {name}: {why}")

    def add(tool, ver, kind, what, res):
        t, cpu_ratio, _ = res
        results["rows"].append({"tool": tool, "version": ver, "kind": kind, "timed": what, "seconds": t,
                                "shingles_per_s": n_sh / t if t > 0 else None, "cpu_per_wall": cpu_ratio})
        log(f"  {tool}: {what}: {t:.3f} s")

    # neardup: the whole subprocess, wall clock (process start, JSONL read + parse, work, output write).
    nd = os.path.abspath(a.neardup)
    if not os.access(nd, os.X_OK):
        sys.exit(f"neardup binary not found at {nd} (build it with cargo build --release, or pass --neardup)")
    nd_ver = subprocess.run([nd, "--version"], capture_output=True, text=True).stdout.strip().split()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        inp = a.corpus
        if a.docs:  # give neardup exactly the documents the peers see
            inp = os.path.join(tmp, "in.jsonl")
            with open(inp, "w", encoding="utf-8") as f:
                for i, t in recs:
                    f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
        sig = [nd, "signatures", inp, "-o", os.path.join(tmp, "s.npy"), "--format", "npy", "--engine", "cpu", "-q"]
        ded = [nd, "dedup", inp, "-o", os.path.join(tmp, "d.jsonl"), "--engine", "cpu", "--confirm", "jaccard",
               "--clusters", os.path.join(tmp, "c.jsonl"), "-q"]
        sig_out = [os.path.join(tmp, "s.npy")]
        ded_out = [os.path.join(tmp, "d.jsonl"), os.path.join(tmp, "c.jsonl")]
        add("neardup", nd_ver, "sig", "signatures, whole process (read JSONL .. write npy), all cores",
            run_proc(a.repeat, sig, sig_out))
        add("neardup", nd_ver, "sig", "signatures, whole process, --threads 1",
            run_proc(a.repeat, sig + ["--threads", "1"], sig_out))
        add("neardup", nd_ver, "dedup", "dedup, whole process (+ LSH, exact-Jaccard confirm, write), all cores",
            run_proc(a.repeat, ded, ded_out))
        add("neardup", nd_ver, "dedup", "dedup, whole process, --threads 1",
            run_proc(a.repeat, ded + ["--threads", "1"], ded_out))
        # neardup's own summary line (in-process time, no process start/exit; best of R), a cross-check only.
        found = (re.search(r"; (\d+) shingles; ([\d.]+) s, .*?([\d.]+[kMG]?) shingles/s \[(.*)\]",
                           subprocess.run(sig[:-1], capture_output=True, text=True).stderr) for _ in range(a.repeat))
        m = min((m for m in found if m), key=lambda m: float(m[2]), default=None)
        if m:
            results["neardup_summary"] = {"shingles": int(m[1]), "seconds": float(m[2]), "shingles_per_s": m[3],
                                          "engine": m[4]}
            print(f"neardup's own summary: {m[1]} shingles (Python count {n_sh}), {m[3]} shingles/s in-process "
                  f"[{m[4]}]")
        for name, p in peers.items():
            try:
                for kind, what, res in p.timings(texts, shs, a.repeat):
                    add(name, p.version, kind, what, res)
            except Exception as e:  # noqa: BLE001
                results["skipped"][name] = f"timing failed: {type(e).__name__}: {e}"
                print(f"!! {name} timing failed: {type(e).__name__}: {e}")
        # Paired rounds against the peers fast enough to repeat (not datasketch, whose runs are
        # too slow to pair).
        contenders = []
        if "rensa" in peers and "rensa" not in results["skipped"]:
            rp = peers["rensa"]
            contenders.append(("rensa RMinHash.update, precomputed shingles", lambda rp=rp: rp.sign(shs)))
            contenders.append(("rensa bulk digest_matrix_from_token_sets, precomputed shingles",
                               lambda rp=rp: rp.r.RMinHash.digest_matrix_from_token_sets(shs, NUM_PERM, 42)))
        if "gaoya" in peers and "gaoya" not in results["skipped"]:
            ix = peers["gaoya"].index(THRESHOLD)
            contenders.append(("gaoya bulk_hash_docs, own tokenizing",
                               lambda ix=ix: ix.minhash_index.bulk_hash_docs(texts)))
        if a.pairs and contenders:
            def clear_sig():
                for f in glob.glob(glob.escape(sig_out[0]) + "*"):
                    os.remove(f)
            nd_run = lambda: subprocess.run(sig, check=True, stdout=subprocess.DEVNULL)  # noqa: E731
            log(f"paired rounds: {a.pairs}")
            try:
                got = paired(a.pairs, nd_run, clear_sig, contenders)
                results["paired"] = {name: {"ratios": v, "median": median(v), "min": min(v), "max": max(v)}
                                     for name, v in got.items()}
            except Exception as e:  # noqa: BLE001 - the table and the accuracy check still stand
                results["skipped"]["paired"] = f"{type(e).__name__}: {e}"
                print(f"!! paired rounds failed: {type(e).__name__}: {e}")

    # Ratios: neardup's figure of the same kind (signatures / dedup) divided by this row's figure.
    ref = {(r["kind"], "--threads 1" in r["timed"]): r["shingles_per_s"] for r in results["rows"][:4]}
    print(f"\n{'tool':<10} {'version':<8} {'timed':<76} {'s':>7} {'shingles/s':>11} {'cpu/wall':>8} "
          f"{'nd/x':>6} {'nd1t/x':>6}")
    for r in results["rows"]:
        r["ratio_neardup_to_this"] = ref[(r["kind"], False)] / r["shingles_per_s"]
        r["ratio_neardup_1thread_to_this"] = ref[(r["kind"], True)] / r["shingles_per_s"]
        print(f"{r['tool']:<10} {r['version']:<8} {r['kind'] + ': ' + r['timed']:<76.76} {r['seconds']:>7.3f} "
              f"{r['shingles_per_s'] / 1e6:>10.2f}M {r['cpu_per_wall']:>8.2f} "
              f"{r['ratio_neardup_to_this']:>6.2f} {r['ratio_neardup_1thread_to_this']:>6.2f}")
    print("shingles/s = the Python-counted shingle occurrences of the corpus / seconds (best of --repeat).\n"
          "nd/x = neardup (all cores) shingles/s / this row's, same kind (sig rows vs neardup signatures, dedup rows "
          "vs neardup dedup);\nnd1t/x = the same with neardup --threads 1. cpu/wall ~ cores busy.")
    if results.get("paired"):
        print(f"\npaired: per peer, one neardup `signatures` run (all cores) and one peer run back to back "
              f"(neardup first in even rounds,\nthe peer first in odd ones), {a.pairs} rounds; nd/x of a round = "
              f"the peer's seconds / neardup's seconds in it")
        for name, v in results["paired"].items():
            print(f"  {name:<66} nd/x median {v['median']:5.2f}  min {v['min']:5.2f}  max {v['max']:5.2f}")

    if a.sample:
        results["accuracy"] = accuracy(a, recs, shs, peers, nd)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
        print(f"\nwrote {a.json}")


def accuracy(a, recs, shs, peers, nd):
    sets = [set(s) for s in shs]
    sample, truth, how = pick_sample(recs, sets, a.sample, a.seed, a.min_true_pairs)
    texts = [recs[i][1] for i in sample]
    s_shs = [shs[i] for i in sample]
    print(f"\naccuracy sample: {len(sample)} docs, {how}")
    near = exact_pairs([sets[i] for i in sample], 0.5) - truth
    print(f"true duplicate pairs (exact Jaccard of shingle sets >= {THRESHOLD}): {len(truth)}; "
          f"near misses (0.5 <= J < {THRESHOLD}): {len(near)}")
    out = {"sample_docs": len(sample), "sampling": how, "true_pairs": len(truth), "near_miss_pairs": len(near),
           "tools": {}}
    # neardup: dedup on the sample file; predicted = same cluster in --clusters.
    with tempfile.TemporaryDirectory() as tmp:
        inp, cl = os.path.join(tmp, "sample.jsonl"), os.path.join(tmp, "c.jsonl")
        with open(inp, "w", encoding="utf-8") as f:
            for i in sample:
                f.write(json.dumps({"id": recs[i][0], "text": recs[i][1]}, ensure_ascii=False) + "\n")
        subprocess.run([nd, "dedup", inp, "-o", os.path.join(tmp, "d.jsonl"), "--engine", "cpu", "--confirm",
                        "jaccard", "--clusters", cl, "-q"], check=True)
        pos = {recs[i][0]: k for k, i in enumerate(sample)}
        pred = set()
        for line in open(cl):
            members = sorted(pos[m] for m in json.loads(line)["members"])
            pred.update(itertools.combinations(members, 2))
    out["tools"]["neardup: same cluster (exact-Jaccard confirmed, transitive)"] = score(pred, truth)
    for name, p in peers.items():
        try:
            cand = p.candidates(texts, s_shs)
        except Exception as e:  # noqa: BLE001
            print(f"!! {name} accuracy failed: {type(e).__name__}: {e}")
            continue
        conf = {q for q, est in cand.items() if est >= THRESHOLD}
        out["tools"][f"{name}: LSH candidates"] = score(set(cand), truth)
        out["tools"][f"{name}: candidates with estimate >= {THRESHOLD}"] = score(conf, truth)
        out["tools"][f"{name}: same cluster of those (transitive)"] = score(closure(len(sample), conf), truth)
    print(f"\n{'tool: predicted pairs':<70} {'pred':>7} {'TP':>6} {'recall':>7} {'precision':>9}")
    fmt = lambda v: f"{v:.4f}" if v is not None else "n/a"  # noqa: E731
    for k, s in out["tools"].items():
        print(f"{k:<70} {s['predicted']:>7} {s['true_positives']:>6} {fmt(s['recall']):>7} {fmt(s['precision']):>9}")
    return out


if __name__ == "__main__":
    bootstrap()
    main()
