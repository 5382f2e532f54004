"""The complexity bar of `make lint`: no function of the package over MAX_COMPLEXITY.

Complexity is radon's cyclomatic complexity, which counts boolean operators too (ruff's mccabe
check does not). A function above the bar must be on the allowlist of pyproject.toml
([tool.skiplake.complexity]) with the score it may not exceed and the reason it stays whole; an
entry whose function is gone or back under the bar must be removed, so the list only shrinks.

    .venv/bin/python scripts/complexity.py [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from radon.complexity import cc_visit

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "skiplake"


@dataclass(frozen=True)
class Finding:
    name: str        # path:qualified name, as the allowlist spells it
    score: int
    problem: str


def scores(package: Path = PACKAGE) -> dict[str, int]:
    """Every function and method of the package, as path:Class.method, with its complexity."""
    out: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for block in cc_visit(path.read_text()):
            for fn in [block, *getattr(block, "methods", [])]:
                if type(fn).__name__ != "Function":
                    continue
                qualified = f"{fn.classname}.{fn.name}" if fn.classname else fn.name
                out[f"{rel}:{qualified}"] = max(out.get(f"{rel}:{qualified}", 0), fn.complexity)
    return out


def check(found: dict[str, int], bar: int, allowed: dict[str, int]) -> list[Finding]:
    problems = []
    for name, score in sorted(found.items()):
        if score <= bar:
            continue
        ceiling = allowed.get(name)
        if ceiling is None:
            problems.append(Finding(name, score, f"complexity {score} is over {bar}: split it, or allow it in "
                                                 "pyproject.toml with the reason it stays whole"))
        elif score > ceiling:
            problems.append(Finding(name, score, f"complexity {score} is over its allowed {ceiling}"))
    for name, ceiling in sorted(allowed.items()):
        if found.get(name, 0) <= bar:
            problems.append(Finding(name, found.get(name, 0), "allowed, but gone or within the bar: remove its entry"))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="the findings as JSON")
    args = parser.parse_args(argv)
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["skiplake"]["complexity"]
    allowed = {entry["name"]: entry["max"] for entry in settings["allow"]}
    problems = check(scores(), settings["max"], allowed)
    if args.json:
        print(json.dumps([asdict(p) for p in problems], indent=2))
    for p in problems:
        print(f"{p.name}: {p.problem}", file=sys.stderr)
    if not problems:
        print(f"complexity: every function within {settings['max']}, {len(allowed)} allowed above it", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
