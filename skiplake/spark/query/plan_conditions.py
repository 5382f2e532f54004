"""A Filter's condition as Spark SQL, read from the plan's text alone (Spark Connect).

A Spark Connect client sees Spark's plans only as the text `EXPLAIN` prints, where literals
appear unquoted and untyped: `(i_item_id#12 = AAAAAAAAICAAAAAA)`, `(d_date#3 >= 2000-01-01)`.
A conjunct becomes SQL here only where its meaning is certain:

- its shape is one Spark prints exactly so: a comparison in its own parentheses, `IN (...)`,
  `INSET ...`, `isnotnull(...)`, `isnull(...)`, and ANDs and ORs of those, each in parentheses;
- its column is a plain column of the relation (no cast, no function), whose type is known;
- its literal reads as a value of that type: digits for numbers, ISO dates and timestamps,
  true or false; a string only when the query itself holds that very string as a literal, and
  no string literal of the query holds anything that could pass for the plan's punctuation
  (parentheses, commas, `#`, comparison signs, AND, OR, IN).

Anything else is left out of the AND: a condition with fewer conjuncts selects more files,
so a conjunct this module cannot read costs pruning, never rows.
"""
from __future__ import annotations

import re
from typing import Mapping

from skiplake.expr.sql import sql_name, sql_string
from skiplake.log.schema import INTEGER_TYPES
from skiplake.spark.query.plan_text import _closes_at_end, attribute, split_top

_INTEGER = re.compile(r"^-?\d+$")
_DECIMAL = re.compile(r"^-?\d+(?:\.\d+)?$")
_FLOAT = re.compile(r"^-?\d+(?:\.\d+)?(?:E-?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?$")
_NULL_TEST = re.compile(r"^is(not)?null\(([^()\s]+)\)$")
_IN = re.compile(r"^([^()\s]+) IN \((.*)\)$", re.S)
_INSET = re.compile(r"^([^()\s]+) INSET (.*)$", re.S)
# Spark prints comparisons as `(left op right)`; the longer signs first.
_COMPARISONS = ("<=>", "<=", ">=", "=", "<", ">")
_FLIPPED = {"<=>": "<=>", "<=": ">=", ">=": "<=", "=": "=", "<": ">", ">": "<"}
# A string literal that cannot be taken for the plan text's punctuation: words of letters,
# digits and a few signs, single spaces between them, none of them an operator word.
_SAFE_STRING = re.compile(r"^[A-Za-z0-9_.:/@+\-]+(?: [A-Za-z0-9_.:/@+\-]+)*$")
_OPERATOR_WORDS = {"AND", "OR", "IN", "INSET", "NOT", "IS"}


def readable_strings(literals: set[str]) -> frozenset[str]:
    """The string literals a plan's text may be read for: all of the query's, when every one of
    them is free of the plan's punctuation; none otherwise (one could disguise another)."""
    for value in literals:
        if not _SAFE_STRING.match(value) or any(w in _OPERATOR_WORDS for w in value.split(" ")):
            return frozenset()
    return frozenset(literals)


def condition_sql(text: str, types: Mapping[str, str], strings: frozenset[str]) -> str | None:
    """Spark SQL of the conjuncts of a Filter's printed condition that can be read for certain
    (`types`: the relation's column types by name, as the Delta schema names them); None when
    none can."""
    parts = [sql for sql in (_strict(c, types, strings) for c in _and_parts(text.strip())) if sql]
    if not parts:
        return None
    return " AND ".join(f"({p})" for p in parts)


def _and_parts(text: str) -> list[str]:
    """The conjuncts of `(a AND b)`, recursively; the text itself when it is not such an AND
    (an AND whose parentheses hold more than one ` AND ` at their top is not Spark's)."""
    pieces = _binary(text, " AND ")
    if pieces is None:
        return [text]
    return _and_parts(pieces[0]) + _and_parts(pieces[1])


def _binary(text: str, sep: str) -> tuple[str, str] | None:
    if not (text.startswith("(") and text.endswith(")") and _closes_at_end(text)):
        return None
    pieces = split_top(text[1:-1], sep)
    return (pieces[0], pieces[1]) if len(pieces) == 2 else None


def _strict(text: str, types: Mapping[str, str], strings: frozenset[str]) -> str | None:
    """SQL of a whole condition, or None when any part of it cannot be read."""
    for sep, word in ((" AND ", "AND"), (" OR ", "OR")):
        pieces = _binary(text, sep)
        if pieces is not None:
            left, right = (_strict(p, types, strings) for p in pieces)
            return None if left is None or right is None else f"({left}) {word} ({right})"
    m = _NULL_TEST.match(text)
    if m is not None:
        column = _column(m.group(2), types)
        return None if column is None else f"{sql_name(column[0])} IS {'NOT ' if m.group(1) else ''}NULL"
    if _IN.match(text) or _INSET.match(text):
        return _in_list(text, types, strings)
    for op in _COMPARISONS:
        pieces = _binary(text, f" {op} ")
        if pieces is not None:
            return _comparison(pieces, op, types, strings)
    return None


def _in_list(text: str, types: Mapping[str, str], strings: frozenset[str]) -> str | None:
    """SQL of `a IN (1,2,3)`, or of the optimizer's `a INSET 1, 2, 3` for lists over ten values."""
    listed = _IN.match(text)
    m = listed or _INSET.match(text)
    assert m is not None
    column = _column(m.group(1), types)
    if column is None:
        return None
    items = split_top(m.group(2), ",") if listed is not None else m.group(2).split(", ")
    found = [_literal(i.strip(), column[1], strings) for i in items]
    values = [v for v in found if v is not None]
    if not values or len(values) < len(found):
        return None
    return f"{sql_name(column[0])} IN ({', '.join(values)})"


def _comparison(pieces: tuple[str, str], op: str, types: Mapping[str, str], strings: frozenset[str]) -> str | None:
    """SQL of a comparison of one column with a literal, either way round."""
    left, right = _column(pieces[0], types), _column(pieces[1], types)
    if (left is None) == (right is None):
        return None  # two columns, or none: not a filter on one column's values
    column, literal, sign = (left, pieces[1], op) if left is not None else (right, pieces[0], _FLIPPED[op])
    assert column is not None
    value = _literal(literal, column[1], strings)
    return None if value is None else f"{sql_name(column[0])} {sign} {value}"


def _column(text: str, types: Mapping[str, str]) -> tuple[str, str] | None:
    """(name, type) of a plain attribute of the relation, else None."""
    a = attribute(text)
    if a is None or a.name not in types:
        return None
    return a.name, types[a.name]


def _literal(text: str, type_: str, strings: frozenset[str]) -> str | None:
    """SQL of a printed literal of the column's type, or None when it does not read as one for sure."""
    if type_ in INTEGER_TYPES:
        return text if _INTEGER.match(text) else None
    if type_.startswith("decimal"):
        return text if _DECIMAL.match(text) else None
    if type_ in ("double", "float"):
        return f"CAST({text} AS {type_.upper()})" if _FLOAT.match(text) else None
    if type_ == "date":
        return f"DATE'{text}'" if _DATE.match(text) else None
    if type_ in ("timestamp", "timestamp_ntz"):
        kind = "TIMESTAMP" if type_ == "timestamp" else "TIMESTAMP_NTZ"
        return f"{kind}'{text}'" if _TIMESTAMP.match(text) else None
    if type_ == "boolean":
        return text if text in ("true", "false") else None
    if type_ == "string":
        return sql_string(text) if text in strings else None
    return None
