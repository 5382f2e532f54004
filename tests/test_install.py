"""`pip install skiplake` as a user does it: the wheel built from this checkout, installed with
its core dependencies alone into a fresh virtualenv (not the development one), where README.md's
quick start must run as written and every feature of a missing extra must fail with its
MissingExtraError. A second venv adds [catalog] only, for the PostgreSQL extra's error.

uv builds and installs (testing_support/install_env.py); with a warm package cache the venvs take about a
second each, and the quick start (a fresh JVM, its Spark jobs) most of this module's time: it and the
checks made in its session are the slow tier's.
"""
from __future__ import annotations

import email.parser
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from testing_support.install_env import REPO, build_wheel, clean_env, create_venv, install, quickstart_code

pytestmark = pytest.mark.install

CORE = {"pyspark", "pyarrow", "sqlglot", "numpy", "rich"}
EXTRA_MODULES = ("sqlalchemy", "orjson", "boto3", "botocore", "uvicorn", "httptools", "uvloop", "psycopg", "duckdb",
                 "duckdb_extension_tpcds")

# Runs the README's quick start (argv[1]) in this process, then uses each extra's feature in the
# same session, and prints what happened as one JSON line.
_DRIVER = '''
import json, runpy, sys
import skiplake
from skiplake.errors import MissingExtraError

ns = runpy.run_path(sys.argv[1], run_name="__main__")
spark, root = ns["spark"], ns["lake"].root
checks = {}

def expect(name, use):
    try:
        use()
        checks[name] = None
    except MissingExtraError as e:
        checks[name] = {"extra": e.extra, "message": str(e)}

def generate():
    import skiplake.tpcds
    skiplake.tpcds.generate(root + "/tpcds", sf=0.01)

expect("catalog database", lambda: skiplake.Lake(spark, root, catalog="sqlite:///" + root + "/catalog.db"))
expect("postgres database", lambda: skiplake.Lake(spark, root, catalog="postgresql+psycopg://u:pw@127.0.0.1:9/c"))
expect("catalog endpoint", lambda: skiplake.Lake(spark, root, catalog="http://127.0.0.1:9/"))
expect("GlueCatalog", lambda: __import__("skiplake.catalog.service"))
expect("s3 lake", lambda: skiplake.Lake(spark, "s3://bucket/warehouse"))
expect("s3 table", lambda: skiplake.Table.open(spark, "s3a://bucket/warehouse/sales"))
expect("tpcds", generate)
imported = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
print("@@result " + json.dumps({"root": root, "checks": checks, "imported": imported}))
'''


