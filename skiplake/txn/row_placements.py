"""Compactions that keep row-level changes: where each input's rows went, and rebasing on it.

On a table with deletion vectors, skiplake's bin-packing OPTIMIZE writes each output file from a
known list of inputs, in order: the rows the first input held when OPTIMIZE read it (its live
rows, by row index), then the second's, and so on. The list goes into the output's add, in the
tag COMPACTED_FROM, with each input's DV as OPTIMIZE read it and how many rows it gave. Row r of
input F then sits at a known position of the output, so a DELETE, UPDATE or MERGE that changes
rows of F while OPTIMIZE runs commits, and so does the OPTIMIZE, whichever of them wins:

- OPTIMIZE won: the DML's new marks of F become marks of the output (a DV on it); a DML that
  rewrote or removed F whole marks every row of F in the output (its new file holds the rows it
  keeps, changed).
- The DML won: OPTIMIZE's output gets a DV marking the rows the DML newly marked in F (every row
  of F if it removed F whole), and OPTIMIZE's remove of F names the DML's (F, DV).

Either way no deletion is lost and no deleted row comes back. A compaction that reorders rows
(Z-order, clustering, the bucketed writer, delta-spark's OPTIMIZE) cannot say where they went by
order; on a table with row tracking it need not: each output holds its rows' ids in the
materialized row id column, so an input's row is found in the outputs by its id (RowIdPlacement).
Two compactions of one file still conflict, and so does any input whose DV went back in time
(never in one log: a file's DV only grows).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skiplake.log.actions import Action, AddFile, RemoveFile
from skiplake.log.deletion_vectors import marked_rows, write_dv_file
from skiplake.log.paths import absolute_path
from skiplake.log.stats import loose_bounds
from skiplake.log.storage_for import parquet_source
from skiplake.txn.isolation import is_rearrangement
from skiplake.txn.row_level import is_row_change, marked_paths

COMPACTED_FROM = "skiplake.compactedFrom"

# conflict(path, rows): raise for a file both commits changed (rows: how many of the same rows; 0
# when the file's history rules out mapping it, e.g. compacted by both).
Conflict = Callable[[str, int], None]


@dataclass(frozen=True)
class Placement:
    """Where one input's rows went: `rows` rows into `output` (a log path) from `offset`, the
    rows the input's `dv` did not mark when the compaction read it, in row-index order."""
    output: str
    offset: int
    rows: int
    dv: dict[str, Any] | None

    def physical_rows(self, table_path: str, read: np.ndarray) -> int:
        """The input's physical rows (`read`: the rows its DV marked when the compaction read it)."""
        return self.rows + len(read)

    def locate(self, table_path: str, read: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The output positions of the input's physical `rows`, by output; ValueError when one
        of them was not live when the compaction read the input."""
        return {self.output: _ranked(self, read, rows)}


class _OutputIds:
    """The row ids of a compaction's outputs, read from their files once, when first needed."""

    def __init__(self, table_path: str, outputs: list[AddFile], column: str) -> None:
        self.table_path, self.outputs, self.column = table_path, outputs, column
        self._sorted: np.ndarray | None = None
        self.inputs: dict[str, np.ndarray] = {}   # the inputs' row ids, as RowIdPlacement reads them

    def _load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._sorted is None:
            ids = [file_row_ids(self.table_path, f.path, f.size, f.baseRowId, self.column) for f in self.outputs]
            every = np.concatenate(ids) if ids else np.zeros(0, np.int64)
            self._order = np.argsort(every, kind="stable")
            self._sorted = every[self._order]
            self._file_of = np.repeat(np.arange(len(ids)), [len(i) for i in ids])
            self._starts = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
        return self._sorted, self._order, self._file_of, self._starts

    def locate(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        ordered, order, file_of, starts = self._load()
        at = np.searchsorted(ordered, ids)
        if len(ids) and (at.max() >= len(ordered) or not np.array_equal(ordered[at], ids)):
            raise ValueError("rows the compaction did not write")
        where = order[at]
        files = file_of[where]
        return {self.outputs[i].path: np.sort(where[files == i] - starts[i]).astype(np.uint64)
                for i in np.unique(files)}


@dataclass(frozen=True, eq=False)
class RowIdPlacement:
    """Where one input's rows went in a compaction that kept their row ids: wherever the
    outputs hold their ids. `dv` is the input's DV when the compaction read it."""
    path: str
    size: int | None            # (optional in a remove: then looked up)
    base_row_id: int | None
    dv: dict[str, Any] | None
    outputs: _OutputIds

    def _ids(self, table_path: str) -> np.ndarray:
        # Read once: a removed input needs its row count and then its rows' ids.
        if self.path not in self.outputs.inputs:
            self.outputs.inputs[self.path] = file_row_ids(table_path, self.path, self.size, self.base_row_id,
                                                          self.outputs.column)
        return self.outputs.inputs[self.path]

    def physical_rows(self, table_path: str, read: np.ndarray) -> int:
        """The input's physical rows: as many as its row ids (`read` is not needed)."""
        return len(self._ids(table_path))

    def locate(self, table_path: str, read: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The output positions of the input's physical `rows`, by output, found by their row ids;
        ValueError when one was deleted when the compaction read it (in `read`) or is past its rows."""
        rows = np.unique(rows.astype(np.uint64))
        ids = self._ids(table_path)
        if len(np.intersect1d(rows, read)) or (len(rows) and int(rows[-1]) >= len(ids)):
            raise ValueError("rows the compaction had already seen deleted, or past the input's rows")
        return self.outputs.locate(ids[rows.astype(np.int64)])


def file_row_ids(table_path: str, path: str, size: int | None, base_row_id: int | None,
                 column: str) -> np.ndarray:
    """Each row's id: the materialized id where the file holds one, else `base_row_id` plus the
    row's index (-1, which no row has, without a base)."""
    f = pq.ParquetFile(parquet_source(absolute_path(table_path, path), size))
    n = f.metadata.num_rows
    fallback = np.arange(n, dtype=np.int64) + base_row_id if base_row_id is not None else np.full(n, -1, np.int64)
    if column not in f.schema_arrow.names:
        return fallback
    own = f.read(columns=[column]).column(0).combine_chunks()
    values = pc.fill_null(own, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(own.is_null().to_numpy(zero_copy_only=False), fallback, values)


def compacted_tag(inputs: list[tuple[AddFile, int]]) -> str:
    """COMPACTED_FROM's value for an output written from `inputs` (file, live rows), in order."""
    return json.dumps([{"path": f.path, "rows": rows, **({"deletionVector": f.deletionVector}
                                                         if f.deletionVector else {})}
                       for f, rows in inputs], separators=(",", ":"))


AnyPlacement = Placement | RowIdPlacement


def placements(actions: list[Action], table_path: str = "", row_id_column: str | None = None
               ) -> dict[str, AnyPlacement]:
    """Each compacted input of a commit (log path) and where its rows went: by the order its
    outputs' tags record, or, for a compaction on a table whose rewrites keep row ids in
    `row_id_column`, by those ids. Empty for a commit that compacted nothing either way."""
    out: dict[str, AnyPlacement] = {}
    if row_id_column is not None and is_rearrangement(actions):
        outputs = _OutputIds(table_path, [a for a in actions if isinstance(a, AddFile)], row_id_column)
        for a in actions:
            if isinstance(a, RemoveFile):
                out[a.path] = RowIdPlacement(a.path, a.size, a.baseRowId, a.deletionVector, outputs)
    for a in actions:
        if not isinstance(a, AddFile) or a.dataChange or not a.tags or COMPACTED_FROM not in a.tags:
            continue
        listed = a.tags[COMPACTED_FROM]
        if listed is None:
            continue  # a null tag (as the log may hold one) is no list skiplake wrote either
        try:
            offset = 0
            for entry in json.loads(listed):
                rows = int(entry["rows"])
                out[str(entry["path"])] = Placement(a.path, offset, rows, entry.get("deletionVector"))
                offset += rows
        except (ValueError, KeyError, TypeError):
            continue  # not a list skiplake wrote: the file-level rules apply to its inputs
    return out


def positions(table_path: str, placement: Placement, rows: np.ndarray | None) -> np.ndarray:
    """The output's row positions of an input's physical `rows` (None: all it gave); ValueError
    when one of them was not live when the compaction read the input."""
    if rows is None:
        return np.arange(placement.offset, placement.offset + placement.rows, dtype=np.uint64)
    return _ranked(placement, marked_rows(table_path, placement.dv), rows)


def _ranked(placement: Placement, read: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`positions` of `rows`, given the rows the compaction saw deleted (`read`)."""
    rows = np.unique(rows.astype(np.uint64))
    if len(np.intersect1d(rows, read)):
        raise ValueError("rows the compaction had already seen deleted")
    # A live row's rank among the live rows: its index less the deleted rows before it.
    rank = rows.astype(np.int64) - np.searchsorted(read, rows).astype(np.int64)
    if len(rank) and int(rank[-1]) >= placement.rows:
        raise ValueError("rows past those the compaction wrote")
    return (placement.offset + rank).astype(np.uint64)


def _moved_rows(table_path: str, path: str, place: AnyPlacement, removed: RemoveFile, added: AddFile | None,
                conflict: Conflict) -> dict[str, np.ndarray]:
    """The output positions (by output) of the rows a commit changed in a compacted input (remove and
    re-add, or remove alone); `conflict` when they cannot be placed: the input was rewritten
    under its own name, or its DV is older than the one the compaction read.

    The rows it changed are its DV's new marks, or (when it removed the file whole) every row
    live under the DV it removed. Rows deleted after the compaction read the input were live
    then, and are marked in the output already: they are not new."""
    if added is not None and not is_row_change(removed, added):
        conflict(path, 0)
    read = marked_rows(table_path, place.dv)
    before = marked_rows(table_path, removed.deletionVector)
    if not np.isin(read, before).all():
        conflict(path, 0)  # a DV of the input that lacks marks the compaction saw
    if added is not None:
        new = np.setdiff1d(marked_rows(table_path, added.deletionVector), before)
    else:
        new = np.setdiff1d(np.arange(place.physical_rows(table_path, read), dtype=np.uint64), before)
    try:
        return place.locate(table_path, read, new)
    except ValueError:  # (a storage error is not a conflict: it goes up as it is)
        conflict(path, 0)
        raise


def _marked(table_path: str, output: AddFile, new: list[np.ndarray], conflict: Conflict,
            data_change: bool) -> AddFile | None:
    """`output` with `new` positions marked too (None when no row is left); `conflict` when a
    position was marked already."""
    old = marked_rows(table_path, output.deletionVector)
    fresh = np.unique(np.concatenate(new)).astype(np.uint64)
    both = np.intersect1d(old, fresh)
    if len(both):
        conflict(output.path, len(both))
    union = np.union1d(old, fresh).astype(np.uint64)
    physical = output.num_records
    if physical is not None and len(union) >= physical:
        return None
    [dv] = write_dv_file(table_path, [union])
    return replace(output, dataChange=data_change, stats=loose_bounds(output.stats), deletionVector=dv.to_json())


def rebase_onto_compaction(table_path: str, moved: dict[str, AnyPlacement], winner: list[Action],
                           actions: list[Action], conflict: Conflict) -> list[Action]:
    """A DML's `actions` after a compaction (`moved`, the winner's placements) took the files it
    changed: its changes of each such file become marks of the file's rows in the outputs."""
    ours = marked_paths(actions)
    outputs = {a.path: a for a in winner if isinstance(a, AddFile)}
    dropped: set[int] = set()
    new: dict[str, list[np.ndarray]] = {}
    for path in sorted(set(ours) & set(moved)):
        removed, added = ours[path]
        for output, rows in _moved_rows(table_path, path, moved[path], removed, added, conflict).items():
            new.setdefault(output, []).append(rows)
        dropped.update({id(removed), id(added)})
    out = [a for a in actions if id(a) not in dropped]
    for path, marks in new.items():
        if not sum(len(m) for m in marks):
            continue
        current = outputs[path]
        out.append(current.remove(data_change=True))
        changed = _marked(table_path, current, marks, conflict, data_change=True)
        if changed is not None:
            out.append(changed)
    return out


def rebase_compaction(table_path: str, moved: dict[str, AnyPlacement], winner: list[Action],
                      actions: list[Action], conflict: Conflict) -> list[Action]:
    """A compaction's `actions` (`moved`, its own placements) after a winner changed some of its
    inputs: each output marks the rows the winner newly changed, and each remove of such an
    input names the winner's file (or goes, when the winner removed it whole)."""
    theirs = marked_paths(winner)
    ours = {a.path: a for a in actions if isinstance(a, RemoveFile)}
    replaced: dict[int, Action | None] = {}
    new: dict[str, list[np.ndarray]] = {}
    for path in sorted(set(theirs) & set(moved)):
        their_remove, their_add = theirs[path]
        for output, rows in _moved_rows(table_path, path, moved[path], their_remove, their_add, conflict).items():
            new.setdefault(output, []).append(rows)
        mine = ours[path]
        replaced[id(mine)] = None if their_add is None else their_add.remove(mine.deletionTimestamp, data_change=False)
    for a in actions:
        if isinstance(a, AddFile) and sum(len(m) for m in new.get(a.path, ())) > 0:
            replaced[id(a)] = _marked(table_path, a, new[a.path], conflict, data_change=False)
    out: list[Action] = []
    for a in actions:
        if id(a) not in replaced:
            out.append(a)
        elif (b := replaced[id(a)]) is not None:
            out.append(b)
    return out
