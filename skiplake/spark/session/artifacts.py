"""skiplake's own code for a Spark Connect server's Python workers.

Z-order's `mapInArrow` runs skiplake's functions in the server's Python workers, which import
skiplake by name. A server set up by someone else need not have it installed, so on a Connect
session skiplake sends itself as a Python artifact (its package as a zip, which the workers put
on their path) once per session, before the first such job. NumPy and PyArrow must be on the
server already: PySpark's Arrow functions need them there anyway.
"""
from __future__ import annotations

import os
import tempfile
import threading
import zipfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_sent: set[int] = set()
_lock = threading.Lock()


def ship_skiplake(spark: "SparkSession") -> None:
    """Add skiplake's package to a Connect session's Python artifacts (once per session)."""
    with _lock:
        if id(spark) in _sent:
            return
        archive = package_zip()
        try:
            spark.addArtifacts(archive, pyfile=True)
        finally:
            os.unlink(archive)
        _sent.add(id(spark))


def package_zip() -> str:
    """A zip of skiplake's Python files, named for its version (Spark keeps one per name)."""
    from skiplake import version
    root = os.path.dirname(os.path.abspath(version.__file__))  # the package's folder: version.py is at its top
    folder = tempfile.mkdtemp(prefix="skiplake-artifact-")
    path = os.path.join(folder, f"skiplake-{version.__version__}.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for here, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py") or name == "py.typed":
                    full = os.path.join(here, name)
                    archive.write(full, os.path.join("skiplake", os.path.relpath(full, root)))
    return path
