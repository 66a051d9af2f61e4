#!/bin/bash
# stages.sh DIR PARTITIONS: every stage of `neardup stage` over DIR/sh-*, each as its own job
# under /usr/bin/time, as a scheduler runs them; prints each stage's wall time over its jobs,
# its largest peak RSS, the run's counts and the work directory's bytes. The shards' outputs
# are written and removed one at a time.
set -euo pipefail
N=${NEARDUP:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/neardup}
cd "$1"
P=$2
S=$(ls sh-* | wc -l)
T="/usr/bin/time -f %e:%M"
"$N" stage init wd sh-* --partitions "$P" --exact -q
for s in $(seq 0 $((S - 1))); do $T -o t.sign.$s "$N" stage sign wd --shard "$s" --engine cpu -q; done
$T -o t.rank "$N" stage rank wd -q
for s in $(seq 0 $((S - 1))); do $T -o t.bands.$s "$N" stage bands wd --shard "$s" -q; done
du -sb wd > du.bands
# confirm, its shards read once: each partition's needs, each shard's texts shipped, then the
# partitions (`confirm` below sums the three).
for p in $(seq 0 $((P - 1))); do $T -o t.confirm.needs.$p "$N" stage run wd "confirm-needs partition=$p" -q; done
for s in $(seq 0 $((S - 1))); do $T -o t.confirm.texts.$s "$N" stage run wd "confirm-texts shard=$s" -q; done
for p in $(seq 0 $((P - 1))); do $T -o t.confirm.$p "$N" stage confirm wd --partition "$p" -q; done
$T -o t.cluster "$N" stage cluster wd --clusters cl.jsonl -q
for s in $(seq 0 $((S - 1))); do
  # One path per shard: a work directory never lets one unit's output replace another's.
  $T -o t.apply.$s "$N" stage apply wd --shard "$s" -o "out-$s.jsonl" -q
  rm "out-$s.jsonl"
done
$T -o t.report "$N" stage report wd --report report.json -q
du -sb wd > du
python3 - <<'PY'
import glob, json
total = 0
for st in ["sign", "rank", "bands", "confirm", "cluster", "apply", "report"]:
    fs = sorted(glob.glob(f"t.{st}*"))
    vals = [open(f).read().strip().split("\n")[-1].split(":") for f in fs]
    wall = sum(float(v[0]) for v in vals)
    total += wall
    print(f"{st}: {len(fs)} jobs, {wall:.2f} s, peak {max(int(v[1]) for v in vals) / 1024:.0f} MiB")
print(f"all jobs: {total:.1f} s")
c = json.load(open("report.json"))["counts"]
print({k: c[k] for k in ["documents_read", "documents_written", "documents_in_clusters", "clusters"]})
print("work directory bytes after bands:", open("du.bands").read().split()[0],
      "at the end:", open("du").read().split()[0])
PY
