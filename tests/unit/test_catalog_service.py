"""The catalog's Glue operations in-process, on SQLite: objects, limits, GetPartitions with and
without partition indexes (same results always), backfill states and index rules."""
from __future__ import annotations

import itertools
import random

import pytest

from skiplake.catalog.service import GlueCatalog
from skiplake.errors import AlreadyExistsError, EntityNotFoundError, InvalidInputError, ResourceNumberLimitExceededError

KEYS = [{"Name": "country", "Type": "string"}, {"Name": "category", "Type": "varchar(20)"},
        {"Name": "year", "Type": "int"}, {"Name": "month", "Type": "int"}, {"Name": "creationDate", "Type": "date"}]
COUNTRIES = ["US", "UK", "DE", "BR"]
CATEGORIES = ["Shoes", "Books", "Toys"]


@pytest.fixture()
def catalog(db_url) -> GlueCatalog:
    c = GlueCatalog(db_url)
    c.create_database(DatabaseInput={"Name": "sales"})
    c.create_table(DatabaseName="sales", TableInput={
        "Name": "sales_data", "PartitionKeys": KEYS, "TableType": "EXTERNAL_TABLE",
        "StorageDescriptor": {"Columns": [{"Name": "amount", "Type": "double"}], "Location": "/data/sales"}})
    return c


def fill(c: GlueCatalog, n_per: int = 1) -> list[list[str]]:
    rows = []
    for country, cat, year, month in itertools.product(COUNTRIES, CATEGORIES, range(2016, 2021), range(1, 13, 3)):
        for d in range(n_per):
            rows.append([country, cat, str(year), str(month), f"{year}-{month:02d}-{d + 10:02d}"])
    for i in range(0, len(rows), 100):
        out = c.batch_create_partition(DatabaseName="sales", TableName="sales_data", PartitionInputList=[
            {"Values": v, "StorageDescriptor": {"Location": "/data/sales/" + "/".join(v),
                                                "Columns": [{"Name": "amount", "Type": "double"}]}}
            for v in rows[i:i + 100]])
        assert "Errors" not in out
    return rows


def all_partitions(c: GlueCatalog, expression: str | None, page: int = 1000) -> list[list[str]]:
    out, token = [], None
    while True:
        kw = {"Expression": expression} if expression else {}
        r = c.get_partitions(DatabaseName="sales", TableName="sales_data", MaxResults=page,
                             **({"NextToken": token} if token else {}), **kw)
        out += [p["Values"] for p in r["Partitions"]]
        token = r.get("NextToken")
        if not token:
            return sorted(out)


SEED = [
    ("country = 'US'", ["country"]),
    ("country = 'US' and category = 'Shoes'", ["country", "category"]),
    ("category = 'Shoes'", []),
    ("country = 'US' and category = 'Shoes' and year > '2018'", ["country", "category", "year"]),
    ("country = 'US' and category = 'Shoes' and year > '2018' and month = 2", ["country", "category", "year"]),
    ("country = 'US' AND category = 'Shoes' OR year > '2018'", []),
    ("country = 'US' AND category = 'Shoes' AND (year = '2017' OR year = '2018')", ["country", "category"]),
    ("country in ('US', 'UK') AND category = 'Shoes'", []),
    ("country = 'US' AND category in ('Shoes', 'Books')", ["country"]),
    ("country = 'US' AND category in ('Shoes', 'Books') AND (creationDate > '2018-9-01')", ["country"]),
    ("year BETWEEN 2017 AND 2018 AND month >= 4", []),
]


