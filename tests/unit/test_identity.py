"""Identity columns' arithmetic: the values a write assigns and the high-water mark it leaves."""
from __future__ import annotations

import pytest

from skiplake.errors import InvalidArgumentError
from skiplake.log.schema import Field, Schema
from skiplake.txn.identity import (
    Identity,
    IdentityColumn,
    identity_columns,
    with_high_water_marks,
    with_identity_columns,
)


def test_marks_move_only_forward_and_only_by_values_the_column_could_assign():
    up = Identity("id", start=10, step=5, high_water_mark=None, allow_explicit_insert=True)
    assert up.past_mark([10, 35, 20]) == 35
    assert up.past_mark([36, 7]) is None          # neither is 10 + 5k with k >= 0
    marked = Identity("id", 10, 5, 35, True)
    assert marked.past_mark([30]) is None and marked.past_mark([40, 12]) == 40
    down = Identity("id", -1, -2, -5, False)
    assert down.past_mark([-9, -3]) == -9 and down.past_mark([-3]) is None
    assert "CAST(-5 AS BIGINT) + CAST(-2 AS BIGINT)" in down.next_value_sql()
    assert "CAST(5 AS BIGINT)" in up.next_value_sql()   # start - step: the first value is start


def test_declaring_identity_columns():
    schema = Schema((Field("id", "long"), Field("name", "string")))
    declared = with_identity_columns("t", schema, {"ID": IdentityColumn(start=3, step=2, always=False)})
    got = identity_columns(declared)["id"]
    assert (got.start, got.step, got.high_water_mark, got.allow_explicit_insert) == (3, 2, None, True)
    assert identity_columns(with_high_water_marks(declared, {"id": 9}))["id"].high_water_mark == 9
    with pytest.raises(InvalidArgumentError, match="BIGINT"):
        with_identity_columns("t", schema, {"name": IdentityColumn()})
    with pytest.raises(InvalidArgumentError, match="step 0"):
        with_identity_columns("t", schema, {"id": IdentityColumn(step=0)})
