"""The docs pages generated from the code (scripts/docs_hooks.py)."""
from __future__ import annotations

from pathlib import Path

from skiplake import configuration
from skiplake.log.snapshot import SUPPORTED_READER_FEATURES, SUPPORTED_WRITER_FEATURES
from tests.unit.script_modules import load_script

hooks = load_script("docs_hooks")


def test_the_configuration_page_lists_every_setting_with_its_default():
    page = hooks.configuration_page()
    for s in configuration.TABLE_PROPERTIES + configuration.CATALOG_TABLE_PROPERTIES + configuration.SESSION_SETTINGS:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{s.key}` |"))
        assert (f"`{s.default}`" if s.default else "unset") in row, s.key


def test_the_features_page_says_what_is_read_and_written():
    rows = {line.split("|")[1].strip(" `"): line for line in hooks.features_page().splitlines()
            if line.startswith("| `")}
    for feature in SUPPORTED_READER_FEATURES:
        assert rows[feature].split("|")[3].strip() == "yes", feature
    for feature in SUPPORTED_WRITER_FEATURES:
        assert rows[feature].split("|")[4].strip() == "yes", feature
    assert rows["collations"].split("|")[3].strip() == "no"   # not read yet: refused by name


def test_the_cli_page_has_every_command():
    page = hooks.cli_page()
    for command in ("describe", "history", "explain", "optimize", "vacuum", "restore", "convert", "demo",
                    "catalog serve", "catalog sync"):
        assert f"\n## skiplake {command}\n" in page, command


def test_the_home_page_is_the_readme_with_the_sites_links(tmp_path: Path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nIntro, [limits](docs/limits.md).\n\n## Quick start\n\n```python\ncode\n```\n\n"
                      "## What it does\n\nSee [merge](docs/merge.md#refusals).\n\n## Documentation\n\n| a |\n\n"
                      "## License\n\nApache, see [LICENSE](LICENSE).\n")
    page = hooks.home_page(readme)
    assert "](limits.md)" in page and "](merge.md#refusals)" in page and "docs/" not in page
    assert "```python" not in page and "(quickstart.md)" in page
    assert "## Documentation" not in page and "LICENSE" not in page and "## What it does" in page
