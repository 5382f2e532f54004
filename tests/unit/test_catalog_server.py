"""The catalog as a production server (uvicorn): health, request ids, size limits, body and
request timeouts, the JSON access log, TLS, worker processes that share replay protection and
are replaced when they die, and a graceful drain on SIGTERM."""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import sqlite3
import ssl
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from skiplake.catalog.app import Limits
from skiplake.catalog.auth import DatabaseSignatures, Principal
from skiplake.catalog.server import CatalogServer, ServeOptions
from skiplake.catalog.service import GlueCatalog
from skiplake.errors import CatalogError, InvalidArgumentError
from testing_support.net import catalog_process, glue_post, signed_headers

KEYS = {"AKSERVER": Principal("AKSERVER", "server-secret")}


def _glue(endpoint: str, **kwargs):
    return boto3.client("glue", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKSERVER",
                        aws_secret_access_key="server-secret", config=Config(retries={"max_attempts": 1}), **kwargs)


def _serve(tmp_path: Path, **options) -> CatalogServer:
    return CatalogServer(GlueCatalog(f"sqlite:///{tmp_path / 'c.db'}"), principals=KEYS,
                         options=ServeOptions(**{"access_log": None, **options})).start()


def test_health_request_ids_and_methods(tmp_path):
    server = _serve(tmp_path)
    try:
        with urllib.request.urlopen(server.endpoint + "/health") as r:
            health = json.loads(r.read())
        assert r.status == 200 and health["status"] == "ok" and health["database"] == "sqlite"
        head = urllib.request.Request(server.endpoint + "/health", method="HEAD")
        with urllib.request.urlopen(head) as r:
            assert r.status == 200 and r.read() == b""
        out = _glue(server.endpoint).get_databases()
        uuid.UUID(out["ResponseMetadata"]["RequestId"])   # botocore reads x-amzn-RequestId
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(server.endpoint + "/")
        assert e.value.code == 405 and json.loads(e.value.read())["__type"] == "InvalidInputException"
    finally:
        server.stop()


def test_request_size_limit(tmp_path):
    server = _serve(tmp_path, limits=Limits(max_body_bytes=2048))
    try:
        big = json.dumps({"DatabaseInput": {"Name": "big", "Description": "x" * 3000}}).encode()
        status, body, headers = glue_post(server.endpoint, "CreateDatabase", big,
                                          signed_headers(server.endpoint, "CreateDatabase", big, "AKSERVER",
                                                         "server-secret"))
        assert status == 413 and body["__type"] == "InvalidInputException" and "2,048" in body["message"]
        assert headers["x-amzn-errortype"] == "InvalidInputException"
        # A body sent in chunks, with no length declared, is cut off at the limit as well.
        with socket.create_connection(server.address) as s:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AWSGlue.CreateDatabase\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            for _ in range(3):
                s.sendall(b"400\r\n" + b"x" * 1024 + b"\r\n")
            s.sendall(b"0\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 413")
        assert _glue(server.endpoint).get_databases()["DatabaseList"] == []   # nothing written
    finally:
        server.stop()


def test_a_body_that_does_not_arrive_in_time_gets_408(tmp_path):
    server = _serve(tmp_path, limits=Limits(body_timeout=0.5))
    try:
        with socket.create_connection(server.address, timeout=10) as s:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AWSGlue.GetDatabases\r\nContent-Length: 100\r\n"
                      b"\r\n{\"Max")
            started = time.monotonic()
            answer = s.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408") and b"InvalidInputException" in answer
            assert 0.2 < time.monotonic() - started < 5   # the server's clock started at the headers
        assert _glue(server.endpoint).get_databases()["DatabaseList"] == []   # still serving
    finally:
        server.stop()


def test_a_slow_catalog_answers_operation_timeout(tmp_path):
    server = _serve(tmp_path, limits=Limits(request_timeout=0.5))
    glue = _glue(server.endpoint)
    try:
        glue.create_database(DatabaseInput={"Name": "first"})
        lock = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")   # another process holding the database's write lock
        try:
            with pytest.raises(ClientError) as e:
                glue.create_database(DatabaseInput={"Name": "second"})
            assert e.value.response["Error"]["Code"] == "OperationTimeoutException"
            assert "may still complete" in e.value.response["Error"]["Message"]
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert "first" in [d["Name"] for d in glue.get_databases()["DatabaseList"]]
    finally:
        server.stop()


