"""skiplake's performance benchmarks: each module runs on its own, and together they are the suite.

    .venv/bin/python -m benchmarks.bench_snapshot [--quick] [--json] [--out FILE]   # one benchmark
    .venv/bin/python -m benchmarks [--quick] [--list]     # the whole suite into one run folder (make bench)

Every benchmark builds a benchmarks.common.Report; the suite (benchmarks.suite, benchmarks.summary)
writes the summary of docs/benchmarks.md from one run. How to run, the method and each benchmark:
docs/benchmarks.md.
"""
