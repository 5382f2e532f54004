"""Spark refusing a query at analysis, told apart from other failures and kept out of the log.

Callers that turn a refusal into a skiplake error of their own (MERGE's clauses, a CHECK
constraint's expression) judge user SQL by letting Spark analyse it.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from pyspark.errors import AnalysisException


@contextmanager
def quiet() -> Iterator[None]:
    """PySpark logs every error it raises with a query context (and on some logging setups its
    call of the logger itself fails, hiding the error): the caller's own error says it all."""
    loggers = [logging.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


def analysis_error(error: Exception) -> bool:
    """Whether Spark refused a query at analysis: PySpark's AnalysisException (ParseException
    included), or Py4J's error carrying the JVM's one where PySpark did not convert it."""
    head = str(error)[:2000]
    return isinstance(error, AnalysisException) or "org.apache.spark.sql.AnalysisException" in head \
        or "ParseException" in head
