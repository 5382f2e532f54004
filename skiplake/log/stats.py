"""Per-file column statistics (Delta's `stats` JSON) taken from Parquet footers.

The footer already holds min/max/null counts per row group, written by Spark's Parquet writer,
so stats cost one small read per file and never a pass over the data. Formats follow what
delta-spark writes: strings cut to 32 characters (a cut max gets U+10FFFF appended so it stays
an upper bound), timestamps as ISO-8601 UTC at millisecond precision, dates as yyyy-MM-dd.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.schema import INTEGER_TYPES, Schema, is_decimal
from skiplake.log.stores import parquet_source

STRING_PREFIX_LENGTH = 32
MAX_CHAR = "\U0010ffff"
DEFAULT_NUM_INDEXED_COLS = 32
_MINMAX_TYPES = INTEGER_TYPES | {"float", "double", "string", "date", "timestamp", "timestamp_ntz"}


@dataclass
class _Acc:
    min: Any = None
    max: Any = None
    nulls: int = 0
    minmax_ok: bool = True
    nulls_ok: bool = True


def _stat_json(value: Any, type_: Any, is_max: bool) -> Any:
    """A footer value as Delta's stats JSON writes it; None when it cannot be represented."""
    if value is None:
        return None
    if type_ == "string":
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if len(value) > STRING_PREFIX_LENGTH:
            return value[:STRING_PREFIX_LENGTH] + MAX_CHAR if is_max else value[:STRING_PREFIX_LENGTH]
        return value
    if type_ in INTEGER_TYPES:
        return int(value)
    if type_ in ("float", "double"):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    if is_decimal(type_):
        d = Decimal(value)
        f = float(d)
        # JSON numbers go through floats in most readers: keep only values that survive that.
        return f if Decimal(repr(f)) == d else None
    if type_ == "date":
        return value.isoformat() if isinstance(value, dt.date) else None
    if type_ in ("timestamp", "timestamp_ntz"):
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
            value = value.replace(microsecond=(value.microsecond // 1000) * 1000)
            return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}" + (
                "Z" if type_ == "timestamp" else "")
        return None
    return None


def indexed_columns(schema: Schema, skip: set[str], limit: int) -> list[tuple[tuple[str, ...], Any]]:
    """(path, type) of the leaf columns that get stats, the first `limit` of them, as Delta counts."""
    out: list[tuple[tuple[str, ...], Any]] = []

    def walk(prefix: tuple[str, ...], type_: Any) -> None:
        if limit >= 0 and len(out) >= limit:
            return
        if isinstance(type_, dict) and type_.get("type") == "struct":
            for f in type_["fields"]:
                walk(prefix + (f["name"],), f["type"])
        elif isinstance(type_, dict):
            return  # arrays and maps get no stats
        else:
            out.append((prefix, type_))

    for f in schema.fields:
        if f.name.lower() in skip:
            continue
        walk((f.name,), f.type)
    return out


def _column_paths(meta: pq.FileMetaData) -> list[tuple[str, ...]]:
    """Each Parquet leaf column's path as name components, in column order.

    Parquet spells a path as one dotted string, which cannot tell a top-level column named
    `a.b` from field b of struct a; the Arrow schema keeps the names apart."""
    out: list[tuple[str, ...]] = []

    def walk(prefix: tuple[str, ...], type_: pa.DataType) -> None:
        if pa.types.is_struct(type_):
            for child in type_:
                walk(prefix + (child.name,), child.type)
        elif pa.types.is_map(type_):
            walk(prefix + ("key_value", "key"), type_.key_type)
            walk(prefix + ("key_value", "value"), type_.item_type)
        elif pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
            walk(prefix + ("list", "element"), type_.value_type)
        else:
            out.append(prefix)

    try:
        for field in meta.schema.to_arrow_schema():
            walk((field.name,), field.type)
    except (pa.ArrowException, NotImplementedError):
        out = []
    if len(out) != meta.num_columns:  # an unusual nesting: fall back to the dotted strings
        return [tuple(meta.schema.column(i).path.split(".")) for i in range(meta.num_columns)]
    return out


def stats_from_metadata(meta: pq.FileMetaData, schema: Schema, partition_columns: Iterable[str],
                        num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS) -> str:
    skip = {c.lower() for c in partition_columns}
    leaves = indexed_columns(schema, skip, num_indexed_cols)
    index = {path: i for i, path in enumerate(_column_paths(meta))}
    lower_index = {tuple(p.lower() for p in k): v for k, v in index.items()}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for path, type_ in leaves:
        i = index.get(path, lower_index.get(tuple(p.lower() for p in path)))
        acc = _Acc()
        if i is None:
            # A column the file does not have (added later): every row is null.
            _put(nulls, path, meta.num_rows)
            continue
        for rg in range(meta.num_row_groups):
            col = meta.row_group(rg).column(i)
            st = col.statistics
            if st is None:
                acc.minmax_ok = acc.nulls_ok = False
                break
            if st.has_null_count:
                acc.nulls += st.null_count
            else:
                acc.nulls_ok = False
            if col.num_values and st.has_min_max:
                lo, hi = st.min, st.max
                acc.min = lo if acc.min is None or lo < acc.min else acc.min
                acc.max = hi if acc.max is None or hi > acc.max else acc.max
            elif col.num_values - (st.null_count if st.has_null_count else 0) > 0:
                acc.minmax_ok = False
        if acc.nulls_ok:
            _put(nulls, path, acc.nulls)
        if acc.minmax_ok and type_ in _MINMAX_TYPES or (acc.minmax_ok and is_decimal(type_)):
            lo, hi = _stat_json(acc.min, type_, False), _stat_json(acc.max, type_, True)
            if lo is not None and hi is not None:
                _put(mins, path, lo)
                _put(maxs, path, hi)
    return json.dumps({"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs,
                       "nullCount": nulls}, separators=(",", ":"), ensure_ascii=False)


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for p in path[:-1]:
        target = target.setdefault(p, {})
    target[path[-1]] = value


def file_stats(path: str, schema: Schema, partition_columns: Iterable[str],
               num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS) -> str:
    return stats_from_metadata(pq.read_metadata(parquet_source(path)), schema, partition_columns, num_indexed_cols)


def many_file_stats(paths: list[str], schema: Schema, partition_columns: list[str],
                    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS) -> list[str]:
    """Footer stats of many files, read in parallel (footer reads are I/O-bound)."""
    if len(paths) <= 4:
        return [file_stats(p, schema, partition_columns, num_indexed_cols) for p in paths]
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda p: file_stats(p, schema, partition_columns, num_indexed_cols), paths))


def loose_bounds(stats: str | None) -> str | None:
    """The file's stats, its min/max now bounds of the rows left rather than values among them.
    Edited as text: a decimal or double stat must keep its exact digits."""
    if not stats or not stats.lstrip().startswith("{"):
        return stats
    if '"tightBounds"' in stats:
        return re.sub(r'"tightBounds"\s*:\s*true', '"tightBounds":false', stats)
    body = stats.lstrip()[1:].lstrip()
    return '{"tightBounds":false' + ("," + body if not body.startswith("}") else body)
