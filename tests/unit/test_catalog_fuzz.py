"""The catalog server under malformed input: structured mutations of every operation's request
(from Glue's own model) and random bodies. Every answer is a 4xx in Glue's error shape, the server
keeps answering, and nothing is written."""
from __future__ import annotations

import http.client
import json
import random
from typing import Any

import pytest

from skiplake.catalog.server import CatalogServer
from skiplake.catalog.service import OPERATIONS, GlueCatalog
from skiplake.catalog.validation import _model


def _minimal(shape_name: str, depth: int = 0) -> Any:
    """A small value of a shape (valid enough; the tests mutate one member of it)."""
    shape = _model()["shapes"][shape_name]
    kind = shape["type"]
    if kind == "structure":
        return {m: _minimal(shape["members"][m]["shape"], depth + 1) for m in shape.get("required", []) if depth < 8}
    if kind == "list":
        return [_minimal(shape["member"]["shape"], depth + 1)] if shape.get("min", 0) > 0 else []
    if kind == "map":
        return {}
    if kind == "string":
        return shape["enum"][0] if "enum" in shape else "a" * max(1, shape.get("min", 1))
    if kind in ("integer", "long", "double", "float"):
        return shape.get("min", 1)
    return {"boolean": True, "timestamp": 0, "blob": ""}[kind]


def _wrong(shape_name: str) -> list[Any]:
    kind = _model()["shapes"][shape_name]["type"]
    wrong = {"structure": ["x", 5, []], "list": ["x", {"a": 1}, [None]], "map": ["x", [1]],
             "string": [5, ["x"], {"a": "b"}, "x" * 70_000, "\u0000"], "integer": ["1", 1.5, True, 10**40],
             "long": ["1", True], "double": ["x"], "float": ["x"], "boolean": ["true", 1], "timestamp": [[]],
             "blob": [5]}
    return wrong[kind]


def _mutations(operation: str) -> list[dict]:
    shape_name = _model()["operations"][operation]["input"]["shape"]
    shape = _model()["shapes"][shape_name]
    base = _minimal(shape_name)
    out = []
    for member in shape.get("required", []):
        out.append({k: v for k, v in base.items() if k != member})  # a required member missing
        for bad in _wrong(shape["members"][member]["shape"]):
            out.append({**base, member: bad})
    out.append({**base, "NotAMember": 1})
    return out


def _post(endpoint: str, operation: str, body: bytes) -> tuple[int, dict, str | None]:
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/", body=body, headers={"X-Amz-Target": f"AWSGlue.{operation}",
                                                  "Content-Type": "application/x-amz-json-1.1"})
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, json.loads(data), answer.getheader("x-amzn-ErrorType")


@pytest.fixture()
def server(tmp_path):
    s = CatalogServer(GlueCatalog(f"sqlite:///{tmp_path / 'c.db'}")).start()
    yield s
    s.stop()


def _assert_glue_error(status: int, body: dict, error_type: str | None, what: str) -> None:
    assert 400 <= status < 500, (what, status, body)
    assert isinstance(body.get("__type"), str) and isinstance(body.get("message"), str), (what, body)
    assert error_type == body["__type"], what


def test_structured_mutations_of_every_operation(server):
    sent = 0
    for operation in OPERATIONS:
        for request in _mutations(operation):
            status, body, error_type = _post(server.endpoint, operation, json.dumps(request).encode())
            _assert_glue_error(status, body, error_type, f"{operation} {json.dumps(request)[:200]}")
            sent += 1
    assert sent > 100
    assert server.catalog.call("GetDatabases", {})["DatabaseList"] == []  # nothing was written


def test_random_and_hostile_bodies(server):
    rnd = random.Random(42)
    bodies = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300))) for _ in range(300)]
    bodies += [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
               b"\xff\xfe\xfd", b"null", b"[1, 2]", b'"text"', b"1e999999"]
    for i, body in enumerate(bodies):
        operation = OPERATIONS[i % len(OPERATIONS)]
        status, answer, error_type = _post(server.endpoint, operation, body)
        _assert_glue_error(status, answer, error_type, f"{operation} body {body[:40]!r}")
    status, answer, _ = _post(server.endpoint, "GetDatabases", b"{}")
    assert status == 200 and answer["DatabaseList"] == []  # still up, nothing written
