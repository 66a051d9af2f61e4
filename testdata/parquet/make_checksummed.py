"""Write checksummed.parquet: three records in uncompressed, plain-encoded pages, each page with
its CRC-32 (the Parquet format's optional page checksum), as pyarrow writes them.

    python3 testdata/parquet/make_checksummed.py

A test flips a byte of a text in the file: a reader that checks page checksums refuses it.
"""

import pathlib

import pyarrow as pa
import pyarrow.parquet as pq

here = pathlib.Path(__file__).resolve().parent
table = pa.table(
    {
        "id": ["a", "b", "c"],
        "text": [
            "the quick brown fox jumps over the lazy dog",
            "a second text of words entirely different here",
            "third one",
        ],
    }
)
pq.write_table(
    table,
    here / "checksummed.parquet",
    compression="NONE",
    use_dictionary=False,
    write_page_checksum=True,
)
