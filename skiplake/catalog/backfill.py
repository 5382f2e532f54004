"""The backfill worker: fills a new partition index from the table's partitions, in a thread of
its own, and leaves the index ACTIVE, or FAILED with the partitions whose values it cannot hold
(Glue's BackfillErrors); only the last few failed indexes of a table are kept."""
from __future__ import annotations

import json

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from skiplake.catalog import store
from skiplake.catalog.expression import type_kind, typed_value
from skiplake.catalog.index_keys import encode, index_problem
from skiplake.catalog.request_rules import MAX_FAILED_INDEXES, key_types


def backfill_index(engine: Engine, table_id: int, index_id: int) -> None:
    """Fill index `index_id` of table `table_id` from its partitions (run in a thread: the index
    is not used until it is ACTIVE)."""
    try:
        with engine.begin() as conn:
            t = conn.execute(select(store.tables).where(store.tables.c.id == table_id)).first()
            idx = conn.execute(select(store.partition_indexes).where(
                store.partition_indexes.c.id == index_id)).first()
            if t is None or idx is None:
                return
            entries, failures = _entries(conn, table_id, index_id, key_types(json.loads(t.body)),
                                         json.loads(idx.key_names))
            if failures:
                errors = [{"Code": code, "Partitions": parts[:100]} for code, parts in failures.items()]
                conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == index_id)
                             .values(status="FAILED", errors=json.dumps(errors)))
                keep_last_failures(conn, table_id)
                return
            for i in range(0, len(entries), 5000):
                conn.execute(insert(store.index_entries), entries[i:i + 5000])
            conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == index_id)
                         .values(status="ACTIVE"))
    except Exception as e:  # the index must not stay CREATING forever
        with engine.begin() as conn:
            conn.execute(update(store.partition_indexes).where(store.partition_indexes.c.id == index_id).values(
                status="FAILED", errors=json.dumps([{"Code": "INTERNAL_ERROR", "Partitions": [],
                                                     "Message": str(e)[:500]}])))
            keep_last_failures(conn, table_id)


def _entries(conn: Connection, table_id: int, index_id: int, keys: dict[str, str],
             names: list[str]) -> tuple[list[dict], dict[str, list[dict]]]:
    """The index entries of the table's partitions, and the partitions whose values cannot be
    keys of the index, by the problem."""
    kinds = [type_kind(keys[n]) for n in names]
    positions = [list(keys).index(n) for n in names]
    failures: dict[str, list[dict]] = {}
    entries = []
    for row in conn.execute(select(store.partitions.c.id, store.partitions.c.values_key).where(
            store.partitions.c.table_id == table_id)):
        values = json.loads(row.values_key)
        raw = [values[p] if p < len(values) else None for p in positions]
        problem = next((x for x in (index_problem(v, k) for v, k in zip(raw, kinds)) if x), None)
        if problem:
            failures.setdefault(problem, []).append({"Values": values})
            continue
        typed = []
        for v, k in zip(raw, kinds):
            assert v is not None   # index_problem reports a missing value: it was skipped above
            typed.append(typed_value(v, k))
        entries.append({"index_id": index_id, "partition_id": row.id, "key": encode(typed, kinds)})
    return entries, failures


def keep_last_failures(conn: Connection, table_id: int) -> None:
    """Delete all but the newest MAX_FAILED_INDEXES FAILED indexes of the table."""
    failed = conn.execute(select(store.partition_indexes.c.id).where(and_(
        store.partition_indexes.c.table_id == table_id, store.partition_indexes.c.status == "FAILED"))
        .order_by(store.partition_indexes.c.id.desc())).all()
    old = [r.id for r in failed[MAX_FAILED_INDEXES:]]
    if old:
        conn.execute(delete(store.partition_indexes).where(store.partition_indexes.c.id.in_(old)))
