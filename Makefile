# flowray: `make run` runs the main example on an embedded local Ray; `make test` runs the tests.
# A Python 3.11 interpreter: python3.11, or python3 when that is 3.11.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || \
	{ python3 --version 2>&1 | grep -q '^Python 3\.11\.' && command -v python3; } || echo python3.11)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# the Kafka broker's jars (tests and `make kafka`), resolved by Maven from tools/kafka/pom.xml
KAFKA_LIB := .cache/kafka/lib
KAFKA_STAMP := $(KAFKA_LIB)/.resolved

.PHONY: run bytecode lint install-check test unit bench java-check mvn-check postgres chromium redis kafka kafka-jars clean

java-check:
	@command -v java >/dev/null 2>&1 || { \
	  echo "error: Java 17 is required (Spark through RayDP runs on it) and 'java' is not on PATH."; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  exit 1; }
	@java -version 2>&1 | grep -qE 'version "17' || { \
	  echo "error: Java 17 is required; found: $$(java -version 2>&1 | head -1)"; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  exit 1; }

mvn-check:
	@command -v mvn >/dev/null 2>&1 || { \
	  echo "error: Maven is required to resolve the Kafka broker the tests run and 'mvn' is not on PATH."; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y maven"; \
	  exit 1; }

$(KAFKA_STAMP): tools/kafka/pom.xml
	@$(MAKE) --no-print-directory mvn-check
	rm -rf $(KAFKA_LIB)
	mvn -q -B -f tools/kafka/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(CURDIR)/$(KAFKA_LIB) -DincludeScope=runtime
	@touch $(KAFKA_STAMP)

kafka-jars: $(KAFKA_STAMP)

# PostgreSQL (Debian's package) for the JDBC sink's tests: installed when pg_ctl is missing
postgres:
	@if command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "PostgreSQL is missing: installing Debian's postgresql package"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else \
	  echo "error: PostgreSQL is required by the JDBC sink's tests and pg_ctl was not found."; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y postgresql"; \
	  exit 1; fi

# Debian's Chromium and ChromeDriver for the web UI's browser tests: installed when missing
chromium:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Chromium is missing: installing Debian's chromium and chromium-driver packages"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else \
	  echo "error: Chromium and ChromeDriver are required by the web UI's browser tests and were not found."; \
	  echo "       Install them, e.g. on Debian/Ubuntu: sudo apt-get install -y chromium chromium-driver"; \
	  exit 1; fi

# Debian's redis-server for the GCS fault tolerance test (Ray's GCS keeps its tables there)
redis:
	@if command -v redis-server >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Redis is missing: installing Debian's redis-server package"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	else \
	  echo "error: redis-server is required by the GCS fault tolerance test and was not found."; \
	  echo "       Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y redis-server"; \
	  exit 1; fi

# a Kafka broker on 127.0.0.1:9092 (KAFKA_PORT=...) for the examples; Ctrl-C stops it
kafka: java-check $(STAMP) $(KAFKA_STAMP)
	$(PY) -m tests.support.servers kafka

$(VENV)/bin/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (flowray needs Python 3.11; set PYTHON=/path/to/python3.11)"; exit 1; }
	@$(PYTHON) --version 2>&1 | grep -q '^Python 3\.11\.' || { echo "error: $(PYTHON) is $$($(PYTHON) --version 2>&1), flowray needs Python 3.11 (set PYTHON=/path/to/python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# the C halves of hot paths (pyproject's ext-modules) are built by the install, in place
NATIVE_SOURCES := $(shell find flowray operators runtime state -name '*.c' -o -name '*.h' 2>/dev/null)

$(STAMP): $(VENV)/bin/python pyproject.toml constraints.txt $(NATIVE_SOURCES)
	$(PY) -m pip install -q -c constraints.txt -e ".[test]"
	$(PY) tools/native_check/check.py
	@touch $(STAMP)

# the repo's modules compiled to __pycache__ ahead: with PYTHONDONTWRITEBYTECODE set (as on
# this project's machines) nothing else writes them, and every process that imports flowray
# (each Ray worker, each example's driver) compiled its ~250 modules again, about 0.5 s of CPU
# each (up-to-date files are skipped: a second or less)
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 flowray operators runtime state tests examples tools benchmarks >/dev/null

run: java-check $(STAMP) bytecode
	$(PY) examples/spark_pipeline.py

# ruff with pyproject.toml's [tool.ruff] rules (a second or so); `make test` runs it first
lint: $(STAMP)
	$(PY) -m ruff check .

# a user's install: `pip install <clone>` (not editable, no constraints) into a fresh venv
# with other numpy/pyarrow/pandas versions inside the ranges, then a job runs there
install-check: $(STAMP)
	$(PY) tools/install_check/check.py

# the install check's pip install (mostly downloads) runs beside the tests, its job after
# them (not two Rays at once); the target fails if either fails
test: java-check lint postgres chromium redis $(STAMP) bytecode $(KAFKA_STAMP)
	@mkdir -p .cache
	@$(PY) tools/install_check/check.py --phase install > .cache/install-check.log 2>&1 & \
	check=$$!; \
	$(PY) -m pytest -q --durations=20 tests; tests=$$?; \
	wait $$check; installed=$$?; cat .cache/install-check.log; \
	if [ $$installed -eq 0 ]; then $(PY) tools/install_check/check.py --phase job; \
	  installed=$$?; else echo "install check: the install failed (above)"; fi; \
	[ $$tests -eq 0 ] && [ $$installed -eq 0 ]

unit: $(STAMP) bytecode
	$(PY) -m pytest -q tests/unit

bench: $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e ".[test,bench]"
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
	$(PY) benchmarks/kafka.py

clean:
	rm -rf $(VENV) build *.egg-info .cache
	find flowray operators runtime state -name '*.so' -delete
