"""Converting Parquet directories written by Spark into tables in place (Table.convert,
Lake.convert, `skiplake convert`): only `_delta_log/` is written, the rows are Spark's own,
skipping and bucket pruning work, bucket joins need no shuffle, and every refusal leaves the
directory exactly as it was. delta-spark and delta-rs read the converted tables (one delta-spark
subprocess for the module, which also runs Delta's own CONVERT TO DELTA on copies to compare
partition values and stats file by file)."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import skiplake
from skiplake import BucketSpec
from skiplake.cli import main
from skiplake.errors import (
    ConversionBucketError,
    ConversionError,
    ConversionPartitionError,
    ConversionSchemaError,
    InvalidArgumentError,
)
from skiplake.layout.bucketing import bucket_ids
from skiplake.log.paths import from_log_path
from skiplake.log.snapshot import log_storage, read_commit
from skiplake.log.stats import MAX_CHAR
from skiplake.spark.convert.in_place import convert
from skiplake.table import Table
from testing_support.delta_spark import DeltaSpark, rows_as_strings
from tests.test_bucketing import assert_no_shuffle_below_join

pytestmark = pytest.mark.spark

INFERENCE = "spark.sql.sources.partitionColumnTypeInference.enabled"
NAMES = ["alpha", "", "ação", "名前", "o'neil", "tab\there", "new\nline", "x" * 40, None, "a=b/c%d"]
REGIONS = ["north", "south east", "a/b=c%d", "ação", None]


# ---------------------------------------------------------------- helpers


def tree(path: str | Path) -> dict[str, tuple[int, int]]:
    """Every file under `path` with its size and modification time: what "unchanged" means."""
    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            st = os.stat(full)
            out[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns)
    return out


@contextmanager
def inference(spark: SparkSession) -> Iterator[None]:
    """Spark's partition type inference on (its default; skiplake sessions turn it off)."""
    old = spark.conf.get(INFERENCE)
    spark.conf.set(INFERENCE, "true")
    try:
        yield
    finally:
        spark.conf.set(INFERENCE, old)


def types_of(df_or_table: Any) -> dict[str, str]:
    schema = df_or_table.schema
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def refused(spark: SparkSession, error: type, path: str | Path, **kwargs: Any) -> ConversionError:
    """Convert `path`, which must be refused with `error`, leaving it exactly as it was."""
    before = tree(path)
    with pytest.raises(error) as info:
        convert(spark, str(path), **kwargs)
    assert tree(path) == before and not os.path.exists(os.path.join(path, "_delta_log"))
    return info.value


def write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


# ---------------------------------------------------------------- the directories Spark writes


def plain_frame(spark: SparkSession, n: int = 60) -> DataFrame:
    rows = []
    for i in range(n):
        rows.append((
            i, None if i % 7 == 3 else i * 10_000_000_000,
            None if i % 9 == 4 else dt.datetime(2024, 1, 1 + i % 28, i % 24, (i * 7) % 60, (i * 13) % 60,
                                                (i * 104729) % 1_000_000),
            dt.date(2023, 12, 1) + dt.timedelta(days=i),
            None if i % 11 == 5 else Decimal(f"{i * 1.25 - 20:.2f}"),
            Decimal(f"{i}123456789012345.{i % 100000:05d}"),
            i / 3, NAMES[i % len(NAMES)], None if i % 5 == 2 else i % 2 == 0))
    schema = ("id int, big long, ts timestamp, d date, amount decimal(10,2), wide decimal(25,5), price double, "
              "s string, flag boolean")
    return spark.createDataFrame(rows, schema).repartitionByRange(3, "id")


