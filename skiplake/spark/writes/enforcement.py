"""Enforcing a table's rules (skiplake.txn.constraints) inside the write jobs themselves.

Each rule becomes a check in the job that writes the rows: a row for which a rule's expression
is not TRUE fails the job with a message naming the rule and the values of the columns it
reads, which becomes a ConstraintViolationError. A failed job leaves no file in the log, so
nothing is written. No pass over the data is added.
"""
from __future__ import annotations

import functools
import re
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skiplake.errors import ConstraintViolationError, InvalidArgumentError
from skiplake.log.schema import Schema
from skiplake.spark.session.refusals import analysis_error, quiet
from skiplake.spark.session.spark_types import NOT_NULL_MARKER
from skiplake.txn.constraints import Rule, generated_columns, generation_value
from skiplake.txn.identity import Identity

_MARKER = "SKIPLAKE_RULE_VIOLATION"
_VIOLATION = re.compile(re.escape(_MARKER) + r"\[(\d+)\](.*?)\[/" + re.escape(_MARKER) + r"\]", re.S)
_NOT_NULL = re.compile(re.escape(NOT_NULL_MARKER) + r": column (.*?) is NULL")


def _holds(rule: Rule) -> Column:
    return F.coalesce(F.expr(f"({rule.expression})"), F.lit(False))


def _values(rule: Rule) -> Column:
    """The values of the columns `rule` reads, as text: `qty = -1, id = 7`."""
    if not rule.columns:
        return F.lit("")
    return F.concat_ws(", ", *[F.concat(F.lit(f"{c} = "), F.coalesce(F.col(f"`{c}`").cast("string"), F.lit("NULL")))
                               for c in rule.columns])


def enforced(df: DataFrame, rules: Sequence[Rule]) -> DataFrame:
    """`df`, failing the job that computes it at the first row breaking one of `rules`."""
    if not rules:
        return df
    checks = [F.when(~_holds(r), F.raise_error(F.concat(F.lit(f"{_MARKER}[{i}]"), _values(r), F.lit(f"[/{_MARKER}]"))))
              .otherwise(F.lit(True)) for i, r in enumerate(rules)]
    return df.filter(functools.reduce(lambda a, b: a & b, checks))


def raise_violation(error: Exception, path: str, rules: Sequence[Rule]) -> None:
    """Raise the ConstraintViolationError a failed write job's `error` reports, if it reports one."""
    text = str(error)
    found = _VIOLATION.search(text)
    if found and int(found.group(1)) < len(rules):
        rule = rules[int(found.group(1))]
        raise ConstraintViolationError(path, rule.label, rule.shown or rule.expression, found.group(2),
                                       fix=rule.fix) from None
    null = _NOT_NULL.search(text)
    if null:
        raise ConstraintViolationError(path, f"NOT NULL constraint on column {null.group(1)}", "",
                                       f"{null.group(1)} = NULL", fix=f"Give {null.group(1)} a value in every row.") from None


def first_breaking_row(df: DataFrame, path: str, rule: Rule) -> str | None:
    """The values (as `_values` shows them) of a row of `df` breaking `rule`, or None; an
    expression Spark cannot analyse over `df` is an InvalidArgumentError."""
    try:
        with quiet():
            rows = df.filter(~_holds(rule)).select(_values(rule)).limit(1).collect()
    except Exception as e:
        if not analysis_error(e):
            raise
        raise InvalidArgumentError(f"{path}: the {rule.label} is not an expression over the table's columns "
                                   f"({rule.expression}): {str(e).splitlines()[0][:300]}") from None
    return rows[0][0] if rows else None


def with_generated(df: DataFrame, schema: Schema, only: Sequence[str] | None = None) -> DataFrame:
    """`df` (the table's columns) with its generated columns computed from the others (those
    named in `only`, when given)."""
    generated = {n: e for n, e in generated_columns(schema).items() if only is None or n in only}
    if not generated:
        return df
    return df.withColumns({n: F.expr(generation_value(e, schema.field(n).type)) for n, e in generated.items()})


def with_identities(df: DataFrame, identities: Sequence[Identity]) -> DataFrame:
    """`df` with values assigned to the identity columns `identities`."""
    if not identities:
        return df
    return df.withColumns({i.name: F.expr(i.next_value_sql()) for i in identities})
