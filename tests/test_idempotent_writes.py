"""Idempotent writes (Delta's txnAppId/txnVersion) for every write: append, overwrite, delete,
update and MERGE record the application's version; a version at or below the recorded one writes
nothing and says so; the txn actions a checkpoint keeps follow delta.setTransactionRetentionDuration."""
from __future__ import annotations

import os

import pytest

from skiplake.errors import InvalidArgumentError
from skiplake.log.actions import Txn
from skiplake.log.checkpoint import live_txns
from skiplake.log.snapshot import Snapshot

pytestmark = [pytest.mark.spark]


def test_every_write_is_idempotent(lake, spark):
    t = lake.create_table("idem_all", "id long, v string")
    first = t.append(spark.range(10).selectExpr("id", "'a' as v"), app_id="etl", app_version=1)
    assert not first.skipped
    again = t.append(spark.range(10).selectExpr("id", "'a' as v"), app_id="etl", app_version=1)
    assert again.skipped and again == first and t.read().count() == 10
    assert t.transaction_version("etl") == 1 and t.transaction_version("other") is None

    v = t.update("id < 3", {"v": "'u'"}, app_id="etl", app_version=2)
    assert not v.skipped
    assert t.update("id < 5", {"v": "'x'"}, app_id="etl", app_version=2).skipped
    assert sorted(r.v for r in t.read().collect()).count("u") == 3

    assert t.delete("id = 9", app_id="etl", app_version=1).skipped   # below the recorded version
    assert not t.delete("id = 9", app_id="etl", app_version=3).skipped
    assert t.read().count() == 9

    src = spark.createDataFrame([(1, "m"), (20, "n")], "id long, v string")
    res = t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(app_id="etl", app_version=4)
    assert not res.skipped and res.num_target_rows_inserted == 1
    replay = t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(app_id="etl", app_version=4)
    assert replay.skipped and replay.version == res.version and t.read().count() == 10

    assert t.merge(src, "target.id = source.id", when_matched_update="*", app_id="etl", app_version=4).skipped
    assert t.overwrite(spark.range(2).selectExpr("id", "'o' as v"), app_id="etl", app_version=4).skipped
    assert not t.overwrite(spark.range(2).selectExpr("id", "'o' as v"), app_id="etl", app_version=5).skipped
    assert t.read().count() == 2 and t.transaction_version("etl") == 5


def test_app_id_and_version_come_together(lake, spark):
    t = lake.create_table("idem_pair", "id long")
    version = t.version
    for kwargs in ({"app_id": "a"}, {"app_version": 3}):
        with pytest.raises(InvalidArgumentError, match="together"):
            t.delete("id = 1", **kwargs)
        with pytest.raises(InvalidArgumentError, match="together"):
            t.append(spark.range(1), **kwargs)
    assert t.version == version


def test_checkpoint_drops_expired_transactions(lake, spark):
    t = lake.create_table("idem_retention", "id long",
                          properties={"delta.setTransactionRetentionDuration": "interval 1 hours",
                                      "delta.checkpointInterval": "2"})
    t.append(spark.range(1), app_id="fresh", app_version=1)
    snapshot = Snapshot.load(t.path)
    old = Txn("stale", 3, 0)   # last updated in 1970
    kept = live_txns(type("S", (), {"configuration": snapshot.configuration,
                                     "txns": {**snapshot.txns, "stale": old}})())
    assert {x.appId for x in kept} == {"fresh"}
    t.append(spark.range(1), app_id="fresh", app_version=2)
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(os.path.join(t.path, "_delta_log")))
    assert Snapshot.load(t.path).txn_version("fresh") == 2
