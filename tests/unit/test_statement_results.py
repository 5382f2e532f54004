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
    assert literal(0.5, "DOUBLE") == "0.5D"
    assert literal(float("nan"), "DOUBLE") == "CAST('nan' AS DOUBLE)"
    assert literal("it's a \\ path", "STRING") == "'it\\'s a \\\\ path'"
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.timezone.utc)
    assert literal(when, "TIMESTAMP") == f"timestamp_micros({int(when.timestamp() * 1_000_000)})"
    assert literal({"k": "v"}, "MAP<STRING, STRING>") == "from_json('{\"k\": \"v\"}', 'MAP<STRING, STRING>')"
