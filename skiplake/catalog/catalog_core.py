"""The state every catalog operation works on (the store's engines) and the lookups they all
make: a database's row, a table's row (or Glue's error for a missing one), a table's live
partition indexes."""
from __future__ import annotations

import threading
from typing import Any, Sequence

from skiplake.extras import CATALOG_STORE, require

require("catalog", "the Glue-compatible catalog", CATALOG_STORE)

from sqlalchemy import and_, bindparam, select  # noqa: E402
from sqlalchemy.engine import Connection, Engine  # noqa: E402

from skiplake.catalog import store  # noqa: E402
from skiplake.errors import EntityNotFoundError  # noqa: E402

# Statements every request runs, built once with bound parameters (SQLAlchemy then reuses
# their compiled form instead of building and hashing a new statement per request).
_TABLE_ROW = select(store.tables).where(and_(store.tables.c.database == bindparam("database"),
                                             store.tables.c.name == bindparam("name")))


class CatalogCore:
    """A Glue-compatible catalog's database at `url` (SQLite file or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        """The catalog in the database at `url`, opened with its schema created or checked (store.connect)."""
        self.url = url
        self.engine: Engine = store.connect(url)
        # Reads run outside a transaction: each statement sees committed data either way (READ
        # COMMITTED on PostgreSQL, SQLite's reads), and PostgreSQL is spared a BEGIN and a
        # ROLLBACK round trip per request.
        self.reader: Engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.last_plan: dict[str, Any] = {}   # how the latest GetPartitions ran (index used, rows read)
        self._backfills: list[threading.Thread] = []   # index backfills started (wait_for_backfills)

    def _database_row(self, conn: Connection, name: str) -> Any:
        row = conn.execute(select(store.databases).where(store.databases.c.name == name.lower())).first()
        if row is None:
            raise EntityNotFoundError(f"Database {name} not found.")
        return row

    def _table_row(self, conn: Connection, database: str, name: str) -> Any:
        row = conn.execute(_TABLE_ROW, {"database": database.lower(), "name": name.lower()}).first()
        if row is None:
            self._table_missing(conn, database, name)
        return row

    def _table_missing(self, conn: Connection, database: str, name: str) -> None:
        """Raise Glue's error for a table that is not there: its database's absence first.
        (A table row implies its database: the foreign key cascades.)"""
        self._database_row(conn, database)
        raise EntityNotFoundError(f"Table {name} not found in database {database}.")

    @staticmethod
    def _live_indexes(conn: Connection, table_id: int) -> Sequence[Any]:
        return conn.execute(select(store.partition_indexes).where(and_(
            store.partition_indexes.c.table_id == table_id,
            store.partition_indexes.c.status.in_(("CREATING", "ACTIVE"))))).all()
