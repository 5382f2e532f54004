"""Values of session settings (`spark.conf`) parsed, with a typed error naming a bad one."""
from __future__ import annotations

from typing import Callable, TypeVar

from skiplake.errors import InvalidArgumentError

_N = TypeVar("_N", int, float)


def conf_count(key: str, text: str | None, default: int) -> int:
    """A whole number of at least 0 from the conf; InvalidArgumentError names the setting otherwise."""
    return _at_least_zero(key, text, default, int, "a whole number")


def conf_number(key: str, text: str | None, default: float) -> float:
    """A number of at least 0 (a share, seconds) from the conf; InvalidArgumentError names the setting otherwise."""
    return _at_least_zero(key, text, default, float, "a number")


def _at_least_zero(key: str, text: str | None, default: _N, parse: Callable[[str], _N], what: str) -> _N:
    if not text:
        return default
    problem = InvalidArgumentError(f"{key}: {text!r} is not {what} of at least 0")
    try:
        value = parse(text)
    except ValueError:
        raise problem from None
    if not value >= 0:   # NaN too
        raise problem
    return value
