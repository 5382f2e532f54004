"""Glue's partition operations: Create/BatchCreate/Get/BatchGet/Update/Delete/BatchDelete
Partition, and GetPartitions, which answers an expression through the best partition index
(a range scan of its keys) or a scan of the table's partitions, page by page."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

import orjson
from sqlalchemy import Select, and_, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from skiplake.catalog import store
from skiplake.catalog.catalog_core import CatalogCore
from skiplake.catalog.expression import Expr, Key, matcher, parse, residual, type_kind, typed_value
from skiplake.catalog.index_keys import KeyRange, encode, index_problem, plan_range
from skiplake.catalog.request_rules import (
    MAX_BATCH_CREATE,
    MAX_BATCH_DELETE,
    MAX_BATCH_GET,
    MAX_RESULTS,
    item_error,
    key_types,
    next_token,
    now_seconds,
    page_size,
    read_token,
    segment_of,
    utc_time,
)
from skiplake.errors import AlreadyExistsError, CatalogError, EntityNotFoundError, InvalidInputError

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


class PartitionOperations(CatalogCore):
    """Glue's partition operations, a part of GlueCatalog."""

    def _partition_values_ok(self, table_row: Any, values: Sequence[str], indexes: Sequence[Any]) -> None:
        """New partitions: arity, and (once an index exists) the indexed values' types and characters."""
        keys = key_types(json.loads(table_row.body))
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
                          indexes: Sequence[Any] | None = None) -> int:
        values = [str(v) for v in partition_input.get("Values") or []]
        indexes = self._live_indexes(conn, table_row.id) if indexes is None else indexes
        self._partition_values_ok(table_row, values, indexes)
        key = json.dumps(values)
        if conn.execute(select(store.partitions.c.id).where(and_(store.partitions.c.table_id == table_row.id,
                                                                 store.partitions.c.values_key == key))).first():
            raise AlreadyExistsError(f"Partition {values} already exists.")
        body = {k: v for k, v in partition_input.items() if k != "Values"}
        pid = store.inserted_id(conn.execute(insert(store.partitions).values(
            table_id=table_row.id, values_key=key, body=json.dumps(body, default=str),
            create_time=now_seconds())))
        self._index_partition(conn, table_row, pid, values, indexes)
        return pid

    def _index_partition(self, conn: Connection, table_row: Any, pid: int, values: Sequence[str],
                         indexes: Sequence[Any]) -> None:
        entries = index_entries(indexes, key_types(json.loads(table_row.body)), pid, values)
        if entries:
            conn.execute(insert(store.index_entries), entries)

    def create_partition(self, DatabaseName: str, TableName: str, PartitionInput: dict,
                         CatalogId: str | None = None) -> dict:
        """CreatePartition; a value of a key in a live index must be of the key's type (InvalidInputError)."""
        with self.engine.begin() as conn:
            self._insert_partition(conn, self._table_row(conn, DatabaseName, TableName), PartitionInput)
        return {}

    def batch_create_partition(self, DatabaseName: str, TableName: str, PartitionInputList: list,
                               CatalogId: str | None = None) -> dict:
        """BatchCreatePartition of up to 100: the items refused (bad values, in the request twice,
        already there) are its Errors, in request order; the others are created together."""
        if len(PartitionInputList) > MAX_BATCH_CREATE:
            raise InvalidInputError(f"BatchCreatePartition takes at most {MAX_BATCH_CREATE} partitions, "
                                    f"not {len(PartitionInputList)}")
        errors: list[tuple[int, dict]] = []
        position = {id(p): i for i, p in enumerate(PartitionInputList)}

        def refuse(p: dict, e: CatalogError) -> None:
            errors.append((position[id(p)], item_error(p, e)))

        with self.engine.begin() as conn:
            table_row = self._table_row(conn, DatabaseName, TableName)
            indexes = self._live_indexes(conn, table_row.id)
            # Check every item first (per-item errors), then write the good ones in bulk.
            good = self._new_partitions(conn, table_row, indexes, PartitionInputList, refuse)
            if good:
                self._insert_partitions(conn, table_row, indexes, good)
        return {"Errors": [e for _, e in sorted(errors, key=lambda x: x[0])]} if errors else {}

    def _new_partitions(self, conn: Connection, table_row: Any, indexes: Sequence[Any], items: list,
                        refuse: Callable[[dict, CatalogError], None]) -> dict[str, tuple[list[str], dict]]:
        """The items to create, by their values' key: each checked, neither twice in the request
        nor already in the table (those are refused)."""
        good: dict[str, tuple[list[str], dict]] = {}
        for p in items:
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
        return good

    def _insert_partitions(self, conn: Connection, table_row: Any, indexes: Sequence[Any],
                           good: dict[str, tuple[list[str], dict]]) -> None:
        """Insert the partitions and their entries in the table's live indexes."""
        now = now_seconds()
        rows = [{"table_id": table_row.id, "values_key": key, "create_time": now,
                 "body": json.dumps({k: v for k, v in p.items() if k != "Values"}, default=str)}
                for key, (_, p) in good.items()]
        ids = conn.execute(insert(store.partitions).returning(store.partitions.c.id,
                                                             store.partitions.c.values_key), rows).all()
        keys = key_types(json.loads(table_row.body))
        entries = [e for pid, key in ids for e in index_entries(indexes, keys, pid, json.loads(key))]
        if entries:
            conn.execute(insert(store.index_entries), entries)

    def _partition_out(self, table_row: Any, row: Any, exclude_columns: bool = False) -> dict:
        body = orjson.loads(row.body)   # GetPartitions' hot path: orjson parses these several times faster
        if exclude_columns and isinstance(body.get("StorageDescriptor"), dict):
            body["StorageDescriptor"] = {k: v for k, v in body["StorageDescriptor"].items() if k != "Columns"}
        return {"Values": orjson.loads(row.values_key), "DatabaseName": table_row.database,
                "TableName": table_row.name, **body, "CreationTime": utc_time(row.create_time)}

    def _partition_row(self, conn: Connection, table_row: Any, values: Sequence[str]) -> Any:
        row = conn.execute(select(store.partitions).where(and_(
            store.partitions.c.table_id == table_row.id,
            store.partitions.c.values_key == json.dumps([str(v) for v in values])))).first()
        if row is None:
            raise EntityNotFoundError(f"Partition {list(values)} not found in table {table_row.name}.")
        return row

    def get_partition(self, DatabaseName: str, TableName: str, PartitionValues: list,
                      CatalogId: str | None = None) -> dict:
        """GetPartition (EntityNotFoundError when the table has no partition of those values)."""
        with self.reader.connect() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            return {"Partition": self._partition_out(t, self._partition_row(conn, t, PartitionValues))}

    def batch_get_partition(self, DatabaseName: str, TableName: str, PartitionsToGet: list,
                            CatalogId: str | None = None) -> dict:
        """BatchGetPartition of up to 1000; the values with no partition are its UnprocessedKeys."""
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
        """UpdatePartition: the partition's input replaced; new Values re-create it under them, checked
        as CreatePartition checks them."""
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
        """DeletePartition, with its index entries."""
        with self.engine.begin() as conn:
            t = self._table_row(conn, DatabaseName, TableName)
            row = self._partition_row(conn, t, PartitionValues)
            conn.execute(delete(store.partitions).where(store.partitions.c.id == row.id))
        return {}

    def batch_delete_partition(self, DatabaseName: str, TableName: str, PartitionsToDelete: list,
                               CatalogId: str | None = None) -> dict:
        """BatchDeletePartition of up to 25; the values with no partition are its Errors."""
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
                    errors.append(item_error(p, e))
        return {"Errors": errors} if errors else {}

    def get_partitions(self, DatabaseName: str, TableName: str, Expression: str | None = None,
                       NextToken: str | None = None, Segment: dict | None = None, MaxResults: int | None = None,
                       ExcludeColumnSchema: bool | None = None, CatalogId: str | None = None,
                       **_: Any) -> dict:
        """GetPartitions: the partitions `Expression` matches, read through the ACTIVE index that
        constrains the most keys (else by a scan in id order), up to 1000 a page, split by Segment.
        `last_plan` then says which index was used and how many rows were read."""
        limit = page_size(MaxResults, MAX_RESULTS)
        segment, total = segment_of(Segment)
        with self.reader.connect() as conn:
            # GetPartitions is the hot path: the table and its active indexes in one query.
            rows = conn.execute(_TABLE_WITH_INDEXES, {"database": DatabaseName.lower(),
                                                      "name": TableName.lower()}).all()
            if not rows:
                self._table_missing(conn, DatabaseName, TableName)
            t = rows[0]
            keys = key_types(json.loads(t.body))
            expr = parse(Expression, list(keys.items())) if Expression and Expression.strip() else None
            chosen = choose_index([r for r in rows if r.index_id is not None], keys, expr) if expr is not None else None
            if chosen is not None and expr is not None:
                expr = residual(expr, chosen[1].covered)
            test = matcher(expr) if expr is not None else None
            out_rows, scanned = _page(self._candidates(conn, t, chosen, read_token(NextToken)), list(keys), test,
                                      (segment, total), limit)
            self.last_plan = {"index": chosen[0] if chosen else None,
                              "keys_used": list(chosen[1].keys_used) if chosen else [],
                              "rows_scanned": scanned}
            result: dict[str, Any] = {"Partitions": [self._partition_out(t, r, bool(ExcludeColumnSchema))
                                                     for _, r in out_rows[:limit]]}
            if len(out_rows) > limit:
                result["NextToken"] = next_token(out_rows[limit - 1][0])
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


