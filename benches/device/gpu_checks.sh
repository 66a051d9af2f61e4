#!/usr/bin/env bash
# The GPU engine's checks on a machine with a hardware GPU and no Rust toolchain, in under four
# minutes. Two steps:
#
#   benches/device/gpu_checks.sh prepare          # here, with cargo: builds into .device/
#   benches/device/gpu_checks.sh run OUTDIR       # there, from the repository root
#
# `prepare` builds a release `neardup` and the integration-test binary, stripped, into .device/
# (git-ignored; well under 64 MiB together). `run` then needs only the checkout and .device/:
#
#   1. preflight (fails fast, saying why): the driver, the Vulkan loader and an ICD, and that the
#      adapter the engine picks is NVIDIA hardware through Vulkan;
#   2. the GPU conformance suite and the host-side tests (every GPU test of the integration
#      binary);
#   3. `verify` on 200k synthetic documents;
#   4. the deciding run: `signatures --engine cpu`, `--engine gpu`, `--engine gpu --gpu-kernels
#      fused` and `--engine gpu --gpu-int64` alternating, three rounds, with per-stage timings,
#      and `compare` of the outputs;
#   5. the kernels alone at full-size batches (`bench --engine gpu`, GPU timestamps): split,
#      fused, and split on native 64-bit integers;
#   6. a sweep of GPU sub-batch sizes, each output compared with the CPU engine's;
#   7. the side-by-side table (table.md): `signatures` and `dedup` with `--engine cpu`, `gpu`
#      and `auto`, at all cores and at 4 threads, on word 5-grams and on character 24-grams
#      with 260 permutations, each with wall, CPU seconds and peak RSS; and start-up alone,
#      with a cold and a warm pipeline cache;
#   8. the Python package's in-memory path (`neardup.signatures` on a pyarrow array), CPU vs
#      GPU, when the machine's python3 has numpy and pyarrow (the package is carried in
#      .device/python.tar.xz).
#
# Every step runs under its own timeout (together under four minutes); OUTDIR gets one log per step and summary.txt, and the
# exit status is non-zero when any step failed. `run OUTDIR --dry-run` runs the same steps on
# any adapter, a software one included, with a corpus a tenth of the size: it proves the script
# on a machine without a GPU before device time is spent.
set -uo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
bin=.device