def test_seed_expressions_same_results_with_and_without_index(catalog):
    fill(catalog)
    without = {text: all_partitions(catalog, text) for text, _ in SEED}
    assert catalog.last_plan["index"] is None
    catalog.create_partition_index(DatabaseName="sales", TableName="sales_data",
                                   PartitionIndex={"IndexName": "by_ccy", "Keys": ["country", "category", "year"]})
    catalog.wait_for_backfills()
    [desc] = catalog.get_partition_indexes(DatabaseName="sales", TableName="sales_data")["PartitionIndexDescriptorList"]
    assert desc["IndexStatus"] == "ACTIVE" and [k["Name"] for k in desc["Keys"]] == ["country", "category", "year"]
    total = len(all_partitions(catalog, None))
    for text, used in SEED:
        got = all_partitions(catalog, text)
        assert got == without[text], text
        assert catalog.last_plan["keys_used"] == used, text
        if used:
            assert catalog.last_plan["rows_scanned"] < total  # a range scan, not the whole table


def test_pagination_segments_and_exclude_column_schema(catalog):
    rows = fill(catalog)
    assert all_partitions(catalog, None, page=7) == sorted(rows)
    seg = []
    for s in range(3):
        r = catalog.get_partitions(DatabaseName="sales", TableName="sales_data",
                                   Segment={"SegmentNumber": s, "TotalSegments": 3})
        seg += [p["Values"] for p in r["Partitions"]]
    assert sorted(seg) == sorted(rows)
    p = catalog.get_partitions(DatabaseName="sales", TableName="sales_data", MaxResults=1,
                               ExcludeColumnSchema=True)["Partitions"][0]
    assert "Columns" not in p["StorageDescriptor"] and p["StorageDescriptor"]["Location"].startswith("/data")
    with pytest.raises(InvalidInputError, match="MaxResults"):
        catalog.get_partitions(DatabaseName="sales", TableName="sales_data", MaxResults=1001)
    with pytest.raises(InvalidInputError, match="TotalSegments"):
        catalog.get_partitions(DatabaseName="sales", TableName="sales_data", Segment={"SegmentNumber": 0,
                                                                                    "TotalSegments": 11})


def test_index_rules(catalog):
    fill(catalog)
    mk = lambda name, keys: catalog.create_partition_index(  # noqa: E731
        DatabaseName="sales", TableName="sales_data", PartitionIndex={"IndexName": name, "Keys": keys})
    mk("a", ["country"])
    mk("b", ["year", "country"])
    mk("c", ["creationDate"])
    with pytest.raises(ResourceNumberLimitExceededError):
        mk("d", ["month"])
    catalog.wait_for_backfills()
    # New partitions are validated against the indexed keys' types and characters.
    with pytest.raises(InvalidInputError, match="not a valid int"):
        catalog.create_partition(DatabaseName="sales", TableName="sales_data",
                                 PartitionInput={"Values": ["US", "Shoes", "foo", "1", "2020-01-01"]})
    with pytest.raises(InvalidInputError, match="U\\+0000"):
        catalog.create_partition(DatabaseName="sales", TableName="sales_data",
                                 PartitionInput={"Values": ["U\x01S", "Shoes", "2020", "1", "2020-01-01"]})
    # Indexed keys cannot be renamed, retyped or reordered; others can change.
    table = catalog.get_table(DatabaseName="sales", Name="sales_data")["Table"]
    keys = [dict(k) for k in table["PartitionKeys"]]
    renamed = [dict(k, Name="nation") if k["Name"] == "country" else k for k in keys]
    with pytest.raises(InvalidInputError, match="cannot be renamed"):
        catalog.update_table(DatabaseName="sales", TableInput={"Name": "sales_data", "PartitionKeys": renamed})
    swapped = [keys[2], keys[1], keys[0], keys[3], keys[4]]
    with pytest.raises(InvalidInputError, match="reordered"):
        catalog.update_table(DatabaseName="sales", TableInput={"Name": "sales_data", "PartitionKeys": swapped})
    catalog.update_table(DatabaseName="sales", TableInput={"Name": "sales_data", "PartitionKeys": keys,
                                                           "Parameters": {"partition_filtering.enabled": "true"}})
    # The best index is chosen: year equality + country equality fixes two keys of "b".
    all_partitions(catalog, "year = 2018 AND country = 'UK'")
    assert catalog.last_plan["index"] == "b" and catalog.last_plan["keys_used"] == ["year", "country"]
    catalog.delete_partition_index(DatabaseName="sales", TableName="sales_data", IndexName="b")
    assert [d["IndexName"] for d in catalog.get_partition_indexes(
        DatabaseName="sales", TableName="sales_data")["PartitionIndexDescriptorList"]] == ["a", "c"]


