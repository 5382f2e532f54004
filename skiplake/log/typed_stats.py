"""Typed stats in checkpoints: `add.stats_parsed` and `add.partitionValues_parsed`.

`delta.checkpoint.writeStatsAsStruct` (default true, as in delta-spark) asks checkpoint writers
to store each file's stats as a struct of typed columns besides the JSON text, and the partition
values as a struct of typed values. A reader that plans from `stats_parsed` skips parsing JSON
for every file of the checkpoint, which is most of a large table's first planning.

Only top-level columns of primitive types are written (nested fields keep their JSON stats).
Stats columns are named as the log names them: physical names under column mapping.
"""
from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from skiplake.errors import CorruptLogError
from skiplake.log.arrow_schema import map_value
from skiplake.log.json_column import read_json_column
from skiplake.log.schema import INTEGER_TYPES, Schema, is_decimal
from skiplake.log.values import TIMESTAMP_TYPES, parse_partition_value

WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
_INTS = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64()}


def writes_struct_stats(configuration: Mapping[str, str]) -> bool:
    """Whether checkpoints write typed stats: delta.checkpoint.writeStatsAsStruct is anything but `false`."""
    return str(configuration.get(WRITE_STATS_AS_STRUCT, "true")).strip().lower() != "false"


def value_type(type_: Any) -> pa.DataType | None:
    """The Parquet (Arrow) type a column's typed stats and partition values are stored as."""
    if not isinstance(type_, str):
        return None
    if type_ in _INTS:
        return _INTS[type_]
    if is_decimal(type_):
        precision, scale = (int(x) for x in type_[len("decimal("):-1].split(","))
        return pa.decimal128(precision, scale)
    return {"float": pa.float32(), "double": pa.float64(), "string": pa.string(), "date": pa.date32(),
            "timestamp": pa.timestamp("us", "UTC"), "timestamp_ntz": pa.timestamp("us"),
            "boolean": pa.bool_()}.get(type_)


def _json_type(type_: str) -> pa.DataType:
    """How the JSON stats spell a type's values: dates and timestamps as strings, numbers as numbers."""
    if type_ == "date" or type_ in TIMESTAMP_TYPES:
        return pa.string()
    if type_ in INTEGER_TYPES:
        return pa.int64()
    if type_ == "float":
        return pa.float64()
    t = value_type(type_)
    assert t is not None
    return t


def stats_columns(schema: Schema, names: Mapping[str, str], partition_columns: list[str]) -> list[tuple[str, str]]:
    """(name in the stats, Delta type) of every column whose stats are written typed."""
    parts = {p.lower() for p in partition_columns}
    return [(names.get(f.name, f.name), f.type) for f in schema.fields
            if f.name.lower() not in parts and value_type(f.type) is not None]


def stats_struct(stats: pa.Array, columns: list[tuple[str, str]]) -> pa.StructArray:
    """`stats_parsed` for each file's JSON stats (null where a file has none). Raises
    CorruptLogError when the JSON does not parse as the columns' types."""
    json_fields = [("numRecords", pa.int64())]
    if columns:
        json_fields += [("minValues", pa.struct([(n, _json_type(t)) for n, t in columns])),
                        ("maxValues", pa.struct([(n, _json_type(t)) for n, t in columns])),
                        ("nullCount", pa.struct([(n, pa.int64()) for n, _ in columns]))]
    if len(stats) == 0:
        return pa.array([], stats_type(columns))
    try:
        parsed = read_json_column(stats, pa.schema(json_fields)).combine_chunks()
        children = [parsed.column("numRecords").chunk(0) if parsed.column("numRecords").num_chunks
                    else pa.array([], pa.int64())]
        for key in ("minValues", "maxValues"):
            if not columns:
                break
            struct = parsed.column(key).combine_chunks()
            children.append(pa.StructArray.from_arrays(
                [_typed(_child(struct, n), t) for n, t in columns], names=[n for n, _ in columns],
                mask=struct.is_null()))
        if columns:
            children.append(parsed.column("nullCount").combine_chunks())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise CorruptLogError("stats", f"file stats do not parse as the table's types ({e})") from None
    typ = stats_type(columns)
    arrays = [c.cast(f.type) if c.type != f.type else c for c, f in zip(children, typ)]
    return pa.StructArray.from_arrays(arrays, fields=list(typ), mask=pc.is_null(stats))


def stats_type(columns: list[tuple[str, str]]) -> pa.StructType:
    """The type of `stats_parsed` for typed stats of `columns` ((name in the stats, Delta type))."""
    fields = [pa.field("numRecords", pa.int64())]
    if columns:
        fields += [pa.field("minValues", pa.struct([(n, value_type(t)) for n, t in columns])),
                   pa.field("maxValues", pa.struct([(n, value_type(t)) for n, t in columns])),
                   pa.field("nullCount", pa.struct([(n, pa.int64()) for n, _ in columns]))]
    return pa.struct(fields)


def _child(struct: pa.Array, name: str) -> pa.Array:
    child = pc.struct_field(struct, name)
    return child.combine_chunks() if isinstance(child, pa.ChunkedArray) else child


def _typed(values: pa.Array, type_: str) -> pa.Array:
    target = value_type(type_)
    assert target is not None
    if type_ == "date":
        return pc.cast(pc.utf8_slice_codeunits(values, 0, 10), pa.date32())
    if type_ == "timestamp":
        return pc.cast(values, pa.timestamp("us", "UTC"))
    if type_ == "timestamp_ntz":
        return pc.cast(pc.replace_substring(values, "Z", ""), pa.timestamp("us"))
    return pc.cast(values, target)


def partition_struct(partition_values: pa.Array, schema: Schema, partition_columns: list[str],
                     names: Mapping[str, str]) -> pa.StructArray | None:
    """`partitionValues_parsed`: each partition column's value, typed (None: nothing to write)."""
    fields, arrays = [], []
    for column in partition_columns:
        f = schema.find(column)
        target = value_type(f.type) if f is not None else None
        if f is None or target is None:
            return None
        key = names.get(f.name, f.name)
        raw = map_value(partition_values, key)
        encoded = pc.dictionary_encode(raw).combine_chunks() if isinstance(raw, pa.ChunkedArray) \
            else pc.dictionary_encode(raw)
        values = pa.array([parse_partition_value(v, f.type) for v in encoded.dictionary.to_pylist()], target)
        arrays.append(values.take(encoded.indices))
        fields.append(pa.field(key, target))
    if not fields:
        return None
    return pa.StructArray.from_arrays(arrays, fields=fields)
