"""The driver's py4j connections to its JVM, made to answer without a 40 ms stall.

Every call PySpark makes into the JVM is a request and a reply over a local socket, one socket
per Python thread. The JVM's end keeps Nagle's algorithm on, and writes a reply longer than its
8 KiB buffer in pieces: the last piece then waits for the acknowledgement of the first, which
Linux delays by 40 ms. So every reply over about 8 KB (a plan printed as text, a wide schema as
JSON, a query's column list) took 44 ms on this machine instead of 1-5 ms (`python -m
benchmarks.bench_py4j` measures it). TCP_NODELAY on the JVM's end removes the wait. py4j offers
no setting for it, so the socket is reached through the gateway server's list of connections
(a private field, read by reflection); a gateway without that field (Spark Connect, another py4j)
is left as it is.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_this_thread = threading.local()


def is_connect(spark: "SparkSession") -> bool:
    """Whether `spark` is a Spark Connect client's session: no JVM in this process, so no py4j
    gateway, SparkContext or RDD job. Told by its class, which needs nothing of Connect's (grpc)
    imported."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def quick_replies(spark: "SparkSession") -> None:
    """Turn off Nagle's algorithm on the JVM's end of the driver's py4j connections.

    Cheap after the first call in a thread (a thread-local flag); a new thread gets a new
    connection, so threads that talk to the JVM call this first."""
    if getattr(_this_thread, "done", False):
        return
    _this_thread.done = True
    set_nodelay(spark, True)


def set_nodelay(spark: "SparkSession", on: bool) -> int:
    """Set TCP_NODELAY on the JVM's end of every py4j connection of the driver; how many."""
    try:
        server = py4j_gateway(spark).java_gateway_server
        cls = server.getClass()
        while cls is not None and cls.getName() != "py4j.GatewayServer":
            cls = cls.getSuperclass()
        if cls is None:
            return 0
        field = cls.getDeclaredField("connections")
        field.setAccessible(True)
        connections = field.get(server)
        done = 0
        for i in range(connections.size()):
            try:
                connections.get(i).getSocket().setTcpNoDelay(on)
                done += 1
            except Exception:  # a connection closing meanwhile
                continue
        return done
    except Exception:  # not a py4j gateway skiplake knows: it works as before, only slower
        return 0


def py4j_gateway(spark: "SparkSession") -> Any:
    """The driver's py4j gateway. PySpark types it Optional (a class attribute of SparkContext,
    None until a context starts); every live classic session has one."""
    gateway = spark.sparkContext._gateway
    if gateway is None:
        raise RuntimeError("this SparkSession has no py4j gateway: its SparkContext is not running")
    return gateway


def jvm_class(spark: "SparkSession", name: str) -> Any:
    """A JVM class (static members, constructor) by its full name, looked up once per session:
    py4j otherwise resolves `jvm.a.b.C` one round trip per dotted segment, and each static
    member by one more, on every use. Calling a static member or the constructor is then one."""
    gateway = py4j_gateway(spark)
    key = (id(gateway), name)
    if key not in _CLASSES:
        from py4j.java_gateway import JavaClass
        _CLASSES[key] = _Class(JavaClass(name, gateway._gateway_client))
    return _CLASSES[key]


class _Class:
    """A py4j JavaClass whose static members are looked up once."""

    def __init__(self, java_class: Any) -> None:
        self._java_class = java_class
        self._members: dict[str, Any] = {}

    def __call__(self, *args: Any) -> Any:
        return self._java_class(*args)

    def __getattr__(self, name: str) -> Any:
        members = self.__dict__["_members"]
        if name not in members:
            members[name] = getattr(self._java_class, name)
        return members[name]


_CLASSES: dict[tuple[int, str], _Class] = {}


def plan_size(plan: Any) -> int:
    """Spark's estimate of the size of a logical plan's output, in bytes (what its broadcast
    decision uses). It is a Scala BigInt: py4j hands it over as a Python int when it fits."""
    size = plan.stats().sizeInBytes()
    return int(size if isinstance(size, int) else size.toString())
