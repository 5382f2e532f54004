"""A TPC-DS lake: the 24 tables of DuckDB's dsdgen as skiplake tables, fact tables clustered.

The seed clusters its fact tables by Z-order on the date and item keys, and so does this: every
fact table is appended, then rewritten by OPTIMIZE ZORDER BY (date key, item key) into files of
one target size (chosen so store_sales gets `files` files), then vacuumed so that its folder
holds exactly its live files and plain Spark can read the same files.

Within each fact file the rows are sorted by the item key, in Parquet pages of 1,000 rows: a file
covers a small range of dates and of items (date filters prune files), and each page a yet
smaller range of items (Spark's reader skips pages by the column index, so item keys skip most
rows of the files they do not prune). Rows in Z-order within the file would split both keys only
by about the square root of the page count; small row groups instead of small pages cost full
scans several times more. docs/dynamic-pruning.md gives the measurements behind this choice. Dimension tables are one
file each. A second layout, for plain Spark's own dynamic partition pruning, writes the fact
tables as Hive-style Parquet partitioned by their date key.

Everything is kept under the given folder with a marker and reused while the marker matches.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from benchmarks.common import DEFAULT_BASE
from skiplake.tpcds import TPCDS_TABLES, generate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Fact table -> (date key, item key): the Z-order columns, as in the seed.
FACT_KEYS: dict[str, tuple[str, str]] = {
    "store_sales": ("ss_sold_date_sk", "ss_item_sk"),
    "catalog_sales": ("cs_sold_date_sk", "cs_item_sk"),
    "web_sales": ("ws_sold_date_sk", "ws_item_sk"),
    "store_returns": ("sr_returned_date_sk", "sr_item_sk"),
    "catalog_returns": ("cr_returned_date_sk", "cr_item_sk"),
    "web_returns": ("wr_returned_date_sk", "wr_item_sk"),
    "inventory": ("inv_date_sk", "inv_item_sk"),
}
LAYOUT_VERSION = 3
PAGE_ROWS = 1000


def add_lake_arguments(parser: argparse.ArgumentParser, sf: tuple[float, float], files: tuple[int, int],
                       data_help: str) -> None:
    """--sf, --files and --data of a benchmark over the TPC-DS lake; `sf` and `files` are each
    (default, default with --quick), resolved by lake_scale."""
    parser.add_argument("--sf", type=float, default=None, help=f"TPC-DS scale factor (default {sf[0]:g}, --quick {sf[1]:g})")
    parser.add_argument("--files", type=int, default=None,
                        help=f"store_sales files (default {files[0]}, --quick {files[1]})")
    parser.add_argument("--data", default=str(DEFAULT_BASE), help=data_help)
    parser.set_defaults(lake_defaults=(sf, files))


def lake_scale(args: argparse.Namespace) -> tuple[float, int]:
    """(scale factor, store_sales files) the arguments of add_lake_arguments ask for."""
    (sf, quick_sf), (files, quick_files) = args.lake_defaults
    return (args.sf if args.sf is not None else quick_sf if args.quick else sf,
            args.files if args.files is not None else quick_files if args.quick else files)


def raw_root(base: Path, sf: float) -> Path:
    return base / f"tpcds-sf{sf:g}-raw"


def lake_root(base: Path, sf: float, files: int) -> Path:
    return base / f"tpcds-sf{sf:g}-lake-{files}"


def partitioned_root(base: Path, sf: float) -> Path:
    return base / f"tpcds-sf{sf:g}-by-date"


def build_lake(spark: "SparkSession", base: Path, sf: float, files: int,
               progress: Callable[[str], None] = print) -> Path:
    """The lake of TPC-DS at `sf` under `base`, store_sales in about `files` files (built once)."""
    import skiplake
    root = lake_root(base, sf, files)
    marker = root / "_tpcds_lake.json"
    wanted = {"version": LAYOUT_VERSION, "sf": sf, "files": files}
    if marker.exists() and json.loads(marker.read_text()).get("layout") == wanted:
        progress(f"reusing the TPC-DS lake {root}")
        return root
    generated = generate(raw_root(base, sf), sf=sf, tables=TPCDS_TABLES, progress=progress)
    shutil.rmtree(root, ignore_errors=True)
    lake = skiplake.Lake(spark, str(root))
    target = max(1 << 20, os.path.getsize(generated.files["store_sales"]) * 13 // (10 * files))
    info: dict[str, Any] = {}
    for name in TPCDS_TABLES:
        df = spark.read.parquet(str(generated.files[name]))
        t = lake.create_table(name, df.schema, description=f"TPC-DS {name}, sf={sf:g}")
        t.append(df if name in FACT_KEYS else df.coalesce(1))
        if name in FACT_KEYS:
            keys = list(FACT_KEYS[name])
            t.optimize(zorder_by=keys, target_file_size=target, progress=progress, sort_within=[keys[1]],
                       page_rows=PAGE_ROWS)
            t.vacuum(retention_hours=0, force=True)
        snap = t.refresh().snapshot
        info[name] = {"files": snap.num_files, "bytes": snap.size_bytes, "rows": generated.rows[name]}
        progress(f"{name}: {generated.rows[name]:,} rows in {snap.num_files} files")
    marker.write_text(json.dumps({"layout": wanted, "tables": info}, indent=2))
    return root


def build_partitioned(spark: "SparkSession", base: Path, sf: float, lake: Path,
                      progress: Callable[[str], None] = print) -> Path:
    """The fact tables as plain Parquet partitioned by their date key (rows from the lake's files),
    for plain Spark's dynamic partition pruning; dimensions are not copied."""
    root = partitioned_root(base, sf)
    marker = root / "_tpcds_by_date.json"
    if marker.exists():
        progress(f"reusing the date-partitioned fact tables {root}")
        return root
    shutil.rmtree(root, ignore_errors=True)
    for name, (date_key, _item) in FACT_KEYS.items():
        df = spark.read.parquet(str(lake / name))
        # One task per date: otherwise every task writes a file into every partition folder.
        df.repartition(date_key).write.partitionBy(date_key).parquet(str(root / name))
        progress(f"{name}: partitioned by {date_key}")
    marker.write_text(json.dumps({"sf": sf}))
    return root
