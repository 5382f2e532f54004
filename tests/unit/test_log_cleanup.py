"""Log cleanup: expired commits and checkpoints go after a checkpoint, never one a load needs."""
from __future__ import annotations

import os
import threading

import pytest

from skiplake.errors import VersionNotFoundError
from skiplake.log.actions import CommitInfo, Metadata, Protocol, now_ms
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.cleanup import clean_expired_log
from skiplake.log.commit_files import put_commit, put_first_commit
from skiplake.log.snapshot import LOG_DIR, Snapshot, checkpoint_name, commit_name, list_log, log_storage
from tests.unit.logutil import SCHEMA, add

DAY_MS = 86_400_000
NOW = now_ms()  # the tests age files relative to the real clock: commits are written at it


def _table(root: str, commits: int, configuration: dict[str, str] | None = None) -> str:
    """Version 0 and `commits` appends of one file each; checkpoints every 10 versions."""
    config = {"delta.enableExpiredLogCleanup": "false", **(configuration or {})}
    snapshot = put_first_commit(root, CommitInfo(1, "CREATE TABLE"), Protocol(1, 2),
                                Metadata.new(SCHEMA, ["d"], config))
    for i in range(1, commits + 1):
        put_commit(snapshot, CommitInfo(1, "WRITE"), [add(f"d=2001-01-01/f{i}.parquet")])
        snapshot = Snapshot.load(root)
    return root


def _age(root: str, versions: range, days_before_now: float) -> None:
    """Set the modification time of the log files of `versions` to `days_before_now` before NOW."""
    when = (NOW - days_before_now * DAY_MS) / 1000
    log = os.path.join(root, LOG_DIR)
    for name in os.listdir(log):
        if name[:20].isdigit() and int(name[:20]) in versions:
            os.utime(os.path.join(log, name), (when, when))


def _files(root: str, version: int | None = None) -> list[str]:
    return sorted(f.path for f in Snapshot.load(root, version).add_files)


def test_files_before_the_newest_expired_checkpoint_go_and_every_kept_version_reads(tmp_path):
    root = _table(str(tmp_path / "t"), 25)
    _age(root, range(0, 15), 40)
    _age(root, range(15, 26), 1)
    before = {v: _files(root, v) for v in range(0, 26)}

    result = clean_expired_log(root, {}, now=NOW)

    # Commits 0..14 are older than 30 days: the newest checkpoint among them is version 10.
    assert result.cutoff_version == 10
    listing = list_log(log_storage(root))
    assert sorted(listing.commits) == list(range(10, 26))
    assert sorted(listing.checkpoints) == [10, 20]
    assert set(result.deleted) == {commit_name(v) for v in range(10)}
    for v in range(10, 26):  # time travel inside the window, and to the oldest kept version
        assert _files(root, v) == before[v]
    with pytest.raises(VersionNotFoundError, match="readable versions are 10..25"):
        Snapshot.load(root, 9)


def test_nothing_goes_without_an_expired_checkpoint_or_when_cleanup_is_off(tmp_path):
    root = _table(str(tmp_path / "t"), 12)
    _age(root, range(0, 10), 40)  # commits 0..9 expired, but the first checkpoint is version 10
    assert clean_expired_log(root, {}, now=NOW).deleted == ()
    _age(root, range(0, 13), 40)
    assert clean_expired_log(root, {"delta.enableExpiredLogCleanup": "false"}, now=NOW).deleted == ()
    assert sorted(list_log(log_storage(root)).commits) == list(range(13))


def test_retention_is_the_tables_and_the_cutoff_is_midnight_utc(tmp_path):
    root = _table(str(tmp_path / "t"), 21)
    _age(root, range(0, 22), 3)
    assert clean_expired_log(root, {}, now=NOW).deleted == ()  # 3 days < 30 days
    result = clean_expired_log(root, {"delta.logRetentionDuration": "interval 2 days"}, now=NOW)
    assert result.cutoff_version == 20
    # With a one-day retention the cutoff is the midnight (UTC) before "a day ago": files one
    # second younger than that midnight stay.
    root2 = _table(str(tmp_path / "t2"), 11)
    midnight = (NOW - DAY_MS) // DAY_MS * DAY_MS
    _age(root2, range(0, 12), (NOW - midnight - 1000) / DAY_MS)
    assert clean_expired_log(root2, {"delta.logRetentionDuration": "1 day"}, now=NOW).deleted == ()
    _age(root2, range(0, 12), (NOW - midnight + 1000) / DAY_MS)
    assert clean_expired_log(root2, {"delta.logRetentionDuration": "1 day"}, now=NOW).cutoff_version == 10


