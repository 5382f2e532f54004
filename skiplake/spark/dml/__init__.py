"""APPEND, OVERWRITE, DELETE and UPDATE as Spark jobs over planned files, and the deletion
vector marks that DELETE, UPDATE, MERGE and OPTIMIZE write instead of rewriting files."""
