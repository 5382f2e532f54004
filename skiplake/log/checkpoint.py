"""Writing Parquet checkpoints and `_last_checkpoint`, in the layout every Delta reader expects."""
from __future__ import annotations

import io
import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.errors import CorruptLogError
from skiplake.log.actions import Txn, now_ms
from skiplake.log.arrow_schema import (
    ADD_TYPE,
    CHECKPOINT_SCHEMA,
    REMOVE_TYPE,
    SIDECAR_SCHEMA,
    STRING_MAP,
    V2_CHECKPOINT_SCHEMA,
)
from skiplake.log.checkpoint_read import SIDECAR_DIR, TypedStats
from skiplake.log.column_mapping import physical_names
from skiplake.log.features import V2_CHECKPOINT, supports
from skiplake.log.snapshot import LAST_CHECKPOINT, Snapshot, checkpoint_name
from skiplake.log.storage import Storage
from skiplake.log.typed_stats import partition_struct, stats_columns, stats_struct, stats_type, writes_struct_stats

log = logging.getLogger("skiplake.checkpoint")

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
# Add actions per Arrow array while writing a checkpoint (a table of millions of files holds more
# strings than one array can).
ADD_CHUNK = 1_000_000
DEFAULT_INTERVAL = 10
# Fewer files than this parse their JSON stats again rather than copy the typed ones from the
# loaded checkpoint: parsing a few thousand costs less than the reads (on an object store, two
# requests) that copying takes.
COPY_STATS_MIN_ROWS = 100_000
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


@dataclass(frozen=True)
class _CopiedStats:
    """Typed stats a checkpoint takes from the one its snapshot was loaded from, rather than
    parse the JSON again: those of the snapshot's leading file rows, row i being the old
    checkpoint's add at position rows[i]."""
    typed: TypedStats
    type: pa.DataType
    rows: np.ndarray

    @staticmethod
    def of(snapshot: Snapshot, stats_type: pa.DataType) -> "_CopiedStats | None":
        """The stats a checkpoint of `snapshot` can copy when its typed stats are of `stats_type`:
        None when the loaded checkpoint has none of that very type (the schema or the stats
        columns changed since, or another writer typed them otherwise)."""
        typed = snapshot.parsed_stats
        if typed is None:
            return None
        deferred = snapshot.deferred_stats
        rows = deferred.rows if deferred is not None else np.arange(snapshot.checkpoint_head, dtype=np.int64)
        if len(rows) < max(COPY_STATS_MIN_ROWS, 1) or typed.field_type("stats_parsed") != stats_type:
            return None
        return _CopiedStats(typed, stats_type, rows)

    def leading(self, start: int, count: int) -> pa.Array | None:
        """The typed stats of file rows start .. start + count - 1 that are copied (a leading
        part of them, maybe none)."""
        rows = self.rows[start:start + count]
        return self.typed.add_field("stats_parsed", self.type, rows).combine_chunks() if len(rows) else None


@dataclass
class _FileActions:
    """A checkpoint's file actions: the live adds, made one chunk of at most ADD_CHUNK rows at a
    time as they are written (no more strings than one Arrow array holds, and no more memory
    than a chunk's typed stats take), and the unexpired removes."""
    snapshot: Snapshot
    removes: pa.StructArray
    add_type: pa.DataType
    num_adds: int
    copied: _CopiedStats | None = None

    @staticmethod
    def of(snapshot: Snapshot) -> "_FileActions":
        """The file actions a checkpoint of `snapshot` writes."""
        retention = parse_interval_ms(snapshot.configuration.get(TOMBSTONE_RETENTION),
                                      DEFAULT_TOMBSTONE_RETENTION_MS)
        cutoff = now_ms() - retention
        tomb = snapshot.tombstones
        if tomb.num_rows:
            ts = tomb.column("deletionTimestamp").to_pylist()
            tomb = tomb.filter(pa.array([t is None or t >= cutoff for t in ts]))
        removes = pa.StructArray.from_arrays([tomb.column(n).combine_chunks() for n in tomb.column_names],
                                             fields=list(REMOVE_TYPE))
        typed = _typed_types(snapshot) if writes_struct_stats(snapshot.configuration) else None
        add_type = pa.struct(list(ADD_TYPE) + list(typed or []))
        copied = _CopiedStats.of(snapshot, typed[0].type) if typed else None
        return _FileActions(snapshot, removes, add_type, snapshot.num_files, copied)

    def add_chunks(self) -> Iterator[pa.StructArray]:
        """The live adds as the checkpoint's add structs, ADD_CHUNK rows at a time (at least one)."""
        # The log's own rows: with column mapping, `files` has logical keys for planning.
        source = self.snapshot.log_files if self.snapshot.log_files is not None else self.snapshot.files
        at = source.schema.get_field_index("dataChange")
        for start in range(0, max(source.num_rows, 1), ADD_CHUNK):
            rows = source.slice(start, ADD_CHUNK).combine_chunks()
            # Adds are written with dataChange=false: a checkpoint carries state, not a change.
            columns = [c.chunk(0) if c.num_chunks else pa.array([], c.type) for c in rows.columns]
            columns[at] = pa.array(np.zeros(rows.num_rows, dtype=bool))
            adds = pa.StructArray.from_arrays(columns, fields=list(ADD_TYPE))
            if self.add_type == ADD_TYPE:
                yield adds
            else:
                copied = self.copied.leading(start, len(adds)) if self.copied is not None else None
                yield _with_typed_stats(self.snapshot, adds, self.add_type, copied)


