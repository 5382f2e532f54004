"""A snapshot's per-file statistics as typed columns: one array per column over all files.

Planning evaluates a predicate over every file at once (see columnar.py), so the stats JSON
of the log is parsed once per snapshot, by Arrow's JSON reader, only for the columns a predicate
names, and kept. Partition values become columns too (a file's partition value is both its
min and its max), so one evaluation covers partition and file pruning.

The stats become bounds by the rules of bounds.py, the same as the per-file `file_lookup`'s;
an unparseable bound is unknown.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Sequence, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.log.arrow_schema import map_value
from skiplake.log.checkpoint_read import TypedStats
from skiplake.log.column_mapping import PHYSICAL_NAME
from skiplake.log.deferred_stats import DeferredStats
from skiplake.log.json_column import read_json_column
from skiplake.log.schema import INTEGER_TYPES, Schema, is_decimal, is_primitive
from skiplake.log.values import TIMESTAMP_TYPES, parse_partition_value
from skiplake.skipping.bounds import Bounds, bound_arrays, is_no_bound, null_fact_arrays, stat_value
from skiplake.skipping.bucket_pruning import file_bucket_ids

# Each file's numRecords, and each column's (min, max, null count) over every file.
Parsed: TypeAlias = tuple[np.ndarray, dict[str, tuple[Bounds, Bounds, Bounds]]]

# How a file's partition tuple is spelled as one string while numbering the partitions.
_NULL_KEY = "\x00null"
_SEP = "\x1f"


def arrow_type(type_: Any) -> pa.DataType | None:
    """The Arrow type stats of a Delta primitive type are compared in; None if not comparable."""
    if type_ in INTEGER_TYPES:
        return pa.int64()
    if type_ in ("float", "double"):
        return pa.float64()
    if is_decimal(type_):
        precision, scale = (int(x) for x in type_[len("decimal("):-1].split(","))
        return pa.decimal128(precision, scale)
    if type_ == "string":
        return pa.string()
    if type_ == "date":
        return pa.date32()
    if type_ in TIMESTAMP_TYPES:
        return pa.timestamp("us")
    if type_ == "boolean":
        return pa.bool_()
    return None


def _json_type(type_: Any) -> pa.DataType:
    """How the stats JSON spells a type's values (dates and timestamps are strings)."""
    if type_ in ("date",) or type_ in TIMESTAMP_TYPES:
        return pa.string()
    t = arrow_type(type_)
    assert t is not None
    return t


@dataclass(frozen=True)
class ColumnStats:
    """What the log knows of one column in every file; arrays are aligned with the file table."""
    type: Any                 # the column's Delta type
    min: Bounds               # lower bounds of non-null values; null = unknown
    max: Bounds               # upper bounds; null = unknown
    may_null: np.ndarray      # some value may be NULL
    all_null: np.ndarray      # every value is NULL (or the file has no rows)
    exact: np.ndarray         # min and max are values that occur, not widened bounds
    null_count: np.ndarray | None = None   # NULLs per file as float64 (NaN: unknown); data columns only


