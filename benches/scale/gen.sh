#!/bin/bash
# gen.sh DIR SHARDS: SHARDS zstd JSONL shards of 1.25M synthetic documents of about 20 words,
# ids unique across shards, every 100th document followed by a near copy (its first word
# changed), so that about 3% of the documents are in clusters. NEARDUP: the binary (default
# target/release/neardup of this checkout).
set -euo pipefail
N=${NEARDUP:-$(dirname "$0")/../../target/release/neardup}
mkdir -p "$1"
for i in $(seq 0 $(($2 - 1))); do
  s=$(printf %03d "$i")
  "$N" synth 1250000 --words 20 --seed $((1000 + i)) -o - -q | awk -v s="$s" '{
    sub(/"id":"syn-/, "\"id\":\"s" s "-");
    print;
    if (NR % 100 == 0) {
      d = $0; sub(/"id":"s/, "\"id\":\"d", d); sub(/"text":"[A-Za-z]+/, "\"text\":\"Qzx", d);
      print d;
    }
  }' | zstd -q -3 -o "$1/sh-$s.jsonl.zst"
done
