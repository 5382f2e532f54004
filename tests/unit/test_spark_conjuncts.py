"""spark_conjuncts reads Spark's condition text into the very trees sqlglot gives, or declines."""
from __future__ import annotations

import random

import pytest
from sqlglot import exp

from skiplake.errors import InvalidPredicateError
from skiplake.expr.parse import _Binder, and_conjuncts, bind_conjuncts, parse_sql
from skiplake.expr.spark_conjuncts import _KEYWORDS, spark_conjuncts
from skiplake.expr.tree import And
from skiplake.log.schema import Field, Schema

TEXTS = [
    "isnotnull(ss_item_sk)",
    "((isnotnull(d_year) AND (d_year = 2000)) AND isnotnull(d_date_sk))",
    "(((isnotnull(i_category) AND (i_category = 'Books')) AND (i_item_sk >= 10)) AND isnull(i_brand))",
    "(i_item_id = 'AAAAAAAAICAAAAAA')",
    "(s_state IN ('TN', 'SD', 'AL'))",
    "((d_moy IN (1, 2, 3)) AND (d_year <> 1999))",
    # As Spark 4.1 writes the filters of a query over aliased tables:
    "(((date_dim.d_year IS NOT NULL) AND (date_dim.d_year = 2001L)) AND (date_dim.d_date_sk IS NOT NULL))",
    "((date_dim.d_date >= DATE '2000-01-27') AND (date_dim.d_date <= DATE '2000-04-26'))",
    "((ca.ca_state IN ('TX', 'OH')) AND (s.x IS NULL))",
    "((spark_catalog.t.x = -5L) AND (t.y IN (1L, -2L, 3)))",
    "(((customer_address.ca_gmt_offset = -7.00BD) AND (i.p >= 0.50BD)) AND (i.p IN (100.00BD, 5BD, 000.10BD)))",
    "(s = 'a AND (b')",
    "((s = 'it''s') AND (t < 5))",
    "((a = 1) OR (b = 2))",
    "(((a = 1) OR (b = 2)) AND (c > 3))",
    "((a = 1) AND ((b = 2) OR (c = 3)))",
    "(NOT (a = 1) AND (b <= 0))",
    "(x = -5)",
    "(x >= 1.50BD)",
    "(x = 5L)",
    "(d >= DATE '2000-01-01')",
    "((date = 5) AND (year = 2000))",
    "(interval = 1)",
    "(s LIKE 'ab%')",
    "startswith(s, 'ab')",
    "(x BETWEEN 1 AND 5)",
    "(CASE WHEN (a = 1) THEN true ELSE false END AND (b = 2))",
    "(`a b` = 1)",
    "(s = 'back\\\\slash')",
    "(((ss_sold_date_sk IN (2451911, 2451912)) AND isnotnull(ss_item_sk)) AND (ss_item_sk = 7))",
    "(a = 1) AND (b = 2)",
    "((a)) ",
    # Not Spark's own spelling: declined, or read the same as sqlglot reads it.
    "(a = 1) AND (b = 2) or (c = 3)",
    "(a = 1) AND (b = 2)OR (c = 3)",
    "(a = 1) and (b = 2)",
    "(a = \u0663)",
    '(s = "x AND y")',
    "(a = 1) AND (b = 2) --x\n",
    "(if = 1)",
    "(s = 'x and y') AND (t = 1)",
]


def _sqlglot(text: str) -> list[exp.Expression]:
    return and_conjuncts(parse_sql(text))


@pytest.mark.parametrize("text", TEXTS)
def test_same_trees_as_sqlglot_or_declines(text: str) -> None:
    fast = spark_conjuncts(text, parse_sql)
    if fast is not None:
        assert fast == _sqlglot(text)


