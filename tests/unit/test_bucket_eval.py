"""Bucket pruning (expr/bucket_eval.py): every row a predicate matches lies in a selected bucket."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.expr.parse import bind
from skiplake.expr.tree import And, Cmp, Const, InList, IsNull, Node, Not, Or
from skiplake.layout.bucketing import bucket_ids, bucket_of
from skiplake.log.schema import Field, Schema
from skiplake.skipping.bucket_pruning import selected_buckets
from tests.tiers import examples

SCHEMA = Schema((Field("a", "integer"), Field("s", "string"), Field("d", "date"), Field("m", "decimal(9,2)"),
                 Field("x", "long")))
VALUES: dict[str, list[Any]] = {
    "a": [None, -1, 0, 1, 2, 3, 17],
    "s": [None, "", "a", "bc", "héllo", "zzzz"],
    "d": [None, dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(1969, 12, 31)],
    "m": [None, Decimal("0.00"), Decimal("1.50"), Decimal("-3.25")],
    "x": [None, 0, 5, 2**40],
}
SQL = {"a": str, "s": lambda v: f"'{v}'", "d": lambda v: f"DATE'{v.isoformat()}'", "m": str, "x": str}


def _row_value(node: Node, row: dict[str, Any]) -> bool | None:
    """SQL's three-valued result of a bound predicate on one row (the shapes generated below)."""
    if isinstance(node, Const):
        return node.value
    if isinstance(node, IsNull):
        return row[node.col.name] is None
    if isinstance(node, Cmp):
        v = row[node.col.name]
        if node.op == "<=>":
            return v == node.value
        if v is None:
            return None
        return {"=": v == node.value, "<>": v != node.value, "<": v < node.value, ">": v > node.value}[node.op]
    if isinstance(node, InList):
        v = row[node.col.name]
        if v is None:
            return None
        return True if v in node.values else (None if node.has_null else False)
    if isinstance(node, Not):
        inner = _row_value(node.child, row)
        return None if inner is None else not inner
    if isinstance(node, And):
        vals = [_row_value(c, row) for c in node.children]
        return False if False in vals else (None if None in vals else True)
    if isinstance(node, Or):
        vals = [_row_value(c, row) for c in node.children]
        return True if True in vals else (None if None in vals else False)
    raise AssertionError(node)


def _leaf(col: str) -> st.SearchStrategy[str]:
    vals = st.sampled_from([v for v in VALUES[col] if v is not None])
    return st.one_of(
        vals.map(lambda v: f"{col} = {SQL[col](v)}"),
        vals.map(lambda v: f"{col} <=> {SQL[col](v)}"),
        vals.map(lambda v: f"{col} <> {SQL[col](v)}"),
        vals.map(lambda v: f"{col} > {SQL[col](v)}"),
        st.lists(vals, min_size=1, max_size=3).map(lambda vs: f"{col} IN ({', '.join(SQL[col](v) for v in vs)})"),
        st.just(f"{col} IS NULL"), st.just(f"{col} IS NOT NULL"),
    )


def _predicates(cols: list[str]) -> st.SearchStrategy[str]:
    leaves = st.one_of(*[_leaf(c) for c in cols])
    return st.recursive(leaves, lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"({t[0]} AND {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} OR {t[1]})"),
        inner.map(lambda t: f"NOT ({t})")), max_leaves=5)


SPECS = [["a"], ["s"], ["d"], ["m"], ["a", "s"], ["s", "d", "a"], ["x", "m"]]


@settings(max_examples=examples(200), deadline=None)
@given(spec=st.sampled_from(SPECS), n=st.sampled_from([1, 4, 7, 64]), data=st.data())
def test_matching_rows_lie_in_selected_buckets(spec: list[str], n: int, data: st.DataObject) -> None:
    where = data.draw(_predicates(["a", "s", "d", "m", "x"]))
    node = bind(where, SCHEMA)
    types = [SCHEMA.field(c).type for c in spec]
    selected = selected_buckets(node, spec, types, n)
    if selected is None:
        return
    assert selected <= set(range(n))
    rows = [dict(zip(VALUES, combo)) for combo in _some_rows(data)]
    for row in rows:
        if _row_value(node, row) is True:
            assert bucket_of([row[c] for c in spec], types, n) in selected, (where, row)


