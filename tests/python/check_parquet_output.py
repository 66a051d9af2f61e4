"""Check a neardup Parquet output against its input with pyarrow, column by column.

    python3 check_parquet_output.py INPUT.parquet OUTPUT.parquet CLUSTERS.jsonl

The output must hold the input's schema (metadata included) plus a nullable string column
`minhash_cluster`, and exactly the input's rows that survive (each cluster's root and every
document in no cluster), in input order, with every value equal; `minhash_cluster` is the
root's id for a document in a cluster and null otherwise.
"""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq

src_path, out_path, clusters_path = sys.argv[1:4]
src = pq.read_table(src_path)
out = pq.read_table(out_path)

root_of = {}
with open(clusters_path) as f:
    for line in f:
        c = json.loads(line)
        for m in c["members"]:
            root_of[m] = c["root"]

assert out.schema.metadata == src.schema.metadata, (out.schema.metadata, src.schema.metadata)
assert out.schema.names == src.schema.names + ["minhash_cluster"], out.schema.names
tag = out.schema.field("minhash_cluster")
assert tag.type == pa.string() and tag.nullable, tag
for field in src.schema:
    got = out.schema.field(field.name)
    assert got.type == field.type, (field.name, got.type, field.type)
    assert got.nullable == field.nullable, field.name

ids = src.column("id").to_pylist()
keep = [root_of.get(i, i) == i for i in ids]
expected = src.filter(pa.array(keep))
assert out.num_rows == expected.num_rows, (out.num_rows, expected.num_rows)
for name in src.schema.names:
    a, b = out.column(name).combine_chunks(), expected.column(name).combine_chunks()
    assert a.equals(b), f"column {name} differs"
    assert a.null_count == b.null_count, name
want_tags = [root_of.get(i) for i in expected.column("id").to_pylist()]
assert out.column("minhash_cluster").to_pylist() == want_tags
print(f"ok: {out.num_rows} rows, {len(src.schema)} columns equal, tags as the clusters say")
