"""What a scan plan selected, in Spark's explain language (PartitionFilters, SelectedBucketsCount),
so users read it the way they read a physical plan."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from skiplake.skipping.dfp_cost import CostEstimate


@dataclass(frozen=True)
class StageCount:
    """What a scan would read after one stage of planning ("all", "static", "dynamic")."""
    stage: str
    files: int
    bytes: int
    rows: int | None

    def text(self) -> str:
        """`<stage> <files> files, <bytes> bytes, <rows> rows` (`?` rows when unknown)."""
        rows = "?" if self.rows is None else f"{self.rows:,}"
        return f"{self.stage} {self.files:,} files, {self.bytes:,} bytes, {rows} rows"


@dataclass(frozen=True)
class ScanReport:
    """What a scan of one table version selects of its files, bytes, partitions, buckets and rows,
    and the filters that selected them; `text()` says it as Spark's explain does."""
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
    dynamic_filters: list[str] = field(default_factory=list)  # filters from join build sides at run time
    stages: list[StageCount] = field(default_factory=list)    # files, bytes, rows left after each stage
    replay: str = ""  # how the log's files were replayed when not in the driver ("a Spark job of 10 tasks ...")

    @property
    def files_skipped(self) -> int:
        """The files pruned: files_total less files_selected."""
        return self.files_total - self.files_selected

    def to_dict(self) -> dict:
        """The report's fields as a dict (its stages as dicts too)."""
        return asdict(self)

    def to_json(self) -> str:
        """The report as one line of JSON (to_dict's)."""
        return json.dumps(self.to_dict())

    def text(self) -> str:
        """The report as Spark's explain shows a scan: its pushed, partition, data and dynamic filters,
        the partitions, files, bytes and buckets selected out of all, and each stage's counts."""
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
        if self.dynamic_filters:
            lines.insert(4, f"  DynamicFilters: [{', '.join(self.dynamic_filters)}]")
        if self.buckets_total:
            lines.append(f"  SelectedBucketsCount: {self.buckets_selected} out of {self.buckets_total}")
        if len(self.stages) > 1:
            lines.append(f"  Stages: {' -> '.join(s.text() for s in self.stages)}")
        if self.replay:
            lines.append(f"  LogReplay: {self.replay}")
        return "\n".join(lines)

    def __str__(self) -> str:
        """The report's text()."""
        return self.text()


@dataclass(frozen=True)
class DynamicPruningReport:
    """For one equi-join of a query: whether a build side pruned the other side's files at run
    time (dynamic file pruning), with the build's measured cost, or why it did not."""
    probe: str                       # the probe scan(s), as the query names them
    build: str                       # what the build side reads ("item WHERE i_item_id = ...")
    join_type: str                   # Spark's join type ("Inner", "LeftSemi", ...)
    keys: list[tuple[str, str]]      # (probe column, build key) of each equality used
    applied: bool
    reason: str                      # why not, or what was sent ("3 keys as values")
    build_seconds: float | None = None
    key_count: int | None = None
    filters: list[str] = field(default_factory=list)  # the dynamic filters sent to the probe scans
    joins: int = 1                   # joins of Spark's plan it stands for (a CTE inlined twice repeats its joins)
    build_local: bool = False        # the build side was read in the driver, without a Spark job
    cost: CostEstimate | None = None  # the cost model's figures, when it decided

    def to_dict(self) -> dict:
        """The report's fields as a dict, its cost as the CostEstimate's to_dict()."""
        out = asdict(self)
        out["cost"] = self.cost.to_dict() if self.cost is not None else None
        return out

    def text(self) -> str:
        """The report as explain shows it: the join, the cost figures, and whether pruning applied and why."""
        on = " AND ".join(f"{p} = {b}" for p, b in self.keys) or "?"
        alike = f", {self.joins} joins alike" if self.joins > 1 else ""
        head = f"DynamicFilePruning {self.probe} <- {self.build} ({self.join_type} ON {on}{alike})"
        estimate = f"\n  cost: {self.cost.text()}" if self.cost is not None else ""
        if not self.applied:
            return f"{head}{estimate}\n  not applied: {self.reason}"
        where = " (read in the driver)" if self.build_local else ""
        cost = f"; build {self.build_seconds:.3f} s{where}" if self.build_seconds is not None else ""
        return f"{head}{estimate}\n  applied: {self.reason}{cost}"

    def __str__(self) -> str:
        """The report's text()."""
        return self.text()


@dataclass(frozen=True)
class LogAnswerReport:
    """How much of an aggregate query the log's stats answered: files whose stats gave their part
    of the answer, files read for the rest, files the filter ruled out by their stats."""
    files_from_stats: int
    files_read: int
    files_excluded: int = 0

    def text(self) -> str:
        """One line, as lake.explain shows it."""
        return (f"Answered from the log: the stats of {self.files_from_stats:,} files, {self.files_read:,} files read"
                + (f", {self.files_excluded:,} ruled out by the filter" if self.files_excluded else ""))

    def to_dict(self) -> dict:
        """The report's fields as a dict."""
        return asdict(self)

