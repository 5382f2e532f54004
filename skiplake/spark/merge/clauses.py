"""What a MERGE says: its ON condition and ordered WHEN clauses, and Delta's grammar rules for them.

Three kinds of clause, each with an optional condition, evaluated in the order given within
their kind (the first whose condition holds acts on a row):

- WHEN MATCHED (a target row and a source row satisfy ON): UPDATE SET ..., UPDATE SET *, DELETE;
- WHEN NOT MATCHED [BY TARGET] (a source row no target row matches): INSERT (...) VALUES (...),
  INSERT *;
- WHEN NOT MATCHED BY SOURCE (a target row no source row matches): UPDATE SET ..., DELETE.

Nothing here runs Spark: the rules checked here are those Delta checks before it resolves a
single column (DeltaMergeInto.apply), and `parameters()` is the commit's operationParameters as
Delta writes them.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Union

from skiplake.errors import InvalidArgumentError, MergeClauseError

if TYPE_CHECKING:
    from pyspark.sql import Column

MATCHED = "matched"
NOT_MATCHED = "not_matched"
NOT_MATCHED_BY_SOURCE = "not_matched_by_source"
KINDS = (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE)
# The clause headings as Delta's SQL spells them.
HEADINGS = {MATCHED: "WHEN MATCHED", NOT_MATCHED: "WHEN NOT MATCHED",
            NOT_MATCHED_BY_SOURCE: "WHEN NOT MATCHED BY SOURCE"}
ACTIONS = {MATCHED: ("update", "delete"), NOT_MATCHED: ("insert",), NOT_MATCHED_BY_SOURCE: ("update", "delete")}

# SQL text or a pyspark Column.
Expr = Union[str, "Column"]

_ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def expr_text(e: Expr) -> str:
    """SQL text of an expression as the commit records it (a Column by its own rendering)."""
    if isinstance(e, str):
        return e
    shown = str(e)
    m = re.match(r"^Column<'(.*)'>$", shown, re.S)
    return m.group(1) if m else shown


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause. `assignments` maps a target column to an expression; None with an update
    or insert is `*` (every column by name from the source)."""
    kind: str
    action: str
    condition: Expr | None = None
    assignments: Mapping[str, Expr] | None = None

    def __post_init__(self) -> None:
        """Refuse (InvalidArgumentError) an action its kind does not take, a condition that is not SQL text or a
        Column, a DELETE with assignments, and assignments that are not a non-empty mapping of column name to
        SQL text or Column."""
        if self.kind not in KINDS or self.action not in ACTIONS[self.kind]:
            raise InvalidArgumentError(f"a MERGE {HEADINGS.get(self.kind, self.kind)} clause cannot {self.action}")
        if self.condition is not None and not (isinstance(self.condition, str) or _is_column(self.condition)):
            raise InvalidArgumentError(f"a MERGE clause's condition must be SQL text or a Column, "
                                       f"not {type(self.condition).__name__}")
        if self.action == "delete" and self.assignments is not None:
            raise InvalidArgumentError("a MERGE DELETE clause takes no assignments")
        # As the user passed them (typed or not): checked here, not trusted.
        assignments: object = self.assignments
        if assignments is not None:
            if not isinstance(assignments, Mapping) or not assignments:
                word = "values" if self.action == "insert" else "set"
                raise InvalidArgumentError(
                    f"{self.heading} THEN {self.action.upper()} needs {word}= as a non-empty mapping of "
                    f"column to expression (or use the _all form for every column)")
            for k, v in assignments.items():
                if not isinstance(k, str) or not (isinstance(v, str) or _is_column(v)):
                    raise InvalidArgumentError(f"{self.heading} THEN {self.action.upper()}: {k!r}: {v!r} is not "
                                               "a column name mapped to SQL text or a Column")

    @property
    def heading(self) -> str:
        """The clause's heading as Delta's SQL spells it: `WHEN NOT MATCHED BY SOURCE`."""
        return HEADINGS[self.kind]

    @property
    def star(self) -> bool:
        """Whether the clause is UPDATE SET * or INSERT * (every column by name from the source)."""
        return self.action != "delete" and self.assignments is None

    def describe(self, number: int) -> str:
        """`WHEN MATCHED clause 2`: the clause's place among those of its kind (from 1)."""
        return f"{self.heading} clause {number}"

    def predicate(self) -> dict[str, str]:
        """The clause as Delta's commit records it: {"predicate": ..., "actionType": ...}."""
        out = {"actionType": self.action}
        if self.condition is not None:
            out = {"predicate": expr_text(self.condition), **out}
        return out