def parted_frame(spark: SparkSession, n: int = 48) -> DataFrame:
    rows = [(i, dt.datetime(2024, 3, 1 + i % 20, i % 24, 0, 0, i * 1000), Decimal(f"{i}.{i % 100:02d}"),
             NAMES[i % len(NAMES)], dt.date(2024, 1, 1 + i % 3), REGIONS[(i // 3) % len(REGIONS)]) for i in range(n)]
    return spark.createDataFrame(rows, "id int, ts timestamp, amount decimal(7,2), s string, d date, region string")


# Each partition column's folder values and the type Spark infers for the column.
INFERRED = {
    "p_int": (["1", "-2", "007"], "int"),
    "p_long": (["1", "3000000000", "4"], "bigint"),
    "p_dec": (["1", "12345678901234567890", "5"], "decimal(20,0)"),
    "p_dbl": (["1.5", "2", "-0.25"], "double"),
    "p_date": (["2024-01-01", "2024-02-29", "2023-12-31"], "date"),
    "p_ts": (["2024-01-01 10:00:00", "2024-01-02", "2024-01-03 00:00:01.5"], "timestamp"),
    "p_str": (["x", "1", "2024-01-01"], "string"),
    "p_null": ([None, None, None], "string"),
}


@dataclass
class Dirs:
    root: Path
    plain: str          # unpartitioned, INT96 timestamps
    parted: str         # partitioned by d, region (odd characters, NULL)
    inferred: str       # one partition column per kind of inferred type
    pristine: Path      # untouched copies of plain and parted (for Delta's own CONVERT TO DELTA)


@pytest.fixture(scope="module")
def dirs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Dirs:
    root = tmp_path_factory.mktemp("convert")
    d = Dirs(root, str(root / "plain"), str(root / "parted"), str(root / "inferred"), root / "pristine")
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")  # Spark's own default
    try:
        plain_frame(spark).write.parquet(d.plain)
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    parted_frame(spark).repartition(2).write.partitionBy("d", "region").parquet(d.parted)
    rows = [tuple(values[i] for values, _ in INFERRED.values()) + (i,) for i in range(3)]
    names = list(INFERRED)
    spark.createDataFrame(rows, ", ".join(f"{c} string" for c in names) + ", x int") \
        .write.partitionBy(*names).parquet(d.inferred)
    for p in (d.plain, d.parted):
        shutil.copytree(p, d.pristine / os.path.basename(p))
    return d


@pytest.fixture(scope="module")
def plain(spark: SparkSession, dirs: Dirs) -> Table:
    return Table.convert(spark, dirs.plain)


@pytest.fixture(scope="module")
def parted(spark: SparkSession, dirs: Dirs) -> Table:
    return Table.convert(spark, dirs.parted, partition_by=["d", "region"])


# ================================================================ 1. plain and partitioned directories


def test_unpartitioned_int96_directory_converts_with_sparks_rows_and_schema(spark: SparkSession, dirs: Dirs,
                                                                            plain: Table) -> None:
    before = {k: v for k, v in tree(dirs.pristine / "plain").items()}
    after = {k: v for k, v in tree(dirs.plain).items() if not k.startswith("_delta_log")}
    assert after.keys() == before.keys() and all(after[k][0] == before[k][0] for k in after)  # no byte rewritten
    assert sorted(os.listdir(os.path.join(dirs.plain, "_delta_log")))[0] == "00000000000000000000.json"
    theirs = spark.read.parquet(dirs.plain)
    assert types_of(plain) == types_of(theirs) and plain.partition_by == []
    assert rows_as_strings(plain.read()) == rows_as_strings(theirs)
    snap = plain.snapshot
    assert snap.num_files == 3 and len([f for f in os.listdir(dirs.plain) if f.endswith(".parquet")]) == 3
    for f in snap.add_files:
        stats = json.loads(f.stats or "{}")
        # INT96 footers carry no usable min/max: no stats for ts, never wrong ones; its NULLs are counted.
        assert "ts" not in stats["minValues"] and "ts" in stats["nullCount"]
        assert {"id", "big", "d", "amount", "price", "s"} <= set(stats["minValues"])
        assert len(stats["maxValues"]["s"]) <= 33
    [info] = plain.history()
    assert info["operation"] == "CONVERT" and info["operationParameters"] == {
        "numFiles": "3", "partitionedBy": "[]", "collectStats": "true", "sourceFormat": "parquet"}
    assert info["operationMetrics"] == {"numConvertedFiles": "3"}


@pytest.mark.parametrize("where", [
    "id BETWEEN 25 AND 30 OR amount > 40", "d = DATE'2024-01-15' OR s = 'ação'",
    "ts > TIMESTAMP'2024-01-20 00:00:00' AND big IS NULL", "wide < 3123456789012345.5",
])
def test_skipping_on_the_converted_table_returns_the_same_rows(spark: SparkSession, dirs: Dirs, plain: Table,
                                                               where: str) -> None:
    report = plain.scan(where).report
    if where.startswith("id"):
        assert report.files_selected < report.files_total, report
    assert rows_as_strings(plain.read(where)) == rows_as_strings(spark.read.parquet(dirs.plain).where(where))


def test_partitioned_directory_rows_types_and_pruning(spark: SparkSession, dirs: Dirs, parted: Table) -> None:
    assert parted.partition_by == ["d", "region"]
    with inference(spark):
        theirs = spark.read.parquet(dirs.parted)
        assert types_of(parted) == types_of(theirs)
        assert rows_as_strings(parted.read()) == rows_as_strings(theirs)
    values = {tuple(sorted(f.partitionValues.items(), key=str)) for f in parted.snapshot.add_files}
    assert (("d", "2024-01-02"), ("region", "a/b=c%d")) in values and (("d", "2024-01-01"), ("region", None)) in values
    for f in parted.snapshot.add_files:   # paths name the folders as Spark wrote them
        assert os.path.exists(os.path.join(dirs.parted, from_log_path(f.path)))
    for where in ["region = 'a/b=c%d'", "region IS NULL AND d = DATE'2024-01-03'", "id > 40"]:
        report = parted.scan(where).report
        assert report.files_selected < report.files_total
        with inference(spark):
            assert rows_as_strings(parted.read(where)) == rows_as_strings(spark.read.parquet(dirs.parted).where(where))


def test_partition_types_are_inferred_as_spark_infers_them(spark: SparkSession, dirs: Dirs, tmp_path: Path) -> None:
    t = Table.convert(spark, dirs.inferred, partition_by=list(INFERRED))
    with inference(spark):
        theirs = spark.read.parquet(dirs.inferred)
        # Spark 4 leaves a column of NULL folders only as void (NullType), which a table cannot
        # hold: it becomes a string column, as Spark 3 made it.
        assert types_of(t) == {**types_of(theirs), "p_null": "string"} and types_of(theirs)["p_null"] == "void"
        assert types_of(t) == {"x": "int", **{c: ty for c, (_, ty) in INFERRED.items()}}
        assert rows_as_strings(t.read()) == rows_as_strings(theirs)
    # The log holds each value cast to its type and spelled as Delta spells it, not as the folder does.
    stored = {c: sorted({f.partitionValues[c] for f in t.snapshot.add_files}) for c in ("p_int", "p_dbl", "p_ts")}
    assert stored == {"p_int": ["-2", "1", "7"], "p_dbl": ["-0.25", "1.5", "2.0"],
                      "p_ts": ["2024-01-01 10:00:00.000000", "2024-01-02 00:00:00.000000", "2024-01-03 00:00:01.500000"]}
    # A DDL string types them instead: leading zeros stay a string.
    copy = tmp_path / "typed"
    shutil.copytree(dirs.pristine / "parted", copy)
    typed = Table.convert(spark, str(copy), partition_by="d STRING, region STRING")
    assert types_of(typed)["d"] == "string"
    assert typed.read("d = '2024-01-02'").count() == 16


def test_appends_and_dml_after_conversion(spark: SparkSession, dirs: Dirs, tmp_path: Path) -> None:
    path = tmp_path / "parted"
    shutil.copytree(dirs.pristine / "parted", path)
    t = Table.convert(spark, str(path), partition_by=["d", "region"],
                      properties={"delta.dataSkippingStatsColumns": "id,amount"})
    new = parted_frame(spark, 60).where("id >= 48")
    t.append(new.select(*t.schema.names))
    # The table's stats columns hold for the converted files and for skiplake's own writes alike.
    assert {tuple(json.loads(f.stats or "")["minValues"]) for f in t.refresh().snapshot.add_files} == {("id", "amount")}
    assert len(t.snapshot.add_files) > len(Table.open(spark, str(path), version=0).snapshot.add_files)
    t.delete("region = 'north' OR id % 5 = 0")
    expected = parted_frame(spark, 60).where("NOT (region <=> 'north' OR id % 5 = 0)")
    assert rows_as_strings(t.read()) == rows_as_strings(expected.select(*t.schema.names))
    assert [h["operation"] for h in t.history()] == ["DELETE", "WRITE", "CONVERT"]
    assert rows_as_strings(t.read(version=0)) == rows_as_strings(parted_frame(spark).select(*t.schema.names))


def test_a_delta_table_is_left_as_it_is(spark: SparkSession, plain: Table, dirs: Dirs) -> None:
    before = tree(dirs.plain)
    done = convert(spark, dirs.plain, partition_by=["whatever"])
    assert not done.report.converted and done.report.version == plain.version
    assert tree(dirs.plain) == before
    assert Table.convert(spark, dirs.plain).version == 0


def test_footers_read_by_a_spark_job_give_the_same_table(spark: SparkSession, dirs: Dirs, parted: Table,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "parted"
    shutil.copytree(dirs.pristine / "parted", path)
    monkeypatch.setattr("skiplake.spark.convert.in_place.CHECKPOINT_FILES", 10)   # a "large" table: checkpointed
    done = convert(spark, str(path), partition_by=["d", "region"], footer_job_threshold=0)
    assert done.report.footers_read_by == "spark job"
    by_job = {f.path: (f.partitionValues, f.stats, f.size) for f in done.snapshot.add_files}
    by_driver = {f.path: (f.partitionValues, f.stats, f.size) for f in parted.snapshot.add_files}
    assert by_job == by_driver and done.snapshot.schema == parted.snapshot.schema
    assert (path / "_delta_log" / "00000000000000000000.checkpoint.parquet").exists()
    reloaded = Table.open(spark, str(path)).snapshot
    assert {f.path: (f.partitionValues, f.stats, f.size) for f in reloaded.add_files} == by_job


@pytest.mark.s3
def test_convert_on_an_object_store(spark: SparkSession, s3_server: Any, dirs: Dirs, parted: Table) -> None:
    """A directory on S3 (the files Spark wrote, markers and checksums included) converts in place
    into the local directory's table, its footers read by the Spark job's pyarrow S3 file system
    with the driver's credentials for the bucket, and by the driver's ranged GETs alike."""
    from skiplake.log.paths import absolute_path
    from skiplake.log.stats import many_file_stats
    bucket = s3_server.new_bucket()
    source = dirs.pristine / "parted"
    client = s3_server.client()
    for rel in tree(source):
        client.upload_file(str(source / rel), bucket, f"parted/{rel}")
    keys = set(s3_server.keys(bucket))
    path = f"s3://{bucket}/parted"
    done = convert(spark, path, partition_by=["d", "region"], footer_job_threshold=0,
                   storage_options=s3_server.options)
    assert done.report.footers_read_by == "spark job" and done.report.skipped_files == parted_skipped(dirs)
    # The same table as the local directory's (rows read from S3 are the object-store tests' matter).
    t = Table.open(spark, path)
    assert t.log_schema == parted.log_schema
    files = t.snapshot.add_files
    by_driver = many_file_stats([absolute_path(t.path, f.path) for f in files], t.log_schema, t.partition_by)
    assert by_driver == [f.stats for f in files]
    assert {f.path: (f.stats, f.partitionValues, f.size) for f in files} == {
        f.path: (f.stats, f.partitionValues, f.size) for f in parted.snapshot.add_files}
    written = set(s3_server.keys(bucket)) - keys
    assert written and all(k.startswith("parted/_delta_log/") for k in written)


def parted_skipped(dirs: Dirs) -> int:
    """The files of the partitioned directory Spark skips (its _SUCCESS and .crc files)."""
    return len([r for r in tree(dirs.pristine / "parted") if any(p.startswith(("_", ".")) for p in r.split("/"))])


def test_the_executor_function_needs_no_skiplake(tmp_path: Path, dirs: Dirs) -> None:
    """The footer job's function, unpickled where skiplake cannot be imported, still reads footers."""
    from pyspark import cloudpickle

    from skiplake.spark.convert.footer_jobs import footer_reader, parse_footer
    data = next(p for p in Path(dirs.pristine / "plain").iterdir() if p.suffix == ".parquet")
    (tmp_path / "fn.pkl").write_bytes(cloudpickle.dumps(footer_reader({})))
    code = (
        "import pickle, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'skiplake': raise ImportError('no skiplake here')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"fn = pickle.loads(open({str(tmp_path / 'fn.pkl')!r}, 'rb').read())\n"
        f"out = list(fn(iter([(0, {str(data)!r}), (1, {str(tmp_path / 'fn.pkl')!r})])))\n"
        "sys.stdout.buffer.write(pickle.dumps(out))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env={
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    import pickle
    (i0, footer, error0), (i1, none, error1) = pickle.loads(out.stdout)
    assert error0 is None and none is None and "not a Parquet file" in (error1 or "")
    assert parse_footer(footer).num_rows == pq.read_metadata(data).num_rows


# ================================================================ 2. Spark bucketBy tables


BUCKET_SCHEMA = "k int, kl long, ks string, kd date, kdec decimal(10,2), kts timestamp, v long, p string"


def bucket_rows(n: int = 120) -> list[tuple]:
    return [(None if i % 17 == 3 else i % 40, (i % 30) * 3_000_000_019, NAMES[i % len(NAMES)],
             dt.date(2024, 1, 1) + dt.timedelta(days=i % 25), Decimal(f"{(i % 33) * 1.5 - 7:.2f}"),
             dt.datetime(2024, 5, 1, i % 24, i % 60, 0, (i * 7919) % 1_000_000), i, "ab"[i % 2]) for i in range(n)]


def bucket_frame(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(bucket_rows(), BUCKET_SCHEMA).repartition(3)


# name: (bucket columns, partition columns, sort columns), 4 buckets each.
BUCKETED = {
    "bk_int": (["k"], ["p"], ["v"]),
    "bk_str": (["ks"], [], []),
    "bk_date": (["kd"], [], []),
    "bk_two": (["ks", "k"], [], []),
    "bk_multi": (["kdec", "kts"], [], []),
}


@pytest.fixture(scope="module")
def bucketed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[skiplake.Lake]:
    """Spark bucketBy tables written under a lake's root by saveAsTable (three write tasks: several
    files per bucket), converted by name with the spec from Spark's catalog."""
    lake = skiplake.Lake(spark, str(tmp_path_factory.mktemp("bucketed") / "lake"))
    df = bucket_frame(spark)
    right = spark.range(200).selectExpr("CAST(id % 50 AS INT) AS k", "id AS w").repartition(2)
    tables = {**BUCKETED, "bk_right": (["k"], [], [])}
    for name, (cols, parts, sort) in tables.items():
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        writer = (right if name == "bk_right" else df).write.bucketBy(4, *cols)
        writer = writer.sortBy(*sort) if sort else writer
        writer = writer.partitionBy(*parts) if parts else writer
        writer.option("path", lake.path_of(name)).saveAsTable(name)
        lake.convert(name, catalog_table=name)
    yield lake
    for name in tables:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def literal(value: Any, type_: str) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\t", "\\t") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value}'"
    return str(value)


def test_spark_bucket_ids_are_skiplakes_on_real_files(spark: SparkSession, bucketed: skiplake.Lake) -> None:
    """Every row of every file Spark's bucketBy wrote hashes, by skiplake's own NumPy Murmur3, to
    the bucket in the file's name; and the conversion checked the same with Spark's hash."""
    for name, (cols, parts, sort) in BUCKETED.items():
        t = bucketed.table(name)
        assert isinstance(t, Table)
        assert t.bucket_spec == BucketSpec(4, cols, sort) and t.partition_by == parts
        types = [t.log_schema.field(c).type for c in cols]
        files = t.snapshot.add_files
        per_bucket: dict[tuple, int] = {}
        for f in files:
            data = pq.read_table(os.path.join(t.path, from_log_path(f.path)), columns=cols)
            assert f.tags is not None
            want = int(f.tags["BUCKET_ID"])
            assert set(bucket_ids([data.column(c) for c in cols], types, 4).tolist()) <= {want}, (name, f.path)
            key = (tuple(sorted(f.partitionValues.items())), want)
            per_bucket[key] = per_bucket.get(key, 0) + 1
        assert max(per_bucket.values()) >= 2, name  # several files per bucket (one per write task)
        assert t.history()[0]["operationParameters"]["catalogTable"] == name


def test_bucket_pruning_on_converted_tables(spark: SparkSession, bucketed: skiplake.Lake) -> None:
    names = [c.split()[0] for c in BUCKET_SCHEMA.split(", ")]
    rows = bucket_rows()
    sample = [dict(zip(names, rows[i])) for i in (0, 3, 4, 5, 6, 9)]  # NULL k, quotes, a tab, a newline
    for name, (cols, _parts, _sort) in BUCKETED.items():
        t = bucketed.table(name)
        assert isinstance(t, Table)
        wheres = []
        for row in sample:
            where = " AND ".join(
                f"{c} IS NULL" if row[c] is None else f"{c} = {literal(row[c], t.log_schema.field(c).type)}"
                for c in cols)
            report = t.scan(where).report
            assert report.buckets_selected == 1 and report.buckets_total == 4, (name, where)
            assert "SelectedBucketsCount: 1 out of 4" in report.text()
            wheres.append(f"({where})")
        # The rows of the buckets selected are Spark's over every file (OR unites the buckets).
        where = " OR ".join(wheres)
        assert rows_as_strings(t.read(where)) == rows_as_strings(
            spark.read.parquet(t.path).where(where).select(*t.schema.names)), name
    # Spark's own scan of the converted table prunes the buckets too.
    t = bucketed.table("bk_date")
    spark.conf.set("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false")
    try:
        plan = t.read("kd = DATE'2024-01-05'")._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.sources.bucketing.autoBucketedScan.enabled")
    assert "SelectedBucketsCount: 1 out of 4" in plan


def test_bucket_join_of_converted_tables_has_no_exchange(spark: SparkSession, bucketed: skiplake.Lake) -> None:
    expected = rows_as_strings(spark.table("bk_int").join(spark.table("bk_right"), "k"))
    report = bucketed.explain_join("bk_int", "bk_right", "k")
    assert report.bucketed, report.reason
    df = bucketed.bucket_join("bk_int", "bk_right", "k")
    assert rows_as_strings(df) == expected and len(expected) > 100
    df.collect()
    assert_no_shuffle_below_join(df)
    query = "SELECT a.k, a.v, b.w FROM bk_int a JOIN bk_right b ON a.k = b.k WHERE a.p = 'a'"
    [join] = bucketed.explain(query).joins
    assert join.bucketed, join.reason
    assert rows_as_strings(bucketed.sql(query)) == rows_as_strings(spark.sql(query))
    # An append through skiplake's bucketed writer keeps the table joinable without a shuffle.
    t = bucketed.table("bk_right")
    assert isinstance(t, Table)
    t.append(spark.range(7).selectExpr("CAST(id AS INT) AS k", "id + 1000 AS w"))
    df = bucketed.bucket_join("bk_int", "bk_right", "k")
    assert rows_as_strings(df) == rows_as_strings(bucketed.table("bk_int").read().join(t.read(), "k"))
    df.collect()
    assert_no_shuffle_below_join(df)


# ================================================================ 3. refusals


def _bucket_dir(spark: SparkSession, bucketed: skiplake.Lake, tmp_path: Path) -> Path:
    """A copy of bk_date's files (4 buckets by kd) without its log."""
    path = tmp_path / "bk"
    shutil.copytree(bucketed.path_of("bk_date"), path, ignore=shutil.ignore_patterns("_delta_log"))
    return path


def test_bucket_refusals(spark: SparkSession, bucketed: skiplake.Lake, tmp_path: Path) -> None:
    path = _bucket_dir(spark, bucketed, tmp_path)
    # Ids in the names past the count given.
    e = refused(spark, ConversionBucketError, path, bucket_by=BucketSpec(2, ["kd"]))
    assert e.files and all("bucket 2" in f or "bucket 3" in f for f in e.files)
    # Rows hashed by other columns than the files were bucketed by: every row is checked.
    e = refused(spark, ConversionBucketError, path, bucket_by=BucketSpec(4, ["v"]))
    assert "rows" in str(e) and e.files
    # Without the row check, the names are taken on trust.
    done = convert(spark, str(tmp_path / "bk"), bucket_by=BucketSpec(4, ["kd"]), verify_buckets=False)
    assert done.report.buckets_checked == "names"
    shutil.rmtree(path / "_delta_log")
    with pytest.raises(InvalidArgumentError, match="not in the schema"):
        convert(spark, str(path), bucket_by=BucketSpec(4, ["nope"]))
    assert not (path / "_delta_log").exists()
    # A file bucketBy did not write (no id in its name): refused from the names, before any footer is read.
    shutil.copy(next(path.glob("*.parquet")), path / "part-00000-extra.snappy.parquet")
    e = refused(spark, ConversionBucketError, path, bucket_by=BucketSpec(4, ["kd"]))
    assert e.files == ["part-00000-extra.snappy.parquet (no bucket id in its name)"]


def test_schema_refusals_and_merging(spark: SparkSession, tmp_path: Path) -> None:
    base = pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]})
    write_parquet(tmp_path / "m" / "part-0.parquet", base)
    write_parquet(tmp_path / "m" / "part-1.parquet", base.append_column("extra", pa.array([1.5, None])))
    e = refused(spark, ConversionSchemaError, tmp_path / "m")
    assert e.files == ["part-1.parquet"] and "with extra" in str(e) and "merge_schema=True" in str(e)
    t = Table.convert(spark, str(tmp_path / "m"), merge_schema=True)
    assert t.schema.names == ["id", "s", "extra"]
    assert rows_as_strings(t.read()) == rows_as_strings(
        spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "m")))
    assert json.loads(t.snapshot.add_files[0].stats or "")["nullCount"]["extra"] == 2
    write_parquet(tmp_path / "c" / "part-0.parquet", base)
    write_parquet(tmp_path / "c" / "part-1.parquet", base.set_column(0, "id", pa.array([3, 4], pa.int32())))
    e = refused(spark, ConversionSchemaError, tmp_path / "c", merge_schema=True)
    assert "'id' is long in one file and integer" in str(e) and sorted(e.files) == ["part-0.parquet", "part-1.parquet"]


def test_column_mapping_by_name_at_conversion(spark: SparkSession, tmp_path: Path) -> None:
    write_parquet(tmp_path / "m" / "part-0.parquet", pa.table({"id": [1, 2], "s": ["a", "b"]}))
    t = Table.convert(spark, str(tmp_path / "m"), properties={"delta.columnMapping.mode": "name"})
    assert t.snapshot.column_mapping == "name"
    t.rename_column("s", "label")
    assert sorted(tuple(r) for r in t.read().collect()) == [(1, "a"), (2, "b")] and t.schema.names == ["id", "label"]
    write_parquet(tmp_path / "i" / "part-0.parquet", pa.table({"id": [1]}))
    with pytest.raises(InvalidArgumentError, match="'id'"):
        convert(spark, str(tmp_path / "i"), properties={"delta.columnMapping.mode": "id"})
    assert not (tmp_path / "i" / "_delta_log").exists()


def test_partition_refusals(spark: SparkSession, dirs: Dirs, tmp_path: Path) -> None:
    path = tmp_path / "parted"
    shutil.copytree(dirs.pristine / "parted", path)
    e = refused(spark, ConversionPartitionError, path)  # folders, but no partition columns given
    assert "partition_by=['d', 'region']" in str(e)
    e = refused(spark, ConversionPartitionError, path, partition_by=["region", "d"])
    assert e.files and e.files[0].startswith("d=2024-01-01/region=")
    refused(spark, ConversionPartitionError, path, partition_by=["d"])
    e = refused(spark, ConversionPartitionError, path, partition_by="d DATE, region INT")
    assert "region=north" in e.files and "region INT" not in str(e) and "region integer" in str(e)
    refused(spark, ConversionPartitionError, path, partition_by="d DATE, region BINARY")
    small = pa.table({"x": [1]})
    write_parquet(tmp_path / "nested" / "d=1" / "part-0.parquet", small)
    write_parquet(tmp_path / "nested" / "d=2" / "extra" / "part-1.parquet", small)
    e = refused(spark, ConversionPartitionError, tmp_path / "nested", partition_by=["d"])
    assert e.files == ["d=2/extra"]
    write_parquet(tmp_path / "mixed" / "part-0.parquet", small)
    write_parquet(tmp_path / "mixed" / "d=1" / "part-1.parquet", small)
    e = refused(spark, ConversionPartitionError, tmp_path / "mixed", partition_by=["d"])
    assert e.files == ["(the directory itself)"]


def test_directory_refusals(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "no files at all" in str(refused(spark, ConversionError, tmp_path / "empty"))
    (tmp_path / "markers").mkdir()
    (tmp_path / "markers" / "_SUCCESS").write_bytes(b"")
    e = refused(spark, ConversionError, tmp_path / "markers")
    assert "only files Spark ignores" in str(e) and e.files == ["_SUCCESS"]
    write_parquet(tmp_path / "junk" / "part-0.parquet", pa.table({"x": [1]}))
    (tmp_path / "junk" / "notes.txt").write_text("not parquet")
    e = refused(spark, ConversionError, tmp_path / "junk")
    assert len(e.files) == 1 and e.files[0].startswith("notes.txt (")
    with pytest.raises(ConversionError, match="no such directory"):
        convert(spark, str(tmp_path / "missing"))
    with pytest.raises(ConversionError, match="a file, not a directory"):
        convert(spark, str(tmp_path / "junk" / "notes.txt"))
    with pytest.raises(InvalidArgumentError, match="neither column names nor a DDL"):
        convert(spark, str(tmp_path / "junk"), partition_by="d DATE,, region ???")
    assert not (tmp_path / "missing").exists()


# ================================================================ 4. the command line


def test_cli_convert(spark: SparkSession, dirs: Dirs, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "parted"
    shutil.copytree(dirs.pristine / "parted", path)
    assert main(["convert", str(path)]) == 2
    assert "no partition columns were given" in capsys.readouterr().err
    assert main(["convert", str(path), "--partition-by", "d DATE, region STRING", "--property",
                 "delta.dataSkippingNumIndexedCols=1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["converted"] and report["files"] == len(Table.open(spark, str(path)).snapshot.add_files)
    assert report["partition_columns"] == ["d date", "region string"] and report["rows"] == 48
    stats = json.loads(Table.open(spark, str(path)).snapshot.add_files[0].stats or "")
    assert list(stats["minValues"]) == ["id"]   # dataSkippingNumIndexedCols=1
    assert main(["convert", str(path)]) == 0
    assert "already holds a Delta table" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "nowhere")]) == 2
    assert main(["convert", str(path), "--num-buckets", "4"]) == 2
    assert "--bucket-by" in capsys.readouterr().err


# ================================================================ 5. other readers


def test_delta_rs_reads_converted_tables(spark: SparkSession, dirs: Dirs, plain: Table, parted: Table,
                                        bucketed: skiplake.Lake) -> None:
    deltalake = pytest.importorskip("deltalake")
    from tests.test_deltalake_interop import normalize
    inferred = Table.convert(spark, dirs.inferred, partition_by=list(INFERRED))   # folders like p_int=007
    for t in (plain, parted, inferred, bucketed.table("bk_int")):
        assert isinstance(t, Table)
        cols = t.schema.names
        theirs = deltalake.DeltaTable(t.path).to_pyarrow_table().to_pylist()
        ours = t.read().collect()
        assert sorted((tuple(normalize(r[c]) for c in cols) for r in theirs), key=repr) == \
            sorted((tuple(normalize(r[c]) for c in cols) for r in ours), key=repr)


def _adds_of(path: str) -> dict[str, tuple[dict, dict]]:
    """{file path: (partition values, stats)} of version 0's commit."""
    out = {}
    for a in read_commit(log_storage(path), 0):
        if type(a).__name__ == "AddFile":
            out[from_log_path(a.path)] = (a.partitionValues, json.loads(a.stats or "{}"))  # type: ignore[union-attr]
    return out


@pytest.mark.slow
@pytest.mark.delta_spark
def test_delta_spark_reads_converted_tables_and_agrees_with_its_own_convert(
        spark: SparkSession, delta_spark: DeltaSpark, dirs: Dirs, plain: Table, parted: Table,
        bucketed: skiplake.Lake) -> None:
    copies = {name: str(dirs.pristine / name) for name in ("plain", "parted")}
    bk = bucketed.table("bk_int")
    assert isinstance(bk, Table)
    ours = {"plain": plain, "parted": parted, "bk_int": bk}
    jobs = [{"id": f"read_{n}", "op": "read", "path": t.path} for n, t in ours.items()]
    jobs += [{"id": "convert_plain", "op": "sql", "sql": f"CONVERT TO DELTA parquet.`{copies['plain']}`"},
             {"id": "convert_parted", "op": "sql",
              "sql": f"CONVERT TO DELTA parquet.`{copies['parted']}` PARTITIONED BY (d DATE, region STRING)"}]
    result = delta_spark.run_batch(jobs)
    for name, t in ours.items():
        job = result["jobs"][f"read_{name}"]
        assert job["ok"], job.get("error")
        assert [tuple(r) for r in job["rows"]] == rows_as_strings(t.read(), job["columns"]), name
    for name, t in (("plain", plain), ("parted", parted)):
        assert result["jobs"][f"convert_{name}"]["ok"], result["jobs"][f"convert_{name}"].get("error")
        theirs, mine = _adds_of(copies[name]), _adds_of(t.path)
        assert theirs.keys() == mine.keys()
        for path, (values, stats) in mine.items():
            their_values, their_stats = theirs[path]
            assert values == their_values, path
            assert stats["numRecords"] == their_stats["numRecords"]
            for kind in ("minValues", "maxValues", "nullCount"):
                for column, value in stats[kind].items():
                    theirs_ = their_stats[kind][column]
                    if kind == "maxValues" and isinstance(value, str) and value.endswith(MAX_CHAR):
                        # A cut string's max: both append a character above the rest (Delta picks
                        # U+007F when it can, skiplake always U+10FFFF, a looser bound).
                        value, theirs_ = value[:-1], theirs_[:-1]
                    assert theirs_ == value, (path, kind, column)


def test_a_footer_job_threshold_that_is_not_a_count_is_refused(spark: SparkSession) -> None:
    from skiplake.spark.convert.footer_jobs import THRESHOLD_CONF, job_threshold
    spark.conf.set(THRESHOLD_CONF, "many")
    try:
        with pytest.raises(InvalidArgumentError, match=THRESHOLD_CONF):
            job_threshold(spark)
    finally:
        spark.conf.unset(THRESHOLD_CONF)
    assert job_threshold(spark, 7) == 7
