"""Spark reads of Hive-style partitioned Parquet tables through the catalog: GetPartitions gets
the partition-key part of the predicate and only those locations are read."""
from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

import skiplake
from skiplake.catalog.service import GlueCatalog
from skiplake.cli import main as cli_main

pytestmark = [pytest.mark.spark, pytest.mark.connect]   # catalog tables through Spark Connect too (full tier)


@pytest.fixture()
def hive_table(spark: SparkSession, tmp_path):
    location = str(tmp_path / "sales_data")
    df = spark.sql("""SELECT id, CAST(id * 1.5 AS DOUBLE) AS amount, element_at(array('US', 'UK', 'DE'), CAST(id % 3 AS INT) + 1) AS country,
                             CAST(2016 + id % 5 AS INT) AS year, DATE_ADD(DATE'2020-01-01', CAST(id % 4 AS INT)) AS day
                      FROM range(0, 600)""")
    df.write.partitionBy("country", "year", "day").parquet(location)
    db = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog = GlueCatalog(db)
    catalog.create_database(DatabaseInput={"Name": "sales"})
    catalog.create_table(DatabaseName="sales", TableInput={
        "Name": "sales_data", "TableType": "EXTERNAL_TABLE",
        "PartitionKeys": [{"Name": "country", "Type": "string"}, {"Name": "year", "Type": "int"},
                          {"Name": "day", "Type": "date"}],
        "StorageDescriptor": {"Location": location, "Columns": [{"Name": "id", "Type": "bigint"},
                                                                {"Name": "amount", "Type": "double"}]}},
        PartitionIndexes=[{"IndexName": "cy", "Keys": ["country", "year"]}])
    return catalog, db, df, location


