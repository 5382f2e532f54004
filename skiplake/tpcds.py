"""TPC-DS data and queries for benchmarks and tests, produced by DuckDB's tpcds extension.

This module never imports pyspark: it only writes plain Parquet files that Spark (or anything
else) reads afterwards, so data generation stays fast and can run without a JVM. duckdb and
duckdb-extension-tpcds are the `demo` extra, so they are imported lazily and a missing one is
reported with the extra that installs them (skiplake[demo]).
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiplake.errors import InvalidArgumentError
from skiplake.extras import require

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "TPCDS_TABLES",
    "GeneratedTables",
    "load_tpcds_extension",
    "generate",
    "queries",
]

# The 24 tables dsdgen creates; checked up front so a typo fails before a slow generation.
TPCDS_TABLES: tuple[str, ...] = (
    "call_center",
    "catalog_page",
    "catalog_returns",
    "catalog_sales",
    "customer",
    "customer_address",
    "customer_demographics",
    "date_dim",
    "household_demographics",
    "income_band",
    "inventory",
    "item",
    "promotion",
    "reason",
    "ship_mode",
    "store",
    "store_returns",
    "store_sales",
    "time_dim",
    "warehouse",
    "web_page",
    "web_returns",
    "web_sales",
    "web_site",
)

MARKER_NAME = "_generated.json"
_EXTENSION_PACKAGE = "duckdb_extension_tpcds"
# Sized for the 2-core CI/dev machine; dsdgen at sf=1 fits comfortably in this.
_THREADS = 2
_MEMORY_LIMIT = "4GB"
_IN_MEMORY_MAX_SF = 2.0
# Bumped when the file layout or column types change, so old outputs are not silently reused.
_FORMAT_VERSION = 1

# dsdgen currently emits only BIGINT/INTEGER/DECIMAL/DATE/VARCHAR, all of which Spark reads
# natively. These casts guard against a future extension version emitting types Spark's
# Parquet reader rejects or misreads (unsigned 64-bit, 128-bit ints, nanosecond timestamps).
_SPARK_CASTS: dict[str, str] = {
    "UTINYINT": "SMALLINT",
    "USMALLINT": "INTEGER",
    "UINTEGER": "BIGINT",
    "UBIGINT": "DECIMAL(20,0)",
    "HUGEINT": "DECIMAL(38,0)",
    "UHUGEINT": "DECIMAL(38,0)",
    "TIMESTAMP_NS": "TIMESTAMP",
    "TIMESTAMP_S": "TIMESTAMP",
    "TIMESTAMP_MS": "TIMESTAMP",
}


@dataclass(frozen=True)
class GeneratedTables:
    """What generate() made, or reused: one Parquet file per TPC-DS table under `root`, and their row counts."""
    root: Path  # folder holding one Parquet file per table
    files: dict[str, Path]  # table name -> parquet file path
    rows: dict[str, int]  # table name -> row count
    seconds: float  # wall time of the call that returned this (tiny when reused)


def _import_duckdb() -> Any:
    require("demo", "TPC-DS data generation (skiplake.tpcds)")
    import duckdb
    return duckdb


def _extension_path(duckdb_version: str) -> Path:
    """Locate tpcds.duckdb_extension inside the installed wheel, matching duckdb's version."""
    spec = importlib.util.find_spec(_EXTENSION_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the DuckDB tpcds extension package is not installed: "
            f"pip install 'duckdb-extension-tpcds=={duckdb_version}'"
        )
    found: list[Path] = []
    for location in spec.submodule_search_locations:
        base = Path(location) / "extensions"
        # DuckDB refuses extensions built for another version, so prefer the exact match and
        # only fall back to whatever is there to get DuckDB's own, more precise, error message.
        exact = base / f"v{duckdb_version}" / "tpcds.duckdb_extension"
        if exact.is_file():
            return exact
        found.extend(sorted(base.glob("*/tpcds.duckdb_extension")))
    if found:
        return found[-1]
    raise ImportError(
        f"no tpcds.duckdb_extension file inside the installed {_EXTENSION_PACKAGE} package "
        f"({list(spec.submodule_search_locations)}); reinstall it with "
        f"pip install --force-reinstall 'duckdb-extension-tpcds=={duckdb_version}'"
    )


def load_tpcds_extension(con: "duckdb.DuckDBPyConnection") -> None:
    """Load the tpcds extension into `con` straight from the pip package's folder.

    Loading by path avoids `INSTALL tpcds`, which would download from extensions.duckdb.org
    (unreachable here) and write into the user's ~/.duckdb. Safe to call more than once.
    """
    duckdb = _import_duckdb()
    con.load_extension(str(_extension_path(duckdb.__version__)))


def check_args(sf: float, tables: Sequence[str]) -> tuple[str, ...]:
    # bool is an int subclass; sf=True would silently mean sf=1. `given`: sf as the caller passed
    # it (typed or not): checked here, not trusted.
    given: object = sf
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not math.isfinite(given) or given <= 0:
        raise InvalidArgumentError(
            f"TPC-DS scale factor sf={sf!r} is invalid: it must be a finite number > 0 "
            "(e.g. 0.01 for a quick test, 1 for ~1 GB)."
        )
    if isinstance(tables, str):
        # A bare string would otherwise be iterated character by character.
        tables = (tables,)
    if not tables:
        raise InvalidArgumentError(f"no TPC-DS tables requested; pick from {', '.join(TPCDS_TABLES)}.")
    unknown = [t for t in tables if t not in TPCDS_TABLES]
    if unknown:
        raise InvalidArgumentError(
            f"unknown TPC-DS table(s) {', '.join(map(repr, unknown))}; "
            f"valid names are {', '.join(TPCDS_TABLES)}."
        )
    return tuple(dict.fromkeys(tables))  # drop duplicates, keep order


