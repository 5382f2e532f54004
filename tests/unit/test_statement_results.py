"""Statement results as literals: the schema's columns cut right, every value spelled as Spark SQL."""
from __future__ import annotations

import datetime as dt

from skiplake.statements.results import DETAIL, OPTIMIZE, columns_of, literal


def test_columns_are_cut_outside_angle_brackets():
    cols = columns_of(OPTIMIZE)
    assert [c for c, _ in cols] == ["path", "metrics"]
    assert cols[1][1].startswith("STRUCT<numFilesAdded: BIGINT") and cols[1][1].endswith(">")
    assert [c for c, _ in columns_of(DETAIL)][-3:] == ["minWriterVersion", "tableFeatures", "statistics"]


def test_literals():
    assert literal(None, "STRING") == "NULL"
    assert literal(True, "BOOLEAN") == "true"
    assert literal(12, "BIGINT") == "12"
    assert literal(float("nan"), "DOUBLE") == "CAST('NaN' AS DOUBLE)"
    assert literal("it's a \\ path", "STRING") == "'it\\'s a \\\\ path'"
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.timezone.utc)
    assert literal(when, "TIMESTAMP") == "TIMESTAMP'2026-01-02 03:04:05.600000+00:00'"
    assert literal(when.replace(tzinfo=None), "TIMESTAMP") == literal(when, "TIMESTAMP")   # naive: UTC
    assert literal({"k": "v"}, "MAP<STRING, STRING>") == "from_json('{\"k\": \"v\"}', 'MAP<STRING, STRING>')"
