"""Glue's partition index operations: CreatePartitionIndex (filled by a backfill worker while
the table keeps serving), GetPartitionIndexes, DeletePartitionIndex; and adding an index's row,
which CreateTable does too."""
from __future__ import annotations

import json
import threading
from typing import Any

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from skiplake.catalog import store
from skiplake.catalog.backfill import backfill_index
from skiplake.catalog.catalog_core import CatalogCore
from skiplake.catalog.request_rules import INDEXABLE_TYPES, MAX_INDEXES, key_types, now_seconds, require_members
from skiplake.errors import AlreadyExistsError, EntityNotFoundError, InvalidInputError, ResourceNumberLimitExceededError


def add_index(conn: Connection, table_id: int, keys: dict[str, str], index: dict, status: str) -> int:
    """Add Glue's PartitionIndex `index` to a table, with `status`; its id. Refused: a name in use, more
    than MAX_INDEXES live indexes, a key that is not a partition key or not of an indexable type, a key
    named twice."""
    require_members(index, "IndexName", "Keys")
    names = list(index["Keys"])
    live = conn.execute(select(store.partition_indexes).where(and_(
        store.partition_indexes.c.table_id == table_id,
        store.partition_indexes.c.status.in_(("CREATING", "ACTIVE", "DELETING"))))).all()
    if any(r.name == index["IndexName"] for r in live):
        raise AlreadyExistsError(f"Partition index {index['IndexName']} already exists.")
    if len(live) >= MAX_INDEXES:
        raise ResourceNumberLimitExceededError(
            f"the table already has {len(live)} partition indexes ({', '.join(r.name for r in live)}); "
            f"at most {MAX_INDEXES} are allowed")
    lowered = {k.lower(): k for k in keys}
    resolved = []
    for n in names:
        if n.lower() not in lowered:
            raise InvalidInputError(f"index key {n!r} is not a partition key of the table "
                                    f"({', '.join(keys) or 'it has none'})")
        real = lowered[n.lower()]
        base = keys[real].strip().lower().split("(")[0].strip()
        if base not in INDEXABLE_TYPES:
            raise InvalidInputError(f"partition key {real!r} has type {keys[real]}; indexes support "
                                    f"{', '.join(INDEXABLE_TYPES)}")
        resolved.append(real)
    if len(set(resolved)) != len(resolved):
        raise InvalidInputError(f"index {index['IndexName']!r} names a key twice: {names}")
    return store.inserted_id(conn.execute(insert(store.partition_indexes).values(
        table_id=table_id, name=index["IndexName"], key_names=json.dumps(resolved), status=status,
        errors="[]", create_time=now_seconds())))


class PartitionIndexOperations(CatalogCore):
    """Glue's partition index operations, a part of GlueCatalog."""

    def create_partition_index(self, DatabaseName: str, TableName: str, PartitionIndex: dict,
                               CatalogId: str | None = None) -> dict:
        """CreatePartitionIndex: the index is CREATING while a backfill thread fills it, then ACTIVE, or
        FAILED with its BackfillErrors."""
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            index_id = add_index(conn, t.id, key_types(json.loads(t.body)), PartitionIndex, status="CREATING")
        # The table keeps serving requests while the index fills (it is not used until ACTIVE).
        thread = threading.Thread(target=backfill_index, args=(self.engine, t.id, index_id), daemon=True,
                                  name=f"backfill-{PartitionIndex['IndexName']}")
        self._backfills.append(thread)
        thread.start()
        return {}

    def get_partition_indexes(self, DatabaseName: str, TableName: str, NextToken: str | None = None,
                              CatalogId: str | None = None) -> dict:
        """GetPartitionIndexes: every index of the table, oldest first, with its status, keys and a
        failed one's BackfillErrors; one page (NextToken is ignored)."""
        with self.reader.connect() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            keys = key_types(json.loads(t.body))
            rows = conn.execute(select(store.partition_indexes).where(store.partition_indexes.c.table_id == t.id)
                                .order_by(store.partition_indexes.c.id)).all()
        out = []
        for r in rows:
            d: dict[str, Any] = {"IndexName": r.name, "IndexStatus": r.status,
                                 "Keys": [{"Name": n, "Type": keys.get(n, "string")} for n in json.loads(r.key_names)]}
            errors = json.loads(r.errors)
            if errors:
                d["BackfillErrors"] = [{"Code": e["Code"], "Partitions": e["Partitions"]} for e in errors]
            out.append(d)
        return {"PartitionIndexDescriptorList": out}

    def delete_partition_index(self, DatabaseName: str, TableName: str, IndexName: str,
                               CatalogId: str | None = None) -> dict:
        """DeletePartitionIndex: the index is DELETING until its entries are gone. A FAILED index is not
        found (EntityNotFoundError); keep_last_failures removes those."""
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            row = conn.execute(select(store.partition_indexes).where(and_(
                store.partition_indexes.c.table_id == t.id, store.partition_indexes.c.name == IndexName,
                store.partition_indexes.c.status != "FAILED"))).first()
            if row is None:
                raise EntityNotFoundError(f"Partition index {IndexName} not found on table {TableName}.")
            # DELETING is visible to other connections until the entries are gone.
            conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == row.id)
                         .values(status="DELETING"))
        with self.engine.begin() as conn:
            conn.execute(delete(store.index_entries).where(store.index_entries.c.index_id == row.id))
            conn.execute(delete(store.partition_indexes).where(store.partition_indexes.c.id == row.id))
        return {}
