"""Options for the JVMs the suite starts beside its own SparkSession.

A JVM that lives for a minute or two and runs a few small jobs spends most of its CPU in the
JIT's optimizing compiler (C2) compiling Spark's code for work that is over before the compiled
code pays back. Such JVMs run with the quick compiler (C1) alone. The suite's own JVM lives for
the whole run and keeps the default, under which it is faster overall (docs/testing.md)."""
from __future__ import annotations

# HotSpot's tiered compilation stopped at level 1: C1 only, no profiling, no C2.
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
