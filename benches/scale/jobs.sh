#!/bin/bash
# jobs.sh DIR PARTITIONS TASK_MEMORY: the sharded run over DIR/sh-* as tasks (`stage next`,
# `stage run`, `--task-memory TASK_MEMORY` MiB), one task at a time, each under /usr/bin/time;
# then `rank` and `cluster` again, each as one job, checking that both forms write the same
# files. Prints each kind of task's count, seconds summed and largest peak RSS (`next`: the
# `stage next` calls), and the task files' bytes at their peak.
set -euo pipefail
N=${NEARDUP:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/neardup}
cd "$1"
P=$2
TM=$3
T="/usr/bin/time -f %e:%M"
rm -rf wd out t.* ./*.sha du.* c1.jsonl
"$N" stage init wd sh-* --partitions "$P" --exact --out out -q
n=0
while wave=$($T -o "t.next.$n" "$N" stage next wd --task-memory "$TM") && [ -n "$wave" ]; do
  n=$((n + 1))
  case "$wave" in
    rank-finish*) du -sb wd/rank/tasks > du.rank ;;
    cluster-finish*) du -sb wd/cluster/tasks > du.cluster ;;
  esac
  while IFS= read -r t; do
    # t.KIND[.N...]: `cluster-star round=1 part=2` times into t.cluster-star.1.2
    f="t.$(echo "$t" | sed -e 's/ memory=[0-9]*//' -e 's/ [a-z]*=/./g')"
    $T -o "$f" "$N" stage run wd "$t" --engine cpu -q
  done <<< "$wave"
done
sha256sum wd/rank/*.parquet > rank2.sha
sha256sum wd/cluster/*.parquet wd/cluster/chaining.rows > cluster2.sha
rm wd/rank/*.parquet wd/rank/summary.json
$T -o t.rank1 "$N" stage rank wd -q
sha256sum wd/rank/*.parquet > rank1.sha
cmp rank1.sha rank2.sha
rm -rf wd/cluster
$T -o t.cluster1 "$N" stage cluster wd -q --clusters c1.jsonl
sha256sum wd/cluster/*.parquet wd/cluster/chaining.rows > cluster1.sha
cmp cluster1.sha cluster2.sha && cmp c1.jsonl out/clusters.jsonl
M=$(ls t.rank-sort.* | wc -l)
K=$(ls t.cluster-roots.* | wc -l)
R=$(ls t.cluster-star.* | cut -d. -f3 | sort -u | wc -l)
echo "identical files; $M ranges, $K parts, $R rounds"
python3 - <<'PY'
import glob
kinds = sorted({f.split(".")[1] for f in glob.glob("t.*")}, key=lambda k: (k not in ("rank1", "cluster1"), k))
for k in kinds:
    fs = glob.glob(f"t.{k}") + glob.glob(f"t.{k}.*")
    vals = [open(f).read().strip().split("\n")[-1].split(":") for f in fs]
    print(f"{k}: {len(fs)} jobs, {sum(float(v[0]) for v in vals):.1f} s, "
          f"peak {max(int(v[1]) for v in vals) / 1024:.0f} MiB")
PY
echo "task files at their peak: rank $(cut -f1 du.rank), cluster $(cut -f1 du.cluster) bytes"
