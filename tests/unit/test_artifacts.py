"""The package zip a Spark Connect session ships to its server's Python workers."""
import os
import zipfile
from pathlib import Path

import skiplake
from skiplake.spark.session.artifacts import package_zip


def test_the_zip_holds_the_whole_package_under_its_name():
    path = package_zip()
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    finally:
        os.unlink(path)
    root = Path(skiplake.__file__).parent
    expected = {"skiplake/" + str(p.relative_to(root)) for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    assert expected <= names
    assert "skiplake/__init__.py" in names and "skiplake/spark/session/artifacts.py" in names
    assert "skiplake/py.typed" in names
    assert all(n.startswith("skiplake/") and "__pycache__" not in n for n in names)
