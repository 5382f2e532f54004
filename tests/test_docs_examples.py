"""Every example of the docs runs (the slow tier; that every code block is of a known kind is the gate's).

A page's code blocks are of three kinds, told by their fence:

- ```python: an example. This test runs every one of a page, in page order, in one namespace per
  page, against a fresh lake: `spark` (the test session), `skiplake`, `F` (pyspark's functions)
  and `lake` (a Lake in a new folder) are there before the page's first block;
- ```sql: a query or a script of statements, run with the page's `lake.sql_script` at its place;
- ```text, ```json, or a fence with no language: output, shown as a run printed it;
- ```sh: a command for a shell (installing, make), shown and not run here.

A value a reader fills in (a server's address, a folder) is replaced by what the test has
(PLACEHOLDERS). A page whose examples use data they do not build (a `df` to append, files to
convert) sets it up in hidden blocks, run in page order with the rest: an HTML comment holding a
```python block, `<!-- example setup` ... `-->`, which readers of the page do not see. A page
whose examples start a session of their own (Spark Connect's) runs in a Python process of its
own, since PySpark refuses a Connect session next to a classic one. The README's quick start runs
in the install checks instead (tests/test_install.py), in a fresh install.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import skiplake
from tests.modes import CONNECT

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GENERATED = {"index.md"}   # made from README.md by the docs build (scripts/docs_hooks.py)
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
SETUP = re.compile(r"<!-- example setup\s*\n```python\n(?P<code>.*?)^```\s*\n-->", re.S | re.M)
QUICKSTART = re.compile(r"<!-- quickstart:begin -->.*?<!-- quickstart:end -->", re.S)
# Per page: text of an example a reader replaces, and what the test puts there instead ({tmp},
# {connect_url}: the test's folder and Connect server, as Python string literals without quotes).
PLACEHOLDERS = {
    "convert.md": {'"/data/lake': '"{tmp}/data/lake'},
    "README.md": {'"/data/lake': '"{tmp}/data/lake'},
    "object-stores.md": {'"s3://bucket/warehouse")': 'f"s3://{{bucket}}/warehouse", storage_options=s3_server.options)'},
    "spark-connect.md": {'"sc://host:15002"': '"{connect_url}"', '"s3://bucket/warehouse"': '"{tmp}/warehouse"'},
    "data-source.md": {"/lake/": "{tmp}/lake/", '"2026-11-01 00:00:00"': "when"},
    "streaming.md": {"/lake/": "{tmp}/lake/", '"/checkpoints/': '"{tmp}/checkpoints/'},
}
OWN_PROCESS = {"spark-connect.md"}   # pages whose examples start a Spark Connect session
KINDS = {"python": "example", "sql": "query", "text": "output", "": "output", "json": "output", "sh": "command"}


@dataclass
class Block:
    page: str
    line: int
    kind: str
    code: str


def pages() -> list[Path]:
    """The docs' pages (but the home page, made from the README) and the README."""
    return sorted(p for p in DOCS.glob("*.md") if p.name not in GENERATED) + [ROOT / "README.md"]


def blocks(path: Path) -> list[Block]:
    """A page's code blocks, hidden setups included, in page order."""
    text = QUICKSTART.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())
    setups = list(SETUP.finditer(text))
    found = [(m.start(), Block(path.name, text[:m.start()].count("\n") + 1, "setup", m["code"])) for m in setups]
    hidden = [(m.start(), m.end()) for m in setups]
    for m in FENCE.finditer(text):
        if any(a <= m.start() < b for a, b in hidden):
            continue
        info = m["info"].strip().split()[0] if m["info"].strip() else ""
        line = text[:m.start()].count("\n") + 1
        found.append((m.start(), Block(path.name, line, KINDS.get(info, f"unknown ({info})"), m["code"])))
    return [b for _, b in sorted(found, key=lambda pair: pair[0])]


def _param(path: Path) -> object:
    needs_s3 = any("s3_server" in b.code for b in blocks(path) if b.kind == "setup")
    return pytest.param(path, id=path.name, marks=[pytest.mark.s3] if needs_s3 else [])


def test_every_block_is_an_example_output_or_command() -> None:
    unknown = [f"{b.page}:{b.line}: {b.kind}" for p in pages() for b in blocks(p) if b.kind.startswith("unknown")]
    assert not unknown, "code blocks of no known kind (```python, ```text, ```sh):\n" + "\n".join(unknown)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("path", [_param(p) for p in pages()])
def test_the_examples_of_a_page_run(spark, tmp_path, monkeypatch, path: Path, request) -> None:
    if CONNECT:
        pytest.skip("the examples run on classic PySpark (Spark Connect's own page says what differs)")
    runnable = [b for b in blocks(path) if b.kind in ("example", "query", "setup")]
    if not any(b.kind in ("example", "query") for b in runnable):
        pytest.skip(f"{path.name} has no example")
    from pyspark.sql import functions as F
    # Paths the examples give skiplake, which resolves them in Python, land in the test's folder; the
    # setups give Spark absolute ones, since its JVM keeps the directory it started in.
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"spark": spark, "skiplake": skiplake, "F": F, "tmp": tmp_path,
                       "lake": skiplake.Lake(spark, str(tmp_path / "lake"))}
    if any("s3_server" in b.code for b in runnable):
        namespace["s3_server"] = request.getfixturevalue("s3_server")
    values = {"tmp": str(tmp_path)}
    if any("{connect_url}" in v for v in PLACEHOLDERS.get(path.name, {}).values()):
        values["connect_url"] = request.getfixturevalue("connect_server").url
    sources = [(b.kind, b.line, _filled(path.name, b.code, values)) for b in runnable]
    if path.name in OWN_PROCESS:
        _run_in_own_process(path, sources, tmp_path)
        return
    for kind, line, code in sources:
        if kind == "query":
            for result in namespace["lake"].sql_script(code):
                result.collect()
            continue
        # Blank lines first, so that a traceback names the page's own line.
        exec(compile("\n" * line + code, str(path.relative_to(ROOT)), "exec"), namespace)


def _filled(page: str, code: str, values: dict[str, str]) -> str:
    for text, replacement in PLACEHOLDERS.get(page, {}).items():
        code = code.replace(text, replacement.format(**values))
    return code


RUNNER = """
import json, sys
from pathlib import Path
import skiplake
page, tmp, sources = json.loads(Path(sys.argv[1]).read_text())
namespace = {"skiplake": skiplake, "tmp": Path(tmp)}
for kind, line, code in sources:
    exec(compile("\\n" * line + code, page, "exec"), namespace)
"""


def _run_in_own_process(path: Path, sources: list[tuple[str, int, str]], tmp: Path) -> None:
    """Run a page's examples in a new Python process, which has no SparkSession yet."""
    assert all(kind != "query" for kind, _, _ in sources), f"{path.name}: a ```sql block needs the test's lake"
    spec = tmp / "examples.json"
    spec.write_text(json.dumps([str(path.relative_to(ROOT)), str(tmp), sources]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", RUNNER, str(spec)], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{path.name}'s examples failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
