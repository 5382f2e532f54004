"""Running a MERGE as Spark jobs over the planned target files, filling one transaction.

Every target row of the files read, joined with the source on ON, gets the clause that acts on
it: the first clause of its kind whose condition holds (a matched row, a source row no target
row matches, a target row no source row matches), or none. Then:

- an insert-only MERGE (only WHEN NOT MATCHED clauses) is one job: the source rows no target row
  matches (an anti join), each written by its clause; no file is rewritten;
- otherwise a first job joins the source with the candidate files (an inner join, a right outer
  join with NOT MATCHED BY SOURCE clauses) and aggregates per file and clause: the rows, the most
  source rows one target row matched (several are a MergeConflictError unless the only WHEN
  MATCHED clause is an unconditional DELETE, as in Delta), and with deletion vectors the indexes
  of the rows a clause changes. A second job writes: the files holding a changed row are
  rewritten (rows kept, updated) together with the inserted rows; with deletion vectors only
  updated and inserted rows are written and the changed rows are marked deleted in their files
  (skiplake.spark.dml.row_marks). Files whose rows are matched but left as they are stay as they are.

The metrics are Delta's, from the first job's counts and the files written.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from skiplake.errors import MergeConflictError
from skiplake.log.actions import AddFile
from skiplake.log.changes import CHANGE_TYPE, DELETE, INSERT, POSTIMAGE, PREIMAGE
from skiplake.log.features import deletion_vectors_enabled
from skiplake.log.paths import file_key
from skiplake.spark.dml.dml_jobs import records_changes
from skiplake.spark.dml.row_marks import counted_rows, mark_rows
from skiplake.spark.merge.clauses import KINDS, MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE
from skiplake.spark.merge.conditions import Sides, key_equalities
from skiplake.spark.merge.merge_result import FileChanges, MergeMetrics
from skiplake.spark.merge.resolve import ResolvedMerge, quoted
from skiplake.spark.merge.target_files import target_filter
from skiplake.spark.pruning.pruning_settings import conf_bytes
from skiplake.spark.reads.planned_reads import FILE_COLUMN, ROW_COLUMN, path_from_spark, spark_file_key
from skiplake.spark.reads.row_ids import kept_ids
from skiplake.spark.session.explain_text import estimated_size
from skiplake.spark.session.gateway import is_connect, plan_size
from skiplake.spark.session.spark_types import conform, spark_type

if TYPE_CHECKING:
    from skiplake.spark.writes.transaction import Transaction

# Columns the jobs add: a flag on each side (NULL after an outer join where the side is
# missing) and the clause acting on the joined row.
TARGET_FLAG = "__skiplake_target"
SOURCE_FLAG = "__skiplake_source"
CLAUSE = "__skiplake_clause"
_NO_ROWS = np.zeros(0, np.uint64)


@dataclass
class Found:
    """What the first job learned about the candidate files, by log path."""
    spark_paths: dict[str, str] = field(default_factory=dict)  # as Spark names the files
    matched: set[str] = field(default_factory=set)             # files holding a matched target row
    changed: set[str] = field(default_factory=set)             # files holding a row a clause changes
    rows: dict[int, int] = field(default_factory=dict)         # target rows per clause
    several: str | None = None                                 # a file where a row matched several times
    hits: dict[str, np.ndarray] = field(default_factory=dict)  # changed rows' indexes (deletion vectors)


class _Run:
    def __init__(self, txn: "Transaction", source: DataFrame, merge: ResolvedMerge) -> None:
        self.txn, self.merge, self.spec = txn, merge, merge.spec
        self.t, self.s = self.spec.target_alias, self.spec.source_alias
        self.source = source
        self.dv = deletion_vectors_enabled(txn.snapshot.configuration)
        # With the change data feed on, the rows written carry their change type, and the change
        # files take the inserted and updated rows from that same job (an identity value or a
        # non-deterministic expression is then the same in both).
        self.changes = records_changes(txn) and not merge.spec.insert_only
        self.observation: Observation | None = None

    # ---- the pieces of every job

    def sides(self, files: Sequence[AddFile], source: DataFrame, file_info: bool,
              broadcast: bool = False, row_ids: bool = False) -> tuple[DataFrame, DataFrame]:
        target = self.txn.read_files(files, with_file_info=file_info, keep_row_ids=row_ids)
        target = target.withColumn(TARGET_FLAG, F.lit(True))
        flagged = source.withColumn(SOURCE_FLAG, F.lit(True)).alias(self.s)
        return F.broadcast(flagged) if broadcast else flagged, target.alias(self.t)

    def first(self, kind: str) -> Column:
        """The index of the first clause of `kind` whose condition holds (NULL: none does)."""
        out: Column | None = None
        for c in self.merge.of_kind(kind):
            out = F.when(c.condition, F.lit(c.index)) if out is None else out.when(c.condition, F.lit(c.index))
        return out if out is not None else F.lit(None).cast("int")

    def clause(self) -> Column:
        source_missing = F.col(f"{self.s}.{SOURCE_FLAG}").isNull()
        target_missing = F.col(f"{self.t}.{TARGET_FLAG}").isNull()
        return (F.when(source_missing, self.first(NOT_MATCHED_BY_SOURCE))
                .when(target_missing, self.first(NOT_MATCHED)).otherwise(self.first(MATCHED)))

    def row(self, default: Sequence[Column], kinds: Sequence[str] = KINDS) -> list[Column]:
        """The table's columns of a joined row, as the clause in CLAUSE writes it (else `default`);
        only clauses of `kinds` (rows without a target side must not name the target's columns).
        With the change data feed on, then CHANGE_TYPE: how the row changed (NULL: copied)."""
        out = self.values(default, kinds) + self.row_ids(kinds)
        if self.changes:
            change = (F.when(self.among((MATCHED, NOT_MATCHED_BY_SOURCE), ("update",)), F.lit(POSTIMAGE))
                      .when(self.among((NOT_MATCHED,), ("insert",)), F.lit(INSERT)))
            out.append(change.alias(CHANGE_TYPE))
        return out

    def row_ids(self, kinds: Sequence[str]) -> list[Column]:
        """A written row's row id columns (when the table keeps them): a target row keeps its id,
        and its commit version unless a clause updates it; an inserted row has neither."""
        names = self.txn.row_id_columns
        if not names:
            return []
        if NOT_MATCHED in kinds and len(kinds) == 1:  # no target side to name
            return [F.lit(None).cast("long").alias(n) for n in names]
        updated = self.among((MATCHED, NOT_MATCHED_BY_SOURCE), ("update",))
        return kept_ids(names, updated, f"{self.t}.")

    def values(self, default: Sequence[Column], kinds: Sequence[str]) -> list[Column]:
        k = F.col(CLAUSE)
        acting = [c for c in self.merge.clauses if c.values and c.clause.kind in kinds]
        out = []
        for i, f in enumerate(self.merge.schema.fields):
            value: Column | None = None
            for c in acting:
                value = F.when(k == c.index, c.values[i]) if value is None else value.when(k == c.index, c.values[i])
            out.append((default[i] if value is None else value.otherwise(default[i])).alias(f.name))
        return out

    def write(self, rows: DataFrame) -> None:
        """Write the table's rows; rows with a change type go to the change files too."""
        if CHANGE_TYPE not in rows.columns:
            self.txn.write(conform(rows, self.merge.schema, self.txn.row_id_columns))
            return
        rows = rows.persist()
        try:
            self.txn.write(conform(rows.drop(CHANGE_TYPE), self.merge.schema, self.txn.row_id_columns))
            self.txn.write_changes(rows.filter(F.col(CHANGE_TYPE).isNotNull()))
        finally:
            rows.unpersist()

    def observed(self, source: DataFrame) -> DataFrame:
        """`source`, counting its rows as the first job reads it (numSourceRows)."""
        try:
            self.observation = Observation()
            return source.observe(self.observation, F.count(F.lit(1)).alias("rows"))
        except Exception:  # a session without observations: counted apart afterwards
            self.observation = None
            return source

    def source_rows(self) -> int:
        if self.observation is not None:
            try:
                return int(self.observation.get["rows"])
            except Exception:
                pass  # the job never read the source (Spark saw it could not matter): count it
        return self.source.count()

    # ---- insert-only

    def insert_only(self, files: Sequence[AddFile]) -> None:
        source = self.observed(self.source).withColumn(SOURCE_FLAG, F.lit(True)).alias(self.s)
        if files:
            target = self.txn.read_files(files).alias(self.t)
            source = source.join(target, F.expr(self.spec.on), "left_anti")
        self.write(self.inserted(source))

    def inserted(self, unmatched: DataFrame) -> DataFrame:
        """The rows the NOT MATCHED clauses write for the source rows of `unmatched` (none matched)."""
        rows = unmatched.withColumn(CLAUSE, self.first(NOT_MATCHED)).filter(F.col(CLAUSE).isNotNull())
        nulls = [F.lit(None).cast(spark_type(f.type)) for f in self.merge.schema.fields]
        return rows.select(*self.row(nulls, (NOT_MATCHED,)))

    # ---- the first job: which rows each clause acts on

    def find(self, files: Sequence[AddFile]) -> Found:
        by_source = bool(self.spec.not_matched_by_source)
        # Spark Connect's client refuses a union whose two sides carry the same observation (the
        # by-source branch below unions two halves of one join): the source is counted apart there.
        observed = self.source if by_source and is_connect(self.source.sparkSession) else self.observed(self.source)
        if observed is self.source:
            self.observation = None
        source, target = self.sides(files, observed, file_info=True)
        joined = source.join(target, F.expr(self.spec.on), "right" if by_source else "inner").select(
            F.col(f"{self.t}.{FILE_COLUMN}").alias("f"), F.col(f"{self.t}.{ROW_COLUMN}").alias("r"),
            F.col(f"{self.s}.{SOURCE_FLAG}").isNotNull().alias("m"), self.clause().alias("k"))
        per_file = [F.count(F.lit(1)).alias("rows"), F.max("n").alias("most")]
        if self.dv:
            per_file.append(F.collect_list(F.when(F.col("k").isNotNull(), F.col("r"))).alias("hits"))
        # A matched target row may meet several source rows: one group per row counts them.
        matched = (joined.filter("m").groupBy("f", "r").agg(F.count(F.lit(1)).alias("n"), F.min("k").alias("k"))
                   .groupBy("f", "k").agg(*per_file).withColumn("m", F.lit(True)))
        if by_source:
            # Rows nothing matched meet no source row; those no clause acts on need no aggregating.
            unmatched = (joined.filter(~F.col("m") & F.col("k").isNotNull()).withColumn("n", F.lit(1))
                         .groupBy("f", "k").agg(*per_file).withColumn("m", F.lit(False)))
            matched = matched.unionByName(unmatched)
        return self.found(files, matched.toArrow())

    def found(self, files: Sequence[AddFile], groups: pa.Table) -> Found:
        """Found from the first job's groups (one per file and clause; with deletion vectors the
        changed rows' indexes as one Arrow list each, taken as NumPy slices, not Python ints)."""
        by_key = {file_key(self.txn.path, f.path): f.path for f in files}
        out = Found()
        hits = groups.column("hits").combine_chunks() if self.dv else None
        for i, g in enumerate(groups.drop_columns(["hits"] if self.dv else []).to_pylist()):
            path = by_key[spark_file_key(g["f"])]
            out.spark_paths[path] = g["f"]
            k = g["k"]
            if g["m"]:
                out.matched.add(path)
                if g["most"] > 1 and out.several is None:
                    out.several = path
            if k is not None:
                out.changed.add(path)
                out.rows[k] = out.rows.get(k, 0) + g["rows"]
                if hits is not None:
                    rows = hits[i].values.to_numpy(zero_copy_only=False).astype(np.uint64)
                    out.hits[path] = np.union1d(out.hits.get(path, _NO_ROWS), rows).astype(np.uint64)
        if out.several is not None and not self.spec.one_unconditional_delete:
            raise MergeConflictError(self.txn.path, path_from_spark(out.spark_paths[out.several]))
        return out

    # ---- the second job: writing

    def among(self, kinds: Sequence[str], actions: Sequence[str]) -> Column:
        ids = self.merge.ids(kinds, actions)
        return F.coalesce(F.col(CLAUSE).isin(ids), F.lit(False)) if ids else F.lit(False)

    def rewrite(self, files: Sequence[AddFile], found: Found) -> int:
        """Rewrite the files with a changed row, with the inserted rows; returns the rows copied."""
        changed = [f for f in files if f.path in found.changed]
        rows = self.written(files, changed, found, keep_unchanged=True)
        if rows is not None:
            self.write(rows)
        self.txn.remove(changed)
        return counted_rows(self.txn, changed) - sum(found.rows.values())

    def mark(self, files: Sequence[AddFile], found: Found) -> int:
        """Write updated and inserted rows, mark the changed rows deleted; returns the rows copied
        (files mostly changed are rewritten rather than marked)."""
        changed = [f for f in files if f.path in found.changed]
        rows = self.written(files, changed, found, keep_unchanged=False)
        if rows is not None:
            self.write(rows)
        marks = mark_rows(self.txn, changed, found.hits)
        if not marks.rewrite:
            return 0
        self.write(self.txn.read_files(marks.rewrite, deleted=found.hits, keep_row_ids=True))
        self.txn.remove(marks.rewrite)
        return counted_rows(self.txn, marks.rewrite) - sum(len(found.hits[f.path]) for f in marks.rewrite)

    def written(self, files: Sequence[AddFile], changed: Sequence[AddFile], found: Found,
                keep_unchanged: bool) -> DataFrame | None:
        """The rows the second job writes (None: none): of the files with a changed row (`changed`), the
        updated rows (and with keep_unchanged the rows no clause deletes), and the inserted rows.

        A source row is inserted only if it matches no target row, so inserts join the source
        with every file holding a matched row too. A source Spark would broadcast is joined with
        the target where the target lies (a left join, no target row shuffled) and the inserts
        come from an anti join (only the keys of the target shuffled); a larger one takes one
        outer join of the two."""
        inserts = bool(self.spec.not_matched)
        # Inserts must not match a target row: every file holding a matched row is read then.
        touched = found.changed | found.matched if inserts else found.changed
        read = [f for f in files if f.path in touched]
        from_target = bool(changed) and (keep_unchanged or self._acted(found, KINDS, "update"))
        # Which target rows are written: those no clause deletes, or only the updated ones.
        kept = ~self.among((MATCHED, NOT_MATCHED_BY_SOURCE), ("delete",)) if keep_unchanged else \
            self.among((MATCHED, NOT_MATCHED_BY_SOURCE), ("update",))
        # Whether target rows no source row matches are written too.
        whole_files = keep_unchanged or self._acted(found, (NOT_MATCHED_BY_SOURCE,), "update")
        if not read or broadcastable(self.source):
            return self._written_beside_target(changed, read, kept, from_target, whole_files)
        if not (from_target or inserts):
            return None
        extra = keep_unchanged and len(read) > len(changed)
        if extra:
            kept = kept & F.col(f"{self.t}.{FILE_COLUMN}").isin([found.spark_paths[f.path] for f in changed])
        return self._written_by_one_join(read, kept, whole_files, extra)

    def _acted(self, found: Found, kinds: Sequence[str], action: str) -> bool:
        """Whether a clause of `kinds` doing `action` matched some row in the first job."""
        return any(found.rows.get(i) for i in self.merge.ids(kinds, (action,)))

    def _written_beside_target(self, changed: Sequence[AddFile], read: Sequence[AddFile], kept: Column,
                               from_target: bool, whole_files: bool) -> DataFrame | None:
        """`written` for a source Spark broadcasts: the target's changed files joined with it
        where they lie, and the inserts from an anti join with the files `read`."""
        parts = []
        if from_target:
            source, target = self.sides(changed, self.source, file_info=False, broadcast=True, row_ids=True)
            joined = target.join(source, F.expr(self.spec.on), "left" if whole_files else "inner")
            parts.append(joined.withColumn(CLAUSE, self.clause()).filter(kept).select(*self.row(self.merge.copy)))
        if self.spec.not_matched:
            source = self.source.withColumn(SOURCE_FLAG, F.lit(True)).alias(self.s)
            if read:
                source = source.join(self.matchable(read), F.expr(self.spec.on), "left_anti")
            parts.append(self.inserted(source))
        return _union(parts)

    def _written_by_one_join(self, read: Sequence[AddFile], kept: Column, whole_files: bool,
                             file_info: bool) -> DataFrame:
        """`written` for a larger source: one join of the source with the files `read`, outer
        on the side(s) whose unmatched rows are written too."""
        inserts = bool(self.spec.not_matched)
        source, target = self.sides(read, self.source, file_info=file_info, row_ids=True)
        how = {(True, True): "full", (True, False): "left", (False, True): "right"}[(inserts, whole_files)] \
            if inserts or whole_files else "inner"
        joined = source.join(target, F.expr(self.spec.on), how).withColumn(CLAUSE, self.clause())
        has_target = F.col(f"{self.t}.{TARGET_FLAG}").isNotNull()
        keep = (has_target & kept) | (~has_target & self.among((NOT_MATCHED,), ("insert",)))
        return joined.filter(keep).select(*self.row(self.merge.copy))

    def record_changes(self, files: Sequence[AddFile], found: Found) -> None:
        """Change files for the rows as they were: each target row a clause updates or deletes
        (the rows written, inserted and updated, went to change files with them)."""
        changed = [f for f in files if f.path in found.changed]
        if changed:
            source, target = self.sides(changed, self.source, file_info=True)
            joined = target.join(source, F.expr(self.spec.on), "left" if self.spec.not_matched_by_source else "inner")
            acting = (joined.withColumn(CLAUSE, self.clause())
                      .filter(self.among((MATCHED, NOT_MATCHED_BY_SOURCE), ("update", "delete"))))
            updated = self.among((MATCHED, NOT_MATCHED_BY_SOURCE), ("update",))
            before = acting.select(*self.values(self.merge.copy, ()), F.col(f"{self.t}.{FILE_COLUMN}"),
                                   F.col(f"{self.t}.{ROW_COLUMN}"),
                                   F.when(updated, F.lit(PREIMAGE)).otherwise(F.lit(DELETE)).alias(CHANGE_TYPE))
            # A row several source rows match is deleted once (the only case Delta allows).
            self.txn.write_changes(before.dropDuplicates([FILE_COLUMN, ROW_COLUMN]).drop(FILE_COLUMN, ROW_COLUMN))

    def matchable(self, files: Sequence[AddFile]) -> DataFrame:
        """The target rows of `files` some source row could match: with key equalities in ON
        (`target.k = source.k`), only rows whose keys the (broadcast) source has, found where the
        files lie; what is left is small, so the anti join after it shuffles little."""
        target = self.txn.read_files(files).alias(self.t)
        sides = Sides.of(self.t, self.s, self.txn.snapshot.schema.names, self.source.columns)
        pairs = key_equalities(self.spec.on, sides)
        if not pairs:
            return target
        keys = self.source.alias(self.s).select(*[F.expr(sql).alias(f"__skiplake_key{i}")
                                                  for i, (_col, sql) in enumerate(pairs)])
        same = [quoted(self.t, col) == F.col(f"__skiplake_key{i}") for i, (col, _sql) in enumerate(pairs)]
        return target.join(F.broadcast(keys), functools.reduce(lambda a, b: a & b, same), "left_semi")


def broadcastable(df: DataFrame) -> bool:
    """Whether Spark's size estimate of `df` is under its broadcast join threshold (False where
    the estimate cannot be had). A Spark Connect client reads it from `EXPLAIN COST`."""
    if is_connect(df.sparkSession):
        try:
            size = estimated_size(df)
            threshold = conf_bytes(df.sparkSession.conf.get("spark.sql.autoBroadcastJoinThreshold", None), 10 << 20)
        except Exception:
            return False
        return size is not None and 0 <= size <= threshold
    try:
        threshold = int(df.sparkSession._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
        size = plan_size(df._jdf.queryExecution().optimizedPlan())
    except Exception:
        return False
    return 0 <= size <= threshold


def _union(parts: list[DataFrame]) -> DataFrame | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def run(txn: "Transaction", source: DataFrame, merge: ResolvedMerge) -> MergeMetrics:
    """Fill `txn` with the MERGE's actions (its schema change first, if any); return its metrics."""
    started = time.perf_counter()
    spec = merge.spec
    if merge.new_fields:
        txn.add_columns(merge.new_fields)
    r = _Run(txn, source, merge)
    plan = txn.scan(target_filter(txn.spark, txn.snapshot.schema, source, spec))
    found = Found()
    if spec.insert_only or not plan.files:
        # No target file can hold a row the source matches: only inserts act, each source row
        # once. (Joined with no target rows, the source's branch could be dropped by Spark
        # before it is read, and the count of its rows would never come.)
        scanned = time.perf_counter()
        r.insert_only(plan.files)
        copied = 0
    else:
        found = r.find(plan.files)
        scanned = time.perf_counter()
        copied = r.mark(plan.files, found) if r.dv else r.rewrite(plan.files, found)
        if r.changes:
            r.record_changes(plan.files, found)
    done = time.perf_counter()
    return _metrics(r, found, copied, started, scanned, done)


def _metrics(r: _Run, found: Found, copied: int, started: float, scanned: float, done: float) -> MergeMetrics:
    files = FileChanges.of(r.txn.actions)

    def rows(kind: str, action: str) -> int:
        return sum(found.rows.get(i, 0) for i in r.merge.ids((kind,), (action,)))

    matched_updated, by_source_updated = rows(MATCHED, "update"), rows(NOT_MATCHED_BY_SOURCE, "update")
    matched_deleted, by_source_deleted = rows(MATCHED, "delete"), rows(NOT_MATCHED_BY_SOURCE, "delete")
    updated = matched_updated + by_source_updated
    inserted = files.rows_added - updated - copied
    return MergeMetrics(
        num_source_rows=r.source_rows(),
        num_target_rows_inserted=inserted,
        num_target_rows_updated=updated,
        num_target_rows_matched_updated=matched_updated,
        num_target_rows_not_matched_by_source_updated=by_source_updated,
        num_target_rows_deleted=matched_deleted + by_source_deleted,
        num_target_rows_matched_deleted=matched_deleted,
        num_target_rows_not_matched_by_source_deleted=by_source_deleted,
        num_target_rows_copied=copied,
        num_output_rows=inserted + updated + copied,
        num_target_files_added=len(files.added),
        num_target_files_removed=len(files.removed),
        num_target_bytes_added=sum(a.size for a in files.added),
        num_target_bytes_removed=sum(f.size or 0 for f in files.removed),
        num_target_deletion_vectors_added=files.dv_added,
        num_target_deletion_vectors_removed=files.dv_removed,
        num_target_deletion_vectors_updated=files.dv_updated,
        execution_time_ms=round((done - started) * 1000),
        scan_time_ms=round((scanned - started) * 1000),
        rewrite_time_ms=round((done - scanned) * 1000),
    )
