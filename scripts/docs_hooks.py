"""mkdocs hooks (mkdocs.yml): the reference pages generated from the code, before every build.

- reference/configuration.md from skiplake.configuration: every table property and session
  setting, with the default the code uses;
- reference/cli.md from the `skiplake` command's parser: every command's usage and options;
- reference/features.md from the sets the log code checks: the protocol features skiplake reads
  and writes;
- index.md from README.md: the site's home page is the README, its links made the site's, its
  quick start a link to the quick start page (which includes the README's, runnable, block).

They are written into docs/reference/ (ignored by git), so a build cannot show a list older than
the code. `python scripts/docs_hooks.py` writes them without a build.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs"
GENERATED = "<!-- Generated from the code by scripts/docs_hooks.py at each docs build: edit the code, not this. -->\n"


def _table(rows: list[tuple[str, ...]], head: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def configuration_page() -> str:
    from skiplake import configuration as c

    def rows(settings: tuple) -> list[tuple[str, ...]]:
        return [(f"`{s.key}`", f"`{s.default}`" if s.default else "unset", s.meaning,
                 f"[{s.guide.split('#')[0].removesuffix('.md')}](../{s.guide})") for s in settings]
    head = ("key", "default", "what it does", "guide")
    return (GENERATED + "# Configuration\n\n"
            "Every table property and session setting skiplake reads, with the default its code uses "
            "(`skiplake/configuration.py`).\n\n"
            "## Table properties\n\nSet at `create_table(..., properties={...})` or with `t.set_properties({...})`.\n\n"
            + _table(rows(c.TABLE_PROPERTIES), head)
            + "\n## Catalog table properties\n\nProperties of a table in the Glue-compatible catalog.\n\n"
            + _table(rows(c.CATALOG_TABLE_PROPERTIES), head)
            + "\n## Session settings\n\nSpark session settings: `spark.conf.set(key, value)`, read at each query.\n\n"
            + _table(rows(c.SESSION_SETTINGS), head))


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:   # argparse keeps its subparsers only there
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((name, sub))
                out += [(f"{name} {n}", p) for n, p in _subcommands(sub)]
    return out


def cli_page() -> str:
    from skiplake.cli import build_parser
    parser = build_parser()
    parts = [GENERATED, "# Command line reference\n\n",
             "Every `skiplake` command, as `skiplake COMMAND --help` prints it. How to use them: "
             "[the command line guide](../cli.md).\n\n", "```text\n", parser.format_help(), "```\n"]
    for name, sub in _subcommands(parser):
        parts += [f"\n## skiplake {name}\n\n", "```text\n", sub.format_help(), "```\n"]
    return "".join(parts)


# What each feature is, in the words of Delta's PROTOCOL.md.
FEATURE_MEANINGS = {
    "appendOnly": "`delta.appendOnly`: no row removed or changed",
    "invariants": "column invariants (`delta.invariants`), checked at every write",
    "checkConstraints": "CHECK constraints (`delta.constraints.*`)",
    "changeDataFeed": "the change data feed (`delta.enableChangeDataFeed`)",
    "generatedColumns": "generated columns (`delta.generationExpression`)",
    "columnMapping": "column mapping by name or id",
    "identityColumns": "identity columns",
    "deletionVectors": "deletion vectors",
    "rowTracking": "row ids and row commit versions",
    "timestampNtz": "the TIMESTAMP_NTZ type",
    "domainMetadata": "named domains of metadata in the log",
    "v2Checkpoint": "V2 checkpoints with sidecar files",
    "clustering": "liquid clustering",
    "vacuumProtocolCheck": "VACUUM checks the write protocol",
    "typeWidening": "type widening",
    "typeWidening-preview": "type widening (preview name)",
    "variantType": "the VARIANT type",
    "variantType-preview": "the VARIANT type (preview name)",
    "variantShredding": "shredded VARIANT columns",
    "variantShredding-preview": "shredded VARIANT columns (preview name)",
    "icebergCompatV1": "Iceberg compatibility V1",
    "icebergCompatV2": "Iceberg compatibility V2",
    "inCommitTimestamp": "in-commit timestamps",
    "collations": "collated strings",
    "allowColumnDefaults": "column defaults",
    "checkpointProtection": "checkpoint protection",
    "catalogManaged": "catalog-managed tables",
}


def features_page() -> str:
    from skiplake.log.snapshot import SUPPORTED_READER_FEATURES, SUPPORTED_WRITER_FEATURES
    names = sorted(set(FEATURE_MEANINGS) | SUPPORTED_READER_FEATURES | SUPPORTED_WRITER_FEATURES, key=str.lower)
    rows = [(f"`{n}`", FEATURE_MEANINGS.get(n, ""), "yes" if n in SUPPORTED_READER_FEATURES else "no",
             "yes" if n in SUPPORTED_WRITER_FEATURES else "no") for n in names]
    return (GENERATED + "# Protocol features\n\n"
            "The table features of Delta's protocol that skiplake reads and writes, from the sets its "
            "log code checks (`SUPPORTED_READER_FEATURES` and `SUPPORTED_WRITER_FEATURES` in "
            "`skiplake/log/snapshot.py`). A table that needs a feature marked *no* is refused with "
            "`ProtocolNotSupportedError`, which names it: to read, when a reader feature is missing; to "
            "write, when a writer feature is. Reader versions up to 3 and writer versions up to 7 are "
            "supported; a legacy writer version implies the features of the versions below it.\n\n"
            + _table(rows, ("feature", "what it is", "read", "written")))


PAGES = {"configuration.md": configuration_page, "cli.md": cli_page, "features.md": features_page}
README = DOCS.parent / "README.md"


def _section(text: str, heading: str) -> tuple[int, int]:
    """Where the `## heading` section of a page starts and ends (the next `## ` or the end)."""
    start = text.index(f"\n## {heading}\n") + 1
    following = text.find("\n## ", start + 3)
    return start, following + 1 if following >= 0 else len(text)


def home_page(readme: Path = README) -> str:
    """docs/index.md from README.md."""
    text = readme.read_text()
    for heading, replacement in (("Quick start", "## Quick start\n\n[The quick start](quickstart.md): a lake, "
                                  "two tables, a pruned read, DML, time travel and `lake.sql`.\n\n"),
                                 ("Documentation", ""), ("License", "## License\n\nApache License 2.0.\n")):
        start, end = _section(text, heading)
        text = text[:start] + replacement + text[end:]
    text = re.sub(r"\]\(docs/([^)]*)\)", r"](\1)", text)
    return GENERATED + text


def write_pages(docs: Path = DOCS) -> list[Path]:
    """Write every generated page (docs/index.md and those under docs/reference/); the paths written."""
    folder = docs / "reference"
    folder.mkdir(exist_ok=True)
    pages = {folder / name: make for name, make in PAGES.items()}
    pages[docs / "index.md"] = home_page
    for path, make in pages.items():
        text = make()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return list(pages)


def on_pre_build(config: Any, **kwargs: Any) -> None:
    """mkdocs' hook: the generated pages, before the build collects the docs' files."""
    write_pages(Path(config["docs_dir"]))


if __name__ == "__main__":
    for p in write_pages():
        print(p)
    sys.exit(0)
