"""Column mapping (PROTOCOL.md, "Column Mapping"): logical names for users, physical ones in files.

With `delta.columnMapping.mode` = `name` or `id` (honoured only when the protocol supports the
`columnMapping` feature: reader 2 / writer 5 or later, or the feature listed at 3/7), every field
of the schema, nested ones too, carries in its metadata a `delta.columnMapping.id` and a
`delta.columnMapping.physicalName`. Data files name their columns by the physical names (and, in
both modes, carry the id as the Parquet field id); `add.partitionValues` and the stats
(`minValues`, `maxValues`, `nullCount`) are keyed by physical names too; `metaData.partitionColumns`
and the user see logical names. A rename changes only the logical name; a drop removes the field
from the schema, its data stays in the files unread. `delta.columnMapping.maxColumnId` is at
least the largest id ever given.

This module translates between the two, and gives a table its mapping (at create, or `name`
later) and new columns their ids; it knows nothing of Spark.
"""
from __future__ import annotations

import json
import re
import uuid
from decimal import Decimal
from typing import Any, Mapping

import pyarrow as pa

from skiplake.log.actions import Protocol
from skiplake.log.schema import Field, Schema

MODE = "delta.columnMapping.mode"
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
FEATURE = "columnMapping"
MODES = ("none", "name", "id")
# The field metadata key Spark's Parquet writer turns into the field id (and its reader matches
# by, with spark.sql.parquet.fieldId.read.enabled).
PARQUET_FIELD_ID = "parquet.field.id"


def supports_column_mapping(protocol: Protocol) -> bool:
    """Whether a reader honours the mode: reader version 2, or 3 with the feature listed."""
    if protocol.minReaderVersion >= 3:
        return FEATURE in (protocol.readerFeatures or ())
    return protocol.minReaderVersion == 2


def mapping_mode(configuration: Mapping[str, str], protocol: Protocol) -> str:
    """`none`, `name` or `id`: the table's mode, `none` when the protocol does not support it."""
    mode = requested_mode(configuration)
    return mode if supports_column_mapping(protocol) else "none"


def physical_name(f: Field, mode: str) -> str:
    """The column's name in data files and in the log's partition values and stats: its physicalName
    (its own name in mode `none`). ValueError when a mapped column has none."""
    if mode == "none":
        return f.name
    name = f.metadata.get(PHYSICAL_NAME)
    if not name:
        raise ValueError(f"column {f.name!r} has no {PHYSICAL_NAME} in a table with column mapping mode {mode!r}")
    return str(name)


def field_id(f: Field) -> int:
    """The column's delta.columnMapping.id; ValueError when it has none."""
    value = f.metadata.get(ID)
    if value is None:
        raise ValueError(f"column {f.name!r} has no {ID}")
    return int(value)


def physical_schema(schema: Schema, mode: str, field_ids: bool = True) -> Schema:
    """The schema as the data files spell it: physical names at every level, and (field_ids)
    the ids as Parquet field ids (`parquet.field.id`, which Spark reads and writes). A reader in
    `name` mode leaves the ids out: it matches columns by name, and files written before the
    table took the mapping carry none (Spark refuses a read schema with ids over such files)."""
    if mode == "none":
        return schema
    return Schema(tuple(_physical_field(f.name, f.type, f.nullable, f.metadata, mode, field_ids)
                        for f in schema.fields))


def _physical_field(name: str, type_: Any, nullable: bool, metadata: dict[str, Any], mode: str,
                    field_ids: bool) -> Field:
    f = Field(name, type_, nullable, metadata)
    meta = {PARQUET_FIELD_ID: field_id(f)} if field_ids else {}
    return Field(physical_name(f, mode), _physical_type(type_, mode, field_ids), nullable, meta)


def _physical_type(type_: Any, mode: str, field_ids: bool) -> Any:
    if isinstance(type_, str):
        return type_
    kind = type_.get("type")
    if kind == "struct":
        fields = []
        for child in type_["fields"]:
            pf = _physical_field(child["name"], child["type"], bool(child.get("nullable", True)),
                                 dict(child.get("metadata") or {}), mode, field_ids)
            fields.append(pf.to_json())
        return {"type": "struct", "fields": fields}
    if kind == "array":
        return {**type_, "elementType": _physical_type(type_["elementType"], mode, field_ids)}
    if kind == "map":
        return {**type_, "keyType": _physical_type(type_["keyType"], mode, field_ids),
                "valueType": _physical_type(type_["valueType"], mode, field_ids)}
    return type_


def physical_names(schema: Schema, mode: str) -> dict[str, str]:
    """Top-level logical name -> physical name."""
    return {f.name: physical_name(f, mode) for f in schema.fields}


