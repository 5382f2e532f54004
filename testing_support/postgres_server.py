"""A throwaway PostgreSQL server on loopback for the catalog tests.

Uses Debian's `postgresql` package (installed with apt-get when missing and we are root), makes
a fresh cluster in a temporary folder, starts it on a free port and hands out one new database
per test. initdb refuses to run as root, so as root the cluster belongs to the `postgres` user
that the package creates.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass

from testing_support.net import free_port


class PostgresUnavailable(Exception):
    pass


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def _install() -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise PostgresUnavailable("PostgreSQL is not installed and cannot be installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=False, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if _bin_dir() is None:
        subprocess.run(["apt-get", "update", "-q"], check=False, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@dataclass
class PostgresServer:
    bin_dir: str
    root: str
    port: int
    as_user: list[str]

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.as_user, *args], check=True, capture_output=True, text=True)

    def new_database(self) -> str:
        name = "catalog_" + uuid.uuid4().hex[:10]
        self.run(os.path.join(self.bin_dir, "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "skiplake", name)
        return f"postgresql+psycopg://skiplake@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run([*self.as_user, os.path.join(self.bin_dir, "pg_ctl"), "-D", os.path.join(self.root, "data"),
                        "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def start() -> PostgresServer:
    if _bin_dir() is None:
        _install()
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable("no PostgreSQL binaries under /usr/lib/postgresql after installing")
    root = tempfile.mkdtemp(prefix="skiplake-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    data = os.path.join(root, "data")
    port = free_port()
    server = PostgresServer(bin_dir, root, port, as_user)
    server.run(os.path.join(bin_dir, "initdb"), "-D", data, "-A", "trust", "-U", "skiplake", "-E", "UTF8",
               "--locale=C")
    server.run(os.path.join(bin_dir, "pg_ctl"), "-D", data, "-w", "-l", os.path.join(root, "log"),
               "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    return server
