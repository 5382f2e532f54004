"""The Glue partition expression language and the partition index key ranges (no database)."""
from __future__ import annotations

import datetime as dt
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.catalog.expression import Key, matches, parse, type_kind
from skiplake.catalog.index_keys import encode, index_problem, plan_range
from skiplake.errors import InvalidInputError
from tests.tiers import examples

KEYS = [("country", "string"), ("category", "varchar(20)"), ("year", "int"), ("month", "bigint"),
        ("creationDate", "date")]
PART = {"country": "US", "category": "Shoes", "year": "2019", "month": "2", "creationDate": "2020-08-16"}


def index(*names: str) -> list[Key]:
    types = dict(KEYS)
    return [Key(n, type_kind(types[n]), types[n]) for n in names]


@pytest.mark.parametrize("text, expected", [
    ("country = 'US'", True),
    ("country = \"US\" and category = 'Shoes'", True),
    ("year > '2018'", True),
    ("year > 2019", False),
    ("year >= 2019 AND month < 3", True),
    ("year < > 2019", False),
    ("year <> 2018", True),
    ("year != 2019", False),
    ("year BETWEEN 2019 AND 2020", True),
    ("year BETWEEN 2020 AND 2021", False),
    ("category IN ('Books', 'Shoes')", True),
    ("category NOT IN ('Books', 'Shoes')", False),
    ("category LIKE 'Sh%'", True),
    ("category LIKE 'S_oes'", True),
    ("category LIKE 'S.oes'", False),
    ("category LIKE 'shoes'", False),
    ("creationDate > '2020-08-15'", True),
    ("creationDate > '2020-8-16'", False),
    ("creationDate BETWEEN '2020-08-01' AND '2020-08-16'", True),
    ("NOT (country = 'US') OR month = 2", True),
    ("country = 'US' AND category = 'Shoes' OR year > '2030'", True),
    ("country = 'UK' AND (year = '2017' OR year = '2019')", False),
    ("country IS NULL", False),
    ("country IS NOT NULL", True),
    ("country = 'it''s'", False),
])
def test_expressions_match_like_glue(text, expected):
    assert matches(parse(text, KEYS), PART) is expected


def test_values_compare_by_type():
    expr = parse("month > 10", KEYS)
    assert not matches(expr, {**PART, "month": "9"})          # 9 < 10 as numbers ('9' > '10' as strings)
    assert matches(parse("category > 10", KEYS), {**PART, "category": "9"})  # strings compare as strings
    assert matches(parse("creationDate < '2020-10-01'", KEYS), {**PART, "creationDate": "2020-9-30"})
    assert not matches(parse("month = 2", KEYS), {**PART, "month": "foo"})   # unparseable stored value
    assert not matches(parse("NOT (month = 2)", KEYS), {**PART, "month": "foo"})


@pytest.mark.parametrize("text, matched", [
    ("score > 1", ["1.5", "Infinity", "NaN", "nan"]),          # NaN above every number, as in Spark
    ("score < 'Infinity'", ["-Infinity", "1.5"]),
    ("score >= 'Infinity'", ["Infinity", "NaN", "nan"]),
    ("score = 'NaN'", ["NaN", "nan"]),                          # NaN equals itself
    ("score <> 1.5", ["-Infinity", "Infinity", "NaN", "nan"]),
    ("score BETWEEN 0 AND 'NaN'", ["1.5", "Infinity", "NaN", "nan"]),
    ("score IN (1.5, 'NaN')", ["1.5", "NaN", "nan"]),
    ("NOT (score <= 2)", ["Infinity", "NaN", "nan"]),
])
def test_double_keys_order_nan_and_infinities_as_spark(text, matched):
    keys = [("score", "double")]
    stored = ["NaN", "1.5", "Infinity", "-Infinity", "nan"]
    assert sorted(v for v in stored if matches(parse(text, keys), {"score": v})) == matched