def _is_column(value: object) -> bool:
    # A pyspark Column (classic or Spark Connect) without importing pyspark here.
    return type(value).__name__ == "Column"


@dataclass(frozen=True)
class MergeSpec:
    """MERGE INTO target USING source ON `on` with `clauses` in the order given."""
    on: str
    clauses: tuple[MergeClause, ...] = ()
    source_alias: str = "source"
    target_alias: str = "target"
    schema_evolution: bool = False

    def __post_init__(self) -> None:
        """Refuse (InvalidArgumentError) an ON condition that is not SQL text, and aliases that are not plain
        SQL names or are the same name."""
        # As the user passed them (typed or not): checked here, not trusted.
        on: object = self.on
        if not isinstance(on, str) or not on.strip():
            raise InvalidArgumentError("MERGE needs its ON condition as SQL text, e.g. \"target.id = source.id\"")
        aliases: tuple[object, ...] = (self.source_alias, self.target_alias)
        for name in aliases:
            if not isinstance(name, str) or not _ALIAS.match(name):
                raise InvalidArgumentError(f"MERGE alias {name!r} is not a plain SQL name (letters, digits, _)")
        if self.source_alias.lower() == self.target_alias.lower():
            raise InvalidArgumentError(f"MERGE's source and target aliases must differ (both {self.source_alias!r})")

    def of_kind(self, kind: str) -> tuple[MergeClause, ...]:
        """The clauses of one kind, in the order given."""
        return tuple(c for c in self.clauses if c.kind == kind)

    @property
    def matched(self) -> tuple[MergeClause, ...]:
        """The WHEN MATCHED clauses, in order."""
        return self.of_kind(MATCHED)

    @property
    def not_matched(self) -> tuple[MergeClause, ...]:
        """The WHEN NOT MATCHED [BY TARGET] clauses, in order."""
        return self.of_kind(NOT_MATCHED)

    @property
    def not_matched_by_source(self) -> tuple[MergeClause, ...]:
        """The WHEN NOT MATCHED BY SOURCE clauses, in order."""
        return self.of_kind(NOT_MATCHED_BY_SOURCE)

    @property
    def insert_only(self) -> bool:
        """Whether every clause is a WHEN NOT MATCHED [BY TARGET] one (inserts only)."""
        return bool(self.not_matched) and not self.matched and not self.not_matched_by_source

    @property
    def matched_only(self) -> bool:
        """Whether every clause is a WHEN MATCHED one."""
        return bool(self.matched) and not self.not_matched and not self.not_matched_by_source

    @property
    def one_unconditional_delete(self) -> bool:
        """The only WHEN MATCHED clause is a DELETE without condition: then a target row matched by
        several source rows is no error (it is deleted whichever matched it)."""
        m = self.matched
        return len(m) == 1 and m[0].action == "delete" and m[0].condition is None

    def numbered(self) -> list[tuple[MergeClause, int]]:
        """Each clause with its number among the clauses of its kind (from 1)."""
        seen: dict[str, int] = {}
        out = []
        for c in self.clauses:
            seen[c.kind] = seen.get(c.kind, 0) + 1
            out.append((c, seen[c.kind]))
        return out

    def check(self, path: str) -> None:
        """Delta's grammar rules: at least one clause; within each kind only the last clause may
        omit its condition (a clause after an unconditional one could never act)."""
        if not self.clauses:
            raise MergeClauseError(
                path, "", "no_clauses", "there is no WHEN clause, so the MERGE would do nothing",
                "Add at least one clause: when_matched_update(...), when_matched_delete(), "
                "when_not_matched_insert(...), when_not_matched_by_source_delete(), ...")
        for kind in KINDS:
            clauses = self.of_kind(kind)
            for number, c in enumerate(clauses[:-1], start=1):
                if c.condition is None:
                    raise MergeClauseError(
                        path, c.describe(number), "condition_order",
                        f"when there are several {HEADINGS[kind]} clauses, only the last one may omit its "
                        f"condition (clause {number} of {len(clauses)} has none, so the clauses after it "
                        "could never act)",
                        "Give it a condition, or move it last")

    def parameters(self) -> dict[str, str]:
        """operationParameters of the MERGE commit, as Delta writes them (JSON text values)."""
        def preds(kind: str) -> str:
            return json.dumps([c.predicate() for c in self.of_kind(kind)])
        return {"predicate": json.dumps([self.on]), "matchedPredicates": preds(MATCHED),
                "notMatchedPredicates": preds(NOT_MATCHED),
                "notMatchedBySourcePredicates": preds(NOT_MATCHED_BY_SOURCE)}
