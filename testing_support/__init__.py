"""What tests and benchmarks both need to run skiplake against real parts: an S3-compatible
server and a counting proxy before it, PostgreSQL, the catalog server's processes, delta-spark
in a JVM of its own, a standalone Spark cluster, clean virtual environments for install checks,
the TPC-DS lake and its answers checked against DuckDB (tpcds_lake, tpcds_answers), where the
checkout, its Java and the working data are (paths), and the helpers that read what a Spark plan
scanned. Not part of the installed package."""
