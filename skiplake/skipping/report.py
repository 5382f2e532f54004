"""What a scan plan selected, in Spark's explain language (PartitionFilters, SelectedBucketsCount),
so users read it the way they read a physical plan."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


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
