"""Requests checked against AWS Glue's own API model, the one botocore ships.

Every member of a request is checked as Glue's front end checks it before the service sees it:
required members, JSON types, string lengths and patterns, list and map sizes, enum values and
number ranges. A violation is a ValidationError whose message has Glue's form ("1 validation
error detected: Value at 'databaseInput.name' failed to satisfy constraint: Member must have
length less than or equal to 255"). Members the model does not know are refused too.

The model's patterns are Java regular expressions; the one construct Python's `re` lacks in
them, a surrogate-pair range for the supplementary planes, is rewritten as the code point range
it means. A pattern `re` still cannot compile (Unicode property classes, `\\p{L}`) is not checked;
`unchecked_patterns()` lists them.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from skiplake.errors import ValidationError

_SUPPLEMENTARY = "\\uD800\\uDC00-\\uDBFF\\uDFFF"  # Java: UTF-16 surrogate pairs = U+10000..U+10FFFF
MAX_DEPTH = 64  # deeper JSON than any Glue request shape needs is refused before it is walked


@lru_cache(maxsize=1)
def _model() -> dict[str, Any]:
    import botocore.loaders
    return botocore.loaders.Loader().load_service_model("glue", "service-2")


@lru_cache(maxsize=None)
def _pattern(java: str) -> re.Pattern[str] | None:
    try:
        return re.compile(java.replace(_SUPPLEMENTARY, "\\U00010000-\\U0010FFFF"))
    except re.error:
        return None


def unchecked_patterns() -> list[str]:
    """The model's string patterns that are not checked (Python's `re` cannot compile them)."""
    shapes = _model()["shapes"]
    return sorted({s["pattern"] for s in shapes.values() if s.get("pattern") and _pattern(s["pattern"]) is None})


def input_shape(operation: str) -> str | None:
    """The name of `operation`'s request shape in Glue's API model; None for an operation it lacks."""
    op = _model()["operations"].get(operation)
    return (op.get("input") or {}).get("shape") if op else None


def validate(operation: str, params: Any) -> None:
    """Raise ValidationError unless `params` is a valid request of `operation` (an operation the
    model does not know is left to the caller)."""
    shape = input_shape(operation)
    if shape is None:
        return
    errors: list[str] = []
    _check(params, shape, "", errors, 0)
    if errors:
        shown = errors[:5]
        raise ValidationError(f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected: "
                              + "; ".join(shown) + ("; ..." if len(errors) > len(shown) else ""))


def _at(path: str) -> str:
    return f"Value at '{path}'" if path else "Value"


def _member_path(path: str, member: str) -> str:
    name = member[:1].lower() + member[1:]  # Glue's messages name members in lower camel case
    return f"{path}.{name}" if path else name


def _check(value: Any, shape_name: str, path: str, errors: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must nest at most {MAX_DEPTH} levels")
        return
    if value is None:
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must not be null")
        return
    shape = _model()["shapes"][shape_name]
    _CHECKS[shape["type"]](value, shape, path, errors, depth)


def _type_error(path: str, what: str, errors: list[str]) -> None:
    errors.append(f"{_at(path)} failed to satisfy constraint: Member must be {what}")


def _check_list(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, list):
        return _type_error(path, "a list", errors)
    _check_size(len(value), shape, path, errors, "have length")
    for i, item in enumerate(value):
        _check(item, shape["member"]["shape"], f"{path}.{i + 1}.member" if path else f"{i + 1}", errors, depth + 1)


def _check_map(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, dict):
        return _type_error(path, "a map", errors)
    _check_size(len(value), shape, path, errors, "have length")
    for k, v in value.items():
        _check(k, shape["key"]["shape"], f"{path}.key", errors, depth + 1)
        _check(v, shape["value"]["shape"], f"{path}.{k}", errors, depth + 1)


def _check_integer(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        return _type_error(path, "an integer", errors)
    _check_size(value, shape, path, errors, "have value")


def _check_number(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _type_error(path, "a number", errors)
    _check_size(value, shape, path, errors, "have value")


def _check_boolean(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, bool):
        _type_error(path, "a boolean", errors)


def _check_timestamp(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        _type_error(path, "a timestamp", errors)


def _check_blob(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, str):
        _type_error(path, "base64 text", errors)


def _check_structure(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int) -> None:
    if not isinstance(value, dict):
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must be a structure")
        return
    members = shape.get("members", {})
    for name in shape.get("required", []):
        if value.get(name) is None:
            errors.append(f"{_at(_member_path(path, name))} failed to satisfy constraint: Member must not be null")
    for name, item in value.items():
        if name not in members:
            errors.append(f"{_at(_member_path(path, str(name)))} failed to satisfy constraint: "
                          "Member is not part of the request")
        elif item is not None:
            _check(item, members[name]["shape"], _member_path(path, name), errors, depth + 1)


def _check_string(value: Any, shape: dict[str, Any], path: str, errors: list[str], depth: int = 0) -> None:
    if not isinstance(value, str):
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must be a string")
        return
    _check_size(len(value), shape, path, errors, "have length")
    if "enum" in shape and value not in shape["enum"]:
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must satisfy enum value set: "
                      f"[{', '.join(shape['enum'])}]")
    pattern = _pattern(shape["pattern"]) if "pattern" in shape else None
    if pattern is not None and not pattern.fullmatch(value):
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must satisfy regular expression "
                      f"pattern: {shape['pattern']}")


def _check_size(n: float, shape: dict[str, Any], path: str, errors: list[str], what: str) -> None:
    if "min" in shape and n < shape["min"]:
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must {what} greater than or equal to "
                      f"{shape['min']}")
    if "max" in shape and n > shape["max"]:
        errors.append(f"{_at(path)} failed to satisfy constraint: Member must {what} less than or equal to "
                      f"{shape['max']}")


_CHECKS = {"structure": _check_structure, "list": _check_list, "map": _check_map, "string": _check_string,
           "integer": _check_integer, "long": _check_integer, "double": _check_number, "float": _check_number,
           "boolean": _check_boolean, "timestamp": _check_timestamp, "blob": _check_blob}
