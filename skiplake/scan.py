"""Scan planning: which files of a snapshot can hold rows matching a predicate, and a report of it.

The report speaks Spark's explain language (PartitionFilters, SelectedBucketsCount) so users
can read it the way they read a physical plan.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from skiplake.expr.evaluate import file_lookup, may_match, partition_lookup
from skiplake.expr.parse import bind
from skiplake.expr.tree import Node, columns_of, conjuncts, to_sql
from skiplake.log.actions import NUM_RECORDS_PATTERN, AddFile
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


def _rows_arrow(files: pa.Table) -> int | None:
    """Sum of numRecords over a FILES_SCHEMA table without parsing each stats JSON."""
    if files.num_rows == 0:
        return 0
    found = pc.extract_regex(files.column("stats"), NUM_RECORDS_PATTERN)
    counts = pc.struct_field(found, [0])
    if counts.null_count:
        return None
    return int(pc.sum(counts.cast(pa.int64())).as_py())


_NULL_KEY = "\x00null"
_SEP = "\x1f"


def _partition_key(files: pa.Table, parts: list[str]) -> pa.ChunkedArray | pa.Array:
    """One string per file that identifies its partition (NULL spelled as a sentinel)."""
    pv = files.column("partitionValues")
    cols = [pc.fill_null(pc.map_lookup(pv, pa.scalar(c, pa.string()), "first"), _NULL_KEY) for c in parts]
    return cols[0] if len(cols) == 1 else pc.binary_join_element_wise(*cols, _SEP)


def _key_values(key: str, parts: list[str]) -> dict[str, str | None]:
    return {c: (None if v == _NULL_KEY else v) for c, v in zip(parts, key.split(_SEP) if len(parts) > 1 else [key])}


def plan_scan(snapshot: Snapshot, where: str | Node | None = None) -> ScanPlan:
    """Prune partitions by partition values (once per distinct partition, over the snapshot's Arrow
    file table), then the remaining files by their min/max/null stats."""
    schema = snapshot.schema
    node = bind(where, schema) if isinstance(where, str) else where
    table = snapshot.files
    parts = snapshot.partition_columns
    lowered_parts = {p.lower() for p in parts}
    partition_filters: list[str] = []
    data_filters: list[str] = []
    if node is not None:
        for c in conjuncts(node):
            on_parts = {n.lower() for n in columns_of(c)} <= lowered_parts
            (partition_filters if on_parts else data_filters).append(to_sql(c))
    partitions_total = 0
    candidates = table
    if parts and table.num_rows:
        keys = _partition_key(table, parts)
        distinct = pc.unique(keys).to_pylist()
        partitions_total = len(distinct)
        if node is not None:
            keep = [k for k in distinct if may_match(node, partition_lookup(schema, _key_values(k, parts)))]
            if len(keep) < len(distinct):
                candidates = table.filter(pc.is_in(keys, value_set=pa.array(keep, pa.string())))
    files = add_files_from_arrow(candidates)
    if data_filters:
        files = [f for f in files if may_match(node, file_lookup(schema, f.partitionValues or {}, f.stats))]
    sel_partitions = {tuple(sorted((f.partitionValues or {}).items())) for f in files}
    size = table.column("size")
    report = ScanReport(
        table=snapshot.table_path, version=snapshot.version,
        predicate=where if isinstance(where, str) else None,
        files_total=table.num_rows, files_selected=len(files),
        bytes_total=int(pc.sum(size).as_py() or 0) if table.num_rows else 0,
        bytes_selected=sum(f.size for f in files),
        partitions_total=partitions_total, partitions_selected=len(sel_partitions) if parts else 0,
        rows_total=_rows_arrow(table), rows_selected=_rows(files),
        partition_filters=partition_filters, data_filters=data_filters,
    )
    return ScanPlan(files, report, node)
