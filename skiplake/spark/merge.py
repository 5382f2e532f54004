"""MERGE INTO as Spark jobs over planned files, with the target pruned by the source's keys.

The target's files are planned from two kinds of conjuncts of the ON condition: those naming
only target columns (`target.d = '2024-01-01'`) and the equalities between a target column and
the source (`target.k = source.k`): the source's distinct keys are computed first and prune the
target like a dynamic file pruning build side (the seed: "MERGE uses the source's join-key values
when the condition is an equality"). The transaction records that narrower read, so two MERGEs
whose sources touch disjoint key ranges of a clustered table do not conflict.

Then a first Spark pass over the candidate files finds the files holding a matched target row
(a target row matched twice is a MergeConflictError, as in Delta), and only those are rewritten:
matched rows deleted or updated, unmatched source rows inserted. With deletion vectors on, those
files are not rewritten: the rows a clause deletes or updates are marked deleted in them, and
only updated and inserted rows are written (skiplake.spark.row_marks).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from skiplake.errors import InvalidArgumentError, MergeConflictError, SchemaMismatchError
from skiplake.expr.parse import bind, parse_sql
from skiplake.expr.tree import And, Col, Node
from skiplake.log.actions import AddFile
from skiplake.log.features import deletion_vectors_enabled
from skiplake.log.paths import file_key
from skiplake.log.schema import INTEGER_TYPES, is_primitive
from skiplake.spark.build_keys import distinct_keys
from skiplake.spark.dml import matches
from skiplake.spark.read import FILE_COLUMN, ROW_COLUMN, path_from_spark, spark_file_key
from skiplake.spark.row_marks import mark_rows, rows_by_file
from skiplake.spark.settings import DynamicPruningSettings
from skiplake.spark.types import conform, spark_type

if TYPE_CHECKING:
    from skiplake.spark.transaction import Transaction


def _conjuncts(on: str) -> list[exp.Expression]:
    tree = parse_sql(on)
    return list(tree.flatten()) if isinstance(tree, exp.And) else [tree]


def _only(part: exp.Expression, alias: str) -> bool:
    """Whether an expression names columns of `alias` only (at least one), and no subquery."""
    cols = list(part.find_all(exp.Column))
    return bool(cols) and all(c.table.lower() == alias.lower() for c in cols) and not any(
        isinstance(n, (exp.Subquery, exp.Select)) for n in part.walk())


def target_only_conjuncts(on: str, target_alias: str) -> str | None:
    """The AND-conjuncts of a MERGE condition that reference only `target_alias.` columns, as
    unqualified SQL; None when there are none."""
    kept = []
    for part in _conjuncts(on):
        if _only(part, target_alias):
            bare = part.transform(lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
            kept.append(bare.sql(dialect="spark"))
    return " AND ".join(f"({k})" for k in kept) if kept else None


def key_equalities(on: str, target_alias: str, source_alias: str) -> list[tuple[str, str]]:
    """(target column, source expression as SQL) of each `target.col = <source expression>`
    conjunct of a MERGE condition (either way round)."""
    out = []
    for part in _conjuncts(on):
        if not isinstance(part, exp.EQ):
            continue
        for t, other in ((part.left, part.right), (part.right, part.left)):
            if isinstance(t, exp.Column) and t.table.lower() == target_alias.lower() and _only(other, source_alias):
                out.append((t.name, other.sql(dialect="spark")))
                break
    return out


def _source_keys_filter(txn: "Transaction", source: DataFrame, c: "MergeClauses") -> Node | None:
    """`target.k IN (the source's keys)` for each key equality whose two sides compare as the
    target's stats do (dynamic file pruning of the target by the source); None when none does."""
    settings = DynamicPruningSettings.of(txn.spark)
    pairs = key_equalities(c.on, c.target_alias, c.source_alias) if settings.enabled else []
    if not pairs:
        return None
    src = source.alias(c.source_alias)
    exprs = [F.expr(sql) for _col, sql in pairs]
    types = [f.dataType.jsonValue() for f in src.select(*exprs).schema.fields]
    schema = txn.snapshot.schema
    chosen: list[tuple[Col, Column]] = []
    for (name, _sql), expr, source_type in zip(pairs, exprs, types):
        f = schema.find(name)
        if f is not None and _comparable(f.type, source_type):
            chosen.append((Col(f.name, f.type), expr))
    if not chosen:
        return None
    keys = distinct_keys(src, [e for _col, e in chosen])
    filters = [keys.key_filter(i, col, settings.max_values, settings.max_ranges).predicate
               for i, (col, _e) in enumerate(chosen)]
    return filters[0] if len(filters) == 1 else And(tuple(filters))


def _comparable(target_type: object, source_type: object) -> bool:
    """Whether Spark compares the two as the target's own values (so its stats apply): the same
    type, or two integer types; never floating point (joins normalize NaN and -0.0)."""
    if not is_primitive(target_type) or target_type in ("float", "double", "binary"):
        return False
    return target_type == source_type or (target_type in INTEGER_TYPES and source_type in INTEGER_TYPES)


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
    # Conjuncts of ON that name only target columns, and the source's keys, prune the target's
    # files (and narrow what this MERGE conflicts with): a target row outside them matches nothing.
    static = target_only_conjuncts(c.on, c.target_alias)
    parts = [p for p in (bind(static, txn.schema) if static else None, _source_keys_filter(txn, source, c)) if p]
    plan = txn.scan(None if not parts else parts[0] if len(parts) == 1 else And(tuple(parts)))
    if upd is None and not c.when_matched_delete:
        assert ins is not None
        _insert_unmatched(txn, source, c, ins, plan.files)
    elif deletion_vectors_enabled(txn.snapshot.configuration):
        _mark_matched(txn, source, c, upd, ins, plan.files)
    else:
        _rewrite_matched(txn, source, c, upd, ins, plan.files)
    return txn.stage("MERGE", c.parameters())