def _some_rows(data: st.DataObject) -> list[tuple]:
    return data.draw(st.lists(st.tuples(*[st.sampled_from(VALUES[c]) for c in VALUES]), min_size=20, max_size=60))


def test_single_column_shapes() -> None:
    types = ["integer"]
    b = lambda v: bucket_of([v], types, 16)  # noqa: E731
    sel = lambda w: selected_buckets(bind(w, SCHEMA), ["a"], types, 16)  # noqa: E731
    assert sel("a = 3") == {b(3)}
    assert sel("a <=> 3") == {b(3)}
    assert sel("a IN (1, 2, 3)") == {b(1), b(2), b(3)}
    assert sel("a IS NULL") == {b(None)} == {42 % 16}
    assert sel("a = 1 OR a = 2") == {b(1), b(2)}
    assert sel("a IN (1, 2) AND a IN (2, 3)") == {b(2)}
    assert sel("a = 1 AND s = 'x'") == {b(1)}            # other conjuncts do not widen it
    assert sel("a = 1 OR s = 'x'") is None                # nor can an OR with an unpinned side
    assert sel("NOT (a = 1)") is None and sel("a <> 1") is None and sel("a > 1") is None
    assert sel("a = 1 AND a = 2") == frozenset()          # contradiction: no bucket
    assert sel("a IN (1, NULL)") == {b(1)}                # NULL in an IN list never matches


def test_multi_column_needs_every_column_fixed() -> None:
    spec, types = ["a", "s"], ["integer", "string"]
    sel = lambda w: selected_buckets(bind(w, SCHEMA), spec, types, 64)  # noqa: E731
    assert sel("a = 1") is None                           # Spark would not prune either
    assert sel("a = 1 AND s IN ('x', 'y')") == {bucket_of([1, "x"], types, 64), bucket_of([1, "y"], types, 64)}
    assert sel("(a = 1 OR a = 2) AND s = 'x'") == {bucket_of([1, "x"], types, 64), bucket_of([2, "x"], types, 64)}
    assert sel("(a = 1 AND s = 'x') OR (a = 2 AND s IS NULL)") == {
        bucket_of([1, "x"], types, 64), bucket_of([2, None], types, 64)}
    assert sel("a = 1 AND s = 'x' AND NOT (a = 2)") == {bucket_of([1, "x"], types, 64)}


def test_literals_are_cast_to_the_column_type() -> None:
    # 5 on a long column hashes as a long (8 bytes), not as an int; a date string becomes a date.
    assert selected_buckets(bind("x = 5", SCHEMA), ["x"], ["long"], 64) == {bucket_of([5], ["long"], 64)}
    assert bucket_of([5], ["long"], 64) != bucket_of([5], ["integer"], 64)
    assert selected_buckets(bind("d = '2020-01-02'", SCHEMA), ["d"], ["date"], 8) == {
        bucket_of([dt.date(2020, 1, 2)], ["date"], 8)}
    # A literal the column cannot hold exactly never prunes wrongly: 1.234 is no decimal(9,2) value.
    got = selected_buckets(bind("m = 1.234", SCHEMA), ["m"], ["decimal(9,2)"], 8)
    assert got is None or got == frozenset()


def test_large_in_list_is_vectorized() -> None:
    values = list(range(10_000))
    node = bind(f"a IN ({', '.join(map(str, values))})", SCHEMA)
    got = selected_buckets(node, ["a"], ["integer"], 1024)
    assert got == set(bucket_ids([pa.array(values, pa.int32())], ["integer"], 1024).tolist())


def test_timestamp_ntz_literals_keep_their_wall_clock() -> None:
    """Spark ignores a zone written in a TIMESTAMP_NTZ comparison's string; so does the binder."""
    schema = Schema((Field("t", "timestamp_ntz"), Field("u", "timestamp")))
    ntz = bind("t = '2024-01-01 00:00:00+02:00'", schema)
    assert ntz.value == dt.datetime(2024, 1, 1, 0, 0)
    assert selected_buckets(ntz, ["t"], ["timestamp_ntz"], 64) == {
        bucket_of([dt.datetime(2024, 1, 1)], ["timestamp_ntz"], 64)}
    assert bind("u = '2024-01-01 00:00:00+02:00'", schema).value == dt.datetime(2023, 12, 31, 22, 0)
