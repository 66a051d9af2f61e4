#!/bin/bash
# jobs.sh DIR PARTITIONS TASK_MEMORY: `rank` and `cluster` over DIR/sh-*, each once as one job
# and once as its parallel jobs (`--step`, `--task-memory TASK_MEMORY` MiB), every job under
# /usr/bin/time; checks that both forms write the same files, and prints each step's jobs,
# their seconds summed and the largest peak RSS, and the jobs' files' bytes at their peak.
set -euo pipefail
N=${NEARDUP:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/neardup}
cd "$1"
P=$2
TM=$3
S=$(ls sh-* | wc -l)
T="/usr/bin/time -f %e:%M"
rm -rf wd t.* ./*.sha
"$N" stage init wd sh-* --partitions "$P" --exact -q
for s in $(seq 0 $((S - 1))); do $T -o "t.sign.$s" "$N" stage sign wd --shard "$s" --engine cpu -q; done
$T -o t.rank1 "$N" stage rank wd -q
sha256sum wd/rank/*.parquet > rank1.sha
rm wd/rank/*.parquet wd/rank/summary.json
R="$N stage rank wd -q --task-memory $TM --step"
plan() { python3 -c "import json; print(json.load(open('$1'))['summary']['$2'])"; }
for s in $(seq 0 $((S - 1))); do $T -o "t.rsplit.$s" $R split --shard "$s"; done
$T -o t.rplan $R plan
M=$(plan wd/rank/tasks/plan.json ranges)
for r in $(seq 0 $((M - 1))); do $T -o "t.rsort.$r" $R sort --range "$r"; done
for r in $(seq 0 $((M - 1))); do $T -o "t.rexact.$r" $R exact --range "$r"; done
du -sb wd/rank/tasks > du.rank
for s in $(seq 0 $((S - 1))); do $T -o "t.rwrite.$s" $R write --shard "$s"; done
$T -o t.rfinish $R finish
sha256sum wd/rank/*.parquet > rank2.sha
cmp rank1.sha rank2.sha
for s in $(seq 0 $((S - 1))); do "$N" stage bands wd --shard "$s" -q; done
for p in $(seq 0 $((P - 1))); do "$N" stage confirm wd --partition "$p" -q; done
$T -o t.cluster1 "$N" stage cluster wd -q --clusters c1.jsonl --pairs p1.jsonl
sha256sum wd/cluster/*.parquet wd/cluster/chaining.rows > cluster1.sha
rm -rf wd/cluster
C="$N stage cluster wd -q --step"
$T -o t.cplan $C plan --task-memory "$TM"
K=$(plan wd/cluster/tasks/plan.json parts)
for p in $(seq 0 $((P - 1))); do $T -o "t.cedges.$p" $C edges --partition "$p"; done
for s in $(seq 0 $((S - 1))); do $T -o "t.clocate.$s" $C locate --shard "$s"; done
r=0
while :; do
  for k in $(seq 0 $((K - 1))); do $T -o "t.cstar.$r.$k" $C star --round "$r" --part "$k"; done
  "$N" stage cluster wd --step star --round "$r" --part 0 2>&1 | grep -q "found the components" && break
  r=$((r + 1))
done
for k in $(seq 0 $((K - 1))); do $T -o "t.croots.$k" $C roots --part "$k"; done
for s in $(seq 0 $((S - 1))); do $T -o "t.cattributes.$s" $C attributes --shard "$s"; done
for k in $(seq 0 $((K - 1))); do $T -o "t.cclusters.$k" $C clusters --part "$k"; done
for s in $(seq 0 $((S - 1))); do $T -o "t.cverdicts.$s" $C verdicts --shard "$s"; done
du -sb wd/cluster/tasks > du.cluster
$T -o t.cfinish $C finish --clusters c2.jsonl --pairs p2.jsonl
sha256sum wd/cluster/*.parquet wd/cluster/chaining.rows > cluster2.sha
cmp cluster1.sha cluster2.sha && cmp c1.jsonl c2.jsonl && cmp p1.jsonl p2.jsonl
echo "identical files; $M ranges, $K parts, $((r + 1)) rounds"
python3 - <<'PY'
import glob
for st in ["sign", "rank1", "rsplit", "rplan", "rsort", "rexact", "rwrite", "rfinish", "cluster1",
           "cplan", "cedges", "clocate", "cstar", "croots", "cattributes", "cclusters",
           "cverdicts", "cfinish"]:
    fs = glob.glob(f"t.{st}") + glob.glob(f"t.{st}.*")
    vals = [open(f).read().strip().split("\n")[-1].split(":") for f in fs]
    print(f"{st}: {len(fs)} jobs, {sum(float(v[0]) for v in vals):.1f} s, "
          f"peak {max(int(v[1]) for v in vals) / 1024:.0f} MiB")
PY
echo "jobs' files at their peak: rank $(cut -f1 du.rank), cluster $(cut -f1 du.cluster) bytes"
