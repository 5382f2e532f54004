"""Table schemas as the Delta protocol writes them (Spark's StructType JSON), without pyspark.

A schema is kept as the parsed JSON of `metaData.schemaString`; this module gives typed access
to its top-level fields and the few type facts the log, stats and predicates need.
"""
from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

PRIMITIVE_TYPES = {
    "string", "long", "integer", "short", "byte", "float", "double", "boolean",
    "binary", "date", "timestamp", "timestamp_ntz",
}
INTEGER_TYPES = {"long", "integer", "short", "byte"}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")

# A field's metadata: the collation of each collated string in it, by path ("s", "m.value").
COLLATIONS_KEY = "__COLLATIONS"


def column_path_parts(text: str) -> list[str]:
    """`a.b`, `` `a.b`.c `` -> the parts of a column path, as Spark splits a name: backquotes keep
    dots in a part, a doubled backquote inside them is one."""
    parts: list[str] = []
    cur, quoted, i = "", False, 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1:i + 2] == "`":
                cur += "`"
                i += 2
                continue
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur.strip())
    return parts


def is_decimal(type_: Any) -> bool:
    """Whether `type_` names a decimal type (`decimal(p,s)`)."""
    return isinstance(type_, str) and bool(_DECIMAL.match(type_))


def is_primitive(type_: Any) -> bool:
    """Whether `type_` names a primitive type, decimals included (not a nested type)."""
    return isinstance(type_, str) and (type_ in PRIMITIVE_TYPES or is_decimal(type_))


# The Python type a column's values have when Arrow and the stats take them as they are (bool, an
# int subclass, is not an int here; a datetime is not a date).
_PLAIN_KINDS: dict[str, type] = {**{t: int for t in INTEGER_TYPES}, "string": str, "date": dt.date}


def plain_kind(type_: Any) -> type | None:
    """The exact Python type of plain values of a column of `type_` (int, str, date), or None."""
    return _PLAIN_KINDS.get(type_) if isinstance(type_, str) else None


def type_name(type_: Any, leaf: Callable[[str], str] = str, field_name: Callable[[str], str] = str) -> str:
    """A short readable name of a (possibly nested) type, for error messages; `leaf` and
    `field_name` spell primitive types and field names otherwise (Spark DDL, say)."""
    if isinstance(type_, str):
        return leaf(type_)
    kind = type_.get("type")
    if kind == "array":
        return f"array<{type_name(type_['elementType'], leaf, field_name)}>"
    if kind == "map":
        return f"map<{type_name(type_['keyType'], leaf, field_name)},{type_name(type_['valueType'], leaf, field_name)}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{field_name(f['name'])}:{type_name(f['type'], leaf, field_name)}"
                                    for f in type_["fields"]) + ">"
    return str(kind)


@dataclass(frozen=True)
class Field:
    """A field of a schema as Delta's schema JSON spells it; its metadata is left out of comparisons."""
    name: str
    type: Any  # a primitive type name ("long", "decimal(7,2)") or a nested type's JSON dict
    nullable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The field as an element of the schema JSON's `fields`."""
        return {"name": self.name, "type": self.type, "nullable": self.nullable, "metadata": self.metadata}


@dataclass(frozen=True)
class Schema:
    """A table schema (Spark's StructType): its top-level fields, in order."""
    fields: tuple[Field, ...]

    @staticmethod
    def from_json(text: str | dict[str, Any]) -> "Schema":
        """The schema from its JSON, as text or parsed; ValueError when it is not a struct."""
        obj = json.loads(text) if isinstance(text, str) else text
        if obj.get("type") != "struct":
            raise ValueError("a table schema must be a struct")
        return Schema(tuple(
            Field(f["name"], f["type"], bool(f.get("nullable", True)), dict(f.get("metadata") or {}))
            for f in obj["fields"]
        ))

    def to_json(self) -> dict[str, Any]:
        """The schema as Delta's schema JSON (a struct type)."""
        return {"type": "struct", "fields": [f.to_json() for f in self.fields]}

    def json_string(self) -> str:
        """The schema as compact JSON text, as metaData.schemaString holds it."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @property
    def names(self) -> list[str]:
        """The top-level column names, in order."""
        return [f.name for f in self.fields]

    def find(self, name: str) -> Field | None:
        """Case-insensitive lookup, as Spark resolves column names by default."""
        low = name.lower()
        for f in self.fields:
            if f.name.lower() == low:
                return f
        return None

    def field(self, name: str) -> Field:
        """Case-insensitive lookup, as find(); KeyError when there is no such column."""
        found = self.find(name)
        if found is None:
            raise KeyError(name)
        return found

    def __len__(self) -> int:
        """The number of top-level fields."""
        return len(self.fields)
