"""Predicates: binding, three-valued evaluation, and that pruning never drops a matching row."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import bind
from skiplake.expr.tree import Cmp, InList, Opaque
from skiplake.log.schema import Field, Schema
from skiplake.skipping.metrics import evaluate, file_lookup, may_match, partition_lookup
from tests.tiers import examples

SCHEMA = Schema((Field("x", "long"), Field("s", "string"), Field("d", "date"), Field("p", "integer"),
                 Field("ts", "timestamp")))


def stats(rows: list[int | None], col: str = "x") -> str:
    vals = [r for r in rows if r is not None]
    return json.dumps({"numRecords": len(rows),
                       "minValues": {col: min(vals)} if vals else {},
                       "maxValues": {col: max(vals)} if vals else {},
                       "nullCount": {col: len(rows) - len(vals)}})


def test_bind_casts_literals_and_resolves_case():
    node = bind("X IN (40, 41, 42) AND d >= '2001-01-02'", SCHEMA)
    a, b = node.children
    assert a == InList(a.col, (40, 41, 42)) and a.col.name == "x"
    assert isinstance(b, Cmp) and b.value == dt.date(2001, 1, 2)
    assert isinstance(bind("upper(s) = 'A'", SCHEMA), Opaque)
    assert bind("5 > x", SCHEMA).op == "<"


def test_unknown_column_lists_the_columns():
    with pytest.raises(InvalidPredicateError, match="unknown column 'nope'.*x, s, d, p, ts"):
        bind("nope = 1", SCHEMA)
    with pytest.raises(InvalidPredicateError, match="not valid"):
        bind("x = = 1", SCHEMA)


def lookup(rows):
    return file_lookup(SCHEMA, {}, stats(rows))


def test_range_pruning_and_negation():
    f = lookup([1, 5, 9])
    assert may_match(bind("x = 5", SCHEMA), f)
    assert not may_match(bind("x = 10", SCHEMA), f)
    assert not may_match(bind("x IN (40, 41)", SCHEMA), f)
    assert not may_match(bind("x > 9", SCHEMA), f)
    # NOT of a range test prunes only when every row satisfies the range test.
    assert may_match(bind("NOT (x < 5)", SCHEMA), f)
    assert not may_match(bind("NOT (x < 10)", SCHEMA), f)
    assert may_match(bind("NOT (x = 5)", SCHEMA), f)
    assert not may_match(bind("NOT (x = 5)", SCHEMA), lookup([5, 5]))


def test_nulls():
    allnull = lookup([None, None])
    assert not may_match(bind("x = 1", SCHEMA), allnull)
    assert may_match(bind("x IS NULL", SCHEMA), allnull)
    assert not may_match(bind("x IS NOT NULL", SCHEMA), allnull)
    assert not may_match(bind("NOT (x = 1)", SCHEMA), allnull)  # NOT NULL is NULL
    assert not may_match(bind("x IS NULL", SCHEMA), lookup([1, 2]))
    # NOT IN with a NULL in the list is never true.
    assert not may_match(bind("x NOT IN (1, NULL)", SCHEMA), lookup([5, 6]))
    assert may_match(bind("x NOT IN (1)", SCHEMA), lookup([5, 6]))


def test_sparks_null_test_functions_bind_as_the_operators():
    assert bind("isnotnull(x)", SCHEMA) == bind("x IS NOT NULL", SCHEMA)
    assert bind("ISNULL(X)", SCHEMA) == bind("x IS NULL", SCHEMA)
    assert not may_match(bind("isnotnull(x)", SCHEMA), lookup([None, None]))
    assert isinstance(bind("isnull(x, 1)", SCHEMA), Opaque)
    assert isinstance(bind("nvl(x, 1) = 1", SCHEMA), Opaque)


def test_truncated_string_max_is_not_a_tight_bound():
    long = "a" * 32
    st_ = json.dumps({"numRecords": 2, "minValues": {"s": "a"}, "maxValues": {"s": long},
                      "nullCount": {"s": 0}})
    f = file_lookup(SCHEMA, {}, st_)
    assert may_match(bind(f"s = '{long}zzz'", SCHEMA), f)  # the real max may be longer
    assert not may_match(bind("s = 'b'", SCHEMA), file_lookup(SCHEMA, {}, json.dumps(
        {"numRecords": 1, "minValues": {"s": "a"}, "maxValues": {"s": "ab"}, "nullCount": {"s": 0}})))
    assert may_match(bind("s LIKE 'ab%'", SCHEMA), file_lookup(SCHEMA, {}, json.dumps(
        {"numRecords": 1, "minValues": {"s": "aa"}, "maxValues": {"s": "ac"}, "nullCount": {"s": 0}})))
    assert not may_match(bind("s LIKE 'b%'", SCHEMA), file_lookup(SCHEMA, {}, json.dumps(
        {"numRecords": 1, "minValues": {"s": "aa"}, "maxValues": {"s": "ac"}, "nullCount": {"s": 0}})))


def test_timestamp_max_is_widened_by_a_millisecond():
    st_ = json.dumps({"numRecords": 1, "minValues": {"ts": "2021-01-01T00:00:00.000Z"},
                      "maxValues": {"ts": "2021-01-01T00:00:00.000Z"}, "nullCount": {"ts": 0}})
    f = file_lookup(SCHEMA, {}, st_)
    assert may_match(bind("ts = '2021-01-01 00:00:00.000500'", SCHEMA), f)
    assert not may_match(bind("ts > '2021-01-01 00:00:01'", SCHEMA), f)


def test_partition_values():
    schema = SCHEMA
    look = partition_lookup(schema, {"p": "7", "d": "2001-01-01"})
    assert may_match(bind("p = 7 AND x = 3", schema), look)
    assert not may_match(bind("p = 8 OR d > '2001-01-01'", schema), look)
    assert not may_match(bind("p IS NULL", schema), look)
    assert may_match(bind("p IS NULL", schema), partition_lookup(schema, {"p": None}))


# ---------------------------------------------------------------- property: never prune a match

def sql_eval(pred, value):
    """Evaluate a generated predicate over one int value with SQL three-valued logic."""
    kind = pred[0]
    if kind == "cmp":
        _, op, lit = pred
        if value is None:
            return None
        return {"=": value == lit, "<>": value != lit, "<": value < lit, "<=": value <= lit,
                ">": value > lit, ">=": value >= lit}[op]
    if kind == "in":
        _, lits, has_null = pred
        if value is None:
            return None
        if value in lits:
            return True
        return None if has_null else False
    if kind == "isnull":
        return value is None
    if kind == "not":
        v = sql_eval(pred[1], value)
        return None if v is None else not v
    a, b = sql_eval(pred[1], value), sql_eval(pred[2], value)
    if kind == "and":
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def to_sql(pred) -> str:
    kind = pred[0]
    if kind == "cmp":
        return f"x {pred[1]} {pred[2]}"
    if kind == "in":
        items = [str(v) for v in pred[1]] + (["NULL"] if pred[2] else [])
        return f"x IN ({', '.join(items)})"
    if kind == "isnull":
        return "x IS NULL"
    if kind == "not":
        return f"NOT ({to_sql(pred[1])})"
    return f"({to_sql(pred[1])}) {kind.upper()} ({to_sql(pred[2])})"


lits = st.integers(-20, 20)
leaves = st.one_of(
    st.tuples(st.just("cmp"), st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), lits),
    st.tuples(st.just("in"), st.lists(lits, min_size=1, max_size=4).map(tuple), st.booleans()),
    st.just(("isnull",)),
)
preds = st.recursive(leaves, lambda kids: st.one_of(
    st.tuples(st.just("not"), kids),
    st.tuples(st.just("and"), kids, kids),
    st.tuples(st.just("or"), kids, kids)), max_leaves=6)


@settings(max_examples=examples(400), deadline=None)
@given(preds, st.lists(st.one_of(st.none(), st.integers(-25, 25)), min_size=1, max_size=8))
def test_pruning_never_drops_a_matching_row(pred, rows):
    node = bind(to_sql(pred), SCHEMA)
    matches = any(sql_eval(pred, v) is True for v in rows)
    if matches:
        assert may_match(node, lookup(rows)), (to_sql(pred), rows)
    # The exact outcome set always contains every row's actual outcome.
    outcomes = evaluate(node, lookup(rows))
    for v in rows:
        assert sql_eval(pred, v) in outcomes, (to_sql(pred), rows, v)


def test_review_regressions_never_prune_a_matching_file():
    struct = {"type": "struct", "fields": [{"name": "a", "type": "integer", "nullable": True, "metadata": {}}]}
    schema = Schema((Field("a", "integer"), Field("s", struct), Field("m", "decimal(20,2)"), Field("f", "float")))
    stats = json.dumps({"numRecords": 1, "minValues": {"a": 5, "s": {"a": 1}}, "maxValues": {"a": 5, "s": {"a": 1}},
                        "nullCount": {"a": 0, "s": {"a": 0}}})
    look = file_lookup(schema, {}, stats)
    # A struct field is not the top-level column of the same name.
    assert isinstance(bind("s.a = 1", schema), Opaque) and may_match(bind("s.a = 1", schema), look)
    assert evaluate(bind("s.a = 5", schema), look) != frozenset({True})
    assert may_match(bind("s IS NULL OR s IS NOT NULL", schema), look)  # no TypeError on struct columns
    # Decimal bounds keep their precision.
    big = '{"numRecords": 1, "minValues": {"m": 12345678901234567.89}, "maxValues": {"m": 12345678901234567.89}, ' \
          '"nullCount": {"m": 0}}'
    assert may_match(bind("m = 12345678901234567.89", schema), file_lookup(schema, {}, big))
    # A float32 stat printed as 0.1 is the float 0.1f, which Spark sees as greater than 0.1.
    fl = json.dumps({"numRecords": 1, "minValues": {"f": 0.1}, "maxValues": {"f": 0.1}, "nullCount": {"f": 0}})
    assert may_match(bind("f > 0.1", schema), file_lookup(schema, {}, fl))
    # A string literal against a number is Spark's to cast (ANSI or not): never prune on it.
    assert isinstance(bind("a = '5.5'", schema), Opaque)
    # '' is a NULL partition value.
    assert may_match(bind("a IS NULL", schema), partition_lookup(schema, {"a": ""}))


@given(st.text(alphabet=st.sampled_from(["a", "\\", "'", '"', "%", "_", "n", " ", "é", "\n"]), max_size=12))
def test_sql_text_of_a_string_literal_binds_back_to_the_same_value(text):
    from skiplake.expr.sql import sql_string, to_sql
    node = bind(f"s = {sql_string(text)}", SCHEMA)
    assert node == Cmp("=", node.col, text)
    assert bind(to_sql(node), SCHEMA) == node
    in_list = bind(f"s IN ({sql_string(text)}, 'z')", SCHEMA)
    assert bind(to_sql(in_list), SCHEMA) == in_list


def test_sql_text_of_values_of_every_type_binds_back():
    from skiplake.expr.sql import to_sql
    schema = Schema((Field("i", "long"), Field("m", "decimal(10,3)"), Field("f", "double"), Field("b", "boolean"),
                     Field("d", "date"), Field("t", "timestamp"), Field("odd name", "string")))
    text = ("i IN (1, -2) AND m = 1234567.125 AND f < 1.5e3 AND b AND d = DATE'2001-02-03' "
            "AND t >= TIMESTAMP'2001-02-03 04:05:06.000007' AND `odd name` = 'x' AND NOT (i = 3) AND i IS NOT NULL")
    node = bind(text, schema)
    assert bind(to_sql(node), schema) == node
