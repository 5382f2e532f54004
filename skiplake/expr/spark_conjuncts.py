"""The AND-conjuncts of a condition as Spark writes it (`Expression.sql`), as sqlglot trees.

`lake.sql` reads back the filters of every relation in Spark's optimized plan; sqlglot parses each
in about a millisecond, and a TPC-DS query has dozens. Spark's text is regular: every binary
operator in parentheses, keywords in upper case, strings in single quotes. So the conjuncts are
split here, and the commonest, a null test, comparison or IN list of a column (qualified or not)
with literals (`(t.c IS NOT NULL)`, `(t.c = 2001L)`, `(t.d >= DATE '2000-01-27')`,
`(t.p <= 1.50BD)`, `(t.s IN ('a', 'b'))`), built directly as the very trees sqlglot would give
(tests/unit/test_spark_conjuncts.py compares the two); any other conjunct goes to sqlglot on its
own (mostly disjunctions). Text that this reading cannot
vouch for (backslashes, backticks, CASE or BETWEEN, an OR beside an AND) gets None: the caller
parses it whole.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Callable

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from skiplake.errors import InvalidPredicateError

_QUOTED = r"'[^'\\]*'"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A column as Spark's SQL names it: up to two qualifiers (`date_dim.d_year`, the query's alias).
_NAME = rf"{_IDENT}(?:\.{_IDENT}){{0,2}}"
# Literals as Spark writes them: integers (`2001`, `-5`, longs `2001L`), decimals (`-7.00BD`),
# strings, dates.
_LITERAL = rf"(?:-?[0-9]+(?:L|(?:\.[0-9]+)?BD)?|{_QUOTED}|DATE {_QUOTED})"
# Tokens that matter for splitting: quoted strings (skipped whole), parentheses, AND, OR.
_SCAN = re.compile(rf"{_QUOTED}|[()]| AND | OR ")
# Backslashes, backticks, double quotes, comments, line breaks, CASE and BETWEEN (whose AND is
# not a conjunction): not Spark's regular text, or not safely split here.
_UNSURE = re.compile(r"[\\`\"\n\r\t]|--|/\*|\b(?:CASE|BETWEEN)\b", re.IGNORECASE)
# Every AND and OR outside quotes, however spelled: each must be Spark's ` AND ` / ` OR `.
_CONNECTIVE = re.compile(rf"{_QUOTED}|(?i:\b(?:AND|OR)\b)")

_NULL_TEST = re.compile(rf"(isnotnull|isnull)\(({_NAME})\)")
_IS_NULL = re.compile(rf"({_NAME}) IS (NOT )?NULL")
_COMPARISON = re.compile(rf"({_NAME}) (=|<>|<=|>=|<|>) ({_LITERAL})")
_IN_LIST = re.compile(rf"({_NAME}) IN \(({_LITERAL}(?:, {_LITERAL})*)\)")
_LIST_ITEM = re.compile(_LITERAL)
_COMPARISONS: dict[str, type[exp.Expression]] = {
    "=": exp.EQ, "<>": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE}
# Words sqlglot reads as something other than a column name (DATE, NULL, TRUE, IF ...).
_KEYWORDS = frozenset(
    [k.upper() for k in (*Spark.Tokenizer.KEYWORDS, *Spark.Parser.NO_PAREN_FUNCTION_PARSERS)]
    + [token.name for token in Spark.Parser.NO_PAREN_FUNCTIONS])  # keyed by token type


def spark_conjuncts(text: str, parse: Callable[[str], exp.Expression]) -> list[exp.Expression] | None:
    """The conjuncts of `text` (sqlglot's trees, outer parentheses removed, as the caller's own
    splitting of a whole parse gives them); `parse` is the caller's sqlglot parse, used for the
    conjuncts of other forms. None when the text is not in a form this reading vouches for."""
    if _UNSURE.search(text) or not _connectives_regular(text):
        return None
    pieces = _split(text)
    if pieces is None:
        return None
    out = []
    for piece in pieces:
        tree = _simple(piece)
        if tree is None:
            # In parentheses, as in the whole text: alone, a leading keyword-named column
            # (`analyze = 1`) would read as a statement.
            try:
                tree = parse(f"({piece})")
            except InvalidPredicateError:
                return None  # the whole text may still parse: leave it to the caller
            if not isinstance(tree, exp.Paren):
                return None
            tree = tree.this
        out.append(tree)
    return out


def _connectives_regular(text: str) -> bool:
    for m in _CONNECTIVE.finditer(text):
        word = m.group()
        if word.startswith("'"):
            continue
        if word not in ("AND", "OR") or text[m.start() - 1:m.start()] != " " or text[m.end():m.end() + 1] != " ":
            return False
    return True


def _split(text: str) -> list[str] | None:
    text = _strip_parens(text.strip())
    pieces, depth, start, has_or = [], 0, 0, False
    for m in _SCAN.finditer(text):
        token = m.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0 and token == " AND ":
            pieces.append(text[start:m.start()])
            start = m.end()
        elif depth == 0 and token == " OR ":
            has_or = True
    if len(pieces) == 0:
        return [text]
    if has_or:
        return None  # precedence would decide what the conjuncts are: leave it to sqlglot
    pieces.append(text[start:])
    out: list[str] = []
    for piece in pieces:
        inner = _split(piece)
        if inner is None:
            return None
        out += inner
    return out


def _strip_parens(text: str) -> str:
    # Unlike plan_text's (lines of Spark's plan text), parentheses inside quoted strings are skipped.
    while text.startswith("(") and text.endswith(")") and _closes_at_end(text):
        text = text[1:-1].strip()
    return text


def _closes_at_end(text: str) -> bool:
    depth = 0
    for m in _SCAN.finditer(text):
        token = m.group()
        if token in ("(", ")"):
            depth += 1 if token == "(" else -1
            if depth == 0:
                return m.end() == len(text)
    return False


def _simple(text: str) -> exp.Expression | None:
    """The sqlglot tree of a null test, comparison or IN list of a column with literals."""
    m = _NULL_TEST.fullmatch(text)
    if m and _column_name(m.group(2)):
        return exp.Anonymous(this=m.group(1), expressions=[_column(m.group(2))])
    m = _IS_NULL.fullmatch(text)
    if m and _column_name(m.group(1)):
        test = exp.Is(this=_column(m.group(1)), expression=exp.Null())
        return exp.Not(this=test) if m.group(2) else test
    m = _COMPARISON.fullmatch(text)
    if m and _column_name(m.group(1)):
        return _COMPARISONS[m.group(2)](this=_column(m.group(1)), expression=_literal(m.group(3)))
    m = _IN_LIST.fullmatch(text)
    if m and _column_name(m.group(1)):
        return exp.In(this=_column(m.group(1)), expressions=[_literal(v) for v in _LIST_ITEM.findall(m.group(2))])
    return None


def _column_name(name: str) -> bool:
    return not any(part.upper() in _KEYWORDS for part in name.split("."))


def _column(name: str) -> exp.Column:
    parts = [exp.Identifier(this=part, quoted=False) for part in reversed(name.split("."))]
    return exp.Column(**dict(zip(("this", "table", "db"), parts)))


def _literal(text: str) -> exp.Expression:
    if text.startswith("'"):
        return exp.Literal.string(text[1:-1])
    if text.startswith("DATE "):
        return exp.Cast(this=exp.Literal.string(text[6:-1]), to=exp.DataType.build("DATE"))
    if text.startswith("-"):
        return exp.Neg(this=_literal(text[1:]))
    if text.endswith("BD"):
        # sqlglot's reading: DECIMAL(digits, digits after the point), from the text as written
        _, digits, exponent = Decimal(text[:-2]).as_tuple()
        precision, scale = len(digits), -int(exponent)
        return exp.TryCast(this=exp.Literal.string(text[:-2]),
                           to=exp.DataType.build(f"DECIMAL({max(precision, scale)}, {scale})"))
    if text.endswith("L"):
        return exp.TryCast(this=exp.Literal.number(text[:-1]), to=exp.DataType.build("BIGINT"))
    return exp.Literal.number(text)
