"""skiplake's own small grammar, for the statements sqlglot reads only as raw commands or not at
all: OPTIMIZE, VACUUM, RESTORE, DESCRIBE HISTORY | DETAIL, SHOW TBLPROPERTIES, CONVERT TO DELTA,
and ALTER TABLE ... UNSET TBLPROPERTIES | CLUSTER BY NONE.

`parse_own(text)` returns the statement's record, or None when the text does not start like one
of these (sqlglot then reads it). A statement that starts like one and goes wrong raises
SqlStatementError at the offending word. Embedded expressions (OPTIMIZE's WHERE, RESTORE's
TIMESTAMP AS OF) are kept as the text between their neighbours."""
from __future__ import annotations

from typing import Callable

from skiplake.errors import SqlStatementError
from skiplake.statements.records import (
    AlterTable,
    ConvertToDelta,
    DescribeDetail,
    DescribeHistory,
    Optimize,
    Restore,
    ShowProperties,
    Statement,
    TableName,
    Vacuum,
)
from skiplake.statements.tokens import Token, tokenize


class Reader:
    """A cursor over a statement's tokens; each `expect_*` raises at the current token."""

    def __init__(self, text: str) -> None:
        """The tokens of `text`, at the first."""
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    @property
    def current(self) -> Token | None:
        """The token at the cursor (None at the end)."""
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def at_end(self) -> bool:
        """Whether every token was taken."""
        return self.i >= len(self.tokens)

    def error(self, expected: str) -> SqlStatementError:
        """The error for finding something other than `expected` at the cursor."""
        token = self.current
        if token is None:
            return SqlStatementError(self.text, f"expected {expected}, found the end of the statement", len(self.text))
        return SqlStatementError(self.text, f"expected {expected}, found {token.text!r}", token.start)

    def accept(self, *words: str) -> bool:
        """Take the next tokens when they are these keywords (or symbols), in order."""
        j = self.i
        for w in words:
            if j >= len(self.tokens):
                return False
            t = self.tokens[j]
            if not (t.is_word(w) or (t.kind == "symbol" and t.text == w)):
                return False
            j += 1
        self.i = j
        return True

    def expect(self, *words: str) -> None:
        """Take these keywords, or raise."""
        if not self.accept(*words):
            raise self.error(" ".join(words))

    def name(self, what: str = "a name") -> str:
        """Take a name (a word or a quoted name)."""
        t = self.current
        if t is None or t.kind not in ("word", "quoted"):
            raise self.error(what)
        self.i += 1
        return t.name

    def string(self, what: str = "a string") -> str:
        """Take a string literal: its value."""
        t = self.current
        if t is None or t.kind != "string":
            raise self.error(what)
        self.i += 1
        return t.value

    def number(self, what: str = "a number") -> str:
        """Take a number: its text."""
        t = self.current
        if t is None or t.kind != "number":
            raise self.error(what)
        self.i += 1
        return t.text

    def table(self) -> TableName:
        """`name`, `db.name` or ``delta.`path` `` (a path in backticks after `delta.`)."""
        first = self.current
        head = self.name("a table name")
        if not self.accept("."):
            return TableName(name=head)
        second = self.current
        tail = self.name("a table name after '.'")
        if first is not None and first.is_word("DELTA") and second is not None and second.kind == "quoted":
            return TableName(path=tail)
        return TableName(name=tail, database=head)

    def names(self) -> tuple[str, ...]:
        """`(a, b, ...)` or `a, b, ...`."""
        parens = self.accept("(")
        out = [self.name("a column name")]
        while self.accept(","):
            out.append(self.name("a column name"))
        if parens:
            self.expect(")")
        return tuple(out)

    def rest_until(self, *stops: str) -> tuple[str, int]:
        """The text from the current token up to the first of the keywords `stops` outside
        parentheses (or the end), and where it starts."""
        start_index = self.i
        depth = 0
        while not self.at_end():
            t = self.tokens[self.i]
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
            elif depth == 0 and t.kind == "word" and t.text.upper() in stops:
                break
            self.i += 1
        if self.i == start_index:
            return "", len(self.text) if self.at_end() else self.tokens[self.i].start
        start = self.tokens[start_index].start
        return self.text[start:self.tokens[self.i - 1].end], start

    def done(self) -> None:
        """Raise unless every token was taken."""
        if not self.at_end():
            raise self.error("the end of the statement")


def _optimize(r: Reader) -> Statement:
    table = r.table()
    if r.accept("FULL"):
        r.done()
        return Optimize(r.text, table, full=True)
    where = None
    if r.accept("WHERE"):
        where, _ = r.rest_until("ZORDER")
        if not where:
            raise r.error("a condition after WHERE")
    zorder: tuple[str, ...] = ()
    if r.accept("ZORDER", "BY"):
        zorder = r.names()
    r.done()
    return Optimize(r.text, table, where=where, zorder_by=zorder)


