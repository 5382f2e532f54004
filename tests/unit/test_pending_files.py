"""A snapshot loaded with `files_later_from` leaves a large checkpoint's file actions unread: the
table's head is there at once, the files are read on first use, and a committer's snapshot
keeps them pending."""
from __future__ import annotations

import os

import pytest

from skiplake.errors import CheckpointRemovedError
from skiplake.log import checkpoint
from skiplake.log.actions import now_ms
from skiplake.log.checkpoint_read import read_add_groups, read_checkpoint_head
from skiplake.log.snapshot import LOG_DIR, Snapshot, checkpoint_name, log_storage
from skiplake.skipping.plan import plan_scan
from tests.unit.test_typed_stats import _table
from tests.unit.test_v2_checkpoint import _state
from tests.unit.test_v2_checkpoint import _table as v2_table


@pytest.mark.parametrize("remove_after_checkpoint", [False, True])
def test_the_files_of_a_large_checkpoint_wait_until_first_use(tmp_path, remove_after_checkpoint):
    root = _table(str(tmp_path / "t"), remove_after_checkpoint=remove_after_checkpoint)
    eager = Snapshot.load(root)
    assert not Snapshot.load(root, files_later_from=101).files_pending   # 100 adds: below the bound
    lazy = Snapshot.load(root, files_later_from=100)
    assert lazy.files_pending and lazy.pending is not None
    assert lazy.pending.checkpoint_adds == 100 and lazy.pending.version == 10
    assert len(lazy.pending.added) == 20 and len(lazy.pending.removed) == remove_after_checkpoint
    # The head is the same without reading a file action.
    for name in ("version", "protocol", "metadata", "txns", "timestamp", "domains", "schema"):
        assert getattr(lazy, name) == getattr(eager, name), name
    assert lazy.files_pending
    # A committer's snapshot keeps them pending, and equals a load of the files.
    gone = eager.add_files[40].remove(now_ms())
    moved = lazy.advanced([(lazy.version + 1, [gone])])
    assert moved.files_pending and lazy.files_pending
    assert moved.files.equals(eager.advanced([(eager.version + 1, [gone])]).files)
    # First use reads them, once.
    assert lazy.files.equals(eager.files) and lazy.tombstones.equals(eager.tombstones)
    assert not lazy.files_pending and lazy.num_files == eager.num_files


def test_the_head_names_every_row_group_of_adds(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "ADD_CHUNK", 30)   # the checkpoint's 100 adds in 4 row groups
    root = _table(str(tmp_path / "t"))
    storage = log_storage(root)
    head = read_checkpoint_head(storage, [checkpoint_name(10)])
    assert head is not None and head.metadata is not None and head.protocol is not None
    assert [count for _, _, count in head.groups] == [30, 30, 30, 10] and head.adds == 100
    shares = [read_add_groups(storage, name, (group,)) for name, group, _ in head.groups]
    paths = [p for share in shares for p in share.rows.column("path").to_pylist()]
    checkpointed = Snapshot.load(root, version=10)
    assert sorted(paths) == sorted(checkpointed.files.column("path").to_pylist())
    # A group's rows leave their JSON stats to their typed stats, which read just that group.
    share = shares[1]
    assert share.stats_unread and share.typed is not None
    assert share.rows.column("stats").null_count == share.rows.num_rows
    assert share.typed.paths().to_pylist() == share.rows.column("path").to_pylist()
    assert len(share.typed.read(["id"])) == 30
    stats = dict(zip(checkpointed.files.column("path").to_pylist(), checkpointed.files.column("stats").to_pylist()))
    assert share.typed.json_stats().to_pylist() == [stats[p] for p in share.rows.column("path").to_pylist()]
    # Planned as a snapshot of just those files, less one removed since: the plan's files carry their stats.
    gone = (share.rows.column("path")[3].as_py(), "")
    snapshot = Snapshot.of_files(root, 10, checkpointed.protocol, checkpointed.metadata, share, storage,
                                 frozenset({gone}))
    assert snapshot.num_files == 29 and snapshot.checkpoint_head == 3
    plan = plan_scan(snapshot, "id > 50")
    got = snapshot.files_with_stats(plan.mask)
    assert got.column("stats").to_pylist() == [stats[p] for p in got.column("path").to_pylist()]
    # It keeps what the whole table's plan keeps of those files.
    mine = set(share.rows.column("path").to_pylist()) - {gone[0]}
    whole = {f.path for f in plan_scan(checkpointed, "id > 50").files} & mine
    assert {f.path for f in plan.files} == whole and 0 < len(whole) < len(mine)


def test_a_checkpoint_removed_before_the_files_are_read_is_a_typed_error(tmp_path):
    root = _table(str(tmp_path / "t"))
    lazy = Snapshot.load(root, files_later_from=1)
    os.remove(os.path.join(root, LOG_DIR, checkpoint_name(10)))
    with pytest.raises(CheckpointRemovedError, match="load the table again"):
        lazy.file_rows


def test_json_checkpoints_and_unreadable_heads_read_their_files_at_load(tmp_path):
    root = _table(str(tmp_path / "t"))
    with open(os.path.join(root, LOG_DIR, checkpoint_name(10)), "r+b") as f:
        f.seek(-12, os.SEEK_END)
        f.write(b"\0" * 12)   # the footer no longer reads
    snapshot = Snapshot.load(root, files_later_from=1)   # replayed from the commits instead
    assert not snapshot.files_pending and snapshot.num_files == 120


def test_a_v2_checkpoint_leaves_its_sidecars_pending(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "ADD_CHUNK", 4)   # several sidecars
    root = v2_table(str(tmp_path / "t"), 12)
    eager = Snapshot.load(root)
    lazy = Snapshot.load(root, files_later_from=1)
    assert lazy.files_pending and lazy.pending is not None
    held = {name for name, _, _ in lazy.pending.groups}
    assert len(held) > 1 and all(name.startswith("_sidecars/") for name in held)
    storage = log_storage(root)
    paths = [p for name, group, _ in lazy.pending.groups
             for p in read_add_groups(storage, name, (group,)).rows.column("path").to_pylist()]
    assert len(paths) == lazy.pending.checkpoint_adds
    assert _state(lazy) == _state(eager) and not lazy.files_pending
