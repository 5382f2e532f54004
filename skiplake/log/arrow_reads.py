"""Reading a table's data files into Arrow without Spark, as a Delta reader must: columns by their
physical names (column mapping) renamed to logical ones, partition values from the log, rows a
deletion vector marks left out, and columns added since a file was written as nulls.

The `skiplake` data source reads in Python workers through this module; `t.read()` and
`lake.sql` keep Spark's native reader (skiplake.spark.reads)."""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.actions import AddCDCFile, AddFile
from skiplake.log.column_mapping import partition_values_by_name, physical_name
from skiplake.log.deletion_vectors import marked_rows
from skiplake.log.paths import absolute_path
from skiplake.log.schema import Field, Schema
from skiplake.log.storage_for import parquet_source
from skiplake.log.values import parse_partition_value

# Rows per Arrow batch handed to Spark: large enough to amortize Python, small enough for memory.
BATCH_ROWS = 131_072


def read_file(table_path: str, add: AddFile | AddCDCFile, schema: Schema, partition_columns: list[str], mode: str,
              arrow_schema: pa.Schema, rows: Sequence[int] | None = None) -> Iterator[pa.RecordBatch]:
    """The live rows of one data file (of `rows` only, when given) as batches of `arrow_schema`
    (the table's logical columns as Spark types them)."""
    path = absolute_path(table_path, add.path)
    source = pq.ParquetFile(parquet_source(path, add.size))
    deleted = marked_rows(table_path, getattr(add, "deletionVector", None))
    num_rows = source.metadata.num_rows
    keep = _kept(num_rows, deleted) if len(deleted) else None
    if rows is not None:
        only = np.zeros(num_rows, dtype=bool)
        only[np.asarray(rows, dtype=np.int64)] = True
        keep = only if keep is None else keep & only
    values = partition_values_by_name(add.partitionValues or {}, schema, partition_columns, mode)
    first = 0
    for batch in source.iter_batches(batch_size=BATCH_ROWS):
        count = batch.num_rows
        if keep is not None:
            batch = batch.filter(pa.array(keep[first:first + count]))
        first += count
        if batch.num_rows:
            yield _logical_batch(batch, schema, partition_columns, values, mode, arrow_schema)


def _kept(num_rows: int, deleted: np.ndarray) -> np.ndarray:
    keep = np.ones(num_rows, dtype=bool)
    keep[deleted[deleted < num_rows].astype(np.int64)] = False
    return keep


def _logical_batch(batch: pa.RecordBatch, schema: Schema, partition_columns: list[str],
                   values: Mapping[str, str | None], mode: str, arrow_schema: pa.Schema) -> pa.RecordBatch:
    columns = []
    for f, target in zip(schema.fields, arrow_schema):
        if f.name in partition_columns:
            value = parse_partition_value(values.get(f.name), f.type)
            columns.append(pa.array([value] * batch.num_rows, target.type))
            continue
        index = batch.schema.get_field_index(physical_name(f, mode))
        if index < 0:   # added after the file was written
            columns.append(pa.nulls(batch.num_rows, target.type))
            continue
        columns.append(renamed(batch.column(index), f.type, mode).cast(target.type))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def renamed(array: pa.Array, type_: Any, mode: str, to_physical: bool = False) -> pa.Array:
    """A column with its nested fields renamed from physical to logical names (column mapping), or
    from logical to physical ones (`to_physical`)."""
    if mode == "none" or isinstance(type_, str):
        return array
    kind = type_.get("type")
    if kind == "struct" and pa.types.is_struct(array.type):
        children, names = [], []
        for child in type_["fields"]:
            f = Field(child["name"], child["type"], bool(child.get("nullable", True)), dict(child.get("metadata") or {}))
            source, target = (f.name, physical_name(f, mode)) if to_physical else (physical_name(f, mode), f.name)
            index = array.type.get_field_index(source)
            part = array.field(index) if index >= 0 else pa.nulls(len(array))
            children.append(renamed(part, f.type, mode, to_physical))
            names.append(target)
        return pa.StructArray.from_arrays(children, names, mask=array.is_null())
    if kind == "array" and pa.types.is_list(array.type):
        inner = renamed(array.values, type_["elementType"], mode, to_physical)
        return pa.ListArray.from_arrays(array.offsets, inner, mask=array.is_null())
    if kind == "map" and pa.types.is_map(array.type):
        keys = renamed(array.keys, type_["keyType"], mode, to_physical)
        items = renamed(array.items, type_["valueType"], mode, to_physical)
        return pa.MapArray.from_arrays(array.offsets, keys, items, mask=array.is_null())
    return array
