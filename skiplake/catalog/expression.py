"""Glue's partition expression language: parse, bind to the table's partition keys, evaluate.

    country = 'US' AND category IN ('Shoes', "Books") AND year > '2018'
    creationDate BETWEEN '2020-08-01' AND '2020-08-31' OR NOT (month <> 2) AND name LIKE 'a_c%'

Operators `= <> != > < >= <=` (`< >` with a space is `<>`), BETWEEN (inclusive), IN, LIKE (`%`
and `_` only, no regular expressions), IS [NOT] NULL, AND, OR, NOT, parentheses. Strings in
single or double quotes (a doubled quote inside is one quote). Values are compared by the key's
declared type: integers numerically, dates as dates (`2023-9-01` is September 1st), strings as
strings, the numbers of a double, float or decimal key as Spark orders doubles (NaN equals
itself and is above every other value). A literal that cannot be cast to its key's type, or a
key the table does not have, is an InvalidInputError that names it.

Stored partition values are strings; one that does not parse as its key's type (possible when no
index validated it) makes comparisons on it unknown, so it never matches.
"""
from __future__ import annotations

import datetime as dt
import functools
import operator
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Mapping, Sequence, Union

from skiplake.errors import InvalidInputError

INTEGER_TYPES = ("int", "integer", "bigint", "long", "tinyint", "smallint")
STRING_TYPES = ("string", "char", "varchar")
DECIMAL_TYPES = ("double", "float", "decimal")


def type_kind(glue_type: str) -> str:
    """'integer', 'date', 'string', 'number', 'boolean' or 'other' for a Glue/Hive column type."""
    base = glue_type.strip().lower().split("(")[0].strip()
    if base in INTEGER_TYPES:
        return "integer"
    if base == "date":
        return "date"
    if base in STRING_TYPES:
        return "string"
    if base in DECIMAL_TYPES:
        return "number"
    if base == "boolean":
        return "boolean"
    return "other"


# ------------------------------------------------------------------ tree


@dataclass(frozen=True)
class Key:
    """A partition key an expression may name, as the table declares it."""
    name: str     # the key's name as the table declares it
    kind: str     # type_kind of its type
    type: str     # the declared type


@dataclass(frozen=True)
class Compare:
    """`key op value`."""
    key: Key
    op: str       # = <> > < >= <=
    value: Any    # typed literal


@dataclass(frozen=True)
class Between:
    """`key BETWEEN low AND high`, both bounds included."""
    key: Key
    low: Any
    high: Any


@dataclass(frozen=True)
class In:
    """`key IN (values)`."""
    key: Key
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Like:
    """`key LIKE pattern`, with the pattern as a regular expression (like_regex)."""
    key: Key
    pattern: str
    regex: re.Pattern


@dataclass(frozen=True)
class IsNull:
    """`key IS NULL`, or `key IS NOT NULL` when `negated`."""
    key: Key
    negated: bool = False


@dataclass(frozen=True)
class And:
    """The AND of its children."""
    children: tuple["Expr", ...]


@dataclass(frozen=True)
class Or:
    """The OR of its children."""
    children: tuple["Expr", ...]


@dataclass(frozen=True)
class Not:
    """The NOT of its child."""
    child: "Expr"


Expr = Union[Compare, Between, In, Like, IsNull, And, Or, Not]


def conjuncts(expr: Expr) -> list[Expr]:
    """The AND parts of `expr`, nested ANDs flattened; `[expr]` when it is no AND."""
    if isinstance(expr, And):
        out: list[Expr] = []
        for c in expr.children:
            out.extend(conjuncts(c))
        return out
    return [expr]


