"""The Delta log without Spark: actions, snapshots, checkpoints and commits, local and S3 storage, file stats,
column mapping, deletion vectors, table features, the change feed, log cleanup and VACUUM."""
