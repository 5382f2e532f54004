"""Scan planning over the snapshot's Arrow file table agrees with evaluating every file."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.expr.parse import bind
from skiplake.log.actions import AddFile, Metadata
from skiplake.log.schema import Field, Schema
from skiplake.log.snapshot import Snapshot
from skiplake.skipping.metrics import file_lookup, may_match
from skiplake.skipping.plan import plan_scan
from skiplake.txn import commit, create
from tests.tiers import examples

SCHEMA = Schema((Field("v", "long"), Field("d", "date"), Field("s", "string")))
DATES = ["2001-01-01", "2001-01-02", "2001-02-01", None]
STRINGS = ["a", "b c", "x:y/z", "", None]


def build(path: str) -> Snapshot:
    snap = create(path, Metadata.new(SCHEMA, ["d", "s"], {}))
    rnd = random.Random(3)
    adds = []
    for i in range(120):
        d, s = rnd.choice(DATES), rnd.choice(STRINGS)
        lo = rnd.randrange(0, 100)
        stats = json.dumps({"numRecords": 5, "minValues": {"v": lo}, "maxValues": {"v": lo + rnd.randrange(0, 20)},
                            "nullCount": {"v": rnd.choice([0, 0, 2])}})
        adds.append(AddFile(f"f{i}.parquet", {"d": d, "s": s}, 100 + i, 1, True, stats))
    commit(snap, adds, "WRITE")
    return Snapshot.load(path)


leaf = st.one_of(
    st.sampled_from(DATES[:3]).map(lambda d: f"d = '{d}'"),
    st.sampled_from(DATES[:3]).map(lambda d: f"d >= '{d}'"),
    st.sampled_from(["a", "b c", "x:y/z", ""]).map(lambda s: f"s = '{s}'"),
    st.just("s IS NULL"), st.just("d IS NULL"),
    st.integers(0, 120).map(lambda v: f"v < {v}"),
    st.lists(st.integers(0, 120), min_size=1, max_size=3).map(lambda vs: f"v IN ({', '.join(map(str, vs))})"),
)
preds = st.recursive(leaf, lambda kids: st.one_of(
    st.tuples(kids, kids).map(lambda t: f"({t[0]}) AND ({t[1]})"),
    st.tuples(kids, kids).map(lambda t: f"({t[0]}) OR ({t[1]})"),
    kids.map(lambda k: f"NOT ({k})")), max_leaves=4)


@pytest.fixture(scope="module")
def snap(tmp_path_factory) -> Snapshot:
    return build(str(tmp_path_factory.mktemp("scan") / "t"))


@settings(max_examples=examples(150), deadline=None)
@given(where=preds)
def test_plan_equals_per_file_evaluation(snap, where):
    node = bind(where, SCHEMA)
    expected = sorted(f.path for f in snap.add_files
                      if may_match(node, file_lookup(SCHEMA, f.partitionValues, f.stats)))
    plan = plan_scan(snap, where)
    assert sorted(f.path for f in plan.files) == expected, where
    assert plan.report.files_total == 120 and plan.report.rows_total == 600
    assert plan.report.partitions_total == len({(f.partitionValues["d"], f.partitionValues["s"])
                                                for f in snap.add_files})


def test_a_float_partition_value_is_the_float_spark_reads(tmp_path):
    """x=0.1 in a FLOAT column is 0.1f, which Spark compares widened (0.10000000149...): a FLOAT
    literal finds it, a DOUBLE 0.1 does not (as in Spark), and both paths of the planner agree."""
    schema = Schema((Field("x", "float"), Field("v", "long")))
    path = str(tmp_path / "t")
    snap = create(path, Metadata.new(schema, ["x"], {}))
    commit(snap, [AddFile(f"x={x}/f.parquet", {"x": x}, 10, 1, True, json.dumps({"numRecords": 1}))
                  for x in ("0.1", "0.5", "1e39")], "WRITE")
    snap = Snapshot.load(path)
    for where, expected in [("x = CAST(0.1 AS FLOAT)", ["x=0.1/f.parquet"]),
                            ("x > CAST(0.3 AS FLOAT)", ["x=0.5/f.parquet", "x=1e39/f.parquet"])]:
        assert sorted(f.path for f in plan_scan(snap, where).files) == expected, where
        node = bind(where, schema)
        assert sorted(f.path for f in snap.add_files if may_match(node, file_lookup(schema, f.partitionValues, f.stats))) \
            == expected, where
