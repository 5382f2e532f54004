"""Options for the JVMs the suite starts.

A JVM that runs many small jobs, each a new plan whose generated code is new to it, spends much
of its CPU in the JIT's optimizing compiler (C2) compiling code that runs once or twice, and in
the parallel garbage collector's threads. The suite's JVMs therefore run with the quick compiler
(C1) alone and the serial collector: over the Spark files of bucketing, MERGE and tables, the
suite's JVM used a fifth less CPU, in the same wall time (docs/testing.md, "Where the CPU goes").
"""
from __future__ import annotations

# HotSpot's tiered compilation stopped at level 1: C1 only, no profiling, no C2.
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
# The suite's SparkSession and the Spark Connect server: C1 only, and one garbage collector thread
# that works only when the heap is full, instead of G1's concurrent ones.
SUITE_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SUITE_JVM_CONF = {"spark.driver.extraJavaOptions": SUITE_JVM_OPTIONS}
