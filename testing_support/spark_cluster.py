"""A Spark standalone cluster on loopback, from the PySpark installation: one master and N
workers, each its own JVM (`bin/spark-class ...Master` / `...Worker`; pip's PySpark has no
start-master.sh). Sized for a 2-core machine: one core and 1 GiB per worker, so each worker runs
exactly one executor. Work and log folders live in a temporary directory, never in the venv.
Every JVM of the cluster (daemons, executors and, through `driver_conf`, the driver) runs with the
options of short-lived JVMs (testing_support/jvm.py).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from testing_support.jvm import SHORT_LIVED_JVM_OPTIONS
from testing_support.net import free_port


def spark_home() -> str:
    import pyspark
    return os.path.dirname(pyspark.__file__)


@dataclass
class Cluster:
    url: str                # spark://127.0.0.1:PORT, as the master reports it
    ui: str                 # the master's web UI (JSON at /json/)
    root: str
    processes: list[subprocess.Popen] = field(default_factory=list)

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as r:
            return json.loads(r.read())

    def logs(self) -> str:
        out = []
        for p in sorted(Path(self.root).rglob("*")):
            if p.is_file() and p.name in ("stderr", "stdout") or p.suffix == ".log":
                out.append(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}")
        return "\n".join(out)

    def driver_conf(self, executor_memory: str = "1g") -> dict[str, str]:
        """Settings for a driver of this cluster (client mode, on this machine)."""
        return {"spark.driver.extraJavaOptions": SHORT_LIVED_JVM_OPTIONS,
                "spark.executor.extraJavaOptions": SHORT_LIVED_JVM_OPTIONS,
                "spark.executor.memory": executor_memory, "spark.executor.cores": "1",
                "spark.cores.max": str(len(self.processes) - 1),
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.dynamicAllocation.enabled": "false", "spark.default.parallelism": "2"}

    def stop(self) -> None:
        for p in reversed(self.processes):  # workers first, then the master
            p.terminate()
        for p in reversed(self.processes):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def start(workers: int = 2, worker_memory: str = "1g", timeout: float = 120) -> Cluster:
    home = spark_home()
    root = tempfile.mkdtemp(prefix="skiplake-cluster-")
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "512m",
           "SPARK_LOG_DIR": os.path.join(root, "logs"), "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
           "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM_OPTIONS}
    spark_class = os.path.join(home, "bin", "spark-class")
    port, ui_port = free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", root)

    def launch(name: str, args: list[str]) -> None:
        log = open(os.path.join(root, f"{name}.log"), "wb")
        cluster.processes.append(subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                                  stderr=subprocess.STDOUT, start_new_session=True))

    launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                      "--webui-port", str(ui_port)])
    for i in range(workers):
        work = os.path.join(root, f"worker-{i}")
        os.makedirs(work)
        launch(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                               "--memory", worker_memory, "--work-dir", work, "--webui-port", "0", cluster.url])
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(p.poll() is not None for p in cluster.processes):
            logs = cluster.logs()
            cluster.stop()
            raise RuntimeError(f"a cluster daemon exited:\n{logs}")
        try:
            state = cluster.state()
            if state.get("status") == "ALIVE" and state.get("aliveworkers") == workers:
                cluster.url = state["url"]
                return cluster
        except OSError:
            pass
        time.sleep(0.5)
    logs = cluster.logs()
    cluster.stop()
    raise RuntimeError(f"the cluster did not come up within {timeout:.0f} s:\n{logs}")
