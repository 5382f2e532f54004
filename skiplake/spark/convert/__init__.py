"""CONVERT TO DELTA in place: a Parquet directory or session catalog table adopted as a table,
its footers read by a Spark job when the directory is large."""
