"""The Arrow layout of a Delta checkpoint, which is also how a snapshot holds its live files.

Holding the file list as Arrow columns (not one Python object per file) is what keeps a
100,000-file snapshot loadable in well under a second.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STRING_MAP = pa.map_(pa.string(), pa.string())

# A deletion vector's descriptor (skiplake.log.deletion_vectors), in add and remove actions.
# delta-spark's checkpoints carry one more field, maxRowIndex, always null: read, never written.
DV_TYPE = pa.struct([
    ("storageType", pa.string()),
    ("pathOrInlineDv", pa.string()),
    ("offset", pa.int32()),
    ("sizeInBytes", pa.int32()),
    ("cardinality", pa.int64()),
])

ADD_TYPE = pa.struct([
    ("path", pa.string()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("stats", pa.string()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("clusteringProvider", pa.string()),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
])

REMOVE_TYPE = pa.struct([
    ("path", pa.string()),
    ("deletionTimestamp", pa.int64()),
    ("dataChange", pa.bool_()),
    ("extendedFileMetadata", pa.bool_()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
])

METADATA_TYPE = pa.struct([
    ("id", pa.string()),
    ("name", pa.string()),
    ("description", pa.string()),
    ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
    ("schemaString", pa.string()),
    ("partitionColumns", pa.list_(pa.string())),
    ("configuration", STRING_MAP),
    ("createdTime", pa.int64()),
])

PROTOCOL_TYPE = pa.struct([
    ("minReaderVersion", pa.int32()),
    ("minWriterVersion", pa.int32()),
    ("readerFeatures", pa.list_(pa.string())),
    ("writerFeatures", pa.list_(pa.string())),
])

TXN_TYPE = pa.struct([
    ("appId", pa.string()),
    ("version", pa.int64()),
    ("lastUpdated", pa.int64()),
])

DOMAIN_METADATA_TYPE = pa.struct([
    ("domain", pa.string()),
    ("configuration", pa.string()),
    ("removed", pa.bool_()),
])

CHECKPOINT_SCHEMA = pa.schema([
    ("txn", TXN_TYPE),
    ("add", ADD_TYPE),
    ("remove", REMOVE_TYPE),
    ("metaData", METADATA_TYPE),
    ("protocol", PROTOCOL_TYPE),
    ("domainMetadata", DOMAIN_METADATA_TYPE),
])

# V2 checkpoints: their one checkpointMetadata row, and a row per sidecar file of file actions.
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])
SIDECAR_TYPE = pa.struct([
    ("path", pa.string()),
    ("sizeInBytes", pa.int64()),
    ("modificationTime", pa.int64()),
    ("tags", STRING_MAP),
])
V2_CHECKPOINT_SCHEMA = pa.schema([*CHECKPOINT_SCHEMA, ("checkpointMetadata", CHECKPOINT_METADATA_TYPE),
                                  ("sidecar", SIDECAR_TYPE)])
SIDECAR_SCHEMA = pa.schema([("add", ADD_TYPE), ("remove", REMOVE_TYPE)])

# A snapshot's live files: the add struct's fields as top-level columns.
FILES_SCHEMA = pa.schema(list(ADD_TYPE))
TOMBSTONES_SCHEMA = pa.schema(list(REMOVE_TYPE))


def map_items(d: dict[str, str | None] | None) -> list[tuple[str, str | None]] | None:
    """A string map (partitionValues, tags) as the (key, value) pairs of an Arrow map value; None stays None."""
    return None if d is None else list(d.items())


def map_value(maps: pa.Array | pa.ChunkedArray, key: str) -> pa.Array | pa.ChunkedArray:
    """Each row's value for `key` in a string map column (partitionValues, tags), as
    `pc.map_lookup(..., "first")` gives it. When every row has the key exactly once (a table's
    partition values) the values are picked from the flattened map, which is several times
    faster than the lookup on 100,000 rows; chunk by chunk (a table of millions of files has its
    checkpoint's row groups as chunks, and joining them copies every key and value)."""
    if isinstance(maps, pa.ChunkedArray):
        picked = [_picked(chunk, key) for chunk in maps.chunks]
        if all(p is not None for p in picked):
            return pa.chunked_array(picked, pa.string())
        return pc.map_lookup(maps, pa.scalar(key, pa.string()), "first")
    got = _picked(maps, key)
    return got if got is not None else pc.map_lookup(maps, pa.scalar(key, pa.string()), "first")


def _picked(array: pa.MapArray, key: str) -> pa.Array | None:
    """Each row's value for `key` when every row of `array` has it exactly once, else None."""
    if not len(array):
        return pa.array([], pa.string())
    if array.null_count:
        return None
    offsets = np.asarray(array.offsets)
    start, end = int(offsets[0]), int(offsets[-1])
    # .keys and .items are the whole child arrays, whatever slice `array` is.
    keys, items = array.keys.slice(start, end - start), array.items.slice(start, end - start)
    hit = pc.fill_null(pc.equal(keys, key), False)
    counts = np.diff(offsets)
    if end - start == len(array) and bool((counts == 1).all()):
        # One entry per row (one partition column): no rows to count.
        return items if pc.all(hit).as_py() else None
    mask = np.asarray(hit)
    rows = np.repeat(np.arange(len(array)), counts)[mask]
    if len(rows) == len(array) and bool((rows == np.arange(len(array))).all()):
        return items.filter(pa.array(mask))
    return None
