"""`lake.sql` planning: the query's lake table references, then one stage after another (planner.RULES)."""
