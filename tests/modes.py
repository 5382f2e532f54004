"""Which Spark the test session runs against: classic PySpark, or a Spark Connect server
(SKIPLAKE_TEST_SPARK=connect; tests/conftest.py starts the server)."""
import os

CONNECT = os.environ.get("SKIPLAKE_TEST_SPARK") == "connect"
