"""Spark's side of tables on S3: the S3A filesystem, its magic committer, and where S3A finds
the endpoint, region and credentials.

The log is written by skiplake (boto3, skiplake.log.s3); the data by Spark through Hadoop's S3A.
Both must reach the same store with the same credentials: from the environment (AWS_ENDPOINT_URL,
AWS_REGION, AWS_ACCESS_KEY_ID, ...; `local_spark(s3=True)` turns the first two into S3A settings,
S3A reads the keys itself) or from a Lake's `storage_options`, which `configure_bucket` sets as
S3A's per-bucket options on the running session.
"""
from __future__ import annotations

import os
from typing import Mapping
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from skiplake.errors import InvalidArgumentError
from skiplake.extras import require
from skiplake.log.location import bucket_and_key, is_remote, resolve
from skiplake.log.s3 import bucket_options, set_bucket_options
from skiplake.spark.session.gateway import is_connect, jvm_class

# The Hadoop inside PySpark 4.1 is 3.4.2 (pyspark/jars/hadoop-client-api-3.4.2.jar); hadoop-aws
# must be the same version, and pulls the AWS SDK v2 bundle it was built with (2.29.52: Hadoop
# keeps 3.4.x below 2.30, whose default checksums break third-party stores, HADOOP-19485).
HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.4.2"
AWS_SDK_BUNDLE = "software.amazon.awssdk:bundle:2.29.52"
# Spark's binding of Hadoop's S3A committers to Spark SQL. 4.1.1 is the newest 4.1 release on
# Maven Central; the module is a few classes whose API is unchanged within 4.1.
SPARK_HADOOP_CLOUD = "org.apache.spark:spark-hadoop-cloud_2.13:4.1.1"
S3A_PACKAGES = (HADOOP_AWS, SPARK_HADOOP_CLOUD)
# spark-hadoop-cloud also depends on the Azure, GCS and Huawei connectors and their libraries;
# S3 needs none of them (and the Hadoop client they would bring is PySpark's own).
S3A_EXCLUDES = (
    "com.google.cloud.bigdataoss:gcs-connector", "org.apache.hadoop:hadoop-azure",
    "org.apache.hadoop:hadoop-huaweicloud", "org.apache.hadoop:hadoop-cloud-storage",
    "org.apache.hadoop:hadoop-client-runtime", "org.apache.hadoop:hadoop-client-api",
    "org.eclipse.jetty:jetty-util", "org.eclipse.jetty:jetty-util-ajax", "com.squareup.okhttp3:okhttp",
    "com.squareup.okio:okio", "joda-time:joda-time", "com.fasterxml.jackson.core:jackson-databind",
    "com.fasterxml.jackson.core:jackson-annotations", "com.fasterxml.jackson.dataformat:jackson-dataformat-cbor",
    "org.apache.httpcomponents:httpclient", "org.apache.httpcomponents:httpcore",
)
MAGIC_PROTOCOL = "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
S3A_FACTORY = "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"

# Always set when S3 is on: s3:// is S3A too, and every job commits with the magic committer
# (multipart uploads completed at job commit: no rename, which S3 does by copying).
S3A_BASE_CONF = {
    "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
    "spark.hadoop.fs.s3a.committer.name": "magic",
    "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
    "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a": S3A_FACTORY,
    "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3": S3A_FACTORY,
    "spark.sql.sources.commitProtocolClass": MAGIC_PROTOCOL,
    "spark.sql.parquet.output.committer.class": "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter",
}


def endpoint_conf(endpoint: str | None, region: str | None, prefix: str = "fs.s3a.") -> dict[str, str]:
    """S3A settings for an endpoint URL and region (S3-compatible stores: path-style requests)."""
    out: dict[str, str] = {}
    if endpoint:
        out[prefix + "endpoint"] = endpoint
        out[prefix + "path.style.access"] = "true"
        out[prefix + "connection.ssl.enabled"] = str(urlparse(endpoint).scheme == "https").lower()
    if region or endpoint:
        out[prefix + "endpoint.region"] = region or "us-east-1"
    return out


