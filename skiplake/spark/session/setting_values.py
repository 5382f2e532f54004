"""Values of session settings (`spark.conf`) parsed, with a typed error naming a bad one."""
from __future__ import annotations

from skiplake.errors import InvalidArgumentError


def conf_count(key: str, text: str | None, default: int) -> int:
    """A whole number of at least 0 from the conf; InvalidArgumentError names the setting otherwise."""
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidArgumentError(f"{key}: {text!r} is not a whole number of at least 0")
    return value


def conf_number(key: str, text: str | None, default: float) -> float:
    """A number of at least 0 (a share, seconds) from the conf; InvalidArgumentError names the setting otherwise."""
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:   # NaN too
        raise InvalidArgumentError(f"{key}: {text!r} is not a number of at least 0")
    return value
