"""APPEND, OVERWRITE (replaceWhere), DELETE, UPDATE and MERGE as Spark jobs over planned files.

DELETE, UPDATE and MERGE rewrite only the files that hold matching rows: candidates come from
partition values and min/max stats; a first Spark pass over the candidates finds the files that
really contain a match (by `_metadata.file_path`); only those are rewritten. A file whose
partition values and stats prove every row matches a DELETE is dropped without being read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skiplake.errors import InvalidArgumentError, MergeConflictError, ReplaceWhereViolationError, SchemaMismatchError
from skiplake.expr.parse import bind
from skiplake.expr.tree import Node
from skiplake.log.actions import AddFile
from skiplake.log.paths import absolute_path
from skiplake.skipping.metrics import evaluate, file_lookup
from skiplake.spark.read import FILE_COLUMN, ROW_COLUMN, path_from_spark
from skiplake.spark.types import conform, spark_type
from skiplake.spark.write import WriteOptions

if TYPE_CHECKING:
    from skiplake.spark.transaction import Transaction

_REPLACE_WHERE_MARKER = "SKIPLAKE_REPLACE_WHERE_VIOLATION"


def _matches(where: str) -> Column:
    """Rows where `where` is TRUE (not FALSE, not NULL)."""
    return F.coalesce(F.expr(f"({where})"), F.lit(False))


def _quote(name: str) -> str:
    return f"`{name}`"


def append(txn: "Transaction", df: DataFrame, merge_schema: bool = False, app_id: str | None = None,
           app_version: int | None = None, options: WriteOptions | None = None) -> "Transaction":
    """Stage the rows of `df` as new files. With app_id/app_version, a version already committed
    stages nothing (an idempotent retry of a job)."""
    if (app_id is None) != (app_version is None):
        raise InvalidArgumentError("give app_id and app_version together (an idempotent write needs both)")
    if app_id is not None and app_version is not None:
        done = txn.read_app_version(app_id)
        if done is not None and done >= app_version:
            return txn.stage_no_op()  # this job's write already committed: a retry writes nothing
        txn.set_app_version(app_id, app_version)
    txn.append(df, merge_schema, options)
    return txn.stage("WRITE", {"mode": "Append", "partitionBy": txn.partition_columns})


def _touched_files(txn: "Transaction", candidates: Sequence[AddFile], where: str) -> tuple[list[AddFile], int]:
    """(the candidates holding at least one row matching `where`, the number of matching rows):
    one Spark pass over the candidates."""
    if not candidates:
        return [], 0
    df = txn.read_files(candidates, with_file_info=True)
    counts = {path_from_spark(r[0]): r[1]
              for r in df.filter(_matches(where)).groupBy(FILE_COLUMN).count().collect()}
    return [f for f in candidates if absolute_path(txn.path, f.path) in counts], sum(counts.values())


def _split_by_proof(txn: "Transaction", files: Sequence[AddFile], node: Node) -> tuple[list[AddFile], list[AddFile]]:
    """(files every row of which matches, according to partition values and stats; the rest)."""
    whole, partial = [], []
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
    touched, _ = _touched_files(txn, partial, where)
    if touched:
        kept = txn.read_files(touched).filter(~_matches(where))
        txn.write(kept, options=options)
    txn.remove(whole + touched)
    return len(whole) + len(touched), len(touched)


def _rows_removed(txn: "Transaction") -> int:
    before = sum(f.num_records or 0 for f in txn.removed_files)
    after = sum(a.num_records or 0 for a in txn.actions if isinstance(a, AddFile))
    return before - after


def delete(txn: "Transaction", where: str | None) -> "Transaction":
    _delete_rows(txn, where)  # its scan binds `where` before anything is written
    return txn.stage("DELETE", {"predicate": [where] if where else []}, {"numDeletedRows": _rows_removed(txn)})


def overwrite(txn: "Transaction", df: DataFrame, where: str | None = None, merge_schema: bool = False,
              options: WriteOptions | None = None) -> "Transaction":
    """Stage replacing the whole table, or only the rows matching `where` (replaceWhere)."""
    data = txn.prepare(df, merge_schema)
    if where is not None:
        bind(where, txn.schema)
        # Checked inside the write job itself: no extra pass over the input.
        data = data.filter(F.when(~_matches(where), F.raise_error(F.lit(_REPLACE_WHERE_MARKER)))
                           .otherwise(F.lit(True)))
    _delete_rows(txn, where, options)
    try:
        txn.write(data, options=options)
    except Exception as e:
        if _REPLACE_WHERE_MARKER in str(e):
            raise ReplaceWhereViolationError(txn.path, where or "") from None
        raise
    params = {"mode": "Overwrite", "partitionBy": txn.partition_columns}
    if where:
        params["predicate"] = where
    return txn.stage("WRITE", params)


def update(txn: "Transaction", where: str | None, assignments: Mapping[str, str]) -> "Transaction":
    if not assignments:
        raise InvalidArgumentError("update needs at least one column in set=")
    schema = txn.snapshot.schema
    unknown = [c for c in assignments if schema.find(c) is None]
    if unknown:
        raise SchemaMismatchError(txn.path, [f"update sets unknown column {c!r}" for c in unknown],
                                  f"The table's columns are {', '.join(schema.names)}.")
    plan = txn.scan(where)
    if where is None:
        touched, updated = plan.files, sum(f.num_records or 0 for f in plan.files)
    else:
        touched, updated = _touched_files(txn, plan.files, where)
    if touched:
        cond = F.lit(True) if where is None else _matches(where)
        sets = {schema.field(c).name: e for c, e in assignments.items()}
        cols = []
        for f in schema.fields:
            if f.name in sets:
                new = F.expr(sets[f.name]).cast(spark_type(f.type))
                cols.append(F.when(cond, new).otherwise(F.col(_quote(f.name))).alias(f.name))
            else:
                cols.append(F.col(_quote(f.name)))
        txn.write(conform(txn.read_files(touched).select(*cols), schema))
        txn.remove(touched)
    return txn.stage("UPDATE", {"predicate": [where] if where else []}, {"numUpdatedRows": updated})


def target_only_conjuncts(on: str, target_alias: str) -> str | None:
    """The AND-conjuncts of a MERGE condition that reference only `target_alias.` columns, as
    unqualified SQL; None when there are none."""
    from sqlglot import exp

    from skiplake.expr.parse import parse_sql
    tree = parse_sql(on)
    parts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    kept = []
    for part in parts:
        cols = list(part.find_all(exp.Column))
        if not cols or any(c.table.lower() != target_alias.lower() for c in cols):
            continue
        if any(isinstance(n, (exp.Subquery, exp.Select)) for n in part.walk()):
            continue
        bare = part.transform(lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
        kept.append(bare.sql(dialect="spark"))
    return " AND ".join(f"({k})" for k in kept) if kept else None


def _assignments(spec: Mapping[str, str] | str, columns: list[str], alias: str, clause: str,
                 path: str) -> dict[str, str]:
    if spec == "*":
        return {c: f"{alias}.`{c}`" for c in columns}
    if isinstance(spec, str):
        raise InvalidArgumentError(f"{clause} must be a mapping of column to expression, or '*'")
    lowered = {c.lower(): c for c in columns}
    out = {}
    for k, v in spec.items():
        if k.lower() not in lowered:
            raise SchemaMismatchError(path, [f"{clause} names unknown column {k!r}"],
                                      f"The table's columns are {', '.join(columns)}.")
        out[lowered[k.lower()]] = v
    return out


@dataclass(frozen=True)
class MergeClauses:
    """MERGE INTO target USING source ON `on`, and what happens to matched and unmatched rows.

    Matched rows are deleted (when_matched_delete: True, or a condition) else updated
    (when_matched_update: {column: expression} or "*"); unmatched source rows are inserted
    (when_not_matched_insert: {column: expression} or "*"). Expressions name columns as
    `target.col` / `source.col` (or the aliases given)."""
    on: str
    source_alias: str = "source"
    target_alias: str = "target"
    when_matched_update: Mapping[str, str] | str | None = None
    when_matched_update_condition: str | None = None
    when_matched_delete: bool | str = False
    when_not_matched_insert: Mapping[str, str] | str | None = None
    when_not_matched_insert_condition: str | None = None

    def parameters(self) -> dict[str, str]:
        """operationParameters of the MERGE commit, as Delta writes them."""
        matched = ([{"actionType": "delete"}] if self.when_matched_delete else []) + (
            [{"actionType": "update"}] if self.when_matched_update else [])
        inserted = [{"actionType": "insert"}] if self.when_not_matched_insert else []
        return {"predicate": self.on, "matchedPredicates": json.dumps(matched),
                "notMatchedPredicates": json.dumps(inserted)}


def merge(txn: "Transaction", source: DataFrame, clauses: MergeClauses) -> "Transaction":
    c = clauses
    if not (c.when_matched_update or c.when_matched_delete or c.when_not_matched_insert):
        raise InvalidArgumentError("merge needs at least one of when_matched_update, when_matched_delete, "
                                   "when_not_matched_insert")
    names = txn.snapshot.schema.names
    upd = _assignments(c.when_matched_update, names, c.source_alias, "when_matched_update", txn.path) \
        if c.when_matched_update else None
    ins = _assignments(c.when_not_matched_insert, names, c.source_alias, "when_not_matched_insert", txn.path) \
        if c.when_not_matched_insert else None
    # Conjuncts of ON that name only target columns prune the target's files (and narrow what
    # this MERGE conflicts with): a target row outside them can match no source row.
    plan = txn.scan(target_only_conjuncts(c.on, c.target_alias))
    if upd is None and not c.when_matched_delete:
        assert ins is not None
        _insert_unmatched(txn, source, c, ins, plan.files)
    else:
        _rewrite_matched(txn, source, c, upd, ins, plan.files)
    return txn.stage("MERGE", c.parameters())


def _insert_unmatched(txn: "Transaction", source: DataFrame, c: MergeClauses, ins: dict[str, str],
                      files: Sequence[AddFile]) -> None:
    """Insert-only MERGE: new rows are the source rows with no match; no file is rewritten."""
    target = txn.read_files(files).alias(c.target_alias)
    new = source.alias(c.source_alias).join(target, F.expr(c.on), "left_anti")
    if c.when_not_matched_insert_condition:
        new = new.filter(_matches(c.when_not_matched_insert_condition))
    schema = txn.snapshot.schema
    txn.write(conform(new.select(*[F.expr(ins[n]).alias(n) for n in schema.names if n in ins]), schema))


def _matched_files(txn: "Transaction", source: DataFrame, c: MergeClauses, files: Sequence[AddFile]) -> list[AddFile]:
    """The candidate files holding a target row some source row matches; a target row matched
    twice is a MergeConflictError, as in Delta."""
    target = txn.read_files(files, with_file_info=True).alias(c.target_alias)
    matched = target.join(source.alias(c.source_alias), F.expr(c.on), "inner")
    dup = matched.groupBy(FILE_COLUMN, ROW_COLUMN).count().filter("count > 1").limit(1).collect()
    if dup:
        raise MergeConflictError(txn.path, path_from_spark(dup[0][FILE_COLUMN]))
    hits = {path_from_spark(r[0]) for r in matched.select(FILE_COLUMN).distinct().collect()}
    return [f for f in files if absolute_path(txn.path, f.path) in hits]


def _rewrite_matched(txn: "Transaction", source: DataFrame, c: MergeClauses, upd: dict[str, str] | None,
                     ins: dict[str, str] | None, files: Sequence[AddFile]) -> None:
    """Rewrite the files holding matched rows (deleted, updated or kept), plus inserted rows."""
    t, s = c.target_alias, c.source_alias
    touched = _matched_files(txn, source, c, files)
    tgt = txn.read_files(touched).withColumn("__sl_t", F.lit(True)).alias(t)
    srcm = source.withColumn("__sl_s", F.lit(True)).alias(s)
    joined = tgt.join(srcm, F.expr(c.on), "full_outer" if ins else "left_outer")
    is_matched = F.col(f"{t}.__sl_t").isNotNull() & F.col(f"{s}.__sl_s").isNotNull()
    source_only = F.col(f"{t}.__sl_t").isNull()
    delete_applies = _condition(c.when_matched_delete)
    update_applies = ~delete_applies & _condition(c.when_matched_update_condition or True) if upd else F.lit(False)
    insert_applies = _condition(c.when_not_matched_insert_condition or True) if ins else F.lit(False)
    keep = ~(is_matched & delete_applies) & ~(source_only & ~insert_applies)
    schema = txn.snapshot.schema
    cols = []
    for f in schema.fields:
        value = F.col(f"{t}.`{f.name}`")
        if upd and f.name in upd:
            value = F.when(is_matched & update_applies, F.expr(upd[f.name]).cast(spark_type(f.type))).otherwise(value)
        if ins:
            inserted = F.expr(ins[f.name]) if f.name in ins else F.lit(None)
            value = F.when(source_only, inserted.cast(spark_type(f.type))).otherwise(value)
        cols.append(value.alias(f.name))
    txn.write(conform(joined.filter(keep).select(*cols), schema))
    txn.remove(touched)


def _condition(when: bool | str | None) -> Column:
    """A clause's condition: always (True), never (False/None), or rows where SQL text is TRUE."""
    if isinstance(when, str):
        return _matches(when)
    return F.lit(bool(when))
