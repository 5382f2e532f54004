"""What the statements need of a Lake, as a Protocol: the Lake facade calls this package, and this
package names no module above it (not even for type hints)."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from skiplake.catalog.client import CatalogClient
    from skiplake.log.snapshot import Snapshot


class LakeAccess(Protocol):
    """The Lake's session, root, catalog and the calls statements make back into it."""
    spark: "SparkSession"
    root: str | None
    catalog: "CatalogClient | None"
    database: str

    def path_of(self, name: str) -> str:
        """The folder of table `name` under the root."""

    def tables(self) -> list[str]:
        """The Delta tables under the root."""

    def catalog_table(self, name: str) -> Any:
        """The catalog's table `name`."""

    def latest_snapshot(self, path: str) -> "Snapshot":
        """The latest snapshot of the table at `path`, the same object while no commit comes."""

    def sql(self, query: str) -> "DataFrame":
        """Run one statement or query."""

    def readable_by_name(self, names: Sequence[str]) -> AbstractContextManager[None]:
        """Lake tables among `names` readable by Spark under their names, within the block."""
