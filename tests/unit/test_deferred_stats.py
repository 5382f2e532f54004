"""A large checkpoint with typed stats is loaded without its adds' JSON stats, and every path
that needs them reads them back: the whole file table, a plan's files, a committer's snapshot."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from skiplake.errors import CheckpointRemovedError
from skiplake.log import checkpoint, checkpoint_read
from skiplake.log.actions import now_ms
from skiplake.log.snapshot import LOG_DIR, Snapshot, checkpoint_name
from skiplake.skipping.plan import plan_scan
from tests.unit.test_typed_stats import _table

WHERES = ("id > 500", "name >= 'n00500'", "p = 1 AND id < 0", "p IS NULL", "day = DATE'2024-02-03'", None)


def _load(root: str, monkeypatch: pytest.MonkeyPatch, defer: bool) -> Snapshot:
    monkeypatch.setattr(checkpoint_read, "DEFER_STATS_MIN_ROWS", 0 if defer else 10**12)
    return Snapshot.load(root)


@pytest.mark.parametrize("remove_after_checkpoint", [False, True])
def test_stats_left_in_the_checkpoint_are_read_back_where_needed(tmp_path, monkeypatch, remove_after_checkpoint):
    root = _table(str(tmp_path / "t"), remove_after_checkpoint=remove_after_checkpoint)
    eager = _load(root, monkeypatch, defer=False)
    lazy = _load(root, monkeypatch, defer=True)
    assert eager.deferred_stats is None and lazy.deferred_stats is not None
    deferred = len(lazy.deferred_stats.rows)
    assert deferred == 100 - remove_after_checkpoint   # the checkpoint's adds still live
    assert lazy.file_rows.column("stats").slice(0, deferred).null_count == deferred
    # Plans (their files with stats) and a mask's rows read only what they select.
    for where in WHERES:
        a, b = plan_scan(eager, where), plan_scan(lazy, where)
        assert a.report == b.report, where
        assert a.files == b.files, where
    rng = np.random.default_rng(3)
    for _ in range(5):
        mask = rng.random(lazy.num_files) < 0.2
        assert lazy.files_with_stats(mask).equals(eager.files.filter(pa.array(mask)))
    # A committer's snapshot keeps the rows' places through a remove of a checkpointed file.
    gone = eager.add_files[40].remove(now_ms())
    assert lazy.advanced([(lazy.version + 1, [gone])]).files.equals(eager.advanced([(eager.version + 1, [gone])]).files)
    assert "files" not in lazy.__dict__   # nothing above read the whole column
    assert lazy.files.equals(eager.files)
    assert lazy.add_files == eager.add_files


def test_only_the_row_groups_holding_the_rows_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "ADD_CHUNK", 30)   # the checkpoint's 100 adds in 4 row groups
    root = _table(str(tmp_path / "t"))
    lazy = _load(root, monkeypatch, defer=True)
    assert lazy.deferred_stats is not None
    typed = lazy.deferred_stats.typed
    every = typed.json_stats()
    rows = np.array([2, 29, 75, 76])
    assert typed.json_stats(rows).to_pylist() == every.take(pa.array(rows)).to_pylist()
    located = typed._locate(rows)
    assert located is not None
    groups = [g for _, _, g in located[0]]
    assert len(groups) == 2 and groups[0] != groups[1]   # two of the four groups that hold adds


def test_a_checkpoint_removed_before_the_stats_are_read_is_a_typed_error(tmp_path, monkeypatch):
    root = _table(str(tmp_path / "t"))
    lazy = _load(root, monkeypatch, defer=True)
    os.remove(os.path.join(root, LOG_DIR, checkpoint_name(10)))
    with pytest.raises(CheckpointRemovedError, match="load the table again"):
        lazy.files


def test_small_checkpoints_and_ones_without_typed_stats_read_their_stats_at_load(tmp_path, monkeypatch):
    root = _table(str(tmp_path / "t"))
    assert Snapshot.load(root).deferred_stats is None   # 100 adds: below the default bound
    plain = _table(str(tmp_path / "u"), {"delta.checkpoint.writeStatsAsStruct": "false"})
    snapshot = _load(plain, monkeypatch, defer=True)
    assert snapshot.deferred_stats is None and snapshot.file_rows.column("stats").null_count < 10


def test_a_checkpoint_rewritten_unreadable_since_the_load_is_a_corrupt_log_error(tmp_path, monkeypatch):
    from skiplake.errors import CorruptLogError
    root = _table(str(tmp_path / "t"))
    lazy = _load(root, monkeypatch, defer=True)
    with open(os.path.join(root, LOG_DIR, checkpoint_name(10)), "wb") as f:
        f.write(b"not parquet")
    with pytest.raises(CorruptLogError, match="cannot be read"):
        lazy.files_with_stats(np.ones(lazy.num_files, bool))


@pytest.mark.parametrize("remove_after_checkpoint", [False, True])
@pytest.mark.parametrize("defer", [False, True])
def test_a_checkpoint_copies_the_typed_stats_of_the_files_it_was_loaded_with(tmp_path, monkeypatch, defer,
                                                                              remove_after_checkpoint):
    monkeypatch.setattr(checkpoint, "ADD_CHUNK", 30)   # chunks of copied rows, of parsed rows, and of both
    root = _table(str(tmp_path / "t"), remove_after_checkpoint=remove_after_checkpoint)
    snapshot = _load(root, monkeypatch, defer)
    assert checkpoint._FileActions.of(snapshot).copied is None   # 100 files: parsed again, the default
    monkeypatch.setattr(checkpoint, "COPY_STATS_MIN_ROWS", 50)
    actions = checkpoint._FileActions.of(snapshot)
    assert actions.copied is not None
    assert len(actions.copied.rows) == (100 - remove_after_checkpoint if defer else snapshot.checkpoint_head)
    parsed_rows: list[int] = []
    parse = checkpoint.stats_struct

    def counted(stats: pa.Array, columns: list) -> pa.StructArray:
        parsed_rows.append(len(stats))
        return parse(stats, columns)
    monkeypatch.setattr(checkpoint, "stats_struct", counted)
    copied = checkpoint.checkpoint_table(snapshot)
    assert sum(parsed_rows) == snapshot.num_files - len(actions.copied.rows)   # only the files after the head
    monkeypatch.setattr(checkpoint._CopiedStats, "of", staticmethod(lambda *_: None))
    parsed = checkpoint.checkpoint_table(snapshot)   # every file's JSON parsed again
    assert copied.equals(parsed)


def test_a_checkpoint_parses_the_stats_again_when_their_type_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "COPY_STATS_MIN_ROWS", 0)
    root = _table(str(tmp_path / "t"))
    snapshot = _load(root, monkeypatch, defer=True)
    typed = checkpoint._typed_types(snapshot)[0].type
    assert checkpoint._CopiedStats.of(snapshot, typed) is not None
    # A column added since the load's checkpoint: the stats struct has another type.
    wider = pa.struct([*typed, pa.field("extra", pa.int64())])
    assert checkpoint._CopiedStats.of(snapshot, wider) is None
