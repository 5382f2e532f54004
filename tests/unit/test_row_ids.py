"""Row ids without Spark: assignment at each attempt, past what concurrent commits gave out."""
from __future__ import annotations

import json

from skiplake.log.actions import AddFile, DomainMetadata, Metadata, Protocol
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot
from skiplake.txn import commit, create
from skiplake.txn.row_tracking import DOMAIN, RowIds, preserved, with_column_names

SCHEMA = Schema((Field("id", "long"),))


def _file(name: str, rows: int) -> AddFile:
    return AddFile(name, {}, 10, 1, True, json.dumps({"numRecords": rows}))


def _table(tmp_path) -> Snapshot:
    config = with_column_names({"delta.enableRowTracking": "true"})
    return create(str(tmp_path / "t"), Metadata.new(SCHEMA, [], config),
                  Protocol(1, 7, None, ("domainMetadata", "rowTracking")))


def test_assign_gives_each_new_file_the_next_ids_and_moves_the_mark():
    ids = RowIds("t", 9)
    kept = AddFile("old", {}, 1, 1, True, None, None, {"storageType": "u"}, None, 3, 1)
    out = ids.assign(4, [_file("a", 5), kept, _file("b", 2)])
    a, old, b, mark = out
    assert (a.baseRowId, a.defaultRowCommitVersion, b.baseRowId, b.defaultRowCommitVersion) == (10, 4, 15, 4)
    assert old is kept and ids.mark == 9   # an attempt may fail: the mark moves when followed
    assert mark == DomainMetadata(DOMAIN, '{"rowIdHighWaterMark":16}')


def test_concurrent_appends_get_disjoint_ids(tmp_path):
    base = _table(tmp_path)
    commit(base, [_file("a", 5)], "WRITE")
    second = commit(base, [_file("b", 7)], "WRITE")   # retried after the first: ids past its mark
    snap = Snapshot.load(base.table_path)
    files = {f.path: f for f in snap.add_files}
    assert (files["a"].baseRowId, files["b"].baseRowId) == (0, 5)
    assert files["b"].defaultRowCommitVersion == second.version == 2
    assert json.loads(snap.domain(DOMAIN) or "{}") == {"rowIdHighWaterMark": 11}


def test_preserved_says_whether_rows_were_copied():
    a = _file("a", 5)
    assert preserved([a])                                      # an append
    assert preserved([a.remove(1)])                            # whole files dropped
    assert preserved([a.remove(1), a])                         # a file logged again with a deletion vector
    assert not preserved([a.remove(1), _file("b", 4)])         # rows copied into a new file
