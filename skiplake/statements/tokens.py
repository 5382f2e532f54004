"""The words of a SQL text, with their offsets, and a script cut into statements.

One scanner serves both: it knows Spark SQL's quoting ('...' and "..." strings with backslash
escapes, `...` identifiers with `` doubled) and comments (-- to the end of the line, /* ... */),
so a `;` or a keyword inside either is not taken for one outside."""
from __future__ import annotations

import re
from dataclasses import dataclass

from skiplake.errors import SqlStatementError

# kinds: word (identifier or keyword), quoted (`...`), string ('...' or "..."), number, symbol
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYMBOLS = ("<=>", "<>", "!=", ">=", "<=", "==", "||", "::")


@dataclass(frozen=True)
class Token:
    """One word, quoted name, string, number or symbol of the text, at [start, end)."""
    kind: str
    text: str      # as written (strings and quoted names with their quotes)
    value: str     # the name or string it means (quotes and escapes removed); upper case for a word's keyword
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        """Whether this is one of the (upper-case) `words`, unquoted."""
        return self.kind == "word" and self.text.upper() in words

    @property
    def name(self) -> str:
        """The identifier it spells: a word as written, a quoted name without its quotes."""
        return self.value if self.kind == "quoted" else self.text


def _skip(text: str, i: int) -> int:
    """The offset after the blanks and comments at `i`; an unclosed comment is an error."""
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise SqlStatementError(text, "a /* comment is not closed", i)
            i = end + 2
        else:
            break
    return i


def _quoted(text: str, i: int) -> tuple[int, str]:
    """The end of the quoted string or name opening at `i`, and what it holds."""
    quote = text[i]
    out: list[str] = []
    j = i + 1
    while j < len(text):
        c = text[j]
        if quote != "`" and c == "\\" and j + 1 < len(text):
            out.append({"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(text[j + 1], text[j + 1]))
            j += 2
            continue
        if c == quote:
            if quote == "`" and text.startswith("``", j):
                out.append("`")
                j += 2
                continue
            return j + 1, "".join(out)
        out.append(c)
        j += 1
    what = "quoted name" if quote == "`" else "string"
    raise SqlStatementError(text, f"a {what} opened with {quote} is not closed", i)


def tokenize(text: str) -> list[Token]:
    """Every token of `text`, comments and blanks left out."""
    tokens: list[Token] = []
    i = _skip(text, 0)
    while i < len(text):
        c = text[i]
        if c in "'\"`":
            end, value = _quoted(text, i)
            tokens.append(Token("quoted" if c == "`" else "string", text[i:end], value, i, end))
        elif (m := _NUMBER.match(text, i)) and (c.isdigit() or c == "."):
            tokens.append(Token("number", m.group(), m.group(), i, m.end()))
            end = m.end()
        elif m := _WORD.match(text, i):
            tokens.append(Token("word", m.group(), m.group().upper(), i, m.end()))
            end = m.end()
        else:
            symbol = next((s for s in _SYMBOLS if text.startswith(s, i)), c)
            end = i + len(symbol)
            tokens.append(Token("symbol", symbol, symbol, i, end))
        i = _skip(text, end if c not in "'\"`" else tokens[-1].end)
    return tokens


@dataclass(frozen=True)
class ScriptStatement:
    """One statement of a script: its text (without the `;`), and where it starts."""
    number: int
    text: str
    offset: int
    line: int


def split_script(script: str) -> list[ScriptStatement]:
    """The script's statements in order, cut at each `;` outside strings, quoted names and
    comments; empty ones (blanks and comments only) are left out."""
    out: list[ScriptStatement] = []
    i = _skip(script, 0)
    first: int | None = None   # offset of the statement's first token

    def close(end: int) -> None:
        if first is not None:
            text = script[first:end].rstrip()
            out.append(ScriptStatement(len(out) + 1, text, first, script.count("\n", 0, first) + 1))

    while i < len(script):
        c = script[i]
        if c == ";":
            close(i)
            first = None
            i = _skip(script, i + 1)
            continue
        if first is None:
            first = i
        if c in "'\"`":
            i, _ = _quoted(script, i)
        else:
            i += 1
        i = _skip(script, i)
    close(len(script))
    return out
