"""One SparkSession for the whole test session (local[2], 2 shuffle partitions, UI off), the
real servers the tests talk to, and the tiers (docs/testing.md).

`make test` (the gate) runs `-m "not slow"`, then the tests marked `both_modes` again against
Spark Connect; `make test-full` runs every test and then every `connect` or `both_modes` test
against Spark Connect. With SKIPLAKE_TEST_SPARK=connect the session is a Spark Connect client of
a server this test session starts (its own JVM on loopback), and tests marked `classic_only`
(they reach into the JVM themselves) are skipped.
"""
from __future__ import annotations

import pytest

from testing_support.paths import setup_java
from tests.modes import CONNECT
from tests.tiers import FULL

# The gate's session generates code per expression, not per stage: on the suite's small tables
# compiling each plan's whole-stage code costs more than it saves. (With no generated code at all
# Spark 4.1 fails on some reads: a shredded variant's cast, the catalog's table listing.) The
# full tier runs Spark as users do.
SESSION_CONF = {} if FULL else {"spark.sql.codegen.wholeStage": "false"}

# A test that uses one of these fixtures must carry its marker, so that `-m` selects by what a
# test needs (`-m "not delta_spark"` on a machine without Maven Central, say). Checked at
# collection: a missing marker is an error that names the test.
FIXTURE_MARKERS = {"spark": "spark", "delta_spark": "delta_spark", "s3_server": "s3", "postgres": "postgres"}

# The files that take longest start first, so that parallel workers (make test WORKERS=n) end
# together instead of one worker running a long file alone at the end. Only the order changes.
LONGEST_FIRST = ("test_delta_spark_writes.py", "test_cluster.py", "test_stress.py", "test_delta_spark_reads.py",
                 "test_bucketing.py", "test_merge_differential.py", "test_row_level_concurrency.py",
                 "test_object_store.py", "test_convert.py", "test_tpcds_dynamic.py", "test_change_data_feed.py")


def unmarked(items: list[pytest.Item]) -> list[str]:
    """One line per test that uses a fixture of FIXTURE_MARKERS without carrying its marker."""
    out = []
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None:
                out.append(f"{item.nodeid}: uses the {fixture} fixture, so it needs @pytest.mark.{marker}")
    return out


@pytest.hookimpl(tryfirst=True)   # before -m deselects: an unmarked test is an error in any selection
def pytest_collection_modifyitems(config, items):
    missing = unmarked(items)
    if missing:
        raise pytest.UsageError("tests without the marker of a fixture they use (docs/testing.md):\n  "
                                + "\n  ".join(missing))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    skip = pytest.mark.skip(reason="classic PySpark only" if CONNECT else "Spark Connect only")
    # A test without a SparkSession is the same in both runs: the classic run has it.
    no_spark = pytest.mark.skip(reason="uses no SparkSession: run in the classic pass")
    for item in items:
        if item.get_closest_marker("classic_only" if CONNECT else "connect_only") is not None:
            item.add_marker(skip)
        elif CONNECT and "spark" not in getattr(item, "fixturenames", ()):
            item.add_marker(no_spark)


@pytest.fixture(scope="session")
def connect_server():
    """A Spark Connect server in its own JVM on loopback, with the settings of the classic session."""
    from skiplake.spark.session import connect_server as server_module
    from skiplake.spark.session.session_setup import spark_conf
    server = server_module.start(spark_conf(app_name="skiplake-tests", shuffle_partitions=2,
                                            driver_memory="3g", conf=SESSION_CONF, s3=True))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark(request):
    setup_java(install=True)
    import skiplake
    if CONNECT:
        server = request.getfixturevalue("connect_server")
        session = skiplake.local_spark(remote=server.url)
        yield session
        session.stop()
        return
    # With S3A and its magic committer (tests/test_object_store.py); local tables are unaffected.
    session = skiplake.local_spark(app_name="skiplake-tests", shuffle_partitions=2, driver_memory="3g",
                                   conf=SESSION_CONF, s3=True)
    yield session
    session.stop()


@pytest.fixture
def lake(spark, tmp_path):
    import skiplake
    return skiplake.Lake(spark, str(tmp_path / "warehouse"))


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory):
    """delta-spark 4.4 in one JVM of its own for the whole session (testing_support/delta_spark.py):
    the modules that compare with it hand it batches of jobs in turn. Started by the first test
    that asks for it; that test builds its tables while the JVM starts."""
    setup_java(install=True)
    from testing_support.delta_spark import DeltaSpark
    delta = DeltaSpark(tmp_path_factory.mktemp("delta_spark"))
    yield delta
    delta.close()


@pytest.fixture(scope="session")
def s3_server():
    """An S3-compatible server on loopback (s3proxy, SigV4, atomic conditional PUT)."""
    setup_java(install=True)
    from testing_support.s3_server import start
    server = start()
    yield server
    server.stop()


@pytest.fixture
def s3_lake(spark, s3_server):
    """A Lake at s3://<new bucket>/warehouse on the test server, credentials passed explicitly."""
    import skiplake
    return skiplake.Lake(spark, f"s3://{s3_server.new_bucket()}/warehouse", storage_options=s3_server.options)


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server on loopback for the catalog tests (Debian's package, installed if missing)."""
    from testing_support.postgres_server import PostgresUnavailable, start
    try:
        server = start()
    except PostgresUnavailable as e:
        pytest.skip(str(e))
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request, tmp_path) -> str:
    """A fresh, empty catalog database: an SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return request.getfixturevalue("postgres").new_database()
