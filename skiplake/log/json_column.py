"""A string column of JSON objects (one per row, as the log's `stats`) parsed by Arrow's reader.

The column's own character data is handed to the reader, not a copy of it with newlines put
between the objects: the reader finds where one object ends and the next begins. A row without
an object (null, or an empty string) is read as `{}`; that takes a copy of its chunk only.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

# Bytes the reader parses per task; its threads take blocks in parallel.
BLOCK_SIZE = 8 << 20


def read_json_column(strings: pa.Array | pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """One row per value of `strings`, parsed as `schema` (fields the objects lack are null,
    fields the schema lacks ignored). pa.ArrowInvalid when a value is not one JSON object of
    those types (the row count then differs, or a value does not convert)."""
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    parts = [_read(chunk, schema) for chunk in chunks if len(chunk)]
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    if table.num_rows != len(strings):
        raise pa.ArrowInvalid(f"{table.num_rows} JSON objects read from {len(strings)} values")
    return table


def _read(chunk: pa.Array, schema: pa.Schema) -> pa.Table:
    if chunk.null_count or not pc.all(pc.greater(pc.binary_length(chunk), 0)).as_py():
        chunk = pc.if_else(pc.fill_null(pc.equal(chunk, ""), True), "{}", chunk)
    table = pj.read_json(
        pa.BufferReader(string_data(chunk)),
        read_options=pj.ReadOptions(block_size=BLOCK_SIZE, use_threads=True),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                                      newlines_in_values=True))
    if table.num_rows != len(chunk):
        raise pa.ArrowInvalid(f"{table.num_rows} JSON objects read from {len(chunk)} values")
    return table


def string_data(chunk: pa.Array) -> pa.Buffer:
    """The characters of a string array's values, back to back, as a slice of its data buffer."""
    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    offsets = np.frombuffer(chunk.buffers()[1], dtype=width)[chunk.offset: chunk.offset + len(chunk) + 1]
    start, stop = int(offsets[0]), int(offsets[-1])
    return chunk.buffers()[2].slice(start, stop - start)
