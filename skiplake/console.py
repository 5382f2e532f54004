"""Formatting shared by the CLI and the demo: sizes, times, JSON, rich consoles, history lines."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def iso_ms(ms: int | None) -> str | None:
    """Milliseconds since the epoch as an ISO-8601 UTC timestamp (None stays None)."""
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def human_bytes(n: int | None) -> str:
    """A byte count in binary units (`512 B`, `1.5 MiB`, up to TiB); `-` for None."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def json_default(o: Any) -> Any:
    """JSON for the values reports and Spark rows hold: decimals, dates, sets."""
    if isinstance(o, decimal.Decimal):
        return float(o)
    if isinstance(o, (dt.date, dt.datetime)):
        return o.isoformat()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def to_json(doc: Any) -> str:
    """`doc` as indented JSON text, with the values json_default converts."""
    return json.dumps(doc, indent=2, default=json_default)


def print_json(doc: Any) -> None:
    """Write `doc` to stdout as one JSON document (to_json) and a newline, flushed."""
    sys.stdout.write(to_json(doc) + "\n")
    sys.stdout.flush()


def console(stderr: bool = False, width: int = 160) -> "Console":
    """A rich console; wide enough that paths and predicates are not folded when output is a pipe."""
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else width, highlight=False, soft_wrap=False)


def esc(text: Any) -> str:
    """Text shown through rich with its [brackets] taken literally."""
    from rich.markup import escape
    return escape(str(text))


def one_line(text: object) -> str:
    """A message on one line, without terminal escapes (sqlglot underlines the bad token)."""
    return " ".join(_ANSI.sub("", str(text)).split())


def params_text(params: dict[str, Any]) -> str:
    """operationParameters of a history entry as `key=value, ...` (empty ones left out)."""
    parts = []
    for k, v in params.items():
        if v in (None, [], {}, ""):
            continue
        if isinstance(v, list) and len(v) == 1:
            v = v[0]
        parts.append(f"{k}={v if isinstance(v, str) else json.dumps(v)}")
    return ", ".join(parts)


def metrics_text(entry: dict[str, Any]) -> str:
    """A history entry's file and row counts in a few words."""
    parts = []
    if entry["files_added"] or entry["files_removed"]:
        parts.append(f"+{entry['files_added'] or 0}/-{entry['files_removed'] or 0} files")
    if entry["rows_written"]:
        parts.append(f"{entry['rows_written']:,} rows out")
    if entry["rows_deleted"]:
        parts.append(f"{entry['rows_deleted']:,} deleted")
    return ", ".join(parts)
