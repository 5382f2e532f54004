"""Glue's table operations: CreateTable (with its partition indexes), GetTable, GetTables,
UpdateTable (which may not change an indexed key), DeleteTable."""
from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, delete, insert, select, update

from skiplake.catalog import store
from skiplake.catalog.catalog_core import CatalogCore
from skiplake.catalog.partition_indexes import add_index
from skiplake.catalog.request_rules import (
    MAX_INDEXES,
    check_partition_keys,
    key_types,
    next_token,
    now_seconds,
    page_size,
    read_token,
    require_members,
    utc_time,
)
from skiplake.errors import AlreadyExistsError, InvalidInputError, ResourceNumberLimitExceededError


class TableOperations(CatalogCore):
    """Glue's table operations, a part of GlueCatalog."""

    @staticmethod
    def _table_out(row: Any) -> dict:
        body = json.loads(row.body)
        return {"Name": row.name, "DatabaseName": row.database, **body,
                "CreateTime": utc_time(row.create_time), "UpdateTime": utc_time(row.update_time)}

    def create_table(self, DatabaseName: str, TableInput: dict, PartitionIndexes: list | None = None,
                     CatalogId: str | None = None, TransactionId: str | None = None,
                     OpenTableFormatInput: dict | None = None) -> dict:
        """CreateTable, with up to MAX_INDEXES partition indexes, ACTIVE at once (there are no partitions
        yet to fill them). The name is kept lower-case; OpenTableFormatInput and TransactionId are
        ignored."""
        require_members(TableInput, "Name")
        name = TableInput["Name"].lower()
        check_partition_keys(TableInput.get("PartitionKeys") or [])
        indexes = list(PartitionIndexes or [])
        if len(indexes) > MAX_INDEXES:
            raise ResourceNumberLimitExceededError(
                f"a table may have at most {MAX_INDEXES} partition indexes; {len(indexes)} were given")
        with self.engine.begin() as conn:
            self._database_row(conn, DatabaseName)
            exists = conn.execute(select(store.tables.c.id).where(and_(
                store.tables.c.database == DatabaseName.lower(), store.tables.c.name == name))).first()
            if exists:
                raise AlreadyExistsError(f"Table {name} already exists in database {DatabaseName}.")
            body = {k: v for k, v in TableInput.items() if k != "Name"}
            now = now_seconds()
            table_id = store.inserted_id(conn.execute(insert(store.tables).values(
                database=DatabaseName.lower(), name=name, body=json.dumps(body, default=str),
                create_time=now, update_time=now)))
            keys = key_types(body)
            for idx in indexes:
                add_index(conn, table_id, keys, idx, status="ACTIVE")  # no partitions yet
        return {}

    def get_table(self, DatabaseName: str, Name: str, CatalogId: str | None = None, **_: Any) -> dict:
        """GetTable (EntityNotFoundError names the database when that is what is missing)."""
        with self.reader.connect() as conn:
            return {"Table": self._table_out(self._table_row(conn, DatabaseName, Name))}

    def get_tables(self, DatabaseName: str, Expression: str | None = None, NextToken: str | None = None,
                   MaxResults: int | None = None, CatalogId: str | None = None, **_: Any) -> dict:
        """GetTables in name order, at most 100 a page; `Expression` is matched as a shell glob, with
        `.*` read as `*`."""
        import fnmatch
        limit = page_size(MaxResults, 100)
        after = read_token(NextToken)
        with self.reader.connect() as conn:
            self._database_row(conn, DatabaseName)
            q = select(store.tables).where(store.tables.c.database == DatabaseName.lower()).order_by(store.tables.c.name)
            if after is not None:
                q = q.where(store.tables.c.name > after)
            rows = conn.execute(q).all()
        if Expression:
            # Glue's table-name expression is a regular-expression-like pattern; * and . wildcards.
            pattern = Expression.replace(".*", "*")
            rows = [r for r in rows if fnmatch.fnmatch(r.name, pattern.lower())]
        out: dict[str, Any] = {"TableList": [self._table_out(r) for r in rows[:limit]]}
        if len(rows) > limit:
            out["NextToken"] = next_token(rows[limit - 1].name)
        return out

    def update_table(self, DatabaseName: str, TableInput: dict, CatalogId: str | None = None,
                     SkipArchive: bool | None = None, **_: Any) -> dict:
        """UpdateTable: the table's input replaced. A partition key in a live index may not be renamed,
        removed, retyped or reordered (InvalidInputError: delete the index first)."""
        require_members(TableInput, "Name")
        with self.engine.begin() as conn:
            row = self._table_row(conn, DatabaseName, TableInput["Name"])
            old_keys = key_types(json.loads(row.body))
            new_body = {k: v for k, v in TableInput.items() if k != "Name"}
            new_keys = key_types(new_body)
            check_partition_keys(TableInput.get("PartitionKeys") or [])
            for idx in conn.execute(select(store.partition_indexes).where(
                    and_(store.partition_indexes.c.table_id == row.id,
                         store.partition_indexes.c.status.in_(("CREATING", "ACTIVE"))))).all():
                names = json.loads(idx.key_names)
                old_order = [k for k in old_keys if k in names]
                new_order = [k for k in new_keys if k in names]
                for k in names:
                    if k not in new_keys or new_keys[k] != old_keys[k]:
                        raise InvalidInputError(
                            f"partition key {k!r} is in partition index {idx.name!r}: it cannot be renamed, removed "
                            "or retyped; delete the index first")
                if old_order != new_order:
                    raise InvalidInputError(
                        f"the partition keys of index {idx.name!r} ({', '.join(names)}) cannot be reordered; "
                        "delete the index first")
            conn.execute(update(store.tables).where(store.tables.c.id == row.id).values(
                body=json.dumps(new_body, default=str), update_time=now_seconds()))
        return {}

    def delete_table(self, DatabaseName: str, Name: str, CatalogId: str | None = None, **_: Any) -> dict:
        """DeleteTable, with its partitions and indexes (the foreign keys cascade)."""
        with self.engine.begin() as conn:
            row = self._table_row(conn, DatabaseName, Name)
            conn.execute(delete(store.tables).where(store.tables.c.id == row.id))
        return {}