def logical_partition_values(values: Mapping[str, str | None], schema: Schema, partition_columns: list[str],
                             mode: str) -> dict[str, str | None]:
    """`add.partitionValues` (keyed by physical names) keyed by the logical partition columns."""
    if mode == "none":
        return dict(values)
    out = {}
    for column in partition_columns:
        f = schema.field(column)
        out[f.name] = values.get(physical_name(f, mode))
    return out


def partition_values_by_name(values: Mapping[str, str | None], schema: Schema, partition_columns: list[str],
                             mode: str) -> dict[str, str | None]:
    """Partition values keyed by the logical partition columns, from values keyed by physical names
    (as the log holds them) or already by logical ones (as a snapshot's files give them)."""
    out: dict[str, str | None] = {}
    for column in partition_columns:
        f = schema.field(column)
        out[f.name] = values[f.name] if f.name in values else values.get(physical_name(f, mode))
    return out


def logical_stats(stats: Mapping[str, Any], schema: Schema, mode: str) -> dict[str, Any]:
    """A file's parsed stats with `minValues`, `maxValues` and `nullCount` keyed by logical names
    at every level; columns no longer in the schema (dropped) are left out."""
    if mode == "none":
        return dict(stats)
    out = dict(stats)
    for key in ("minValues", "maxValues", "nullCount"):
        if isinstance(stats.get(key), Mapping):
            out[key] = _rename_stats(stats[key], [(f.name, f.type, f.metadata) for f in schema.fields], mode)
    return out


def _rename_stats(values: Mapping[str, Any], fields: list[tuple[str, Any, dict]], mode: str) -> dict[str, Any]:
    out = {}
    for name, type_, metadata in fields:
        phys = physical_name(Field(name, type_, True, metadata), mode)
        if phys not in values:
            continue
        value = values[phys]
        if isinstance(type_, dict) and type_.get("type") == "struct" and isinstance(value, Mapping):
            value = _rename_stats(value, [(c["name"], c["type"], dict(c.get("metadata") or {}))
                                          for c in type_["fields"]], mode)
        out[name] = value
    return out


def assign(schema: Schema, max_id: int, keep_names: bool = False) -> tuple[Schema, int]:
    """`schema` with an id and a physical name (`col-<uuid>`, as delta-spark names new columns;
    the column's own name with keep_names, for files written before the mapping) given to every
    field that lacks them, at every level; and the new largest id."""
    counter = [max_id]

    def give(name: str, type_: Any, nullable: bool, metadata: dict[str, Any]) -> Field:
        meta = dict(metadata)
        if ID not in meta:
            counter[0] += 1
            meta[ID] = counter[0]
        meta.setdefault(PHYSICAL_NAME, name if keep_names else f"col-{uuid.uuid4()}")
        return Field(name, nested(type_), nullable, meta)

    def nested(type_: Any) -> Any:
        if isinstance(type_, str):
            return type_
        kind = type_.get("type")
        if kind == "struct":
            return {"type": "struct", "fields": [
                give(c["name"], c["type"], bool(c.get("nullable", True)), dict(c.get("metadata") or {})).to_json()
                for c in type_["fields"]]}
        if kind == "array":
            return {**type_, "elementType": nested(type_["elementType"])}
        if kind == "map":
            return {**type_, "keyType": nested(type_["keyType"]), "valueType": nested(type_["valueType"])}
        return type_

    fields = tuple(give(f.name, f.type, f.nullable, f.metadata) for f in schema.fields)
    return Schema(fields), counter[0]


def without_mapping(schema: Schema) -> Schema:
    """`schema` with no column mapping metadata (ids, physical names, Parquet field ids) at any
    level: a schema taken from another mapped table must not bring that table's names along."""
    def clean(meta: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in meta.items() if k not in (ID, PHYSICAL_NAME, PARQUET_FIELD_ID)}

    def nested(type_: Any) -> Any:
        if not isinstance(type_, dict):
            return type_
        out = dict(type_)
        if "fields" in out:
            out["fields"] = [{**c, "type": nested(c["type"]), "metadata": clean(c.get("metadata") or {})}
                             for c in out["fields"]]
        for key in ("elementType", "keyType", "valueType"):
            if key in out:
                out[key] = nested(out[key])
        return out

    return Schema(tuple(Field(f.name, nested(f.type), f.nullable, clean(f.metadata)) for f in schema.fields))


def requested_mode(configuration: Mapping[str, str]) -> str:
    """The mode the table's properties ask for (`none` when they name none)."""
    mode = str(configuration.get(MODE, "none")).strip().lower()
    if mode not in MODES:
        raise ValueError(f"{MODE} is {configuration.get(MODE)!r}; expected one of {', '.join(MODES)}")
    return mode


