"""boto3's own Glue client against the catalog's HTTP server (SQLite behind it)."""
from __future__ import annotations

import boto3
import pytest

from skiplake.catalog.server import CatalogServer
from skiplake.catalog.service import GlueCatalog
from testing_support.net import catalog_serve, retry_while_starting


@pytest.fixture()
def glue(db_url):
    server = CatalogServer(GlueCatalog(db_url)).start()
    client = boto3.client("glue", endpoint_url=server.endpoint, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
    yield client, server
    server.stop()


def test_boto3_round_trip(glue):
    client, server = glue
    client.create_database(DatabaseInput={"Name": "sales", "Description": "d"})
    assert client.get_database(Name="sales")["Database"]["Description"] == "d"
    keys = [{"Name": "country", "Type": "string"}, {"Name": "year", "Type": "int"}]
    client.create_table(DatabaseName="sales", TableInput={"Name": "t", "PartitionKeys": keys},
                        PartitionIndexes=[{"Keys": ["country", "year"], "IndexName": "cy"}])
    table = client.get_table(DatabaseName="sales", Name="t")["Table"]
    assert table["PartitionKeys"] == keys and table["CreateTime"].year >= 2024
    out = client.batch_create_partition(DatabaseName="sales", TableName="t", PartitionInputList=[
        {"Values": [c, str(y)], "StorageDescriptor": {"Location": f"/d/{c}/{y}"}}
        for c in ("US", "UK", "DE") for y in range(2015, 2021)] + [{"Values": ["US", "bad"]}])
    assert [e["ErrorDetail"]["ErrorCode"] for e in out["Errors"]] == ["InvalidInputException"]
    got = client.get_partitions(DatabaseName="sales", TableName="t", Expression="country = 'US' AND year >= 2019")
    assert sorted(p["Values"] for p in got["Partitions"]) == [["US", "2019"], ["US", "2020"]]
    assert server.catalog.last_plan["keys_used"] == ["country", "year"]
    pages = client.get_paginator("get_partitions").paginate(DatabaseName="sales", TableName="t",
                                                             PaginationConfig={"PageSize": 4})
    assert sum(len(p["Partitions"]) for p in pages) == 18
    indexes = client.get_partition_indexes(DatabaseName="sales", TableName="t")["PartitionIndexDescriptorList"]
    assert indexes[0]["IndexName"] == "cy" and indexes[0]["IndexStatus"] == "ACTIVE"
    with pytest.raises(client.exceptions.EntityNotFoundException):
        client.get_table(DatabaseName="sales", Name="nope")
    with pytest.raises(client.exceptions.InvalidInputException, match="not a partition key"):
        client.get_partitions(DatabaseName="sales", TableName="t", Expression="nope = 1")
    with pytest.raises(client.exceptions.ResourceNumberLimitExceededException):
        for i in range(3):
            client.create_partition_index(DatabaseName="sales", TableName="t",
                                          PartitionIndex={"Keys": ["year"], "IndexName": f"y{i}"})
    client.delete_table(DatabaseName="sales", Name="t")
    assert client.get_tables(DatabaseName="sales")["TableList"] == []


def test_cli_serves_the_catalog(tmp_path):
    with catalog_serve(f"sqlite:///{tmp_path / 'cli.db'}") as endpoint:
        client = boto3.client("glue", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")
        retry_while_starting(lambda: client.create_database(DatabaseInput={"Name": "d"}))
        assert [d["Name"] for d in client.get_databases()["DatabaseList"]] == ["d"]
