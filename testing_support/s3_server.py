"""A throwaway S3-compatible server on loopback: s3proxy 4.0.0 over a temporary folder.

Why s3proxy: it comes from Maven Central (Java is already here for Spark), it checks AWS
Signature V4, and from 4.0.0 its filesystem store publishes a conditional PUT with link(2), so
`If-None-Match: *` is atomic under concurrent writers (moto's server checks and then writes
without a lock; tests/test_object_store.py checks the atomicity on this server). `make s3-jars`
fetches the jar; `start()` fetches it with Maven when it is missing.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from testing_support.net import free_port
from testing_support.paths import REPO

S3PROXY = "org.gaul:s3proxy:4.0.0:jar:jar-with-dependencies"
ACCESS_KEY = "skiplake-test"
SECRET_KEY = "skiplake-test-secret"


def s3proxy_jar() -> str:
    """The s3proxy jar: from .tools/ (make s3-jars), the local Maven repository, or Maven Central."""
    for pattern in (str(REPO / ".tools" / "s3proxy-*-jar-with-dependencies.jar"),
                    os.path.expanduser("~/.m2/repository/org/gaul/s3proxy/4.0.0/s3proxy-4.0.0-jar-with-dependencies.jar")):
        found = sorted(glob.glob(pattern))
        if found:
            return found[-1]
    subprocess.run(["mvn", "-q", "dependency:get", f"-Dartifact={S3PROXY}", "-Dtransitive=false"], check=True)
    return s3proxy_jar()


@dataclass
class S3Server:
    endpoint: str
    basedir: str
    process: subprocess.Popen
    signed: bool = True
    buckets: list[str] = field(default_factory=list)

    @property
    def options(self) -> dict[str, str]:
        """storage_options for skiplake (and, with AWS_ALLOW_HTTP, for delta-rs)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}

    @property
    def env(self) -> dict[str, str]:
        return dict(self.options)

    def client(self, secret: str = SECRET_KEY):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=secret, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}))

    def new_bucket(self) -> str:
        name = "b" + uuid.uuid4().hex[:12]
        self.client().create_bucket(Bucket=name)
        self.buckets.append(name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out, token = [], None
        while True:
            kwargs = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
            page = self.client().list_objects_v2(**kwargs)
            out += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.basedir, ignore_errors=True)


def start(signed: bool = True, java: str | None = None) -> S3Server:
    """s3proxy on a free loopback port over a new temporary folder; signed=False accepts any request."""
    basedir = tempfile.mkdtemp(prefix="skiplake-s3-")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    conf = os.path.join(basedir, "s3proxy.conf")
    data = os.path.join(basedir, "data")
    os.makedirs(data)
    auth = (f"s3proxy.authorization=aws-v2-or-v4\ns3proxy.identity={ACCESS_KEY}\ns3proxy.credential={SECRET_KEY}\n"
            if signed else "s3proxy.authorization=none\n")
    Path(conf).write_text(f"s3proxy.endpoint={endpoint}\n{auth}jclouds.provider=filesystem-nio2\n"
                          f"jclouds.filesystem.basedir={data}\n")
    if java is None:
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    log = open(os.path.join(basedir, "s3proxy.log"), "wb")
    process = subprocess.Popen([java, "-Xmx512m", "-jar", s3proxy_jar(), "--properties", conf],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"s3proxy exited: {Path(basedir, 's3proxy.log').read_text()[-2000:]}")
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except urllib.error.HTTPError:
            break  # an S3 error answer: the server is up
        except OSError:
            time.sleep(0.2)
    else:
        process.kill()
        raise RuntimeError("s3proxy did not start within 60 s")
    return S3Server(endpoint, basedir, process, signed)