def _vacuum(r: Reader) -> Statement:
    table = r.table()
    hours: float | None = None
    if r.accept("RETAIN"):
        hours = float(r.number("a number of hours after RETAIN"))
        r.expect("HOURS")
    dry = r.accept("DRY", "RUN")
    r.done()
    return Vacuum(r.text, table, hours, dry)


def _restore(r: Reader) -> Statement:
    r.accept("TABLE")
    table = r.table()
    r.accept("TO")
    if r.accept("VERSION", "AS", "OF"):
        version = r.number("a version number")
        r.done()
        if not version.isdigit():
            raise SqlStatementError(r.text, f"version {version!r} is not a whole number", r.tokens[r.i - 1].start)
        return Restore(r.text, table, version=int(version))
    if r.accept("TIMESTAMP", "AS", "OF"):
        t = r.current
        if t is not None and t.kind == "string" and r.i == len(r.tokens) - 1:
            r.i += 1
            return Restore(r.text, table, timestamp=t.value)
        expression, _ = r.rest_until()
        if not expression:
            raise r.error("a timestamp")
        return Restore(r.text, table, timestamp=expression, timestamp_is_literal=False)
    raise r.error("VERSION AS OF or TIMESTAMP AS OF")


def _describe(r: Reader) -> Statement | None:
    if r.accept("HISTORY"):
        table = r.table()
        limit = None
        if r.accept("LIMIT"):
            limit = int(r.number("a row count after LIMIT"))
        r.done()
        return DescribeHistory(r.text, table, limit)
    if r.accept("DETAIL"):
        table = r.table()
        r.done()
        return DescribeDetail(r.text, table)
    return None


def _show(r: Reader) -> Statement | None:
    if not r.accept("TBLPROPERTIES"):
        return None
    table = r.table()
    key = None
    if r.accept("("):
        t = r.current
        if t is not None and t.kind == "string":
            key = r.string()
        else:  # a dotted key, unquoted: delta.appendOnly
            parts = [r.name("a property key")]
            while r.accept("."):
                parts.append(r.name("a property key"))
            key = ".".join(parts)
        r.expect(")")
    r.done()
    return ShowProperties(r.text, table, key)


def _convert(r: Reader) -> Statement:
    r.expect("TO", "DELTA")
    kind = r.name("parquet.`path`")
    if kind.lower() != "parquet":
        raise SqlStatementError(r.text, f"CONVERT TO DELTA converts Parquet directories (parquet.`path`), not {kind}",
                                r.tokens[r.i - 1].start)
    r.expect(".")
    path = r.name("a path in backticks")
    stats = not r.accept("NO", "STATISTICS")
    schema = None
    if r.accept("PARTITIONED", "BY"):
        r.expect("(")
        start = r.current.start if r.current is not None else len(r.text)
        depth = 1
        while not r.at_end():
            t = r.tokens[r.i]
            depth += (t.text == "(") - (t.text == ")")
            if depth == 0:
                break
            r.i += 1
        if r.at_end():
            raise r.error("')'")
        schema = r.text[start:r.tokens[r.i].start].strip()
        r.i += 1
    r.done()
    return ConvertToDelta(r.text, path, schema, stats)


def _alter(r: Reader) -> Statement | None:
    r.expect("TABLE")
    table = r.table()
    if r.accept("UNSET", "TBLPROPERTIES"):
        if_exists = r.accept("IF", "EXISTS")
        r.expect("(")
        keys = [r.string("a property key in quotes")]
        while r.accept(","):
            keys.append(r.string("a property key in quotes"))
        r.expect(")")
        r.done()
        return AlterTable(r.text, table, "unset_properties", names=tuple(keys), if_exists=if_exists)
    if r.accept("CLUSTER", "BY", "NONE"):
        r.done()
        return AlterTable(r.text, table, "cluster_by", names=())
    return None


_HEADS: dict[str, Callable[[Reader], Statement | None]] = {
    "OPTIMIZE": _optimize, "VACUUM": _vacuum, "RESTORE": _restore, "DESCRIBE": _describe, "DESC": _describe,
    "SHOW": _show, "CONVERT": _convert, "ALTER": _alter,
}


def parse_own(text: str) -> Statement | None:
    """The statement, when it is one this grammar reads; else None."""
    r = Reader(text)
    head = r.current
    if head is None or head.kind != "word" or head.text.upper() not in _HEADS:
        return None
    r.i += 1
    return _HEADS[head.text.upper()](r)
