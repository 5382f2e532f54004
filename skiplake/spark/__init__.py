"""The only package that imports pyspark: sessions, writing files with stats, reading planned files."""
