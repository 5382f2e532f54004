"""SigV4 on the catalog server: boto3 with the right keys works unchanged; a wrong key, an
unknown key, no signature, an expired or replayed signature and a read-only principal writing
are refused with AWS's error types, and nothing is written."""
from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from skiplake.catalog.auth import AuthError, Principal, Verifier, load_principals
from skiplake.catalog.server import CatalogServer
from skiplake.catalog.service import GlueCatalog
from skiplake.errors import InvalidArgumentError
from testing_support.net import catalog_serve, glue_post, retry_while_starting, signed_headers

PRINCIPALS = {"AKWRITER": Principal("AKWRITER", "writer-secret", "read-write"),
              "AKREADER": Principal("AKREADER", "reader-secret", "read-only")}


@pytest.fixture()
def server(tmp_path):
    s = CatalogServer(GlueCatalog(f"sqlite:///{tmp_path / 'c.db'}"), principals=PRINCIPALS).start()
    yield s
    s.stop()


def _client(server, key: str, secret: str, **config):
    return boto3.client("glue", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}, **config))


def _code(call) -> str:
    with pytest.raises(ClientError) as e:
        call()
    return e.value.response["Error"]["Code"]


def test_right_keys_work_and_roles_are_enforced(server):
    writer = _client(server, "AKWRITER", "writer-secret")
    writer.create_database(DatabaseInput={"Name": "sales"})
    reader = _client(server, "AKREADER", "reader-secret")
    assert reader.get_database(Name="sales")["Database"]["Name"] == "sales"
    assert [d["Name"] for d in reader.get_databases()["DatabaseList"]] == ["sales"]
    assert _code(lambda: reader.create_database(DatabaseInput={"Name": "other"})) == "AccessDeniedException"
    assert _code(lambda: reader.delete_database(Name="sales")) == "AccessDeniedException"
    assert _code(lambda: _client(server, "AKWRITER", "wrong").create_database(DatabaseInput={"Name": "x"})) \
        == "InvalidSignatureException"
    assert _code(lambda: _client(server, "AKNOBODY", "s").get_databases()) == "UnrecognizedClientException"
    unsigned = _client(server, "AKWRITER", "writer-secret", signature_version=UNSIGNED)
    assert _code(lambda: unsigned.create_database(DatabaseInput={"Name": "y"})) \
        == "MissingAuthenticationTokenException"
    assert [d["Name"] for d in writer.get_databases()["DatabaseList"]] == ["sales"]  # nothing else written


def _signed(server, body: dict, key: str = "AKWRITER", secret: str = "writer-secret") -> tuple[bytes, dict]:
    data = json.dumps(body).encode()
    return data, signed_headers(server.endpoint, "CreateDatabase", data, key, secret)


def _send(server, data: bytes, headers: dict) -> tuple[int, dict]:
    status, body, _ = glue_post(server.endpoint, "CreateDatabase", data, headers)
    return status, body


def test_replayed_and_expired_signatures_are_refused(server):
    data, headers = _signed(server, {"DatabaseInput": {"Name": "once"}})
    assert _send(server, data, headers)[0] == 200
    status, body = _send(server, data, headers)
    assert status == 403 and body["__type"] == "InvalidSignatureException" and "replay" in body["message"]
    # A body changed after signing does not verify.
    data2, headers2 = _signed(server, {"DatabaseInput": {"Name": "twice"}})
    status, body = _send(server, data2.replace(b"twice", b"other"), headers2)
    assert status == 403 and body["__type"] == "InvalidSignatureException"
    # Clock skew: the same signature checked as if 10 minutes had passed.
    data3, headers3 = _signed(server, {"DatabaseInput": {"Name": "late"}})
    headers3["Host"] = server.endpoint.removeprefix("http://")  # http.client adds it on the wire
    verifier = Verifier(PRINCIPALS)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=10)
    with pytest.raises(AuthError, match="Signature expired"):
        verifier.verify("POST", "/", headers3, data3, now=later)
    assert verifier.verify("POST", "/", headers3, data3).role == "read-write"
    names = [d["Name"] for d in _client(server, "AKREADER", "reader-secret").get_databases()["DatabaseList"]]
    assert names == ["once"]


def test_the_operation_header_must_be_signed(server):
    """X-Amz-Target names the operation: a signature that leaves it out could be replayed as
    another operation."""
    data = json.dumps({"Name": "x"}).encode()
    request = AWSRequest(method="POST", url=server.endpoint + "/", data=data,
                         headers={"Content-Type": "application/x-amz-json-1.1"})
    SigV4Auth(Credentials("AKWRITER", "writer-secret"), "glue", "us-east-1").add_auth(request)
    headers = {**dict(request.headers.items()), "X-Amz-Target": "AWSGlue.DeleteDatabase"}
    status, body = _send(server, data, headers)
    assert status == 400 and body["__type"] == "IncompleteSignatureException" and "x-amz-target" in body["message"]


def test_credentials_file(tmp_path):
    good = tmp_path / "creds.json"
    good.write_text(json.dumps({"principals": [{"access_key_id": "A", "secret_access_key": "s", "role": "read-only"}]}))
    assert load_principals(str(good))["A"].role == "read-only"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"principals": [{"access_key_id": "A", "secret_access_key": "s", "role": "admin"}]}))
    with pytest.raises(InvalidArgumentError, match="role"):
        load_principals(str(bad))
    with pytest.raises(InvalidArgumentError, match="no principal"):
        (tmp_path / "empty.json").write_text('{"principals": []}')
        load_principals(str(tmp_path / "empty.json"))


def test_an_endpoint_catalog_signs_with_the_standard_aws_chain(server, monkeypatch):
    from skiplake.catalog.client import catalog_client
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKWRITER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "writer-secret")
    catalog_client(server.endpoint).call("CreateDatabase", {"DatabaseInput": {"Name": "from_env"}})
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKREADER")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "reader-secret")
    reader = catalog_client(server.endpoint)
    assert [d["Name"] for d in reader.call("GetDatabases", {})["DatabaseList"]] == ["from_env"]
    with pytest.raises(ClientError, match="AccessDenied"):
        reader.call("DeleteDatabase", {"Name": "from_env"})


def test_catalog_serve_with_a_credentials_file(tmp_path):
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"principals": [{"access_key_id": "AKCLI", "secret_access_key": "cli-secret"}]}))
    with catalog_serve(f"sqlite:///{tmp_path / 'cli.db'}", "--credentials", str(creds)) as endpoint:
        good = boto3.client("glue", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKCLI",
                            aws_secret_access_key="cli-secret", config=Config(retries={"max_attempts": 1}))
        retry_while_starting(lambda: good.create_database(DatabaseInput={"Name": "d"}))
        assert [d["Name"] for d in good.get_databases()["DatabaseList"]] == ["d"]
        bad = boto3.client("glue", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
        assert _code(lambda: bad.get_databases()) == "UnrecognizedClientException"