def _typed_types(snapshot: Snapshot) -> list[pa.Field]:
    """The fields typed stats add to a checkpoint's add struct: stats_parsed, and
    partitionValues_parsed when every partition column has a type it can hold."""
    names = physical_names(snapshot.schema, snapshot.column_mapping)
    fields = [pa.field("stats_parsed", stats_type(stats_columns(snapshot.schema, names, snapshot.partition_columns)))]
    parts = partition_struct(pa.array([], STRING_MAP), snapshot.schema, snapshot.partition_columns, names)
    if parts is not None:
        fields.append(pa.field("partitionValues_parsed", parts.type))
    return fields


def _with_typed_stats(snapshot: Snapshot, adds: pa.StructArray, add_type: pa.StructType,
                      copied: pa.Array | None = None) -> pa.StructArray:
    """`adds` with stats_parsed and partitionValues_parsed, as `add_type` says: the typed stats
    of the leading `copied` rows as given, those of the others parsed from their JSON. Stats that
    do not parse as the table's types leave those rows' stats_parsed null: readers use the JSON."""
    names = physical_names(snapshot.schema, snapshot.column_mapping)
    fields, children = list(adds.type), [adds.field(i) for i in range(adds.type.num_fields)]
    stats_field = add_type.field("stats_parsed")
    done = len(copied) if copied is not None else 0
    parts = [copied] if copied is not None else []
    if done < len(adds) or not parts:
        try:
            parts.append(stats_struct(adds.field("stats").slice(done),
                                      stats_columns(snapshot.schema, names, snapshot.partition_columns)))
        except CorruptLogError as e:
            log.warning("stats of %s not written typed in its checkpoint: %s", snapshot.table_path, e)
            parts.append(pa.nulls(len(adds) - done, stats_field.type))
    stats = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    fields.append(stats_field)
    children.append(stats)
    if add_type.get_field_index("partitionValues_parsed") >= 0:
        values = partition_struct(adds.field("partitionValues"), snapshot.schema, snapshot.partition_columns, names)
        assert values is not None
        fields.append(add_type.field("partitionValues_parsed"))
        children.append(values)
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


def _parts(head: pa.Table, actions: _FileActions, adds: Iterable[pa.StructArray], removes: pa.StructArray | None,
           schema: pa.Schema) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """(the file's schema, its row groups in order): `head`'s rows, then `adds` chunk by chunk,
    then `removes`; each action in its own column, the others null."""
    if actions.add_type != schema.field("add").type:  # typed stats: this file's own add struct
        schema = schema.set(schema.get_field_index("add"), pa.field("add", actions.add_type))
        head = head.set_column(head.schema.get_field_index("add"), schema.field("add"),
                               pa.nulls(head.num_rows, actions.add_type))

    def part(column: str, values: pa.StructArray) -> pa.Table:
        return pa.table({f.name: values if f.name == column else pa.nulls(len(values), f.type) for f in schema},
                        schema=schema)

    def tables() -> Iterator[pa.Table]:
        if head.num_rows:
            yield head
        for chunk in adds:
            if len(chunk):
                yield part("add", chunk)
        if removes is not None and len(removes):
            yield part("remove", removes)
    return schema, tables()


def _v1_parts(snapshot: Snapshot) -> tuple[pa.Schema, Iterator[pa.Table]]:
    actions = _FileActions.of(snapshot)
    return _parts(_rows_table(_singleton_rows(snapshot), CHECKPOINT_SCHEMA), actions, actions.add_chunks(),
                  actions.removes, CHECKPOINT_SCHEMA)