def test_access_log_has_one_json_line_per_request(tmp_path):
    log = tmp_path / "access.log"
    server = _serve(tmp_path, access_log=str(log))
    try:
        glue = _glue(server.endpoint)
        ok = glue.create_database(DatabaseInput={"Name": "logged"})
        with pytest.raises(ClientError):
            glue.get_database(Name="missing")
    finally:
        server.stop()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["operation"], x["status"], x["error"]) for x in lines] == [
        ("CreateDatabase", 200, None), ("GetDatabase", 400, "EntityNotFoundException")]
    assert lines[0]["request_id"] == ok["ResponseMetadata"]["RequestId"]
    assert all(x["principal"] == "AKSERVER" and x["bytes_in"] > 0 and x["ms"] >= 0 for x in lines)
    dt.datetime.fromisoformat(lines[0]["time"])


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls(tmp_path):
    cert, key = _self_signed(tmp_path)
    server = _serve(tmp_path, tls_cert=str(cert), tls_key=str(key))
    try:
        assert server.endpoint.startswith("https://")
        glue = _glue(server.endpoint, verify=str(cert))
        glue.create_database(DatabaseInput={"Name": "over_tls"})
        assert [d["Name"] for d in glue.get_databases()["DatabaseList"]] == ["over_tls"]
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            _glue(server.endpoint).get_databases()    # an untrusted certificate is refused by the client
        with pytest.raises(Exception):
            glue_post(server.endpoint.replace("https", "http"), "GetDatabases", b"{}", timeout=5)
        ctx = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(server.endpoint + "/health", context=ctx) as r:
            assert r.status == 200
        glue.close()   # an idle TLS connection would hold the drain until the graceful timeout
    finally:
        server.stop()


def test_bad_serve_options_are_refused_before_serving(tmp_path):
    with pytest.raises(InvalidArgumentError, match="both --tls-cert and --tls-key"):
        ServeOptions(tls_cert="x.pem").check()
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        ServeOptions(tls_cert=str(tmp_path / "no.pem"), tls_key=str(tmp_path / "no.key")).check()
    with pytest.raises(InvalidArgumentError, match="--workers"):
        ServeOptions(workers=0).check()
    with pytest.raises(InvalidArgumentError, match="--threads"):
        ServeOptions(limits=Limits(threads=0)).check()
    options = ServeOptions(db="sqlite:///x.db", workers=3, limits=Limits(max_body_bytes=4096))
    assert ServeOptions.from_json(options.to_json()) == options
    # Files that exist but hold no certificate: refused before anything is bound.
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(InvalidArgumentError, match="do not load as a PEM certificate"):
        _serve(tmp_path, tls_cert=str(tmp_path / "bad.pem"), tls_key=str(tmp_path / "bad.pem"))
    # A server that cannot bind its port says so (uvicorn's own failure, reported by start()).
    taken = _serve(tmp_path)
    try:
        with pytest.raises((CatalogError, OSError)):
            CatalogServer(GlueCatalog(f"sqlite:///{tmp_path / 'c.db'}"), port=taken.address[1]).start()
    finally:
        taken.stop()