def test_declines_what_it_cannot_vouch_for() -> None:
    for text in ("(x BETWEEN 1 AND 5)", "(`a b` = 1)", "a = 1 OR b = 2 AND c = 3", "(s = 'back\\\\slash')",
                 "(CASE WHEN (a = 1) THEN true ELSE false END AND (b = 2))", "(a = 1) AND (b = 2) or (c = 3)",
                 "(a = 1) AND (b = 2)OR (c = 3)", '(s = "x AND y")', "(a = 1) AND (b = 2) --x\n", "(if = 1)"):
        assert spark_conjuncts(text, parse_sql) is None, text


def test_reads_the_common_forms_without_sqlglot() -> None:
    def refuse(text: str) -> exp.Expression:
        raise AssertionError(f"parsed {text!r}")
    for text in TEXTS[:11]:
        assert spark_conjuncts(text, refuse) is not None


def test_keyword_named_columns_match_sqlglot() -> None:
    for word in sorted(_KEYWORDS):
        if not word.isidentifier():
            continue
        text = f"(isnotnull({word.lower()}) AND ({word.lower()} = 1))"
        try:
            expected = _sqlglot(text)
        except Exception:
            continue  # sqlglot cannot read it either: the fast path declined it (keyword)
        assert spark_conjuncts(text, parse_sql) == expected, word


def _random_condition(rnd: random.Random, depth: int = 0) -> str:
    cols = ["a", "b_1", "ss_item_sk", "date", "x"]
    if depth > 2 or rnd.random() < 0.4:
        c = rnd.choice(["", "t.", "date_dim.", "db.t.", "date."]) + rnd.choice(cols)
        number = rnd.choice(["", "-"]) + rnd.choice([
            str(rnd.randint(0, 99)) + rnd.choice(["", "L", "BD"]), f"{rnd.randint(0, 999)}.{rnd.randint(0, 99):0{rnd.randint(1, 3)}d}BD",
            f"0.0{rnd.randint(0, 9)}BD", "00.10BD"])
        return rnd.choice([
            f"isnotnull({c})", f"isnull({c})", f"({c} {rnd.choice(['=', '<>', '<', '<=', '>', '>='])} {number})",
            f"({c} = '{rnd.choice(['x', 'a b', 'AND', '(', 'it' + chr(39) * 2 + 's'])}')",
            f"({c} IN ({', '.join(str(rnd.randint(0, 9)) for _ in range(rnd.randint(1, 4)))}))",
            f"({c} IN ('p', 'q'))", f"(NOT ({c} = 1))", f"({c} = -{rnd.randint(1, 9)})",
            f"({c} IS NOT NULL)", f"({c} IS NULL)", f"({c} >= DATE '2000-0{rnd.randint(1, 9)}-01')",
            f"({c} IN ({number}, DATE '2001-01-01', 'z'))",
        ])
    op = rnd.choice([" AND ", " AND ", " OR "])
    return f"({_random_condition(rnd, depth + 1)}{op}{_random_condition(rnd, depth + 1)})"


def test_random_conditions_match_sqlglot() -> None:
    rnd = random.Random(12)
    read = 0
    for _ in range(400):
        text = _random_condition(rnd)
        fast = spark_conjuncts(text, parse_sql)
        if fast is not None:
            read += 1
            assert fast == _sqlglot(text), text
    assert read > 200


def test_binding_is_unchanged() -> None:
    schema = Schema((Field("a", "integer"), Field("b_1", "string"), Field("ss_item_sk", "long"), Field("date", "date"),
                     Field("x", "decimal(10,2)")))
    rnd = random.Random(3)
    for _ in range(200):
        text = _random_condition(rnd)
        fast = bind_conjuncts(text, schema)
        # The slow path: sqlglot's whole parse, each conjunct bound on its own.
        binder, bound = _Binder(text, schema), []
        for part in _sqlglot(text):
            try:
                bound.append(binder.bind(part))
            except InvalidPredicateError:
                continue
        expected = None if not bound else bound[0] if len(bound) == 1 else And(tuple(bound))
        assert fast == expected, text
