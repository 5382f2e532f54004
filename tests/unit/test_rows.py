"""The row evaluator (skiplake.skipping.rows) keeps exactly the rows SQL's WHERE keeps.

Its oracle here is the scalar range evaluator, which on a file holding one row (bounds exact,
equal to the value) computes SQL's three-valued outcome for that row. Against Spark itself the
local build keys are checked in tests/test_dynamic_pruning.py.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.expr.parse import bind
from skiplake.expr.tree import Cmp, Col
from skiplake.skipping.local_build import local_keys
from skiplake.skipping.metrics import evaluate, exact_value
from skiplake.skipping.rows import NotExact, keep_rows, row_mask
from skiplake.skipping.stats_table import arrow_type
from tests.tiers import examples
from tests.unit.test_vector_eval import PREDICATES, SCHEMA, dates, decs, ints, stamps, strs

# Columns the row evaluator takes; f, x (floating point) and ts (timestamp) it refuses.
EXACT = ("i", "l", "m", "s", "d", "b", "p", "q")
VALUES = {"i": ints, "l": ints, "p": ints, "m": decs, "s": strs, "q": st.sampled_from(["x", "y z", "a"]),
          "d": dates, "b": st.booleans(), "f": st.just(1.0), "x": st.just(2.5), "ts": stamps}


@st.composite
def tables(draw) -> pa.Table:
    n = draw(st.integers(0, 12))
    columns = {}
    for f in SCHEMA.fields:
        values = [draw(st.one_of(st.none(), VALUES[f.name])) for _ in range(n)]
        columns[f.name] = pa.array(values, arrow_type(f.type))
    return pa.table(columns)


def _outcome(node, row: dict):
    out = evaluate(node, lambda name: exact_value(row[name]))
    return next(iter(out)) if len(out) == 1 else "several"


@settings(max_examples=examples(400), deadline=None)
@given(table=tables(), where=PREDICATES)
def test_rows_evaluate_as_sql_does(table, where):
    node = bind(where, SCHEMA)
    try:
        mask = row_mask(node, table).to_pylist()
    except NotExact:
        # floating point, timestamps, an opaque call, or 2.5 against an integer column
        assert any(c in where for c in ("f ", "x ", "ts ", "abs(", "2.5")), where
        return
    for row, got in zip(table.to_pylist(), mask):
        expected = _outcome(node, row)
        if expected != "several":
            assert got is expected, (where, row)
    kept = keep_rows(node, table).to_pylist()
    assert kept == [row for row, got in zip(table.to_pylist(), mask) if got is True]


@pytest.mark.parametrize("where", ["f = 1.0", "x < 2.5", "ts IS NULL AND i = 1", "abs(i) > 3", "NOT (abs(i) > 3)"])
def test_what_it_cannot_match_to_spark_is_refused(where):
    table = pa.table({f.name: pa.array([None], arrow_type(f.type)) for f in SCHEMA.fields})
    with pytest.raises(NotExact):
        row_mask(bind(where, SCHEMA), table)


def test_a_literal_the_column_cannot_hold_is_refused():
    table = pa.table({"i": pa.array([1, 2], pa.int32())})
    with pytest.raises(NotExact):
        row_mask(Cmp("=", Col("i", "integer"), 2 ** 40), table)


def test_local_keys_read_the_files_of_a_table(tmp_path):
    """Keys are distinct and non-null, from rows where every key is non-null; a column missing
    from an older file reads as NULL; more distinct keys than the cap give min and max."""
    import pyarrow.parquet as pq

    from skiplake.log.schema import Field, Schema
    schema = Schema((Field("k", "long"), Field("j", "integer"), Field("a", "string")))
    pq.write_table(pa.table({"k": pa.array([1, 2, 2, None, 5], pa.int64()),
                             "j": pa.array([7, 8, 8, 9, None], pa.int32()),
                             "a": ["x", "y", "y", "x", "x"]}), tmp_path / "one.parquet")
    pq.write_table(pa.table({"k": pa.array([3, 4], pa.int64()), "j": pa.array([1, 2], pa.int32())}),
                   tmp_path / "old.parquet")
    files = pa.table({"path": ["one.parquet", "old.parquet"]})
    keys = local_keys(str(tmp_path), files, schema, bind("a = 'x' OR a = 'y'", schema), ["k", "j"])
    assert keys.local and not keys.bounded
    assert sorted(keys.columns[0]) == [1, 2] and sorted(keys.columns[1]) == [7, 8]
    everything = local_keys(str(tmp_path), files, schema, None, ["k"])
    assert sorted(everything.columns[0]) == [1, 2, 3, 4, 5]
    nulls = local_keys(str(tmp_path), files, schema, bind("a IS NULL", schema), ["k"])
    assert sorted(nulls.columns[0]) == [3, 4]
    capped = local_keys(str(tmp_path), files, schema, None, ["k"], cap=3)
    assert capped.bounded and capped.columns == [[1, 5]]
