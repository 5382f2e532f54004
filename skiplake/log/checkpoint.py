"""Writing Parquet checkpoints and `_last_checkpoint`, in the layout every Delta reader expects."""
from __future__ import annotations

import io
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.actions import now_ms
from skiplake.log.arrow_schema import ADD_TYPE, CHECKPOINT_SCHEMA, METADATA_TYPE, PROTOCOL_TYPE, REMOVE_TYPE, TXN_TYPE
from skiplake.log.snapshot import LAST_CHECKPOINT, Snapshot, checkpoint_name
from skiplake.log.storage import Storage

DEFAULT_INTERVAL = 10
DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 3600 * 1000
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s*(second|minute|hour|day|week)s?\s*$", re.I)
_UNIT_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000, "week": 604_800_000}


def parse_interval_ms(text: str | None, default: int) -> int:
    """Delta's 'interval 7 days' style durations, in milliseconds."""
    if not text:
        return default
    m = _INTERVAL.match(text)
    if not m:
        return default
    return int(m.group(1)) * _UNIT_MS[m.group(2).lower()]


def checkpoint_interval(snapshot: Snapshot) -> int:
    try:
        return max(1, int(snapshot.configuration.get("delta.checkpointInterval", DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


def _nulls(n: int, type_: pa.DataType) -> pa.Array:
    return pa.nulls(n, type_)


def checkpoint_table(snapshot: Snapshot) -> pa.Table:
    """One row per action: protocol, metaData, each txn, each live add, each unexpired remove."""
    retention = parse_interval_ms(snapshot.configuration.get("delta.deletedFileRetentionDuration"),
                                  DEFAULT_TOMBSTONE_RETENTION_MS)
    cutoff = now_ms() - retention
    tomb = snapshot.tombstones
    if tomb.num_rows:
        ts = tomb.column("deletionTimestamp").to_pylist()
        tomb = tomb.filter(pa.array([t is None or t >= cutoff for t in ts]))

    # Adds are written with dataChange=false: a checkpoint carries state, not a change.
    # The log's own rows: with column mapping, `files` has logical keys for planning.
    source = snapshot.log_files if snapshot.log_files is not None else snapshot.files
    files = source.set_column(source.schema.get_field_index("dataChange"), "dataChange",
                              pa.array([False] * source.num_rows, pa.bool_()))
    adds = pa.StructArray.from_arrays([files.column(n).combine_chunks() for n in files.column_names],
                                      fields=list(ADD_TYPE))
    removes = pa.StructArray.from_arrays([tomb.column(n).combine_chunks() for n in tomb.column_names],
                                         fields=list(REMOVE_TYPE))
    md = snapshot.metadata
    meta_row = {
        "id": md.id, "name": md.name, "description": md.description,
        "format": {"provider": md.format.provider, "options": list(md.format.options.items())},
        "schemaString": md.schemaString, "partitionColumns": list(md.partitionColumns),
        "configuration": list(md.configuration.items()), "createdTime": md.createdTime,
    }
    p = snapshot.protocol
    proto_row = {"minReaderVersion": p.minReaderVersion, "minWriterVersion": p.minWriterVersion,
                 "readerFeatures": list(p.readerFeatures) if p.readerFeatures is not None else None,
                 "writerFeatures": list(p.writerFeatures) if p.writerFeatures is not None else None}
    txns = [{"appId": t.appId, "version": t.version, "lastUpdated": t.lastUpdated}
            for t in snapshot.txns.values()]

    n_head = 2 + len(txns)
    head = pa.table({
        "txn": pa.array([None, None] + txns, TXN_TYPE),
        "add": _nulls(n_head, ADD_TYPE),
        "remove": _nulls(n_head, REMOVE_TYPE),
        "metaData": pa.array([None, meta_row] + [None] * len(txns), METADATA_TYPE),
        "protocol": pa.array([proto_row, None] + [None] * len(txns), PROTOCOL_TYPE),
    }, schema=CHECKPOINT_SCHEMA)
    add_part = pa.table({
        "txn": _nulls(len(adds), TXN_TYPE), "add": adds, "remove": _nulls(len(adds), REMOVE_TYPE),
        "metaData": _nulls(len(adds), METADATA_TYPE), "protocol": _nulls(len(adds), PROTOCOL_TYPE),
    }, schema=CHECKPOINT_SCHEMA)
    remove_part = pa.table({
        "txn": _nulls(len(removes), TXN_TYPE), "add": _nulls(len(removes), ADD_TYPE), "remove": removes,
        "metaData": _nulls(len(removes), METADATA_TYPE), "protocol": _nulls(len(removes), PROTOCOL_TYPE),
    }, schema=CHECKPOINT_SCHEMA)
    return pa.concat_tables([head, add_part, remove_part])


def write_checkpoint(storage: Storage, snapshot: Snapshot) -> bool:
    """Write the checkpoint of `snapshot` and point `_last_checkpoint` at it. False if one existed."""
    table = checkpoint_table(snapshot)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    data = buf.getvalue()
    written = storage.put_if_absent(checkpoint_name(snapshot.version), data)
    last = read_last_checkpoint(storage)
    if last is None or int(last.get("version", -1)) < snapshot.version:
        storage.put(LAST_CHECKPOINT, json.dumps({
            "version": snapshot.version, "size": table.num_rows, "sizeInBytes": len(data),
            "numOfAddFiles": snapshot.num_files,
        }).encode())
    return written


def read_last_checkpoint(storage: Storage) -> dict | None:
    try:
        return json.loads(storage.read(LAST_CHECKPOINT))
    except (FileNotFoundError, json.JSONDecodeError, ValueError):
        return None
