"""VACUUM lists, compares and deletes a page (a folder) at a time, and looks the live files up
folder by folder: what it deletes is what comparing the whole listing with every live file gives."""
from __future__ import annotations

import os
import time
from urllib.parse import quote

from skiplake.log.actions import CommitInfo, Metadata, Protocol, RemoveFile, now_ms
from skiplake.log.commit_files import put_commit, put_first_commit
from skiplake.log.location import join, norm
from skiplake.log.paths import file_key
from skiplake.log.snapshot import Snapshot
from skiplake.log.storage import LocalStorage
from skiplake.log.vacuum import KeptFiles, vacuum
from tests.unit.logutil import SCHEMA, add

MONTH_S = 86_400 * 30
# Folders as the files are named on disk; the log spells the last one percent-encoded.
FOLDERS = [f"d=2001-01-{day:02d}" for day in range(1, 21)] + ["d=2001 02 01:x"]


def _touch(path: str, age_s: float) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * 10)
    t = time.time() - age_s
    os.utime(path, (t, t))


def _table(root: str) -> tuple[set[str], set[str]]:
    """(names VACUUM must delete, names it must keep), relative to the root."""
    snapshot = put_first_commit(root, CommitInfo(1, "CREATE TABLE"), Protocol(1, 2),
                                Metadata.new(SCHEMA, ["d"], {}))
    doomed, kept = set(), set()
    adds, removes = [], []
    for i, folder in enumerate(FOLDERS):
        logged = quote(folder)   # the log's spelling of the folder
        for j in range(3):
            name = f"{folder}/live-{j}.parquet"
            _touch(os.path.join(root, name), MONTH_S)
            adds.append(add(f"{logged}/live-{j}.parquet", d=folder.split("=", 1)[1]))
            kept.add(name)
        old, recent = f"{folder}/orphan-old.parquet", f"{folder}/orphan-new.parquet"
        _touch(os.path.join(root, old), MONTH_S)
        _touch(os.path.join(root, recent), 60)
        doomed.add(old)
        kept.add(recent)
        if i % 5 == 0:   # removed a minute ago: within the retention, kept for time travel
            gone = f"{folder}/removed.parquet"
            _touch(os.path.join(root, gone), MONTH_S)
            removes.append(RemoveFile(f"{logged}/removed.parquet", now_ms() - 60_000, True))
            kept.add(gone)
    _touch(os.path.join(root, "at-root.parquet"), MONTH_S)
    adds.append(add("at-root.parquet", d=None))
    kept.add("at-root.parquet")
    _touch(os.path.join(root, "orphan-at-root.parquet"), MONTH_S)
    doomed.add("orphan-at-root.parquet")
    put_commit(snapshot, CommitInfo(1, "WRITE"), adds)
    put_commit(Snapshot.load(root), CommitInfo(1, "WRITE"), removes)
    return doomed, kept


def test_a_paged_vacuum_deletes_what_a_whole_comparison_does(tmp_path):
    root = str(tmp_path / "t")
    doomed, kept = _table(root)
    pages = list(LocalStorage(root).walk_pages())
    assert len(pages) >= len(FOLDERS) and max(len(p) for p in pages) <= 6   # a folder per page
    dry = vacuum(root, retention_hours=168, dry_run=True)
    assert set(dry.files) == doomed and dry.files_deleted == len(doomed) and dry.bytes_deleted == 10 * len(doomed)
    done = vacuum(root, retention_hours=168)
    assert set(done.files) == doomed
    left = {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if "_delta_log" not in d}
    assert left == kept


def test_live_files_are_looked_up_a_few_folders_at_a_time(tmp_path):
    root = str(tmp_path / "t")
    _table(root)
    snapshot = Snapshot.load(root)
    files = KeptFiles(root, snapshot, time.time() - 168 * 3600)
    for page in LocalStorage(root).walk_pages():
        for obj in page:
            by_log = os.path.basename(obj.name).startswith(("live-", "removed", "at-root")) \
                and not obj.name.startswith("_delta_log")
            assert (norm(join(root, obj.name)) in files) == by_log, obj.name
    assert len(files._sets) <= KeptFiles._CACHED_FOLDERS < len(FOLDERS)
    assert file_key(root, "d=2001-01-05/live-1.parquet") in files
