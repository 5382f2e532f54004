"""How a table's rows are laid out in files: Hive-style partition folders and their types, Spark-exact
hash buckets, Z-order and Hilbert curves, Parquet directories as Spark lists them, and renames and drops
under column mapping."""
