"""The ignore check of `make lint`: every `# type: ignore` in skiplake/ names its error code and
says why, as `# type: ignore[code]  # reason`.

mypy itself refuses an ignore without a code (`ignore-without-code`) and one that no longer
silences anything (`warn_unused_ignores`); this adds the reason, so that whoever meets the line
knows whether it may go. Prints each bad line and exits 1, or prints a summary and exits 0.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")
REASON = re.compile(r"^\s*#\s*\S.{4,}")   # another comment after the ignore, of a few words at least


def problems(path: Path, text: str) -> list[str]:
    """One line per ignore of `text` without a code or without a reason."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        match = IGNORE.search(line)
        if match is None:
            continue
        if not match["codes"]:
            out.append(f"{path}:{number}: a type: ignore must name its error code, as type: ignore[code]")
        elif not REASON.match(match["rest"]):
            out.append(f"{path}:{number}: a type: ignore must say why after it: # type: ignore[code]  # reason")
    return out


def main() -> int:
    package = Path(__file__).resolve().parent.parent / "skiplake"
    found = [p for path in sorted(package.rglob("*.py")) for p in problems(path, path.read_text())]
    for line in found:
        print(line)
    if found:
        return 1
    print("type ignores: each names its code and a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
