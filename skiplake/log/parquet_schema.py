"""The schema of a Parquet file as Spark reads it, from its footer, and merging such schemas.

Spark's writer stores the Spark schema it wrote with in the footer's key-value metadata
(`org.apache.spark.sql.parquet.row.metadata`), and Spark's reader takes it from there when it
is present (ParquetFileFormat.readSchemaFromFooter); a file another writer made is read by
converting its Parquet schema instead (ParquetToSparkSchemaConverter). Both are done here
without Spark: the stored schema, else the Arrow schema pyarrow gives the Parquet schema,
mapped as Spark maps it (INT96 is a timestamp, a timestamp not adjusted to UTC is
timestamp_ntz, unsigned integers widen). Every field comes out nullable, as Spark reads files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.schema import PRIMITIVE_TYPES, Field, Schema, is_decimal, type_name
from skiplake.log.stats import column_paths

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


class UnsupportedColumnError(ValueError):
    """A column of a type a table cannot hold (or Spark cannot read)."""

    def __init__(self, column: str, type_: str) -> None:
        """The error for column `column` (a dotted path for a nested one) of type `type_`."""
        self.column = column
        self.type = type_
        super().__init__(f"column {column!r} has type {type_}")


@dataclass(frozen=True)
class SchemaConflict(Exception):
    """Two schemas give one column different types."""
    column: str
    left: str
    right: str

    def __str__(self) -> str:
        """The conflict as a message naming the column and its two types."""
        return f"column {self.column!r} is {self.left} in one file and {self.right} in another"


def file_schema(meta: pq.FileMetaData) -> Schema:
    """The schema Spark reads the file with, every field nullable. Raises UnsupportedColumnError
    for a column of a type skiplake tables do not take."""
    stored = (meta.metadata or {}).get(SPARK_SCHEMA_KEY)
    if stored is not None:
        try:
            schema = Schema.from_json(json.loads(stored))
        except (ValueError, KeyError, TypeError, AttributeError):
            schema = None  # unreadable: Spark falls back to the Parquet schema too
        if schema is not None:
            for f in schema.fields:
                _check_type(f.name, f.type)
            return Schema(tuple(Field(f.name, as_nullable(f.type), True, f.metadata) for f in schema.fields))
    return _from_parquet(meta)


def as_nullable(type_: Any) -> Any:
    """`type_` with every nested field, array element and map value nullable (Spark's asNullable)."""
    if not isinstance(type_, dict):
        return type_
    kind = type_.get("type")
    if kind == "struct":
        return {**type_, "fields": [{**f, "nullable": True, "type": as_nullable(f["type"])} for f in type_["fields"]]}
    if kind == "array":
        return {**type_, "elementType": as_nullable(type_["elementType"]), "containsNull": True}
    if kind == "map":
        return {**type_, "keyType": as_nullable(type_["keyType"]), "valueType": as_nullable(type_["valueType"]),
                "valueContainsNull": True}
    return type_


def _check_type(column: str, type_: Any) -> None:
    if isinstance(type_, str):
        if type_ not in PRIMITIVE_TYPES and not is_decimal(type_):
            raise UnsupportedColumnError(column, type_)
        return
    kind = type_.get("type") if isinstance(type_, dict) else None
    if kind == "struct":
        for f in type_["fields"]:
            _check_type(f"{column}.{f['name']}", f["type"])
    elif kind == "array":
        _check_type(f"{column}.element", type_["elementType"])
    elif kind == "map":
        _check_type(f"{column}.key", type_["keyType"])
        _check_type(f"{column}.value", type_["valueType"])
    else:
        raise UnsupportedColumnError(column, type_name(type_) if isinstance(type_, dict) else repr(type_))


# Arrow types with one Spark type each (unsigned integers widen as Spark reads them).
_SIMPLE: dict[pa.DataType, str] = {
    pa.bool_(): "boolean", pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long",
    pa.uint8(): "short", pa.uint16(): "integer", pa.uint32(): "long", pa.uint64(): "decimal(20,0)",
    pa.float32(): "float", pa.float64(): "double", pa.date32(): "date",
    pa.string(): "string", pa.large_string(): "string", pa.binary(): "binary", pa.large_binary(): "binary",
}


def _from_parquet(meta: pq.FileMetaData) -> Schema:
    leaves = column_paths(meta)
    int96 = {leaves[i] for i in range(meta.num_columns) if meta.schema.column(i).physical_type == "INT96"}
    arrow = meta.schema.to_arrow_schema()
    return Schema(tuple(Field(f.name, _spark_type(f.type, (f.name,), int96), True) for f in arrow))


def _spark_type(t: pa.DataType, path: tuple[str, ...], int96: set[tuple[str, ...]]) -> Any:
    if t in _SIMPLE:
        return _SIMPLE[t]
    if pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_decimal(t) and t.precision <= 38:
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        if path in int96:
            return "timestamp"  # Spark's legacy INT96 timestamps are instants
        if t.unit == "ns":
            raise UnsupportedColumnError(".".join(path), "timestamp in nanoseconds (Spark reads none)")
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [
            {"name": c.name, "type": _spark_type(c.type, path + (c.name,), int96), "nullable": True, "metadata": {}}
            for c in t]}
    if pa.types.is_map(t):
        return {"type": "map", "keyType": _spark_type(t.key_type, path + ("key_value", "key"), int96),
                "valueType": _spark_type(t.item_type, path + ("key_value", "value"), int96),
                "valueContainsNull": True}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "elementType": _spark_type(t.value_type, path + ("list", "element"), int96),
                "containsNull": True}
    raise UnsupportedColumnError(".".join(path), str(t))