def checkpoint_table(snapshot: Snapshot) -> pa.Table:
    """A V1 checkpoint: one row per action, protocol, metaData, each txn, each live domainMetadata, each live
    add, each unexpired remove."""
    _schema, parts = _v1_parts(snapshot)
    return pa.concat_tables(list(parts))   # never empty: the protocol and metaData rows


def _parquet_bytes(schema: pa.Schema, parts: Iterable[pa.Table]) -> tuple[bytes, int]:
    """(the Parquet file of `parts`, written one after another, its row count)."""
    buf = io.BytesIO()
    rows = 0
    with pq.ParquetWriter(buf, schema, compression="snappy") as writer:
        for table in parts:
            writer.write_table(table)
            rows += table.num_rows
    return buf.getvalue(), rows


def uses_v2_checkpoints(snapshot: Snapshot) -> bool:
    """Whether the table's protocol supports v2Checkpoint, so that its checkpoints are V2."""
    return supports(snapshot.protocol, V2_CHECKPOINT)


def write_checkpoint(storage: Storage, snapshot: Snapshot) -> bool:
    """Write the checkpoint of `snapshot` and point `_last_checkpoint` at it. False if one existed.

    A table with the v2Checkpoint feature gets a UUID-named V2 checkpoint whose file actions are
    in sidecar files of at most ADD_CHUNK adds each; any other table a classic V1 checkpoint.
    Either is written a chunk of adds at a time."""
    if uses_v2_checkpoints(snapshot):
        name, rows, size = _write_v2(storage, snapshot)
        written = True
    else:
        data, rows = _parquet_bytes(*_v1_parts(snapshot))
        name, size = checkpoint_name(snapshot.version), len(data)
        written = storage.put_if_absent(name, data)
    last = read_last_checkpoint(storage)
    if last is None or int(last.get("version", -1)) < snapshot.version:
        storage.put(LAST_CHECKPOINT, json.dumps({
            "version": snapshot.version, "size": rows, "sizeInBytes": size,
            "numOfAddFiles": snapshot.num_files,
        }).encode())
    return written


def _write_v2(storage: Storage, snapshot: Snapshot) -> tuple[str, int, int]:
    """(name, actions, bytes) of a new V2 checkpoint: the sidecars first, then the checkpoint that
    names them, so a reader never finds a checkpoint whose sidecar is not there yet."""
    actions = _FileActions.of(snapshot)
    rows = _singleton_rows(snapshot)
    empty = SIDECAR_SCHEMA.empty_table()
    for adds, removes in _sidecar_contents(actions):
        data, _ = _parquet_bytes(*_parts(empty, actions, adds, removes, SIDECAR_SCHEMA))
        sidecar_name = f"{uuid.uuid4()}.parquet"
        storage.put_if_absent(f"{SIDECAR_DIR}/{sidecar_name}", data)
        rows.append({"sidecar": {"path": sidecar_name, "sizeInBytes": len(data),
                                 "modificationTime": now_ms(), "tags": None}})
    total = actions.num_adds + len(actions.removes)
    rows.append({"checkpointMetadata": {"version": snapshot.version,
                                        "tags": [("numOfAddFiles", str(actions.num_adds)),
                                                 ("sidecarNumActions", str(total))]}})
    data, _ = _parquet_bytes(V2_CHECKPOINT_SCHEMA, [_rows_table(rows, V2_CHECKPOINT_SCHEMA)])
    name = f"{snapshot.version:020d}.checkpoint.{uuid.uuid4()}.parquet"
    storage.put_if_absent(name, data)
    return name, len(rows) + total, len(data)


def _sidecar_contents(actions: _FileActions) -> Iterator[tuple[list[pa.StructArray], pa.StructArray | None]]:
    """(adds, removes) of each sidecar file: a chunk of adds each, the removes with the first."""
    removes = actions.removes if len(actions.removes) else None
    if not actions.num_adds:
        if removes is not None:
            yield [], removes
        return
    for chunk in actions.add_chunks():
        yield [chunk], removes
        removes = None


def read_last_checkpoint(storage: Storage) -> dict | None:
    """The parsed `_last_checkpoint`; None when there is none or it does not parse."""
    try:
        return json.loads(storage.read(LAST_CHECKPOINT))
    except (FileNotFoundError, json.JSONDecodeError, ValueError):
        return None