def _run(args: list[str], venv: Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=clean_env(venv, TMPDIR=str(cwd)), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def core_venv(wheel, tmp_path_factory) -> Path:
    venv = create_venv(tmp_path_factory.mktemp("core") / "venv")
    install(venv, str(wheel))
    return venv


@pytest.fixture(scope="module")
def quickstart(core_venv, tmp_path_factory) -> dict:
    """The README's quick start run in the core venv, then each missing extra's feature used."""
    work = tmp_path_factory.mktemp("quickstart")
    (work / "quickstart.py").write_text(quickstart_code())
    (work / "driver.py").write_text(_DRIVER)
    proc = _run([str(core_venv / "bin" / "python"), "driver.py", "quickstart.py", ",".join(EXTRA_MODULES)],
                core_venv, work, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("@@result "))
    return {"stdout": proc.stdout, **json.loads(line[len("@@result "):]), "work": work}


def test_wheel_holds_the_package_its_types_and_license(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    info = f"skiplake-{wheel.name.split('-')[1]}.dist-info/"
    assert all(n.startswith(("skiplake/", info)) for n in names), [n for n in names if not n.startswith("skiplake")]
    sources = {str(p.relative_to(REPO)) for p in (REPO / "skiplake").rglob("*.py")}
    assert sources == {n for n in names if n.endswith(".py")}
    assert "skiplake/py.typed" in names
    license_text = zipfile.ZipFile(wheel).read(info + "licenses/LICENSE").decode()
    assert license_text == (REPO / "LICENSE").read_text()
    assert license_text.startswith("Copyright 2026 The skiplake Authors\n") and "Apache License" in license_text


def test_wheel_metadata(wheel):
    info = f"skiplake-{wheel.name.split('-')[1]}.dist-info/"
    meta = email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(info + "METADATA").decode())
    assert meta["Name"] == "skiplake" and "Delta Lake" in meta["Summary"]
    assert meta["License-Expression"] == "Apache-2.0" and meta["License-File"] == "LICENSE"
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    requires = meta.get_all("Requires-Dist")
    core = {re.split(r"[\[<>=;! ]", r)[0].lower() for r in requires if "extra ==" not in r}
    assert core == CORE
    assert {"catalog", "connect", "postgres", "s3", "demo", "all", "dev"} <= set(meta.get_all("Provides-Extra"))
    assert 'skiplake[catalog,connect,demo,postgres,s3]; extra == "all"' in requires


def test_core_install_has_no_extra_package(core_venv, tmp_path):
    code = f"import importlib.util; print([m for m in {EXTRA_MODULES!r} if importlib.util.find_spec(m)])"
    proc = _run([str(core_venv / "bin" / "python"), "-c", code], core_venv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_core_install_has_sqlglot_compiled(core_venv, tmp_path):
    """lake.sql's planning parses and writes SQL with sqlglot; where sqlglot publishes compiled
    wheels (this machine's platform among them), the core install has them."""
    code = "import sqlglot, sqlglot.parser as p; print(sqlglot.__version__, p.__file__.endswith('.so'))"
    proc = _run([str(core_venv / "bin" / "python"), "-c", code], core_venv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[1] == "True", proc.stdout


# The quick start, and what runs in its session, are the slow tier's (a fresh JVM and its jobs:
# about 50 s of the gate); the gate builds the wheel and installs it.
@pytest.mark.slow
def test_readme_quickstart_runs_in_the_core_install(quickstart):
    out = quickstart["stdout"]
    scan = out[out.index("Scan skiplake"):]
    assert "SelectedPartitionsCount: 1 out of 10" in scan
    selected, total = map(int, re.search(r"SelectedFilesCount: (\d+) out of (\d+)", scan).groups())
    assert selected < total / 4   # the Z-ordered files of one day: min/max prunes most
    assert "200000 rows at version 1, 180001 now" in out
    assert "(5, 'MERGE'), (4, 'DELETE'), (3, 'UPDATE'), (2, 'OPTIMIZE'), (1, 'WRITE')" in out
    assert "20 rows updated, 1 inserted" in out       # the MERGE builder's result
    assert re.search(r"\|item 8\|\s*800\|", out)       # after RESTORE to version 2: all 200,000 rows again
    assert re.search(r"^40 files in .*/sales$", out, re.M)   # DESCRIBE DETAIL of the restored OPTIMIZE
    # The cost model prices the build, then the one key keeps few of the 40 files: applied.
    assert re.search(r"DynamicFilePruning sales AS s <- items .*\n  cost: probe 40 files.*\n  applied: 1 keys", out)
    assert quickstart["imported"] == []   # tables, Z-order, DML and lake.sql import no extra's package


@pytest.mark.slow
@pytest.mark.parametrize("feature, extra", [
    ("catalog database", "catalog"), ("postgres database", "postgres"), ("catalog endpoint", "catalog"),
    ("GlueCatalog", "catalog"),
    ("s3 lake", "s3"), ("s3 table", "s3"), ("tpcds", "demo")])
def test_missing_extra_is_a_clear_error_where_used(quickstart, feature, extra):
    check = quickstart["checks"][feature]
    assert check is not None, f"{feature} worked without skiplake[{extra}]"
    assert check["extra"] == extra
    assert f"pip install 'skiplake[{extra}]'" in check["message"]
    assert "pw@" not in check["message"]   # a database URL's password is not repeated


@pytest.mark.slow
def test_console_script(core_venv, quickstart):
    work, sales = quickstart["work"], Path(quickstart["root"]) / "sales"
    commands = {"version": ["--version"], "history": ["history", str(sales)], "catalog": ["catalog", "serve"],
                "demo": ["demo"]}
    running = {k: subprocess.Popen(["skiplake", *args], cwd=work, env=clean_env(core_venv), text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE) for k, args in commands.items()}
    done = {k: (p.communicate(timeout=120), p.returncode) for k, p in running.items()}
    (out, _), code = done["version"]
    assert code == 0 and out.startswith("skiplake 0.")
    (out, err), code = done["history"]
    assert code == 0, err
    assert "MERGE" in out and "OPTIMIZE" in out
    for name, extra in (("catalog", "catalog"), ("demo", "demo")):
        (_, err), code = done[name]
        assert code == 2
        assert f"pip install 'skiplake[{extra}]'" in err and "Traceback" not in err


def test_catalog_extra_without_postgres(wheel, tmp_path):
    venv = create_venv(tmp_path / "venv")
    install(venv, f"{wheel}[catalog]")
    glue = ("from skiplake.catalog.service import GlueCatalog; import skiplake.catalog.server; "
            "g = GlueCatalog('sqlite:///catalog.db'); g.create_database(DatabaseInput={'Name': 'sales'}); "
            "print(g.get_database(Name='sales')['Database']['Name'])")
    proc = _run([str(venv / "bin" / "python"), "-c", glue], venv, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "sales", proc.stderr
    serve = _run(["skiplake", "catalog", "serve", "--db", "postgresql+psycopg://catalog@127.0.0.1:9/catalog"],
                 venv, tmp_path)
    assert serve.returncode == 2
    assert "pip install 'skiplake[postgres]'" in serve.stderr and "Traceback" not in serve.stderr