def test_sync_then_read_only_matching_locations(spark, hive_table, capsys):
    catalog, db, df, location = hive_table
    assert cli_main(["catalog", "sync", "--db", db, "--database", "sales", "--table", "sales_data", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["found"] == doc["registered"] == 60 and doc["existing"] == 0
    assert cli_main(["catalog", "sync", "--db", db, "--database", "sales", "--table", "sales_data", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["existing"] == 60

    lake = skiplake.Lake(spark, catalog=catalog, database="sales")
    table = lake.table("sales_data")
    where = "country = 'US' AND year >= 2019 AND amount > 10"
    got = sorted(map(tuple, table.read(where).select("id", "country", "year", "day").collect()))
    expected = sorted(map(tuple, df.filter(where).select("id", "country", "year", "day").collect()))
    assert got == expected and got
    assert table.last_expression == "country = 'US' AND year >= 2019"   # data columns are not sent
    assert catalog.last_plan["index"] == "cy" and catalog.last_plan["keys_used"] == ["country", "year"]
    assert table.last_partitions == 8                                    # 2 years x 4 days, one country
    read = table.read(where)
    assert {f.split("/sales_data/")[1].split("/part-")[0].split("/")[0] for f in read.inputFiles()} == {"country=US"}


def test_partition_filtering_disabled_fetches_all(spark, hive_table):
    catalog, db, df, location = hive_table
    from skiplake.catalog.client import catalog_client
    from skiplake.catalog.sync import sync_partitions
    sync_partitions(catalog_client(catalog), "sales", "sales_data")
    spec = catalog.get_table(DatabaseName="sales", Name="sales_data")["Table"]
    table_input = {k: v for k, v in spec.items() if k not in ("DatabaseName", "CreateTime", "UpdateTime")}
    table_input["Parameters"] = {"partition_filtering.enabled": "false"}
    catalog.update_table(DatabaseName="sales", TableInput=table_input)
    table = skiplake.Lake(spark, catalog=catalog, database="sales").table("sales_data")
    where = "year = 2016 AND day = DATE'2020-01-02'"
    got = sorted(r.id for r in table.read(where).collect())
    assert got == sorted(r.id for r in df.filter(where).collect())
    assert table.last_expression is None and catalog.last_plan["index"] is None
    assert table.last_partitions == 3   # filtered here: 3 countries


def test_unknown_catalog_table(spark, hive_table):
    catalog, *_ = hive_table
    with pytest.raises(skiplake.errors.NotATableError, match="no such table"):
        skiplake.Lake(spark, catalog=catalog, database="sales").table("nope")
    with pytest.raises(skiplake.errors.InvalidArgumentError, match="no versions"):
        skiplake.Lake(spark, catalog=catalog, database="sales").table("sales_data", version=0)


def test_lake_sql_prunes_catalog_partitions(spark, hive_table):
    catalog, db, df, location = hive_table
    from skiplake.catalog.client import catalog_client
    from skiplake.catalog.sync import sync_partitions
    sync_partitions(catalog_client(catalog), "sales", "sales_data")
    lake = skiplake.Lake(spark, catalog=catalog, database="sales")
    df.createOrReplaceTempView("plain_sales")
    for query in ["SELECT count(*) AS n, sum(amount) AS s FROM sales_data WHERE country = 'UK' AND year = 2017",
                  "SELECT a.country, count(*) AS n FROM sales_data a JOIN sales_data b ON a.id = b.id "
                  "WHERE b.year = 2018 AND a.day = DATE'2020-01-03' GROUP BY a.country"]:
        got = sorted(map(tuple, lake.sql(query).collect()))
        assert got == sorted(map(tuple, spark.sql(query.replace("sales_data", "plain_sales")).collect())), query
    lake.sql("SELECT count(*) FROM sales_data WHERE country = 'UK' AND year = 2017").collect()
    assert catalog.last_plan["keys_used"] == ["country", "year"]


def test_string_literals_with_backslashes_and_quotes_reach_catalog_tables_intact(spark, tmp_path):
    """A pushed string literal comes back to Spark as SQL text (the catalog table's filter): a
    backslash or quote in it must be escaped the way Spark's parser reads it, or rows go missing."""
    location = str(tmp_path / "notes")
    rows = [(1, "a\\b", "x\\y"), (2, "it's", "x\\y"), (3, "a\\b", "plain"), (4, "C:\\temp\\n", "plain"),
            (5, "ab", "x\\y")]
    df = spark.createDataFrame(rows, "id long, note string, kind string")
    df.write.partitionBy("kind").parquet(location)
    catalog = GlueCatalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.create_database(DatabaseInput={"Name": "docs"})
    catalog.create_table(DatabaseName="docs", TableInput={
        "Name": "notes", "PartitionKeys": [{"Name": "kind", "Type": "string"}],
        "StorageDescriptor": {"Location": location, "Columns": [{"Name": "id", "Type": "bigint"},
                                                                {"Name": "note", "Type": "string"}]}})
    from skiplake.catalog.client import catalog_client
    from skiplake.catalog.sync import sync_partitions
    sync_partitions(catalog_client(catalog), "docs", "notes")
    lake = skiplake.Lake(spark, catalog=catalog, database="docs")
    spark.read.parquet(location).createOrReplaceTempView("plain_notes")
    for where in [r"note = 'a\\b'", r"note IN ('a\\b', 'it\'s')", r"kind = 'x\\y'", r"note = 'C:\\temp\\n'",
                  r"note LIKE 'it\'%'", r"kind = 'x\\y' AND note <> 'a\\b'"]:
        query = f"SELECT id FROM notes WHERE {where}"
        expected = sorted(r.id for r in spark.sql(query.replace("notes", "plain_notes")).collect())
        assert expected, where  # each condition matches some rows
        assert sorted(r.id for r in lake.sql(query).collect()) == expected, where


def test_null_partition_values_are_found_by_is_null(spark, tmp_path):
    """A NULL partition value is stored as "" in the catalog: `k IS NULL` must still read its rows
    (the test is not sent to the catalog, which would not match "")."""
    location = str(tmp_path / "t")
    df = spark.sql("SELECT id, CASE WHEN id % 3 = 0 THEN NULL ELSE concat('c', id % 3) END AS k FROM range(0, 30)")
    df.write.partitionBy("k").parquet(location)
    catalog = GlueCatalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.create_database(DatabaseInput={"Name": "db"})
    catalog.create_table(DatabaseName="db", TableInput={
        "Name": "t", "PartitionKeys": [{"Name": "k", "Type": "string"}],
        "StorageDescriptor": {"Location": location, "Columns": [{"Name": "id", "Type": "bigint"}]}})
    assert cli_main(["catalog", "sync", "--db", f"sqlite:///{tmp_path / 'catalog.db'}", "--database", "db",
                     "--table", "t"]) == 0
    table = skiplake.Lake(spark, catalog=catalog, database="db").table("t")
    for where in ("k IS NULL", "k IS NULL OR k = 'c1'", "NOT (k IS NULL)", "k IS NOT NULL"):
        got = sorted(r.id for r in table.read(where).collect())
        assert got == sorted(r.id for r in df.filter(where).collect()) and got, where
