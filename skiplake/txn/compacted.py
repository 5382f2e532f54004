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

Either way no deletion is lost and no deleted row comes back. Delta's row tracking reaches the
same end by writing each row's id into the compacted file; skiplake records the order instead,
so files stay plain Parquet. Two compactions of one file still conflict, and so does any input
whose DV went back in time (never in one log: a file's DV only grows).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from skiplake.log.actions import Action, AddFile, RemoveFile
from skiplake.log.deletion_vectors import marked_rows, write_dv_file
from skiplake.log.stats import loose_bounds
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


def compacted_tag(inputs: list[tuple[AddFile, int]]) -> str:
    """COMPACTED_FROM's value for an output written from `inputs` (file, live rows), in order."""
    return json.dumps([{"path": f.path, "rows": rows, **({"deletionVector": f.deletionVector}
                                                         if f.deletionVector else {})}
                       for f, rows in inputs], separators=(",", ":"))


def placements(actions: list[Action]) -> dict[str, Placement]:
    """Each compacted input of a commit (log path) and where its rows went; empty for a commit
    that compacted nothing this way (a Z-order rewrite, another writer's OPTIMIZE)."""
    out: dict[str, Placement] = {}
    for a in actions:
        if not isinstance(a, AddFile) or a.dataChange or not a.tags or COMPACTED_FROM not in a.tags:
            continue
        try:
            offset = 0
            for entry in json.loads(a.tags[COMPACTED_FROM]):
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


def _moved_rows(table_path: str, path: str, place: Placement, removed: RemoveFile, added: AddFile | None,
                conflict: Conflict) -> np.ndarray:
    """The output positions of the rows a commit changed in a compacted input (remove and
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
        new = np.setdiff1d(np.arange(place.rows + len(read), dtype=np.uint64), before)  # physical rows
    try:
        return _ranked(place, read, new)
    except ValueError:
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


def rebase_onto_compaction(table_path: str, moved: dict[str, Placement], winner: list[Action],
                           actions: list[Action], conflict: Conflict) -> list[Action]:
    """A DML's `actions` after a compaction (`moved`, the winner's placements) took the files it
    changed: its changes of each such file become marks of the file's rows in the outputs."""
    ours = marked_paths(actions)
    outputs = {a.path: a for a in winner if isinstance(a, AddFile)}
    dropped: set[int] = set()
    new: dict[str, list[np.ndarray]] = {}
    for path in sorted(set(ours) & set(moved)):
        removed, added = ours[path]
        place = moved[path]
        new.setdefault(place.output, []).append(_moved_rows(table_path, path, place, removed, added, conflict))
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


def rebase_compaction(table_path: str, moved: dict[str, Placement], winner: list[Action],
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
        place = moved[path]
        new.setdefault(place.output, []).append(
            _moved_rows(table_path, path, place, their_remove, their_add, conflict))
        mine = ours[path]
        replaced[id(mine)] = None if their_add is None else their_add.remove(mine.deletionTimestamp, data_change=False)
    for a in actions:
        if isinstance(a, AddFile) and sum(len(m) for m in new.get(a.path, ())):
            replaced[id(a)] = _marked(table_path, a, new[a.path], conflict, data_change=False)
    out: list[Action] = []
    for a in actions:
        if id(a) not in replaced:
            out.append(a)
        elif (b := replaced[id(a)]) is not None:
            out.append(b)
    return out
