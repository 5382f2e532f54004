"""Spark SQL expressions evaluated over Arrow without Spark (skiplake.expr.arrow_eval), which
writes through the `skiplake` data source use for CHECK constraints and generated columns: every
supported form gives what Spark gives on the same rows, in two session time zones, and what
cannot be matched is refused before anything runs."""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from skiplake.expr.arrow_eval import NotEvaluable, compile_expression

EXPRESSIONS = [
    "i > 1", "i > 1.5", "l + i", "i * 2 > l", "l - i < 0", "i <=> NULL", "i <=> j", "i IN (1, 3, NULL)",
    "i NOT IN (1, 2)", "i IN (1, 3)", "i BETWEEN -1 AND 3", "s LIKE 'a%'", "s NOT LIKE '_b%'", "length(s)",
    "substring(s, 2, 2)", "substring(s, -2)", "substr(s, 0, 2)", "substring(s, -5, 3)", "substring(s, 3)",
    "upper(s)", "lower(s)", "trim(s)", "concat(s, '-', s)", "coalesce(i, j, 0)", "abs(i)", "-i",
    "year(ts)", "month(ts)", "day(ts)", "hour(ts)", "CAST(ts AS DATE)", "to_date(ts)",
    "year(d)", "d > '2001-01-01'", "d = DATE '2024-01-01'", "ts < TIMESTAMP '2024-01-01 12:00:00'",
    "ntz < TIMESTAMP_NTZ '2024-01-01 12:00:00'", "CAST(ntz AS DATE)", "hour(ntz)",
    "dec > 1", "dec >= 1.25", "CAST(dec AS long)", "CAST(i AS string)", "CAST(d AS string)", "CAST(b AS string)",
    "CAST(i AS bigint) * 3", "CAST(f AS int)", "CAST(i AS double) > 2.5", "CAST(i AS decimal(12, 2))",
    "st.a > 2", "if(i > 1, 'big', 'small')", "CASE WHEN i > 2 THEN 1 WHEN i < 0 THEN -1 END",
    "CASE WHEN b THEN s ELSE 'none' END", "NOT (i > 1)", "i > 1 OR s IS NULL", "i > 1 AND s IS NOT NULL",
    "b", "NOT b", "b AND i > 0", "f > 0.5",
]


SCHEMA = ("i int, j int, l bigint, s string, ts timestamp, ntz timestamp_ntz, d date, dec decimal(10,2), "
          "b boolean, f double, st struct<a: bigint>")


def _rows(n: int = 40, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)

    def maybe(value):
        return None if rng.random() < 0.15 else value

    words = ["abc", "", "héllo", "b", "ab", "  pad  ", "xyz123", "a_b%c"]
    utc = dt.timezone.utc
    stamps = [dt.datetime(1969, 12, 31, 23, 0, tzinfo=utc), dt.datetime(2024, 1, 1, 23, 30, tzinfo=utc),
              dt.datetime(2024, 6, 1, 1, 0, tzinfo=utc), dt.datetime(2024, 3, 10, 10, 15, tzinfo=utc)]
    return pa.table({
        "i": pa.array([maybe(rng.randint(-5, 5)) for _ in range(n)], pa.int32()),
        "j": pa.array([maybe(rng.randint(-5, 5)) for _ in range(n)], pa.int32()),
        "l": pa.array([maybe(rng.choice([0, 7, -3, 2**40])) for _ in range(n)], pa.int64()),
        "s": pa.array([maybe(rng.choice(words)) for _ in range(n)], pa.string()),
        "ts": pa.array([maybe(rng.choice(stamps)) for _ in range(n)], pa.timestamp("us", "UTC")),
        "ntz": pa.array([maybe(rng.choice(stamps).replace(tzinfo=None)) for _ in range(n)], pa.timestamp("us")),
        "d": pa.array([maybe(rng.choice([dt.date(2024, 1, 1), dt.date(2000, 2, 29), dt.date(1970, 1, 1)]))
                       for _ in range(n)], pa.date32()),
        "dec": pa.array([maybe(Decimal(rng.choice(["1.50", "-2.25", "0.00", "1.25"]))) for _ in range(n)],
                        pa.decimal128(10, 2)),
        "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
        "f": pa.array([maybe(rng.choice([0.25, -1.75, 3.5, 0.5])) for _ in range(n)], pa.float64()),
        "st": pa.array([maybe({"a": maybe(rng.randint(0, 5))}) for _ in range(n)], pa.struct([("a", pa.int64())])),
    })


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
def test_every_supported_form_gives_what_spark_gives(spark, zone):
    rows = _rows()
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        df = spark.createDataFrame(rows, SCHEMA)
        table = df.toArrow()      # the types Spark hands a data source writer
        got = df.selectExpr(*[f"{e} AS e{k}" for k, e in enumerate(EXPRESSIONS)]).collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    for k, text in enumerate(EXPRESSIONS):
        ours = compile_expression(text, table.schema).evaluate(table, zone).to_pylist()
        theirs = [r[k] for r in got]
        if ours and isinstance(ours[0] if ours[0] is not None else next((v for v in ours if v is not None), None),
                               dt.datetime):
            ours = [v.replace(tzinfo=None) if v is not None else None for v in ours]
        assert ours == theirs, f"{text} in {zone}"


@pytest.mark.parametrize("text, part", [
    ("i / 2 > 1", "i / 2"), ("s RLIKE 'a.*'", "RLIKE"), ("rand() > 0.5", "RAND()"), ("s > 1", "types"),
    ("CAST(f AS string) = '1.0'", "cast from double"), ("missing > 1", "'missing'"), ("i % 2 = 0", "%"),
    ("current_date() > d", "CURRENT_DATE"), ("s LIKE s", "literal pattern"), ("substring(s, i)", "literal positions"),
])
def test_what_cannot_be_matched_is_refused_up_front(text, part):
    with pytest.raises(NotEvaluable) as e:
        compile_expression(text, _rows(4).schema)
    assert part in str(e.value)


def test_an_overflow_fails_as_ansi_mode_does():
    table = pa.table({"l": pa.array([2**62, 1], pa.int64())})
    with pytest.raises(pa.ArrowInvalid):
        compile_expression("l * 4 > 0", table.schema).evaluate(table)
