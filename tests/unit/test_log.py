"""The Delta log without Spark: actions, put-if-absent, replay, checkpoints, errors."""
from __future__ import annotations

import json
import multiprocessing as mp
import os

import pytest

from skiplake.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    CorruptLogError,
    MetadataChangedException,
    NotATableError,
    TableAlreadyExistsError,
    VersionNotFoundError,
)
from skiplake.expr.parse import bind
from skiplake.log.actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile, Txn, encode_commit, parse_action
from skiplake.log.snapshot import Snapshot, list_log, log_storage
from skiplake.log.storage import LocalStorage
from skiplake.txn import ReadSet, commit, create
from tests.unit.logutil import SCHEMA, add


def new_table(path: str) -> Snapshot:
    return create(path, Metadata.new(SCHEMA, ["d"], {}))


def test_actions_round_trip_with_protocol_names():
    actions = [
        Protocol(1, 2), Metadata.new(SCHEMA, ["d"], {"delta.appendOnly": "false"}),
        add("d=2001-01-01/a.parquet"), RemoveFile("x.parquet", 5, True, True, {"d": None}, 7),
        Txn("app", 3, 9), CommitInfo(1, "WRITE", {"mode": "Append"}, 0, "Serializable", True),
    ]
    lines = encode_commit(actions).decode().splitlines()
    assert [next(iter(json.loads(line))) for line in lines] == [
        "protocol", "metaData", "add", "remove", "txn", "commitInfo"]
    back = [parse_action(json.loads(line)) for line in lines]
    assert back[:5] == actions[:5]
    assert back[5].operationParameters == {"mode": "Append"}


def test_put_if_absent_never_overwrites(tmp_path):
    s = LocalStorage(str(tmp_path))
    assert s.put_if_absent("00.json", b"first\n")
    assert not s.put_if_absent("00.json", b"second\n")
    assert s.read("00.json") == b"first\n"
    assert [f.name for f in s.list()] == ["00.json"]  # no temporary files left behind


def _race(path: str, i: int, q) -> None:
    s = LocalStorage(path)
    q.put((i, s.put_if_absent("race.json", f"{i}\n".encode() * 1000)))


def test_put_if_absent_exactly_one_process_wins(tmp_path):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), i, q)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    results = [q.get() for _ in procs]
    winners = [i for i, ok in results if ok]
    assert len(winners) == 1
    assert (tmp_path / "race.json").read_text() == f"{winners[0]}\n" * 1000


def _create(path: str, q) -> None:
    try:
        new_table(path)
        q.put("created")
    except TableAlreadyExistsError:
        q.put("exists")


