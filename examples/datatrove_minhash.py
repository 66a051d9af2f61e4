"""A datatrove MinHash dedup pipeline with neardup's steps in place of datatrove's.

Four executors, as in datatrove's own MinHash example: signatures, buckets, clusters, filter.
Against that example only the imports and the class names differ (``MinhashConfig`` ->
``NeardupConfig``, ``MinhashDedup*`` -> ``NeardupDedup*``), and the buckets stage may run any
number of tasks. The executors here are local; ``SlurmPipelineExecutor`` or
``RayPipelineExecutor`` take the same pipelines, as long as BASE is a path every task sees.

    python examples/datatrove_minhash.py INPUT_FOLDER BASE [TASKS]

reads the JSONL files under INPUT_FOLDER and writes BASE/deduplicated_output (the kept
documents) and BASE/removed (the dropped ones, each tagged with its cluster's root id).
"""

import sys

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers.jsonl import JsonlWriter

from neardup.datatrove import (
    NeardupConfig,
    NeardupDedupBuckets,
    NeardupDedupCluster,
    NeardupDedupFilter,
    NeardupDedupSignature,
)

input_folder, base = sys.argv[1], sys.argv[2]
tasks = int(sys.argv[3]) if len(sys.argv) > 3 else 4

# n-grams, buckets and their size, under datatrove's names.
config = NeardupConfig(num_buckets=16, hashes_per_bucket=8)

# The documents to deduplicate; stage 4 must read them exactly as stage 1 did.
reader = JsonlReader(input_folder)

# Stage 1: each task spools its share of the documents.
stage1 = LocalPipelineExecutor(
    pipeline=[reader, NeardupDedupSignature(output_folder=f"{base}/signatures", config=config)],
    tasks=tasks,
    logging_dir=f"{base}/logs/signatures",
)

# Stage 2: the signatures, any number of tasks.
stage2 = LocalPipelineExecutor(
    pipeline=[
        NeardupDedupBuckets(
            input_folder=f"{base}/signatures", output_folder=f"{base}/buckets", config=config
        )
    ],
    tasks=tasks,
    logging_dir=f"{base}/logs/buckets",
    depends=stage1,
)

# Stage 3: one task, on every core: bands, exact confirmation, clusters, verdicts.
stage3 = LocalPipelineExecutor(
    pipeline=[
        NeardupDedupCluster(
            input_folder=f"{base}/buckets", output_folder=f"{base}/remove_ids", config=config
        )
    ],
    tasks=1,
    logging_dir=f"{base}/logs/clusters",
    depends=stage2,
)

# Stage 4: the same reader and tasks as stage 1; one document per cluster is kept.
stage4 = LocalPipelineExecutor(
    pipeline=[
        reader,
        NeardupDedupFilter(
            input_folder=f"{base}/remove_ids",
            exclusion_writer=JsonlWriter(f"{base}/removed", compression=None),
        ),
        JsonlWriter(output_folder=f"{base}/deduplicated_output", compression=None),
    ],
    tasks=tasks,
    logging_dir=f"{base}/logs/filter",
    depends=stage3,
)

if __name__ == "__main__":
    stage4.run()
