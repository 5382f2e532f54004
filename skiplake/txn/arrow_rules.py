"""A table's rules applied to Arrow rows, for writes without Spark (the `skiplake` data source and
its streaming sink): generated columns computed where the rows leave them out, identity values
assigned, and CHECK constraints, invariants and given generated values checked, each as
`t.append` does it with Spark.

The expressions are evaluated by skiplake.expr.arrow_eval, which covers the part of Spark SQL it
can match exactly. A table whose rules reach past that part is refused before a row is written
(WriterFeatureUnsupportedError, naming the rule and the API that can write it).

Identity values follow `t.append`'s formula, `mark + step * (1 + id)` with `id` Spark's
monotonically_increasing_id (the task's partition in the upper bits, its row count in the lower
33): unique across the tasks of a write and past every earlier value."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiplake.errors import (
    ConstraintViolationError,
    InvalidArgumentError,
    SchemaMismatchError,
    WriterFeatureUnsupportedError,
)
from skiplake.expr.arrow_eval import ArrowExpression, NotEvaluable, compile_expression
from skiplake.log.actions import Metadata
from skiplake.txn.constraints import Rule, generated_columns, generation_value, table_rules
from skiplake.txn.identity import Identity, identity_columns

# Where a write refused here can go instead.
INSTEAD = ("t.append(df) or t.overwrite(df) (skiplake.Table), or in a stream "
           "foreachBatch(lambda df, i: t.append(df, app_id=..., app_version=i))")
_TASK_SHIFT = 33   # Spark's monotonically_increasing_id: partition id << 33, plus the row's index


@dataclass(frozen=True)
class ArrowRules:
    """What a write of rows to one table must apply; picklable, made once on the driver."""
    table_path: str
    rules: tuple[Rule, ...]
    generated: tuple[tuple[str, str], ...]     # column -> SQL of its value
    identities: tuple[Identity, ...]

    @staticmethod
    def of(table_path: str, metadata: Metadata, columns: pa.Schema, given: Sequence[str] | None = None) -> "ArrowRules":
        """The rules of the table whose metadata is `metadata`, for rows conformed to `columns`
        that come with the columns `given` (None: not known yet). A rule this path cannot
        evaluate is a WriterFeatureUnsupportedError; a value given to a GENERATED ALWAYS identity
        column a SchemaMismatchError."""
        schema = metadata.schema
        rules = tuple(table_rules(metadata))
        generated = tuple((n, generation_value(e, schema.field(n).type)) for n, e in generated_columns(schema).items())
        identities = tuple(identity_columns(schema).values())
        if given is not None:
            named = {g.lower() for g in given}
            always = [i.name for i in identities if i.name.lower() in named and not i.allow_explicit_insert]
            if always:
                raise SchemaMismatchError(table_path, [f"column {n!r} is GENERATED ALWAYS AS IDENTITY: leave it out, "
                                                       "its values are assigned" for n in always])
        for label, text in [(r.label, r.expression) for r in rules] + [(f"generated column {n}", v) for n, v in generated]:
            try:
                compile_expression(text, columns)
            except NotEvaluable as e:
                raise WriterFeatureUnsupportedError(table_path, f"the {label} ({text}), which it cannot evaluate "
                                                    f"without Spark: {e}", INSTEAD) from None
        return ArrowRules(table_path, rules, generated, identities)

    @property
    def empty(self) -> bool:
        """Whether there is nothing to apply."""
        return not (self.rules or self.generated or self.identities)

    def applied(self, table: pa.Table, given: set[str], task: int, first_row: int, time_zone: str) -> pa.Table:
        """`table` (conformed, NULL where a column was not `given`) with its generated and identity
        columns filled in; a ConstraintViolationError at the first rule a row breaks. `first_row`
        counts the task's rows before these; `time_zone` is Spark's session time zone."""
        for name, value in self.generated:
            if name.lower() not in given:
                table = _replaced(table, name, _evaluated(self.table_path, value, table, time_zone, name))
        for identity in self.identities:
            if identity.name.lower() not in given:
                table = _replaced(table, identity.name, identity_values(identity, task, first_row, table.num_rows))
        for rule in self.rules:
            holds = _evaluated(self.table_path, rule.expression, table, time_zone, rule.label)
            broken = pc.invert(pc.fill_null(holds, False))
            if pc.any(broken).as_py():
                row = int(pc.index(broken, True).as_py())
                raise ConstraintViolationError(self.table_path, rule.label, rule.shown or rule.expression,
                                               _shown(table, rule.columns, row), fix=rule.fix)
        return table


def identity_values(identity: Identity, task: int, first_row: int, rows: int) -> pa.Array:
    """The identity values of `rows` rows of task `task`, after its first `first_row`."""
    base = identity.high_water_mark if identity.high_water_mark is not None else identity.start - identity.step
    ids = (task << _TASK_SHIFT) + first_row + np.arange(rows, dtype=np.int64)
    return pa.array(base + identity.step * (1 + ids), pa.int64())


def furthest(identity: Identity, values: pa.ChunkedArray | pa.Array) -> int | None:
    """The value of `values` furthest along the identity column's step, or None when empty."""
    bounds = pc.min_max(values).as_py()
    return bounds["max"] if identity.step > 0 else bounds["min"]


def _evaluated(path: str, text: str, table: pa.Table, time_zone: str, label: str) -> pa.Array:
    try:
        return ArrowExpression(text).evaluate(table, time_zone)
    except (pa.ArrowInvalid, NotEvaluable) as e:
        raise InvalidArgumentError(f"{path}: the {label} ({text}) failed on a row of the write: "
                                   f"{str(e).splitlines()[0]}; nothing was written") from None


def _replaced(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    field = table.schema.field(index)
    return table.set_column(index, field, values.cast(field.type))


def _shown(table: pa.Table, columns: Sequence[str], row: int) -> str:
    """The row's values of `columns` as text: `qty = -1, id = 7`."""
    by_name = {n.lower(): n for n in table.column_names}
    parts = []
    for c in columns:
        name = by_name.get(c.lower())
        value = table.column(name)[row].as_py() if name is not None else None
        parts.append(f"{c} = {'NULL' if value is None else value}")
    return ", ".join(parts)
