"""skiplake's performance benchmarks (issue 2): each module is runnable on its own.

    .venv/bin/python -m benchmarks.bench_snapshot [--quick] [--json]   # snapshot load, 100,000 files
    .venv/bin/python -m benchmarks.bench_append   [--quick] [--json]   # append 10M rows vs df.write.parquet
    .venv/bin/python -m benchmarks.bench_commit   [--quick] [--json]   # a small commit at 1,000 versions
    .venv/bin/python -m benchmarks                [--quick] [--json]   # all three, one after the other

Results and the machine they were measured on: docs/benchmarks.md.
"""
