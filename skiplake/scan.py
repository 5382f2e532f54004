"""Scan planning: which files of a snapshot can hold rows matching a predicate, and a report of it.

The report speaks Spark's explain language (PartitionFilters, SelectedBucketsCount) so users
can read it the way they read a physical plan.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from skiplake.expr.evaluate import file_lookup, may_match, partition_lookup
from skiplake.expr.parse import bind
from skiplake.expr.tree import Node, columns_of, conjuncts, to_sql
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import Snapshot


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
            f"Scan skiplake {self.table} (version {self.version})",
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


@dataclass(frozen=True)
class ScanPlan:
    files: list[AddFile]
    report: ScanReport
    predicate: Node | None


def _rows(files: list[AddFile]) -> int | None:
    total = 0
    for f in files:
        n = f.num_records
        if n is None:
            return None
        total += n
    return total


def plan_scan(snapshot: Snapshot, where: str | Node | None = None) -> ScanPlan:
    """Prune partitions by partition values, then files by their min/max/null stats."""
    schema = snapshot.schema
    node = bind(where, schema) if isinstance(where, str) else where
    files = snapshot.add_files
    parts = snapshot.partition_columns
    lowered_parts = {p.lower() for p in parts}
    all_partitions = {tuple(sorted((f.partitionValues or {}).items())) for f in files}
    partition_filters: list[str] = []
    data_filters: list[str] = []
    if node is None:
        selected = list(files)
    else:
        for c in conjuncts(node):
            on_parts = {n.lower() for n in columns_of(c)} <= lowered_parts
            (partition_filters if on_parts else data_filters).append(to_sql(c))
        needs_stats = bool(data_filters)
        part_cache: dict[tuple, bool] = {}
        selected = []
        for f in files:
            key = tuple(sorted((f.partitionValues or {}).items()))
            if key not in part_cache:
                part_cache[key] = may_match(node, partition_lookup(schema, f.partitionValues or {}))
            if not part_cache[key]:
                continue
            if needs_stats and not may_match(node, file_lookup(schema, f.partitionValues or {}, f.stats)):
                continue
            selected.append(f)
    sel_partitions = {tuple(sorted((f.partitionValues or {}).items())) for f in selected}
    report = ScanReport(
        table=snapshot.table_path, version=snapshot.version,
        predicate=where if isinstance(where, str) else None,
        files_total=len(files), files_selected=len(selected),
        bytes_total=sum(f.size for f in files), bytes_selected=sum(f.size for f in selected),
        partitions_total=len(all_partitions) if parts else 0,
        partitions_selected=len(sel_partitions) if parts else 0,
        rows_total=_rows(files), rows_selected=_rows(selected),
        partition_filters=partition_filters, data_filters=data_filters,
    )
    return ScanPlan(selected, report, node)
