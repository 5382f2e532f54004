"""Helpers for building Delta logs without Spark in unit tests."""
from __future__ import annotations

import json

from skiplake.log.actions import AddFile
from skiplake.log.schema import Field, Schema

SCHEMA = Schema((Field("id", "long"), Field("name", "string"), Field("d", "date")))


def add(path: str, d: str | None = "2001-01-01", lo: int = 0, hi: int = 9, rows: int = 10, size: int = 100) -> AddFile:
    stats = json.dumps({"numRecords": rows, "minValues": {"id": lo, "name": "a"},
                        "maxValues": {"id": hi, "name": "z"}, "nullCount": {"id": 0, "name": 0}})
    return AddFile(path, {"d": d}, size, 1_700_000_000_000, True, stats)
