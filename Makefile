# make demo: the main job (TPC-DS through skiplake tables). make test: the test suite.
# Both build .venv with pinned dependencies and find (or install) Java 17 first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JAVA_HOME_FILE := .java_home
SF ?= 0.1

.PHONY: all venv java demo lint test test-fast bench clean

all: test

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

$(JAVA_HOME_FILE):
	scripts/ensure_java.sh > $(JAVA_HOME_FILE).tmp && mv $(JAVA_HOME_FILE).tmp $(JAVA_HOME_FILE)

java: $(JAVA_HOME_FILE)

demo: venv java
	JAVA_HOME="$$(cat $(JAVA_HOME_FILE))" $(VENV)/bin/skiplake demo --sf $(SF)

# The layout cannot drift: pyflakes, import order and a complexity bound (ruff), and the
# import contracts of pyproject.toml (layers, pyspark only in skiplake.spark, no circles).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache

test: venv java lint
	JAVA_HOME="$$(cat $(JAVA_HOME_FILE))" $(PY) -m pytest -q tests

test-fast: venv lint
	$(PY) -m pytest -q tests/unit

clean:
	rm -rf $(VENV) $(JAVA_HOME_FILE) warehouse demo-data .pytest_cache
