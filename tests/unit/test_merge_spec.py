"""MERGE's clause model and what its conditions' SQL says, without Spark (milliseconds)."""
from __future__ import annotations

import json

import pytest

from skiplake.errors import InvalidArgumentError, MergeClauseError
from skiplake.spark.merge.clauses import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause, MergeSpec
from skiplake.spark.merge.conditions import Sides, key_equalities, refused, target_only_conjuncts
from skiplake.spark.merge.keywords import MergeClauses

SIDES = Sides.of("target", "source", ["id", "v", "d", "both"], ["id", "w", "both"])


def test_only_the_last_clause_of_a_kind_may_omit_its_condition():
    ok = MergeSpec("target.id = source.id", (
        MergeClause(MATCHED, "delete", "source.w < 0"), MergeClause(MATCHED, "update"),
        MergeClause(NOT_MATCHED, "insert"), MergeClause(NOT_MATCHED_BY_SOURCE, "delete", "target.v = 1"),
        MergeClause(NOT_MATCHED_BY_SOURCE, "delete")))
    ok.check("/t")
    bad = MergeSpec("target.id = source.id", (MergeClause(NOT_MATCHED_BY_SOURCE, "delete"),
                                              MergeClause(NOT_MATCHED, "insert"),
                                              MergeClause(NOT_MATCHED_BY_SOURCE, "update", "target.v > 1", {"v": "0"})))
    with pytest.raises(MergeClauseError, match="only the last one may omit") as e:
        bad.check("/t")
    assert (e.value.reason, e.value.clause) == ("condition_order", "WHEN NOT MATCHED BY SOURCE clause 1")
    with pytest.raises(MergeClauseError) as e:
        MergeSpec("target.id = source.id").check("/t")
    assert e.value.reason == "no_clauses"


def test_clauses_refuse_what_their_kind_cannot_do():
    for kind, action in ((MATCHED, "insert"), (NOT_MATCHED, "update"), (NOT_MATCHED, "delete"),
                         (NOT_MATCHED_BY_SOURCE, "insert")):
        with pytest.raises(InvalidArgumentError):
            MergeClause(kind, action)
    with pytest.raises(InvalidArgumentError, match="non-empty mapping"):
        MergeClause(MATCHED, "update", None, {})
    with pytest.raises(InvalidArgumentError, match="takes no assignments"):
        MergeClause(MATCHED, "delete", None, {"v": "1"})
    with pytest.raises(InvalidArgumentError, match="must differ"):
        MergeSpec("a.id = b.id", source_alias="s", target_alias="S")
    with pytest.raises(InvalidArgumentError, match="plain SQL name"):
        MergeSpec("a.id = b.id", source_alias="my source")


def test_parameters_are_written_as_delta_writes_them():
    spec = MergeSpec("target.id = source.id", (
        MergeClause(MATCHED, "delete", "source.w < 0"), MergeClause(MATCHED, "update", None, {"v": "source.w"}),
        MergeClause(NOT_MATCHED, "insert"), MergeClause(NOT_MATCHED_BY_SOURCE, "delete", "target.v = 1")))
    p = spec.parameters()
    assert json.loads(p["predicate"]) == ["target.id = source.id"]
    assert json.loads(p["matchedPredicates"]) == [{"predicate": "source.w < 0", "actionType": "delete"},
                                                  {"actionType": "update"}]
    assert json.loads(p["notMatchedPredicates"]) == [{"actionType": "insert"}]
    assert json.loads(p["notMatchedBySourcePredicates"]) == [{"predicate": "target.v = 1", "actionType": "delete"}]
    assert spec.one_unconditional_delete is False and spec.matched_only is False


def test_the_keyword_form_becomes_clauses():
    spec = MergeClauses("target.id = source.id", when_matched_update="*", when_matched_delete="source.w < 0",
                        when_not_matched_insert={"id": "source.id"}, when_not_matched_insert_condition="source.w > 0").spec()
    assert [(c.kind, c.action, c.condition, c.star) for c in spec.clauses] == [
        (MATCHED, "delete", "source.w < 0", False), (MATCHED, "update", None, True),
        (NOT_MATCHED, "insert", "source.w > 0", False)]
    # An unconditional delete leaves an update nothing: only the delete stays (Delta would refuse both).
    spec = MergeClauses("target.id = source.id", when_matched_update="*", when_matched_delete=True).spec()
    assert [(c.action, c.condition) for c in spec.clauses] == [("delete", None)]
    assert spec.one_unconditional_delete
    with pytest.raises(InvalidArgumentError, match="mapping of column to expression"):
        MergeClauses("target.id = source.id", when_matched_update="v").spec()


def test_target_only_conjuncts_by_qualifier_or_by_the_side_that_has_the_name():
    assert target_only_conjuncts("target.d = '2024-01-01' AND target.id = source.id AND v > 3 AND w < 1", SIDES) \
        == "(`d` = '2024-01-01') AND (`v` > 3)"
    assert target_only_conjuncts("both > 1 AND source.w = 1", SIDES) is None   # `both`: either side's
    assert target_only_conjuncts("target.v > 1 OR source.w > 1", SIDES) is None
    assert target_only_conjuncts("target.v IN (SELECT 1)", SIDES) is None
    # A NOT MATCHED BY SOURCE condition sees the target alone: `both` is the target's there.
    assert target_only_conjuncts("target.v < 5 OR both IS NULL", SIDES.target_only()) == "(`v` < 5 OR `both` IS NULL)"
    assert target_only_conjuncts("source.w < 5", SIDES.target_only()) is None


def test_key_equalities_either_way_round():
    assert key_equalities("target.id = source.id AND source.w + 1 = target.v AND id <=> w AND target.v > 0",
                          SIDES) == [("id", "source.id"), ("v", "source.w + 1")]
    assert key_equalities("v = w", SIDES) == [("v", "w")]
    assert key_equalities("target.id = target.v", SIDES) == []


def test_refused_conditions():
    assert refused("rand() > 0.5")[0] == "non_deterministic"
    assert refused("uuid() = source.id")[0] == "non_deterministic"
    assert refused("sum(source.w) > 1")[0] == "aggregate"
    assert refused("max(target.v) OVER () > 1")[0] == "aggregate"
    assert refused("source.w IN (SELECT 1)")[0] == "subquery"
    assert refused("exists(source.arr, x -> x > 1)") is None    # a higher-order function, not EXISTS (...)
    assert refused("source.w > 1 AND target.v < concat('a', 'b')") is None
