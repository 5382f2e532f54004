"""The action columns of checkpoint Parquet files, read row group by row group, in parallel.

A checkpoint of millions of files is mostly add rows; every other action column (remove,
metaData, txn, ...) is null in them. Reading those columns anyway costs a buffer per leaf per
row (a gigabyte of nulls at 10M files), so each row group is read only for the actions its
footer statistics say it holds (a leaf's null count below the group's rows, or no statistics).
Row groups, and the files of a multi-part checkpoint or of sidecars, are read on a thread per
core: Arrow decodes without the GIL.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

# A leaf of each action column that every such action has: a row group whose leaf is all null
# holds none of the action.
PRESENCE_LEAF = {"add": "add.path", "remove": "remove.path", "metaData": "metaData.id",
                 "protocol": "protocol.minReaderVersion", "txn": "txn.appId",
                 "domainMetadata": "domainMetadata.domain", "sidecar": "sidecar.path"}
_ACTION_OF_LEAF = {leaf: action for action, leaf in PRESENCE_LEAF.items()}


@dataclass
class ParquetActions:
    """One Parquet file's action columns: for each action read, its chunks (one per row group that
    holds it, null rows included); and the file's whole schema."""
    schema: pa.Schema
    chunks: dict[str, list[pa.Array]] = field(default_factory=dict)

    def column(self, action: str) -> pa.ChunkedArray | None:
        """The action's column over the row groups that hold it; None when none does."""
        parts = self.chunks.get(action)
        return pa.chunked_array(parts) if parts else None


class ActionReadError(Exception):
    """Row group `group` of file number `index` does not read (`cause`: Arrow's error)."""

    def __init__(self, index: int, group: int, cause: Exception) -> None:
        """The error of reading row group `group` of file `index`."""
        super().__init__(f"row group {group}: {cause}")
        self.index, self.group, self.cause = index, group, cause


def read_actions(files: Sequence[bytes | pa.Buffer], opened: Sequence[pq.ParquetFile],
                 columns: Callable[[pa.Schema], list[str]], actions: frozenset[str] | None = None
                 ) -> list[ParquetActions]:
    """The action columns of each Parquet file (`files[i]`, its bytes; `opened[i]`, the file
    opened over them). `columns(schema)` names the columns to read (top-level actions, or
    `action.field` leaves); `actions`, when given, keeps only those actions. ActionReadError
    names a row group Arrow cannot read."""
    out = [ParquetActions(f.schema_arrow) for f in opened]
    jobs: list[tuple[int, int, list[str]]] = []
    for n, f in enumerate(opened):
        wanted = [c for c in columns(f.schema_arrow) if actions is None or c.split(".", 1)[0] in actions]
        for group in range(f.metadata.num_row_groups):
            held = _held(f.metadata.row_group(group))
            cols = [c for c in wanted if c.split(".", 1)[0] in held]
            if cols:
                jobs.append((n, group, cols))

    def read(job: tuple[int, int, list[str]]) -> tuple[int, pa.Table]:
        n, group, cols = job
        # A reader per job: one Arrow reader is not meant to serve several threads at once.
        try:
            reader = pq.ParquetFile(pa.BufferReader(files[n]), metadata=opened[n].metadata)
            return n, reader.read_row_group(group, columns=cols, use_threads=False)
        except (pa.ArrowException, OSError) as e:
            raise ActionReadError(n, group, e) from None

    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        for n, table in pool.map(read, jobs):
            for name in table.column_names:
                out[n].chunks.setdefault(name, []).extend(table.column(name).chunks)
    return out


def action_rows(footer: pq.FileMetaData, action: str) -> list[tuple[int, int]] | None:
    """(row group, how many of its rows hold `action`) for each group `read_actions` reads for
    it, by the presence leaf's null count; None when a footer does not say."""
    leaf = PRESENCE_LEAF[action]
    counts = []
    for group in range(footer.num_row_groups):
        meta = footer.row_group(group)
        column = next((meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == leaf), None)
        stats = column.statistics if column is not None else None
        if stats is None or not stats.has_null_count:
            return None
        if action in _held(meta):
            counts.append((group, meta.num_rows - stats.null_count))
    return counts


def _held(group: pq.RowGroupMetaData) -> set[str]:
    """The actions a row group may hold: those whose presence leaf is not null in every row (or
    has no statistics), and any column this module does not know."""
    held = set()
    seen = set()
    for i in range(group.num_columns):
        col = group.column(i)
        top = col.path_in_schema.split(".", 1)[0]
        action = _ACTION_OF_LEAF.get(col.path_in_schema)
        if action is None:
            if top not in PRESENCE_LEAF:
                held.add(top)
            continue
        seen.add(action)
        stats = col.statistics
        if stats is None or not stats.has_null_count or stats.null_count < group.num_rows:
            held.add(action)
    # An action whose presence leaf the file lacks (another writer's schema): read it.
    held |= {a for a in PRESENCE_LEAF if a not in seen}
    return held
