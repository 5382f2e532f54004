"""Table locations: canonical spellings, joins below a root, and refused schemes."""
from __future__ import annotations

import os

import pytest

from skiplake.errors import InvalidArgumentError, UnsupportedLocationError
from skiplake.log.location import from_spark_uri, is_remote, is_under, join, norm, relative, resolve, scheme_of
from skiplake.log.paths import absolute_path
from skiplake.log.s3 import normalize_options


def test_local_paths_and_file_uris(tmp_path):
    assert resolve("rel/t") == os.path.join(os.getcwd(), "rel", "t")
    assert resolve(f"file://{tmp_path}/a%20b") == f"{tmp_path}/a b"
    assert resolve("a:b") == os.path.join(os.getcwd(), "a:b")  # a file name with a colon, not a URI
    assert not is_remote(resolve("x"))


def test_object_store_uris_are_canonical():
    assert resolve("s3://bucket/wh/") == "s3://bucket/wh"
    assert resolve("s3a://bucket//wh/./t") == "s3a://bucket/wh/t"
    assert resolve("S3://bucket") == "s3://bucket"
    assert is_remote("s3://b/k") and is_remote("s3a://b/k")
    assert join("s3://b/wh", "t", "_delta_log") == "s3://b/wh/t/_delta_log"
    assert relative("s3://b/wh", "s3://b/wh/p=1/f.parquet") == "p=1/f.parquet"
    assert is_under("s3://b/wh", "s3://b/wh/f") and not is_under("s3://b/wh", "s3://b/wh2/f")
    assert norm("s3://b/wh/x") == "s3://b/wh/x"  # normpath would fold s3:// into s3:/
    # One object whichever scheme names it (Spark reaches both through S3A); other URIs untouched.
    assert norm("s3a://b/wh/x") == norm("S3A://b/wh/x") == norm("s3://b/wh/x")
    assert norm("s3a://b/wh/x") != norm("s3a://b2/wh/x") and norm("/t/./a") == "/t/a"


@pytest.mark.parametrize("location", ["gs://b/t", "abfss://c@a.dfs.core.windows.net/t", "hdfs://nn:8020/t",
                                      "s3n://b/t", "http://host/t", "gs:/b/t", "wasbs://c@a/t"])
def test_foreign_schemes_are_refused(location):
    with pytest.raises(UnsupportedLocationError) as e:
        resolve(location)
    assert scheme_of(location) in str(e.value) and "s3://" in str(e.value)


@pytest.mark.parametrize("location", ["s3://", "s3:/lake/wh", "s3:lake"])
def test_s3_without_a_bucket_is_refused(location):
    with pytest.raises(InvalidArgumentError, match="bucket"):
        resolve(location)


def test_log_paths_below_an_object_store_root():
    root = "s3://b/wh/t"
    assert absolute_path(root, "p=a%253Db/part-0.parquet") == "s3://b/wh/t/p=a%3Db/part-0.parquet"
    assert absolute_path(root, "s3a://b/elsewhere/x%20y.parquet") == "s3a://b/elsewhere/x y.parquet"
    assert from_spark_uri("s3://b/wh/t/p=a%253Db/part-0.parquet") == "s3://b/wh/t/p=a%3Db/part-0.parquet"
    assert from_spark_uri("file:/tmp/a%20b/f.parquet") == "/tmp/a b/f.parquet"


def test_storage_options_are_checked():
    assert normalize_options({"aws_region": "eu-west-1", "AWS_DEFAULT_REGION": "x"}) == {"AWS_REGION": "x"}
    with pytest.raises(InvalidArgumentError, match="AWS_ENDPOINT_URL"):
        normalize_options({"endpoint": "http://x"})


def test_footer_readers_reach_s3_as_the_drivers_client_does(monkeypatch):
    """One source of credentials, never a mix: a bucket's options win whole over the environment,
    whose own set (key, secret, token) is taken whole when no options are given."""
    from skiplake.log.s3 import connection_for, set_bucket_options
    from skiplake.spark.convert.footer_jobs import s3_options_for
    for name in ("AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-token")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    set_bucket_options("given", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    try:
        c = connection_for("given")
        assert (c.access_key, c.secret_key, c.session_token) == ("k", "s", None)   # not the environment's token
        assert c.endpoint == "http://127.0.0.1:9000" and c.region == "us-east-1"    # as the driver's client
        env = connection_for("other")
        assert (env.access_key, env.secret_key, env.session_token) == ("env-key", "env-secret", "env-token")
        assert s3_options_for("s3://given/t") == {"access_key": "k", "secret_key": "s", "region": "us-east-1",
                                                  "endpoint_override": "127.0.0.1:9000", "scheme": "http"}
        assert s3_options_for("/local/t") == {}
    finally:
        set_bucket_options("given", None)
