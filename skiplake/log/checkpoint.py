"""Writing Parquet checkpoints and `_last_checkpoint`, in the layout every Delta reader expects."""
from __future__ import annotations

import io
import json
import logging
import re
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.errors import CorruptLogError
from skiplake.log.actions import Txn, now_ms
from skiplake.log.arrow_schema import ADD_TYPE, CHECKPOINT_SCHEMA, REMOVE_TYPE, SIDECAR_SCHEMA, V2_CHECKPOINT_SCHEMA
from skiplake.log.checkpoint_read import SIDECAR_DIR
from skiplake.log.column_mapping import physical_names
from skiplake.log.features import V2_CHECKPOINT, supports
from skiplake.log.snapshot import LAST_CHECKPOINT, Snapshot, checkpoint_name
from skiplake.log.storage import Storage
from skiplake.log.typed_stats import partition_struct, stats_columns, stats_struct, writes_struct_stats

log = logging.getLogger("skiplake.checkpoint")

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
# Add actions per Arrow array while writing a checkpoint (a table of millions of files holds more
# strings than one array can).
ADD_CHUNK = 1_000_000
DEFAULT_INTERVAL = 10
TOMBSTONE_RETENTION = "delta.deletedFileRetentionDuration"
DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 3600 * 1000
# How long an application's txn action is kept (unset: for ever, as in Delta).
TXN_RETENTION = "delta.setTransactionRetentionDuration"
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
    """Every how many versions a checkpoint is written: delta.checkpointInterval (at least 1), 10
    when it is unset or not an integer."""
    try:
        return max(1, int(snapshot.configuration.get(CHECKPOINT_INTERVAL, DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


def _file_actions(snapshot: Snapshot) -> tuple[list[pa.StructArray], pa.StructArray]:
    """(live adds, unexpired removes) as the checkpoint's add and remove structs; the adds in
    chunks of at most ADD_CHUNK rows (no more strings than one Arrow array holds)."""
    retention = parse_interval_ms(snapshot.configuration.get(TOMBSTONE_RETENTION),
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
    batches = files.to_batches(max_chunksize=ADD_CHUNK) or [pa.RecordBatch.from_pylist([], schema=files.schema)]
    adds = [pa.StructArray.from_arrays(list(b.columns), fields=list(ADD_TYPE)) for b in batches]
    if writes_struct_stats(snapshot.configuration):
        typed = [_with_typed_stats(snapshot, a) for a in adds]
        # Typed stats in every chunk or in none: the checkpoint has one schema.
        adds = typed if len({a.type for a in typed}) == 1 else adds
    removes = pa.StructArray.from_arrays([tomb.column(n).combine_chunks() for n in tomb.column_names],
                                         fields=list(REMOVE_TYPE))
    return adds, removes


def _with_typed_stats(snapshot: Snapshot, adds: pa.StructArray) -> pa.StructArray:
    """`adds` with stats_parsed and partitionValues_parsed (unchanged if the stats do not parse)."""
    names = physical_names(snapshot.schema, snapshot.column_mapping)
    fields, children = list(adds.type), [adds.field(i) for i in range(adds.type.num_fields)]
    try:
        stats = stats_struct(adds.field("stats"), stats_columns(snapshot.schema, names, snapshot.partition_columns))
    except CorruptLogError as e:
        log.warning("stats of %s not written typed in its checkpoint: %s", snapshot.table_path, e)
        return adds
    fields.append(pa.field("stats_parsed", stats.type))
    children.append(stats)
    parts = partition_struct(adds.field("partitionValues"), snapshot.schema, snapshot.partition_columns, names)
    if parts is not None:
        fields.append(pa.field("partitionValues_parsed", parts.type))
        children.append(parts)
    return pa.StructArray.from_arrays(children, fields=fields)


def _singleton_rows(snapshot: Snapshot) -> list[dict]:
    """The protocol, metaData, txn and live domainMetadata actions, one row dict per action."""
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
    rows: list[dict] = [{"protocol": proto_row}, {"metaData": meta_row}]
    rows += [{"txn": {"appId": t.appId, "version": t.version, "lastUpdated": t.lastUpdated}}
             for t in live_txns(snapshot)]
    rows += [{"domainMetadata": d.to_json()} for d in snapshot.domains.values()]
    return rows


def live_txns(snapshot: Snapshot) -> list[Txn]:
    """The txn actions a checkpoint keeps: those updated within delta.setTransactionRetentionDuration
    (all when it is unset; one without lastUpdated is kept)."""
    text = snapshot.configuration.get(TXN_RETENTION)
    if not text:
        return list(snapshot.txns.values())
    cutoff = now_ms() - parse_interval_ms(text, 0)
    return [t for t in snapshot.txns.values() if t.lastUpdated is None or t.lastUpdated >= cutoff]


def _rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """One row per dict, its one key naming the column that holds it (the others null)."""
    return pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in schema}, schema=schema)


def _with_files(head: pa.Table, adds: list[pa.StructArray], removes: pa.StructArray, schema: pa.Schema) -> pa.Table:
    add_type = adds[0].type
    if add_type != schema.field("add").type:  # typed stats: this table's own add struct
        schema = schema.set(schema.get_field_index("add"), pa.field("add", add_type))
        head = head.set_column(head.schema.get_field_index("add"), schema.field("add"),
                               pa.nulls(head.num_rows, add_type))

    def part(column: str, values: pa.StructArray) -> pa.Table:
        return pa.table({f.name: values if f.name == column else pa.nulls(len(values), f.type) for f in schema},
                        schema=schema)
    return pa.concat_tables([head, *(part("add", a) for a in adds), part("remove", removes)])


def checkpoint_table(snapshot: Snapshot) -> pa.Table:
    """A V1 checkpoint: one row per action, protocol, metaData, each txn, each live domainMetadata, each live
    add, each unexpired remove."""
    adds, removes = _file_actions(snapshot)
    return _with_files(_rows_table(_singleton_rows(snapshot), CHECKPOINT_SCHEMA), adds, removes, CHECKPOINT_SCHEMA)


def _parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()


def uses_v2_checkpoints(snapshot: Snapshot) -> bool:
    """Whether the table's protocol supports v2Checkpoint, so that its checkpoints are V2."""
    return supports(snapshot.protocol, V2_CHECKPOINT)


def write_checkpoint(storage: Storage, snapshot: Snapshot) -> bool:
    """Write the checkpoint of `snapshot` and point `_last_checkpoint` at it. False if one existed.

    A table with the v2Checkpoint feature gets a UUID-named V2 checkpoint whose file actions are
    in one sidecar file; any other table a classic V1 checkpoint."""
    if uses_v2_checkpoints(snapshot):
        name, rows, data = _write_v2(storage, snapshot)
        written = True
    else:
        table = checkpoint_table(snapshot)
        name, rows, data = checkpoint_name(snapshot.version), table.num_rows, _parquet_bytes(table)
        written = storage.put_if_absent(name, data)
    last = read_last_checkpoint(storage)
    if last is None or int(last.get("version", -1)) < snapshot.version:
        storage.put(LAST_CHECKPOINT, json.dumps({
            "version": snapshot.version, "size": rows, "sizeInBytes": len(data),
            "numOfAddFiles": snapshot.num_files,
        }).encode())
    return written


def _write_v2(storage: Storage, snapshot: Snapshot) -> tuple[str, int, bytes]:
    """(name, actions, bytes) of a new V2 checkpoint: the sidecar first, then the checkpoint that
    names it, so a reader never finds a checkpoint whose sidecar is not there yet."""
    adds, removes = _file_actions(snapshot)
    rows = _singleton_rows(snapshot)
    num_adds = sum(len(a) for a in adds)
    if num_adds + len(removes):
        sidecar = _with_files(SIDECAR_SCHEMA.empty_table(), adds, removes, SIDECAR_SCHEMA)
        sidecar_data = _parquet_bytes(sidecar)
        sidecar_name = f"{uuid.uuid4()}.parquet"
        storage.put_if_absent(f"{SIDECAR_DIR}/{sidecar_name}", sidecar_data)
        rows.append({"sidecar": {"path": sidecar_name, "sizeInBytes": len(sidecar_data),
                                 "modificationTime": now_ms(), "tags": None}})
    rows.append({"checkpointMetadata": {"version": snapshot.version,
                                        "tags": [("numOfAddFiles", str(num_adds)),
                                                 ("sidecarNumActions", str(num_adds + len(removes)))]}})
    data = _parquet_bytes(_rows_table(rows, V2_CHECKPOINT_SCHEMA))
    name = f"{snapshot.version:020d}.checkpoint.{uuid.uuid4()}.parquet"
    storage.put_if_absent(name, data)
    return name, len(rows) + num_adds + len(removes), data


def read_last_checkpoint(storage: Storage) -> dict | None:
    """The parsed `_last_checkpoint`; None when there is none or it does not parse."""
    try:
        return json.loads(storage.read(LAST_CHECKPOINT))
    except (FileNotFoundError, json.JSONDecodeError, ValueError):
        return None
