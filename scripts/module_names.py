"""The module-name check of `make lint`: no two modules or packages of skiplake share a name, and
none shares a standard library module's name.

A repeated name makes a reader (and a traceback) ask which `changes.py` is meant, and a name such
as `inspect` or `types` shadows the standard library's module in tools that put a package's
folder on the path. Prints each clash and exits 1, or prints nothing and exits 0.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path


def module_names(package: Path) -> dict[str, list[str]]:
    """Every module's and package's own name (the last part of its dotted name), with its files."""
    names: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        if path.name == "__init__.py":
            if path.parent != package:
                names[path.parent.name].append(str(path.parent))
        else:
            names[path.stem].append(str(path))
    return names


def clashes(names: dict[str, list[str]], stdlib: frozenset[str]) -> list[str]:
    """One line per repeated name and per name the standard library has."""
    out = []
    for name, paths in sorted(names.items()):
        if len(paths) > 1:
            out.append(f"{name}: {len(paths)} modules share the name: {', '.join(paths)}")
        if name in stdlib:
            out.append(f"{name}: shares the standard library module's name: {paths[0]}")
    return out


def main() -> int:
    package = Path(__file__).resolve().parent.parent / "skiplake"
    problems = clashes(module_names(package), frozenset(sys.stdlib_module_names))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
