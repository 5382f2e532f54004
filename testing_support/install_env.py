"""Fresh virtualenvs with skiplake's built wheel, as a user installs it: for tests/test_install.py
and benchmarks/bench_install.py.

uv builds the wheel, creates the venvs and installs into them. Each install is tried offline
first: with a warm cache that takes well under a second, while asking the index again can make
uv download and rebuild pyspark (an sdist of ~450 MB) when the index's answer looks changed;
only when the cache cannot satisfy it is the index asked.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from testing_support.paths import REPO, setup_java

README = REPO / "README.md"
QUICKSTART_BEGIN = "<!-- quickstart:begin -->"
QUICKSTART_END = "<!-- quickstart:end -->"
# Variables that would make the venv's Python or Spark use the development checkout instead of
# what was installed (PYTHONPATH, a Python worker of another interpreter, another Spark).
_LEAKS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME",
          "UV_PYTHON", "PIP_REQUIRE_VIRTUALENV")


def uv() -> str:
    """The uv executable: the `uv` package of this interpreter (the dev extra has it), else PATH's."""
    try:
        from uv import find_uv_bin
        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise RuntimeError("uv is not installed; install the development dependencies: pip install -e '.[dev]'")


def java_home() -> str:
    """JAVA_HOME, else the Java that `make` found (.java_home)."""
    home = setup_java()
    if home is None:
        raise RuntimeError("no Java: set JAVA_HOME or run `make java`")
    return home


def clean_env(venv: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without what points at the checkout, with `venv` first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in _LEAKS}
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
    env["JAVA_HOME"] = java_home()
    env.update(extra)
    return env


def _uv_offline_first(args: list[str], cwd: Path | None = None) -> None:
    offline = subprocess.run([uv(), *args, "--offline"], cwd=cwd, env=clean_env(), capture_output=True, text=True)
    if offline.returncode == 0:
        return
    online = subprocess.run([uv(), *args], cwd=cwd, env=clean_env(), capture_output=True, text=True)
    if online.returncode != 0:
        raise RuntimeError(f"uv {' '.join(args)} failed:\n{online.stderr[-4000:]}")


def build_wheel(out_dir: Path) -> Path:
    """skiplake's wheel built from the checkout into `out_dir`, through its sdist: the wheel then
    holds only what the sdist does, never a stale file of the checkout's build/ folder."""
    _uv_offline_first(["build", "--quiet", "--out-dir", str(out_dir), str(REPO)])  # sdist, then the wheel from it
    wheels = sorted(out_dir.glob("skiplake-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one skiplake wheel in {out_dir}, found {wheels}")
    return wheels[0]


def create_venv(path: Path) -> Path:
    """A new, empty virtualenv at `path` on this interpreter's Python."""
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(path)], env=clean_env(), check=True,
                   capture_output=True)
    return path


def install(venv: Path, requirement: str) -> None:
    """`pip install requirement` into `venv` (a wheel path, with [extras] if any)."""
    _uv_offline_first(["pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), requirement])


def installed_bytes(venv: Path) -> int:
    """Bytes of the files under the venv (hard links to uv's cache counted once each)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _, files in os.walk(venv):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def quickstart_code(readme: Path = README) -> str:
    """The Python of README.md's quick start: the ```python block between the quickstart markers."""
    text = readme.read_text()
    try:
        section = text[text.index(QUICKSTART_BEGIN) + len(QUICKSTART_BEGIN):text.index(QUICKSTART_END)]
    except ValueError:
        raise RuntimeError(f"{readme} has no {QUICKSTART_BEGIN} ... {QUICKSTART_END} section") from None
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    if len(blocks) != 1:
        raise RuntimeError(f"the quick start of {readme} should hold one ```python block, not {len(blocks)}")
    return blocks[0]
