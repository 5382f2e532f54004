"""OPTIMIZE: bin-pack small files of each partition into files near a target size (dataChange=false).

All bins of all partitions are rewritten by one Spark job: the rows of each partition are spread
over ceil(bytes / target) output tasks, so each partition ends with that many files of about the
target size. The removes and adds are marked dataChange=false: readers see the same rows.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucket_spec import bucket_id_of_tags
from skiplake.spark.write import WriteOptions

if TYPE_CHECKING:
    from skiplake.skipping.plan import ScanPlan
    from skiplake.table import Table, Transaction


@dataclass(frozen=True)
class OptimizeResult:
    version: int | None       # None when there was nothing to compact
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_added: int
    partitions_optimized: int

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def check_where(txn: "Transaction", plan: "ScanPlan", where: str | None) -> None:
    """OPTIMIZE rewrites whole partitions: its where may name partition columns only."""
    if where is not None and plan.report.data_filters:
        raise InvalidArgumentError(
            f"optimize(where={where!r}) may only filter on partition columns {txn.partition_columns}; "
            f"these parts name other columns: {', '.join(plan.report.data_filters)}")


def optimize(table: "Table", where: str | None, zorder_by: Sequence[str] | None, target_file_size: int,
             min_files: int, stage_only: bool = False,
             progress: Callable[[str], None] | None = None) -> "OptimizeResult | Transaction":
    if target_file_size <= 0:
        raise InvalidArgumentError("target_file_size must be positive")
    spec = table.bucket_spec
    if zorder_by is not None:
        if spec is not None:
            raise InvalidArgumentError(
                f"{table.path} is bucketed by {list(spec.columns)}: its files are one per bucket, so Z-ordering "
                "cannot regroup rows across files; order rows within each bucket with "
                "BucketSpec(sort_by=[...]) instead")
        from skiplake.spark.zorder import zorder
        if isinstance(zorder_by, str):
            zorder_by = [zorder_by]
        return zorder(table, where, list(zorder_by), target_file_size, stage_only, progress)
    txn = table.begin()
    plan = txn.scan(where)
    check_where(txn, plan, where)
    by_partition = defaultdict(list)
    for f in plan.files:
        # A bucketed table compacts each bucket of a partition on its own: files never mix buckets.
        bucket = bucket_id_of_tags(f.tags) if spec is not None else None
        by_partition[(tuple(sorted((f.partitionValues or {}).items())), bucket)].append(f)
    # Partitions whose small files fit in one target-sized file are compacted together in one
    # job (one task per partition); a partition that needs n files gets a job of n tasks.
    chosen: list = []
    single: list = []
    multi: list[tuple[list, int]] = []
    for (_values, bucket), files in by_partition.items():
        if spec is not None and bucket is None:
            chosen.extend(files)  # another writer's files: re-bucket them, whatever their size
            continue
        small = [f for f in files if f.size < target_file_size * 0.75]
        if len(small) < min_files:
            continue
        chosen.extend(small)
        n = max(1, math.ceil(sum(f.size for f in small) / target_file_size))
        if n == 1:
            single.append(small)
        else:
            multi.append((small, n))
    if not chosen:
        return OptimizeResult(None, 0, 0, 0, 0, 0)
    parts = [F.col(f"`{p}`") for p in txn.partition_columns]
    adds = []
    if spec is not None:
        # The bucketed writer lays out one file per (partition, bucket), split past the target size.
        adds += txn.write(txn.read_files(chosen), data_change=False,
                          options=WriteOptions(target_file_size=target_file_size))
    elif single:
        df = txn.read_files([f for group in single for f in group])
        df = df.repartition(len(single), *parts) if parts else df.repartition(1)
        adds += txn.write(df, data_change=False)
    for files, n in (multi if spec is None else []):
        adds += txn.write(txn.read_files(files).repartition(n), data_change=False)
    txn.remove(chosen, data_change=False)
    txn.stage("OPTIMIZE", {"predicate": [where] if where else [], "targetFileSize": target_file_size})
    if stage_only:
        return txn
    version = txn.commit()
    return OptimizeResult(version, len(chosen), len(adds), sum(f.size for f in chosen), sum(a.size for a in adds),
                          len({tuple(sorted((f.partitionValues or {}).items())) for f in chosen}))