def _insert_unmatched(txn: "Transaction", source: DataFrame, c: MergeClauses, ins: dict[str, str],
                      files: Sequence[AddFile]) -> None:
    """Insert-only MERGE: new rows are the source rows with no match; no file is rewritten."""
    target = txn.read_files(files).alias(c.target_alias)
    new = source.alias(c.source_alias).join(target, F.expr(c.on), "left_anti")
    if c.when_not_matched_insert_condition:
        new = new.filter(matches(c.when_not_matched_insert_condition))
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
    hits = {spark_file_key(r[0]) for r in matched.select(FILE_COLUMN).distinct().collect()}
    return [f for f in files if file_key(txn.path, f.path) in hits]


@dataclass
class _Joined:
    """The target rows of some files joined with the source, and what each clause does to them."""
    rows: DataFrame
    matched: Column          # a target row and a source row
    source_only: Column      # a source row no target row matches
    deleted: Column          # a matched target row the delete clause removes
    updated: Column          # a matched target row the update clause changes
    inserted: Column         # a source-only row the insert clause adds
    values: list[Column]     # the row as the table's columns, after the clauses


def _join(txn: "Transaction", source: DataFrame, c: MergeClauses, upd: dict[str, str] | None,
          ins: dict[str, str] | None, files: Sequence[AddFile], with_file_info: bool = False) -> _Joined:
    t, s = c.target_alias, c.source_alias
    tgt = txn.read_files(files, with_file_info=with_file_info).withColumn("__sl_t", F.lit(True)).alias(t)
    srcm = source.withColumn("__sl_s", F.lit(True)).alias(s)
    joined = tgt.join(srcm, F.expr(c.on), "full_outer" if ins else "left_outer")
    is_matched = F.col(f"{t}.__sl_t").isNotNull() & F.col(f"{s}.__sl_s").isNotNull()
    source_only = F.col(f"{t}.__sl_t").isNull()
    delete_applies = _condition(c.when_matched_delete)
    update_applies = ~delete_applies & _condition(c.when_matched_update_condition or True) if upd else F.lit(False)
    insert_applies = _condition(c.when_not_matched_insert_condition or True) if ins else F.lit(False)
    cols = []
    for f in txn.snapshot.schema.fields:
        value = F.col(f"{t}.`{f.name}`")
        if upd and f.name in upd:
            value = F.when(is_matched & update_applies, F.expr(upd[f.name]).cast(spark_type(f.type))).otherwise(value)
        if ins:
            inserted = F.expr(ins[f.name]) if f.name in ins else F.lit(None)
            value = F.when(source_only, inserted.cast(spark_type(f.type))).otherwise(value)
        cols.append(value.alias(f.name))
    return _Joined(joined, is_matched, source_only, is_matched & delete_applies, is_matched & update_applies,
                   source_only & insert_applies, cols)


def _rewrite_matched(txn: "Transaction", source: DataFrame, c: MergeClauses, upd: dict[str, str] | None,
                     ins: dict[str, str] | None, files: Sequence[AddFile]) -> None:
    """Rewrite the files holding matched rows (deleted, updated or kept), plus inserted rows."""
    touched = _matched_files(txn, source, c, files)
    j = _join(txn, source, c, upd, ins, touched)
    keep = ~j.deleted & ~(j.source_only & ~j.inserted)
    txn.write(conform(j.rows.filter(keep).select(*j.values), txn.snapshot.schema))
    txn.remove(touched)


def _mark_matched(txn: "Transaction", source: DataFrame, c: MergeClauses, upd: dict[str, str] | None,
                  ins: dict[str, str] | None, files: Sequence[AddFile]) -> None:
    """With deletion vectors: the target rows a clause deletes or updates are marked deleted in
    their files; updated and inserted rows are written as new files. A file mostly changed is
    rewritten with the rows that stay (skiplake.spark.row_marks)."""
    touched = _matched_files(txn, source, c, files)
    if not touched:
        if ins:
            _insert_unmatched(txn, source, c, ins, files)
        return
    schema = txn.snapshot.schema
    j = _join(txn, source, c, upd, ins, touched, with_file_info=True)
    file_col, row_col = F.col(f"{c.target_alias}.{FILE_COLUMN}"), F.col(f"{c.target_alias}.{ROW_COLUMN}")
    hits, spark_path_of = rows_by_file(txn.path, touched, j.rows.filter(j.deleted | j.updated), file_col, row_col)
    txn.write(conform(j.rows.filter(j.updated | j.inserted).select(*j.values), schema))
    marks = mark_rows(txn, touched, hits)
    if marks.rewrite:
        stay = ~j.deleted & ~j.updated & ~j.source_only
        redo = file_col.isin([spark_path_of[f.path] for f in marks.rewrite])
        txn.write(conform(j.rows.filter(stay & redo).select(*j.values), schema))
        txn.remove(marks.rewrite)


def _condition(when: bool | str | None) -> Column:
    """A clause's condition: always (True), never (False/None), or rows where SQL text is TRUE."""
    if isinstance(when, str):
        return matches(when)
    return F.lit(bool(when))
