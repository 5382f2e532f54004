"""The only package that imports pyspark, in subpackages by capability. From the bottom up:

- `session/`: the SparkSession, its JVM, Spark Connect, S3A, schema conversions;
- `reads/`: planned files read by Spark's native reader (deletion vectors, row ids, change feed);
- `writes/` and `pruning/`: data files, transactions and rules; dynamic pruning's build keys;
- `dml/` and `buckets/`: APPEND, OVERWRITE, DELETE, UPDATE; bucket joins and bucketed reads;
- `merge/`, `optimize/`, `convert/` and `query/`: MERGE INTO, OPTIMIZE and clustering, CONVERT TO
  DELTA, and `lake.sql` planning.

A subpackage imports only those below it (the import contracts of pyproject.toml)."""
