"""Hive-style partition folders, exactly as Spark names them, and which types can be partition columns.

Spark escapes a partition value in a folder name with `%XX` for a fixed set of characters
(ExternalCatalogUtils.escapePathName) and writes NULL (and '') as __HIVE_DEFAULT_PARTITION__.
(The log's own encoding of those folder names in `add.path` is `skiplake.log.paths`.)
"""
from __future__ import annotations

from skiplake.errors import PartitionValueError
from skiplake.log.schema import Schema, is_primitive

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x01, 0x20)}
# Types whose values have no partition folder encoding.
_PARTITION_TYPES_REFUSED = {"binary"}


def escape_path_name(value: str) -> str:
    """A value (or column name) as Spark spells it in a folder name: `%XX` for the characters escapePathName escapes."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape_path_name(name: str) -> str:
    """A folder name's text with its `%XX` escapes decoded (a `%` without two hex digits after it stays)."""
    out = []
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%" and _is_hex(name[i + 1:i + 3]):
            out.append(chr(int(name[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    """The relative folder of a partition: col1=v1/col2=v2 (empty for an unpartitioned table)."""
    parts = []
    for col in partition_columns:
        v = values.get(col)
        text = HIVE_DEFAULT_PARTITION if v is None or v == "" else escape_path_name(v)
        parts.append(f"{escape_path_name(col)}={text}")
    return "/".join(parts)


def partition_value(folder_value: str) -> str | None:
    """A folder name's value (after `column=`) unescaped; __HIVE_DEFAULT_PARTITION__ is None."""
    return None if folder_value == HIVE_DEFAULT_PARTITION else unescape_path_name(folder_value)


def has_partition_encoding(type_: object) -> bool:
    """Whether values of `type_` can be partition values (spelled in a folder name)."""
    return is_primitive(type_) and type_ not in _PARTITION_TYPES_REFUSED


def parse_partition_dir(relative_dir: str) -> dict[str, str | None]:
    """col1=v1/col2=v2 to {col1: v1, col2: v2}; __HIVE_DEFAULT_PARTITION__ becomes None."""
    out: dict[str, str | None] = {}
    if not relative_dir:
        return out
    for segment in relative_dir.strip("/").split("/"):
        if "=" not in segment:
            continue
        key, _, value = segment.partition("=")
        out[unescape_path_name(key)] = partition_value(value)
    return out


def check_partition_types(table_path: str, schema: Schema, partition_columns: list[str]) -> None:
    """Refuse partition columns that are missing from the schema or have no folder encoding."""
    for name in partition_columns:
        f = schema.find(name)
        if f is None:
            raise PartitionValueError(table_path, name, None, "the partition column is not in the schema")
        if not has_partition_encoding(f.type):
            raise PartitionValueError(table_path, name, f"<{f.type if isinstance(f.type, str) else f.type['type']}>",
                                      "values of this type have no partition value encoding")
