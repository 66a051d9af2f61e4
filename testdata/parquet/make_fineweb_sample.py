"""Write fineweb-sample.parquet: the records of fixtures/corpus.jsonl in the layout of a
FineWeb shard (text, id, dump, url, date, file_path, language, language_score, token_count),
plus a struct column, a list column, some nulls, three row groups, snappy pages and schema
metadata, as pyarrow writes them.

    python3 testdata/parquet/make_fineweb_sample.py

Deterministic: the same bytes on every run with the same pyarrow.
"""

import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq

here = pathlib.Path(__file__).resolve().parent
records = [json.loads(line) for line in (here / "../../fixtures/corpus.jsonl").open()]

dumps = ["CC-MAIN-2024-10", "CC-MAIN-2024-18", "CC-MAIN-2024-22"]
rows = []
for i, r in enumerate(records):
    rows.append(
        {
            "text": r["text"],
            "id": f"<urn:uuid:{r['id']}>",
            "dump": dumps[i % 3],
            "url": None if i % 17 == 5 else f"https://example.org/{i}/{r['id']}",
            "date": f"2024-0{1 + i % 9}-1{i % 10}T0{i % 10}:1{i % 6}:00Z",
            "file_path": f"s3://commoncrawl/crawl-data/{dumps[i % 3]}/segments/{i // 50}.warc.gz",
            "language": "en",
            "language_score": None if i % 23 == 7 else round(0.65 + (i % 35) / 100, 6),
            "token_count": len(r["text"].split()) * 4 // 3,
            "metadata": {
                "source": ["web", "forum", "news"][i % 3],
                "quality": None if i % 11 == 3 else (i % 100) / 100,
            },
            "tags": None if i % 13 == 4 else [f"t{j}" for j in range(i % 4)],
        }
    )

schema = pa.schema(
    [
        ("text", pa.string()),
        ("id", pa.string()),
        ("dump", pa.string()),
        ("url", pa.string()),
        ("date", pa.string()),
        ("file_path", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("token_count", pa.int64()),
        ("metadata", pa.struct([("source", pa.string()), ("quality", pa.float64())])),
        ("tags", pa.list_(pa.string())),
    ],
    metadata={"huggingface": json.dumps({"info": {"features": "fineweb-like"}})},
)
table = pa.Table.from_pylist(rows, schema=schema)
pq.write_table(
    table,
    here / "fineweb-sample.parquet",
    row_group_size=100,
    compression="snappy",
)
print(f"wrote {len(rows)} rows")
