"""Delta's SQL statements through `lake.sql`: DDL, DML, maintenance and time travel.

From text to result, one way: `tokens` splits scripts and reads words, `grammar` parses the
statements sqlglot reads only as raw commands, `statement_parser` turns any statement into one of
the `records`, and `runner` hands each record to the module that runs its kind (`ddl_statements`,
`dml_statements`, `maintenance_statements`), which works through the Table facade and returns a DataFrame whose
columns are delta-spark's (`results`). Queries keep `lake.sql`'s planner; `time_travel` first
names their `VERSION AS OF`, `TIMESTAMP AS OF`, ``delta.`path` `` and `table_changes(...)`
references as tables it can plan.

No module here imports pyspark: Spark is reached through the session and DataFrames given."""
