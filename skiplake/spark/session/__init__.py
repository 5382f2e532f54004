"""The SparkSession and its JVM: building a session, py4j's gateway, a Spark Connect server,
S3A settings, plan text, Spark's refusals and the schema conversions every job shares."""
