"""A corrupted log is refused with a typed error that names the file, and is never written to.

Hypothesis corrupts one commit or the checkpoint of a small table in many ways (a field dropped,
nulled or of another type; a line replaced; a file truncated) and loads the table: every load
either reads a table or raises a SkiplakeError (CorruptLogError for a damaged log), never
another exception, and the load leaves the log as it found it."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiplake.errors import CorruptLogError, SkiplakeError
from skiplake.log.actions import CommitInfo, Metadata, Protocol, encode_commit
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.snapshot import LOG_DIR, Snapshot, checkpoint_name, commit_name, log_storage
from skiplake.skipping.plan import plan_scan
from tests.tiers import examples
from tests.unit.logutil import SCHEMA, add

WRONG_VALUES = [None, 7, -1, 1.5, "x", "", [], ["a"], {}, {"a": 1}, True]


def _write(table: str, version: int, actions: list) -> None:
    os.makedirs(os.path.join(table, LOG_DIR), exist_ok=True)
    with open(os.path.join(table, LOG_DIR, commit_name(version)), "wb") as f:
        f.write(encode_commit([CommitInfo(1_000 + version, "WRITE")]))
        for a in actions:  # an action, or its JSON as another writer wrote it
            f.write((json.dumps(a) + "\n").encode() if isinstance(a, dict) else encode_commit([a]))


def _table(root: str, with_checkpoint: bool) -> str:
    _write(root, 0, [Protocol(1, 2), Metadata.new(SCHEMA, ["d"], {"delta.appendOnly": "false"})])
    _write(root, 1, [add("d=2001-01-01/a.parquet", lo=0, hi=9)])
    _write(root, 2, [add("d=2001-01-02/b.parquet", "2001-01-02", 10, 19)])
    if with_checkpoint:
        write_checkpoint(log_storage(root), Snapshot.load(root))
    _write(root, 3, [add("d=2001-01-03/c.parquet", "2001-01-03", 20, 29),
                     {"remove": {"path": "d=2001-01-01/a.parquet", "deletionTimestamp": 5, "dataChange": True}}])
    return root


def _listing(table: str) -> dict[str, bytes]:
    folder = os.path.join(table, LOG_DIR)
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}


def _mutate(obj, path: list, how: str, value):
    """The JSON object with the field at `path` dropped or replaced."""
    if len(path) == 1:
        if how == "drop":
            obj.pop(path[0], None)
        else:
            obj[path[0]] = value
        return obj
    inner = obj.get(path[0])
    if isinstance(inner, dict):
        _mutate(inner, path[1:], how, value)
    return obj


def _fields(obj, prefix=()) -> list[list[str]]:
    out = []
    for k, v in obj.items():
        out.append([*prefix, k])
        if isinstance(v, dict):
            out += _fields(v, (*prefix, k))
    return out


@st.composite
def commit_damage(draw):
    version = draw(st.integers(0, 3))
    kind = draw(st.sampled_from(["field", "field", "field", "line", "truncate"]))
    return version, kind, draw(st.randoms(use_true_random=False)), draw(st.sampled_from(WRONG_VALUES))


def _damage_commit(table: str, version: int, kind: str, rnd, value) -> None:
    path = os.path.join(table, LOG_DIR, commit_name(version))
    data = open(path, "rb").read()
    lines = data.decode().splitlines()
    i = rnd.randrange(len(lines))
    if kind == "truncate":
        data = data[:rnd.randrange(len(data))]
    elif kind == "line":
        lines[i] = rnd.choice(['{"add": 1}', '{"metaData": null}', '{"protocol": []}', '[1, 2]', "{", '"x"',
                               '{"add": {"path": null}}', '{"remove": {}}', '{"txn": {"appId": 1}}'])
        data = ("\n".join(lines) + "\n").encode()
    else:
        obj = json.loads(lines[i])
        field = rnd.choice(_fields(obj))
        lines[i] = json.dumps(_mutate(obj, field, rnd.choice(["drop", "set"]), value))
        data = ("\n".join(lines) + "\n").encode()
    with open(path, "wb") as f:
        f.write(data)


def _load_is_typed(table: str) -> None:
    before = _listing(table)
    for version in (None, 0, 1, 2, 3):
        try:
            snapshot = Snapshot.load(table, version)
            plan_scan(snapshot, "id > 12 AND d = DATE'2001-01-02'")  # stats and partition values read
        except SkiplakeError:
            pass
    assert _listing(table) == before


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=commit_damage(), with_checkpoint=st.booleans())
def test_a_damaged_commit_is_a_typed_error(tmp_path_factory, damage, with_checkpoint):
    table = _table(str(tmp_path_factory.mktemp("t")), with_checkpoint)
    _damage_commit(table, *damage)
    _load_is_typed(table)


CHECKPOINT_COLUMNS = ["protocol", "metaData", "add", "remove", "txn"]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(CHECKPOINT_COLUMNS), kind=st.sampled_from(["nulls", "truncate", "drop field"]),
       cut=st.floats(0.0, 1.0), rnd=st.randoms(use_true_random=False))
def test_a_damaged_checkpoint_is_a_typed_error_or_an_older_state(tmp_path_factory, column, kind, cut, rnd):
    table = _table(str(tmp_path_factory.mktemp("t")), True)
    path = os.path.join(table, LOG_DIR, checkpoint_name(2))
    if kind == "truncate":
        data = open(path, "rb").read()
        open(path, "wb").write(data[:int(len(data) * cut)])
    else:
        cp = pq.read_table(path)
        col = cp.column(column).combine_chunks()
        names = [f.name for f in col.type]
        name = rnd.choice(names)
        children = [col.field(n) if n != name else pa.nulls(len(col), col.type.field(n).type) for n in names]
        if kind == "drop field":
            children = [c for n, c in zip(names, children) if n != name]
            names = [n for n in names if n != name]
        new = pa.StructArray.from_arrays(children, names=names, mask=pa.compute.invert(col.is_valid()))
        pq.write_table(cp.set_column(cp.column_names.index(column), column, new), path)
    _load_is_typed(table)


def test_a_superseded_metadata_without_a_schema_reads(tmp_path):
    """A Delta Live Tables table: version 0's metaData has no schemaString, version 1 replaces it."""
    table = str(tmp_path)
    first = Metadata.new(SCHEMA, ["d"], {}).to_json()
    del first["schemaString"]
    _write(table, 0, [Protocol(1, 2), {"metaData": first}])
    _write(table, 1, [Metadata.new(SCHEMA, ["d"], {}), add("d=2001-01-01/a.parquet")])
    snapshot = Snapshot.load(table)
    assert snapshot.version == 1 and snapshot.schema == SCHEMA and len(snapshot.add_files) == 1
    with pytest.raises(CorruptLogError, match=r"00000000000000000000\.json.*metaData\.schemaString is missing"):
        Snapshot.load(table, 0)


def test_a_checkpoint_whose_metadata_has_a_null_schema_names_the_file_and_field(tmp_path):
    table = _table(str(tmp_path), True)
    path = os.path.join(table, LOG_DIR, checkpoint_name(2))
    cp = pq.read_table(path)
    md = cp.column("metaData").combine_chunks()
    names = [f.name for f in md.type]
    children = [md.field(n) if n != "schemaString" else pa.nulls(len(md), pa.string()) for n in names]
    new = pa.StructArray.from_arrays(children, names=names, mask=pa.compute.invert(md.is_valid()))
    pq.write_table(cp.set_column(cp.column_names.index("metaData"), "metaData", new), path)
    for name in (commit_name(0), commit_name(1)):
        os.remove(os.path.join(table, LOG_DIR, name))  # only the checkpoint has the table's metaData
    with pytest.raises(CorruptLogError, match=r"checkpoint\.parquet.*metaData\.schemaString is missing"):
        Snapshot.load(table)
    assert log_storage(table)  # the log is still there, untouched
