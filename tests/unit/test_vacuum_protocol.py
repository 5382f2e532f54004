"""VACUUM and the protocol: the `vacuumProtocolCheck` reader-writer feature, and the write
protocol check VACUUM makes for every table before it deletes anything."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skiplake.errors import ProtocolNotSupportedError
from skiplake.log.actions import CommitInfo, Metadata, Protocol, encode_commit
from skiplake.log.snapshot import LOG_DIR, Snapshot, commit_name
from skiplake.log.vacuum import vacuum
from tests.unit.logutil import SCHEMA, add

CHECK = "vacuumProtocolCheck"
MONTH_S = 86_400 * 30


def _table(root: str, protocol: Protocol) -> tuple[str, str]:
    """A one-file table with `protocol`, and an unreferenced file a month old beside it."""
    os.makedirs(os.path.join(root, LOG_DIR))
    part = os.path.join(root, "d=2001-01-01")
    os.makedirs(part)
    pq.write_table(pa.table({"id": [1], "name": ["a"]}), os.path.join(part, "live.parquet"))
    orphan = os.path.join(part, "orphan.parquet")
    pq.write_table(pa.table({"id": [2], "name": ["b"]}), orphan)
    os.utime(orphan, (os.path.getmtime(orphan) - MONTH_S,) * 2)
    with open(os.path.join(root, LOG_DIR, commit_name(0)), "wb") as f:
        f.write(encode_commit([CommitInfo(1_000, "CREATE TABLE"), protocol, Metadata.new(SCHEMA, ["d"], {}),
                               add("d=2001-01-01/live.parquet")]))
    return root, orphan


def test_a_table_with_the_feature_reads_and_vacuums(tmp_path):
    table, orphan = _table(str(tmp_path / "t"), Protocol(3, 7, (CHECK,), ("appendOnly", "invariants", CHECK)))
    snapshot = Snapshot.load(table)
    assert [f.path for f in snapshot.add_files] == ["d=2001-01-01/live.parquet"]
    result = vacuum(table, retention_hours=168)
    assert result.files == ["d=2001-01-01/orphan.parquet"] and not os.path.exists(orphan)


@pytest.mark.parametrize("protocol", [
    Protocol(3, 7, (CHECK,), (CHECK, "someFutureWriterFeature")),
    Protocol(1, 7, None, ("someFutureWriterFeature",)),  # without the feature too: the check is unconditional
])
def test_vacuum_refuses_a_write_protocol_it_does_not_know_and_deletes_nothing(tmp_path, protocol):
    table, orphan = _table(str(tmp_path / "t"), protocol)
    assert len(Snapshot.load(table).add_files) == 1  # reading is fine
    with pytest.raises(ProtocolNotSupportedError, match="someFutureWriterFeature"):
        vacuum(table, retention_hours=168)
    assert os.path.exists(orphan)
