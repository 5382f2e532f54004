"""A Spark Connect server on this machine, in a JVM of its own, with skiplake's settings.

What a managed platform runs for its clients, started from the PySpark installation itself
(its `spark-connect` jar and `spark-submit`): the test suite and benchmarks/bench_connect run
against one, and a user can start one for a local client (docs/spark-connect.md). The server's
Python workers (Z-order's mapInArrow) run this interpreter, which has skiplake and its packages.
"""
from __future__ import annotations

import atexit
import glob
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO

from skiplake.errors import SkiplakeError

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer:
    """A running server: its URL for `SparkSession.builder.remote` and its process."""
    url: str
    port: int
    process: subprocess.Popen
    log_path: str

    def stop(self) -> None:
        """Stop the server if it runs: terminate it, and kill it if it has not exited within 30 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server's log; empty when the log cannot be read."""
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def spark_home() -> str:
    """The Spark installation to run: SPARK_HOME, else the pyspark package's folder."""
    import pyspark
    return os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)


def connect_jar(home: str) -> str:
    """The Spark Connect server jar under `home`/jars (the last by name); none there is a SkiplakeError."""
    found = sorted(glob.glob(os.path.join(home, "jars", "spark-connect_*.jar")))
    if not found:
        raise SkiplakeError(f"No Spark Connect server jar under {home}/jars: PySpark 4.1 ships one "
                            "(spark-connect_2.13-4.1.x.jar); reinstall pyspark or set SPARK_HOME")
    return found[-1]


def free_port() -> int:
    """A TCP port free on loopback at the time of asking, as the system picks it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(conf: dict[str, str], master: str = "local[2]", port: int | None = None,
          timeout_s: float = 180.0, log: IO[str] | None = None) -> ConnectServer:
    """Start a Connect server on loopback with `conf` (skiplake.spark.session.session_setup.spark_conf gives
    skiplake's) and wait until it accepts connections."""
    home = spark_home()
    port = port or free_port()
    settings = {**conf, "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port)}
    command = [os.path.join(home, "bin", "spark-submit"), "--master", master, "--class", SERVER_CLASS]
    for k, v in settings.items():
        command += ["--conf", f"{k}={v}"]
    command.append(connect_jar(home))
    env = {**os.environ, "SPARK_HOME": home}
    # The server's Python workers run this interpreter, which has skiplake, NumPy and Arrow.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    log_path = tempfile.mkstemp(prefix="skiplake-connect-", suffix=".log")[1]
    out = open(log_path, "w") if log is None else log
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = ConnectServer(f"sc://127.0.0.1:{port}", port, process, log_path)
    # Its own session keeps it alive past this interpreter otherwise: a client that never calls
    # stop() would leave a JVM behind.
    atexit.register(server.stop)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SkiplakeError(f"The Spark Connect server exited ({process.returncode}) before it listened "
                                f"on port {port}; its log ({log_path}) ends:\n{server.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise SkiplakeError(f"The Spark Connect server did not listen on port {port} within {timeout_s:.0f} s; "
                        f"its log ({log_path}) ends:\n{server.log_tail()}")