def configure(schema: Schema, configuration: Mapping[str, str], current: str, new_table: bool
              ) -> tuple[Schema, dict[str, str]]:
    """The schema and configuration of a table whose properties are now `configuration`, its
    mode so far `current`. Turning the mapping on gives every field an id and a physical name:
    fresh names at create; on an existing table (`name` mode only, as Delta allows) each
    field's own name, which its files already use. A mode is never changed or dropped once set
    (files written under it would be misread). Raises ValueError saying what is allowed."""
    mode = requested_mode(configuration)
    config = dict(configuration)
    if mode == current:
        return schema, config
    if current != "none":
        raise ValueError(f"{MODE} is {current!r} and cannot change (to {mode!r}): files are written under it")
    if mode == "id" and not new_table:
        raise ValueError(f"{MODE} 'id' is set when a table is created (its files must carry field ids); "
                         "an existing table can take 'name'")
    mapped, max_id = assign(without_mapping(schema), 0, keep_names=not new_table)
    config[MAX_COLUMN_ID] = str(max_id)
    config[MODE] = mode
    return mapped, config


def extend(schema: Schema, configuration: Mapping[str, str]) -> tuple[Schema, dict[str, str]]:
    """`schema` (a mapped table's, with new columns) with ids and physical names for the new
    columns, and the configuration with `maxColumnId` raised past them."""
    current = int(configuration.get(MAX_COLUMN_ID) or 0)
    known = max([current] + _ids(schema))
    mapped, max_id = assign(schema, known)
    return mapped, {**configuration, MAX_COLUMN_ID: str(max(max_id, current))}


def _ids(schema: Schema) -> list[int]:
    """Every id the schema's fields carry, at every level."""
    out: list[int] = []

    def walk(type_: Any) -> None:
        if not isinstance(type_, dict):
            return
        for f in type_.get("fields") or ():
            if ID in (f.get("metadata") or {}):
                out.append(int(f["metadata"][ID]))
            walk(f["type"])
        for key in ("elementType", "keyType", "valueType"):
            walk(type_.get(key))

    walk(schema.to_json())
    return out


_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"(\s*:)')


def logical_files(files: pa.Table, schema: Schema, partition_columns: list[str], mode: str) -> pa.Table:
    """A snapshot's files table (FILES_SCHEMA) with partition values and stats keyed by logical
    names, so that planning and reads see the names the user sees."""
    if mode == "none" or not files.num_rows:
        return files
    parts = {physical_name(schema.field(c), mode): schema.field(c).name for c in partition_columns}
    values = [None if pv is None else [(parts.get(k, k), v) for k, v in pv]
              for pv in files.column("partitionValues").to_pylist()]
    renames = _stat_renames(schema, mode)
    if renames is not None:
        stats = [None if st is None else _KEY.sub(lambda m: f'"{renames.get(m.group(1), m.group(1))}"{m.group(2)}', st)
                 for st in files.column("stats").to_pylist()]
    else:  # one physical name means different columns at different levels: rename by structure
        stats = [None if st is None else _json(logical_stats(json.loads(st, parse_float=Decimal), schema, mode))
                 for st in files.column("stats").to_pylist()]
    out = files.set_column(files.schema.get_field_index("partitionValues"), files.schema.field("partitionValues"),
                           pa.array(values, files.schema.field("partitionValues").type))
    return out.set_column(out.schema.get_field_index("stats"), out.schema.field("stats"), pa.array(stats, pa.string()))


def _json(value: Any) -> str:
    """`value` (parsed with Decimal numbers) as JSON text, each number with the digits it was read
    with: json.dumps would need floats, which round a decimal's bounds (and skipping by them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, Decimal) and value.is_finite():
        return str(value)
    return json.dumps(value)


def _stat_renames(schema: Schema, mode: str) -> dict[str, str] | None:
    """Physical -> logical name at every level, or None when one physical name has two meanings.
    A stats key that is no physical name ("numRecords", "minValues", ...) is left as it is; a
    logical name equal to such a key would be one more ambiguity, also sent the slow way."""
    out: dict[str, str] = {}
    reserved = {"numRecords", "minValues", "maxValues", "nullCount", "tightBounds"}

    def walk(fields: list[tuple[str, Any, dict]]) -> bool:
        for name, type_, metadata in fields:
            phys = physical_name(Field(name, type_, True, metadata), mode)
            if out.get(phys, name) != name or phys in reserved:
                return False
            out[phys] = name
            t = type_
            while isinstance(t, dict) and t.get("type") in ("array", "map"):
                t = t.get("elementType") or t.get("valueType")
            if isinstance(t, dict) and t.get("type") == "struct":
                if not walk([(c["name"], c["type"], dict(c.get("metadata") or {})) for c in t["fields"]]):
                    return False
        return True

    return out if walk([(f.name, f.type, f.metadata) for f in schema.fields]) else None
