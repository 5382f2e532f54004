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
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from skiplake.log.schema import COLLATIONS_KEY, INTEGER_TYPES, Schema, column_path_parts, is_decimal
from skiplake.log.storage_for import parquet_source

# Delta truncates string stats to this many characters; a max that long may be a prefix, so
# writers end a truncated max with MAX_CHAR (and readers take a max ending so as no bound).
STRING_PREFIX_LENGTH = 32
MAX_CHAR = "\U0010ffff"
DEFAULT_NUM_INDEXED_COLS = 32
NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
_MINMAX_TYPES = INTEGER_TYPES | {"float", "double", "string", "date", "timestamp", "timestamp_ntz"}


@dataclass
class _Acc:
    min: Any = None
    max: Any = None
    nulls: int = 0
    minmax_ok: bool = True
    nulls_ok: bool = True

    def add(self, col: Any) -> None:
        """Take in one row group's statistics of the column (pyarrow's ColumnChunkMetaData)."""
        st = col.statistics
        if st is None:
            self.minmax_ok = self.nulls_ok = False
            return
        if st.has_null_count:
            self.nulls += st.null_count
        else:
            self.nulls_ok = False
        if col.num_values and st.has_min_max:
            lo, hi = st.min, st.max
            self.min = lo if self.min is None or lo < self.min else self.min
            self.max = hi if self.max is None or hi > self.max else self.max
        elif col.num_values - (st.null_count if st.has_null_count else 0) > 0:
            self.minmax_ok = False


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


def stats_settings(configuration: Mapping[str, str]) -> tuple[int, list[str] | None]:
    """(delta.dataSkippingNumIndexedCols, delta.dataSkippingStatsColumns) of a table's
    configuration: how many leading leaf columns get stats (-1: all), or the columns that do
    (which takes precedence, as in Delta). ValueError names a malformed value."""
    text = configuration.get(NUM_INDEXED_COLS_KEY)
    limit = DEFAULT_NUM_INDEXED_COLS
    if text is not None:
        try:
            limit = int(text)
        except ValueError:
            limit = -2
        if limit < -1:
            raise ValueError(f"{NUM_INDEXED_COLS_KEY} must be an integer of -1 (all columns) or more, not {text!r}")
    names = configuration.get(STATS_COLUMNS_KEY)
    return limit, ([n.strip() for n in names.split(",") if n.strip()] if names is not None else None)


def indexed_columns(schema: Schema, skip: set[str], limit: int,
                    stats_columns: Sequence[str] | None = None) -> list[tuple[tuple[str, ...], Any]]:
    """(path, type) of the leaf columns that get stats, as Delta chooses them: the first `limit`,
    or with `stats_columns` those named (a struct by name: all its fields)."""
    out: list[tuple[tuple[str, ...], Any]] = []
    named = {tuple(p.lower() for p in column_path_parts(n)) for n in stats_columns} if stats_columns is not None else None

    def wanted(path: tuple[str, ...], names: set[tuple[str, ...]]) -> bool:
        lowered = tuple(p.lower() for p in path)
        return any(lowered[:i] in names for i in range(1, len(lowered) + 1))

    def walk(prefix: tuple[str, ...], type_: Any) -> None:
        if named is None and limit >= 0 and len(out) >= limit:
            return
        if isinstance(type_, dict) and type_.get("type") == "struct":
            for f in type_["fields"]:
                if COLLATIONS_KEY not in (f.get("metadata") or {}):
                    walk(prefix + (f["name"],), f["type"])
        elif isinstance(type_, dict):
            return  # arrays and maps get no stats
        elif named is None or wanted(prefix, named):
            out.append((prefix, type_))

    for f in schema.fields:
        # A collated string gets no stats: min/max in binary order say nothing of a case-blind match.
        if f.name.lower() in skip or COLLATIONS_KEY in f.metadata:
            continue
        walk((f.name,), f.type)
    return out


def column_paths(meta: pq.FileMetaData) -> list[tuple[str, ...]]:
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


@dataclass(frozen=True)
class FooterColumns:
    """The columns that get stats: each one's path, type, the index of its column in a file's
    footer (None: the file lacks it) and whether its type takes min/max. The same for every file
    of one Parquet schema, so a caller reading many such files works it out once."""
    columns: tuple[tuple[tuple[str, ...], Any, int | None, bool], ...]


