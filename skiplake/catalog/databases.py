"""Glue's database operations: CreateDatabase, GetDatabase, GetDatabases, DeleteDatabase."""
from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete, insert, select

from skiplake.catalog import store
from skiplake.catalog.catalog_core import CatalogCore
from skiplake.catalog.request_rules import next_token, now_seconds, page_size, read_token, require_members, utc_time
from skiplake.errors import AlreadyExistsError


class DatabaseOperations(CatalogCore):
    """Glue's database operations, a part of GlueCatalog."""

    def create_database(self, DatabaseInput: dict, CatalogId: str | None = None, Tags: dict | None = None) -> dict:
        """CreateDatabase (AlreadyExistsError for a name taken); the name is kept lower-case, as Glue
        keeps it, and Tags are ignored."""
        require_members(DatabaseInput, "Name")
        name = DatabaseInput["Name"].lower()
        with self.engine.begin() as conn:
            if conn.execute(select(store.databases.c.name).where(store.databases.c.name == name)).first():
                raise AlreadyExistsError(f"Database {name} already exists.")
            body = {k: v for k, v in DatabaseInput.items() if k != "Name"}
            conn.execute(insert(store.databases).values(name=name, body=json.dumps(body), create_time=now_seconds()))
        return {}

    @staticmethod
    def _database_out(row: Any) -> dict:
        return {"Name": row.name, **json.loads(row.body), "CreateTime": utc_time(row.create_time)}

    def get_database(self, Name: str, CatalogId: str | None = None) -> dict:
        """GetDatabase (EntityNotFoundError when there is none of that name)."""
        with self.reader.connect() as conn:
            return {"Database": self._database_out(self._database_row(conn, Name))}

    def get_databases(self, NextToken: str | None = None, MaxResults: int | None = None,
                      CatalogId: str | None = None, ResourceShareType: str | None = None,
                      AttributesToGet: list | None = None) -> dict:
        """GetDatabases in name order, at most 100 a page (MaxResults for fewer), the next page by NextToken."""
        limit = page_size(MaxResults, 100)
        after = read_token(NextToken)
        q = select(store.databases).order_by(store.databases.c.name).limit(limit + 1)
        if after is not None:
            q = q.where(store.databases.c.name > after)
        with self.reader.connect() as conn:
            rows = conn.execute(q).all()
        out: dict[str, Any] = {"DatabaseList": [self._database_out(r) for r in rows[:limit]]}
        if len(rows) > limit:
            out["NextToken"] = next_token(rows[limit - 1].name)
        return out

    def delete_database(self, Name: str, CatalogId: str | None = None) -> dict:
        """DeleteDatabase, with its tables and their partitions and indexes (the foreign keys cascade)."""
        with self.engine.begin() as conn:
            self._database_row(conn, Name)
            conn.execute(delete(store.databases).where(store.databases.c.name == Name.lower()))
        return {}
