"""The catalog's operations with AWS Glue's names and request/response shapes, over the store.

`GlueCatalog(url).call("GetPartitions", {...})` takes and returns what Glue's JSON API does
(the HTTP server only moves these dicts over the wire); every method is also callable directly
(`catalog.get_partitions(DatabaseName=..., ...)`). Errors are `skiplake.errors.CatalogError`
subclasses whose `code` is Glue's error type.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

from skiplake.extras import CATALOG_STORE, require

require("catalog", "the Glue-compatible catalog", CATALOG_STORE)

import orjson
from sqlalchemy import Select, and_, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from skiplake.catalog import store
from skiplake.catalog.expression import Expr, Key, matcher, parse, residual, type_kind, typed_value
from skiplake.catalog.index_keys import KeyRange, encode, index_problem, plan_range
from skiplake.catalog.operations import method_name
from skiplake.catalog.validation import validate
from skiplake.errors import (
    AlreadyExistsError,
    CatalogError,
    EntityNotFoundError,
    InvalidInputError,
    ResourceNumberLimitExceededError,
)

MAX_INDEXES = 3
MAX_FAILED_INDEXES = 10
MAX_BATCH_CREATE = 100
MAX_BATCH_DELETE = 25
MAX_BATCH_GET = 1000
MAX_RESULTS = 1000
MAX_SEGMENTS = 10
INDEXABLE_TYPES = ("string", "char", "varchar", "int", "bigint", "long", "tinyint", "smallint", "date")

OPERATIONS = (
    "CreateDatabase", "GetDatabase", "GetDatabases", "DeleteDatabase",
    "CreateTable", "GetTable", "GetTables", "UpdateTable", "DeleteTable",
    "CreatePartition", "BatchCreatePartition", "GetPartition", "GetPartitions", "BatchGetPartition",
    "UpdatePartition", "DeletePartition", "BatchDeletePartition",
    "CreatePartitionIndex", "GetPartitionIndexes", "DeletePartitionIndex",
)


# Statements every request runs, built once with bound parameters (SQLAlchemy then reuses
# their compiled form instead of building and hashing a new statement per request).
_TABLE_ROW = select(store.tables).where(and_(store.tables.c.database == bindparam("database"),
                                             store.tables.c.name == bindparam("name")))
_TABLE_WITH_INDEXES = (
    select(store.tables, store.partition_indexes.c.id.label("index_id"),
           store.partition_indexes.c.name.label("index_name"), store.partition_indexes.c.key_names)
    .select_from(store.tables.outerjoin(store.partition_indexes, and_(
        store.partition_indexes.c.table_id == store.tables.c.id, store.partition_indexes.c.status == "ACTIVE")))
    .where(and_(store.tables.c.database == bindparam("database"), store.tables.c.name == bindparam("name")))
    .order_by(store.partition_indexes.c.id))


@lru_cache(maxsize=None)
def _index_scan(low: bool, high: bool, after: bool) -> Select:
    """An index range scan joined to the partitions, in key order, for each shape of range."""
    e, p = store.index_entries, store.partitions
    q = select(e.c.key, e.c.partition_id, p).join(p, p.c.id == e.c.partition_id).where(
        e.c.index_id == bindparam("index_id"))
    if low:
        q = q.where(e.c.key >= bindparam("low"))
    if high:
        q = q.where(e.c.key < bindparam("high"))
    if after:
        q = q.where((e.c.key > bindparam("after_key"))
                    | and_(e.c.key == bindparam("after_key"), e.c.partition_id > bindparam("after_pid")))
    return q.order_by(e.c.key, e.c.partition_id).limit(bindparam("batch"))


def _now() -> float:
    return time.time()


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


def _token(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


def _untoken(token: str | None) -> Any:
    if not token:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, json.JSONDecodeError):
        raise InvalidInputError(f"NextToken {token!r} is not a token this catalog issued") from None


def _require(params: dict, *names: str) -> None:
    for n in names:
        if params.get(n) in (None, ""):
            raise InvalidInputError(f"{n} is required")


class GlueCatalog:
    """A Glue-compatible catalog in the database at `url` (SQLite file or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = store.connect(url)
        # Reads run outside a transaction: each statement sees committed data either way (READ
        # COMMITTED on PostgreSQL, SQLite's reads), and PostgreSQL is spared a BEGIN and a
        # ROLLBACK round trip per request.
        self.reader: Engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.last_plan: dict[str, Any] = {}   # how the latest GetPartitions ran (index used, rows read)
        self._backfills: list[threading.Thread] = []

    # ------------------------------------------------------------------ dispatch

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation not in OPERATIONS:
            raise InvalidInputError(f"unknown operation {operation!r}; this catalog serves {', '.join(OPERATIONS)}")
        validate(operation, params)  # Glue's API model first: types, lengths, patterns, required members
        method: Callable[..., dict[str, Any]] = getattr(self, method_name(operation))
        return method(**params)

    def wait_for_backfills(self, timeout: float = 60.0) -> None:
        for t in list(self._backfills):
            t.join(timeout)

    # ------------------------------------------------------------------ databases

    def create_database(self, DatabaseInput: dict, CatalogId: str | None = None, Tags: dict | None = None) -> dict:
        _require(DatabaseInput, "Name")
        name = DatabaseInput["Name"].lower()
        with self.engine.begin() as conn:
            if conn.execute(select(store.databases.c.name).where(store.databases.c.name == name)).first():
                raise AlreadyExistsError(f"Database {name} already exists.")
            body = {k: v for k, v in DatabaseInput.items() if k != "Name"}
            conn.execute(insert(store.databases).values(name=name, body=json.dumps(body), create_time=_now()))
        return {}

    def _database_row(self, conn: Connection, name: str) -> Any:
        row = conn.execute(select(store.databases).where(store.databases.c.name == name.lower())).first()
        if row is None:
            raise EntityNotFoundError(f"Database {name} not found.")
        return row

    @staticmethod
    def _database_out(row: Any) -> dict:
        return {"Name": row.name, **json.loads(row.body), "CreateTime": _ts(row.create_time)}

    def get_database(self, Name: str, CatalogId: str | None = None) -> dict:
        with self.reader.connect() as conn:
            return {"Database": self._database_out(self._database_row(conn, Name))}

    def get_databases(self, NextToken: str | None = None, MaxResults: int | None = None,
                      CatalogId: str | None = None, ResourceShareType: str | None = None,
                      AttributesToGet: list | None = None) -> dict:
        limit = _page_size(MaxResults, 100)
        after = _untoken(NextToken)
        q = select(store.databases).order_by(store.databases.c.name).limit(limit + 1)
        if after is not None:
            q = q.where(store.databases.c.name > after)
        with self.reader.connect() as conn:
            rows = conn.execute(q).all()
        out: dict[str, Any] = {"DatabaseList": [self._database_out(r) for r in rows[:limit]]}
        if len(rows) > limit:
            out["NextToken"] = _token(rows[limit - 1].name)
        return out

    def delete_database(self, Name: str, CatalogId: str | None = None) -> dict:
        with self.engine.begin() as conn:
            self._database_row(conn, Name)
            conn.execute(delete(store.databases).where(store.databases.c.name == Name.lower()))
        return {}

    # ------------------------------------------------------------------ tables

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
    def _table_out(row: Any) -> dict:
        body = json.loads(row.body)
        return {"Name": row.name, "DatabaseName": row.database, **body,
                "CreateTime": _ts(row.create_time), "UpdateTime": _ts(row.update_time)}

    def create_table(self, DatabaseName: str, TableInput: dict, PartitionIndexes: list | None = None,
                     CatalogId: str | None = None, TransactionId: str | None = None,
                     OpenTableFormatInput: dict | None = None) -> dict:
        _require(TableInput, "Name")
        name = TableInput["Name"].lower()
        _check_partition_keys(TableInput.get("PartitionKeys") or [])
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
            now = _now()
            table_id = conn.execute(insert(store.tables).values(
                database=DatabaseName.lower(), name=name, body=json.dumps(body, default=str),
                create_time=now, update_time=now)).inserted_primary_key[0]
            keys = _key_types(body)
            for idx in indexes:
                self._add_index(conn, table_id, keys, idx, status="ACTIVE")  # no partitions yet
        return {}

    def get_table(self, DatabaseName: str, Name: str, CatalogId: str | None = None, **_: Any) -> dict:
        with self.reader.connect() as conn:
            return {"Table": self._table_out(self._table_row(conn, DatabaseName, Name))}

    def get_tables(self, DatabaseName: str, Expression: str | None = None, NextToken: str | None = None,
                   MaxResults: int | None = None, CatalogId: str | None = None, **_: Any) -> dict:
        import fnmatch
        limit = _page_size(MaxResults, 100)
        after = _untoken(NextToken)
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
            out["NextToken"] = _token(rows[limit - 1].name)
        return out

    def update_table(self, DatabaseName: str, TableInput: dict, CatalogId: str | None = None,
                     SkipArchive: bool | None = None, **_: Any) -> dict:
        _require(TableInput, "Name")
        with self.engine.begin() as conn:
            row = self._table_row(conn, DatabaseName, TableInput["Name"])
            old_keys = _key_types(json.loads(row.body))
            new_body = {k: v for k, v in TableInput.items() if k != "Name"}
            new_keys = _key_types(new_body)
            _check_partition_keys(TableInput.get("PartitionKeys") or [])
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
                body=json.dumps(new_body, default=str), update_time=_now()))
        return {}

    def delete_table(self, DatabaseName: str, Name: str, CatalogId: str | None = None, **_: Any) -> dict:
        with self.engine.begin() as conn:
            row = self._table_row(conn, DatabaseName, Name)
            conn.execute(delete(store.tables).where(store.tables.c.id == row.id))
        return {}

    # ------------------------------------------------------------------ partitions

    @staticmethod
    def _live_indexes(conn: Connection, table_id: int) -> list[Any]:
        return conn.execute(select(store.partition_indexes).where(and_(
            store.partition_indexes.c.table_id == table_id,
            store.partition_indexes.c.status.in_(("CREATING", "ACTIVE"))))).all()

    def _partition_values_ok(self, table_row: Any, values: Sequence[str], indexes: list[Any]) -> None:
        """New partitions: arity, and (once an index exists) the indexed values' types and characters."""
        keys = _key_types(json.loads(table_row.body))
        if len(values) != len(keys):
            raise InvalidInputError(f"the table has {len(keys)} partition keys ({', '.join(keys)}); "
                                    f"{len(values)} values were given: {list(values)}")
        indexed: set[str] = set()
        for idx in indexes:
            indexed.update(json.loads(idx.key_names))
        for (name, type_), value in zip(keys.items(), values):
            if name not in indexed:
                continue
            problem = index_problem(value, type_kind(type_))
            if problem == "UNSUPPORTED_PARTITION_CHARACTER_ERROR":
                raise InvalidInputError(f"partition value {value!r} of indexed key {name!r} contains U+0000, "
                                        "U+0001 or U+0002, which indexed keys may not hold")
            if problem is not None:
                raise InvalidInputError(f"partition value {value!r} is not a valid {type_} for indexed key {name!r}")

    def _insert_partition(self, conn: Connection, table_row: Any, partition_input: dict,
                          indexes: list[Any] | None = None) -> int:
        values = [str(v) for v in partition_input.get("Values") or []]
        indexes = self._live_indexes(conn, table_row.id) if indexes is None else indexes
        self._partition_values_ok(table_row, values, indexes)
        key = json.dumps(values)
        if conn.execute(select(store.partitions.c.id).where(and_(store.partitions.c.table_id == table_row.id,
                                                                 store.partitions.c.values_key == key))).first():
            raise AlreadyExistsError(f"Partition {values} already exists.")
        body = {k: v for k, v in partition_input.items() if k != "Values"}
        pid = conn.execute(insert(store.partitions).values(
            table_id=table_row.id, values_key=key, body=json.dumps(body, default=str),
            create_time=_now())).inserted_primary_key[0]
        self._index_partition(conn, table_row, pid, values, indexes)
        return pid

    def _index_partition(self, conn: Connection, table_row: Any, pid: int, values: Sequence[str],
                         indexes: list[Any]) -> None:
        entries = _index_entries(indexes, _key_types(json.loads(table_row.body)), pid, values)
        if entries:
            conn.execute(insert(store.index_entries), entries)

    def create_partition(self, DatabaseName: str, TableName: str, PartitionInput: dict,
                         CatalogId: str | None = None) -> dict:
        with self.engine.begin() as conn:
            self._insert_partition(conn, self._table_row(conn, DatabaseName, TableName), PartitionInput)
        return {}

    def batch_create_partition(self, DatabaseName: str, TableName: str, PartitionInputList: list,
                               CatalogId: str | None = None) -> dict:
        if len(PartitionInputList) > MAX_BATCH_CREATE:
            raise InvalidInputError(f"BatchCreatePartition takes at most {MAX_BATCH_CREATE} partitions, "
                                    f"not {len(PartitionInputList)}")
        errors: list[tuple[int, dict]] = []
        position = {id(p): i for i, p in enumerate(PartitionInputList)}

        def refuse(p: dict, e: CatalogError) -> None:
            errors.append((position[id(p)], _item_error(p, e)))

        with self.engine.begin() as conn:
            table_row = self._table_row(conn, DatabaseName, TableName)
            indexes = self._live_indexes(conn, table_row.id)
            # Check every item first (per-item errors), then write the good ones in bulk.
            good: dict[str, tuple[list[str], dict]] = {}
            for p in PartitionInputList:
                values = [str(v) for v in p.get("Values") or []]
                try:
                    self._partition_values_ok(table_row, values, indexes)
                except CatalogError as e:
                    refuse(p, e)
                    continue
                key = json.dumps(values)
                if key in good:
                    refuse(p, AlreadyExistsError(f"Partition {values} is in the request twice."))
                    continue
                good[key] = (values, p)
            if good:
                taken = {r.values_key for r in conn.execute(select(store.partitions.c.values_key).where(and_(
                    store.partitions.c.table_id == table_row.id, store.partitions.c.values_key.in_(list(good)))))}
                for key in taken:
                    values, p = good.pop(key)
                    refuse(p, AlreadyExistsError(f"Partition {values} already exists."))
            if good:
                now = _now()
                rows = [{"table_id": table_row.id, "values_key": key, "create_time": now,
                         "body": json.dumps({k: v for k, v in p.items() if k != "Values"}, default=str)}
                        for key, (_, p) in good.items()]
                ids = conn.execute(insert(store.partitions).returning(store.partitions.c.id,
                                                                     store.partitions.c.values_key), rows).all()
                keys = _key_types(json.loads(table_row.body))
                entries = [e for pid, key in ids for e in _index_entries(indexes, keys, pid, json.loads(key))]
                if entries:
                    conn.execute(insert(store.index_entries), entries)
        return {"Errors": [e for _, e in sorted(errors, key=lambda x: x[0])]} if errors else {}

    def _partition_out(self, table_row: Any, row: Any, exclude_columns: bool = False) -> dict:
        body = orjson.loads(row.body)   # GetPartitions' hot path: orjson parses these several times faster
        if exclude_columns and isinstance(body.get("StorageDescriptor"), dict):
            body["StorageDescriptor"] = {k: v for k, v in body["StorageDescriptor"].items() if k != "Columns"}
        return {"Values": orjson.loads(row.values_key), "DatabaseName": table_row.database,
                "TableName": table_row.name, **body, "CreationTime": _ts(row.create_time)}

    def _partition_row(self, conn: Connection, table_row: Any, values: Sequence[str]) -> Any:
        row = conn.execute(select(store.partitions).where(and_(
            store.partitions.c.table_id == table_row.id,
            store.partitions.c.values_key == json.dumps([str(v) for v in values])))).first()
        if row is None:
            raise EntityNotFoundError(f"Partition {list(values)} not found in table {table_row.name}.")
        return row

    def get_partition(self, DatabaseName: str, TableName: str, PartitionValues: list,
                      CatalogId: str | None = None) -> dict:
        with self.reader.connect() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            return {"Partition": self._partition_out(t, self._partition_row(conn, t, PartitionValues))}

    def batch_get_partition(self, DatabaseName: str, TableName: str, PartitionsToGet: list,
                            CatalogId: str | None = None) -> dict:
        if len(PartitionsToGet) > MAX_BATCH_GET:
            raise InvalidInputError(f"BatchGetPartition takes at most {MAX_BATCH_GET} partitions")
        found, missing = [], []
        with self.reader.connect() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            for p in PartitionsToGet:
                try:
                    found.append(self._partition_out(t, self._partition_row(conn, t, p.get("Values") or [])))
                except EntityNotFoundError:
                    missing.append({"Values": p.get("Values") or []})
        return {"Partitions": found, "UnprocessedKeys": missing}

    def update_partition(self, DatabaseName: str, TableName: str, PartitionValueList: list, PartitionInput: dict,
                         CatalogId: str | None = None) -> dict:
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            row = self._partition_row(conn, t, PartitionValueList)
            new_values = [str(v) for v in PartitionInput.get("Values") or PartitionValueList]
            if new_values != json.loads(row.values_key):
                conn.execute(delete(store.partitions).where(store.partitions.c.id == row.id))
                self._insert_partition(conn, t, {**PartitionInput, "Values": new_values})
            else:
                body = {k: v for k, v in PartitionInput.items() if k != "Values"}
                conn.execute(update(store.partitions).where(store.partitions.c.id == row.id).values(
                    body=json.dumps(body, default=str)))
        return {}

    def delete_partition(self, DatabaseName: str, TableName: str, PartitionValues: list,
                         CatalogId: str | None = None) -> dict:
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            row = self._partition_row(conn, t, PartitionValues)
            conn.execute(delete(store.partitions).where(store.partitions.c.id == row.id))
        return {}

    def batch_delete_partition(self, DatabaseName: str, TableName: str, PartitionsToDelete: list,
                               CatalogId: str | None = None) -> dict:
        if len(PartitionsToDelete) > MAX_BATCH_DELETE:
            raise InvalidInputError(f"BatchDeletePartition takes at most {MAX_BATCH_DELETE} partitions, "
                                    f"not {len(PartitionsToDelete)}")
        errors = []
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            for p in PartitionsToDelete:
                try:
                    row = self._partition_row(conn, t, p.get("Values") or [])
                    conn.execute(delete(store.partitions).where(store.partitions.c.id == row.id))
                except CatalogError as e:
                    errors.append(_item_error(p, e))
        return {"Errors": errors} if errors else {}

    def get_partitions(self, DatabaseName: str, TableName: str, Expression: str | None = None,
                       NextToken: str | None = None, Segment: dict | None = None, MaxResults: int | None = None,
                       ExcludeColumnSchema: bool | None = None, CatalogId: str | None = None,
                       **_: Any) -> dict:
        limit = _page_size(MaxResults, MAX_RESULTS)
        segment, total = _segment(Segment)
        with self.reader.connect() as conn:
            # GetPartitions is the hot path: the table and its active indexes in one query.
            rows = conn.execute(_TABLE_WITH_INDEXES, {"database": DatabaseName.lower(),
                                                      "name": TableName.lower()}).all()
            if not rows:
                self._table_missing(conn, DatabaseName, TableName)
            t = rows[0]
            keys = _key_types(json.loads(t.body))
            expr = parse(Expression, list(keys.items())) if Expression and Expression.strip() else None
            indexes = [r for r in rows if r.index_id is not None]
            chosen = _choose_index(indexes, keys, expr) if expr is not None else None
            after = _untoken(NextToken)
            out_rows: list[Any] = []
            scanned = 0
            if chosen is not None and expr is not None:
                expr = residual(expr, chosen[1].covered)
            test = matcher(expr) if expr is not None else None
            for cursor, row in self._candidates(conn, t, chosen, after):
                scanned += 1
                if total > 1 and row.id % total != segment:
                    continue
                if test is not None and not test(dict(zip(keys, orjson.loads(row.values_key)))):
                    continue
                out_rows.append((cursor, row))
                if len(out_rows) > limit:
                    break
            self.last_plan = {"index": chosen[0] if chosen else None,
                              "keys_used": list(chosen[1].keys_used) if chosen else [],
                              "rows_scanned": scanned}
            result: dict[str, Any] = {"Partitions": [self._partition_out(t, r, bool(ExcludeColumnSchema))
                                                     for _, r in out_rows[:limit]]}
            if len(out_rows) > limit:
                result["NextToken"] = _token(out_rows[limit - 1][0])
            return result

    def _candidates(self, conn: Connection, table_row: Any, chosen: tuple[str, KeyRange, int] | None,
                    after: Any) -> Iterable[tuple[Any, Any]]:
        """(cursor, partition row) in a stable order: by id for a full scan, by index key with an index."""
        p = store.partitions
        batch = 2000
        if chosen is None:
            last_id = after if isinstance(after, int) else 0
            while True:
                rows = conn.execute(select(p).where(and_(p.c.table_id == table_row.id, p.c.id > last_id))
                                    .order_by(p.c.id).limit(batch)).all()
                for r in rows:
                    yield r.id, r
                if len(rows) < batch:
                    return
                last_id = rows[-1].id
        _, rng, index_id = chosen
        cur_key, cur_pid = (after if isinstance(after, list) else (None, None))
        while True:
            params = {"index_id": index_id, "low": rng.low, "high": rng.high, "after_key": cur_key,
                      "after_pid": cur_pid, "batch": batch}
            shape = (rng.low is not None, rng.high is not None, cur_key is not None)
            rows = conn.execute(_index_scan(*shape), params).all()
            for r in rows:
                yield [r.key, r.partition_id], r
            if len(rows) < batch:
                return
            cur_key, cur_pid = rows[-1].key, rows[-1].partition_id

    # ------------------------------------------------------------------ partition indexes

    def _add_index(self, conn: Connection, table_id: int, keys: dict[str, str], index: dict, status: str) -> int:
        _require(index, "IndexName", "Keys")
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
        return conn.execute(insert(store.partition_indexes).values(
            table_id=table_id, name=index["IndexName"], key_names=json.dumps(resolved), status=status,
            errors="[]", create_time=_now())).inserted_primary_key[0]

    def create_partition_index(self, DatabaseName: str, TableName: str, PartitionIndex: dict,
                               CatalogId: str | None = None) -> dict:
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            index_id = self._add_index(conn, t.id, _key_types(json.loads(t.body)), PartitionIndex, status="CREATING")
        # The table keeps serving requests while the index fills (it is not used until ACTIVE).
        thread = threading.Thread(target=self._backfill, args=(t.id, index_id), daemon=True,
                                  name=f"backfill-{PartitionIndex['IndexName']}")
        self._backfills.append(thread)
        thread.start()
        return {}

    def _backfill(self, table_id: int, index_id: int) -> None:
        try:
            with self.engine.begin() as conn:
                t = conn.execute(select(store.tables).where(store.tables.c.id == table_id)).first()
                idx = conn.execute(select(store.partition_indexes).where(
                    store.partition_indexes.c.id == index_id)).first()
                if t is None or idx is None:
                    return
                keys = _key_types(json.loads(t.body))
                names = json.loads(idx.key_names)
                kinds = [type_kind(keys[n]) for n in names]
                positions = [list(keys).index(n) for n in names]
                failures: dict[str, list[dict]] = {}
                entries = []
                for row in conn.execute(select(store.partitions.c.id, store.partitions.c.values_key).where(
                        store.partitions.c.table_id == table_id)):
                    values = json.loads(row.values_key)
                    raw = [values[p] if p < len(values) else None for p in positions]
                    problems = [index_problem(v, k) for v, k in zip(raw, kinds)]
                    problem = next((x for x in problems if x), None)
                    if problem:
                        failures.setdefault(problem, []).append({"Values": values})
                        continue
                    entries.append({"index_id": index_id, "partition_id": row.id,
                                    "key": encode([typed_value(v, k) for v, k in zip(raw, kinds)], kinds)})
                if failures:
                    errors = [{"Code": code, "Partitions": parts[:100]} for code, parts in failures.items()]
                    conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == index_id)
                                 .values(status="FAILED", errors=json.dumps(errors)))
                    self._keep_last_failures(conn, table_id)
                    return
                for i in range(0, len(entries), 5000):
                    conn.execute(insert(store.index_entries), entries[i:i + 5000])
                conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == index_id)
                             .values(status="ACTIVE"))
        except Exception as e:  # the index must not stay CREATING forever
            with self.engine.begin() as conn:
                conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == index_id).values(
                    status="FAILED", errors=json.dumps([{"Code": "INTERNAL_ERROR", "Partitions": [],
                                                         "Message": str(e)[:500]}])))
                self._keep_last_failures(conn, table_id)

    @staticmethod
    def _keep_last_failures(conn: Connection, table_id: int) -> None:
        failed = conn.execute(select(store.partition_indexes.c.id).where(and_(
            store.partition_indexes.c.table_id == table_id, store.partition_indexes.c.status == "FAILED"))
            .order_by(store.partition_indexes.c.id.desc())).all()
        old = [r.id for r in failed[MAX_FAILED_INDEXES:]]
        if old:
            conn.execute(delete(store.partition_indexes).where(store.partition_indexes.c.id.in_(old)))

    def get_partition_indexes(self, DatabaseName: str, TableName: str, NextToken: str | None = None,
                              CatalogId: str | None = None) -> dict:
        with self.reader.connect() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            keys = _key_types(json.loads(t.body))
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


