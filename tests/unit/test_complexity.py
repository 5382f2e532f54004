"""The complexity bar of `make lint` (scripts/complexity.py): what it counts and how its
allowlist only shrinks."""
from __future__ import annotations

from tests.unit.script_modules import load_script

complexity = load_script("complexity")


def test_boolean_operators_count_and_methods_are_named_by_class(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "def f(a, b, c):\n"
        "    if a and b and c:\n"      # 1 branch + 2 boolean operators
        "        return 1\n"
        "    return 0\n"
        "class K:\n"
        "    def g(self, x):\n"
        "        return [y for y in x if y]\n")
    monkeypatch.setattr(complexity, "REPO", tmp_path)
    found = complexity.scores(package)
    assert found == {"pkg/m.py:f": 4, "pkg/m.py:K.g": 3}


def test_over_the_bar_needs_an_entry_and_an_entry_only_shrinks():
    found = {"a.py:big": 20, "a.py:grown": 19, "a.py:small": 5, "a.py:fine": 17}
    allowed = {"a.py:grown": 18, "a.py:fine": 17, "a.py:small": 16, "a.py:gone": 30}
    problems = {p.name: p.problem for p in complexity.check(found, 15, allowed)}
    assert set(problems) == {"a.py:big", "a.py:grown", "a.py:small", "a.py:gone"}
    assert "over 15" in problems["a.py:big"]
    assert "allowed 18" in problems["a.py:grown"]
    assert "remove its entry" in problems["a.py:small"] and "remove its entry" in problems["a.py:gone"]
