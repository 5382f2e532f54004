"""APPEND, OVERWRITE (replaceWhere), DELETE, UPDATE and MERGE as Spark jobs over planned files.

DELETE, UPDATE and MERGE rewrite only the files that hold matching rows: candidates come from
partition values and min/max stats; a first Spark pass over the candidates finds the files that
really contain a match (by `_metadata.file_path`); only those are rewritten. A file whose
partition values and stats prove every row matches a DELETE is dropped without being read.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError, ReplaceWhereViolationError, SchemaMismatchError
from skiplake.expr.parse import bind, referenced_columns
from skiplake.expr.tree import Node
from skiplake.log.actions import AddCDCFile, AddFile
from skiplake.log.changes import CHANGE_TYPE, DELETE, INSERT, POSTIMAGE, PREIMAGE
from skiplake.log.features import change_data_feed_enabled, deletion_vectors_enabled
from skiplake.log.paths import file_key
from skiplake.skipping.metrics import evaluate, file_lookup
from skiplake.spark.dml.row_marks import counted_rows, logical_rows, mark_rows, matching_rows
from skiplake.spark.reads.planned_reads import FILE_COLUMN, spark_file_key
from skiplake.spark.reads.row_ids import kept_ids
from skiplake.spark.session.spark_types import conform, spark_type
from skiplake.spark.writes.data_files import WriteOptions
from skiplake.spark.writes.enforcement import with_generated
from skiplake.txn.constraints import generated_columns
from skiplake.txn.identity import identity_columns

if TYPE_CHECKING:
    from skiplake.spark.writes.transaction import Transaction

_REPLACE_WHERE_MARKER = "SKIPLAKE_REPLACE_WHERE_VIOLATION"


def matches(where: str) -> Column:
    """Rows where `where` is TRUE (not FALSE, not NULL)."""
    return F.coalesce(F.expr(f"({where})"), F.lit(False))


def _quote(name: str) -> str:
    return f"`{name}`"


def append(txn: "Transaction", df: DataFrame, merge_schema: bool = False, app_id: str | None = None,
           app_version: int | None = None, options: WriteOptions | None = None) -> "Transaction":
    """Stage the rows of `df` as new files. With app_id/app_version, a version already committed
    stages nothing (an idempotent retry of a job)."""
    if not txn.claim_app_version(app_id, app_version):
        return txn  # this job's write already committed: a retry writes nothing
    txn.append(df, merge_schema, options)
    return txn.stage("WRITE", {"mode": "Append", "partitionBy": txn.partition_columns})


def _touched_files(txn: "Transaction", candidates: Sequence[AddFile], where: str) -> tuple[list[AddFile], int]:
    """(the candidates holding at least one row matching `where`, the number of matching rows):
    one Spark pass over the candidates."""
    if not candidates:
        return [], 0
    df = txn.read_files(candidates, with_file_info=True)
    counts = {spark_file_key(r[0]): r[1]
              for r in df.filter(matches(where)).groupBy(FILE_COLUMN).count().collect()}
    return [f for f in candidates if file_key(txn.path, f.path) in counts], sum(counts.values())


def _split_by_proof(txn: "Transaction", files: Sequence[AddFile], node: Node) -> tuple[list[AddFile], list[AddFile]]:
    """(files every row of which matches, according to partition values and stats; the rest)."""
    whole: list[AddFile] = []
    partial: list[AddFile] = []
    for f in files:
        outcomes = evaluate(node, file_lookup(txn.snapshot.schema, f.partitionValues or {}, f.stats))
        (whole if outcomes == frozenset({True}) else partial).append(f)
    return whole, partial


def _delete_rows(txn: "Transaction", where: str | None, options: WriteOptions | None = None) -> tuple[int, int]:
    """Remove the rows matching `where` within the transaction: (files removed, files rewritten)."""
    plan = txn.scan(where)
    if where is None:
        txn.remove(plan.files)
        return len(plan.files), 0
    assert plan.predicate is not None
    whole, partial = _split_by_proof(txn, plan.files, plan.predicate)
    if deletion_vectors_enabled(txn.snapshot.configuration):
        # Mark the matching rows; only files mostly deleted are rewritten.
        hits = matching_rows(txn, partial, matches(where))
        touched = mark_rows(txn, partial, hits).rewrite
        changed = [f for f in partial if f.path in hits]
    else:
        touched, _ = _touched_files(txn, partial, where)
        changed = touched
    if touched:
        kept = txn.read_files(touched, keep_row_ids=True).filter(~matches(where))
        txn.write(kept, options=options)
        if records_changes(txn):
            # A commit that rewrites rows records its changes in change files, and a reader takes
            # such a commit's changes from them alone: every row it deletes goes in.
            txn.write_changes(as_change(txn.read_files(whole + changed).filter(matches(where)), DELETE))
    txn.remove(whole + touched)
    return len(whole) + len(touched), len(touched)


def records_changes(txn: "Transaction") -> bool:
    """Whether the table's change data feed is on (this transaction writes change files)."""
    return change_data_feed_enabled((txn.new_metadata or txn.snapshot.metadata).configuration)


