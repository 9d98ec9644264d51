# flowray: `make run` runs the main example on an embedded local Ray; `make test` runs the tests.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test unit bench java-check clean

java-check:
	@command -v java >/dev/null 2>&1 || { \
	  echo "error: Java 17 is required (Spark through RayDP runs on it) and 'java' is not on PATH."; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  exit 1; }
	@java -version 2>&1 | grep -qE 'version "17' || { \
	  echo "error: Java 17 is required; found: $$(java -version 2>&1 | head -1)"; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  exit 1; }

$(VENV)/bin/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (flowray needs Python 3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install -q -e ".[test]"
	@touch $(STAMP)

run: java-check $(STAMP)
	$(PY) examples/spark_pipeline.py

test: java-check $(STAMP)
	$(PY) -m pytest -q tests

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

bench: $(STAMP)
	$(PY) -m pip install -q -e ".[test,bench]"
	$(PY) benchmarks/throughput.py
	$(PY) benchmarks/checkpoints.py
	$(PY) benchmarks/recovery.py
	$(PY) benchmarks/local_recovery.py
	$(PY) benchmarks/state_backends.py
	$(PY) benchmarks/spark_pipeline.py
	$(PY) benchmarks/windows.py
	$(PY) benchmarks/savepoints.py
	$(PY) benchmarks/channel_auth.py
	$(PY) benchmarks/tls.py
	$(PY) benchmarks/async_io.py
	$(PY) benchmarks/types.py
	$(PY) benchmarks/heap_snapshot.py
	$(PY) benchmarks/backpressure.py
	$(PY) benchmarks/columnar.py

clean:
	rm -rf $(VENV) build *.egg-info