def test_backfill_failure_names_partitions(catalog):
    catalog.create_partition(DatabaseName="sales", TableName="sales_data",
                             PartitionInput={"Values": ["US", "Shoes", "20x8", "1", "2020-01-01"]})
    catalog.create_partition_index(DatabaseName="sales", TableName="sales_data",
                                   PartitionIndex={"IndexName": "by_year", "Keys": ["year"]})
    catalog.wait_for_backfills()
    [desc] = catalog.get_partition_indexes(DatabaseName="sales", TableName="sales_data")["PartitionIndexDescriptorList"]
    assert desc["IndexStatus"] == "FAILED"
    assert desc["BackfillErrors"] == [{"Code": "INVALID_PARTITION_TYPE_DATA_ERROR",
                                       "Partitions": [{"Values": ["US", "Shoes", "20x8", "1", "2020-01-01"]}]}]
    # Only the last 10 failures are kept.
    for i in range(11):
        catalog.create_partition_index(DatabaseName="sales", TableName="sales_data",
                                       PartitionIndex={"IndexName": f"f{i}", "Keys": ["year"]})
        catalog.wait_for_backfills()
    names = [d["IndexName"] for d in catalog.get_partition_indexes(
        DatabaseName="sales", TableName="sales_data")["PartitionIndexDescriptorList"]]
    assert len(names) == 10 and "by_year" not in names and "f10" in names


def test_objects_and_errors(catalog):
    with pytest.raises(AlreadyExistsError):
        catalog.create_database(DatabaseInput={"Name": "sales"})
    with pytest.raises(EntityNotFoundError):
        catalog.get_table(DatabaseName="sales", Name="nope")
    values = ["US", "Shoes", "2020", "1", "2020-01-01"]
    catalog.create_partition(DatabaseName="sales", TableName="sales_data", PartitionInput={"Values": values})
    with pytest.raises(AlreadyExistsError):
        catalog.create_partition(DatabaseName="sales", TableName="sales_data", PartitionInput={"Values": values})
    out = catalog.batch_create_partition(DatabaseName="sales", TableName="sales_data", PartitionInputList=[
        {"Values": values}, {"Values": ["UK", "Shoes", "2020", "1", "2020-01-01"]}, {"Values": ["x"]}])
    assert [e["ErrorDetail"]["ErrorCode"] for e in out["Errors"]] == ["AlreadyExistsException", "InvalidInputException"]
    with pytest.raises(InvalidInputError, match="at most 100"):
        catalog.batch_create_partition(DatabaseName="sales", TableName="sales_data",
                                       PartitionInputList=[{"Values": values}] * 101)
    got = catalog.batch_get_partition(DatabaseName="sales", TableName="sales_data",
                                      PartitionsToGet=[{"Values": values}, {"Values": ["ZZ", "a", "1", "1", "2020-01-01"]}])
    assert len(got["Partitions"]) == 1 and got["UnprocessedKeys"] == [{"Values": ["ZZ", "a", "1", "1", "2020-01-01"]}]
    catalog.update_partition(DatabaseName="sales", TableName="sales_data", PartitionValueList=values,
                             PartitionInput={"Values": values, "Parameters": {"k": "v"}})
    assert catalog.get_partition(DatabaseName="sales", TableName="sales_data",
                                 PartitionValues=values)["Partition"]["Parameters"] == {"k": "v"}
    out = catalog.batch_delete_partition(DatabaseName="sales", TableName="sales_data",
                                         PartitionsToDelete=[{"Values": values}, {"Values": ["no"]}])
    assert [e["ErrorDetail"]["ErrorCode"] for e in out["Errors"]] == ["EntityNotFoundException"]
    with pytest.raises(InvalidInputError, match="'nope' is not a partition key"):
        catalog.get_partitions(DatabaseName="sales", TableName="sales_data", Expression="nope = 1")
    catalog.delete_table(DatabaseName="sales", Name="sales_data")
    assert catalog.get_tables(DatabaseName="sales")["TableList"] == []