def choose_index(indexes: Sequence[Any], keys: dict[str, str], expr: Expr) -> tuple[str, KeyRange, int] | None:
    """Of a table's ACTIVE indexes, the one whose range constrains the most keys (its equality prefix
    and a range on the next key each count one); the oldest wins a tie."""
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


def index_entries(indexes: Sequence[Any], keys: dict[str, str], pid: int, values: Sequence[str]) -> list[dict]:
    """The rows of index_entries for one partition (values in the table's key order)."""
    by_name = dict(zip(keys, values))
    out = []
    for idx in indexes:
        names = json.loads(idx.key_names)
        kinds = [type_kind(keys[n]) for n in names]
        out.append({"index_id": idx.id, "partition_id": pid,
                    "key": encode([typed_value(by_name[n], k) for n, k in zip(names, kinds)], kinds)})
    return out


def _page(candidates: Iterable[tuple[Any, Any]], keys: list[str], test: Callable[[dict], bool] | None,
          segment: tuple[int, int], limit: int) -> tuple[list[tuple[Any, Any]], int]:
    """(the first `limit` + 1 (cursor, row) of the segment that pass `test`, rows scanned)."""
    part, total = segment
    out: list[tuple[Any, Any]] = []
    scanned = 0
    for cursor, row in candidates:
        scanned += 1
        if total > 1 and row.id % total != part:
            continue
        if test is not None and not test(dict(zip(keys, orjson.loads(row.values_key)))):
            continue
        out.append((cursor, row))
        if len(out) > limit:
            break
    return out, scanned
