"""The `skiplake` Spark data source: batch reads and writes, a Structured Streaming source and sink."""
