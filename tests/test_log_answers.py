"""`lake.sql` (and `t.count`) answering COUNT, MIN and MAX from the log's stats: a differential test against the
same query over a scan, on random small tables with deletion vectors, NULLs, partitions,
strings longer than the stats keep, doubles and timestamps (whose stats are not exact); and
`lake.explain` saying what the stats answered and what was read."""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

pytestmark = [pytest.mark.spark]

SCHEMA = "id long, k int, s string, d date, amount decimal(9,2), f double, ts timestamp, p string, q int"
QUERIES = [
    "SELECT COUNT(*) FROM t",
    "SELECT count(1) AS n, COUNT(k), MIN(k), MAX(k) FROM t",
    "SELECT MIN(s), MAX(s), COUNT(s) FROM t",
    "SELECT min(d), max(d), min(amount), max(amount), count(amount) FROM t",
    "SELECT MIN(f), MAX(f), MIN(ts), MAX(ts) FROM t",
    "SELECT p, COUNT(*), MIN(id), MAX(id) FROM t GROUP BY p",
    "SELECT q, p, count(*), max(s) FROM t GROUP BY p, q",
    "SELECT COUNT(*), MAX(k) FROM t WHERE p = 'a'",
    "SELECT COUNT(*), MIN(id) FROM t WHERE q IS NULL",
    "SELECT p, COUNT(id) FROM t WHERE k > 3 GROUP BY p",
    "SELECT COUNT(*), MAX(amount) FROM t x WHERE x.id >= 0",
    "SELECT COUNT(*) FROM t WHERE p = 'nowhere'",
    "SELECT MIN(k), MAX(k) FROM t WHERE id < 0",
]


def _rows(rng, start, n):
    out = []
    for i in range(start, start + n):
        def maybe(v, rate=0.2):
            return None if rng.random() < rate else v
        long = "z" * 40 + str(rng.randint(0, 9)) if rng.random() < 0.1 else rng.choice(["ab", "b", "xyz", ""])
        out.append((i, maybe(rng.randint(-5, 9)), maybe(long), maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 30))),
                    maybe(Decimal(rng.randint(-999, 999)) / 100), maybe(rng.choice([0.5, -1.25, float("nan"), 3.0])),
                    maybe(dt.datetime(2024, 3, 1, 12, 0, 0, rng.randint(0, 999_999))),
                    maybe(rng.choice(["a", "b"]), 0.1), maybe(rng.randint(1, 2), 0.1)))
    return out


def test_answers_from_the_log_equal_the_scans(lake, seed=1):
    spark = lake.spark
    rng = random.Random(seed)
    t = lake.create_table(f"t{seed}", SCHEMA, partition_by=["p", "q"],
                          properties={"delta.enableDeletionVectors": "true"})
    for batch in range(2):
        t.append(spark.createDataFrame(_rows(rng, batch * 80, 80), SCHEMA).coalesce(1))
    t.delete(f"id % 7 = {seed} AND p = 'a'")   # deletion vectors on some files
    t.read().createOrReplaceTempView("scanned")
    answered, hybrid = 0, 0
    for query in QUERIES:
        got = lake.sql(query.replace(" FROM t", f" FROM t{seed}"))
        log = lake.last_explain.log_answer if lake.last_explain is not None else None
        answered += log is not None
        hybrid += log is not None and log.files_read > 0
        want = spark.sql(query.replace(" FROM t", " FROM scanned"))
        assert sorted(map(_key, got.collect())) == sorted(map(_key, want.collect())), query
        assert [(f.name, f.dataType) for f in got.schema] == [(f.name, f.dataType) for f in want.schema], query
    assert answered >= len(QUERIES) // 2 and hybrid >= 1   # doubles and timestamps have no exact stats


def _key(row):
    return tuple("NaN" if isinstance(v, float) and v != v else repr(v) for v in row)


def test_explain_says_the_log_answered_and_nothing_was_read(lake):
    spark = lake.spark
    t = lake.create_table("plain", "id long, p string", partition_by=["p"])
    for i in range(8):
        t.append(spark.range(i * 10, i * 10 + 10, numPartitions=1).selectExpr("id", f"'{'xy'[i % 2]}' AS p"))
    query = "SELECT p, COUNT(*), MIN(id), MAX(id) FROM plain GROUP BY p"
    report = lake.explain(query)
    assert report.log_answer.files_from_stats == 8 and report.log_answer.files_read == 0
    assert "Answered from the log: the stats of 8 files, 0 files read" in report.text()
    assert sorted(tuple(r) for r in lake.sql(query).collect()) == [("x", 40, 0, 69), ("y", 40, 10, 79)]
    partly = lake.explain("SELECT COUNT(*) FROM plain WHERE id >= 5")   # the stats decide 7 of 8 files
    assert (partly.log_answer.files_from_stats, partly.log_answer.files_read) == (7, 1)
    assert lake.sql("SELECT COUNT(*) FROM plain WHERE id >= 5").first()[0] == 75
    assert lake.explain("SELECT COUNT(*) FROM plain WHERE id >= 75").log_answer is None   # mostly to read
    assert (t.count(), t.count("id >= 5"), t.count("p = 'x' AND id < 33"), t.count("id > 1000")) == (80, 75, 20, 0)
    spark.conf.set("spark.databricks.delta.optimizeMetadataQuery.enabled", "false")
    try:
        lake.sql("SELECT COUNT(*) FROM plain").collect()
        assert lake.last_explain is None or lake.last_explain.log_answer is None
    finally:
        spark.conf.unset("spark.databricks.delta.optimizeMetadataQuery.enabled")