prepare() {
    set -e
    cargo build --release
    cargo test --release -p neardup-cli --test it --no-run
    mkdir -p "$bin"
    cp target/release/neardup "$bin/neardup"
    # The newest integration-test binary of the release profile.
    it=$(ls -t target/release/deps/it-* | grep -v '\.d$' | head -1)
    cp "$it" "$bin/it"
    strip "$bin/neardup" "$bin/it"
    # The Python package as `pip install .` built it (an abi3 module: any CPython 3.9+).
    local venv=${NEARDUP_CI_VENV:-/tmp/neardup-ci-venv} site
    site=$("$venv/bin/python" -c 'import neardup, os; print(os.path.dirname(neardup.__file__))' \
        2>/dev/null || true)
    rm -rf "$bin/python.tar.xz"
    if [ -n "$site" ]; then
        # Compressed: the binaries and the module together would pass the 64 MiB a device call
        # carries.
        local tmp
        tmp=$(mktemp -d)
        cp -r "$site" "$tmp/neardup"
        rm -rf "$tmp/neardup/__pycache__"
        strip "$tmp"/neardup/*.so 2>/dev/null || true
        tar -C "$tmp" -cJf "$bin/python.tar.xz" neardup
        rm -rf "$tmp"
    else
        echo "(no Python package in $venv: the python step will say so)"
    fi
    du -sh "$bin"/neardup "$bin"/it "$bin"/python.tar.xz 2>/dev/null
    du -sh "$bin"
}

# The steps, each run by a fresh `gpu_checks.sh _step NAME` under its own timeout (the settings
# travel in the environment).
preflight() {
    [ -x "$nd" ] || { echo "no $nd: run 'gpu_checks.sh prepare' on the build machine"; return 1; }
    if [ "$dry" != --dry-run ]; then
        command -v nvidia-smi > /dev/null && nvidia-smi -L || { echo "no NVIDIA driver (nvidia-smi)"; return 1; }
    fi
    ldconfig -p | grep -q 'libvulkan.so.1' || { echo "no Vulkan loader (libvulkan.so.1)"; return 1; }
    ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json \
        /usr/local/nvidia/share/vulkan/icd.d/*.json 2>/dev/null \
        || echo "(no ICD file in the usual places; VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset})"
    "$nd" devices || return 1
    "$nd" devices --json > "$out/devices.json" || return 1
    # The adapter the GPU engine takes, as a run names it in its summary line.
    "$nd" signatures fixtures/example.jsonl -o /tmp/neardup_probe.tsv --format tsv --engine gpu \
        2> "$out/probe.err" || { cat "$out/probe.err"; return 1; }
    local picked
    picked=$(grep -o '\[gpu ([^]]*\]' "$out/probe.err")
    echo "picked: $picked"
    if [ "$dry" != --dry-run ]; then
        case "$picked" in
            *software*) echo "the GPU engine picked a software adapter"; return 1 ;;
            *NVIDIA*Vulkan*) ;;
            *) echo "the GPU engine picked $picked, not NVIDIA hardware through Vulkan"; return 1 ;;
        esac
    fi
}

conformance() {
    # Enough threads to finish: each test holds a device of its own, the host side is light.
    NEARDUP_REQUIRE_GPU=1 NEARDUP_REQUIRE_GPU_INT64=1 "$bin/it" --test-threads "$(nproc)" \
        conformance gpu_host gpu_startup
}

deciding() {
    "$nd" synth "$docs" -o "$corpus" --words 300 --seed 1 || return 1
    for round in 1 2; do
        for e in cpu gpu gpu-fused gpu-int64; do
            echo "== round $round, $e"
            local flags=(--engine "${e%%-*}")
            [ "$e" = gpu-fused ] && flags+=(--gpu-kernels fused)
            [ "$e" = gpu-int64 ] && flags+=(--gpu-int64)
            NEARDUP_DEBUG_STAGES=1 "$nd" signatures "$corpus" -o "/tmp/neardup_$e.npy" "${flags[@]}" \
                || return 1
        done
    done
    "$nd" compare /tmp/neardup_cpu.npy /tmp/neardup_gpu.npy || return 1
    "$nd" compare /tmp/neardup_cpu.npy /tmp/neardup_gpu-fused.npy || return 1
    "$nd" compare /tmp/neardup_cpu.npy /tmp/neardup_gpu-int64.npy
}

verify() {
    "$nd" verify "$corpus"
}

kernels() {
    "$nd" bench "$corpus" --engine gpu --repeat 2 || return 1
    "$nd" bench "$corpus" --engine gpu --repeat 1 --gpu-kernels fused || return 1
    "$nd" bench "$corpus" --engine gpu --repeat 1 --gpu-int64
}

sweep() {
    "$nd" signatures "$corpus" -o /tmp/neardup_sweep_cpu.tsv --format tsv --engine cpu -q || return 1
    for mib in 1 32 512; do
        echo "== --gpu-batch-mib $mib"
        "$nd" signatures "$corpus" -o "/tmp/neardup_sweep_$mib.tsv" --format tsv --engine gpu \
            --gpu-batch-mib "$mib" || return 1
        "$nd" compare /tmp/neardup_sweep_cpu.tsv "/tmp/neardup_sweep_$mib.tsv" || return 1
    done
}

# One row of the table: `measure LABEL ENGINE THREADS -- neardup ARGS...`, from neardup's own
# resources line (NEARDUP_DEBUG_STAGES) and the wall time around the whole process.
measure() {
    local label=$1 engine=$2 threads=$3 t0 took line chose
    shift 4
    t0=$(date +%s.%N)
    NEARDUP_DEBUG_STAGES=1 "$nd" "$@" --engine "$engine" --threads "$threads" \
        2> /tmp/neardup_measure.err > /dev/null || { cat /tmp/neardup_measure.err; return 1; }
    took=$(echo "$(date +%s.%N) - $t0" | bc)
    line=$(grep -o 'wall .*' /tmp/neardup_measure.err | tail -1)
    chose=$(grep -o 'auto chose [a-z]*' /tmp/neardup_measure.err | tail -1)
    printf '| %s | %s%s | %s | %.2f | %s |\n' "$label" "$engine" "${chose:+ ($chose)}" \
        "$threads" "$took" "$line" | tee -a "$out/table.md"
}

table() {
    local small=/tmp/neardup_gpu_small.jsonl all
    all=$(nproc)
    "$nd" synth "$((docs / 10))" -o "$small" --words 300 --seed 1 -q || return 1
    {
        echo "| run | engine | threads | process wall s | neardup's own: wall, CPU s, peak RSS |"
        echo "|---|---|---|---|---|"
    } > "$out/table.md"
    cat "$out/table.md"
    # `auto` measures both engines once per machine and kind of run, then reads that back.
    measure "auto's first run (it measures)" auto "$all" -- signatures "$corpus" \
        -o /tmp/neardup_table.npy || return 1
    local cmd e t
    for cmd in signatures dedup; do
        local outarg=(-o /tmp/neardup_table.out)
        [ "$cmd" = signatures ] && outarg=(-o /tmp/neardup_table.npy)
        for t in "$all" 4; do
            for e in cpu gpu auto; do
                measure "$cmd, word 5-grams, $docs docs" "$e" "$t" -- \
                    "$cmd" "$corpus" "${outarg[@]}" || return 1
            done
            for e in cpu gpu auto; do
                measure "$cmd, char 24-grams x 260, $((docs / 10)) docs" "$e" "$t" -- \
                    "$cmd" "$small" "${outarg[@]}" --shingle char --k 24 --num-perm 260 \
                    $([ "$cmd" = dedup ] && echo --bands 20 --rows 13) || return 1
            done
        done
    done
    # Start-up alone: a fresh cache directory, then the cache that run left.
    local cache
    cache=$(mktemp -d)
    for pass in cold warm; do
        NEARDUP_CACHE_DIR=$cache NEARDUP_DEBUG_STAGES=1 "$nd" signatures fixtures/example.jsonl \
            -o /tmp/neardup_startup.tsv --format tsv --engine gpu 2>&1 \
            | grep -o 'start-up .*' | sed "s/^/$pass: /" | tee -a "$out/startup.txt"
    done
}

python_path() {
    [ -f "$bin/python.tar.xz" ] || { echo "SKIPPED: no .device/python.tar.xz (prepare had no package)"; return 0; }
    python3 -c 'import numpy, pyarrow' 2>/dev/null \
        || { echo "SKIPPED: this python3 has no numpy or pyarrow"; return 0; }
    local py
    py=$(mktemp -d)
    tar -C "$py" -xJf "$bin/python.tar.xz" || return 1
    {
    PYTHONPATH="$py" python3 - "$corpus" <<'PY'
import json, resource, sys, time
import pyarrow as pa
import neardup
texts = pa.array([json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")])
mb = texts.nbytes / 1e6
for threads in (0, 4):
    for engine in ("cpu", "gpu"):
        neardup.signatures(texts[:1000], engine=engine, threads=threads)  # engine kept warm
        best = None
        for _ in range(2):
            c0, t0 = time.process_time(), time.perf_counter()
            neardup.signatures(texts, engine=engine, threads=threads)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            best = min(best or (wall, cpu), (wall, cpu))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        print(f"| python signatures, {len(texts)} texts, {mb:.0f} MB | {engine} | {threads or 'all'} "
              f"| {best[0]:.3f} | cpu {best[1]:.2f} s, peak rss so far {rss:.0f} MB |")
PY
} 2>&1 | tee -a "$out/table.md"
}

run() {
    out=${1:?usage: gpu_checks.sh run OUTDIR [--dry-run]}
    dry=${2:-}
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    docs=200000
    [ "$dry" = --dry-run ] && docs=20000
    export out dry docs bin nd="$PWD/$bin/neardup" corpus=/tmp/neardup_gpu_corpus.jsonl
    export NEARDUP_ROOT="$PWD" NEARDUP_BIN="$PWD/$bin/neardup"
    export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
    local status=0
    : > "$out/summary.txt"
    # The limits add up to under four minutes.
    for step in preflight:15 conformance:45 deciding:25 verify:15 kernels:30 sweep:20 table:70 \
        python_path:20; do
        local name=${step%%:*} secs=${step##*:} t0 rc took
        t0=$(date +%s.%N)
        timeout "$secs" "$0" _step "$name" > "$out/$name.log" 2>&1
        rc=$?
        took=$(echo "$(date +%s.%N) - $t0" | bc)
        printf '%-12s rc=%-3s %6.1f s (limit %s s)\n' "$name" "$rc" "$took" "$secs" \
            | tee -a "$out/summary.txt"
        if [ "$rc" -ne 0 ]; then
            status=1
            if [ "$name" = preflight ]; then
                cat "$out/preflight.log"
                exit 1
            fi
        fi
    done
    exit $status
}

case "${1:-}" in
    prepare) prepare ;;
    run) shift; run "$@" ;;
    _step) "$2" ;;
    *) echo "usage: gpu_checks.sh prepare | run OUTDIR [--dry-run]"; exit 2 ;;
esac
