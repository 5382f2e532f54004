# make demo: the main job (TPC-DS through skiplake tables). make test: the gate (lint, the docs
# site, and every test not marked slow). make test-full: the gate and the slow tier. make golden: delta-spark
# writes the golden tables the interop tests read. make bench: every benchmark in one run, and the
# benchmarks page's summary from it. Each builds .venv with pinned dependencies and finds (or
# installs) Java 17 first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JAVA_HOME_FILE := .java_home
SF ?= 0.1

.PHONY: all venv java s3-jars demo lint docs test test-full test-fast golden bench clean

all: test

# uv installs the pinned dependencies and fills its cache on the way (PySpark is built from its
# source archive once), which the install checks of the test suite then reuse. It compiles their
# bytecode as pip would (uv does not by default): where PYTHONDONTWRITEBYTECODE is set, every
# process would otherwise compile pandas and PySpark from source again, a second or more each.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt uv
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

$(JAVA_HOME_FILE):
	scripts/ensure_java.sh > $(JAVA_HOME_FILE).tmp && mv $(JAVA_HOME_FILE).tmp $(JAVA_HOME_FILE)

java: $(JAVA_HOME_FILE)

# Object stores: Hadoop's S3A for PySpark 4.1 (hadoop-aws 3.4.2 and the AWS SDK bundle it pulls),
# Spark's S3A committer binding, and s3proxy, the S3-compatible server the tests start. Fetched
# into the local Maven repository once, where Spark's Ivy resolver finds them.
S3_JARS_STAMP := .tools/.s3-jars
$(S3_JARS_STAMP):
	mvn -q dependency:get -Dartifact=org.apache.hadoop:hadoop-aws:3.4.2 -Dtransitive=false
	mvn -q dependency:get -Dartifact=software.amazon.awssdk:bundle:2.29.52 -Dtransitive=false
	mvn -q dependency:get -Dartifact=org.apache.spark:spark-hadoop-cloud_2.13:4.1.1 -Dtransitive=false
	mvn -q dependency:get -Dartifact=org.gaul:s3proxy:4.0.0:jar:jar-with-dependencies -Dtransitive=false
	mkdir -p .tools && touch $(S3_JARS_STAMP)

s3-jars: $(S3_JARS_STAMP)

demo: venv java
	JAVA_HOME="$$(cat $(JAVA_HOME_FILE))" $(VENV)/bin/skiplake demo --sf $(SF)

# The layout cannot drift: pyflakes and import order (ruff), the import contracts of
# pyproject.toml (layers, skiplake.spark's capabilities, pyspark only there, no circles), no two
# modules sharing a name, the complexity bar (radon, counting boolean operators; its short
# allowlist is in pyproject.toml), and the type checker (mypy; every ignore with a code and a reason).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(PY) scripts/module_names.py
	$(PY) scripts/complexity.py
	$(VENV)/bin/mypy
	$(PY) scripts/type_ignores.py

# The docs site into site/ (mkdocs.yml): strict, so a broken link, a missing anchor or a page left
# out of the navigation fails; the reference pages are generated from the code first
# (scripts/docs_hooks.py). `make test` builds it too.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Two tiers, chosen by pytest markers (docs/testing.md). The gate, `make test`: every test not
# marked slow, then the tests marked both_modes again as a Spark Connect client of a server the run
# starts (its own JVM on loopback). `make test-full`: every test, with each property test's full
# example count, then every test marked connect or both_modes against Spark Connect.
# WORKERS=n runs each pass in n pytest-xdist workers (a SparkSession, and servers, per worker; a
# test file stays on one worker). The suite keeps two cores busy on its own, so it pays only on a
# machine with more (docs/testing.md).
WORKERS ?= 1
PARALLEL = $(if $(filter-out 1,$(WORKERS)),-n $(WORKERS) --dist loadfile)
RUN_TESTS = JAVA_HOME="$$(cat $(JAVA_HOME_FILE))" $(PY) -m pytest -q $(PARALLEL)
test: venv java s3-jars lint docs
	$(RUN_TESTS) -m "not slow" tests
	SKIPLAKE_TEST_SPARK=connect $(RUN_TESTS) -m "both_modes and not slow" tests

test-full: venv java s3-jars lint docs
	SKIPLAKE_TEST_TIER=full $(RUN_TESTS) tests
	SKIPLAKE_TEST_TIER=full SKIPLAKE_TEST_SPARK=connect $(RUN_TESTS) -m "connect or both_modes" tests

# delta-spark 4.4 (Maven Central) writes tests/data/golden/ anew: the tables and what it read back.
golden: venv java
	JAVA_HOME="$$(cat $(JAVA_HOME_FILE))" $(PY) -m tests.golden

test-fast: venv lint
	$(PY) -m pytest -q tests/unit

# The whole benchmark suite at one revision into benchmarks/results/runs/<date>-<revision>/, then
# the summary table of docs/benchmarks.md and each benchmark's tables there, from that run alone (about
# 3.5 hours on 2 cores; `python -m benchmarks --list` gives the plan). QUICK=1: small sizes, a run
# the docs refuse. RESUME=<run folder>: finish that run (ONLY=bench_x,bench_y: run those again).
BENCH_FLAGS = $(if $(QUICK),--quick) $(if $(ONLY),--only $(ONLY)) $(if $(RESUME),--resume $(RESUME))
bench: venv java s3-jars
	JAVA_HOME="$$(cat $(JAVA_HOME_FILE))" $(PY) -m benchmarks $(BENCH_FLAGS)

clean:
	rm -rf $(VENV) $(JAVA_HOME_FILE) .tools warehouse demo-data .pytest_cache site
