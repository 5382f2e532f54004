"""Exact answers to COUNT, MIN and MAX from the log's per-file stats, with no data read.

A file's stats answer an aggregate only when they are exact for it:

* the WHERE (if any) is TRUE on every row of the file, by its partition values and stats
  (a file where it is FALSE on every row is left out; any other file must be read);
* COUNT(*) needs the file's row count, less its deletion vector's cardinality;
* COUNT(col) needs the column's null count, and with a deletion vector a null count of 0
  (which deleted rows were NULL is not recorded);
* MIN(col) / MAX(col) need bounds that are values of the column (`ColumnStats.exact`: not a
  string cut to a prefix, not a timestamp rounded to milliseconds), no deletion vector, and a
  type whose order Spark and the stats agree on (not float or double, where NaN sorts last).

Files that fail any of these are the ones to read (`LogAggregation.scan`); the caller
aggregates them the usual way and merges the two partial results (`merge`). Groups are the
values of partition columns (GROUP BY partition columns only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.expr.tree import Node
from skiplake.expr.visitor import columns_of
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import Snapshot, add_files_from_arrow
from skiplake.log.values import parse_partition_value
from skiplake.skipping.columnar import evaluate_files
from skiplake.skipping.plan import stats_table
from skiplake.skipping.stats_table import ColumnStats, StatsTable

__all__ = ["Aggregate", "LogAggregation", "aggregate_from_log", "merge", "COUNT_ALL", "COUNT", "MIN", "MAX"]

COUNT_ALL, COUNT, MIN, MAX = "count(*)", "count", "min", "max"
_UNORDERED = ("float", "double")   # NaN is the largest value to Spark; stats leave it out


@dataclass(frozen=True)
class Aggregate:
    """One aggregate of the query: `kind` (COUNT_ALL, COUNT, MIN, MAX) over `column` (the
    schema's spelling; None for COUNT_ALL)."""
    kind: str
    column: str | None = None


@dataclass
class LogAggregation:
    """The stats' part of an aggregation: each group's partial values, and which files to read."""
    groups: dict[tuple, list[Any]]   # partition values (typed) -> one partial per aggregate
    from_stats: int                  # files answered by their stats
    excluded: int                    # files the WHERE rules out entirely
    scan: np.ndarray                 # which of the snapshot's files must be read

    def files_to_read(self, snapshot: Snapshot) -> list[AddFile]:
        """The snapshot's files the stats could not answer, as add actions."""
        return add_files_from_arrow(snapshot.files_with_stats(self.scan))


def aggregate_from_log(snapshot: Snapshot, aggregates: Sequence[Aggregate], group_by: Sequence[str],
                       where: Node | None) -> LogAggregation:
    """The aggregates grouped by the partition columns `group_by`, from the files whose stats
    answer them exactly; the other files that may hold matching rows are to be read."""
    stats = stats_table(snapshot)
    n = stats.num_files
    columns = sorted({a.column for a in aggregates if a.column} | (columns_of(where) if where is not None else set()))
    stats.prepare(columns)
    every, none = _decided(where, stats)
    records = stats.num_records
    deleted = _deleted_rows(snapshot.file_rows)
    answered = every & ~np.isnan(records)
    for a in aggregates:
        answered &= _answerable(a, stats, deleted)
    scan = ~none & ~answered
    partials = [_partials(a, stats, records, deleted, answered) for a in aggregates]
    ids, names = _groups(snapshot, stats, group_by)
    groups = _grouped(ids, names, partials, aggregates, answered) if answered.any() else {}
    return LogAggregation(groups, int(answered.sum()), int((none & ~answered).sum()) if n else 0, scan)


def merge(aggregates: Sequence[Aggregate], into: dict[tuple, list[Any]], key: tuple, values: Sequence[Any]) -> None:
    """Fold one group's partial values (from stats or from a scan) into `into`."""
    known = into.get(key)
    if known is None:
        into[key] = list(values)
        return
    for i, a in enumerate(aggregates):
        into[key][i] = _combined(a.kind, known[i], values[i])


def _combined(kind: str, a: Any, b: Any) -> Any:
    if kind in (COUNT_ALL, COUNT):
        return (a or 0) + (b or 0)
    if a is None or b is None:
        return b if a is None else a
    return min(a, b) if kind == MIN else max(a, b)


def _decided(where: Node | None, stats: StatsTable) -> tuple[np.ndarray, np.ndarray]:
    """(files whose every row the WHERE keeps, files none of whose rows it keeps)."""
    n = stats.num_files
    if where is None:
        return np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    masks = evaluate_files(where, stats)
    return masks.t & ~masks.f & ~masks.n, ~masks.t


def _deleted_rows(files: pa.Table) -> np.ndarray:
    """Rows each file's deletion vector deletes (0 without one)."""
    dv = files.column("deletionVector")
    if dv.null_count == len(dv):
        return np.zeros(len(dv), dtype=np.float64)
    cardinality = pc.struct_field(dv.combine_chunks(), "cardinality")
    return pc.fill_null(cardinality, 0).to_numpy(zero_copy_only=False).astype(np.float64)


def _null_counts(stats: StatsTable, column: str, records: np.ndarray) -> np.ndarray:
    col = stats.column(column)
    if col.null_count is not None:
        return col.null_count
    # A partition column: a file's value is NULL in all of its rows or in none.
    return np.where(col.all_null, records, 0.0)


def _answerable(a: Aggregate, stats: StatsTable, deleted: np.ndarray) -> np.ndarray:
    n = stats.num_files
    if a.kind == COUNT_ALL:
        return np.ones(n, dtype=bool)
    assert a.column is not None
    col = stats.column(a.column)
    if a.kind == COUNT:
        nulls = _null_counts(stats, a.column, stats.num_records)
        return ~np.isnan(nulls) & ((deleted == 0) | (nulls == 0))
    if col.type in _UNORDERED or not isinstance(col.type, str):
        return np.zeros(n, dtype=bool)
    bound = col.min if a.kind == MIN else col.max
    has_value = bound.is_valid().to_numpy(zero_copy_only=False)
    return (deleted == 0) & (col.all_null | (col.exact & has_value))


def _partials(a: Aggregate, stats: StatsTable, records: np.ndarray, deleted: np.ndarray,
              answered: np.ndarray) -> pa.Array:
    """Each file's partial value of `a` (only the answered files' are used)."""
    if a.kind == COUNT_ALL:
        return pa.array(np.where(answered, records - deleted, 0).astype(np.int64))
    assert a.column is not None
    if a.kind == COUNT:
        nulls = _null_counts(stats, a.column, records)
        live = records - np.nan_to_num(nulls) - deleted   # a file with a deletion vector has no NULLs here
        return pa.array(np.where(answered, live, 0).astype(np.int64))
    col: ColumnStats = stats.column(a.column)
    bound = col.min if a.kind == MIN else col.max
    # A file whose values are all NULL has no MIN or MAX to give.
    return pc.if_else(pa.array(col.all_null), pa.scalar(None, bound.type), bound)


def _groups(snapshot: Snapshot, stats: StatsTable, group_by: Sequence[str]) -> tuple[np.ndarray, list[tuple]]:
    """(each file's group as an index into the second, the groups: the typed values of the
    `group_by` partition columns), from the table's distinct partitions, not file by file."""
    if not group_by:
        return np.zeros(stats.num_files, dtype=np.int64), [()]
    positions = [snapshot.partition_columns.index(c) for c in group_by]
    types = [snapshot.schema.field(c).type for c in group_by]
    typed = [tuple(parse_partition_value(k[p], t) for p, t in zip(positions, types)) for k in stats.partition_keys]
    distinct = {k: i for i, k in enumerate(dict.fromkeys(typed))}
    of_partition = np.array([distinct[k] for k in typed], dtype=np.int64)
    return of_partition[stats.partition_ids] if stats.num_files else np.zeros(0, np.int64), list(distinct)


def _grouped(ids: np.ndarray, names: list[tuple], partials: list[pa.Array], aggregates: Sequence[Aggregate],
             answered: np.ndarray) -> dict[tuple, list[Any]]:
    """The answered files' partials folded by group (one Arrow group-by over all of them)."""
    table = pa.table({"g": pa.array(ids), **{f"a{i}": p for i, p in enumerate(partials)}}).filter(pa.array(answered))
    how = [(f"a{i}", "sum" if a.kind in (COUNT_ALL, COUNT) else a.kind) for i, a in enumerate(aggregates)]
    folded = table.group_by("g", use_threads=False).aggregate(how)
    out: dict[tuple, list[Any]] = {}
    for row in folded.to_pylist():
        out[names[row["g"]]] = [row[f"a{i}_{k}"] for i, (_, k) in enumerate(how)]
    return out
