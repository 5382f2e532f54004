"""V2 checkpoints: UUID-named JSON and Parquet checkpoints with sidecar files, read and written."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiplake.errors import CorruptLogError
from skiplake.log.actions import CommitInfo, Metadata, Protocol, RemoveFile, now_ms
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.cleanup import clean_expired_log
from skiplake.log.commit_files import put_commit, put_first_commit
from skiplake.log.features import required_protocol
from skiplake.log.snapshot import LAST_CHECKPOINT, LOG_DIR, LogListing, Snapshot, list_log, log_storage
from tests.unit.logutil import SCHEMA, add

V2 = {"delta.checkpointPolicy": "v2", "delta.enableExpiredLogCleanup": "false"}


def _table(root: str, commits: int, configuration: dict[str, str] | None = None) -> str:
    config = {**V2, **(configuration or {})}
    protocol = required_protocol(Protocol(1, 2), config)
    snapshot = put_first_commit(root, CommitInfo(1, "CREATE TABLE"), protocol, Metadata.new(SCHEMA, ["d"], config))
    for i in range(1, commits + 1):
        actions = [add(f"d=2001-01-0{1 + i % 3}/f{i}.parquet", d=f"2001-01-0{1 + i % 3}", lo=i, hi=i + 5)]
        if i % 4 == 0:  # a remove now and then, for tombstones in the checkpoint
            actions.append(RemoveFile(f"d=2001-01-0{1 + (i - 1) % 3}/f{i - 1}.parquet", now_ms(), True))
        put_commit(snapshot, CommitInfo(1, "WRITE"), actions)
        snapshot = Snapshot.load(root)
    return root


def _log(root: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, LOG_DIR)))


def _state(snapshot: Snapshot) -> tuple:
    return (sorted(f.path for f in snapshot.add_files), sorted(r.path for r in snapshot.tombstone_list),
            snapshot.protocol, snapshot.metadata.id)


def test_the_policy_turns_the_feature_on_and_checkpoints_are_v2_with_a_sidecar(tmp_path):
    root = _table(str(tmp_path / "t"), 12)
    snapshot = Snapshot.load(root)
    assert "v2Checkpoint" in snapshot.protocol.readerFeatures and "v2Checkpoint" in snapshot.protocol.writerFeatures
    names = [n for n in _log(root) if ".checkpoint." in n]
    assert len(names) == 1 and names[0].startswith("00000000000000000010.checkpoint.") and names[0].endswith(".parquet")
    assert not any(n == "00000000000000000010.checkpoint.parquet" for n in _log(root))
    top = pq.read_table(os.path.join(root, LOG_DIR, names[0]))
    assert top.column("add").null_count == top.num_rows  # file actions live in the sidecar
    assert [r for r in top.column("checkpointMetadata").to_pylist() if r][0]["version"] == 10
    sidecar = [r for r in top.column("sidecar").to_pylist() if r][0]
    side = pq.read_table(os.path.join(root, LOG_DIR, "_sidecars", sidecar["path"]))
    assert side.column_names == ["add", "remove"] and sidecar["sizeInBytes"] == os.path.getsize(
        os.path.join(root, LOG_DIR, "_sidecars", sidecar["path"]))
    assert json.loads(open(os.path.join(root, LOG_DIR, LAST_CHECKPOINT)).read())["version"] == 10
    # Loading from the checkpoint gives what replaying every commit gives.
    from_commits = Snapshot.load(root, listing=list_log(log_storage(root)).__class__(
        list_log(log_storage(root)).commits, {}))
    assert _state(snapshot) == _state(from_commits)
    assert len(snapshot.tombstone_list) == 3


def test_a_json_v2_checkpoint_with_sidecars_reads(tmp_path):
    root = _table(str(tmp_path / "t"), 9)
    expected = _state(Snapshot.load(root))
    # Rewrite version 9's state as a JSON V2 checkpoint whose file actions are split over two sidecars.
    snapshot = Snapshot.load(root)
    from skiplake.log.checkpoint import checkpoint_table
    table = checkpoint_table(snapshot)
    files = table.filter(pa.compute.or_(table.column("add").is_valid(), table.column("remove").is_valid()))
    sidecars = os.path.join(root, LOG_DIR, "_sidecars")
    os.makedirs(sidecars, exist_ok=True)
    lines = [{"checkpointMetadata": {"version": 9, "tags": {}}},
             {"protocol": snapshot.protocol.to_json()}, {"metaData": snapshot.metadata.to_json()}]
    half = files.num_rows // 2
    for i, part in enumerate((files.slice(0, half), files.slice(half))):
        name = f"0000{i}-side.parquet"
        pq.write_table(part.select(["add", "remove"]), os.path.join(sidecars, name))
        lines.append({"sidecar": {"path": name, "sizeInBytes": os.path.getsize(os.path.join(sidecars, name)),
                                  "modificationTime": 1, "tags": {}}})
    cp = os.path.join(root, LOG_DIR, "00000000000000000009.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json")
    with open(cp, "w") as f:
        f.write("\n".join(json.dumps(line) for line in lines) + "\n")
    for v in range(0, 9):  # only the checkpoint can rebuild version 9 now
        os.unlink(os.path.join(root, LOG_DIR, f"{v:020d}.json"))
    assert list_log(log_storage(root)).checkpoints == {9: [os.path.basename(cp)]}
    assert _state(Snapshot.load(root)) == expected


def test_a_missing_sidecar_is_a_corrupt_log_naming_it(tmp_path):
    root = _table(str(tmp_path / "t"), 10)
    sidecars = os.path.join(root, LOG_DIR, "_sidecars")
    for name in os.listdir(sidecars):
        os.unlink(os.path.join(sidecars, name))
    for v in range(0, 10):
        os.unlink(os.path.join(root, LOG_DIR, f"{v:020d}.json"))
    with pytest.raises(CorruptLogError, match="_sidecars/.*does not exist"):
        Snapshot.load(root)


def test_delta_rs_reads_skiplakes_v2_checkpoint(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    root = _table(str(tmp_path / "t"), 11)
    for v in range(0, 10):  # delta-rs must use the checkpoint
        os.unlink(os.path.join(root, LOG_DIR, f"{v:020d}.json"))
    table = deltalake.DeltaTable(root)
    assert table.version() == 11
    ours = sorted(f.path for f in Snapshot.load(root).add_files)
    theirs = sorted(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())
    assert theirs == ours and len(ours) == 9


def test_cleanup_deletes_the_sidecars_of_deleted_checkpoints_only(tmp_path):
    root = _table(str(tmp_path / "t"), 31)
    sidecars = os.path.join(root, LOG_DIR, "_sidecars")
    assert len(os.listdir(sidecars)) == 3
    at_30 = _state(Snapshot.load(root, 30))
    old = 40 * 86_400
    for folder in (os.path.join(root, LOG_DIR), sidecars):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                os.utime(path, (os.path.getmtime(path) - old,) * 2)
    result = clean_expired_log(root, {})
    assert result.cutoff_version == 30
    assert len(os.listdir(sidecars)) == 1 and sum(d.startswith("_sidecars/") for d in result.deleted) == 2
    assert _state(Snapshot.load(root, 30)) == at_30


def test_writing_a_v2_checkpoint_twice_keeps_both_readable(tmp_path):
    root = _table(str(tmp_path / "t"), 3)
    storage = log_storage(root)
    write_checkpoint(storage, Snapshot.load(root))
    write_checkpoint(storage, Snapshot.load(root))
    assert len(list_log(storage).checkpoints[3]) == 1  # one of the two is chosen
    assert len(Snapshot.load(root).add_files) == 3


def test_cleanup_keeps_the_sidecars_of_every_kept_checkpoint_of_a_version(tmp_path):
    """Two writers may each write a V2 checkpoint of one version; a reader may pick either, so
    the sidecars of both stay."""
    root = _table(str(tmp_path / "t"), 31)
    write_checkpoint(log_storage(root), Snapshot.load(root, 30))  # a second checkpoint of version 30
    at_30 = _state(Snapshot.load(root, 30))
    sidecars = os.path.join(root, LOG_DIR, "_sidecars")
    assert len(os.listdir(sidecars)) == 4
    for folder in (os.path.join(root, LOG_DIR), sidecars):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                os.utime(path, (os.path.getmtime(path) - 40 * 86_400,) * 2)
    assert clean_expired_log(root, {}).cutoff_version == 30
    assert len(os.listdir(sidecars)) == 2
    for name in [n for n in os.listdir(os.path.join(root, LOG_DIR)) if n.startswith(f"{30:020d}.checkpoint.")]:
        assert _state(Snapshot.load(root, 30, listing=LogListing({}, {30: [name]}))) == at_30


@pytest.mark.parametrize("configuration", [V2, {"delta.enableExpiredLogCleanup": "false"}])
def test_checkpoints_are_written_a_chunk_of_adds_at_a_time(tmp_path, monkeypatch, configuration):
    # V2: a sidecar per chunk of adds, the removes in the first; V1: a row group per chunk. Either
    # loads as replaying every commit does, typed stats included.
    import skiplake.log.checkpoint as checkpoint
    from skiplake.skipping.plan import plan_scan
    monkeypatch.setattr(checkpoint, "ADD_CHUNK", 3)
    root = str(tmp_path / "t")
    protocol = required_protocol(Protocol(1, 2), configuration)
    snapshot = put_first_commit(root, CommitInfo(1, "CREATE TABLE"), protocol, Metadata.new(SCHEMA, ["d"], configuration))
    for i in range(1, 9):
        actions = [add(f"d=2001-01-0{1 + i % 3}/f{i}.parquet", d=f"2001-01-0{1 + i % 3}", lo=i * 10, hi=i * 10 + 5)]
        if i == 8:
            actions.append(RemoveFile("d=2001-01-02/f1.parquet", now_ms(), True))
        put_commit(snapshot, CommitInfo(1, "WRITE"), actions)
        snapshot = Snapshot.load(root)
    write_checkpoint(log_storage(root), snapshot)
    if configuration is V2:
        sidecars = sorted(os.listdir(os.path.join(root, LOG_DIR, "_sidecars")))
        assert len(sidecars) == 3   # 7 live adds in chunks of 3
        sides = [pq.read_table(os.path.join(root, LOG_DIR, "_sidecars", n)) for n in sidecars]
        assert sorted(len(s.column("add")) - s.column("add").null_count for s in sides) == [1, 3, 3]
        assert sum(len(s.column("remove")) - s.column("remove").null_count for s in sides) == 1
    else:
        meta = pq.ParquetFile(os.path.join(root, LOG_DIR, "00000000000000000008.checkpoint.parquet")).metadata
        assert meta.num_row_groups == 5   # protocol and metaData, 3 + 3 + 1 adds, the remove
    for v in range(0, 8):
        os.unlink(os.path.join(root, LOG_DIR, f"{v:020d}.json"))
    loaded = Snapshot.load(root)
    assert _state(loaded) == _state(snapshot)
    assert loaded.parsed_stats is not None
    assert plan_scan(loaded, "id >= 60").report.files_selected == 3
