"""Fast checks of skiplake.tpcds (DuckDB only, no Spark)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("duckdb_extension_tpcds")

from skiplake.errors import InvalidArgumentError  # noqa: E402
from skiplake.tpcds import MARKER_NAME, GeneratedTables, generate, queries  # noqa: E402

SF = 0.01
TABLES = ("item", "date_dim", "store_sales")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> GeneratedTables:
    # One generation shared by the module keeps the whole file to a few seconds.
    return generate(tmp_path_factory.mktemp("tpcds"), sf=SF, tables=TABLES)


def _parquet_count(path: Path) -> int:
    with duckdb.connect() as con:
        row = con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()
    assert row is not None
    return int(row[0])


def test_row_counts_match_files(generated: GeneratedTables) -> None:
    assert set(generated.files) == set(TABLES)
    assert set(generated.rows) == set(TABLES)
    for table in TABLES:
        path = generated.files[table]
        assert path == generated.root / f"{table}.parquet"
        assert path.is_file()
        assert generated.rows[table] > 0
        assert _parquet_count(path) == generated.rows[table]
    # Known dsdgen sizes: date_dim is fixed, item and store_sales scale with sf.
    assert generated.rows["date_dim"] == 73049
    assert generated.rows["item"] == 180
    assert generated.rows["store_sales"] == 28810


def test_column_types_are_spark_friendly(generated: GeneratedTables) -> None:
    with duckdb.connect() as con:
        types = dict(
            (name, dtype)
            for name, dtype, *_ in con.execute(
                "DESCRIBE SELECT * FROM read_parquet(?)", [str(generated.files["item"])]
            ).fetchall()
        )
    assert types["i_item_sk"] == "BIGINT"
    assert types["i_current_price"] == "DECIMAL(7,2)"
    assert types["i_rec_start_date"] == "DATE"
    assert types["i_item_id"] == "VARCHAR"


def test_marker_records_sf_and_tables(generated: GeneratedTables) -> None:
    marker = json.loads((generated.root / MARKER_NAME).read_text())
    assert marker["sf"] == SF
    assert marker["tables"] == list(TABLES)
    assert marker["rows"] == generated.rows


def test_second_call_reuses_files(generated: GeneratedTables) -> None:
    marker_before = (generated.root / MARKER_NAME).read_text()
    mtimes = {t: p.stat().st_mtime_ns for t, p in generated.files.items()}
    messages: list[str] = []

    again = generate(generated.root, sf=SF, tables=TABLES, progress=messages.append)

    assert again.rows == generated.rows
    assert again.files == generated.files
    assert {t: p.stat().st_mtime_ns for t, p in again.files.items()} == mtimes
    assert (generated.root / MARKER_NAME).read_text() == marker_before
    assert not any(m.startswith("dsdgen") for m in messages)
    assert any("reusing" in m for m in messages)


def test_overwrite_and_changed_sf_regenerate(tmp_path: Path) -> None:
    first = generate(tmp_path, sf=SF, tables=("item",))
    item = first.files["item"]
    # Back-date the file so a rewrite is visible whatever the filesystem's mtime granularity.
    os.utime(item, ns=(1_000_000_000, 1_000_000_000))

    messages: list[str] = []
    generate(tmp_path, sf=SF, tables=("item",), progress=messages.append, overwrite=True)
    assert item.stat().st_mtime_ns != 1_000_000_000
    assert any(m.startswith("dsdgen") for m in messages)
    assert "wrote item.parquet (180 rows)" in messages

    os.utime(item, ns=(1_000_000_000, 1_000_000_000))
    bigger = generate(tmp_path, sf=0.02, tables=("item",))
    assert item.stat().st_mtime_ns != 1_000_000_000
    assert json.loads((tmp_path / MARKER_NAME).read_text())["sf"] == 0.02
    assert _parquet_count(item) == bigger.rows["item"]


def test_unknown_table_raises(tmp_path: Path) -> None:
    root = tmp_path / "out"
    with pytest.raises(InvalidArgumentError, match="no_such_table"):
        generate(root, sf=SF, tables=("item", "no_such_table"))
    assert not root.exists()  # rejected before any work


@pytest.mark.parametrize("sf", [0, -1, 0.0, float("nan")])
def test_bad_scale_factor_raises(tmp_path: Path, sf: float) -> None:
    with pytest.raises(InvalidArgumentError, match="scale factor"):
        generate(tmp_path / "out", sf=sf, tables=("item",))


def test_queries() -> None:
    qs = queries()
    assert len(qs) == 99
    assert sorted(qs) == list(range(1, 100))
    assert "store_returns" in qs[1]
    assert all(text.strip() for text in qs.values())
