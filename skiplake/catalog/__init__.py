"""A Glue-compatible catalog of databases, tables and partitions with partition indexes, on a SQL
database (SQLite or PostgreSQL): the store, the service, its HTTP server and clients, Glue's
partition expressions, index keys, and skiplake predicates in Glue's syntax."""