# ------------------------------------------------------------------ tokens

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<op><\s*>|!=|<=|>=|=|<|>)
  | (?P<punct>[(),])
  | (?P<ident>`[^`]+`|[A-Za-z_][A-Za-z0-9_.$]*)
""", re.VERBOSE)


@dataclass(frozen=True)
class _Tok:
    kind: str     # str, num, op, punct, ident, word (a keyword), end
    text: str
    pos: int


_WORDS = {"and", "or", "not", "in", "between", "like", "is", "null"}


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise InvalidInputError(f"Unsupported expression {text!r}: unexpected {text[pos:pos + 10]!r} at "
                                    f"position {pos}")
        kind = m.lastgroup or ""
        tok = m.group(0)
        if kind == "op":
            tok = "<>" if re.fullmatch(r"<\s*>", tok) or tok == "!=" else tok
        if kind == "ident" and tok.lower() in _WORDS:
            kind, tok = "word", tok.lower()
        if kind != "ws":
            out.append(_Tok(kind, tok, pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


# ------------------------------------------------------------------ parser


class _Parser:
    def __init__(self, text: str, keys: Mapping[str, Key]) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.keys = keys

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def fail(self, what: str, tok: _Tok | None = None) -> InvalidInputError:
        tok = tok or self.peek()
        found = "the end" if tok.kind == "end" else repr(tok.text)
        return InvalidInputError(f"Unsupported expression {self.text!r}: expected {what}, found {found} "
                                 f"at position {tok.pos}")

    def word(self, w: str) -> bool:
        if self.peek().kind == "word" and self.peek().text == w:
            self.i += 1
            return True
        return False

    def parse(self) -> Expr:
        if self.peek().kind == "end":
            raise InvalidInputError("Unsupported expression '': it is empty")
        expr = self.disjunction()
        if self.peek().kind != "end":
            raise self.fail("AND, OR or the end")
        return expr

    def disjunction(self) -> Expr:
        parts = [self.conjunction()]
        while self.word("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conjunction(self) -> Expr:
        parts = [self.negation()]
        while self.word("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def negation(self) -> Expr:
        if self.word("not"):
            return Not(self.negation())
        if self.peek().kind == "punct" and self.peek().text == "(":
            self.take()
            inner = self.disjunction()
            if not (self.peek().kind == "punct" and self.peek().text == ")"):
                raise self.fail("')'")
            self.take()
            return inner
        return self.predicate()

    def key(self) -> Key:
        tok = self.take()
        if tok.kind != "ident":
            raise self.fail("a partition key", tok)
        name = tok.text.strip("`")
        key = self.keys.get(name.lower())
        if key is None:
            known = ", ".join(k.name for k in self.keys.values()) or "none"
            raise InvalidInputError(f"Unsupported expression {self.text!r}: {name!r} is not a partition key of "
                                    f"the table (its partition keys: {known})")
        return key

    def literal(self, key: Key) -> Any:
        tok = self.take()
        if tok.kind == "str":
            raw: Any = tok.text[1:-1].replace(tok.text[0] * 2, tok.text[0])
        elif tok.kind == "num":
            raw = tok.text
        else:
            raise self.fail("a literal value", tok)
        return cast_literal(raw, key, self.text)

    def predicate(self) -> Expr:
        key = self.key()
        tok = self.peek()
        if tok.kind == "op":
            self.take()
            return Compare(key, tok.text, self.literal(key))
        negated = self.word("not")
        if self.word("between"):
            low = self.literal(key)
            if not self.word("and"):
                raise self.fail("AND in BETWEEN")
            node: Expr = Between(key, low, self.literal(key))
        elif self.word("in"):
            node = In(key, self.in_list(key))
        elif self.word("like"):
            node = self.like(key)
        elif self.word("is"):
            not_null = self.word("not")
            if not self.word("null"):
                raise self.fail("NULL after IS")
            if negated:
                raise self.fail("a comparison")
            return IsNull(key, not_null)
        else:
            raise self.fail("a comparison operator, BETWEEN, IN, LIKE or IS NULL")
        return Not(node) if negated else node

    def in_list(self, key: Key) -> tuple[Any, ...]:
        if not (self.peek().kind == "punct" and self.peek().text == "("):
            raise self.fail("'(' after IN")
        self.take()
        values = [self.literal(key)]
        while self.peek().kind == "punct" and self.peek().text == ",":
            self.take()
            values.append(self.literal(key))
        if not (self.peek().kind == "punct" and self.peek().text == ")"):
            raise self.fail("',' or ')' in the IN list")
        self.take()
        return tuple(values)

    def like(self, key: Key) -> Like:
        tok = self.take()
        if tok.kind != "str":
            raise self.fail("a quoted LIKE pattern", tok)
        pattern = tok.text[1:-1].replace(tok.text[0] * 2, tok.text[0])
        return Like(key, pattern, like_regex(pattern))


def like_regex(pattern: str) -> re.Pattern:
    """`%` is any run of characters, `_` one character; everything else is literal."""
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def parse_date(text: str) -> dt.date:
    """A date as Glue reads one, `Y-M-D` with unpadded parts allowed (`2023-9-1`); ValueError if it is not one."""
    m = _DATE.fullmatch(text)
    if m is None:
        raise ValueError(text)
    return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


_INTEGER = re.compile(r"[-+]?\d+")
_DATE = re.compile(r"\s*(\d{1,4})-(\d{1,2})-(\d{1,2})\s*")


