"""A snapshot's JSON file stats left in its checkpoint until something needs them.

At millions of files the adds' `stats` strings are most of a checkpoint (3 of 4.5 GB of Arrow
at 10M files), and planning does not need them when the checkpoint has typed stats too
(`add.stats_parsed`). A load then reads the adds without them: the leading rows of the
snapshot's file table have null stats, and this records where each one's add sits in the
checkpoint, so that the strings can be read back for all of them (a checkpoint write, a change
of the table's stats) or for a few (the files a DELETE rewrites), from just the row groups
holding those.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from skiplake.log.checkpoint_read import TypedStats, still_there


@dataclass(frozen=True)
class DeferredStats:
    """The stats of the leading `len(rows)` rows of a snapshot's file table, unread: row i is
    the add at position `rows[i]` of the checkpoint's adds (the order TypedStats reads)."""
    typed: TypedStats
    rows: np.ndarray   # int64, increasing

    @staticmethod
    def of_checkpoint(typed: TypedStats, adds: int) -> "DeferredStats":
        """The stats of a checkpoint's `adds` add rows, as they were read: row i is add i."""
        return DeferredStats(typed, np.arange(adds, dtype=np.int64))

    def kept(self, keep: np.ndarray) -> "DeferredStats":
        """These stats after the file table's rows were filtered by `keep` (a mask over at least
        the deferred rows; later rows do not matter)."""
        return DeferredStats(self.typed, self.rows[keep[:len(self.rows)]])

    def column(self, files: pa.Table, which: np.ndarray | None = None) -> pa.ChunkedArray:
        """The `stats` column of `files` (a file table whose leading rows these stats are), of
        the rows the mask `which` selects (None: all), the deferred strings read in.
        CheckpointRemovedError when log cleanup has removed the checkpoint since the load."""
        with still_there(self.typed.storage, self.typed.names):
            return self._column(files, which)

    def _column(self, files: pa.Table, which: np.ndarray | None) -> pa.ChunkedArray:
        n = len(self.rows)
        own = files.column("stats").slice(n)
        if which is None:
            read = self.typed.json_stats()
            if len(read) != n or not np.array_equal(self.rows, np.arange(n)):
                read = read.take(pa.array(self.rows))
        else:
            lead = self.rows[which[:n]]
            read = self.typed.json_stats(lead) if len(lead) else pa.chunked_array([], pa.string())
            own = own.filter(pa.array(which[n:]))
        return pa.chunked_array([*read.chunks, *own.chunks], pa.string())

    def fill(self, files: pa.Table, which: np.ndarray | None = None) -> pa.Table:
        """`files` (of the rows `which` selects), with the deferred stats read in."""
        rows = files if which is None else files.filter(pa.array(which))
        at = rows.schema.get_field_index("stats")
        return rows.set_column(at, rows.schema.field(at), self.column(files, which))