class StatsTable:
    """Typed stats of the files of one snapshot, built lazily per column and cached."""

    def __init__(self, files: pa.Table, schema: Schema, partition_columns: Sequence[str],
                 typed: TypedStats | None = None, typed_head: int = 0, deferred: DeferredStats | None = None) -> None:
        """Stats of the snapshot's file rows `files`; `typed`, a checkpoint's typed stats, is read
        instead of the JSON stats for the files it covers. The first `typed_head` files are the
        checkpoint's adds in its order (Snapshot.checkpoint_head): typed stats of as many rows
        are theirs, row for row, with no lookup by path. `deferred`: where the JSON stats of
        leading rows left unread at load are (Snapshot.deferred_stats)."""
        self.files = files
        self.typed = typed  # a checkpoint's typed stats, or None
        self.typed_head = typed_head
        self.deferred = deferred
        self.schema = schema
        self.partition_columns = list(partition_columns)
        self._parts_lower = {p.lower(): p for p in partition_columns}
        self._columns: dict[str, ColumnStats] = {}
        self._num_records: np.ndarray | None = None
        self._partition_ids: np.ndarray | None = None
        self._partition_keys: list[tuple[str | None, ...]] | None = None
        self._bucket_ids: np.ndarray | None = None

    @property
    def num_files(self) -> int:
        """The number of files."""
        return self.files.num_rows

    @property
    def bucket_ids(self) -> np.ndarray:
        """Each file's bucket id from its tags; -1 for a file that has none."""
        if self._bucket_ids is None:
            self._bucket_ids = file_bucket_ids(self.files)
        return self._bucket_ids

    # ---------------------------------------------------------------- partitions

    def _partitions(self) -> None:
        """Number the distinct partitions: `partition_ids[i]` indexes `partition_keys`."""
        n = self.num_files
        if not self.partition_columns or n == 0:
            self._partition_ids = np.zeros(n, dtype=np.int64)
            self._partition_keys = [()] if n else []
            return
        encoded = pc.dictionary_encode(self._partition_tuples(self.files)).combine_chunks()
        self._partition_ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        several = len(self.partition_columns) > 1
        self._partition_keys = [
            tuple(None if v == _NULL_KEY else v for v in (key.split(_SEP) if several else [key]))
            for key in encoded.dictionary.to_pylist()]

    def _partition_tuples(self, files: pa.Table) -> pa.ChunkedArray:
        """Each file's partition values as one string (NULL spelled as _NULL_KEY)."""
        pv = files.column("partitionValues")
        cols = [pc.fill_null(map_value(pv, c), _NULL_KEY) for c in self.partition_columns]
        return cols[0] if len(cols) == 1 else pc.binary_join_element_wise(*cols, _SEP)

    def partition_count(self, mask: np.ndarray | None = None) -> int:
        """How many distinct partitions the files of `mask` (None: all files) are in; 0 for an
        unpartitioned table. A scan's report needs the count only: unless the files' partitions
        are numbered already, it is counted from the selected files' values, never by numbering
        every file of the table (about half a second of a plan at ten million files)."""
        if not self.partition_columns or self.num_files == 0:
            return 0
        if self._partition_ids is not None:
            if mask is None:
                return len(self.partition_keys)
            return int(np.count_nonzero(np.bincount(self._partition_ids[mask], minlength=1)))
        files = self.files if mask is None else self.files.filter(pa.array(mask))
        return int(pc.count_distinct(self._partition_tuples(files), mode="all").as_py()) if files.num_rows else 0

    @property
    def partition_ids(self) -> np.ndarray:
        """Each file's partition, as an index into partition_keys (all 0 for an unpartitioned table)."""
        if self._partition_ids is None:
            self._partitions()
        assert self._partition_ids is not None
        return self._partition_ids

    @property
    def partition_keys(self) -> list[tuple[str | None, ...]]:
        """The distinct partitions' values as the log writes them (None for NULL), in the order of
        partition_columns; [()] for an unpartitioned table with files."""
        if self._partition_keys is None:
            self._partitions()
        assert self._partition_keys is not None
        return self._partition_keys

    def _partition_column(self, name: str) -> ColumnStats:
        type_ = self.schema.field(name).type
        position = self.partition_columns.index(name)
        values = [parse_partition_value(k[position], type_) for k in self.partition_keys]
        nan = [is_no_bound(v) for v in values]
        at = arrow_type(type_)
        n = self.num_files
        ids = pa.array(self.partition_ids)
        typed = _safe_array([None if b else v for v, b in zip(values, nan)], at) if at is not None else None
        if typed is None or (typed.null_count > sum(v is None or b for v, b in zip(values, nan))):
            return self._nullness_only(type_, at, values, ids)
        value = typed.take(ids) if n else typed
        is_nan = np.asarray(pa.array(nan, pa.bool_()).take(ids)) if n else np.zeros(0, bool)
        is_null = np.asarray(value.is_null()) & ~is_nan if n else np.zeros(0, dtype=bool)
        return ColumnStats(type_, value, value, is_null, is_null.copy(), ~is_nan)

    def _nullness_only(self, type_: Any, at: pa.DataType | None, values: list[Any], ids: pa.Array) -> ColumnStats:
        """A partition column of a type the evaluators cannot compare (`at`, its Arrow type, is
        None), or whose values would not convert: only which files' value is NULL is known."""
        n = self.num_files
        is_null = np.asarray(pa.array([v is None for v in values], pa.bool_()).take(ids)) if n else np.zeros(0, bool)
        nulls = pa.nulls(n, type=at or pa.null())
        return ColumnStats(type_, nulls, nulls, is_null.copy(), is_null, np.zeros(n, bool))

    # ---------------------------------------------------------------- data columns

    @property
    def num_records(self) -> np.ndarray:
        """numRecords per file as float64 (NaN = unknown)."""
        if self._num_records is None:
            self._parse([])
        assert self._num_records is not None
        return self._num_records

    def column(self, name: str) -> ColumnStats:
        """Stats of column `name` (the schema's spelling) for every file."""
        got = self._columns.get(name)
        if got is None:
            self.prepare([name])
            got = self._columns[name]
        return got

    def prepare(self, names: Sequence[str]) -> None:
        """Parse the stats of all of `names` not yet parsed in one pass over the JSON."""
        todo = []
        for name in dict.fromkeys(names):
            if name in self._columns:
                continue
            if name.lower() in self._parts_lower:
                self._columns[name] = self._partition_column(self._parts_lower[name.lower()])
            elif not is_primitive(self.schema.field(name).type) or arrow_type(self.schema.field(name).type) is None:
                self._columns[name] = self._unknown(name)
            else:
                todo.append(name)
        if todo or self._num_records is None:
            self._parse(todo)

    def _unknown(self, name: str) -> ColumnStats:
        n = self.num_files
        nulls = pa.nulls(n)
        return ColumnStats(self.schema.field(name).type, nulls, nulls, np.ones(n, bool), np.zeros(n, bool),
                           np.zeros(n, bool))

    def _parse(self, names: list[str]) -> None:
        parsed = self._from_typed(names) if self.typed is not None else None
        records, columns = parsed if parsed is not None else self._parse_json(names)
        self._num_records = records
        for name, (lo, hi, nulls) in columns.items():
            self._columns[name] = self._finish(name, lo, hi, nulls, records)

    def _parse_json(self, names: list[str]) -> Parsed:
        try:
            return self._parse_arrow(names)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            # Stats another writer spelled in a way the typed reader refuses (a NaN, a
            # decimal with more digits than its scale): parse them one file at a time.
            return self._parse_python(names)

    def _from_typed(self, names: list[str]) -> Parsed | None:
        """The stats of the files the checkpoint's typed stats cover, read from them; the JSON of
        the others (files added since) parsed. None when the typed stats lack a column."""
        keys = self._typed_keys(names)
        if keys is None:
            return None
        found, chosen = self._typed_rows(sorted(set(keys.values())))
        if not found.any():
            return None
        columns: dict[str, tuple[Bounds, Bounds, Bounds]] = {}
        for name in names:
            got = self._typed_column(chosen, name, keys[name])
            if got is None:
                return None
            columns[name] = got
        records = pc.struct_field(chosen, "numRecords").to_numpy(zero_copy_only=False).astype(np.float64)
        if found.all():
            return records, columns
        return self._with_the_rest(names, found, records, columns)

    def _typed_keys(self, names: list[str]) -> dict[str, str] | None:
        """Each column's key in the typed stats (its name, or its physical name), or None when
        one is missing or of a type planning does not compare."""
        assert self.typed is not None
        keys = {}
        for name in names:
            field = self.schema.field(name)
            key = next((k for k in (name, field.metadata.get(PHYSICAL_NAME)) if k and k in self.typed.fields), None)
            if key is None or arrow_type(field.type) is None:
                return None
            keys[name] = key
        return keys

    def _typed_rows(self, keys: list[str]) -> tuple[np.ndarray, pa.ChunkedArray]:
        """(which files have typed stats, those stats in file order). A file whose typed stats
        are null has none: its JSON decides."""
        assert self.typed is not None
        n = self.num_files
        typed = self.typed.read(keys)
        if 0 < len(typed) == self.typed_head <= n:
            found = np.zeros(n, dtype=bool)
            found[:self.typed_head] = True
            chosen = typed
        elif self.deferred is not None and self.deferred.typed is self.typed:
            # The leading rows are checkpoint adds whose rows the load kept track of.
            found = np.zeros(n, dtype=bool)
            found[:len(self.deferred.rows)] = True
            chosen = typed.take(pa.array(self.deferred.rows))
        else:
            at = self._positions(self.typed.paths())
            found = _bools(at.is_valid())
            rows = at.filter(pa.array(found))
            chosen = typed.take(rows)
        if chosen.null_count:
            valid = _bools(chosen.is_valid())
            found[np.flatnonzero(found)[~valid]] = False
            chosen = chosen.filter(pa.array(valid))
        return found, chosen

    def _with_the_rest(self, names: list[str], found: np.ndarray, records: np.ndarray,
                       columns: dict[str, tuple[Bounds, Bounds, Bounds]]
                       ) -> Parsed:
        """The typed stats of the `found` files and the parsed JSON of the others (files added
        after the checkpoint), merged back into file order."""
        rest = StatsTable(self._with_json(~found), self.schema, self.partition_columns)
        rest_records, rest_columns = rest._parse_json(names)
        merged = {name: tuple(pa.chunked_array([*_chunks(a), *_chunks(b)], a.type)
                              for a, b in zip(columns[name], rest_columns[name])) for name in names}
        all_records = np.concatenate([records, rest_records])
        k = int(found.sum())
        if found[:k].all():   # the checkpoint's files first, the newer after them: no reordering
            return all_records, merged
        order = np.concatenate([np.flatnonzero(found), np.flatnonzero(~found)])
        assert len(order) == self.num_files
        back = np.argsort(order, kind="stable")
        at = pa.array(back)
        return all_records[back], {name: tuple(c.take(at) for c in cs) for name, cs in merged.items()}

    def _with_json(self, which: np.ndarray) -> pa.Table:
        """The files `which` selects, with their JSON stats (read in where the load left them)."""
        if self.deferred is None or not which[:len(self.deferred.rows)].any():
            return self.files.filter(pa.array(which))
        return self.deferred.fill(self.files, which)

    def _json_stats(self) -> pa.ChunkedArray:
        """Every file's JSON stats (read in where the load left them)."""
        if self.deferred is None:
            return self.files.column("stats")
        return self.deferred.column(self.files)

    def _positions(self, typed_paths: pa.Array) -> pa.Array:
        """For each file, the row of its typed stats (null: none)."""
        at = pc.index_in(self.files.column("path"), value_set=typed_paths)
        return at.combine_chunks() if isinstance(at, pa.ChunkedArray) else at

    def _typed_column(self, stats: pa.ChunkedArray, name: str, key: str
                      ) -> tuple[Bounds, Bounds, Bounds] | None:
        """(min, max, null count) of column `name` from typed stats, in the types planning compares."""
        target = arrow_type(self.schema.field(name).type)
        mins, maxs, nulls = (pc.struct_field(stats, k) for k in ("minValues", "maxValues", "nullCount"))
        out = []
        for part in (mins, maxs):
            values = pc.struct_field(part, key)
            if pa.types.is_timestamp(values.type) and values.type.tz is not None:
                values = values.cast(pa.timestamp(values.type.unit))
            try:
                out.append(values.cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        return out[0], out[1], pc.struct_field(nulls, key).cast(pa.int64())

    def _parse_arrow(self, names: list[str]) -> Parsed:
        n = self.num_files
        if n == 0:  # typed, as the string and timestamp adjustments of _finish need
            empty = {name: pa.nulls(0, arrow_type(self.schema.field(name).type) or pa.null()) for name in names}
            return np.zeros(0), {name: (empty[name], empty[name], pa.nulls(0, pa.int64())) for name in names}
        types = {name: self.schema.field(name).type for name in names}
        fields = [("numRecords", pa.int64())]
        if names:
            fields += [
                ("minValues", pa.struct([(nm, _json_type(t)) for nm, t in types.items()])),
                ("maxValues", pa.struct([(nm, _json_type(t)) for nm, t in types.items()])),
                ("nullCount", pa.struct([(nm, pa.int64()) for nm in names])),
            ]
        table = read_json_column(self._json_stats(), pa.schema(fields))
        records = table.column("numRecords").to_numpy(zero_copy_only=False).astype(np.float64)
        out: dict[str, tuple[pa.Array, pa.Array, pa.Array]] = {}
        if names:
            mins = table.column("minValues").combine_chunks()
            maxs = table.column("maxValues").combine_chunks()
            nulls = table.column("nullCount").combine_chunks()
            for name, t in types.items():
                lo = _typed(_field(mins, name), t)
                hi = _typed(_field(maxs, name), t)
                out[name] = (lo, hi, _field(nulls, name))
        return np.nan_to_num(records, nan=np.nan), out

    def _parse_python(self, names: list[str]) -> Parsed:
        records: list[float] = []
        cols: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name in names}
        for text in self._json_stats().to_pylist():
            stats = _stats_object(text)
            nr = stats.get("numRecords")
            records.append(float(nr) if isinstance(nr, int) else np.nan)
            mins, maxs, nulls = (_object(stats.get(k)) for k in ("minValues", "maxValues", "nullCount"))
            for name in names:
                t = self.schema.field(name).type
                lo_l, hi_l, nc_l = cols[name]
                lo_l.append(stat_value(mins.get(name), t))
                hi_l.append(stat_value(maxs.get(name), t))
                nc = nulls.get(name)
                nc_l.append(nc if isinstance(nc, int) else None)
        out = {}
        for name, (lo_l, hi_l, nc_l) in cols.items():
            at = arrow_type(self.schema.field(name).type)
            out[name] = (_safe_array(lo_l, at), _safe_array(hi_l, at), pa.array(nc_l, pa.int64()))
        return np.asarray(records, dtype=np.float64), out

    def _finish(self, name: str, lo: Bounds, hi: Bounds, null_count: Bounds, records: np.ndarray) -> ColumnStats:
        field = self.schema.field(name)
        lo, hi, exact = bound_arrays(field, lo, hi)
        nc = null_count.to_numpy(zero_copy_only=False).astype(np.float64) if self.num_files else np.zeros(0)
        may_null, all_null, empty = null_fact_arrays(nc, records)
        return ColumnStats(field.type, lo, hi, may_null, all_null, exact | empty, nc)


