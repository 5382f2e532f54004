"""Row-level concurrency: two commits that mark different rows of one file both commit.

With deletion vectors a DELETE, UPDATE or MERGE changes a file by logging it again under the
same path with a larger DV: remove(F, d0) and add(F, d1). Two such commits on F conflict at
file level (each removes F). They conflict at row level only when the rows they newly mark,
d1 \\ d0 for each, intersect: both changed the same row. Otherwise the one that loses the race
is rebased on the winner: its DV for F becomes the union of the winner's DV and its own new
rows (written as a new DV file), its remove names the winner's (F, DV), and it commits.

A file one side removed outright (rewritten, wholly deleted, compacted) keeps the file-level
rule: the other side's change of that file conflicts. This module only decides and rewrites;
skiplake.txn.conflicts applies it when both commits are row-level changes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from skiplake.log.actions import Action, AddFile, RemoveFile
from skiplake.log.deletion_vectors import marked_rows, unique_id, write_dv_file


@dataclass(frozen=True)
class MarkedByBoth:
    """A file both commits marked: the loser's remove and add of it, and the winner's."""
    path: str
    ours_removed: RemoveFile
    ours_added: AddFile | None
    theirs_removed: RemoveFile
    theirs_added: AddFile | None


def marked_paths(actions: list[Action]) -> dict[str, tuple[RemoveFile, AddFile | None]]:
    """Each path a commit removes, with the add of the same path it logs (a DV change) or None."""
    removes = {a.path: a for a in actions if isinstance(a, RemoveFile)}
    adds = {a.path: a for a in actions if isinstance(a, AddFile) and a.path in removes}
    return {p: (r, adds.get(p)) for p, r in removes.items()}


def is_row_change(removed: RemoveFile, added: AddFile | None) -> bool:
    """A remove and re-add of one path with a new deletion vector: rows marked, file kept."""
    return added is not None and added.deletionVector is not None and \
        unique_id(added.deletionVector) != unique_id(removed.deletionVector)


def rebase(table_path: str, both_marked: list[MarkedByBoth], actions: list[Action],
           conflict: Callable[[str, int], None]) -> list[Action]:
    """`actions` rebased on the winner's marks of the same files; `conflict(path, rows)` raises
    when both marked some of the same rows (it is called with the first such file)."""
    replaced: dict[int, Action | None] = {}
    bitmaps: list[np.ndarray] = []
    pending: list[MarkedByBoth] = []
    for m in both_marked:
        assert m.ours_added is not None and m.theirs_added is not None
        base = marked_rows(table_path, m.ours_removed.deletionVector)
        ours_new = np.setdiff1d(marked_rows(table_path, m.ours_added.deletionVector), base)
        theirs = marked_rows(table_path, m.theirs_added.deletionVector)
        both = np.intersect1d(ours_new, np.setdiff1d(theirs, base))
        if len(both):
            conflict(m.path, len(both))
        bitmaps.append(np.union1d(theirs, ours_new).astype(np.uint64))
        pending.append(m)
    descriptors = write_dv_file(table_path, bitmaps) if pending else []
    for m, union, dv in zip(pending, bitmaps, descriptors):
        assert m.theirs_added is not None and m.ours_added is not None
        physical = m.theirs_added.num_records
        new_remove = m.theirs_added.remove(m.ours_removed.deletionTimestamp)
        replaced[id(m.ours_removed)] = new_remove
        if physical is not None and len(union) >= physical:
            replaced[id(m.ours_added)] = None  # every row is gone: the file is removed
        else:
            replaced[id(m.ours_added)] = replace(m.theirs_added, dataChange=True, deletionVector=dv.to_json())
    out: list[Action] = []
    for a in actions:
        if id(a) in replaced:
            new = replaced[id(a)]
            if new is not None:
                out.append(new)
        else:
            out.append(a)
    return out
