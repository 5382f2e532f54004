"""Parsing Spark's numbered plan text: structure, numbering, outputs, lineage, join keys.

The plans in tests/unit/plans/ are Spark 4.1's optimized plans of TPC-DS queries 3, 5 and 6
(`numberedTreeString`, full field lists)."""
from __future__ import annotations

from pathlib import Path

import pytest

from skiplake.spark.query.plan_text import Attr, Operand, conjuncts, operand, parse_plan, split_top

PLANS = Path(__file__).parent / "plans"


def plan(name: str):
    return parse_plan((PLANS / f"tpcds_{name}.txt").read_text(), numbered=True)


def test_numbers_follow_sparks_order_with_subqueries_first():
    root = plan("q6")
    nodes = root.walk()
    assert [n.number for n in nodes] == list(range(len(nodes)))
    flt = next(n for n in nodes if n.kind == "Filter" and "scalar-subquery" in n.text)
    # The subquery (an Aggregate over date_dim) is numbered before the Filter's own child.
    assert [s.kind for s in flt.subqueries] == ["Aggregate"]
    assert flt.subqueries[0].number == flt.number + 1
    assert flt.children[0].number > max(n.number for n in flt.subqueries[0].walk())


def test_relation_output_and_join_keys():
    root = plan("q3")
    joins = [n for n in root.walk() if n.kind == "Join"]
    assert [j.join_type for j in joins] == ["Inner", "Inner"]
    (left, right), = joins[0].equi_keys()
    assert left == Operand(Attr(282, "ss_item_sk")) and right == Operand(Attr(181, "i_item_sk"))
    relations = [n for n in root.walk() if n.kind == "Relation"]
    assert len(relations) == 3
    assert relations[1].output[2] == Attr(282, "ss_item_sk")
    assert len(relations[1].output) == 23  # store_sales has 23 columns


def test_key_traced_through_project_join_and_filter_to_the_relation():
    root = plan("q3")
    top = next(n for n in root.walk() if n.kind == "Join")
    node, attr = top.children[0], 282
    path = []
    while node.kind != "Relation":
        (node, attr), = node.sources(attr)
        path.append(node.kind)
    assert path == ["Join", "Project", "Filter", "Relation"]
    assert any(a.id == attr and a.name == "ss_item_sk" for a in node.output)


def test_key_traced_through_union_into_every_branch():
    root = plan("q5")
    date_join = next(n for n in root.walk() if n.kind == "Join" and n.text.startswith("Inner, (date_sk#"))
    (probe_key, build_key), = date_join.equi_keys()
    union = date_join.children[0]
    assert union.kind == "Union"
    branches = union.sources(probe_key.attr.id)
    assert len(branches) == 2
    names = []
    for node, attr in branches:
        while node.kind != "Relation":
            (node, attr), = node.sources(attr)
        names.append(next(a.name for a in node.output if a.id == attr))
    assert names == ["ss_sold_date_sk", "sr_returned_date_sk"]


def test_aggregate_passes_grouping_keys_only():
    root = plan("q3")
    agg = next(n for n in root.walk() if n.kind == "Aggregate")
    assert agg.sources(425) is not None        # i_brand_id AS brand_id: a grouping key
    assert agg.sources(427) is None            # sum(...) AS sum_agg: computed


def test_text_helpers():
    assert split_top("a#1, f(b#2, c#3) AS x#4, [d, e]", ", ") == ["a#1", "f(b#2, c#3) AS x#4", "[d, e]"]
    assert conjuncts("((a#1 = b#2) AND ((c#3 = d#4) AND isnotnull(e#5)))") == ["a#1 = b#2", "c#3 = d#4",
                                                                                "isnotnull(e#5)"]
    assert operand("cast(i_item_sk#5 as bigint)") == Operand(Attr(5, "i_item_sk"), "bigint")
    assert operand("(x#1L + 1)") is None


def test_continuation_lines_and_bad_text():
    text = "Filter (s#1 = a\nb)\n+- Relation [s#1] parquet\n"
    root = parse_plan(text)
    assert root.text == "(s#1 = a\nb)"
    assert root.children[0].output == [Attr(1, "s")]
    with pytest.raises(ValueError):
        parse_plan("nothing here")


@pytest.mark.parametrize("condition, sql", [
    ("isnotnull(c_customer_sk#101L)", "isnotnull(c_customer_sk)"),
    ("(isnotnull(d_date_sk#141L) AND isnotnull(d_week_seq#145))", "(isnotnull(d_date_sk) AND isnotnull(d_week_seq))"),
    ("(isnotnull(a#1) AND (isnull(b#2L) AND isnotnull(c#3)))", "(isnotnull(a) AND (isnull(b) AND isnotnull(c)))"),
    ("(isnotnull(a#1) OR isnotnull(b#2))", None),                      # not a conjunction
    ("((isnotnull(d_year#147L) AND (d_year#147L = 2000)) AND isnotnull(d_date_sk#141L))", None),  # a literal
    ("isnotnull(my col#1)", None),                                     # a name the text cannot vouch for
    ("isnotnull(`col-5f2a`#1)", None),
    ("NOT isnotnull(a#1)", None),
    ("isnotnull(cast(a#1 as int))", None),
])
def test_null_tests_read_from_the_text(condition, sql):
    from skiplake.spark.query.plan_text import null_tests_sql
    assert null_tests_sql(condition) == sql


def test_null_test_filters_of_a_plan():
    from skiplake.spark.query.plan_text import null_tests_sql
    filters = [n for name in ("q3", "q5", "q6") for n in plan(name).walk() if n.kind == "Filter"]
    read = [f for f in filters if null_tests_sql(f.text.strip()) is not None]
    assert read and len(read) < len(filters)
    assert all("isnotnull(" in null_tests_sql(f.text.strip()) and "#" not in null_tests_sql(f.text.strip())
               for f in read)
