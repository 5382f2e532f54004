"""A Glue-compatible catalog of tables and partitions, with partition indexes (work in progress:
the expression language and the index key encoding are here; the store and server come next)."""
