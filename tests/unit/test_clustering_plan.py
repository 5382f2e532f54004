"""Liquid clustering without Spark: which files an incremental OPTIMIZE rewrites, the
`delta.clustering` domain through replay, checkpoints and conflicts."""
from __future__ import annotations

import json

import pytest

from skiplake.errors import ConcurrentTransactionException, InvalidArgumentError, MetadataChangedException
from skiplake.layout.curves import ZCUBE_ID, ZCUBE_ZORDER_BY
from skiplake.log.actions import AddFile, DomainMetadata, Metadata, Protocol
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot, log_storage
from skiplake.txn import ReadSet, commit, create
from skiplake.txn.clustering import (
    CLUSTERING_DOMAIN,
    PROVIDER,
    check_cluster_by,
    clustering_columns,
    clustering_domain,
    files_to_cluster,
)

SCHEMA = Schema((Field("id", "long"), Field("k", "integer"), Field("flag", "boolean")))


def _file(name: str, size: int, cube: str | None = None, columns: str = '["k"]', provider: str | None = PROVIDER) -> AddFile:
    tags = {ZCUBE_ID: cube, ZCUBE_ZORDER_BY: columns} if cube else None
    return AddFile(name, {}, size, 1, True, None, tags, None, provider if cube else None)


def test_new_files_and_small_cubes_are_rewritten_big_cubes_and_others_kept():
    files = [_file("new1", 10), _file("new2", 10), _file("big1", 600, "A"), _file("big2", 600, "A"),
             _file("small", 100, "B"), _file("tiny", 50, "C"), _file("byother", 10, "D", '["id"]'),
             _file("theirs", 10, "E", '["k"]', "another"), _file("zordered", 10, "F", '["k"]', None)]
    plan = files_to_cluster(files, ["K"], min_cube_size=1000)
    assert sorted(f.path for f in plan.files) == ["new1", "new2", "small", "tiny", "zordered"]
    assert (plan.unclustered, plan.cubes_merged, plan.cubes_kept, plan.other_files) == (3, 2, 1, 2)
    assert len(files_to_cluster(files, ["k"], 1000, full=True).files) == len(files)


def test_one_cube_alone_is_left_as_it_is():
    one = [_file("a", 10, "A"), _file("b", 10, "A"), _file("big", 5000, "B")]
    assert files_to_cluster(one, ["k"], 1000).files == []
    two = one + [_file("c", 10, "C")]
    assert sorted(f.path for f in files_to_cluster(two, ["k"], 1000).files) == ["a", "b", "c"]


def test_check_cluster_by_refusals():
    config: dict[str, str] = {}
    assert check_cluster_by("t", SCHEMA, config, [], ["K", "id"]) == ["k", "id"]
    with pytest.raises(InvalidArgumentError, match="either partitioned or clustered"):
        check_cluster_by("t", SCHEMA, config, ["id"], ["k"])
    with pytest.raises(InvalidArgumentError, match="boolean has no min/max"):
        check_cluster_by("t", SCHEMA, config, [], ["flag"])
    with pytest.raises(InvalidArgumentError, match="gets no stats"):
        check_cluster_by("t", SCHEMA, {"delta.dataSkippingNumIndexedCols": "1"}, [], ["k"])
    wide = Schema(tuple(Field(f"c{i}", "long") for i in range(6)))
    with pytest.raises(InvalidArgumentError, match="at most 4"):
        check_cluster_by("t", wide, config, [], [f"c{i}" for i in range(5)])


def _clustered(tmp_path, checkpoint_interval: int = 10) -> Snapshot:
    path = str(tmp_path / "t")
    config = {"delta.checkpointInterval": str(checkpoint_interval)}
    return create(path, Metadata.new(SCHEMA, [], config), Protocol(1, 7, None, ("clustering", "domainMetadata")),
                  actions=[clustering_domain(SCHEMA, ["k"], "none")])


def test_domains_replay_latest_wins_tombstones_and_checkpoints(tmp_path):
    snap = _clustered(tmp_path, checkpoint_interval=3)
    assert clustering_columns(snap) == ["k"]
    commit(snap, [DomainMetadata("com.example.app", '{"owner":"etl"}')], "SET DOMAIN")
    commit(Snapshot.load(snap.table_path), [clustering_domain(SCHEMA, ["k", "id"], "none")], "CLUSTER BY")
    # Version 3: a checkpoint with both domains and the tombstone of neither.
    commit(Snapshot.load(snap.table_path), [DomainMetadata("com.example.app", '{"owner":"etl"}', removed=True)],
           "UNSET DOMAIN")
    assert log_storage(snap.table_path).exists("00000000000000000003.checkpoint.parquet")
    loaded = Snapshot.load(snap.table_path)
    assert set(loaded.domains) == {CLUSTERING_DOMAIN} and clustering_columns(loaded) == ["k", "id"]
    write_checkpoint(log_storage(snap.table_path), loaded)
    assert Snapshot.load(snap.table_path).domains == loaded.domains
    # Delta's own spelling of the columns, a plain list of names, reads too.
    plain = DomainMetadata(CLUSTERING_DOMAIN, json.dumps({"clusteringColumns": ["id"]}))
    commit(loaded, [plain], "CLUSTER BY")
    assert clustering_columns(Snapshot.load(snap.table_path)) == ["id"]


def test_two_writers_of_one_domain_conflict_and_optimize_loses_to_a_key_change(tmp_path):
    base = _clustered(tmp_path)
    commit(base, [clustering_domain(SCHEMA, ["id"], "none")], "CLUSTER BY")
    with pytest.raises(ConcurrentTransactionException, match="delta.clustering"):
        commit(base, [clustering_domain(SCHEMA, ["k", "id"], "none")], "CLUSTER BY")
    with pytest.raises(MetadataChangedException, match="the clustering columns"):
        commit(base, [], "OPTIMIZE", read_set=ReadSet(domains={CLUSTERING_DOMAIN}))
    # Other domains, and transactions that did not act on the clustering, are not concerned.
    assert commit(base, [DomainMetadata("com.example.app", "{}")], "SET DOMAIN").attempts == 2


def test_restore_brings_back_the_clustering_columns_of_its_version(tmp_path):
    from skiplake.txn.restore import restore
    base = _clustered(tmp_path)
    commit(base, [clustering_domain(SCHEMA, ["id"], "none")], "CLUSTER BY")
    commit(Snapshot.load(base.table_path), [DomainMetadata("com.example.app", "{}")], "SET DOMAIN")
    restore(base.table_path, version=0)
    now = Snapshot.load(base.table_path)
    assert clustering_columns(now) == ["k"] and set(now.domains) == {CLUSTERING_DOMAIN}


def test_row_tracking_fields_of_files_survive_replay_checkpoints_and_removes(tmp_path):
    """baseRowId and defaultRowCommitVersion (other writers' row tracking) are kept as logged:
    in the snapshot's files, in a checkpoint, and in the remove of such a file."""
    snap = _clustered(tmp_path)
    added = AddFile("f.parquet", {}, 10, 1, True, '{"numRecords":5}', None, None, None, 100, 1)
    commit(snap, [added], "WRITE")
    loaded = Snapshot.load(snap.table_path)
    write_checkpoint(log_storage(snap.table_path), loaded)
    [f] = Snapshot.load(snap.table_path).add_files
    assert (f.baseRowId, f.defaultRowCommitVersion) == (100, 1)
    gone = f.remove(5)
    assert (gone.baseRowId, gone.defaultRowCommitVersion) == (100, 1)
    assert '"baseRowId":100' in json.dumps(gone.to_json(), separators=(",", ":"))
