"""Bucketed tables in Spark: bucket joins with no shuffle, bucketed reads under Spark Connect,
and the check that each row sits in the bucket its file's name says."""
