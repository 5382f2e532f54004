"""`skiplake catalog sync`: register the Hive-style partition folders found under a table's
location (what MSCK REPAIR TABLE does), without Spark."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from skiplake.catalog.client import CatalogClient, all_partitions
from skiplake.layout.partitioning import HIVE_DEFAULT_PARTITION, parse_partition_dir

BATCH = 100


@dataclass(frozen=True)
class SyncResult:
    """What a sync found and did, counted in partition folders, and the Errors BatchCreatePartition gave."""
    found: int        # partition folders under the location
    registered: int   # newly created in the catalog
    existing: int     # already there
    errors: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """The result as a dict (the JSON `skiplake catalog sync` prints)."""
        return self.__dict__.copy()


def _local(location: str) -> str:
    return location[len("file:"):] if location.startswith("file:") else location


def partition_folders(location: str, keys: list[str]) -> list[tuple[list[str], str]]:
    """(values, folder) for each folder `k1=v1/.../kn=vn` under location that holds files."""
    root = _local(location)
    out: list[tuple[list[str], str]] = []

    def walk(path: str, depth: int, values: list[str]) -> None:
        if depth == len(keys):
            if any(not n.startswith((".", "_")) for n in os.listdir(path) if os.path.isfile(os.path.join(path, n))):
                out.append((values, path))
            return
        prefix = keys[depth].lower() + "="
        for entry in sorted(os.listdir(path)):
            full = os.path.join(path, entry)
            if os.path.isdir(full) and entry.lower().startswith(prefix):
                # A NULL partition value as Spark's Hive and Glue catalogs hold it (Glue refuses "").
                value = next(iter(parse_partition_dir(entry).values()))
                walk(full, depth + 1, values + [HIVE_DEFAULT_PARTITION if value is None else value])

    if os.path.isdir(root):
        walk(root, 0, [])
    return out


def sync_partitions(client: CatalogClient, database: str, table: str) -> SyncResult:
    """Register the partition folders under the table's location that the catalog lacks
    (BatchCreatePartition, 100 at a time, each with the table's StorageDescriptor and its own Location);
    nothing when the table has no location or no partition keys."""
    spec = client.call("GetTable", {"DatabaseName": database, "Name": table})["Table"]
    keys = [k["Name"] for k in spec.get("PartitionKeys") or []]
    sd = spec.get("StorageDescriptor") or {}
    location = sd.get("Location")
    if not location or not keys:
        return SyncResult(0, 0, 0, [])
    have = {tuple(p["Values"]) for p in all_partitions(client, database, table)}
    found = partition_folders(location, keys)
    missing = [(v, f) for v, f in found if tuple(v) not in have]
    errors: list[dict[str, Any]] = []
    base_sd = {k: v for k, v in sd.items() if k != "Location"}
    for i in range(0, len(missing), BATCH):
        chunk = missing[i:i + BATCH]
        out = client.call("BatchCreatePartition", {"DatabaseName": database, "TableName": table, "PartitionInputList": [
            {"Values": v, "StorageDescriptor": {**base_sd, "Location": os.path.abspath(f)}} for v, f in chunk]})
        errors += out.get("Errors") or []
    return SyncResult(len(found), len(missing) - len(errors), len(found) - len(missing), errors)
