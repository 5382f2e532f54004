"""Which files to read, without Spark: the planner's stages (partitions, stats, buckets), the
columnar stats table, and the evaluators of predicates over what the log knows of each file."""
