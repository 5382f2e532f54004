"""Scan planning: which files of a snapshot can hold rows matching a predicate, and a report of it.

The report speaks Spark's explain language (PartitionFilters, SelectedBucketsCount) so users
can read it the way they read a physical plan.
"""
from __future__ import annotations

import json
import weakref
from dataclasses import asdict, dataclass, field

import numpy as np

import pyarrow as pa

from skiplake.expr.bucket_eval import selected_buckets
from skiplake.expr.parse import bind
from skiplake.expr.stats_table import StatsTable
from skiplake.expr.tree import Node, columns_of, conjuncts, to_sql
from skiplake.expr.vector_eval import may_match_files
from skiplake.layout.bucket_spec import bucket_spec_of
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import Snapshot, add_files_from_arrow


@dataclass(frozen=True)
class ScanReport:
    table: str
    version: int
    predicate: str | None
    files_total: int
    files_selected: int
    bytes_total: int
    bytes_selected: int
    partitions_total: int
    partitions_selected: int
    buckets_total: int = 0
    buckets_selected: int = 0
    rows_total: int | None = None
    rows_selected: int | None = None
    partition_filters: list[str] = field(default_factory=list)
    data_filters: list[str] = field(default_factory=list)
    label: str = ""  # how a SQL query names this scan ("store_sales AS ss"); empty for table scans

    @property
    def files_skipped(self) -> int:
        return self.files_total - self.files_selected

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def text(self) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100.0 * (b - a) / b:.1f}% skipped" if b else "nothing to skip"
        lines = [
            f"Scan skiplake {self.label + ' ' if self.label else ''}{self.table} (version {self.version})",
            f"  PushedFilters: [{self.predicate or ''}]",
            f"  PartitionFilters: [{', '.join(self.partition_filters)}]",
            f"  DataFilters: [{', '.join(self.data_filters)}]",
            f"  SelectedFilesCount: {self.files_selected} out of {self.files_total} "
            f"({pct(self.files_selected, self.files_total)})",
            f"  SelectedBytes: {self.bytes_selected:,} out of {self.bytes_total:,} "
            f"({pct(self.bytes_selected, self.bytes_total)})",
        ]
        if self.partitions_total:
            lines.insert(4, f"  SelectedPartitionsCount: {self.partitions_selected} out of {self.partitions_total}")
        if self.buckets_total:
            lines.append(f"  SelectedBucketsCount: {self.buckets_selected} out of {self.buckets_total}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


class ScanPlan:
    """The files a scan must read (as the snapshot's Arrow rows), its report and bound predicate."""

    def __init__(self, selected: pa.Table, report: ScanReport, predicate: Node | None,
                 buckets: frozenset[int] | None = None) -> None:
        self.selected = selected
        self.report = report
        self.predicate = predicate
        self.buckets = buckets  # the buckets the predicate may select; None when not bucketed or all
        self._files: list[AddFile] | None = None

    @property
    def files(self) -> list[AddFile]:
        """The selected files as AddFile records (built on first use)."""
        if self._files is None:
            self._files = add_files_from_arrow(self.selected)
        return self._files


_STATS: dict[int, tuple[weakref.ref, StatsTable]] = {}


def stats_table(snapshot: Snapshot) -> StatsTable:
    """The snapshot's typed stats, built once per snapshot and dropped with it."""
    key = id(snapshot)
    entry = _STATS.get(key)
    if entry is not None and entry[0]() is snapshot:
        return entry[1]
    table = StatsTable(snapshot.files, snapshot.schema, snapshot.partition_columns)
    _STATS[key] = (weakref.ref(snapshot, lambda _ref, k=key: _STATS.pop(k, None)), table)
    return table


def _rows(records: np.ndarray) -> int | None:
    return None if np.isnan(records).any() else int(records.sum())


def split_filters(node: Node | None, partition_columns: list[str]) -> tuple[list[str], list[str]]:
    """The conjuncts of `node` on partition columns only, and the others, as SQL text."""
    lowered_parts = {p.lower() for p in partition_columns}
    partition_filters: list[str] = []
    data_filters: list[str] = []
    if node is not None:
        for c in conjuncts(node):
            on_parts = {n.lower() for n in columns_of(c)} <= lowered_parts
            (partition_filters if on_parts else data_filters).append(to_sql(c))
    return partition_filters, data_filters


def plan_scan(snapshot: Snapshot, where: str | Node | None = None) -> ScanPlan:
    """Select the files whose partition values and min/max/null stats say they may hold a row
    matching `where`, evaluating the predicate over all files at once."""
    node = bind(where, snapshot.schema) if isinstance(where, str) else where
    stats = stats_table(snapshot)
    table = snapshot.files
    parts = snapshot.partition_columns
    partition_filters, data_filters = split_filters(node, parts)
    spec = bucket_spec_of(snapshot.configuration)
    buckets = None
    if spec is not None:
        buckets = selected_buckets(node, spec.columns, [snapshot.schema.field(c).type for c in spec.columns],
                                   spec.num_buckets)
    if node is None or table.num_rows == 0:
        mask = np.ones(table.num_rows, dtype=bool)
    else:
        mask = may_match_files(node, stats)
        if buckets is not None:
            ids = stats.bucket_ids
            # A file without a bucket id (another writer's) may hold any bucket's rows.
            mask &= np.isin(ids, np.fromiter(buckets, dtype=np.int64, count=len(buckets))) | (ids < 0)
    selected = table if mask.all() else table.filter(pa.array(mask))
    sizes = table.column("size").to_numpy() if table.num_rows else np.zeros(0, np.int64)
    records = stats.num_records
    report = ScanReport(
        table=snapshot.table_path, version=snapshot.version,
        predicate=where if isinstance(where, str) else (to_sql(where) if where is not None else None),
        files_total=table.num_rows, files_selected=int(mask.sum()),
        bytes_total=int(sizes.sum()), bytes_selected=int(sizes[mask].sum()),
        partitions_total=len(stats.partition_keys) if parts else 0,
        partitions_selected=len(np.unique(stats.partition_ids[mask])) if parts else 0,
        buckets_total=spec.num_buckets if spec else 0,
        buckets_selected=(spec.num_buckets if buckets is None else len(buckets)) if spec else 0,
        rows_total=_rows(records), rows_selected=_rows(records[mask]),
        partition_filters=partition_filters, data_filters=data_filters,
    )
    return ScanPlan(selected, report, node, buckets)
