"""skiplake: a lakehouse table layer for PySpark on the Delta Lake protocol."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["BucketSpec", "IdentityColumn", "Lake", "Table", "local_spark", "register", "errors", "__version__"]

from skiplake import errors  # noqa: E402  (no pyspark)
from skiplake.version import __version__  # noqa: E402


def __getattr__(name: str) -> Any:
    # pyspark is imported on first use of the Spark-facing names, so `import skiplake.log` stays light.
    if name == "local_spark":
        from skiplake.spark.session.session_setup import local_spark
        return local_spark
    if name == "register":
        from skiplake.spark.source.datasource import register
        return register
    if name == "IdentityColumn":
        from skiplake.txn.identity import IdentityColumn
        return IdentityColumn
    if name in ("Table", "BucketSpec"):
        from skiplake import table
        return getattr(table, name)
    if name == "Lake":
        from skiplake.lake import Lake
        return Lake
    raise AttributeError(name)


if TYPE_CHECKING:
    from skiplake.lake import Lake
    from skiplake.spark.session.session_setup import local_spark
    from skiplake.spark.source.datasource import register
    from skiplake.table import BucketSpec, Table
    from skiplake.txn.identity import IdentityColumn
