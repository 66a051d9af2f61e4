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
#   6. a sweep of GPU sub-batch sizes, each output compared with the CPU engine's.
#
# Every step runs under its own timeout; OUTDIR gets one log per step and summary.txt, and the
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
    du -sh "$bin"/neardup "$bin"/it
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
    NEARDUP_REQUIRE_GPU=1 NEARDUP_REQUIRE_GPU_INT64=1 "$bin/it" --test-threads 2 conformance gpu_host
}

deciding() {
    "$nd" synth "$docs" -o "$corpus" --words 300 --seed 1 || return 1
    for round in 1 2 3; do
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
    "$nd" bench "$corpus" --engine gpu --repeat 2 --gpu-kernels fused || return 1
    "$nd" bench "$corpus" --engine gpu --repeat 2 --gpu-int64
}

sweep() {
    "$nd" signatures "$corpus" -o /tmp/neardup_sweep_cpu.tsv --format tsv --engine cpu -q || return 1
    for mib in 1 8 32 128 512; do
        echo "== --gpu-batch-mib $mib"
        "$nd" signatures "$corpus" -o "/tmp/neardup_sweep_$mib.tsv" --format tsv --engine gpu \
            --gpu-batch-mib "$mib" || return 1
        "$nd" compare /tmp/neardup_sweep_cpu.tsv "/tmp/neardup_sweep_$mib.tsv" || return 1
    done
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
    for step in preflight:20 conformance:60 deciding:45 verify:20 kernels:50 sweep:40; do
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
