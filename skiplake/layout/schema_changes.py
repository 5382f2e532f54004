"""RENAME COLUMN and DROP COLUMN on a table with column mapping: metadata-only changes.

With column mapping the files name columns by their physical names, so renaming a column
changes only its logical name in the schema, and dropping one removes it from the schema (its
data stays in the files, unread, until they are rewritten), as Delta does. Without the mapping
either would need every file rewritten, and is refused with the way to turn the mapping on.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.actions import Metadata
from skiplake.log.column_mapping import MODE, PHYSICAL_NAME, requested_mode
from skiplake.log.schema import Field, Schema


class SchemaChangeError(ValueError):
    """What was wrong with a rename or drop, in words for the user."""


def renamed(metadata: Metadata, old: str, new: str) -> Metadata:
    """`metadata` with top-level column `old` called `new` (partition columns follow)."""
    schema = _mapped_schema(metadata, "rename")
    field = _column(schema, old)
    if not new or new.strip() != new or "." in new:
        raise SchemaChangeError(f"{new!r} is not a column name (no dots, no surrounding spaces, not empty)")
    clash = schema.find(new)
    if clash is not None and clash.name.lower() != field.name.lower():
        raise SchemaChangeError(f"the table already has a column {clash.name!r}")
    _not_bucketed(metadata.configuration, field.name, "rename")
    fields = tuple(replace(f, name=new) if f is field else f for f in schema.fields)
    parts = tuple(new if p.lower() == field.name.lower() else p for p in metadata.partitionColumns)
    return replace(metadata, schemaString=Schema(fields).json_string(), partitionColumns=parts)


def dropped(metadata: Metadata, names: list[str]) -> Metadata:
    """`metadata` without the top-level columns `names` (never a partition column, nor the last
    data column)."""
    schema = _mapped_schema(metadata, "drop")
    if any(not str(f.metadata.get(PHYSICAL_NAME, "")).startswith("col-") for f in schema.fields):
        # Its physical names are column names (the mapping came after its files): the dropped
        # column's stats stay in the log under its name, and a later column of that name would
        # be skipped by them.
        raise SchemaChangeError("the table took column mapping after its files were written (its physical "
                                "names are its old column names); dropping columns is supported on tables "
                                "created with column mapping")
    gone = [_column(schema, n) for n in names]
    parts = {p.lower() for p in metadata.partitionColumns}
    for f in gone:
        if f.name.lower() in parts:
            raise SchemaChangeError(f"{f.name!r} is a partition column; partition columns cannot be dropped")
        _not_bucketed(metadata.configuration, f.name, "drop")
    kept = tuple(f for f in schema.fields if all(f is not g for g in gone))
    if not any(f.name.lower() not in parts for f in kept):
        raise SchemaChangeError("a table keeps at least one column that is not a partition column")
    return replace(metadata, schemaString=Schema(kept).json_string())


def _mapped_schema(metadata: Metadata, what: str) -> Schema:
    if requested_mode(metadata.configuration) == "none":
        raise SchemaChangeError(f"to {what} a column without rewriting every file the table needs column mapping: "
                                f"set_properties({{'{MODE}': 'name'}}) first")
    return metadata.schema


def _column(schema: Schema, name: str) -> Field:
    found = schema.find(name)
    if found is None:
        raise SchemaChangeError(f"no column {name!r} (columns: {', '.join(schema.names)}); only top-level "
                                "columns are renamed or dropped")
    return found


def _not_bucketed(configuration: Mapping[str, str], name: str, what: str) -> None:
    spec = bucket_spec_of(configuration)
    if spec is not None and name.lower() in {c.lower() for c in (*spec.columns, *spec.sort_by)}:
        raise SchemaChangeError(f"{name!r} is in the table's bucket spec; bucket columns cannot be {what}ped"
                                if what == "drop" else f"{name!r} is in the table's bucket spec and keeps its name")
