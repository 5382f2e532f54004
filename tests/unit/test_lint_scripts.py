"""The module-name and type-ignore checks of `make lint` (scripts/module_names.py, type_ignores.py)."""
from __future__ import annotations

from pathlib import Path

from tests.unit.script_modules import load_script

module_names = load_script("module_names")
type_ignores = load_script("type_ignores")


def _tree(root: Path, files: list[str]) -> Path:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return root


def test_a_repeated_or_standard_library_name_is_a_clash(tmp_path):
    package = _tree(tmp_path / "pkg", ["__init__.py", "log/__init__.py", "log/changes.py",
                                       "spark/__init__.py", "spark/changes.py", "spark/types.py",
                                       "spark/reads/__init__.py", "spark/reads/planned.py",
                                       "txn/__init__.py", "txn/reads.py"])
    found = module_names.clashes(module_names.module_names(package), frozenset({"types", "inspect"}))
    assert len(found) == 3
    assert any(line.startswith("changes: 2 modules") for line in found)
    assert any(line.startswith("types: shares the standard library") for line in found)
    assert any(line.startswith("reads: 2 modules") for line in found)   # a package and a module


def test_unique_names_pass(tmp_path):
    package = _tree(tmp_path / "pkg", ["__init__.py", "log/__init__.py", "log/changes.py", "spark/feed.py"])
    assert module_names.clashes(module_names.module_names(package), frozenset({"types"})) == []


def test_the_real_package_has_no_clash():
    assert module_names.main() == 0


def test_an_ignore_needs_a_code_and_a_reason():
    text = "\n".join([
        "a = f()  # type: ignore",
        "b = f()  # type: ignore[arg-type]",
        "c = f()  # type: ignore[arg-type]  # the stubs say int; a float works",
        "d = f()  # type: ignore[attr-defined]  #",
        "e = f()  # an ordinary comment",
    ])
    found = type_ignores.problems(Path("m.py"), text)
    assert [line.split(":")[1] for line in found] == ["1", "2", "4"]
    assert "error code" in found[0] and "say why" in found[1]
