"""Which target files a MERGE reads: only those where a clause could act on a row.

A target row can be matched only where the ON condition's conjuncts naming only target columns
hold (`target.d = '2024-01-01'`) and, for each equality between a target column and the source
(`target.k = source.k`), where its key is one of the source's keys: the source's distinct keys
are computed first and prune the target like a dynamic file pruning build side. The transaction
records that narrower read, so two MERGEs whose sources touch disjoint key ranges of a clustered
table do not conflict.

The clauses narrow or widen that:
- with WHEN MATCHED clauses only, a row no clause's target-only conjuncts accept is left alone
  whatever matches it (Delta prunes by these too, which also decides which rows its check for
  several matches sees);
- WHEN NOT MATCHED BY SOURCE clauses act on rows nothing matches, so the files where one of
  their conditions may hold are read as well (all files when one has no condition).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import bind
from skiplake.expr.tree import And, Col, Node, Or
from skiplake.log.schema import INTEGER_TYPES, Schema, is_primitive
from skiplake.spark.merge.clauses import MergeClause, MergeSpec
from skiplake.spark.merge.conditions import Sides, key_equalities, target_only_conjuncts
from skiplake.spark.pruning.build_keys import distinct_keys
from skiplake.spark.pruning.pruning_settings import DynamicPruningSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def target_filter(spark: "SparkSession", schema: Schema, source: DataFrame, spec: MergeSpec) -> Node | None:
    """The predicate the target's files are planned by; None reads every file."""
    sides = Sides.of(spec.target_alias, spec.source_alias, schema.names, source.columns)
    matchable = _all([_bound(target_only_conjuncts(spec.on, sides), schema),
                      _source_keys(spark, schema, source, spec, sides)])
    if spec.matched_only:
        matchable = _all([matchable, _any_clause(schema, spec.matched, sides)])
    if not spec.not_matched_by_source:
        return matchable
    unmatched = _any_clause(schema, spec.not_matched_by_source, sides.target_only())
    if unmatched is None or matchable is None:
        return None  # an unconditional clause (or one that does not bind) may act on any row
    return Or((matchable, unmatched))


def _all(parts: list[Node | None]) -> Node | None:
    kept = [p for p in parts if p is not None]
    return None if not kept else kept[0] if len(kept) == 1 else And(tuple(kept))


def _bound(text: str | None, schema: Schema) -> Node | None:
    if text is None:
        return None
    try:
        return bind(text, schema)
    except InvalidPredicateError:
        return None  # not a predicate over the target's columns: prunes nothing


def _any_clause(schema: Schema, clauses: Sequence[MergeClause], sides: Sides) -> Node | None:
    """OR over `clauses` of the target-only conjuncts of each one's condition: the rows one of
    them may act on; None when one may act on any row."""
    parts = []
    for c in clauses:
        node = _bound(target_only_conjuncts(c.condition, sides) if isinstance(c.condition, str) else None, schema)
        if node is None:
            return None
        parts.append(node)
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def _source_keys(spark: "SparkSession", schema: Schema, source: DataFrame, spec: MergeSpec,
                 sides: Sides) -> Node | None:
    """`target.k IN (the source's keys)` for each key equality whose two sides compare as the
    target's stats do (dynamic file pruning of the target by the source); None when none does."""
    settings = DynamicPruningSettings.of(spark)
    pairs = key_equalities(spec.on, sides) if settings.enabled else []
    if not pairs:
        return None
    src = source.alias(spec.source_alias)
    exprs = [F.expr(sql) for _col, sql in pairs]
    types = [f.dataType.jsonValue() for f in src.select(*exprs).schema.fields]
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
