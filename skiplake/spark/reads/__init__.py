"""Reading a table's planned files with Spark's native Parquet reader: deleted rows dropped,
row ids, the change data feed, and Parquet tables of a Glue-compatible catalog."""
