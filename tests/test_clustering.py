"""Liquid clustering: the clustering columns in the `delta.clustering` domain, incremental
OPTIMIZE along the Hilbert curve, key changes without rewrites, and skipping on the result.
delta-spark's side: tests/test_delta_spark_reads.py, tests/test_golden_tables.py and
tests/test_delta_spark_writes.py."""
from __future__ import annotations

import json

import pytest

from skiplake.errors import InvalidArgumentError
from skiplake.layout.curves import ZCUBE_ID, ZCUBE_ZORDER_BY
from skiplake.log.checkpoint import write_checkpoint
from skiplake.log.snapshot import Snapshot, log_storage
from tests.pruning_conf import SMALL_TABLES

pytestmark = pytest.mark.spark

SCHEMA = "id long, k int, d date, name string"


def _rows(spark, lo: int, hi: int):
    return spark.sql(f"SELECT id, CAST(id * 7919 % 1000 AS INT) AS k, date_add(DATE'2024-01-01', CAST(id % 365 AS INT)) "
                     f"AS d, concat('n', id) AS name FROM range({lo}, {hi})")


def _log_lines(t, version: int) -> list[dict]:
    with open(f"{t.path}/_delta_log/{version:020d}.json") as f:
        return [json.loads(line) for line in f]


def test_create_clustered_table_writes_domain_and_features(lake):
    t = lake.create_table("t", SCHEMA, cluster_by=["k", "D"])
    assert t.clustering_columns == ["k", "d"]
    assert t.detail().clustering_columns == ["k", "d"]   # DESCRIBE DETAIL, as delta-spark's
    p = t.snapshot.protocol
    assert (p.minReaderVersion, p.minWriterVersion) == (1, 7)
    assert {"clustering", "domainMetadata"} <= set(p.writerFeatures or ())
    domains = [a["domainMetadata"] for a in _log_lines(t, 0) if "domainMetadata" in a]
    assert domains == [{"domain": "delta.clustering", "configuration": '{"clusteringColumns":[["k"],["d"]]}',
                        "removed": False}]
    assert t.history(1)[0]["operationParameters"]["clusterBy"] == '["k", "d"]'


@pytest.mark.parametrize("kwargs, message", [
    ({"partition_by": ["d"]}, "either partitioned or clustered"),
    ({"cluster_by": ["nope"]}, "unknown column 'nope'"),
    ({"cluster_by": ["k", "k"]}, "named twice"),
])
def test_create_refusals(lake, kwargs, message):
    kwargs = {"cluster_by": ["k"], **kwargs}
    with pytest.raises(InvalidArgumentError, match=message):
        lake.create_table("t", SCHEMA, **kwargs)


def test_incremental_optimize_rewrites_only_new_rows_and_small_cubes(lake, spark):
    t = lake.create_table("t", SCHEMA, cluster_by=["k", "d"])
    for i in range(4):
        t.append(_rows(spark, i * 5000, (i + 1) * 5000).repartition(2))
    target = 64 * 1024
    first = t.optimize(target_file_size=target, min_cube_size=target * 2)
    assert first.files_removed == 8 and first.files_added > 1
    clustered = t.snapshot.add_files
    assert all(f.clusteringProvider == "liquid" and f.tags[ZCUBE_ZORDER_BY] == '["k","d"]' for f in clustered)
    assert len({f.tags[ZCUBE_ID] for f in clustered}) == 1
    op = t.history(1)[0]
    assert op["operation"] == "OPTIMIZE" and op["operationParameters"]["clusterBy"] == '["k", "d"]'
    # Files cover narrow ranges of the keys: a point on k reads a fraction of them.
    plan = t.scan("k = 500")
    assert plan.report.files_selected < plan.report.files_total / 2

    # Nothing new: nothing to do.
    assert t.optimize(target_file_size=target, min_cube_size=target * 2).version is None
    t.append(_rows(spark, 20000, 21000).repartition(1))
    again = t.optimize(target_file_size=target, min_cube_size=target * 2)
    assert again.files_removed == 1   # the new file alone; the big cube stays
    assert {f.path for f in clustered} <= {f.path for f in t.snapshot.add_files}
    assert t.read().count() == 21000
    # A big minimum cube size makes both cubes small: they merge into one.
    merged = t.optimize(target_file_size=target, min_cube_size=1 << 40)
    assert merged.files_removed == len(clustered) + again.files_added
    assert len({f.tags[ZCUBE_ID] for f in t.snapshot.add_files}) == 1
    assert t.read().count() == 21000
    assert t.read("k = 500").count() == _rows(spark, 0, 21000).where("k = 500").count()


def test_cluster_by_changes_keys_without_rewriting(lake, spark):
    t = lake.create_table("t", SCHEMA, cluster_by=["k"])
    t.append(_rows(spark, 0, 4000).repartition(2))
    t.optimize(target_file_size=32 * 1024)
    before = {f.path for f in t.snapshot.add_files}
    v = t.cluster_by(["d"])
    assert t.clustering_columns == ["d"] and {f.path for f in t.snapshot.add_files} == before
    assert t.history(1)[0]["operation"] == "CLUSTER BY"
    t.append(_rows(spark, 4000, 5000).repartition(1))
    res = t.optimize(target_file_size=32 * 1024)
    assert res.files_removed == 1   # files clustered by k are left to OPTIMIZE FULL
    live = t.snapshot.num_files
    full = t.optimize(target_file_size=32 * 1024, full=True)
    assert full.files_removed == live
    assert all(json.loads(f.tags[ZCUBE_ZORDER_BY]) == ["d"] for f in t.snapshot.add_files)
    # CLUSTER BY NONE: OPTIMIZE bin-packs again.
    t.cluster_by(None)
    assert t.clustering_columns == []
    assert v < t.version
    with pytest.raises(InvalidArgumentError, match="clustered table"):
        t.optimize(zorder_by=["k"])