@pytest.mark.parametrize("text, words", [
    ("nope = 1", "'nope' is not a partition key"),
    ("year = 'abc'", "'abc' cannot be compared with partition key 'year' of type int"),
    ("creationDate > '2020-13-45'", "cannot be compared"),
    ("year = ", "expected a literal value"),
    ("year == 3", "expected a literal value"),
    ("(year = 3", "expected ')'"),
    ("year = 3 year = 4", "expected AND, OR or the end"),
    ("", "empty"),
    ("year ~ 3", "unexpected"),
])
def test_bad_expressions_are_invalid_input(text, words):
    with pytest.raises(InvalidInputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse(text, KEYS)


# The seed's examples, with the index [country, category, year].
SEED = [
    ("country = 'US'", ("country",)),
    ("country = 'US' and category = 'Shoes'", ("country", "category")),
    ("category = 'Shoes'", None),
    ("country = 'US' and category = 'Shoes' and year > '2018'", ("country", "category", "year")),
    ("country = 'US' and category = 'Shoes' and year > '2018' and month = 2", ("country", "category", "year")),
    ("country = 'US' AND category = 'Shoes' OR year > '2018'", None),
    ("country = 'US' AND category = 'Shoes' AND (year = '2017' OR year = '2018')", ("country", "category")),
    ("country in ('US', 'UK') AND category = 'Shoes'", None),
    ("country = 'US' AND category in ('Shoes', 'Books')", ("country",)),
    ("country = 'US' AND category in ('Shoes', 'Books') AND (creationDate > '2023-9-01')", ("country",)),
]


@pytest.mark.parametrize("text, used", SEED)
def test_seed_examples_use_the_index_as_documented(text, used):
    rng = plan_range(parse(text, KEYS), index("country", "category", "year"))
    assert (rng.keys_used if rng else None) == used


# ---------------------------------------------------------------- properties

countries = st.sampled_from(["", "A", "US", "UK", "USA", "U", "Z", "é", "zz"])
years = st.integers(-3, 3) | st.sampled_from([2017, 2018, 2019, -(2 ** 40), 2 ** 40])
dates = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)) | st.sampled_from([dt.date(2020, 8, d) for d in (14, 15, 16)])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(countries, years, dates), min_size=2, max_size=30))
def test_encoding_sorts_like_the_tuples(rows):
    kinds = ["string", "integer", "date"]
    assert sorted(rows) == sorted(rows, key=lambda r: encode(r, kinds))


leaves = st.one_of(
    st.tuples(st.just("country"), st.sampled_from(["=", ">", ">=", "<", "<="]), countries.map(lambda s: f"'{s}'")),
    st.tuples(st.just("year"), st.sampled_from(["=", ">", ">=", "<", "<=", "<>"]), years.map(str)),
    st.tuples(st.just("creationDate"), st.sampled_from(["=", ">", "<="]), dates.map(lambda d: f"'{d.isoformat()}'")),
).map(lambda t: " ".join(t)) | st.sampled_from([
    "year BETWEEN 0 AND 2018", "country LIKE 'U%'", "year IN (1, 2019)", "NOT (year = 2)", "country = 'US' OR year = 1"])


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.tuples(countries, years, dates), min_size=1, max_size=40),
       st.lists(leaves, min_size=1, max_size=4), st.sampled_from(list(itertools.permutations(["country", "year", "creationDate"], 2))))
def test_index_range_never_loses_a_match(rows, parts, order):
    keys = [("country", "string"), ("year", "int"), ("creationDate", "date")]
    expr = parse(" AND ".join(f"({p})" for p in parts), keys)
    idx = [Key(n, type_kind(dict(keys)[n]), dict(keys)[n]) for n in order]
    rng = plan_range(expr, idx)
    for country, year, day in rows:
        values = {"country": country, "year": str(year), "creationDate": day.isoformat()}
        if matches(expr, values) and rng is not None:
            typed = {"country": country, "year": year, "creationDate": day}
            assert rng.contains(encode([typed[k.name] for k in idx], [k.kind for k in idx])), (parts, values, rng)


def test_index_problems_are_glue_backfill_errors():
    assert index_problem("2019", "integer") is None
    assert index_problem("foo", "integer") == "INVALID_PARTITION_TYPE_DATA_ERROR"
    assert index_problem("2020-02-30", "date") == "INVALID_PARTITION_TYPE_DATA_ERROR"
    assert index_problem(None, "string") == "MISSING_PARTITION_VALUE_ERROR"
    assert index_problem("a\x01b", "string") == "UNSUPPORTED_PARTITION_CHARACTER_ERROR"