def footer_columns(meta: pq.FileMetaData, schema: Schema, partition_columns: Iterable[str],
                   num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
                   stats_columns: Sequence[str] | None = None) -> FooterColumns:
    """The FooterColumns of files with `meta`'s Parquet schema: the columns that get stats, as
    indexed_columns picks them (partition columns aside), each matched to its footer column by path."""
    skip = {c.lower() for c in partition_columns}
    index = {path: i for i, path in enumerate(column_paths(meta))}
    lower_index = {tuple(p.lower() for p in k): v for k, v in index.items()}
    return FooterColumns(tuple(
        (path, type_, index.get(path, lower_index.get(tuple(p.lower() for p in path))),
         type_ in _MINMAX_TYPES or is_decimal(type_))
        for path, type_ in indexed_columns(schema, skip, num_indexed_cols, stats_columns)))


def stats_from_metadata(meta: pq.FileMetaData, schema: Schema, partition_columns: Iterable[str],
                        num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
                        stats_columns: Sequence[str] | None = None, columns: FooterColumns | None = None) -> str:
    """The stats JSON of a file from its footer. `columns` (footer_columns of a file of the same
    Parquet schema) saves working out which footer column each stats column is."""
    if columns is None:
        columns = footer_columns(meta, schema, partition_columns, num_indexed_cols, stats_columns)
    # INT96 timestamps (Spark's legacy outputTimestampType) have no defined sort order: writers
    # leave their min/max out or, some older ones, write byte-wise ones. Never use them.
    accs = [None if i is None else _Acc(minmax_ok=minmax and meta.schema.column(i).physical_type != "INT96")
            for _, _, i, minmax in columns.columns]
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for acc, (_, _, i, _) in zip(accs, columns.columns):
            if acc is None or not (acc.nulls_ok or acc.minmax_ok):
                continue
            acc.add(group.column(i))
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for acc, (path, type_, _, _) in zip(accs, columns.columns):
        _put_column(acc, path, type_, meta.num_rows, mins, maxs, nulls)
    return json.dumps({"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs,
                       "nullCount": nulls}, separators=(",", ":"), ensure_ascii=False)


def _put_column(acc: "_Acc | None", path: tuple[str, ...], type_: Any, num_rows: int,
                mins: dict[str, Any], maxs: dict[str, Any], nulls: dict[str, Any]) -> None:
    """One column's stats into the stats JSON's three maps, as far as they are known."""
    if acc is None:
        # A column the file does not have (added later): every row is null.
        _put(nulls, path, num_rows)
        return
    if acc.nulls_ok:
        _put(nulls, path, acc.nulls)
    if acc.minmax_ok:
        lo, hi = _stat_json(acc.min, type_, False), _stat_json(acc.max, type_, True)
        if lo is not None and hi is not None:
            _put(mins, path, lo)
            _put(maxs, path, hi)


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for p in path[:-1]:
        target = target.setdefault(p, {})
    target[path[-1]] = value


def read_footers(paths: Sequence[str], sizes: Sequence[int | None] | None = None
                 ) -> Iterator[pq.FileMetaData | Exception]:
    """Each file's footer in order, read in parallel (footer reads are I/O-bound); a file that
    cannot be read as Parquet gives its exception instead."""
    def read(i: int) -> pq.FileMetaData | Exception:
        try:
            return pq.read_metadata(parquet_source(paths[i], sizes[i] if sizes is not None else None))
        except (OSError, pa.ArrowException) as e:
            return e

    if len(paths) <= 4:
        yield from (read(i) for i in range(len(paths)))
        return
    with ThreadPoolExecutor(max_workers=8) as pool:
        yield from pool.map(read, range(len(paths)))


def file_stats(path: str, schema: Schema, partition_columns: Iterable[str],
               num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS) -> str:
    """The stats JSON of one data file, from its footer."""
    return stats_from_metadata(pq.read_metadata(parquet_source(path)), schema, partition_columns, num_indexed_cols)


def many_file_stats(paths: list[str], schema: Schema, partition_columns: list[str],
                    num_indexed_cols: int = DEFAULT_NUM_INDEXED_COLS,
                    stats_columns: Sequence[str] | None = None) -> list[str]:
    """Footer stats of many files, their footers read in parallel."""
    out = []
    for meta in read_footers(paths):
        if isinstance(meta, Exception):
            raise meta
        out.append(stats_from_metadata(meta, schema, partition_columns, num_indexed_cols, stats_columns))
    return out


def loose_bounds(stats: str | None) -> str | None:
    """The file's stats, its min/max now bounds of the rows left rather than values among them.
    Edited as text: a decimal or double stat must keep its exact digits."""
    if not stats or not stats.lstrip().startswith("{"):
        return stats
    if '"tightBounds"' in stats:
        return re.sub(r'"tightBounds"\s*:\s*true', '"tightBounds":false', stats)
    body = stats.lstrip()[1:].lstrip()
    return '{"tightBounds":false' + ("," + body if not body.startswith("}") else body)