# ------------------------------------------------------------------ helpers


def _choose_index(indexes: Sequence[Any], keys: dict[str, str], expr: Expr) -> tuple[str, KeyRange, int] | None:
    """Of a table's ACTIVE indexes, the one whose range fixes the most keys (an equality prefix
    beats a range)."""
    best: tuple[int, tuple[str, KeyRange, int]] | None = None
    for idx in indexes:
        names = json.loads(idx.key_names)
        rng = plan_range(expr, [Key(n, type_kind(keys[n]), keys[n]) for n in names])
        if rng is None:
            continue
        score = len(rng.keys_used)
        if best is None or score > best[0]:
            best = (score, (idx.index_name, rng, idx.index_id))
    return best[1] if best else None


def _page_size(max_results: int | None, ceiling: int) -> int:
    if max_results is None:
        return ceiling
    if not 1 <= int(max_results) <= ceiling:
        raise InvalidInputError(f"MaxResults must be between 1 and {ceiling}, not {max_results}")
    return int(max_results)


def _segment(segment: dict | None) -> tuple[int, int]:
    if not segment:
        return 0, 1
    number, total = int(segment.get("SegmentNumber", 0)), int(segment.get("TotalSegments", 1))
    if not 1 <= total <= MAX_SEGMENTS or not 0 <= number < total:
        raise InvalidInputError(f"Segment must have 1 <= TotalSegments <= {MAX_SEGMENTS} and "
                                f"0 <= SegmentNumber < TotalSegments, not {segment}")
    return number, total


