"""The rules every write must keep: CHECK constraints, column invariants and NOT NULL columns.

A CHECK constraint is a table property `delta.constraints.<name>` holding a Spark SQL boolean
expression (the writer feature `checkConstraints`); a row keeps it only when the expression is
TRUE (FALSE and NULL both violate it, as in Delta). An invariant is the legacy form, a field's
metadata `delta.invariants` = `{"expression": {"expression": "<sql>"}}` (the writer feature
`invariants`). A column the schema marks `nullable: false` takes no NULL. Names of constraints
are case-insensitive and kept in lower case, as delta-spark keeps them.

This module reads and edits the rules in a table's metadata; skiplake.spark.writes.enforcement
enforces them in the write jobs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

from skiplake.errors import InvalidArgumentError
from skiplake.expr.parse import referenced_columns
from skiplake.log.actions import Metadata
from skiplake.log.features import CONSTRAINT_PREFIX, GENERATION_EXPRESSION
from skiplake.log.schema import Field, Schema

INVARIANTS = "delta.invariants"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Rule:
    """One rule rows must keep: `expression` TRUE for each row."""
    label: str                 # how errors name it: "CHECK constraint qty_positive", "invariant on a.b"
    expression: str
    columns: tuple[str, ...]   # the top-level columns it reads (an error shows their values)
    shown: str = ""            # the rule as errors show it (`expression` when empty)
    fix: str = ""              # how to write rows that keep it (a CHECK constraint's default when empty)


def generated_columns(schema: Schema) -> dict[str, str]:
    """The table's generated columns: name -> generation expression (Spark SQL)."""
    return {f.name: str(f.metadata[GENERATION_EXPRESSION]) for f in schema.fields if GENERATION_EXPRESSION in f.metadata}


def generation_value(expression: str, type_: Any) -> str:
    """SQL for a generated column's value: its expression cast to the column's type."""
    return f"CAST(({expression}) AS {type_})" if isinstance(type_, str) else f"({expression})"


def check_constraints(configuration: Mapping[str, str]) -> dict[str, str]:
    """The table's CHECK constraints: name -> expression."""
    return {k[len(CONSTRAINT_PREFIX):]: v for k, v in configuration.items() if k.startswith(CONSTRAINT_PREFIX)}


def constraint_rule(name: str, expression: str, schema: Schema) -> Rule:
    """The Rule of CHECK constraint `name`: rows must make `expression` TRUE (its columns found in `schema`)."""
    return Rule(f"CHECK constraint {name.lower()}", expression.strip(), tuple(referenced_columns(expression, schema)))


def table_rules(metadata: Metadata) -> list[Rule]:
    """Every CHECK constraint and invariant of the table (NOT NULL is the writer's conform step)."""
    schema = metadata.schema
    rules = [constraint_rule(name, expr, schema) for name, expr in sorted(check_constraints(metadata.configuration).items())]
    for path, expr in _invariants(schema.fields, ()):
        rules.append(Rule(f"invariant on {'.'.join(path)}", expr, tuple(referenced_columns(expr, schema)),
                          fix="Fix the rows: the table's schema holds the invariant."))
    for name, expr in generated_columns(schema).items():
        value = generation_value(expr, schema.field(name).type)
        reads = [c for c in referenced_columns(expr, schema) if c != name]
        rules.append(Rule(f"generated column {name}", f"`{name}` <=> {value}", (name, *reads), f"{name} = {expr}",
                          f"Leave {name} out of the write (it is computed), or give the expression's value."))
    return rules


def with_generated_columns(path: str, schema: Schema, generated: Mapping[str, str]) -> Schema:
    """`schema` with the generation expressions of `generated` (column -> Spark SQL) in its
    columns' metadata; each must read only columns that are not generated themselves."""
    if not generated:
        return schema
    unknown = [c for c in generated if schema.find(c) is None]
    if unknown:
        raise InvalidArgumentError(f"{path}: generated columns {unknown} are not columns of the schema")
    names = {schema.field(c).name: str(e).strip() for c, e in generated.items()}
    for name, expr in names.items():
        if not expr:
            raise InvalidArgumentError(f"{path}: generated column {name} needs an expression")
        reads = referenced_columns(expr, schema)
        loops = [c for c in reads if c in names or GENERATION_EXPRESSION in schema.field(c).metadata]
        if loops:
            raise InvalidArgumentError(f"{path}: generated column {name} reads the generated column(s) {loops}; "
                                       "a generation expression reads only columns that are not generated")
    fields = tuple(replace(f, metadata={**f.metadata, GENERATION_EXPRESSION: names[f.name]}) if f.name in names else f
                   for f in schema.fields)
    return Schema(fields)


def _invariants(fields: tuple[Field, ...] | list[dict[str, Any]], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    for f in fields:
        name, type_, meta = (f.name, f.type, f.metadata) if isinstance(f, Field) else \
            (f["name"], f["type"], f.get("metadata") or {})
        raw = meta.get(INVARIANTS)
        if raw:
            try:
                expr = json.loads(raw)["expression"]["expression"] if isinstance(raw, str) else raw["expression"]["expression"]
            except (ValueError, KeyError, TypeError):
                raise InvalidArgumentError(f"column {'.'.join(prefix + (name,))} has an invariant skiplake cannot read "
                                           f"({str(raw)[:80]})") from None
            yield prefix + (name,), str(expr)
        if isinstance(type_, dict) and type_.get("type") == "struct":
            yield from _invariants(type_["fields"], prefix + (name,))


def with_constraint(path: str, metadata: Metadata, name: str, expression: str) -> Metadata:
    """`metadata` with a new CHECK constraint (ALTER TABLE ... ADD CONSTRAINT name CHECK (expr))."""
    if not _NAME.match(name or ""):
        raise InvalidArgumentError(f"{path}: {name!r} is not a constraint name: use letters, digits and "
                                   "underscores, not starting with a digit")
    if not expression or not expression.strip():
        raise InvalidArgumentError(f"{path}: constraint {name} needs an expression")
    key = CONSTRAINT_PREFIX + name.lower()
    if key in metadata.configuration:
        raise InvalidArgumentError(f"{path}: the table already has a constraint {name.lower()} "
                                   f"(CHECK ({metadata.configuration[key]})); drop it first to replace it")
    return replace(metadata, configuration={**metadata.configuration, key: expression.strip()})


def without_constraint(path: str, metadata: Metadata, name: str, if_exists: bool = False) -> Metadata:
    """`metadata` without the CHECK constraint `name` (ALTER TABLE ... DROP CONSTRAINT)."""
    key = CONSTRAINT_PREFIX + (name or "").lower()
    if key not in metadata.configuration:
        if if_exists:
            return metadata
        known = ", ".join(sorted(check_constraints(metadata.configuration))) or "none"
        raise InvalidArgumentError(f"{path}: the table has no constraint {name!r} (its constraints: {known})")
    return replace(metadata, configuration={k: v for k, v in metadata.configuration.items() if k != key})


def refuse_constraint_properties(path: str, properties: Mapping[str, str]) -> None:
    """CHECK constraints are added with add_constraint, which checks the rows already there."""
    keys = sorted(k for k in properties if k.startswith(CONSTRAINT_PREFIX))
    if keys:
        raise InvalidArgumentError(f"{path}: add CHECK constraints with add_constraint(name, expression), which "
                                   f"checks the rows already in the table, not as properties {keys}")
