"""Scan planning: which files of a snapshot can hold rows matching a predicate.

`plan_scan` runs in numbered stages over the snapshot's files as one Arrow table (no Spark):

1. bind the predicate to the table's schema;
2. partitions and min/max stats: evaluate it over every file at once (partition values are
   columns of the stats table, exact bounds of their files), three-valued, so NOT and NULL
   are right;
3. buckets: of a bucketed table, keep files whose bucket the predicate may select (files
   without a bucket id, other writers', are always kept);
4. report what each stage left, in Spark's explain language.
"""
from __future__ import annotations

import weakref

import numpy as np
import pyarrow as pa

from skiplake.expr.parse import bind
from skiplake.expr.sql import to_sql
from skiplake.expr.tree import Node, conjuncts
from skiplake.expr.visitor import columns_of
from skiplake.layout.bucket_spec import BucketSpec, bucket_spec_of
from skiplake.log.actions import AddFile
from skiplake.log.snapshot import Snapshot, add_files_from_arrow
from skiplake.skipping.bucket_pruning import Buckets, selected_buckets
from skiplake.skipping.columnar import may_match_files
from skiplake.skipping.report import ScanReport
from skiplake.skipping.stats_table import StatsTable


class ScanPlan:
    """The files a scan must read (as the snapshot's Arrow rows), its report and bound predicate."""

    def __init__(self, selected: pa.Table, report: ScanReport, predicate: Node | None,
                 buckets: frozenset[int] | None = None, mask: np.ndarray | None = None,
                 snapshot: Snapshot | None = None) -> None:
        """The plan of the `selected` file rows (their stats may be unread: see
        Snapshot.file_rows), as plan_scan makes it from `snapshot`."""
        self.selected = selected
        self.snapshot = snapshot
        self.mask = mask        # which of the snapshot's files are selected, when planned from it
        self.report = report
        self.predicate = predicate
        self.buckets = buckets  # the buckets the predicate may select; None when not bucketed or all
        self._files: list[AddFile] | None = None

    @property
    def files(self) -> list[AddFile]:
        """The selected files as AddFile records (built on first use)."""
        if self._files is None:
            with_stats = self.selected if self.snapshot is None or self.mask is None \
                else self.snapshot.files_with_stats(self.mask)
            self._files = add_files_from_arrow(with_stats)
        return self._files


_STATS: dict[int, tuple[weakref.ref, StatsTable]] = {}


def stats_table(snapshot: Snapshot) -> StatsTable:
    """The snapshot's typed stats, built once per snapshot and dropped with it."""
    key = id(snapshot)
    entry = _STATS.get(key)
    if entry is not None and entry[0]() is snapshot:
        return entry[1]
    table = StatsTable(snapshot.file_rows, snapshot.schema, snapshot.partition_columns, snapshot.parsed_stats,
                       snapshot.checkpoint_head, snapshot.deferred_stats)

    def forget(_ref: weakref.ref[Snapshot], k: int = key) -> None:
        _STATS.pop(k, None)
    _STATS[key] = (weakref.ref(snapshot, forget), table)
    return table


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


def plan_scan(snapshot: Snapshot, where: str | Node | None = None, describe: bool = True,
              within: np.ndarray | None = None) -> ScanPlan:
    """Select the files whose partition values, min/max/null stats and bucket ids say they may
    hold a row matching `where` (SQL text or an already bound predicate). With describe=False the
    report leaves the predicate and its partition/data filters out: for a caller that says what
    it planned by itself (dynamic pruning, whose key lists would take longer to write as SQL
    than to plan by). `within` (a mask over the snapshot's files) limits the scan, its report's
    totals included, to some of them (a relation that reads only the files with deletion vectors)."""
    # 1. bind
    node = bind(where, snapshot.schema) if isinstance(where, str) else where
    stats = stats_table(snapshot)
    files = snapshot.file_rows
    # 2. partitions and stats
    mask = _by_stats(node, stats)
    # 3. buckets
    spec = bucket_spec_of(snapshot.configuration)
    buckets = _selected_buckets(node, snapshot, spec)
    if buckets is not None and files.num_rows:
        mask &= _in_buckets(stats.bucket_ids, buckets)
    scope = np.ones(len(mask), dtype=bool) if within is None else np.asarray(within, dtype=bool)
    mask &= scope
    selected = files if mask.all() else files.filter(pa.array(mask))
    # 4. report
    text = None if not describe else where if isinstance(where, str) else to_sql(where) if where is not None else None
    report = _report(snapshot, stats, mask, scope, text, node if describe else None, spec, buckets)
    return ScanPlan(selected, report, node, buckets, mask, snapshot)


def _by_stats(node: Node | None, stats: StatsTable) -> np.ndarray:
    if node is None or stats.num_files == 0:
        return np.ones(stats.num_files, dtype=bool)
    return may_match_files(node, stats)


def _selected_buckets(node: Node | None, snapshot: Snapshot, spec: BucketSpec | None) -> Buckets:
    if spec is None:
        return None
    types = [snapshot.schema.field(c).type for c in spec.columns]
    return selected_buckets(node, spec.columns, types, spec.num_buckets)


def _in_buckets(ids: np.ndarray, buckets: frozenset[int]) -> np.ndarray:
    # A file without a bucket id (another writer's) may hold any bucket's rows.
    return np.isin(ids, np.fromiter(buckets, dtype=np.int64, count=len(buckets))) | (ids < 0)


def _rows(records: np.ndarray) -> int | None:
    return None if np.isnan(records).any() else int(records.sum())


def _report(snapshot: Snapshot, stats: StatsTable, mask: np.ndarray, scope: np.ndarray, predicate: str | None,
            node: Node | None, spec: BucketSpec | None, buckets: Buckets) -> ScanReport:
    files = snapshot.file_rows
    sizes = files.column("size").to_numpy() if files.num_rows else np.zeros(0, np.int64)
    records = stats.num_records - snapshot.deleted_rows  # logical rows: less what deletion vectors mark
    partition_filters, data_filters = split_filters(node, snapshot.partition_columns)
    # Of a table of millions of files, copies of its columns by a mask of all of them cost more
    # than the plan: the whole table's figures are taken without one.
    everywhere = bool(scope.all())
    everything = everywhere and bool(mask.all())
    return ScanReport(
        table=snapshot.table_path, version=snapshot.version, predicate=predicate,
        files_total=int(scope.sum()), files_selected=int(mask.sum()),
        bytes_total=int((sizes if everywhere else sizes[scope]).sum()),
        bytes_selected=int((sizes if everything else sizes[mask]).sum()),
        partitions_total=stats.partition_count(None if everywhere else scope),
        partitions_selected=stats.partition_count(None if everything else mask),
        buckets_total=spec.num_buckets if spec else 0,
        buckets_selected=(spec.num_buckets if buckets is None else len(buckets)) if spec else 0,
        rows_total=_rows(records if everywhere else records[scope]),
        rows_selected=_rows(records if everything else records[mask]),
        partition_filters=partition_filters, data_filters=data_filters,
    )
