"""Resolving a MERGE's clauses against the target's and the source's columns, as Delta does.

Each expression sees what Delta lets it see: the ON condition and WHEN MATCHED clauses both
sides, WHEN NOT MATCHED clauses the source only, WHEN NOT MATCHED BY SOURCE clauses the target
only. Spark's analyzer judges every clause over empty frames of those shapes (no job runs), so a
clause naming a column it cannot see, or an expression Spark refuses, is a MergeClauseError
before anything is read.

Each UPDATE and INSERT becomes one value per column of the table after the MERGE (its columns,
then those schema evolution adds, in the source's order), cast to the column's type:
- UPDATE SET: the columns named get their expression (a struct field `s.a` rebuilds the struct
  around it), the others keep the target's value; INSERT: the others are NULL;
- `*` without schema evolution: every target column from the source column of its name (the
  source must have them all; its other columns are ignored);
- `*` with schema evolution: every source column, new ones added to the table; an INSERT sets
  the target's other columns NULL, an UPDATE keeps them;
- with schema evolution an explicit assignment may name a source column the target lacks: it is
  added with the source column's type. Columns added are NULL in rows no clause sets them in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from skiplake.errors import MergeClauseError
from skiplake.expr.parse import substitute_columns
from skiplake.log.schema import Field, Schema, column_path_parts, type_name
from skiplake.spark.merge.clauses import (
    HEADINGS,
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    Expr,
    MergeClause,
    MergeSpec,
    expr_text,
)
from skiplake.spark.merge.conditions import refused
from skiplake.spark.session.refusals import quiet
from skiplake.spark.session.spark_types import from_spark, spark_type, to_spark
from skiplake.txn.constraints import generated_columns, generation_value
from skiplake.txn.identity import identity_columns

# What each kind of clause sees, for messages.
_SEES = {MATCHED: "both the target's and the source's columns", NOT_MATCHED: "only the source's columns",
         NOT_MATCHED_BY_SOURCE: "only the target's columns"}


@dataclass(frozen=True)
class ResolvedClause:
    """One WHEN clause as Spark columns: its condition and the row it writes."""
    clause: MergeClause
    index: int                     # the clause's place in the MERGE (its id in the plan)
    label: str                     # "WHEN MATCHED clause 2"
    condition: Column              # TRUE when the clause has none
    values: tuple[Column, ...]     # the row it writes, one per column of `ResolvedMerge.schema`


@dataclass(frozen=True)
class ResolvedMerge:
    """A MERGE resolved against both sides: the table's schema after it, the columns it adds, its clauses
    as Spark columns, and the row a target row is copied as."""
    spec: MergeSpec
    schema: Schema                 # the table's schema after the MERGE
    new_fields: tuple[Field, ...]  # columns schema evolution adds
    clauses: tuple[ResolvedClause, ...]
    copy: tuple[Column, ...]       # a target row left as it was, as the columns of `schema`

    def of_kind(self, kind: str) -> tuple[ResolvedClause, ...]:
        """The resolved clauses of one kind, in the order given."""
        return tuple(c for c in self.clauses if c.clause.kind == kind)

    def ids(self, kinds: Sequence[str], actions: Sequence[str]) -> list[int]:
        """The indexes of the clauses of those kinds with those actions."""
        return [c.index for c in self.clauses if c.clause.kind in kinds and c.clause.action in actions]


def quoted(alias: str, name: str) -> Column:
    """The column `alias`.`name`, whatever characters the name holds."""
    return F.col(f"{alias}.`{name.replace('`', '``')}`")


class _Resolver:
    def __init__(self, path: str, target: Schema, source: DataFrame, spec: MergeSpec) -> None:
        self.path, self.target, self.spec = path, target, spec
        self.t, self.s = spec.target_alias, spec.source_alias
        self.source_fields = from_spark(source.schema).fields
        self.source_names = {f.name.lower(): f.name for f in self.source_fields}
        spark = source.sparkSession
        self.source = source.alias(self.s)
        self.empty_target = spark.createDataFrame([], to_spark(target)).alias(self.t)
        self.matched: DataFrame | None = None   # the ON join, built once for every WHEN MATCHED clause

    # ---- the frames a clause is judged over

    def frame(self, kind: str) -> DataFrame:
        if kind == NOT_MATCHED:
            return self.source
        if kind == NOT_MATCHED_BY_SOURCE:
            return self.empty_target
        if self.matched is None:
            self.matched = self.empty_target.join(self.source, F.expr(self.spec.on), "inner")
        return self.matched

    def analyze(self, kind: str, label: str, build: Callable[[DataFrame], DataFrame], what: str) -> None:
        """Have Spark's analyzer judge `build(frame)`; its refusal becomes a MergeClauseError."""
        try:
            with quiet():
                build(self.frame(kind)).schema
        except AnalysisException as e:
            raise self.refusal(e, kind, label, what) from e

    def refusal(self, e: AnalysisException, kind: str, label: str, what: str) -> MergeClauseError:
        condition = (e.getCondition() or "") if hasattr(e, "getCondition") else ""
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if condition.startswith("UNRESOLVED_") or "cannot be resolved" in first:
            name = (e.getMessageParameters() or {}).get("objectName") or ""
            return MergeClauseError(
                self.path, label, "unresolved",
                f"{what} names {name or 'a column'} which it cannot see: {self.sees(kind)}",
                "Qualify columns with the target's and source's aliases "
                f"({self.t}.col, {self.s}.col) and name only columns the clause can see")
        if condition.startswith("AMBIGUOUS_REFERENCE"):
            return MergeClauseError(self.path, label, "ambiguous", f"{what} is ambiguous: {first}",
                                    f"Qualify the column with {self.t}. or {self.s}.")
        return MergeClauseError(self.path, label, "invalid", f"Spark refuses {what}: {first}")

    def sees(self, kind: str) -> str:
        cols = []
        if kind in (MATCHED, NOT_MATCHED_BY_SOURCE):
            cols += [f"{self.t}.{n}" for n in self.target.names]
        if kind in (MATCHED, NOT_MATCHED):
            cols += [f"{self.s}.{f.name}" for f in self.source_fields]
        return f"a {HEADINGS[kind]} clause sees {_SEES[kind]} ({', '.join(cols)})"

    # ---- conditions

    def check_condition(self, text: Expr, label: str) -> None:
        if not isinstance(text, str):
            return
        bad = refused(text)
        if bad is not None:
            reason, what = bad
            raise MergeClauseError(self.path, label, reason,
                                   f"the condition {text!r} holds {what}, which a MERGE condition may not",
                                   "Compute it in the source DataFrame first (as a column), then compare it")

    # ---- the table after the MERGE

    def evolved(self) -> tuple[Field, ...]:
        """Source columns the MERGE adds to the table (schema evolution): all the source's new
        columns when a MATCHED or NOT MATCHED clause is a `*`, else those an assignment names."""
        if not self.spec.schema_evolution:
            return ()
        named = self._named_by_clauses()
        new = [f for f in self.source_fields
               if self.target.find(f.name) is None and (named is None or f.name.lower() in named)]
        for f in new:
            if f.type == "void":
                raise MergeClauseError(
                    self.path, "", "void_column",
                    f"schema evolution would add the source column {f.name!r}, whose type is void (an untyped NULL)",
                    f"Cast it in the source, e.g. CAST(NULL AS STRING) AS {f.name}")
        return tuple(Field(f.name, f.type, True) for f in new)

    def _named_by_clauses(self) -> set[str] | None:
        """The top-level columns the MATCHED and NOT MATCHED clauses assign (lowercase), or None
        when one of them is a `*` (it names every source column)."""
        acting = [c for c in self.spec.clauses if c.kind in (MATCHED, NOT_MATCHED) and c.action != "delete"]
        if any(c.star for c in acting):
            return None
        return {column_path_parts(self.key(k))[0].lower() for c in acting for k in (c.assignments or {})}

    def key(self, raw: str) -> str:
        """An assignment's column without the target's alias."""
        parts = column_path_parts(raw)
        if len(parts) > 1 and parts[0].lower() == self.t.lower() and self.target.find(parts[0]) is None:
            parts = parts[1:]
        return ".".join(f"`{p.replace('`', '``')}`" for p in parts)

    # ---- values

    def assigned(self, clause: MergeClause, label: str, schema: Schema) -> dict[str, list[tuple[list[str], Column]]]:
        """The clause's assignments by final column (lowercase): (path below it, value) pairs."""
        out: dict[str, list[tuple[list[str], Column]]] = {}
        seen: dict[str, str] = {}
        for raw, value in (clause.assignments or {}).items():
            parts = column_path_parts(self.key(raw))
            field = schema.find(parts[0])
            if field is None:
                raise MergeClauseError(
                    self.path, label, "unresolved",
                    f"{'INSERT' if clause.action == 'insert' else 'UPDATE SET'} names column {raw!r}, which "
                    f"the table does not have (its columns: {', '.join(schema.names)})",
                    "Name a column of the table" + ("" if self.spec.schema_evolution else
                                                    ", or add the source's column with with_schema_evolution()"))
            if len(parts) > 1 and clause.action == "insert":
                raise MergeClauseError(self.path, label, "nested_insert",
                                       f"INSERT names the struct field {raw!r}; an INSERT sets whole columns",
                                       f"Set the column {field.name!r} to a struct, e.g. named_struct(...)")
            path = ".".join(p.lower() for p in parts)
            clash = [p for p in seen if p == path or p.startswith(path + ".") or path.startswith(p + ".")]
            if clash:
                raise MergeClauseError(self.path, label, "duplicate_column",
                                       f"{raw!r} and {seen[clash[0]]!r} are both assigned",
                                       "Assign each column (or struct field) once")
            seen[path] = raw
            column = value if isinstance(value, Column) else F.expr(value)
            out.setdefault(field.name.lower(), []).append((parts[1:], column))
        return out

    def values(self, clause: MergeClause, label: str, schema: Schema, new: set[str]) -> tuple[Column, ...]:
        """One value per column of `schema` for the rows an UPDATE or INSERT writes; a generated
        column the clause does not set is computed from the values it gives the others."""
        out = list(self.given_values(clause, label, schema, new))
        generated = generated_columns(schema)
        unset = [i for i, f in enumerate(schema.fields) if f.name in generated and out[i] is None]
        if unset:
            texts = self.value_texts(clause, label, schema, new)
            for i in unset:
                f = schema.fields[i]
                sql = substitute_columns(generated[f.name], {c.lower(): t for c, t in texts.items()})
                out[i] = F.expr(generation_value(sql, f.type))
        values = tuple(c for c in out if c is not None)
        assert len(values) == len(out)  # only generated columns were left unset, and each is computed now
        return values

    def value_texts(self, clause: MergeClause, label: str, schema: Schema, new: set[str]) -> dict[str, str]:
        """Each column's value in the rows the clause writes, as SQL (to compute generated
        columns from): the source's column, a SQL assignment, the target's value or NULL."""
        keep_target = clause.action == "update"
        raw = {column_path_parts(self.key(k))[0].lower(): v for k, v in (clause.assignments or {}).items()
               if len(column_path_parts(self.key(k))) == 1}
        out = {}
        for f in schema.fields:
            src = self.source_names.get(f.name.lower())
            value = raw.get(f.name.lower())
            if clause.star and src is not None:
                out[f.name] = f"{self.s}.`{src.replace('`', '``')}`"
            elif not clause.star and isinstance(value, str):
                out[f.name] = value
            elif not clause.star and value is not None:
                raise MergeClauseError(self.path, label, "generated_column",
                                       f"a generated column reads {f.name!r}, which the clause sets with a Column",
                                       f"Give {f.name!r} as SQL text, or set the generated columns too")
            else:
                out[f.name] = f"{self.t}.`{f.name.replace('`', '``')}`" if keep_target and f.name.lower() not in new \
                    else "NULL"
        return out

    def given_values(self, clause: MergeClause, label: str, schema: Schema, new: set[str]) -> list[Column | None]:
        """The values the clause gives, identity columns' included (assigned in inserts, kept in
        updates); None for a generated column it does not set."""
        out = self.set_values(clause, label, schema, new)
        identities = identity_columns(schema)
        for i, f in enumerate(schema.fields):
            identity = identities.get(f.name)
            if identity is None:
                continue
            if clause.action == "update":
                if out[i] is not None and not clause.star:
                    raise MergeClauseError(self.path, label, "identity_column",
                                           f"UPDATE SET names the identity column {f.name!r}, whose values are "
                                           "assigned once and never changed", f"Leave {f.name!r} out of the clause")
                out[i] = quoted(self.t, f.name)   # UPDATE SET * keeps it too
            elif out[i] is None:
                out[i] = F.expr(identity.next_value_sql())
            elif not identity.allow_explicit_insert:
                raise MergeClauseError(self.path, label, "identity_column",
                                       f"the INSERT gives the identity column {f.name!r}, which is GENERATED ALWAYS",
                                       f"Leave {f.name!r} out of the insert (or of the source, for INSERT *)")
        return out

    def set_values(self, clause: MergeClause, label: str, schema: Schema, new: set[str]) -> list[Column | None]:
        """The values the clause sets; None for a generated or identity column it does not set."""
        keep_target = clause.action == "update"
        computed = {**generated_columns(schema), **identity_columns(schema)}
        if clause.star:
            out: list[Column | None] = []
            missing = []
            for f in schema.fields:
                src = self.source_names.get(f.name.lower())
                if src is not None:
                    out.append(quoted(self.s, src).cast(spark_type(f.type)))
                elif f.name in computed:
                    out.append(None)
                elif self.spec.schema_evolution:
                    out.append(self.kept(f, new) if keep_target else _null(f))
                else:
                    missing.append(f.name)
            if missing:
                raise MergeClauseError(
                    self.path, label, "unresolved",
                    f"{'UPDATE SET *' if keep_target else 'INSERT *'} sets every column of the table from the "
                    f"source column of its name, and the source has no {', '.join(map(repr, missing))} "
                    f"(its columns: {', '.join(f.name for f in self.source_fields)})",
                    "Add the columns to the source, name the columns to set instead of *, "
                    "or use with_schema_evolution() (then they keep their value, or are NULL in an insert)")
            return out
        # A NOT MATCHED BY SOURCE clause sees the target only: it cannot name a column the MERGE adds.
        assigned = self.assigned(clause, label, self.target if clause.kind == NOT_MATCHED_BY_SOURCE else schema)
        out = []
        for f in schema.fields:
            ops = assigned.get(f.name.lower())
            if ops:
                out.append(self.rebuilt(f.type, quoted(self.t, f.name), ops, label, f.name))
            elif f.name in computed:
                out.append(None)
            else:
                out.append(self.kept(f, new) if keep_target else _null(f))
        return out

    def kept(self, f: Field, new: set[str]) -> Column:
        """A target column's value in a row that keeps it (NULL for a column the MERGE adds)."""
        return _null(f) if f.name.lower() in new else quoted(self.t, f.name)

    def rebuilt(self, type_: Any, current: Column, ops: list[tuple[list[str], Column]], label: str,
                where: str) -> Column:
        """The value of a column (or struct field) given its assignments: a whole-value one is
        cast to the type; field ones rebuild the struct from its fields (as Delta does: a NULL
        struct becomes one of NULL fields with the assigned ones set)."""
        whole = [v for parts, v in ops if not parts]
        if whole:
            return whole[0].cast(spark_type(type_))
        if not (isinstance(type_, dict) and type_.get("type") == "struct"):
            raise MergeClauseError(self.path, label, "unresolved",
                                   f"UPDATE SET names a field of {where!r}, which is a {type_name(type_)}, not a struct")
        fields = type_["fields"]
        names = {f["name"].lower(): f["name"] for f in fields}
        for parts, _ in ops:
            if parts[0].lower() not in names:
                raise MergeClauseError(self.path, label, "unresolved",
                                       f"UPDATE SET names {where}.{parts[0]}, which {where!r} does not have "
                                       f"(its fields: {', '.join(names.values())})")
        members = []
        for f in fields:
            sub = [(parts[1:], v) for parts, v in ops if parts[0].lower() == f["name"].lower()]
            inner = current.getField(f["name"])
            value = self.rebuilt(f["type"], inner, sub, label, f"{where}.{f['name']}") if sub else inner
            members.append(value.alias(f["name"]))
        return F.struct(*members)