def test_two_processes_creating_one_table(tmp_path):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    path = str(tmp_path / "t")
    procs = [ctx.Process(target=_create, args=(path, q)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert sorted(q.get() for _ in procs) == ["created", "exists", "exists", "exists"]
    assert Snapshot.load(path).version == 0


def test_replay_add_remove_readd(tmp_path):
    path = str(tmp_path / "t")
    snap = new_table(path)
    snap = Snapshot.load(path, commit(snap, [add("a"), add("b")], "WRITE").version)
    snap = Snapshot.load(path, commit(snap, [add("a").remove(1)], "DELETE").version)
    assert sorted(f.path for f in snap.add_files) == ["b"]
    snap = Snapshot.load(path, commit(snap, [add("a", lo=100, hi=200)], "WRITE").version)
    assert sorted(f.path for f in snap.add_files) == ["a", "b"]
    assert [f for f in snap.add_files if f.path == "a"][0].stats.count("200") == 1
    assert [r.path for r in snap.tombstone_list] == []
    assert Snapshot.load(path, 2).num_files == 1  # time travel


def test_checkpoint_every_ten_commits_and_equal_replay(tmp_path):
    path = str(tmp_path / "t")
    snap = new_table(path)
    for i in range(1, 24):
        actions = [add(f"d=2001-01-0{i % 5 + 1}/f{i}.parquet", d=f"2001-01-0{i % 5 + 1}", lo=i, hi=i + 5)]
        if i % 4 == 0:
            actions.append(snap.add_files[0].remove(1_700_000_000_000))
        snap = Snapshot.load(path, commit(snap, actions, "WRITE", read_set=ReadSet(whole_table=True)).version)
    names = {f.name for f in log_storage(path).list()}
    assert {"00000000000000000010.checkpoint.parquet", "00000000000000000020.checkpoint.parquet",
            "_last_checkpoint"} <= names
    assert json.loads((tmp_path / "t" / "_delta_log" / "_last_checkpoint").read_text())["version"] == 20
    from_cp = Snapshot.load(path)
    # Replay the same version from JSON only, by hiding the checkpoints.
    for n in names:
        if "checkpoint" in n:
            os.rename(tmp_path / "t" / "_delta_log" / n, tmp_path / n)
    from_json = Snapshot.load(path)
    key = lambda f: f.path  # noqa: E731
    assert sorted(from_cp.add_files, key=key) == sorted(
        [AddFile(f.path, f.partitionValues, f.size, f.modificationTime, False, f.stats, f.tags)
         if f.path in {g.path for g in from_cp.add_files if not g.dataChange} else f for f in from_json.add_files],
        key=key)
    assert from_cp.metadata == from_json.metadata and from_cp.protocol == from_json.protocol


def test_deltalake_reads_our_checkpoint(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path / "t")
    snap = new_table(path)
    for i in range(1, 13):
        snap = Snapshot.load(path, commit(snap, [add(f"f{i}.parquet", lo=i)], "WRITE").version)
    dt = deltalake.DeltaTable(path)
    assert dt.version() == 12
    rs_paths = sorted(dt.get_add_actions(flatten=True).column("path").to_pylist())
    assert rs_paths == sorted(f.path for f in Snapshot.load(path).add_files)


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(NotATableError, match=str(tmp_path)):
        Snapshot.load(str(tmp_path))
    path = str(tmp_path / "t")
    snap = new_table(path)
    commit(snap, [add("a")], "WRITE")
    with pytest.raises(VersionNotFoundError, match="readable versions are 0..1"):
        Snapshot.load(path, 5)
    with pytest.raises(TableAlreadyExistsError):
        new_table(path)
    log = tmp_path / "t" / "_delta_log" / "00000000000000000001.json"
    good = log.read_bytes()
    log.write_bytes(good[: len(good) // 2])  # truncated mid-line
    with pytest.raises(CorruptLogError, match="00000000000000000001.json"):
        Snapshot.load(path)
    log.write_bytes(b"")
    with pytest.raises(CorruptLogError, match="empty"):
        Snapshot.load(path)
    assert Snapshot.load(path, 0).version == 0  # older versions stay readable


def test_blind_appends_retry_past_each_other(tmp_path):
    path = str(tmp_path / "t")
    base = new_table(path)
    a = commit(base, [add("a")], "WRITE")
    b = commit(base, [add("b")], "WRITE")  # same read version: moves to the next free one
    assert (a.version, b.version, b.attempts) == (1, 2, 2)
    assert sorted(f.path for f in Snapshot.load(path).add_files) == ["a", "b"]


def test_conflicts_follow_read_set(tmp_path):
    path = str(tmp_path / "t")
    base = Snapshot.load(path, commit(new_table(path), [add("a", d="2001-01-01"), add("b", d="2001-01-02")],
                                      "WRITE").version)
    # A winner appends to partition 2001-01-02 (not a blind append: it read the table).
    commit(base, [add("c", d="2001-01-02")], "WRITE", read_set=ReadSet(whole_table=True))
    # A reader of the other partition does not conflict...
    disjoint = ReadSet(predicates=[bind("d = '2001-01-01'", SCHEMA)], files={"a"})
    ok = commit(base, [add("a").remove(1), add("a2", d="2001-01-01")], "DELETE", read_set=disjoint)
    assert ok.version == 3
    # ...one reading the appended partition does.
    with pytest.raises(ConcurrentAppendException, match="d=2001-01-02"):
        commit(base, [add("b").remove(1)], "DELETE",
               read_set=ReadSet(predicates=[bind("d = '2001-01-02'", SCHEMA)], files={"b"}))
    # A file deleted by a winner that we read, or also delete.
    with pytest.raises(ConcurrentDeleteReadException):
        commit(base, [add("z", d="2001-01-03")], "WRITE", read_set=ReadSet(files={"a"},
               predicates=[bind("d = '2001-01-03'", SCHEMA)]))
    with pytest.raises(ConcurrentDeleteDeleteException):
        commit(base, [add("a").remove(1)], "DELETE", read_set=ReadSet(predicates=[bind("d = '2001-01-05'", SCHEMA)]))
    # Metadata changes conflict with everything that is not a blind append.
    latest = Snapshot.load(path)
    commit(latest, [Metadata.new(SCHEMA, ["d"], {"x": "1"})], "SET TBLPROPERTIES")
    with pytest.raises(MetadataChangedException):
        commit(latest, [add("m")], "WRITE")
    assert len(list_log(log_storage(path)).commits) == 5


def _table_with_checkpoint(tmp_path, commits: int = 12) -> str:
    path = str(tmp_path / "t")
    snap = new_table(path)
    for i in range(1, commits + 1):
        snap = Snapshot.load(path, commit(snap, [add(f"f{i}.parquet", lo=i)], "WRITE").version)
    return path


def test_multi_part_checkpoint_written_by_another_engine(tmp_path):
    import pyarrow.parquet as pq
    path = _table_with_checkpoint(tmp_path)
    logdir = tmp_path / "t" / "_delta_log"
    single = logdir / "00000000000000000010.checkpoint.parquet"
    table = pq.read_table(single)
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), logdir / "00000000000000000010.checkpoint.0000000001.0000000002.parquet")
    pq.write_table(table.slice(half), logdir / "00000000000000000010.checkpoint.0000000002.0000000002.parquet")
    expected = sorted(f.path for f in Snapshot.load(path).add_files)
    single.unlink()
    for n in range(10):  # JSON commits before the checkpoint are gone: only the parts can rebuild it
        (logdir / f"{n:020d}.json").unlink()
    assert sorted(f.path for f in Snapshot.load(path).add_files) == expected
    # An incomplete multi-part checkpoint does not count.
    (logdir / "00000000000000000010.checkpoint.0000000002.0000000002.parquet").unlink()
    with pytest.raises(VersionNotFoundError):
        Snapshot.load(path)


def test_corrupt_checkpoint_falls_back_to_replay_or_fails_clearly(tmp_path):
    path = _table_with_checkpoint(tmp_path)
    expected = sorted(f.path for f in Snapshot.load(path).add_files)
    cp = tmp_path / "t" / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    cp.write_bytes(b"not parquet")
    assert sorted(f.path for f in Snapshot.load(path).add_files) == expected  # replayed from JSON
    (tmp_path / "t" / "_delta_log" / "00000000000000000000.json").unlink()
    with pytest.raises(CorruptLogError, match="checkpoint"):
        Snapshot.load(path)


COMMITS_EACH = 50       # commits per committing process
LOADS_BETWEEN = 2       # loads the test makes after each commit before that process commits again
SAFETY_TIMEOUT_S = 120  # only a hung process ends a wait by time: the race itself is bound by events


def _committer(path: str, i: int, loads, errors) -> None:
    """COMMITS_EACH commits, each after the loader has made LOADS_BETWEEN loads since the last one:
    loads and commits interleave however slow the machine is."""
    import time
    for n in range(1, COMMITS_EACH + 1):
        try:
            snap = Snapshot.load(path)
        except (VersionNotFoundError, CorruptLogError):
            with errors.get_lock():
                errors.value += 1
            continue
        commit(snap, [add(f"f-{i}-{n}.parquet")], "WRITE")
        seen, waited = loads.value, time.monotonic()
        while loads.value < seen + LOADS_BETWEEN and time.monotonic() - waited < SAFETY_TIMEOUT_S:
            time.sleep(0.001)


def test_loads_never_fail_while_other_processes_commit(tmp_path):
    """A directory scan racing with commits can miss commit N-1 and return N; loads list again.
    Four processes commit while this one loads, bound by events (commits and loads counted), not
    by a time window: on a loaded machine the race runs as long as it needs."""
    path = str(tmp_path / "t")
    new_table(path)
    ctx = mp.get_context("fork")
    errors, loads = ctx.Value("i", 0), ctx.Value("i", 0)
    procs = [ctx.Process(target=_committer, args=(path, i, loads, errors), daemon=True) for i in range(4)]
    for p in procs:
        p.start()
    failures = advances = last = 0
    try:
        while any(p.is_alive() for p in procs):
            try:
                version = Snapshot.load(path).version
                advances += version > last   # a load that found commits the one before had not
                last = max(last, version)
            except (VersionNotFoundError, CorruptLogError):
                failures += 1
            with loads.get_lock():
                loads.value += 1
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
    assert all(p.exitcode == 0 for p in procs)
    assert (failures, errors.value) == (0, 0)
    final = Snapshot.load(path)
    assert final.version == 4 * COMMITS_EACH   # every commit made, each exactly once
    assert final.num_files == final.version  # one file per commit after version 0, none lost
    # Each committer waits for loads after each of its commits: the loads saw the table advance
    # at least once per round of commits.
    assert advances >= COMMITS_EACH


def test_advanced_snapshot_equals_a_load_and_checkpoints_use_it(tmp_path):
    path = str(tmp_path / "t")
    snap = new_table(path)
    base = snap
    commits = []
    for i in range(1, 8):
        actions = [add(f"f{i}", lo=i, hi=i + 1), Txn("app", i)]
        if i == 3:
            actions.append(snap.add_files[0].remove(1_700_000_000_000))
        if i == 5:
            actions.append(Metadata.new(SCHEMA, [], {"delta.checkpointInterval": "9"}))
        result = commit(snap, actions, "WRITE")
        commits.append((result.version, list(result.actions)))
        snap = Snapshot.load(path)
    advanced = base.advanced(commits)
    loaded = Snapshot.load(path)
    assert advanced.version == loaded.version == 7
    assert sorted(advanced.add_files, key=lambda f: f.path) == sorted(loaded.add_files, key=lambda f: f.path)
    assert [r.path for r in advanced.tombstone_list] == [r.path for r in loaded.tombstone_list] == ["f1"]
    assert advanced.metadata.configuration == loaded.metadata.configuration and advanced.txns == loaded.txns
    with pytest.raises(ValueError, match="does not follow"):
        base.advanced(commits[1:])
    # A commit that races with another reads the winner for its conflict check, and its
    # checkpoint (interval 9) is written from the advanced snapshot: equal to a replay.
    stale = Snapshot.load(path)
    commit(Snapshot.load(path), [add("winner")], "WRITE")
    result = commit(stale, [add("mine")], "WRITE", read_set=ReadSet(predicates=[]))
    assert result.version == 9 and result.checkpointed
    names = {f.name for f in log_storage(path).list()}
    assert "00000000000000000009.checkpoint.parquet" in names
    from_cp = Snapshot.load(path)
    assert {f.path for f in from_cp.add_files} == {f"f{i}" for i in range(2, 8)} | {"winner", "mine"}
