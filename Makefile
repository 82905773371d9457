# The commands of README.md's quick start:
#   make run    start a broker (single node, ./data, loopback listeners)
#   make cluster  start ZooKeeper and three brokers (etc/cluster/, ./data/cluster; docs/cluster.md);
#                 CLUSTER_ARGS="--port-offset N --data-dir DIR" runs them elsewhere
#   make test   run the linters (make lint), then the whole test suite, then the example project
#               (make test-examples)
# Each does its own set-up on first use: a virtualenv in .venv, the package
# installed into it in editable mode, and (as root) the Debian packages the
# tests drive (kcat).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= etc/server.properties
PYTEST_ARGS ?=
# make test runs the suite on three pytest-xdist workers, each taking whole
# test files (--dist loadfile), so a module's shared broker is started once.
# Three was the fastest of 2/3/4 on a 2-core machine: brokers and load
# generators wait on sockets much of the time.  PYTEST_PARALLEL= runs it serially.
PYTEST_PARALLEL ?= -n 3 --dist loadfile

.PHONY: run cluster lint test test-examples test-slow bench-codec bench-embedded bench-failed-logins bench-fuzz bench-log bench-network bench-planes bench-produce bench-groups bench-transactions bench-tls bench-peers bench-callgrind system-deps clean

run: $(VENV)/.base-installed
	bin/twisted-kafka-server-start $(CONFIG) $(ARGS)

cluster: $(VENV)/.base-installed system-deps
	bin/twisted-kafka-cluster $(CLUSTER_CONFIG) $(CLUSTER_ARGS)

# ruff and mypy are configured in pyproject.toml; any finding fails the target.
lint: $(VENV)/.test-installed
	$(BIN)/ruff check twisted_kafka tests bench support
	$(BIN)/mypy twisted_kafka

# Byte-compiled once before the suite: the brokers the tests start import the package afresh
# each time, and where PYTHONDONTWRITEBYTECODE is set (CI images often set it) each start would
# compile every module again (about 0.3 s of CPU per broker).
test: $(VENV)/.test-installed lint system-deps
	$(BIN)/python -m compileall -q twisted_kafka twisted tests > /dev/null
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)
	$(MAKE) test-examples

# examples/orders -- a project that depends on this package and tests its Kafka code with
# the pytest plugin's fixtures only -- run as its users run it: a fresh virtualenv, this
# package installed from the checkout as a user installs it (`pip install .`, not editable:
# nothing of the checkout is used at run time), the example with its test extra, and its
# suite on four pytest-xdist workers, each starting its own broker.
EXAMPLE_VENV := build/example-venv
test-examples:
	rm -rf $(EXAMPLE_VENV)
	$(PYTHON) -m venv $(EXAMPLE_VENV)
	$(EXAMPLE_VENV)/bin/pip install --disable-pip-version-check -q . './examples/orders[test]'
	cd examples/orders && $(abspath $(EXAMPLE_VENV))/bin/python -m pytest -n 4 -p no:cacheprovider $(EXAMPLE_PYTEST_ARGS)

test-slow: $(VENV)/.test-installed system-deps
	$(BIN)/python -m compileall -q twisted_kafka twisted tests > /dev/null
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

bench-codec: $(VENV)/.test-installed
	$(BIN)/python bench/codec.py

bench-log: $(VENV)/.test-installed
	$(BIN)/python bench/log_io.py

bench-network: $(VENV)/.test-installed
	$(BIN)/python bench/network.py

bench-planes: $(VENV)/.test-installed
	$(BIN)/python bench/planes.py

bench-produce: $(VENV)/.test-installed
	$(BIN)/python bench/produce_consume.py

bench-peers: $(VENV)/.test-installed
	$(BIN)/python bench/peers.py

bench-callgrind: $(VENV)/.test-installed
	$(BIN)/python bench/callgrind_produce.py

bench-groups: $(VENV)/.test-installed
	$(BIN)/python bench/groups.py

bench-transactions: $(VENV)/.test-installed
	$(BIN)/python bench/transactions.py

bench-tls: $(VENV)/.test-installed
	$(BIN)/python bench/tls.py

bench-failed-logins: $(VENV)/.test-installed
	$(BIN)/python bench/failed_logins.py

bench-embedded: $(VENV)/.test-installed
	$(BIN)/python bench/embedded_start.py

# CPU-heavy (the fuzzer and the broker share the machine): niced.  FRAMES=1000000 for the full run.
FRAMES ?= 200000
bench-fuzz: $(VENV)/.test-installed
	nice -n 10 $(BIN)/python bench/fuzz.py --frames $(FRAMES)

system-deps:
	@bin/install-system-deps

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "twisted_kafka needs Python >= 3.11 (found: $$($(PYTHON) --version 2>&1))"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { bin/install-system-deps venv && $(PYTHON) -m venv $(VENV); }
	@touch $@

$(VENV)/.base-installed: $(VENV)/.created setup.cfg pyproject.toml
	$(BIN)/pip install --disable-pip-version-check -q -e . --config-settings editable_mode=compat
	@touch $@

$(VENV)/.test-installed: $(VENV)/.base-installed
	$(BIN)/pip install --disable-pip-version-check -q -e '.[test,bench,spark]' --config-settings editable_mode=compat
	@touch $@

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
