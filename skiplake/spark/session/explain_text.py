"""Spark's plans as a Spark Connect client sees them: the text of `EXPLAIN EXTENDED`.

A Connect client holds no JVM object of a plan, only what the server prints. The analysed and
optimized logical plans are printed in the same tree form as `treeString` (plan_text parses
both), but only as wide as `spark.sql.debug.maxToStringFields` lets them: a Lake on a Connect
session raises it (skiplake.spark.session.session_setup.ensure_conf), and a list cut short
(`... 5 more fields`) reads as unknown to plan_text, which then does not prune.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

ANALYZED = "== Analyzed Logical Plan =="
OPTIMIZED = "== Optimized Logical Plan =="
PHYSICAL = "== Physical Plan =="


def plan_sections(df: "DataFrame") -> dict[str, str]:
    """The sections of the DataFrame's extended explanation, by heading (one round trip)."""
    text = _explain(df, "extended")
    out: dict[str, str] = {}
    heading = ""
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("== ") and line.endswith(" =="):
            if heading:
                out[heading] = "\n".join(lines).rstrip("\n")
            heading, lines = line, []
        else:
            lines.append(line)
    if heading:
        out[heading] = "\n".join(lines).rstrip("\n")
    return out


def _explain(df: "DataFrame", mode: str) -> str:
    # `_explain_string` is Spark Connect's DataFrame's, and only a Connect client's DataFrames come
    # here (there is no JVM plan to read); pyspark's DataFrame type stands for both kinds.
    return cast("ConnectDataFrame", df)._explain_string(mode=mode)


def optimized_text(df: "DataFrame") -> str:
    """The optimized logical plan's tree text."""
    return plan_sections(df).get(OPTIMIZED, "")


def analysed_text(df: "DataFrame") -> str:
    """The analysed logical plan's tree text (without the output schema line above it)."""
    # Its first line is the output schema (`a: bigint, b: string`), not a node.
    return "\n".join(plan_sections(df).get(ANALYZED, "").split("\n")[1:])


_SIZE = re.compile(r"Statistics\(sizeInBytes=([0-9.E+]+) ?(B|KiB|MiB|GiB|TiB|PiB|EiB)?")
_SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60}


def estimated_size(df: "DataFrame") -> int | None:
    """Spark's estimate of the size of the DataFrame's output (what its broadcast decision uses),
    from `EXPLAIN COST`; None when the text does not give it."""
    text = _explain(df, "cost")
    start = text.find(OPTIMIZED)
    m = _SIZE.search(text, start) if start >= 0 else None
    if m is None:
        return None
    # Printed rounded to three digits in its unit: an estimate of an estimate, as precise as needed.
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2) or "B"])