def _chunks(values: Bounds) -> list[pa.Array]:
    """The arrays of `values`, chunked or not."""
    return values.chunks if isinstance(values, pa.ChunkedArray) else [values]


def _bools(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An Arrow boolean array without nulls as a NumPy one."""
    return mask.cast(pa.uint8()).to_numpy(zero_copy_only=False).astype(bool)


def _field(struct: pa.Array, name: str) -> pa.Array:
    """A field of a struct array, null where the struct itself is null."""
    if struct.null_count == len(struct):
        return pa.nulls(len(struct), type=struct.type.field(name).type)
    child = pc.struct_field(struct, name)
    return child


def _typed(values: pa.Array, type_: Any) -> pa.Array:
    target = arrow_type(type_)
    assert target is not None
    if values.type == target:
        return values
    if type_ == "date":
        # Dates may be written with a time part by some writers: the first 10 characters are the day.
        return pc.cast(pc.utf8_slice_codeunits(values, 0, 10), pa.date32())
    if type_ == "timestamp":
        # Written as UTC with a 'Z'; a string without a zone makes the cast fail, and the caller
        # falls back to parsing file by file.
        return pc.cast(pc.cast(values, pa.timestamp("us", "UTC")), pa.timestamp("us"))
    return pc.cast(values, target)


def _safe_array(values: list, type_: pa.DataType | None) -> pa.Array:
    try:
        return pa.array(values, type=type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.nulls(len(values), type=type_ or pa.null())


def _stats_object(text: str | None) -> dict:
    """A file's stats as the log holds them; unreadable stats (not a JSON object) are no stats: the
    file is then never skipped by them, which costs pruning and never rows."""
    if not text:
        return {}
    try:
        stats = json.loads(text, parse_float=Decimal)
    except ValueError:
        return {}
    return stats if isinstance(stats, dict) else {}


def _object(value: object) -> dict:
    return value if isinstance(value, dict) else {}
