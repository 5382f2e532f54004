"""Synthetic Delta logs of millions of files, written with Arrow in chunks (bounded memory): a
Parquet checkpoint holding every add action, then commits of a few adds each. The data files
are absent: only what reads the log alone (loading, planning, answers from stats, commits,
checkpoints) can run on these tables, which is what the scale benchmark measures.

The table is benchmarks.synthetic's store_sales-like one, partitioned by date: file i holds
1,000 rows with ss_ticket_number from i * 1,000 to i * 1,000 + 999, so `ss_ticket_number = k`
selects exactly one file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.synthetic import FIRST_DATE, NUM_DATES, PARTITION_COLUMNS, SCHEMA
from skiplake.log.actions import Metadata, now_ms
from skiplake.log.arrow_schema import ADD_TYPE, CHECKPOINT_SCHEMA, STRING_MAP
from skiplake.log.checkpoint import checkpoint_table
from skiplake.log.snapshot import Snapshot
from skiplake.log.typed_stats import stats_columns, stats_struct
from skiplake.txn import create

ROWS_PER_FILE = 1_000
CHUNK = 500_000


def file_count_of(path: str | Path) -> int | None:
    """The number of files a table written here holds (from _last_checkpoint), or None."""
    last = Path(path) / "_delta_log" / "_last_checkpoint"
    if not last.exists():
        return None
    return int(json.loads(last.read_text()).get("numOfAddFiles", -1))


def write_log(path: str | Path, files: int, commits: int = 10, adds_per_commit: int = 100, typed: bool = False) -> None:
    """A table at `path` of `files` files in a version-0 checkpoint, then `commits` commits of
    `adds_per_commit` new files each. `typed`: the checkpoint also carries each file's stats as
    typed columns (`add.stats_parsed`, as skiplake's own checkpoints do), not only as JSON."""
    path = Path(path)
    create(str(path), Metadata.new(SCHEMA, list(PARTITION_COLUMNS), {}))
    head = checkpoint_table(Snapshot.load(str(path)))   # protocol and metaData, no files
    log = path / "_delta_log"
    name = log / f"{0:020d}.checkpoint.parquet"
    schema = CHECKPOINT_SCHEMA
    if typed:
        schema = schema.set(schema.get_field_index("add"), pa.field("add", _with_typed(add_actions(0, 1)).type))
    with pq.ParquetWriter(str(name), schema, compression="snappy") as writer:
        writer.write_table(pa.table({f.name: head.column(f.name) if f.name != "add" else pa.nulls(head.num_rows, f.type)
                                     for f in schema}, schema=schema))
        for start in range(0, files, CHUNK):
            adds = add_actions(start, min(files, start + CHUNK))
            adds = _with_typed(adds) if typed else adds
            columns = {f.name: adds if f.name == "add" else pa.nulls(len(adds), f.type) for f in schema}
            writer.write_table(pa.table(columns, schema=schema), row_group_size=100_000)
    (log / "_last_checkpoint").write_text(json.dumps({
        "version": 0, "size": head.num_rows + files, "sizeInBytes": os.path.getsize(name), "numOfAddFiles": files}))
    next_file = files
    for version in range(1, commits + 1):
        adds = add_actions(next_file, next_file + adds_per_commit).to_pylist()
        next_file += adds_per_commit
        lines = [json.dumps({"commitInfo": {"timestamp": now_ms(), "operation": "WRITE",
                                            "operationParameters": {"mode": "Append"}, "isBlindAppend": True}})]
        for add in adds:
            add["partitionValues"] = dict(add["partitionValues"])
            lines.append(json.dumps({"add": {k: v for k, v in add.items() if v is not None}}))
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _with_typed(adds: pa.StructArray) -> pa.StructArray:
    """`adds` with `stats_parsed`, from their JSON stats, as skiplake's checkpoint writer makes it."""
    columns = stats_columns(SCHEMA, {}, list(PARTITION_COLUMNS))
    stats = stats_struct(adds.field("stats"), columns)
    children = [adds.field(i) for i in range(adds.type.num_fields)] + [stats]
    return pa.StructArray.from_arrays(children, fields=[*adds.type, pa.field("stats_parsed", stats.type)])


def add_actions(start: int, end: int) -> pa.StructArray:
    """The add actions of files start..end-1 as one Arrow struct array, built column-wise."""
    i = np.arange(start, end, dtype=np.int64)
    n = len(i)
    days = pa.array((np.datetime64(FIRST_DATE, "D") + (i % NUM_DATES)).astype("datetime64[D]"), pa.date32())
    date = pc.cast(days, pa.string())
    number = pc.cast(pa.array(i), pa.string())
    path = pc.binary_join_element_wise("ss_sold_date=", date, "/part-", number, "-c000.snappy.parquet", "")
    lo, hi = pc.cast(pa.array(i * ROWS_PER_FILE), pa.string()), pc.cast(pa.array(i * ROWS_PER_FILE + ROWS_PER_FILE - 1), pa.string())
    item_lo = pc.cast(pa.array(i % 18_000 + 1), pa.string())
    item_hi = pc.cast(pa.array(i % 18_000 + 100), pa.string())
    stats = pc.binary_join_element_wise(
        f'{{"numRecords":{ROWS_PER_FILE},"minValues":{{"ss_ticket_number":', lo, ',"ss_item_sk":', item_lo,
        ',"ss_sales_price":0.5,"ss_promo_name":"ese"},"maxValues":{"ss_ticket_number":', hi, ',"ss_item_sk":', item_hi,
        ',"ss_sales_price":199.5,"ss_promo_name":"pri"},"nullCount":{"ss_ticket_number":0,"ss_item_sk":0,'
        '"ss_sales_price":3,"ss_promo_name":12}}', "")
    partitions = pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)),
                                         pa.array(["ss_sold_date"]).take(pa.array(np.zeros(n, dtype=np.int64))),
                                         date, type=STRING_MAP)
    columns = {
        "path": path, "partitionValues": partitions,
        "size": pa.array(np.full(n, 48_000, dtype=np.int64) + i % 1000),
        "modificationTime": pa.array(np.full(n, 1_700_000_000_000, dtype=np.int64) + i),
        "dataChange": pa.array(np.ones(n, dtype=bool)), "stats": stats,
    }
    arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in ADD_TYPE]
    return pa.StructArray.from_arrays(arrays, fields=list(ADD_TYPE))