def as_change(df: DataFrame, kind: str) -> DataFrame:
    """`df`'s rows as change data of one kind (CHANGE_TYPE)."""
    return df.withColumn(CHANGE_TYPE, F.lit(kind))


def _rows_removed(txn: "Transaction") -> int:
    before = counted_rows(txn, txn.removed_files)
    after = sum(logical_rows(a) for a in txn.actions if isinstance(a, AddFile))
    return before - after


def delete(txn: "Transaction", where: str | None) -> "Transaction":
    """Stage deleting the rows matching `where` (every row when None), rewriting or marking only the files
    that hold such a row."""
    _delete_rows(txn, where)  # its scan binds `where` before anything is written
    return txn.stage("DELETE", {"predicate": [where] if where else []}, {"numDeletedRows": _rows_removed(txn)})


def overwrite(txn: "Transaction", df: DataFrame, where: str | None = None, merge_schema: bool = False,
              options: WriteOptions | None = None) -> "Transaction":
    """Stage replacing the whole table, or only the rows matching `where` (replaceWhere)."""
    data = txn.prepare(df, merge_schema)
    if where is not None:
        bind(where, txn.schema)
        # Checked inside the write job itself: no extra pass over the input.
        data = data.filter(F.when(~matches(where), F.raise_error(F.lit(_REPLACE_WHERE_MARKER)))
                           .otherwise(F.lit(True)))
    _delete_rows(txn, where, options)
    try:
        if any(isinstance(a, AddCDCFile) for a in txn.actions):
            # The deleted rows went to change files: the new rows must be there too.
            data = data.persist()
            try:
                txn.write(data, options=options, new_rows=True)
                txn.write_changes(as_change(data, INSERT))
            finally:
                data.unpersist()
        else:
            txn.write(data, options=options, new_rows=True)
    except Exception as e:
        if _REPLACE_WHERE_MARKER in str(e):
            raise ReplaceWhereViolationError(txn.path, where or "") from None
        raise
    params = {"mode": "Overwrite", "partitionBy": txn.partition_columns}
    if where:
        params["predicate"] = where
    return txn.stage("WRITE", params)


