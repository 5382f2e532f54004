"""skipping.local_build.any_row: whether a file holds a row a predicate keeps, exactly as Spark."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiplake.expr.parse import bind
from skiplake.log.actions import AddFile
from skiplake.log.schema import Field, Schema
from skiplake.skipping.local_build import any_row
from skiplake.skipping.rows import NotExact

SCHEMA = Schema((Field("id", "long"), Field("s", "string"), Field("x", "double"), Field("late", "integer"),
                 Field("p", "integer")))


@pytest.fixture
def files(tmp_path):
    # Written before `late` was added to the table: it reads as NULL; `p` is a partition column.
    (tmp_path / "p=1").mkdir()
    (tmp_path / "p=2").mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3], "s": ["a", "b", None], "x": [0.5, 1.5, 2.5]}), tmp_path / "p=1" / "a.parquet")
    pq.write_table(pa.table({"id": [10, 20], "s": ["c", "d"], "x": [1.0, 2.0]}), tmp_path / "p=2" / "b.parquet")
    return str(tmp_path), [AddFile("p=1/a.parquet", {"p": "1"}, 1, 0), AddFile("p=2/b.parquet", {"p": "2"}, 1, 0)]


@pytest.mark.parametrize("where, expected", [
    ("id = 2", True), ("id IN (4, 5)", False), ("p = 2 AND id = 2", False), ("p = 2 AND id = 20", True),
    ("s IS NULL AND p = 1", True), ("s = 'c' AND p = 1", False), ("late IS NULL", True), ("late = 1", False),
    ("NOT (id < 100)", False), ("id > 5 OR s = 'a'", True),
])
def test_rows_are_read_with_partition_values_and_missing_columns(files, where, expected):
    root, adds = files
    assert any_row(root, adds, SCHEMA, ["p"], bind(where, SCHEMA)) is expected


def test_what_it_cannot_evaluate_exactly_is_refused(files):
    root, adds = files
    with pytest.raises(NotExact):
        any_row(root, adds, SCHEMA, ["p"], bind("x > 1.0", SCHEMA))  # floating point: Spark orders NaN apart


@pytest.mark.parametrize("where", ["true", "NOT false"])
def test_a_predicate_without_columns_is_refused(files, where):
    """Read with no column a file would look empty, and a DELETE of every row would miss a
    concurrent append: such predicates are left to the stats (which conflict)."""
    root, adds = files
    with pytest.raises(NotExact):
        any_row(root, adds, SCHEMA, ["p"], bind(where, SCHEMA))