def s3a_session_conf(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The session settings `local_spark(s3=True)` adds: packages, committers, and the endpoint
    and region from the environment (S3A reads AWS_ACCESS_KEY_ID and friends by itself)."""
    env = os.environ if env is None else env
    conf = {"spark.jars.packages": ",".join(S3A_PACKAGES), "spark.jars.excludes": ",".join(S3A_EXCLUDES),
            **S3A_BASE_CONF}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    conf.update({f"spark.hadoop.{k}": v for k, v in endpoint_conf(endpoint, region).items()})
    return conf


def bucket_hadoop_conf(bucket: str, options: Mapping[str, str]) -> dict[str, str]:
    """S3A's per-bucket settings (fs.s3a.bucket.<bucket>.*) for normalized storage options."""
    prefix = f"fs.s3a.bucket.{bucket}."
    out = endpoint_conf(options.get("AWS_ENDPOINT_URL"), options.get("AWS_REGION"), prefix)
    if options.get("AWS_ACCESS_KEY_ID"):
        out[prefix + "access.key"] = options["AWS_ACCESS_KEY_ID"]
        out[prefix + "secret.key"] = options.get("AWS_SECRET_ACCESS_KEY", "")
        if options.get("AWS_SESSION_TOKEN"):
            out[prefix + "session.token"] = options["AWS_SESSION_TOKEN"]
            out[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            out[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return out


def configure_bucket(spark: SparkSession, bucket: str, options: Mapping[str, str]) -> None:
    """Give S3A the storage options of `bucket` in this session (jobs carry the Hadoop
    configuration to executors, so a cluster's executors use them too). A Spark Connect client
    sets them as session settings, which Spark copies into the Hadoop configuration of every
    read and write of the session."""
    settings = bucket_hadoop_conf(bucket, options)
    if is_connect(spark):
        for k, v in settings.items():
            spark.conf.set(k, v)
        return
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for k, v in settings.items():
        conf.set(k, v)


_checked: set[int] = set()


def check_s3a(spark: SparkSession, location: str) -> None:
    """InvalidArgumentError unless the session can read and write s3:// with the magic committer."""
    if id(spark) in _checked:
        return
    how = ("Create the session with skiplake.local_spark(s3=True), or give your own session "
           f"spark.jars.packages={','.join(S3A_PACKAGES)} and the settings of "
           "skiplake.spark.session.object_stores.S3A_BASE_CONF (README, 'Object stores and clusters')")
    if not _has_s3a(spark, location):
        raise InvalidArgumentError(f"{location}: this SparkSession has no S3A filesystem (hadoop-aws). {how}")
    protocol = spark.conf.get("spark.sql.sources.commitProtocolClass", None)
    if protocol != MAGIC_PROTOCOL:
        raise InvalidArgumentError(
            f"{location}: this SparkSession would commit S3 writes by renaming (a copy of every file on S3); "
            f"skiplake writes object-store tables with S3A's magic committer. {how}")
    _checked.add(id(spark))


def _has_s3a(spark: SparkSession, location: str) -> bool:
    """Whether the session's Spark can load S3A's filesystem class."""
    if is_connect(spark):
        # No JVM to ask: a probe read of a path that does not exist. Spark says the path is not
        # found when S3A answered (or the store refused the keys, which the log's own requests
        # report better); it names the missing class when there is no S3A.
        probe = location.rstrip("/").replace("s3://", "s3a://", 1) + "/_skiplake_s3a_probe_does_not_exist"
        try:
            spark.read.format("text").load(probe).schema
        except Exception as e:
            text = str(e)
            return not any(m in text for m in ("S3AFileSystem not found", "ClassNotFoundException",
                                               "No FileSystem for scheme"))
        return True
    try:
        # Through the Hadoop configuration's class loader, which sees the session's packages.
        jvm_class(spark, "org.apache.hadoop.fs.FileSystem").getFileSystemClass(
            "s3a", spark.sparkContext._jsc.hadoopConfiguration())
    except Exception:
        return False
    return True


def wants_s3(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment points at S3 (an endpoint, keys or a profile): `local_spark()`
    then loads S3A without being asked."""
    env = os.environ if env is None else env
    return any(env.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"))


def use_location(spark: SparkSession, location: str, storage_options: Mapping[str, str] | None = None) -> str:
    """The canonical path of a table or lake location, made reachable: an object-store bucket gets
    its storage options (for skiplake's requests and for S3A's), and the session must have S3A."""
    path = resolve(location)
    if is_remote(path):
        require("s3", f"the location {path}")
        bucket = bucket_and_key(path)[0]
        if storage_options is not None:
            set_bucket_options(bucket, storage_options)
        options = bucket_options(bucket)
        if options:
            configure_bucket(spark, bucket, options)
        check_s3a(spark, path)
    elif storage_options:
        raise InvalidArgumentError(f"storage_options apply to object-store locations, not to the folder {path}")
    return path
