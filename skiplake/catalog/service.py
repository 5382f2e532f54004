"""The catalog's operations with AWS Glue's names and request/response shapes, over the store.

`GlueCatalog(url).call("GetPartitions", {...})` takes and returns what Glue's JSON API does
(the HTTP server only moves these dicts over the wire); every method is also callable directly
(`catalog.get_partitions(DatabaseName=..., ...)`). Errors are `skiplake.errors.CatalogError`
subclasses whose `code` is Glue's error type.

The operations live by what they act on: databases.py, tables.py, partitions.py and
partition_indexes.py (whose backfill worker is backfill.py), over catalog_core.py's engines and
lookups; request_rules.py holds what they share.
"""
from __future__ import annotations

from typing import Any, Callable

from skiplake.extras import CATALOG_STORE, require

require("catalog", "the Glue-compatible catalog", CATALOG_STORE)  # before SQLAlchemy is imported

from skiplake.catalog.databases import DatabaseOperations  # noqa: E402
from skiplake.catalog.operations import method_name  # noqa: E402
from skiplake.catalog.partition_indexes import PartitionIndexOperations  # noqa: E402
from skiplake.catalog.partitions import PartitionOperations  # noqa: E402
from skiplake.catalog.tables import TableOperations  # noqa: E402
from skiplake.catalog.validation import validate  # noqa: E402
from skiplake.errors import InvalidInputError  # noqa: E402

OPERATIONS = (
    "CreateDatabase", "GetDatabase", "GetDatabases", "DeleteDatabase",
    "CreateTable", "GetTable", "GetTables", "UpdateTable", "DeleteTable",
    "CreatePartition", "BatchCreatePartition", "GetPartition", "GetPartitions", "BatchGetPartition",
    "UpdatePartition", "DeletePartition", "BatchDeletePartition",
    "CreatePartitionIndex", "GetPartitionIndexes", "DeletePartitionIndex",
)


class GlueCatalog(DatabaseOperations, TableOperations, PartitionOperations, PartitionIndexOperations):
    """A Glue-compatible catalog in the database at `url` (SQLite file or PostgreSQL)."""

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Glue operation `operation` on request `params`, as Glue's JSON API takes and answers it. An
        operation this catalog does not serve is an InvalidInputError, a request that breaks Glue's API
        model a ValidationError."""
        if operation not in OPERATIONS:
            raise InvalidInputError(f"unknown operation {operation!r}; this catalog serves {', '.join(OPERATIONS)}")
        validate(operation, params)  # Glue's API model first: types, lengths, patterns, required members
        method: Callable[..., dict[str, Any]] = getattr(self, method_name(operation))
        return method(**params)

    def wait_for_backfills(self, timeout: float = 60.0) -> None:
        """Wait for the partition index backfills started so far (tests, and a server stopping)."""
        for t in list(self._backfills):
            t.join(timeout)


__all__ = ["GlueCatalog", "OPERATIONS"]