@functools.total_ordering
class _NaN:
    """NaN of a double, float or decimal key, ordered as Spark orders doubles: equal to itself and
    above every number (+Infinity too). Decimal's own NaN refuses `<` and `>`, and Spark reads a
    partition `x=NaN` as a value that `x > 1` matches: the catalog must return it."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __lt__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash("NaN")

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()


def typed_value(raw: str, kind: str) -> Any:
    """A string (stored partition value or literal) as a value of `kind`; ValueError if it is not one."""
    if kind == "integer":
        text = raw.strip()
        if not _INTEGER.fullmatch(text):
            raise ValueError(raw)
        return int(text)
    if kind == "date":
        return parse_date(raw)
    if kind == "number":
        try:
            number = Decimal(raw.strip())
        except InvalidOperation:
            raise ValueError(raw) from None
        return NAN if number.is_nan() else number
    if kind == "boolean":
        if raw.strip().lower() not in ("true", "false"):
            raise ValueError(raw)
        return raw.strip().lower() == "true"
    return raw


def cast_literal(raw: str, key: Key, text: str = "") -> Any:
    """A literal as a value of `key`'s type; InvalidInputError naming both when it is not one (`text` is
    the expression, for the message)."""
    try:
        return typed_value(raw, key.kind)
    except ValueError:
        raise InvalidInputError(
            f"Unsupported expression {text!r}: the value {raw!r} cannot be compared with partition key "
            f"{key.name!r} of type {key.type}") from None


def parse(text: str, partition_keys: Sequence[tuple[str, str]]) -> Expr:
    """Parse `text` and bind it to the table's partition keys [(name, type), ...]."""
    keys = {name.lower(): Key(name, type_kind(t), t) for name, t in partition_keys}
    return _Parser(text, keys).parse()


# ------------------------------------------------------------------ evaluation


Values = Mapping[str, "str | None"]


def matches(expr: Expr, values: Values) -> bool:
    """Whether a partition (key name -> stored string value) satisfies `expr`."""
    return matcher(expr)(values)


def matcher(expr: Expr) -> Callable[[Values], bool]:
    """`matches` for one expression and many partitions: the tree is walked once, here, into
    closures, instead of once per partition."""
    test = _compile(expr)
    return lambda values: test(values) is True


_OPS = {"=": operator.eq, "<>": operator.ne, ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le}


def residual(expr: Expr, covered: Sequence[Expr]) -> Expr | None:
    """What of `expr` is left to test once the AND conjuncts in `covered` are known to hold
    (an index range enforces them); None when nothing is."""
    rest = [c for c in conjuncts(expr) if not any(c is k for k in covered)]
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else And(tuple(rest))


def _reader(key: Key) -> Callable[[Values], Any]:
    """A partition's value of `key` as its type, None when it is NULL or not of the type."""
    name, kind = key.name, key.kind
    if kind == "string":
        return lambda values: values.get(name)

    def read(values: Values) -> Any:
        raw = values.get(name)
        if raw is None:
            return None
        try:
            return typed_value(raw, kind)
        except ValueError:
            return None
    return read


def _compile(expr: Expr) -> Callable[[Values], "bool | None"]:
    """SQL's three-valued result of `expr` on one partition's values (None is NULL), as a function."""
    if isinstance(expr, (And, Or)):
        return _junction(expr)
    if isinstance(expr, Not):
        child = _compile(expr.child)

        def negate(values: Values) -> bool | None:
            v = child(values)
            return None if v is None else not v
        return negate
    if isinstance(expr, IsNull):
        name, negated = expr.key.name, expr.negated
        return lambda values: (values.get(name) is not None) is negated
    return _test(expr)


def _test(expr: Compare | Between | In | Like) -> Callable[[Values], "bool | None"]:
    """A comparison of one key's value: NULL when the partition has no value of the key's type."""
    read = _reader(expr.key)
    if isinstance(expr, Compare):
        op, literal = _OPS[expr.op], expr.value

        def compare(values: Values) -> bool | None:
            v = read(values)
            return None if v is None else op(v, literal)
        return compare
    if isinstance(expr, Between):
        low, high = expr.low, expr.high

        def between(values: Values) -> bool | None:
            v = read(values)
            return None if v is None else low <= v <= high
        return between
    if isinstance(expr, In):
        members = expr.values

        def within(values: Values) -> bool | None:
            v = read(values)
            return None if v is None else v in members
        return within
    if isinstance(expr, Like):
        regex, name = expr.regex, expr.key.name

        def like(values: Values) -> bool | None:
            return None if read(values) is None else regex.fullmatch(str(values.get(name))) is not None
        return like
    raise TypeError(f"not an expression node: {expr!r}")


def _junction(expr: And | Or) -> Callable[[Values], "bool | None"]:
    """AND stops at the first FALSE, OR at the first TRUE; a NULL child makes the rest NULL."""
    decisive = isinstance(expr, Or)
    children = [_compile(c) for c in expr.children]

    def junction(values: Values) -> bool | None:
        out: bool | None = not decisive
        for child in children:
            v = child(values)
            if v is decisive:
                return decisive
            if v is None:
                out = None
        return out
    return junction