def test_cluster_by_refusals_and_unclustered_table_made_clustered(lake, spark):
    parts = lake.create_table("p", SCHEMA, partition_by=["d"])
    with pytest.raises(InvalidArgumentError, match="either partitioned or clustered"):
        parts.cluster_by(["k"])
    plain = lake.create_table("plain", SCHEMA)
    with pytest.raises(InvalidArgumentError, match="not clustered"):
        plain.cluster_by(None)
    with pytest.raises(InvalidArgumentError, match="not clustered"):
        plain.optimize(full=True)
    plain.append(_rows(spark, 0, 100).repartition(1))
    v = plain.cluster_by(["k"])
    assert plain.clustering_columns == ["k"]
    kinds = sorted(next(iter(a)) for a in _log_lines(plain, v))
    assert kinds == ["commitInfo", "domainMetadata", "protocol"]  # no metaData: nothing else changed
    assert {"clustering", "domainMetadata"} <= set(plain.snapshot.protocol.writerFeatures or ())
    assert plain.optimize().files_removed == 1


def test_domains_survive_checkpoints_and_replay(lake, spark):
    t = lake.create_table("t", SCHEMA, cluster_by=["k"], properties={"delta.checkpointInterval": "3"})
    t.append(_rows(spark, 0, 10))
    t.cluster_by(["k", "d"])
    t.append(_rows(spark, 10, 20))     # version 3: a checkpoint
    assert (log_storage(t.path).exists("00000000000000000003.checkpoint.parquet"))
    snap = Snapshot.load(t.path)
    assert snap.domain("delta.clustering") == '{"clusteringColumns":[["k"],["d"]]}'
    assert lake.table("t").clustering_columns == ["k", "d"]
    t.cluster_by([])
    write_checkpoint(log_storage(t.path), Snapshot.load(t.path))
    assert Snapshot.load(t.path).domain("delta.clustering") == '{"clusteringColumns":[]}'


def test_static_and_dynamic_pruning_on_a_clustered_table(lake, spark):
    """Files clustered by (k, d) are skipped by a literal on k and by the keys a dimension's
    filter leaves at run time, with the answers of plain Spark."""
    t = lake.create_table("fact", SCHEMA, cluster_by=["k", "d"])
    for i in range(3):
        t.append(_rows(spark, i * 10000, (i + 1) * 10000).repartition(2))
    t.optimize(target_file_size=12 * 1024)
    dim = lake.create_table("dim", "k int, label string")
    dim.append(spark.sql("SELECT CAST(id AS INT) AS k, IF(id BETWEEN 100 AND 110, 'hot', 'cold') AS label "
                         "FROM range(0, 1000)"))
    static = lake.explain("SELECT count(*) FROM fact WHERE k BETWEEN 100 AND 110")
    [scan] = [r for r in static if r.label.startswith("fact")]
    assert scan.files_selected < scan.files_total / 2, static.text()
    query = "SELECT count(*) AS n, sum(f.id) AS s FROM fact f JOIN dim ON f.k = dim.k WHERE dim.label = 'hot'"
    previous = {k: spark.conf.get(k, None) for k in SMALL_TABLES}
    for k, v in SMALL_TABLES.items():
        spark.conf.set(k, v)
    try:
        explained = lake.explain(query)
        [fact] = [r for r in explained if r.label.startswith("fact")]
        assert fact.dynamic_filters and fact.files_selected < fact.files_total / 2, explained.text()
        expected = _rows(spark, 0, 30000).where("k BETWEEN 100 AND 110").selectExpr("count(*) AS n", "sum(id) AS s")
        assert lake.sql(query).collect() == expected.collect()
    finally:
        for k, v in previous.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def test_delta_rs_reads_and_appends_to_a_clustered_table(lake, spark):
    """delta-rs reads a clustered table (with its checkpoint's domain column). The delta-rs of
    this suite refuses to write one (its writer lacks the features); one that writes has its
    rows clustered by skiplake's next OPTIMIZE."""
    deltalake = pytest.importorskip("deltalake")
    t = lake.create_table("t", SCHEMA, cluster_by=["k"], properties={"delta.checkpointInterval": "2"})
    t.append(_rows(spark, 0, 500))
    t.optimize(target_file_size=4096)   # version 2: a checkpoint
    rs = deltalake.DeltaTable(t.path)
    assert rs.version() == t.version and len(rs.to_pyarrow_table()) == 500
    more = _rows(spark, 500, 600).toArrow()
    try:
        deltalake.write_deltalake(t.path, more, mode="append")
    except Exception as e:
        assert "ClusteredTable" in str(e) and Snapshot.load(t.path).version == t.version
        return
    t.refresh()
    assert t.clustering_columns == ["k"] and t.read().count() == 600
    assert t.optimize(target_file_size=4096, min_cube_size=1).files_removed >= 1
    assert deltalake.DeltaTable(t.path).to_pyarrow_table().num_rows == 600
