"""A local SparkSession with the settings skiplake relies on."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pyspark.sql import SparkSession

from skiplake.errors import InvalidArgumentError, SkiplakeError
from skiplake.extras import require
from skiplake.spark.session.gateway import is_connect, quick_replies
from skiplake.spark.session.object_stores import s3a_session_conf, wants_s3

# Settings skiplake's stats and partition values depend on; applied to any session it is given.
REQUIRED_CONF = {
    # Stats and partition values are in UTC; literals in predicates are read in UTC too.
    "spark.sql.session.timeZone": "UTC",
    # INT96 timestamps carry no Parquet min/max statistics; micros do, and every Delta reader reads them.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def _check_java() -> None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return
    if shutil.which("java"):
        return
    raise SkiplakeError(
        "Spark needs Java 17 or 21 and none was found: set JAVA_HOME, or run `make test`/`make demo`, "
        "which find or install one (scripts/ensure_java.sh).")


def java_version() -> str | None:
    """The first line `java -version` prints (JAVA_HOME's Java, else the one on PATH), or None
    without a Java. Lines the JVM adds about JAVA_TOOL_OPTIONS or JDK_JAVA_OPTIONS are passed over."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True)
    lines = [line for line in (out.stderr or out.stdout).strip().splitlines()
             if "Picked up JAVA_TOOL_OPTIONS" not in line and "Picked up JDK_JAVA_OPTIONS" not in line]
    return lines[0] if lines else None


# Session settings of Spark SQL that skiplake sets on every session it creates; a Spark Connect
# client sets them on its server session (they are runtime settings, unlike the JVM's).
SESSION_SQL_CONF = {
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # Listing the planned files is local work; never launch a Spark job for it.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # Bucketed reads of tables with different bucket counts (one a multiple of the other) then
    # join without a shuffle too; only bucketed scans are affected.
    "spark.sql.bucketing.coalesceBucketsInJoin.enabled": "true",
}


def spark_conf(app_name: str = "skiplake", shuffle_partitions: int = 4, driver_memory: str = "4g",
               packages: list[str] | None = None, conf: dict[str, str] | None = None,
               s3: bool | None = None) -> dict[str, str]:
    """Every setting `local_spark` gives a new session (or a Spark Connect server it starts)."""
    out = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.driver.memory": driver_memory,
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        **SESSION_SQL_CONF,
        **REQUIRED_CONF,
    }
    settings = dict(conf or {})
    if s3 or (s3 is None and wants_s3()):
        s3_conf = s3a_session_conf()
        packages = [*s3_conf.pop("spark.jars.packages").split(","), *(packages or [])]
        settings = {**s3_conf, **settings}
    if packages:
        out["spark.jars.packages"] = ",".join(packages)
    out.update(settings)
    return out


def local_spark(app_name: str = "skiplake", master: str = "local[2]", shuffle_partitions: int = 4,
                driver_memory: str = "4g", packages: list[str] | None = None,
                conf: dict[str, str] | None = None, s3: bool | None = None,
                remote: str | None = None) -> SparkSession:
    """A local SparkSession: `master` cores, few shuffle partitions, no UI, UTC, micros timestamps.

    app_name: Spark's application name. master: the Spark master, `local[n]` for n cores (or a
    cluster's URL). shuffle_partitions: `spark.sql.shuffle.partitions`. driver_memory: the
    driver JVM's heap (only when this call starts the JVM). packages: more Maven coordinates for
    `spark.jars.packages`. conf: more Spark settings, applied last. A session already running in
    this process is the one returned (Spark's getOrCreate): only the settings Spark lets change at
    run time reach it.

    s3=True loads Hadoop's S3A (from Maven Central, once) with its magic committer, and takes the
    endpoint and region from AWS_ENDPOINT_URL and AWS_REGION; None does so when the environment
    names an endpoint, keys or a profile (skiplake.spark.session.object_stores).

    remote gives a Spark Connect session instead: "sc://host:port" connects to a running server
    (the SPARK_REMOTE variable does the same) and sets skiplake's runtime settings on its
    session; "local" starts a Connect server inside this process on `master`, with every
    setting above (skiplake.spark.session.connect_server starts one in a JVM of its own)."""
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    settings = spark_conf(app_name, shuffle_partitions, driver_memory, packages, conf, s3)
    if remote is not None and remote.startswith("sc://"):
        return connect_to(remote, {k: v for k, v in settings.items()
                                   if k.startswith("spark.sql.") and k != "spark.sql.sources.commitProtocolClass"})
    _check_java()
    # Python workers (Z-order's mapInArrow) need this interpreter's packages (NumPy, Arrow);
    # PySpark reads the variable when it creates the context.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master)
    if remote is not None:
        if remote != "local":
            raise InvalidArgumentError(
                f"local_spark(remote={remote!r}): give a Spark Connect URL (sc://host:port) or 'local' "
                "(a Connect server inside this process)")
        # PySpark then starts a Connect server on `master` and hands back its client's session.
        builder = builder.config("spark.api.mode", "connect")
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if not is_connect(spark):  # a Spark Connect client has no SparkContext; its server logs
        spark.sparkContext.setLogLevel("ERROR")
    quick_replies(spark)
    return spark


def connect_to(url: str, session_conf: dict[str, str] | None = None) -> SparkSession:
    """A Spark Connect session on the server at `url` (sc://host:port) with skiplake's runtime
    settings (REQUIRED_CONF and SESSION_SQL_CONF, plus `session_conf`) set on it."""
    require("connect", f"a Spark Connect session ({url})")
    spark = SparkSession.builder.remote(url).getOrCreate()
    for k, v in {**SESSION_SQL_CONF, **REQUIRED_CONF, **CONNECT_CONF, **(session_conf or {})}.items():
        spark.conf.set(k, v)
    return spark


# A Spark Connect client reads plans as EXPLAIN prints them: every column of a relation, not the
# first 25 (skiplake.spark.session.explain_text).
CONNECT_CONF = {"spark.sql.debug.maxToStringFields": "1000000"}


def ensure_conf(spark: SparkSession) -> None:
    """Apply REQUIRED_CONF to a session skiplake did not create (and answer its py4j calls quickly)."""
    quick_replies(spark)
    for k, v in {**REQUIRED_CONF, **(CONNECT_CONF if is_connect(spark) else {})}.items():
        if spark.conf.get(k, None) != v:
            spark.conf.set(k, v)


def active_session() -> SparkSession | None:
    """The SparkSession of the program skiplake runs in, if any."""
    return SparkSession.getActiveSession()


def active_or_local_spark(app_name: str) -> tuple[SparkSession, bool]:
    """(session, started_here): the active session when skiplake runs inside a Spark program,
    else a new local one (which the caller stops)."""
    active = active_session()
    if active is not None:
        return active, False
    return local_spark(app_name=app_name), True


def session_summary(spark: SparkSession) -> str:
    """Spark's and pyspark's versions and the master, in one line."""
    import pyspark
    return f"Spark {spark.version} (pyspark {pyspark.__version__}), master {spark.conf.get('spark.master', None)}"