def _read_marker(root: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((root / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _reusable(root: Path, sf: float, tables: tuple[str, ...]) -> dict[str, int] | None:
    """Row counts from a previous run if it produced exactly what is asked for, else None."""
    marker = _read_marker(root)
    if marker is None or marker.get("format_version") != _FORMAT_VERSION:
        return None
    if float(marker.get("sf", -1)) != float(sf):
        return None
    rows = marker.get("rows")
    if not isinstance(rows, dict):
        return None
    # A superset is fine: the requested files are the same bytes whatever else was generated.
    if not all(t in rows and (root / f"{t}.parquet").is_file() for t in tables):
        return None
    return {t: int(rows[t]) for t in tables}


def _select_list(con: "duckdb.DuckDBPyConnection", table: str) -> str:
    cols = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
        [table],
    ).fetchall()
    parts: list[str] = []
    for name, dtype in cols:
        quoted = '"' + str(name).replace('"', '""') + '"'
        target = _SPARK_CASTS.get(str(dtype).upper())
        parts.append(f"CAST({quoted} AS {target}) AS {quoted}" if target else quoted)
    return ", ".join(parts)


def generate(
    root: str | Path,
    sf: float = 0.1,
    tables: Sequence[str] = ("store_sales", "item", "date_dim"),
    progress: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> GeneratedTables:
    """Generate TPC-DS `tables` at scale factor `sf` as `<root>/<table>.parquet`.

    A previous run into the same `root` with the same sf that covered these tables is reused
    (checked via `<root>/_generated.json`) unless `overwrite` is set.
    """
    started = time.perf_counter()
    wanted = check_args(sf, tables)
    root = Path(root)
    say: Callable[[str], None] = progress if progress is not None else (lambda _msg: None)
    files = {t: root / f"{t}.parquet" for t in wanted}

    if not overwrite:
        reused = _reusable(root, sf, wanted)
        if reused is not None:
            say(f"reusing TPC-DS sf={sf:g} in {root} ({', '.join(wanted)})")
            return GeneratedTables(root, files, reused, time.perf_counter() - started)

    duckdb = _import_duckdb()
    root.mkdir(parents=True, exist_ok=True)
    # Drop the marker first: if this run dies half way, the next one must not trust old files.
    (root / MARKER_NAME).unlink(missing_ok=True)

    rows: dict[str, int] = {}
    # Past a few GB of generated rows DuckDB needs somewhere to spill: a scratch database file.
    scratch = root / "_dsdgen.duckdb" if sf > _IN_MEMORY_MAX_SF else None
    if scratch is not None:
        scratch.unlink(missing_ok=True)
    con = duckdb.connect(str(scratch) if scratch is not None else ":memory:")
    try:
        con.execute(f"SET threads = {_THREADS}")
        # DuckDB draws its progress bar on stdout, which would corrupt `--json` output.
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET memory_limit = '{_MEMORY_LIMIT}'")
        load_tpcds_extension(con)
        say(f"dsdgen sf={sf:g} …")
        t0 = time.perf_counter()
        # dsdgen always builds all 24 tables; at benchmark scales this is cheap next to COPY.
        con.execute("CALL dsdgen(sf = ?)", [float(sf)])
        say(f"dsdgen done in {time.perf_counter() - t0:.1f}s")
        for table in wanted:
            target = files[table]
            # Write beside the target and rename, so a reader never sees a half-written file.
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.unlink(missing_ok=True)
            escaped = str(tmp).replace("'", "''")
            result = con.execute(
                f"COPY (SELECT {_select_list(con, table)} FROM main.{table}) "
                f"TO '{escaped}' (FORMAT parquet, COMPRESSION zstd)"
            ).fetchone()
            os.replace(tmp, target)
            rows[table] = int(result[0]) if result is not None else 0
            say(f"wrote {target.name} ({rows[table]:,} rows)")
    finally:
        con.close()
        if scratch is not None:
            scratch.unlink(missing_ok=True)
            scratch.with_name(scratch.name + ".wal").unlink(missing_ok=True)

    seconds = time.perf_counter() - started
    marker = {
        "format_version": _FORMAT_VERSION,
        "sf": float(sf),
        "tables": list(wanted),
        "rows": rows,
        "duckdb_version": duckdb.__version__,
        "seconds": round(seconds, 3),
    }
    marker_tmp = root / f".{MARKER_NAME}.tmp"
    marker_tmp.write_text(json.dumps(marker, indent=2) + "\n")
    os.replace(marker_tmp, root / MARKER_NAME)
    return GeneratedTables(root, files, rows, seconds)


def queries() -> dict[int, str]:
    """The 99 TPC-DS query texts (DuckDB's dialect) from `tpcds_queries()`, keyed by number."""
    duckdb = _import_duckdb()
    con = duckdb.connect(":memory:")
    try:
        load_tpcds_extension(con)
        pairs = con.execute("SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall()
    finally:
        con.close()
    return {int(nr): str(text) for nr, text in pairs}
