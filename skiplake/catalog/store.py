"""The catalog's tables in a real database: SQLite (a file, the embedded default) or PostgreSQL.

SQLAlchemy Core, no ORM: each Glue object is one row whose Glue-shaped body is kept as JSON,
with the columns that queries need beside it. Partition index entries are rows
(index_id, key, partition_id) under a B-tree on (index_id, key), so a GetPartitions that an
index can serve is one range scan: O(log n + k).

The schema is versioned (`catalog_meta.schema_version`): opening a database made by an older
release migrates it (none yet), a newer one is refused.
"""
from __future__ import annotations

from typing import Any

from skiplake.extras import CATALOG_STORE, require

require("catalog", "the Glue-compatible catalog", CATALOG_STORE)

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

from skiplake.errors import CatalogError
from skiplake.extras import require_database

SCHEMA_VERSION = 1

metadata = MetaData()

catalog_meta = Table(
    "catalog_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

databases = Table(
    "databases", metadata,
    Column("name", String(255), primary_key=True),
    Column("body", Text, nullable=False),          # Glue's Database, as JSON
    Column("create_time", Float, nullable=False),
)

tables = Table(
    "tables", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("database", String(255), ForeignKey("databases.name", ondelete="CASCADE"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("body", Text, nullable=False),          # Glue's TableInput fields, as JSON
    Column("create_time", Float, nullable=False),
    Column("update_time", Float, nullable=False),
    UniqueConstraint("database", "name", name="uq_tables_database_name"),
)

partitions = Table(
    "partitions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_id", Integer, ForeignKey("tables.id", ondelete="CASCADE"), nullable=False),
    Column("values_key", Text, nullable=False),    # JSON list of the values: identity within the table
    Column("body", Text, nullable=False),          # Glue's PartitionInput fields, as JSON
    Column("create_time", Float, nullable=False),
    UniqueConstraint("table_id", "values_key", name="uq_partitions_values"),
)

partition_indexes = Table(
    "partition_indexes", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("table_id", Integer, ForeignKey("tables.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("key_names", Text, nullable=False),     # JSON list of partition key names, index order
    Column("status", String(16), nullable=False),  # CREATING, ACTIVE, DELETING, FAILED
    Column("errors", Text, nullable=False, default="[]"),  # Glue's BackfillErrors, as JSON
    Column("create_time", Float, nullable=False),
)

index_entries = Table(
    "index_entries", metadata,
    Column("index_id", Integer, ForeignKey("partition_indexes.id", ondelete="CASCADE"), primary_key=True),
    # Byte order is what the key encoding relies on: "C" collation on PostgreSQL (SQLite's
    # default BINARY already is).
    Column("key", Text().with_variant(Text(collation="C"), "postgresql"), primary_key=True),
    Column("partition_id", Integer, ForeignKey("partitions.id", ondelete="CASCADE"), primary_key=True),
)
# Signed requests already served (replay protection shared by the server's workers), kept
# until the signature's 5-minute window has passed.
request_signatures = Table(
    "request_signatures", metadata,
    Column("signature", String(64), primary_key=True),
    Column("expires", Float, nullable=False),
)

Index("ix_index_entries_partition", index_entries.c.partition_id)
# A full scan pages through a table's partitions by id: without this the database re-reads the
# table for every page (quadratic in the number of partitions).
Index("ix_partitions_table_id", partitions.c.table_id, partitions.c.id)


def connect(url: str) -> Engine:
    """An engine for `url` (`sqlite:///path.db` or `postgresql+psycopg://...`), schema ready."""
    require_database(url)
    engine = create_engine(url, future=True)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            cur = conn.cursor()
            cur.execute("PRAGMA foreign_keys = ON")
            cur.execute("PRAGMA journal_mode = WAL")   # readers do not block the writer
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()
    migrate(engine)
    return engine


def inserted_id(result: CursorResult[Any]) -> int:
    """The generated id of the row a single-row INSERT added."""
    key = result.inserted_primary_key
    # None only when an implicit RETURNING gave no row: an INSERT of one row that succeeded
    # always returns one (an executemany raises instead).
    assert key is not None
    return key[0]


def migrate(engine: Engine) -> None:
    """Create the schema, or check the version of an existing one."""
    metadata.create_all(engine)
    for table in metadata.sorted_tables:
        for index in table.indexes:  # indexes added after a database was created
            index.create(engine, checkfirst=True)
    with engine.begin() as conn:
        row = conn.execute(select(catalog_meta.c.value).where(catalog_meta.c.key == "schema_version")).first()
        if row is None:
            conn.execute(catalog_meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        elif int(row[0]) > SCHEMA_VERSION:
            raise CatalogError(f"the catalog database has schema version {row[0]}, newer than this release "
                               f"understands ({SCHEMA_VERSION}); upgrade skiplake")