def type_key(type_: Any) -> Any:
    """A type without field metadata and nullability: what two files must agree on."""
    if not isinstance(type_, dict):
        return type_
    kind = type_.get("type")
    if kind == "struct":
        return ("struct", tuple((f["name"], type_key(f["type"])) for f in type_["fields"]))
    if kind == "array":
        return ("array", type_key(type_["elementType"]))
    if kind == "map":
        return ("map", type_key(type_["keyType"]), type_key(type_["valueType"]))
    return json.dumps(type_, sort_keys=True)


def schema_key(schema: Schema) -> tuple:
    """Names and types of a schema, in order: files with equal keys have the same schema."""
    return tuple((f.name, type_key(f.type)) for f in schema.fields)


def merged(left: Schema, right: Schema) -> Schema:
    """The union of two schemas as Spark's mergeSchema makes it: `left`'s columns in order, then
    the columns only `right` has (names compared ignoring case); nested struct fields merged alike. A column both have must
    have one type (SchemaConflict otherwise): no widening."""
    fields = _merge_fields([f.to_json() for f in left.fields], [f.to_json() for f in right.fields], "")
    return Schema(tuple(Field(f["name"], f["type"], True, f.get("metadata") or {}) for f in fields))


def _merge_fields(left: list[dict], right: list[dict], prefix: str) -> list[dict]:
    # Names compare ignoring case, as Spark's mergeSchema does by default (spark.sql.caseSensitive
    # false): `ID` in one file and `id` in another are one column, spelled as the first file has it.
    by_name = {f["name"].lower(): f for f in right}
    out = []
    for f in left:
        other = by_name.get(f["name"].lower())
        out.append(f if other is None else {**f, "type": _merge_types(f["type"], other["type"], prefix + f["name"])})
    names = {f["name"].lower() for f in left}
    return out + [f for f in right if f["name"].lower() not in names]


def _merge_types(a: Any, b: Any, column: str) -> Any:
    if isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type"):
        kind = a["type"]
        if kind == "struct":
            return {**a, "fields": _merge_fields(a["fields"], b["fields"], column + ".")}
        if kind == "array":
            return {**a, "elementType": _merge_types(a["elementType"], b["elementType"], column + ".element")}
        if kind == "map":
            return {**a, "keyType": _merge_types(a["keyType"], b["keyType"], column + ".key"),
                    "valueType": _merge_types(a["valueType"], b["valueType"], column + ".value")}
    if type_key(a) != type_key(b):
        raise SchemaConflict(column, type_name(a), type_name(b))
    return a