def test_random_expressions_same_with_every_index(db_url):
    c = GlueCatalog(db_url)
    c.create_database(DatabaseInput={"Name": "sales"})
    c.create_table(DatabaseName="sales", TableInput={"Name": "sales_data", "PartitionKeys": KEYS})
    fill(c)
    rnd = random.Random(5)
    leaves = ["country = 'US'", "country >= 'DE'", "category = 'Books'", "category < 'T'", "year > 2017",
              "year BETWEEN 2016 AND 2018", "month = 4", "creationDate <= '2018-04-10'", "country LIKE 'U%'",
              "year IN (2016, 2020)", "NOT (month = 1)", "country = 'UK' OR year = 2020",
              # several conjuncts on one key: an index range encodes only some of them
              "year = 2018", "year >= 2018", "year < 2020", "year > 2018", "month > 4", "country <> 'US'", "month <= 6", "category = 'Toys'"]
    exprs = [" AND ".join(rnd.sample(leaves, rnd.randint(1, 5))) for _ in range(120)]
    expected = {e: all_partitions(c, e) for e in exprs}
    for name, keys in [("i1", ["year", "country"]), ("i2", ["creationDate"]), ("i3", ["category", "month", "year"])]:
        c.create_partition_index(DatabaseName="sales", TableName="sales_data",
                                 PartitionIndex={"IndexName": name, "Keys": keys})
    c.wait_for_backfills()
    for e in exprs:
        assert all_partitions(c, e, page=13) == expected[e], e


def test_literals_without_an_index_string_are_tested_not_ranged(db_url):
    """An integer past 64 bits or a string holding a separator character has no index string:
    such a conjunct must not shape the key range (it would skip or admit partitions wrongly)."""
    c = GlueCatalog(db_url)
    c.create_database(DatabaseInput={"Name": "sales"})
    c.create_table(DatabaseName="sales", TableInput={"Name": "t", "PartitionKeys": [
        {"Name": "a", "Type": "bigint"}, {"Name": "b", "Type": "string"}, {"Name": "c", "Type": "string"}]},
        PartitionIndexes=[{"IndexName": "ab", "Keys": ["a", "b"]}, {"IndexName": "bc", "Keys": ["b", "c"]}])
    for a, b, cc in [(str(2**62), "x", "a"), ("5", "x", "b"), ("-7", "y", "a"), (str(-2**62), "xa", "c")]:
        c.create_partition(DatabaseName="sales", TableName="t", PartitionInput={"Values": [a, b, cc]})
    cases = {f"a > {10**20}": set(), f"a < {10**20}": {"x/a", "x/b", "y/a", "xa/c"},
             f"a = {10**20}": set(), f"a > {-10**20} AND a < 6": {"x/b", "y/a", "xa/c"},
             "b >= 'x\u0001'": {"xa/c", "y/a"}, "b <= 'x\u0000'": {"x/a", "x/b"},
             "b = 'x\u0001'": set(), "b > 'x' AND b < 'y\u0001'": {"xa/c", "y/a"}}
    for expression, expected in cases.items():
        got = {f"{p['Values'][1]}/{p['Values'][2]}" for p in
               c.get_partitions(DatabaseName="sales", TableName="t", Expression=expression)["Partitions"]}
        assert got == expected, expression