def test_checkpoints_are_kept_for_the_checkpoint_retention(tmp_path):
    root = _table(str(tmp_path / "t"), 31)
    _age(root, range(0, 32), 40)
    checkpoint_10 = os.path.join(root, LOG_DIR, checkpoint_name(10))
    os.utime(checkpoint_10, ((NOW - DAY_MS) / 1000,) * 2)  # rewritten a day ago
    result = clean_expired_log(root, {"delta.checkpointRetentionDuration": "interval 7 days"}, now=NOW)
    assert result.cutoff_version == 30
    listing = list_log(log_storage(root))
    assert sorted(listing.checkpoints) == [10, 30]  # 10 is within 7 days; 20 went
    assert checkpoint_name(20) in result.deleted and min(listing.commits) == 30
    assert len(_files(root, 10)) == 10  # and a kept checkpoint still reads alone


def test_a_younger_commit_keeps_every_later_one(tmp_path):
    root = _table(str(tmp_path / "t"), 31)
    _age(root, range(0, 32), 40)
    _age(root, range(12, 13), 1)
    # Times are made monotone in version order: commits 13..31 count as no older than 12.
    assert clean_expired_log(root, {}, now=NOW).cutoff_version == 10


def test_commits_trigger_cleanup_after_their_checkpoint(tmp_path):
    root = _table(str(tmp_path / "t"), 19, {"delta.enableExpiredLogCleanup": "true",
                                             "delta.logRetentionDuration": "interval 1 day"})
    now_s = NOW / 1000
    for name in os.listdir(os.path.join(root, LOG_DIR)):  # the whole log written weeks ago
        os.utime(os.path.join(root, LOG_DIR, name), (now_s - 20 * 86_400,) * 2)
    snapshot = Snapshot.load(root)
    put_commit(snapshot, CommitInfo(1, "WRITE"), [add("d=2001-01-01/f20.parquet")])  # checkpoint 20
    listing = list_log(log_storage(root))
    assert min(listing.commits) == 10 and 10 in listing.checkpoints
    assert len(_files(root)) == 20


def test_a_load_that_listed_before_cleanup_relists_and_gets_a_typed_error(tmp_path):
    root = _table(str(tmp_path / "t"), 25)
    storage = log_storage(root)
    stale = list_log(storage)
    _age(root, range(0, 26), 40)
    clean_expired_log(root, {}, now=NOW)
    # Version 5 was readable from commit 0 when listed; the files are gone now.
    with pytest.raises(VersionNotFoundError):
        Snapshot.load(root, 5, storage, stale)
    assert len(Snapshot.load(root, 25, storage, stale).add_files) == 25


def test_readers_load_while_cleanup_runs(tmp_path):
    root = _table(str(tmp_path / "t"), 60)
    _age(root, range(0, 61), 40)
    expected = {v: _files(root, v) for v in (50, 60)}
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        # Version 50 lies before the cutoff: while its files go, a load of it either reads it
        # whole or is refused with the typed error, and once refused it stays refused. The
        # newest version reads whole throughout.
        refused = False
        while not done.is_set():
            try:
                try:
                    files = _files(root, 50)
                    assert not refused, "version 50 read again after it was refused"
                    assert files == expected[50]
                except VersionNotFoundError:
                    refused = True
                assert _files(root, 60) == expected[60]
                assert _files(root) == expected[60]
            except BaseException as e:  # noqa: BLE001 - reported by the test thread
                errors.append(e)
                return

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        result = clean_expired_log(root, {}, now=NOW)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert result.cutoff_version == 60 and len(result.deleted) == 60 + 5
    assert not errors, errors[0]


def test_a_rewritten_checkpoint_keeps_its_version_readable(tmp_path):
    root = _table(str(tmp_path / "t"), 5)
    write_checkpoint(log_storage(root), Snapshot.load(root, 3))
    _age(root, range(0, 6), 40)
    assert clean_expired_log(root, {}, now=NOW).cutoff_version == 3
    assert len(_files(root, 3)) == 3 and len(_files(root)) == 5
