"""One SparkSession for the whole test session (local[2], 2 shuffle partitions, UI off).

With SKIPLAKE_TEST_SPARK=connect the session is a Spark Connect client of a server this test
session starts (its own JVM on loopback, skiplake.spark.session.connect_server), and tests marked
`classic_only` (they reach into the JVM themselves) are skipped: `make test` runs the Connect
suites of CONNECT_TESTS (Makefile) that way after the classic run."""
from __future__ import annotations

import pytest

from testing_support.paths import setup_java
from tests.modes import CONNECT


def pytest_configure(config):
    config.addinivalue_line("markers", "classic_only: reaches into Spark's JVM; not run against Spark Connect")
    config.addinivalue_line("markers", "connect_only: runs against Spark Connect only")


# The files that take longest start first, so that parallel workers (make test WORKERS=n) end
# together instead of one worker running a long file alone at the end. Only the order changes.
LONGEST_FIRST = ("test_delta_spark_interop.py", "test_cluster.py", "test_stress.py", "test_bucketing.py",
                 "test_merge_differential.py", "test_change_data_feed.py", "test_row_level_concurrency.py",
                 "test_object_store.py", "test_tpcds_dynamic.py")


def pytest_collection_modifyitems(config, items):
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
                                            driver_memory="3g", s3=True))
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
    session = skiplake.local_spark(app_name="skiplake-tests", shuffle_partitions=2, driver_memory="3g", s3=True)
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


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A fresh, empty catalog database: an SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return request.getfixturevalue("postgres").new_database()