def update(txn: "Transaction", where: str | None, assignments: Mapping[str, str]) -> "Transaction":
    """Stage setting `assignments` (column -> SQL expression) on the rows matching `where` (every row
    when None), rewriting or marking only the files that hold such a row.

    No assignment, or one to an identity column, is an InvalidArgumentError; one to an unknown
    column a SchemaMismatchError."""
    schema = txn.snapshot.schema
    sets = _checked_assignments(txn, assignments)
    plan = txn.scan(where)
    cond = F.lit(True) if where is None else matches(where)
    updated_rows = _Updater(txn, sets, cond)
    if deletion_vectors_enabled(txn.snapshot.configuration) and where is not None:
        # The updated rows are written anew and marked deleted where they were; a file mostly
        # updated is rewritten with the rows that stay.
        hits = matching_rows(txn, plan.files, cond)
        touched = [f for f in plan.files if f.path in hits]
        if touched:
            txn.write(updated_rows(txn.read_files(touched, keep_row_ids=True).filter(cond)))
            _record_updates(txn, touched, cond, updated_rows)
            marks = mark_rows(txn, touched, hits)
            if marks.rewrite:
                kept = txn.read_files(marks.rewrite, keep_row_ids=True).filter(~cond)
                txn.write(conform(kept, schema, txn.row_id_columns))
                txn.remove(marks.rewrite)
        return txn.stage("UPDATE", {"predicate": [where]}, {"numUpdatedRows": sum(len(r) for r in hits.values())})
    if where is None:
        touched, updated = plan.files, counted_rows(txn, plan.files)
    else:
        touched, updated = _touched_files(txn, plan.files, where)
    if touched:
        txn.write(updated_rows(txn.read_files(touched, keep_row_ids=True)))
        _record_updates(txn, touched, cond, updated_rows)
        txn.remove(touched)
    return txn.stage("UPDATE", {"predicate": [where] if where else []}, {"numUpdatedRows": updated})


def _checked_assignments(txn: "Transaction", assignments: Mapping[str, str]) -> dict[str, str]:
    """The assignments by the columns' own spelling; refused when empty, naming an unknown
    column, or setting an identity column."""
    if not assignments:
        raise InvalidArgumentError("update needs at least one column in set=")
    schema = txn.snapshot.schema
    unknown = [c for c in assignments if schema.find(c) is None]
    if unknown:
        raise SchemaMismatchError(txn.path, [f"update sets unknown column {c!r}" for c in unknown],
                                  f"The table's columns are {', '.join(schema.names)}.")
    sets = {schema.field(c).name: e for c, e in assignments.items()}
    fixed = [c for c in sets if c in identity_columns(schema)]
    if fixed:
        raise InvalidArgumentError(f"{txn.path}: update sets the identity column(s) {fixed}, whose values "
                                   "are assigned once and never changed")
    return sets


class _Updater:
    """Rows as UPDATE writes them: the assignments applied where `cond` holds, generated columns
    that read a set column following it (those it sets are checked), and, on rows read with
    their row ids, each row's id kept (an updated row's commit version becomes the new file's)."""

    def __init__(self, txn: "Transaction", sets: Mapping[str, str], cond: Column) -> None:
        self.schema = schema = txn.snapshot.schema
        self.cols = [F.when(cond, F.expr(sets[f.name]).cast(spark_type(f.type))).otherwise(F.col(_quote(f.name)))
                     .alias(f.name) if f.name in sets else F.col(_quote(f.name)) for f in schema.fields]
        self.follow = [n for n, e in generated_columns(schema).items()
                       if n not in sets and set(referenced_columns(e, schema)) & set(sets)]
        self.ids = ids = txn.row_id_columns
        self.id_cols = kept_ids(ids, cond) if ids else []

    def __call__(self, rows: DataFrame) -> DataFrame:
        kept = self.id_cols if set(self.ids) <= set(rows.columns) else []
        return with_generated(conform(rows.select(*self.cols, *kept), self.schema, self.ids), self.schema, self.follow)


def _record_updates(txn: "Transaction", files: Sequence[AddFile], cond: Column,
                    updated: Callable[[DataFrame], DataFrame]) -> None:
    """With the change data feed on, the updated rows of `files` as they were and as they are."""
    if not records_changes(txn):
        return
    rows = txn.read_files(files).filter(cond)
    txn.write_changes(as_change(rows, PREIMAGE).unionByName(as_change(updated(rows), POSTIMAGE)))
