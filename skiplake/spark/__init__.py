"""The only package that imports pyspark: the session, reads and writes of planned files,
transactions, DML and OPTIMIZE as Spark jobs, bucket joins, catalog tables, and `lake.sql`
planning (query/)."""
