"""Synthetic Delta logs written through skiplake's own log API, without Spark and without data files.

A snapshot load and a commit only read and write `_delta_log/`, so the data files an AddFile names
need not exist. Each add carries what Spark + skiplake would write for a file of a
`store_sales`-like table partitioned by date: a Hive-style path, `partitionValues`, a size, a
modification time and the stats JSON (numRecords, minValues, maxValues, nullCount) of its four
non-partition columns.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import time
import uuid
from typing import Callable

from skiplake.log.actions import AddFile, Metadata
from skiplake.log.commit_files import CommitResult
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot
from skiplake.txn import commit, create

SCHEMA = Schema((
    Field("ss_ticket_number", "long"),
    Field("ss_item_sk", "integer"),
    Field("ss_sales_price", "double"),
    Field("ss_promo_name", "string"),
    Field("ss_sold_date", "date"),
))
PARTITION_COLUMNS = ["ss_sold_date"]
FIRST_DATE = dt.date(1998, 1, 1)
NUM_DATES = 1826  # five years of daily partitions


class FileFactory:
    """Deterministic, realistic AddFile actions (the same seed gives the same files)."""

    def __init__(self, seed: int = 42) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    def add(self) -> AddFile:
        rng = self.rng
        n = self.n
        self.n += 1
        day = (FIRST_DATE + dt.timedelta(days=rng.randrange(NUM_DATES))).isoformat()
        rows = rng.randrange(50_000, 200_000)
        lo_item = rng.randrange(1, 200_000)
        lo_price = round(rng.uniform(0, 10), 2)
        stats = json.dumps({
            "numRecords": rows,
            "minValues": {"ss_ticket_number": n * 200_000, "ss_item_sk": lo_item,
                          "ss_sales_price": lo_price, "ss_promo_name": f"promo-{rng.randrange(100):03d}"},
            "maxValues": {"ss_ticket_number": n * 200_000 + rows - 1, "ss_item_sk": lo_item + rng.randrange(1, 50_000),
                          "ss_sales_price": round(lo_price + rng.uniform(10, 300), 2),
                          "ss_promo_name": f"promo-{rng.randrange(100, 1000):03d}"},
            "nullCount": {"ss_ticket_number": 0, "ss_item_sk": rng.randrange(0, 50),
                          "ss_sales_price": rng.randrange(0, 50), "ss_promo_name": rng.randrange(0, 500)},
        }, separators=(",", ":"))
        return AddFile(
            path=f"ss_sold_date={day}/part-{n % 100_000:05d}-{uuid.UUID(int=rng.getrandbits(128))}.c000.snappy.parquet",
            partitionValues={"ss_sold_date": day},
            size=rng.randrange(8 << 20, 128 << 20),
            modificationTime=1_700_000_000_000 + n * 1000,
            dataChange=True,
            stats=stats,
        )


@dataclasses.dataclass
class CommitTiming:
    version: int
    seconds: float
    checkpointed: bool
    num_actions: int


class LogWriter:
    """Commits through `skiplake.txn.commit` as the table's only writer.

    As the only writer, it keeps the latest snapshot by applying its own commits to the one it
    has (Snapshot.advanced) instead of reloading the table after each, so the builder stays
    linear in the number of commits; the checkpoints are written by skiplake exactly as usual.
    """

    def __init__(self, path: str, configuration: dict[str, str] | None = None) -> None:
        self.path = path
        self.base = create(path, Metadata.new(SCHEMA, PARTITION_COLUMNS, dict(configuration or {})),
                           operation_parameters={"partitionBy": PARTITION_COLUMNS})

    @property
    def version(self) -> int:
        return self.base.version

    @staticmethod
    def reopen(path: str) -> "LogWriter":
        w = LogWriter.__new__(LogWriter)
        w.path = path
        w.base = Snapshot.load(path)
        return w

    def commit(self, actions: list, operation: str = "WRITE") -> CommitTiming:
        t0 = time.perf_counter()
        result: CommitResult = commit(self.base, actions, operation, {"mode": "Append"})
        seconds = time.perf_counter() - t0
        if result.version != self.version + 1:
            raise RuntimeError(f"expected to commit version {self.version + 1}, committed {result.version}")
        self.base = self.base.advanced([(result.version, list(result.actions))])
        return CommitTiming(result.version, seconds, result.checkpointed, len(actions))


def build(path: str, commits: int, adds_per_commit: int, factory: FileFactory,
          configuration: dict[str, str] | None = None, writer: LogWriter | None = None,
          progress: Callable[[str], None] | None = None, every: int = 10) -> tuple[LogWriter, list[CommitTiming]]:
    """Create the table (unless `writer` is given) and commit `commits` commits of `adds_per_commit` adds."""
    writer = writer or LogWriter(path, configuration)
    timings = []
    for i in range(commits):
        adds = [factory.add() for _ in range(adds_per_commit)]
        timings.append(writer.commit(adds))
        if progress and (i + 1) % every == 0:
            t = timings[-1]
            progress(f"  committed version {t.version} ({factory.n:,} files so far)"
                     + (f", checkpoint written; that commit took {t.seconds * 1000:.0f} ms" if t.checkpointed else ""))
    return writer, timings
