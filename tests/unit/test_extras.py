"""skiplake.extras: the extras' packages as pyproject.toml declares them, the check, its error, and
a core import path that stays free of every extra's package even where they are installed
(tests/test_install.py runs the features without them, in a fresh venv)."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest

from skiplake.errors import MissingExtraError, SkiplakeError
from skiplake.extras import EXTRAS, missing_modules, require, require_database
from testing_support.install_env import REPO


def _distribution(requirement: str) -> str:
    return re.split(r"[\[<>=;! ]", requirement)[0].lower().replace("_", "-")


def test_extras_list_the_packages_pyproject_installs():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name, packages in EXTRAS.items():
        installed = {_distribution(r) for r in declared[name] if not r.startswith("skiplake[")}
        checked = {_distribution(d) for d in packages.values()}
        # uvloop is not checked on Windows, where pyproject.toml does not install it either.
        assert checked == installed - ({"uvloop"} if sys.platform == "win32" else set()), name
    assert set(declared["all"]) == {f"skiplake[{','.join(sorted(EXTRAS))}]"}
    assert "skiplake[all]" in declared["dev"]


def test_require_passes_when_installed_and_names_the_extra_when_not():
    require("catalog", "the catalog")            # the development install has every extra
    assert missing_modules(["json", "skiplake_no_such_module"]) == ["skiplake_no_such_module"]
    with pytest.raises(MissingExtraError) as e:
        require("demo", "skiplake demo", ["duckdb", "skiplake_no_such_module"])
    assert isinstance(e.value, SkiplakeError)
    assert e.value.extra == "demo" and e.value.missing == ["skiplake_no_such_module"]
    assert str(e.value) == ("skiplake demo needs the optional packages of skiplake[demo], and "
                            "skiplake_no_such_module is not installed. Install them with: pip install 'skiplake[demo]'")


def test_database_urls_need_the_catalog_and_postgres_its_driver():
    require_database("sqlite:///catalog.db")
    require_database("postgresql+psycopg://user:secret@db/catalog")


def test_core_imports_no_extra_package():
    code = """
import sys
import skiplake
skiplake.Lake, skiplake.Table, skiplake.BucketSpec, skiplake.local_spark
import skiplake.cli, skiplake.table_info, skiplake.spark.reads.catalog_tables, skiplake.log.storage_for
extras = {"sqlalchemy", "orjson", "boto3", "botocore", "uvicorn", "httptools", "uvloop", "psycopg", "duckdb"}
print(sorted(extras & {m.split(".")[0] for m in sys.modules}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
