"""OPTIMIZE: bin-pack small files of each partition into files near a target size (dataChange=false).

Files with a deletion vector are always among those rewritten: OPTIMIZE purges deleted rows.

All bins of all partitions are rewritten by one Spark job: the rows of each partition are spread
over ceil(bytes / target) output tasks, so each partition ends with that many files of about the
target size. The removes and adds are marked dataChange=false: readers see the same rows.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Sequence

from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucket_spec import BucketSpec, bucket_id_of_tags, bucket_spec_of
from skiplake.log.actions import AddFile
from skiplake.spark.compaction import Compaction, check_where
from skiplake.spark.write import WriteOptions
from skiplake.spark.zorder import zorder

if TYPE_CHECKING:
    from skiplake.spark.transaction import Transaction

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024


def optimize(txn: "Transaction", where: str | None = None, zorder_by: Sequence[str] | None = None,
             target_file_size: int = DEFAULT_TARGET_FILE_SIZE, min_files: int = 2,
             progress: Callable[[str], None] | None = None, sort_within: Sequence[str] | None = None,
             row_group_size: int | None = None, page_rows: int | None = None) -> Compaction:
    """Stage OPTIMIZE: bin-packing, or with zorder_by the Z-order rewrite (skiplake.spark.zorder)."""
    if target_file_size <= 0:
        raise InvalidArgumentError("target_file_size must be positive")
    spec = bucket_spec_of(txn.snapshot.configuration)
    if zorder_by is None:
        if sort_within or row_group_size is not None or page_rows is not None:
            raise InvalidArgumentError(f"{txn.path}: sort_within, row_group_size and page_rows shape the files of "
                                       "a Z-order rewrite; give zorder_by=[...] too, or leave them out to bin-pack")
        return _bin_pack(txn, where, target_file_size, min_files, spec)
    if spec is not None:
        raise InvalidArgumentError(
            f"{txn.path} is bucketed by {list(spec.columns)}: its files are one per bucket, so Z-ordering "
            "cannot regroup rows across files; order rows within each bucket with "
            "BucketSpec(sort_by=[...]) instead")
    columns = [zorder_by] if isinstance(zorder_by, str) else list(zorder_by)
    within = [sort_within] if isinstance(sort_within, str) else list(sort_within or [])
    return zorder(txn, where, columns, target_file_size, progress, within, row_group_size, page_rows)


def _bin_pack(txn: "Transaction", where: str | None, target_file_size: int, min_files: int,
              spec: BucketSpec | None) -> Compaction:
    plan = txn.scan(where)
    check_where(txn, plan, where)
    chosen, single, multi = _bins(plan.files, target_file_size, min_files, spec)
    if not chosen:
        return Compaction(None)
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
    return Compaction(txn, chosen, adds)


def _bins(files: Sequence[AddFile], target_file_size: int, min_files: int, spec: BucketSpec | None
          ) -> tuple[list[AddFile], list[list[AddFile]], list[tuple[list[AddFile], int]]]:
    """(files to rewrite, groups that fit one target-sized file, (group, files it needs) for the rest).

    Partitions whose small files fit in one target-sized file are compacted together in one
    job (one task per partition); a partition that needs n files gets a job of n tasks."""
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    for f in files:
        # A bucketed table compacts each bucket of a partition on its own: files never mix buckets.
        bucket = bucket_id_of_tags(f.tags) if spec is not None else None
        by_partition[(tuple(sorted((f.partitionValues or {}).items())), bucket)].append(f)
    chosen: list[AddFile] = []
    single: list[list[AddFile]] = []
    multi: list[tuple[list[AddFile], int]] = []
    for (_values, bucket), group in by_partition.items():
        if spec is not None and bucket is None:
            chosen.extend(group)  # another writer's files: re-bucket them, whatever their size
            continue
        # A file with a deletion vector is rewritten whatever its size (purged of its deleted rows).
        small = [f for f in group if f.size < target_file_size * 0.75 or f.deletionVector]
        if len(small) < min_files and not any(f.deletionVector for f in small):
            continue
        chosen.extend(small)
        n = max(1, math.ceil(sum(f.size for f in small) / target_file_size))
        if n == 1:
            single.append(small)
        else:
            multi.append((small, n))
    return chosen, single, multi
