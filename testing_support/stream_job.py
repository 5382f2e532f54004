"""A streaming query from one skiplake table to another through the `skiplake` source and sink,
for the crash tests: `python -m testing_support.stream_job SOURCE SINK CHECKPOINT OPTIONS_JSON`
runs until it has read everything the source holds, then exits 0 (unless killed first)."""
from __future__ import annotations

import json
import sys


def main() -> None:
    source, sink, checkpoint, options_json = sys.argv[1:5]
    import skiplake
    spark = skiplake.local_spark(app_name="stream-job")
    skiplake.register(spark)
    options = json.loads(options_json)
    query = (spark.readStream.format("skiplake").options(**options).option("maxFilesPerTrigger", 1).load(source)
             .selectExpr("id", "id * 2 AS doubled")
             .writeStream.format("skiplake").options(**options).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start(sink))
    query.processAllAvailable()
    query.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
