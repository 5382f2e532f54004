"""Where tests and benchmarks find the checkout, its Java and their working data."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Working data and cached layouts (gitignored); the benchmark suite (`python -m benchmarks`)
# points its benchmarks at a folder of its own through this variable.
DATA_ENV = "SKIPLAKE_BENCH_DATA"
DEFAULT_BASE = Path(os.environ.get(DATA_ENV) or REPO / "bench-data")
DEFAULT_JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"


def setup_java(install: bool = False) -> str | None:
    """Point JAVA_HOME at a Java 17 if it is not set: the Makefile's `.java_home`, else the usual
    path, else (with `install`, and only then) the one scripts/ensure_java.sh finds or installs."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    marker = REPO / ".java_home"
    candidates = [marker.read_text().strip()] if marker.exists() else []
    candidates.append(DEFAULT_JAVA_HOME)
    if install and not any(_has_java(h) for h in candidates):
        # Only when no Java is known: the script may install one.
        out = subprocess.run([str(REPO / "scripts" / "ensure_java.sh")], capture_output=True, text=True)
        candidates.append(out.stdout.strip())
    found = next((h for h in candidates if _has_java(h)), None)
    if found is not None:
        os.environ["JAVA_HOME"] = found
    return found


def _has_java(home: str) -> bool:
    return bool(home) and os.path.exists(os.path.join(home, "bin", "java"))
