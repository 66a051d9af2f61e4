#!/usr/bin/env bash
# GPU checks for a machine with a hardware GPU (written for the H200 device machine, which has
# no Rust toolchain): run the GPU conformance suite and the GPU benchmark from binaries built
# elsewhere. Prepare on the build machine, from the repository root:
#
#   cargo build --release
#   cargo test --release --test it --no-run 2>&1 | grep -o 'target/release/deps/it-[0-9a-f]*' | head -1 \
#       | xargs -I{} cp {} target/release/it
#
# then, on the GPU machine, from the repository root (with the Vulkan loader installed):
#
#   benches/device/gpu_checks.sh OUTDIR
#
# It writes OUTDIR/devices.txt, OUTDIR/conformance.log, OUTDIR/verify.txt and
# OUTDIR/bench.json (+ bench.txt), and exits non-zero if any check fails.
set -uo pipefail
out=${1:?usage: gpu_checks.sh OUTDIR}
mkdir -p "$out"
nd=target/release/neardup
status=0
"$nd" devices > "$out/devices.txt" 2>&1 || status=1
NEARDUP_REQUIRE_GPU=1 target/release/it --test-threads 1 conformance::gpu > "$out/conformance.log" 2>&1 || status=1
"$nd" synth 200000 -o /tmp/gpu_corpus.jsonl --words 300 --seed 1 || status=1
"$nd" verify /tmp/gpu_corpus.jsonl > "$out/verify.txt" 2>&1 || status=1
"$nd" bench /tmp/gpu_corpus.jsonl --engine all --repeat 3 --json > "$out/bench.json" 2>>"$out/bench.err" || status=1
"$nd" bench /tmp/gpu_corpus.jsonl --engine all --repeat 3 > "$out/bench.txt" 2>>"$out/bench.err" || status=1
exit $status