def _index_entries(indexes: list[Any], keys: dict[str, str], pid: int, values: Sequence[str]) -> list[dict]:
    """The rows of index_entries for one partition (values in the table's key order)."""
    by_name = dict(zip(keys, values))
    out = []
    for idx in indexes:
        names = json.loads(idx.key_names)
        kinds = [type_kind(keys[n]) for n in names]
        out.append({"index_id": idx.id, "partition_id": pid,
                    "key": encode([typed_value(by_name[n], k) for n, k in zip(names, kinds)], kinds)})
    return out


def _item_error(partition: dict, error: CatalogError) -> dict:
    """One entry of a batch operation's Errors list, as Glue shapes it."""
    return {"PartitionValues": partition.get("Values") or [],
            "ErrorDetail": {"ErrorCode": error.code, "ErrorMessage": error.message}}


def _key_types(body: dict) -> dict[str, str]:
    """Partition key name -> declared type, in the table's order."""
    return {k["Name"]: k.get("Type", "string") for k in body.get("PartitionKeys") or []}


def _check_partition_keys(keys: list) -> None:
    names = [k.get("Name") for k in keys]
    if any(not n for n in names):
        raise InvalidInputError("every partition key needs a Name")
    if len({n.lower() for n in names}) != len(names):
        raise InvalidInputError(f"partition keys must be unique: {names}")


__all__ = ["GlueCatalog", "OPERATIONS"]
