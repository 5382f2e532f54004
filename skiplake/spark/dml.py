"""APPEND, OVERWRITE (replaceWhere), DELETE, UPDATE and MERGE as Spark jobs over planned files.

DELETE, UPDATE and MERGE rewrite only the files that hold matching rows: candidates come from
partition values and min/max stats; a first Spark pass over the candidates finds the files that
really contain a match (by `_metadata.file_path`); only those are rewritten. A file whose
partition values and stats prove every row matches a DELETE is dropped without being read.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skiplake.errors import (InvalidArgumentError, MergeConflictError, ReplaceWhereViolationError,
                             SchemaMismatchError)
from skiplake.skipping.metrics import evaluate, file_lookup
from skiplake.expr.parse import bind
from skiplake.expr.tree import Node
from skiplake.log.actions import AddFile
from skiplake.log.paths import absolute_path
from skiplake.spark.read import FILE_COLUMN, ROW_COLUMN, path_from_spark
from skiplake.spark.types import conform, spark_type
from skiplake.spark.write import WriteOptions

if TYPE_CHECKING:
    from skiplake.table import Table, Transaction

_REPLACE_WHERE_MARKER = "SKIPLAKE_REPLACE_WHERE_VIOLATION"


def _matches(where: str) -> Column:
    """Rows where `where` is TRUE (not FALSE, not NULL)."""
    return F.coalesce(F.expr(f"({where})"), F.lit(False))


def _quote(name: str) -> str:
    return f"`{name}`"


def _done(txn: "Transaction", operation: str, parameters: dict, metrics: dict | None,
          stage_only: bool) -> "int | Transaction":
    """Commit, or with stage_only hand back the transaction ready to commit (for callers that
    interleave several transactions, such as the conflict-matrix tests)."""
    txn.stage(operation, parameters, metrics)
    return txn if stage_only else txn.commit()


def append(table: "Table", df: DataFrame, merge_schema: bool, app_id: str | None, app_version: int | None,
           options: WriteOptions | None, stage_only: bool = False) -> "int | Transaction":
    txn = table.begin()
    if (app_id is None) != (app_version is None):
        raise InvalidArgumentError("give app_id and app_version together (an idempotent write needs both)")
    if app_id is not None and app_version is not None:
        done = txn.read_app_version(app_id)
        if done is not None and done >= app_version:
            table._finish(txn.snapshot.version)  # this job's write already committed: a retry writes nothing
            return txn.snapshot.version
        txn.set_app_version(app_id, app_version)
    txn.append(df, merge_schema, options)
    return _done(txn, "WRITE", {"mode": "Append", "partitionBy": txn.partition_columns}, None, stage_only)


def _touched_files(txn: "Transaction", candidates: Sequence[AddFile], where: str) -> tuple[list[AddFile], int]:
    """(the candidates holding at least one row matching `where`, the number of matching rows):
    one Spark pass over the candidates."""
    if not candidates:
        return [], 0
    df = _read_with_info(txn, candidates)
    counts = {path_from_spark(r[0]): r[1]
              for r in df.filter(_matches(where)).groupBy(FILE_COLUMN).count().collect()}
    return [f for f in candidates if absolute_path(txn.path, f.path) in counts], sum(counts.values())


def _read_with_info(txn: "Transaction", files: Sequence[AddFile]) -> DataFrame:
    from skiplake.spark.read import read_files
    txn.read_set.files.update(f.path for f in files)
    return read_files(txn.spark, txn.path, txn.snapshot.schema, txn.partition_columns, files, with_file_info=True)


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


def delete(table: "Table", where: str | None, stage_only: bool = False) -> "int | Transaction":
    txn = table.begin()
    _delete_rows(txn, where)  # its scan binds `where` before anything is written
    return _done(txn, "DELETE", {"predicate": [where] if where else []},
                 {"numDeletedRows": _rows_removed(txn)}, stage_only)


def overwrite(table: "Table", df: DataFrame, where: str | None, merge_schema: bool,
              options: WriteOptions | None, stage_only: bool = False) -> "int | Transaction":
    txn = table.begin()
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
            raise ReplaceWhereViolationError(table.path, where or "") from None
        raise
    params = {"mode": "Overwrite", "partitionBy": txn.partition_columns}
    if where:
        params["predicate"] = where
    return _done(txn, "WRITE", params, None, stage_only)


def update(table: "Table", where: str | None, assignments: Mapping[str, str],
           stage_only: bool = False) -> "int | Transaction":
    if not assignments:
        raise InvalidArgumentError("update needs at least one column in set=")
    txn = table.begin()
    schema = txn.snapshot.schema
    unknown = [c for c in assignments if schema.find(c) is None]
    if unknown:
        raise SchemaMismatchError(table.path, [f"update sets unknown column {c!r}" for c in unknown],
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
    return _done(txn, "UPDATE", {"predicate": [where] if where else []}, {"numUpdatedRows": updated},
                 stage_only)


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


def merge(table: "Table", source: DataFrame, on: str, s: str, t: str,
          when_matched_update: Mapping[str, str] | str | None, when_matched_update_condition: str | None,
          when_matched_delete: bool | str, when_not_matched_insert: Mapping[str, str] | str | None,
          when_not_matched_insert_condition: str | None, stage_only: bool = False) -> "int | Transaction":
    if not (when_matched_update or when_matched_delete or when_not_matched_insert):
        raise InvalidArgumentError("merge needs at least one of when_matched_update, when_matched_delete, "
                                   "when_not_matched_insert")
    txn = table.begin()
    schema = txn.snapshot.schema
    names = schema.names
    upd = _assignments(when_matched_update, names, s, "when_matched_update", table.path) \
        if when_matched_update else None
    ins = _assignments(when_not_matched_insert, names, s, "when_not_matched_insert", table.path) \
        if when_not_matched_insert else None
    src = source.alias(s)
    # Conjuncts of ON that name only target columns prune the target's files (and narrow what
    # this MERGE conflicts with): a target row outside them can match no source row.
    target_filter = target_only_conjuncts(on, t)
    plan = txn.scan(target_filter)
    params = {"predicate": on, "matchedPredicates": json.dumps(
        ([{"actionType": "delete"}] if when_matched_delete else []) + ([{"actionType": "update"}] if upd else [])),
        "notMatchedPredicates": json.dumps([{"actionType": "insert"}] if ins else [])}

    if upd is None and not when_matched_delete:
        # Insert-only MERGE: new rows are the source rows with no match; no file is rewritten.
        target = txn.read_files(plan.files).alias(t)
        new = src.join(target, F.expr(on), "left_anti")
        if when_not_matched_insert_condition:
            new = new.filter(_matches(when_not_matched_insert_condition))
        assert ins is not None
        txn.write(conform(new.select(*[F.expr(ins[c]).alias(c) for c in names if c in ins]), schema))
        return _done(txn, "MERGE", params, None, stage_only)

    target = _read_with_info(txn, plan.files).alias(t)
    matched = target.join(src, F.expr(on), "inner")
    dup = matched.groupBy(FILE_COLUMN, ROW_COLUMN).count().filter("count > 1").limit(1).collect()
    if dup:
        raise MergeConflictError(table.path, path_from_spark(dup[0][FILE_COLUMN]))
    hits = {path_from_spark(r[0]) for r in matched.select(FILE_COLUMN).distinct().collect()}
    touched = [f for f in plan.files if absolute_path(table.path, f.path) in hits]

    tgt = txn.read_files(touched).withColumn("__sl_t", F.lit(True)).alias(t)
    srcm = source.withColumn("__sl_s", F.lit(True)).alias(s)
    joined = tgt.join(srcm, F.expr(on), "full_outer" if ins else "left_outer")
    is_matched = F.col(f"{t}.__sl_t").isNotNull() & F.col(f"{s}.__sl_s").isNotNull()
    source_only = F.col(f"{t}.__sl_t").isNull()
    if when_matched_delete is True:
        delete_applies = F.lit(True)
    elif isinstance(when_matched_delete, str):
        delete_applies = _matches(when_matched_delete)
    else:
        delete_applies = F.lit(False)
    update_applies = ~delete_applies & (
        _matches(when_matched_update_condition) if when_matched_update_condition else F.lit(True)) \
        if upd else F.lit(False)
    insert_applies = (_matches(when_not_matched_insert_condition) if when_not_matched_insert_condition
                      else F.lit(True)) if ins else F.lit(False)
    keep = ~(is_matched & delete_applies) & ~(source_only & ~insert_applies)
    cols = []
    for f in schema.fields:
        current = F.col(f"{t}.`{f.name}`")
        value = current
        if upd and f.name in upd:
            value = F.when(is_matched & update_applies, F.expr(upd[f.name]).cast(spark_type(f.type))).otherwise(value)
        if ins:
            inserted = F.expr(ins[f.name]).cast(spark_type(f.type)) if f.name in ins else F.lit(None).cast(
                spark_type(f.type))
            value = F.when(source_only, inserted).otherwise(value)
        cols.append(value.alias(f.name))
    out = joined.filter(keep).select(*cols)
    txn.write(conform(out, schema))
    txn.remove(touched)
    return _done(txn, "MERGE", params, None, stage_only)
