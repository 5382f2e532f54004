"""Type widening: a column's type changed to a wider one, with files written before still in the old type.

PROTOCOL.md's `typeWidening` feature (and its `typeWidening-preview` forerunner) records each
change in the field's metadata under `delta.typeChanges`. Readers read older files as the wider
type (Spark's Parquet reader widens every change the protocol allows) and must refuse a table
with a change they do not know. Stats of older files stay numerically right, with one
exception: a float's stats are the shortest decimal of the float, which read as a double is not
the value the file holds (0.1 is not 0.100000001490116...), so a column once float has its
bounds widened to cover both readings (skiplake.skipping.stats_table).
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from skiplake.log.schema import Field, Schema

FEATURES = ("typeWidening", "typeWidening-preview")
TYPE_CHANGES = "delta.typeChanges"
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_INTEGERS = ("byte", "short", "integer", "long")


def supported_change(from_type: Any, to_type: Any) -> bool:
    """Whether PROTOCOL.md allows widening `from_type` to `to_type`."""
    if not (isinstance(from_type, str) and isinstance(to_type, str)):
        return False
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if to_type == "double" and from_type in ("float", "byte", "short", "integer"):
        return True
    if (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    to_dec = _DECIMAL.match(to_type)
    if not to_dec:
        return False
    precision, scale = int(to_dec.group(1)), int(to_dec.group(2))
    from_dec = _DECIMAL.match(from_type)
    if from_dec:
        k1, k2 = precision - int(from_dec.group(1)), scale - int(from_dec.group(2))
        return k1 >= k2 >= 0
    base = {"byte": 10, "short": 10, "integer": 10, "long": 20}.get(from_type)
    return base is not None and precision - base >= scale >= 0


def type_changes(schema: Schema) -> Iterator[tuple[str, dict]]:
    """Every recorded change: (column path, {fromType, toType[, fieldPath]}), nested fields included."""
    for f in schema.fields:
        yield from _changes_of(f.name, f)


def _changes_of(path: str, f: Field | dict) -> Iterator[tuple[str, dict]]:
    metadata = f.metadata if isinstance(f, Field) else (f.get("metadata") or {})
    changes = metadata.get(TYPE_CHANGES) or []
    for change in changes if isinstance(changes, list) else [changes]:
        yield path, change if isinstance(change, dict) else {"fromType": change, "toType": None}
    yield from _nested(path, f.type if isinstance(f, Field) else f.get("type"))


def _nested(path: str, type_: Any) -> Iterator[tuple[str, dict]]:
    if not isinstance(type_, dict):
        return
    kind = type_.get("type")
    if kind == "struct":
        for child in type_.get("fields") or []:
            yield from _changes_of(f"{path}.{child.get('name')}", child)
    elif kind == "array":
        yield from _nested(f"{path}.element", type_.get("elementType"))
    elif kind == "map":
        yield from _nested(f"{path}.key", type_.get("keyType"))
        yield from _nested(f"{path}.value", type_.get("valueType"))


def unsupported_changes(schema: Schema) -> list[str]:
    """The recorded changes this reader cannot read, described (empty: every one reads)."""
    out = []
    for path, change in type_changes(schema):
        from_type, to_type = change.get("fromType"), change.get("toType")
        if not supported_change(from_type, to_type):
            where = f"{path}.{change['fieldPath']}" if change.get("fieldPath") else path
            out.append(f"{where}: {from_type} to {to_type}")
    return out


def once_float(field: Field) -> bool:
    """Whether a top-level column was a float before some change (its older stats are float's)."""
    changes = field.metadata.get(TYPE_CHANGES) or []
    return isinstance(changes, list) and any(
        isinstance(c, dict) and c.get("fromType") == "float" and not c.get("fieldPath") for c in changes)