def _null(f: Field) -> Column:
    return F.lit(None).cast(spark_type(f.type))


def resolve(path: str, target: Schema, source: DataFrame, spec: MergeSpec) -> ResolvedMerge:
    """Check `spec` against Delta's rules and the two sides' columns; compile its clauses."""
    spec.check(path)
    r = _Resolver(path, target, source, spec)
    r.check_condition(spec.on, "the ON condition")
    r.analyze(MATCHED, "the ON condition", lambda frame: frame, f"the ON condition {spec.on!r}")
    new_fields = r.evolved()
    schema = Schema(target.fields + new_fields)
    new = {f.name.lower() for f in new_fields}
    resolved = []
    for index, (clause, number) in enumerate(spec.numbered()):
        label = clause.describe(number)
        if clause.condition is not None:
            r.check_condition(clause.condition, label)
        try:
            with quiet():
                condition = (F.lit(True) if clause.condition is None else
                             clause.condition if isinstance(clause.condition, Column) else F.expr(clause.condition))
                values = () if clause.action == "delete" else r.values(clause, label, schema, new)
        except AnalysisException as e:  # a syntax error, raised as soon as the text is parsed
            raise r.refusal(e, clause.kind, label, f"the clause {_text(clause)}") from e
        r.analyze(clause.kind, label, _judged(condition, values), f"the clause {_text(clause)}")
        resolved.append(ResolvedClause(clause, index, label, condition, values))
    copy = tuple(r.kept(f, new) for f in schema.fields)
    return ResolvedMerge(spec, schema, new_fields, tuple(resolved), copy)


def _judged(condition: Column, values: Sequence[Column]) -> Callable[[DataFrame], DataFrame]:
    def build(frame: DataFrame) -> DataFrame:
        out = frame.filter(condition)
        return out.select(*values) if values else out
    return build


def _text(clause: MergeClause) -> str:
    """A short SQL rendering of a clause, for messages."""
    cond = f" AND {expr_text(clause.condition)}" if clause.condition is not None else ""
    if clause.action == "delete":
        act = "DELETE"
    elif clause.star:
        act = "INSERT *" if clause.action == "insert" else "UPDATE SET *"
    else:
        sets = ", ".join(f"{k} = {expr_text(v)}" for k, v in _items(clause.assignments))
        act = f"INSERT ({sets})" if clause.action == "insert" else f"UPDATE SET {sets}"
    return f"'{clause.heading}{cond} THEN {act}'"


def _items(assignments: Mapping[str, Expr] | None) -> list[tuple[str, Expr]]:
    return list((assignments or {}).items())
