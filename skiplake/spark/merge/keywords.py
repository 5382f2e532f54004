"""The keyword form of MERGE (`t.merge(source, on, when_matched_update=..., ...)`) as clauses.

It takes at most one clause of each of three kinds and is run by the same engine as the builder:
a matched row is deleted when the delete clause applies, else updated when the update clause's
condition holds; unmatched source rows are inserted when the insert condition holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from skiplake.errors import InvalidArgumentError
from skiplake.spark.merge.clauses import MATCHED, NOT_MATCHED, MergeClause, MergeSpec


@dataclass(frozen=True)
class MergeClauses:
    """MERGE INTO target USING source ON `on`, and what happens to matched and unmatched rows.

    Matched rows are deleted (when_matched_delete: True, or a condition) else updated
    (when_matched_update: {column: expression} or "*"); unmatched source rows are inserted
    (when_not_matched_insert: {column: expression} or "*"). Expressions name columns as
    `target.col` / `source.col` (or the aliases given)."""
    on: str
    source_alias: str = "source"
    target_alias: str = "target"
    when_matched_update: Mapping[str, str] | str | None = None
    when_matched_update_condition: str | None = None
    when_matched_delete: bool | str = False
    when_not_matched_insert: Mapping[str, str] | str | None = None
    when_not_matched_insert_condition: str | None = None

    def spec(self) -> MergeSpec:
        """The clauses in the builder's terms: a matched DELETE, then a matched UPDATE (left out after an
        unconditional DELETE), then an INSERT.

        No clause at all, or an update or insert that is neither a mapping nor "*", is an InvalidArgumentError."""
        clauses = []
        unconditional_delete = self.when_matched_delete is True
        if self.when_matched_delete:
            condition = None if unconditional_delete else str(self.when_matched_delete)
            clauses.append(MergeClause(MATCHED, "delete", condition))
        # After an unconditional delete no matched row is left to update (Delta would refuse the
        # pair, since only the last WHEN MATCHED clause may omit its condition).
        if self.when_matched_update and not unconditional_delete:
            clauses.append(MergeClause(MATCHED, "update", self.when_matched_update_condition,
                                       _assignments(self.when_matched_update, "when_matched_update")))
        if self.when_not_matched_insert:
            clauses.append(MergeClause(NOT_MATCHED, "insert", self.when_not_matched_insert_condition,
                                       _assignments(self.when_not_matched_insert, "when_not_matched_insert")))
        if not clauses:
            raise InvalidArgumentError("merge needs at least one of when_matched_update, when_matched_delete, "
                                       "when_not_matched_insert (or build the clauses: t.merge(source, on)"
                                       ".when_matched_update(...)...execute())")
        return MergeSpec(self.on, tuple(clauses), self.source_alias, self.target_alias)


def _assignments(spec: Mapping[str, str] | str, name: str) -> Mapping[str, str] | None:
    if spec == "*":
        return None
    if isinstance(spec, str) or not isinstance(spec, Mapping):
        raise InvalidArgumentError(f"{name} must be a mapping of column to expression, or '*'")
    return spec
