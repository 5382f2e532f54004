"""Dynamic file pruning's Spark side that `lake.sql`, `lake.prune` and MERGE share: the build
side's distinct keys and the settings read from the session."""
