"""The optional parts of skiplake (pip extras) and the check each makes where it is used.

`pip install skiplake` brings what tables, skipping and `lake.sql` need. The catalog, PostgreSQL,
S3 and the TPC-DS demo need more packages, installed by `skiplake[catalog]`, `[postgres]`, `[s3]`
and `[demo]` (`[all]` for every one). Code that uses one of them calls `require` first, so that a
missing package is a MissingExtraError naming the feature and the pip command, raised where the
feature is used, rather than an ImportError from deep inside. `EXTRAS` must list the packages
pyproject.toml's extras install (tests/unit/test_extras.py compares them).
"""
from __future__ import annotations

import importlib.util
import sys
from typing import Mapping, Sequence

from skiplake.errors import MissingExtraError

__all__ = ["CATALOG_STORE", "EXTRAS", "missing_modules", "require", "require_database"]


# Each extra's packages: import name -> the distribution pyproject.toml lists for it.
EXTRAS: dict[str, Mapping[str, str]] = {
    # The Glue-compatible catalog: Lake(catalog=...), GlueCatalog, skiplake catalog serve and sync.
    "catalog": {"sqlalchemy": "SQLAlchemy", "orjson": "orjson", "boto3": "boto3", "uvicorn": "uvicorn",
                "httptools": "httptools", **({} if sys.platform == "win32" else {"uvloop": "uvloop"})},
    "postgres": {"psycopg": "psycopg[binary]"},   # the catalog on PostgreSQL (with the catalog's)
    "s3": {"boto3": "boto3"},                     # s3:// and s3a:// locations: the log's requests
    "demo": {"duckdb": "duckdb", "duckdb_extension_tpcds": "duckdb-extension-tpcds"},   # skiplake demo, tpcds
    # Spark Connect sessions: PySpark's Connect client (gRPC and its protobuf status types).
    "connect": {"grpc": "pyspark[connect]", "grpc_status": "pyspark[connect]", "zstandard": "pyspark[connect]"},
}

# What the catalog needs in-process (its store, service and Glue's API model), without the server.
CATALOG_STORE = ("sqlalchemy", "orjson", "boto3")

_DISTRIBUTIONS = {m: d for packages in EXTRAS.values() for m, d in packages.items()}
_found: set[str] = set()  # modules seen installed: the check is made once per module and process


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules of `modules` that are not installed (found without importing them)."""
    absent = []
    for module in modules:
        if module in _found:
            continue
        if importlib.util.find_spec(module) is None:
            absent.append(module)
        else:
            _found.add(module)
    return absent


def require(extra: str, feature: str, modules: Sequence[str] | None = None) -> None:
    """Raise MissingExtraError unless `modules` (by default every module of the extra) are
    installed; `feature` says what was being used, as the user wrote it."""
    absent = missing_modules(list(EXTRAS[extra]) if modules is None else modules)
    if absent:
        raise MissingExtraError(feature, extra, [_DISTRIBUTIONS.get(m, m) for m in absent])


def require_database(url: str) -> None:
    """The catalog's packages for a database URL, and PostgreSQL's driver too for a
    postgresql+psycopg one (the postgres extra installs both, so it is the one named)."""
    scheme = url.split(":", 1)[0].lower()  # only the scheme is shown: the URL may hold a password
    if scheme in ("postgresql+psycopg", "postgresql+psycopg_async"):
        require("postgres", f"a {scheme}:// catalog database", (*CATALOG_STORE, "psycopg"))
    else:
        require("catalog", f"a {scheme}:// catalog database", CATALOG_STORE)
