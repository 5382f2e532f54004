"""Catalog requests checked against Glue's API model (botocore's service model)."""
from __future__ import annotations

import pytest

from skiplake.catalog.validation import unchecked_patterns, validate
from skiplake.errors import ValidationError


def _fails(operation: str, params, match: str) -> None:
    with pytest.raises(ValidationError, match=match) as e:
        validate(operation, params)
    assert e.value.code == "ValidationException"


def test_valid_requests_pass():
    validate("CreateDatabase", {"DatabaseInput": {"Name": "sales", "Parameters": {"k": "v"}}})
    validate("BatchCreatePartition", {"DatabaseName": "db", "TableName": "t", "PartitionInputList": [
        {"Values": ["2024-01-01", "north"], "StorageDescriptor": {"Location": "s3://b/t/d=2024-01-01"}}]})
    validate("GetPartitions", {"DatabaseName": "db", "TableName": "t", "Expression": "d > '2024'",
                               "MaxResults": 100})
    validate("CreateDatabase", {"DatabaseInput": {"Name": "名前 with \U0001F600"}})  # supplementary planes


def test_the_issue_examples_are_refused_with_the_member_named():
    _fails("CreateDatabase", {"DatabaseInput": {"Name": 5}}, r"'databaseInput.name'.*must be a string")
    _fails("CreateDatabase", {"DatabaseInput": {"Name": "x" * 100_000}},
           r"'databaseInput.name'.*length less than or equal to 255")
    _fails("CreateDatabase", {"DatabaseInput": {"Name": "a\u0000b"}}, r"'databaseInput.name'.*regular expression")
    _fails("CreatePartition", {"DatabaseName": "db", "TableName": "t", "PartitionInput": {"Values": [None]}},
           r"'partitionInput.values.1.member'.*not be null")
    _fails("CreatePartition", {"DatabaseName": "db", "TableName": "t", "PartitionInput": {"Values": [["nested"]]}},
           r"'partitionInput.values.1.member'.*must be a string")


def test_required_unknown_enum_range_and_depth():
    _fails("CreateDatabase", {}, r"'databaseInput'.*not be null")
    _fails("CreateDatabase", {"DatabaseInput": {"Name": "a"}, "Bogus": 1}, r"'bogus'.*not part of the request")
    _fails("GetPartitions", {"DatabaseName": "db", "TableName": "t", "MaxResults": 0},
           r"'maxResults'.*value greater than or equal to 1")
    _fails("CreatePartitionIndex", {"DatabaseName": "db", "TableName": "t",
                                    "PartitionIndex": {"Keys": [], "IndexName": "i"}},
           r"'partitionIndex.keys'.*length greater than or equal to 1")
    _fails("CreateDatabase", {"DatabaseInput": {"Name": "a", "Parameters": {"k": True}}},
           r"'databaseInput.parameters.k'.*must be a string")
    deep: dict = {}
    node = deep
    for _ in range(200):
        node["Parameters"] = {}
        node = node["Parameters"]
    _fails("CreateDatabase", {"DatabaseInput": deep}, r"validation error")
    _fails("CreateDatabase", ["not", "an", "object"], r"must be a structure")


def test_unchecked_patterns_are_only_unicode_property_classes():
    assert all("\\p{" in p for p in unchecked_patterns())