def test_replay_records_are_shared_through_the_database(tmp_path):
    """Two workers are two processes with their own engines on one database: a signature one
    recorded is a replay to the other."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    first, second = DatabaseSignatures(GlueCatalog(url).engine), DatabaseSignatures(GlueCatalog(url).engine)
    now = dt.datetime.now(dt.timezone.utc)
    assert first.first_time("a" * 64, now, now)
    assert not second.first_time("a" * 64, now, now)
    assert second.first_time("b" * 64, now, now)
    # Expired rows are pruned as new ones arrive.
    second.PRUNE_EVERY = 1
    later = now + dt.timedelta(minutes=11)
    assert second.first_time("c" * 64, later, later)
    assert first.first_time("a" * 64, later, later)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = [int(k) for k in f.read().split()]
    workers = []
    for k in kids:
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                if b"spawn_main" in f.read() and b"resource_tracker" not in Path(f"/proc/{k}/cmdline").read_bytes():
                    workers.append(k)
        except FileNotFoundError:
            pass
    return workers


def _wait(predicate, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_workers_replay_protection_restart_and_graceful_drain(tmp_path):
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"principals": [{"access_key_id": "AKSERVER", "secret_access_key": "server-secret"}]}))
    with catalog_process(f"sqlite:///{tmp_path / 'c.db'}", "--workers", "2", "--credentials", str(creds),
                         "--graceful-timeout", "20") as served:
        _wait(lambda: len(_children(served.process.pid)) == 2)
        glue = _glue(served.endpoint)
        glue.create_database(DatabaseInput={"Name": "sales"})
        # One signed write sent on 20 connections: whichever worker each reaches, one succeeds.
        data = json.dumps({"DatabaseInput": {"Name": "once"}}).encode()
        headers = signed_headers(served.endpoint, "CreateDatabase", data, "AKSERVER", "server-secret")
        answers = [glue_post(served.endpoint, "CreateDatabase", data, headers) for _ in range(20)]
        assert sorted(status for status, _, _ in answers) == [200] + [403] * 19
        assert all("replay" in body["message"] for status, body, _ in answers if status == 403)
        # A worker that dies is replaced, and the server goes on answering.
        victim = _children(served.process.pid)[0]
        os.kill(victim, signal.SIGKILL)
        _wait(lambda: victim not in _children(served.process.pid) and len(_children(served.process.pid)) == 2)
        assert {d["Name"] for d in glue.get_databases()["DatabaseList"]} == {"sales", "once"}
        # SIGTERM while a request is half sent: it is still answered, then the server exits 0.
        body = json.dumps({"DatabaseInput": {"Name": "in_flight"}}).encode()
        headers = signed_headers(served.endpoint, "CreateDatabase", body, "AKSERVER", "server-secret")
        port = int(served.endpoint.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            # A first request on the connection proves a worker has accepted it (one still in
            # the listen queue at SIGTERM would be reset, not drained).
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            first = b""
            while b"\r\n\r\n" not in first or not first.rstrip().endswith(b"}"):
                first += s.recv(4096)
            assert first.startswith(b"HTTP/1.1 200")
            head = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() != "content-length")
            s.sendall(f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n{head}\r\n"
                      .encode() + body[:10])
            time.sleep(0.5)
            served.process.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            s.sendall(body[10:])
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert served.process.wait(30) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
    assert "in_flight" in {r[0] for r in sqlite3.connect(tmp_path / "c.db").execute("SELECT name FROM databases")}


def test_a_database_failure_during_the_signature_check_is_a_glue_500(tmp_path):
    server = _serve(tmp_path)
    try:
        glue = _glue(server.endpoint)
        glue.create_database(DatabaseInput={"Name": "before"})
        with sqlite3.connect(tmp_path / "c.db") as db:
            db.execute("DROP TABLE request_signatures")   # the replay record cannot be written
        with pytest.raises(ClientError) as e:
            glue.create_database(DatabaseInput={"Name": "after"})
        assert e.value.response["Error"]["Code"] == "InternalServiceException"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
        assert [d["Name"] for d in glue.get_databases()["DatabaseList"]] == ["before"]   # still answering
    finally:
        server.stop()


def test_catalog_serve_refuses_bad_flags(tmp_path):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "skiplake.cli", "catalog", "serve", "--db",
                          f"sqlite:///{tmp_path / 'c.db'}", "--tls-cert", str(tmp_path / "c.pem")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "both --tls-cert and --tls-key" in out.stderr


def test_many_clients_at_once(tmp_path):
    server = _serve(tmp_path)
    try:
        _glue(server.endpoint).create_database(DatabaseInput={"Name": "busy"})
        errors: list[Exception] = []

        def client() -> None:
            glue = _glue(server.endpoint)
            try:
                for _ in range(20):
                    assert glue.get_database(Name="busy")["Database"]["Name"] == "busy"
            except Exception as e:  # noqa: BLE001 (collected and asserted below)
                errors.append(e)

        threads = [threading.Thread(target=client) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    finally:
        server.stop()


def test_boto3_catalog_raises_skiplake_typed_errors(tmp_path):
    """Behind `catalog=` a boto3 Glue client answers Glue's errors as skiplake's typed catalog
    errors, as the in-process catalog does (a missing table is EntityNotFoundError to Lake)."""
    from skiplake.catalog.client import Boto3Catalog
    from skiplake.errors import AlreadyExistsError, EntityNotFoundError

    server = _serve(tmp_path)
    try:
        catalog = Boto3Catalog(_glue(server.endpoint))
        with pytest.raises(EntityNotFoundError, match="nope"):
            catalog.call("GetTable", {"DatabaseName": "nope", "Name": "t"})
        catalog.call("CreateDatabase", {"DatabaseInput": {"Name": "db"}})
        with pytest.raises(AlreadyExistsError):   # (another body: the same one signed again is a replay)
            catalog.call("CreateDatabase", {"DatabaseInput": {"Name": "db", "Description": "again"}})
        wrong_key = boto3.client("glue", endpoint_url=server.endpoint, region_name="us-east-1",
                                 aws_access_key_id="AKSERVER", aws_secret_access_key="wrong",
                                 config=Config(retries={"max_attempts": 1}))
        with pytest.raises(ClientError):   # a code skiplake has no type for stays botocore's
            Boto3Catalog(wrong_key).call("GetDatabases", {})
    finally:
        server.stop()
