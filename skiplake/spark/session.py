"""A local SparkSession with the settings skiplake relies on."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pyspark.sql import SparkSession

from skiplake.errors import SkiplakeError
from skiplake.spark.gateway import is_connect, quick_replies
from skiplake.spark.object_stores import s3a_session_conf, wants_s3

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


def java_version() -> str:
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    out = subprocess.run([java, "-version"], capture_output=True, text=True)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "unknown"


def local_spark(app_name: str = "skiplake", master: str = "local[2]", shuffle_partitions: int = 4,
                driver_memory: str = "4g", packages: list[str] | None = None,
                conf: dict[str, str] | None = None, s3: bool | None = None) -> SparkSession:
    """A local SparkSession: `master` cores, few shuffle partitions, no UI, UTC, micros timestamps.

    s3=True loads Hadoop's S3A (from Maven Central, once) with its magic committer, and takes the
    endpoint and region from AWS_ENDPOINT_URL and AWS_REGION; None does so when the environment
    names an endpoint, keys or a profile (skiplake.spark.object_stores)."""
    _check_java()
    # Python workers (Z-order's mapInArrow) need this interpreter's packages (NumPy, Arrow);
    # PySpark reads the variable when it creates the context.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.driver.memory", driver_memory)
               .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
               # Listing the planned files is local work; never launch a Spark job for it.
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
               # Bucketed reads of tables with different bucket counts (one a multiple of the
               # other) then join without a shuffle too; only bucketed scans are affected.
               .config("spark.sql.bucketing.coalesceBucketsInJoin.enabled", "true"))
    for k, v in REQUIRED_CONF.items():
        builder = builder.config(k, v)
    settings = dict(conf or {})
    if s3 or (s3 is None and wants_s3()):
        s3_conf = s3a_session_conf()
        packages = [*s3_conf.pop("spark.jars.packages").split(","), *(packages or [])]
        settings = {**s3_conf, **settings}
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if not is_connect(spark):  # a Spark Connect client has no SparkContext; its server logs
        spark.sparkContext.setLogLevel("ERROR")
    quick_replies(spark)
    return spark


def ensure_conf(spark: SparkSession) -> None:
    """Apply REQUIRED_CONF to a session skiplake did not create (and answer its py4j calls quickly)."""
    quick_replies(spark)
    for k, v in REQUIRED_CONF.items():
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
