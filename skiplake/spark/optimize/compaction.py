"""OPTIMIZE: bin-pack small files of each partition into files near a target size (dataChange=false).

Files with a deletion vector are always among those rewritten: OPTIMIZE purges deleted rows.

All bins of all partitions are rewritten by one Spark job: the rows of each partition are spread
over ceil(bytes / target) output tasks, so each partition ends with that many files of about the
target size. The removes and adds are marked dataChange=false: readers see the same rows.

On a table with deletion vectors (delta.enableDeletionVectors), each output is instead written
from a known list of whole input files, their live rows in order (input by input, by row index),
and says so in its add (skiplake.txn.row_placements): a DELETE, UPDATE or MERGE running meanwhile then
commits as well as the OPTIMIZE, its changes carried over to the rows' new places.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

import pyarrow as pa
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError
from skiplake.layout.bucket_spec import BucketSpec, bucket_id_of_tags, bucket_spec_of
from skiplake.log.actions import AddFile
from skiplake.log.features import deletion_vectors_enabled
from skiplake.spark.dml.row_marks import logical_rows
from skiplake.spark.optimize.cluster_rewrite import cluster
from skiplake.spark.optimize.curve_rewrite import zorder
from skiplake.spark.optimize.optimize_result import Compaction, check_where
from skiplake.spark.reads.planned_reads import ROW_COLUMN, with_file_values
from skiplake.spark.writes.data_files import WriteOptions
from skiplake.txn.clustering import clustering_columns
from skiplake.txn.row_placements import COMPACTED_FROM, compacted_tag

if TYPE_CHECKING:
    from skiplake.spark.writes.transaction import Transaction

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
# A clustered table's cubes stop taking new rows at this many target-sized files (1 GiB by default).
MIN_CUBE_FILES = 8


def optimize(txn: "Transaction", where: str | None = None, zorder_by: Sequence[str] | None = None,
             target_file_size: int = DEFAULT_TARGET_FILE_SIZE, min_files: int = 2,
             progress: Callable[[str], None] | None = None, sort_within: Sequence[str] | None = None,
             row_group_size: int | None = None, page_rows: int | None = None, full: bool = False,
             min_cube_size: int | None = None) -> Compaction:
    """Stage OPTIMIZE: on a clustered table its incremental clustering (skiplake.spark.optimize.cluster_rewrite),
    else bin-packing, or with zorder_by the Z-order rewrite (skiplake.spark.optimize.curve_rewrite)."""
    if target_file_size <= 0:
        raise InvalidArgumentError("target_file_size must be positive")
    keys = clustering_columns(txn.snapshot)
    if keys is not None:
        _check_clustered_options(txn, keys, where, zorder_by, sort_within, row_group_size, page_rows)
        if keys:
            cube = min_cube_size if min_cube_size is not None else MIN_CUBE_FILES * target_file_size
            return cluster(txn, keys, target_file_size, cube, full, progress)
    elif min_cube_size is not None or (full and zorder_by is None):
        raise InvalidArgumentError(f"{txn.path} is not clustered: min_cube_size= applies to the OPTIMIZE of a "
                                   "clustered table (create it with cluster_by=[...], or set its keys with "
                                   "cluster_by), and full= to it or to a Z-order (zorder_by=[...])")
    spec = bucket_spec_of(txn.snapshot.configuration)
    if zorder_by is None:
        if sort_within or row_group_size is not None or page_rows is not None:
            raise InvalidArgumentError(f"{txn.path}: sort_within, row_group_size and page_rows shape the files of "
                                       "a Z-order rewrite; give zorder_by=[...] too, or leave them out to bin-pack")
        return _bin_pack(txn, where, target_file_size, min_files, spec)
    return _zorder(txn, spec, where, zorder_by, target_file_size, progress, sort_within, row_group_size, page_rows,
                   full)


def _zorder(txn: "Transaction", spec: BucketSpec | None, where: str | None, zorder_by: Sequence[str] | str,
            target_file_size: int, progress: Callable[[str], None] | None, sort_within: Sequence[str] | str | None,
            row_group_size: int | None, page_rows: int | None, full: bool) -> Compaction:
    """The Z-order rewrite, refused on a bucketed table (`spec`: its bucketing, if any)."""
    if spec is not None:
        raise InvalidArgumentError(
            f"{txn.path} is bucketed by {list(spec.columns)}: its files are one per bucket, so Z-ordering "
            "cannot regroup rows across files; order rows within each bucket with "
            "BucketSpec(sort_by=[...]) instead")
    columns = [zorder_by] if isinstance(zorder_by, str) else list(zorder_by)
    within = [sort_within] if isinstance(sort_within, str) else list(sort_within or [])
    return zorder(txn, where, columns, target_file_size, progress, within, row_group_size, page_rows, full)


def _check_clustered_options(txn: "Transaction", keys: list[str], where: str | None,
                             zorder_by: Sequence[str] | None, sort_within: Sequence[str] | None,
                             row_group_size: int | None, page_rows: int | None) -> None:
    """A clustered table is clustered by its own keys, over the whole table."""
    if zorder_by is not None or sort_within or row_group_size is not None or page_rows is not None:
        raise InvalidArgumentError(
            f"{txn.path} is a clustered table (clustering columns {keys}): OPTIMIZE clusters it by those "
            "columns. Leave zorder_by, sort_within, row_group_size and page_rows out; change the "
            "columns with cluster_by([...]).")
    if where is not None:
        raise InvalidArgumentError(f"{txn.path} is a clustered table: it has no partitions for "
                                   f"optimize(where={where!r}) to select. Leave where out.")


def _bin_pack(txn: "Transaction", where: str | None, target_file_size: int, min_files: int,
              spec: BucketSpec | None) -> Compaction:
    plan = txn.scan(where)
    check_where(txn, plan, where)
    chosen, single, multi = _bins(plan.files, target_file_size, min_files, spec)
    if not chosen:
        return Compaction(None)
    adds = _write_bins(txn, chosen, single, multi, spec, target_file_size)
    txn.remove(chosen, data_change=False)
    txn.stage("OPTIMIZE", {"predicate": [where] if where else [], "targetFileSize": target_file_size})
    return Compaction(txn, chosen, adds)


def _write_bins(txn: "Transaction", chosen: list[AddFile], single: list[list[AddFile]],
                multi: list[tuple[list[AddFile], int]], spec: BucketSpec | None, target_file_size: int) -> list[AddFile]:
    """Write the bins: `single` ones to one file each, `multi` ones of n files to n."""
    # (With column mapping the writer renames columns, and on a partitioned table may sort again
    # by partition only, which need not keep the order the tag records.)
    if spec is None and deletion_vectors_enabled(txn.snapshot.configuration) and (
            txn.snapshot.column_mapping == "none" or not txn.partition_columns):
        return _write_in_order(txn, single + [g for files, n in multi for g in _split(files, n)])
    if spec is not None:
        # The bucketed writer lays out one file per (partition, bucket), split past the target size.
        return txn.write(txn.read_files(chosen, keep_row_ids=True), data_change=False,
                         options=WriteOptions(target_file_size=target_file_size))
    adds = []
    parts = [F.col(f"`{p}`") for p in txn.partition_columns]
    if single:
        df = txn.read_files([f for group in single for f in group], keep_row_ids=True)
        df = df.repartition(len(single), *parts) if parts else df.repartition(1)
        adds += txn.write(df, data_change=False)
    for files, n in multi:
        adds += txn.write(txn.read_files(files, keep_row_ids=True).repartition(n), data_change=False)
    return adds


def _split(files: list[AddFile], n: int) -> list[list[AddFile]]:
    """`files` in n runs of whole files of about equal bytes, in order (empty runs left out)."""
    total = sum(f.size for f in files) or 1
    runs: list[list[AddFile]] = [[] for _ in range(n)]
    before = 0
    for f in files:
        runs[min(n - 1, before * n // total)].append(f)
        before += f.size
    return [r for r in runs if r]


_PART = re.compile(r"part-(\d+)-")


def _write_in_order(txn: "Transaction", groups: list[list[AddFile]]) -> list[AddFile]:
    """Write group i's live rows as one file, input by input, each by row index (task i of one
    job), and tag each file with its inputs (COMPACTED_FROM) when its row count bears it out."""
    files = [f for g in groups for f in g]
    df = txn.read_files(files, with_file_info=True, keep_row_ids=True)
    place = {f.path: (g, o) for g, group in enumerate(groups) for o, f in enumerate(group)}
    df = with_file_values(df, txn.path, place, pa.schema([("__group", pa.int32()), ("__ordinal", pa.int32())]))
    parts = [F.col(f"`{p}`") for p in txn.partition_columns]
    # Partition columns first: the writer's own sort by them is then already done, and keeps order.
    df = df.repartitionById(len(groups), F.col("__group")).sortWithinPartitions(
        *parts, F.col("__ordinal"), F.col(ROW_COLUMN))
    written = txn.write(df.select(*[F.col(f"`{c}`") for c in [*txn.schema.names, *txn.row_id_columns]]),
                        data_change=False)
    adds = [_tagged(a, groups, g) for a, g in zip(written, _groups_of(written))]
    tagged = {id(old): new for old, new in zip(written, adds) if new is not old}
    txn.actions[:] = [tagged.get(id(a), a) for a in txn.actions]
    return adds


def _groups_of(written: list[AddFile]) -> list[int | None]:
    """Each written file's group (the task that wrote it, from its part-NNNNN name), or None
    when it shares its task with another file, or its name does not say."""
    tasks = [m and int(m.group(1)) for m in (_PART.search(a.path.rsplit("/", 1)[-1]) for a in written)]
    return [t if t is not None and tasks.count(t) == 1 else None for t in tasks]


def _tagged(add: AddFile, groups: list[list[AddFile]], g: int | None) -> AddFile:
    """`add` with COMPACTED_FROM naming group g's inputs, when its row count is theirs (else no
    claim about where their rows went)."""
    inputs = [(f, logical_rows(f)) for f in groups[g]] if g is not None and g < len(groups) else []
    if not inputs or any(f.num_records is None for f, _ in inputs) or \
            add.num_records != sum(rows for _, rows in inputs):
        return add
    return replace(add, tags={**(add.tags or {}), COMPACTED_FROM: compacted_tag(inputs)})


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
