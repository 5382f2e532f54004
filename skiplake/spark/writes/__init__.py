"""Writing data files and committing them: the transaction pinned to a snapshot, Spark's
Parquet writer with footer stats, and the table's rules enforced inside the write jobs."""
