# Every target does its own set-up, so a fresh Debian machine needs only
# `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Debian packages the real parts need. The demo needs ZooKeeper and a JRE for
# it (and for Spark); the tests also need kcat for the interop tests.
# default-jre-headless follows Debian's supported Java instead of pinning one.
DEMO_DEBS := zookeeper default-jre-headless
TEST_DEBS := $(DEMO_DEBS) kcat openssl
DEMO_EXTRAS := snappy,spark,demo
TEST_EXTRAS := test,snappy,spark,bench,docs,lint
PYTEST_ARGS ?=
# The suite mostly waits (on brokers, ZooKeeper, session timeouts), so it
# runs on 4 pytest-xdist workers: about 30 minutes serially on the 2-core
# machine, 10-11 on 4 workers (docs/contributing.rst has the figures).
# --dist loadfile: one worker per file (module fixtures start once; the chaos
# schedules run one at a time); tests/conftest.py hands out the longest
# files first. PYTEST_XDIST= (empty) runs serially; so does -n 0 in PYTEST_ARGS.
PYTEST_XDIST ?= -n 4 --dist loadfile
# A plain `pip install .` (no extras, not editable) for install-check.
PLAIN_VENV ?= .venv-plain
# The oldest Python kiel supports (pyproject.toml's requires-python): make
# test also runs a quick share of the suite on it (test-oldest), so what
# only newer Pythons accept fails here and not at a user's. Found on the PATH
# or among pyenv's; OLDEST_PYTHON=/path/to/python3.10 to choose.
OLDEST := 3.10
# (A pyenv shim on the PATH may not run: each candidate must start.)
OLDEST_PYTHON ?= $(shell for p in $(HOME)/.pyenv/versions/$(OLDEST).*/bin/python$(OLDEST) \
	$$(command -v python$(OLDEST)); do \
	"$$p" -c "" >/dev/null 2>&1 && { echo "$$p"; break; }; done)
OLDEST_VENV ?= .venv-oldest
# What test-oldest runs: kiel's every layer (protocol, clients against the
# embedded 0.8.2 cluster and Tansu, ZooKeeper and broker groups, Spark, the
# command, the testing harness), its quick tests only.
OLDEST_TESTS ?= tests/test_public_api.py tests/test_packaging.py tests/test_aio.py \
	tests/protocol/test_framing.py tests/protocol/test_messages.py \
	tests/protocol/test_record_batch.py tests/compression/test_compression.py \
	tests/test_connection.py tests/producer/test_producer.py \
	tests/consumer/test_consumer.py tests/consumer/test_grouped.py \
	tests/coordinator/test_groups.py tests/testing/test_tansu.py \
	tests/spark/test_spark_columns.py tests/spark/test_spark_tansu.py tests/cli/test_cli.py \
	tests/test_security.py tests/testing/test_fault_proxy.py \
	tests/testing/test_zookeeper_launcher.py

.PHONY: test test-oldest demo demo-deps test-deps venv-demo venv-test venv-oldest install-check \
	lint types docs bench clean

# apt-get the packages in $(1) that are missing. Debian's own python3 needs
# python3-venv before `python3 -m venv` works, so that is checked too.
# `sudo env VAR=...` because sudo drops the caller's environment.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if ! $(PYTHON) -c "import ensurepip, venv" >/dev/null 2>&1; then missing="$$missing python3-venv"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

# A venv with kiel and the extras in $(1) (in $(2), made with the Python
# $(3); default: $(VENV), $(PYTHON)); re-made when pyproject.toml (all of
# kiel's packaging) changes or when a wider set of extras is asked for.
define make_venv
	@venv=$(or $(2),$(VENV)); \
	if [ ! -x $$venv/bin/python ]; then $(or $(3),$(PYTHON)) -m venv $$venv; fi; \
	if [ ! -f $$venv/.installed-$(1) ] || [ pyproject.toml -nt $$venv/.installed-$(1) ]; then \
	  $$venv/bin/python -m pip install -q --upgrade pip setuptools wheel && \
	  $$venv/bin/python -m pip install -q -e ".[$(1)]" && touch $$venv/.installed-$(1); \
	fi
endef

demo-deps:
	$(call apt_install,$(DEMO_DEBS))

test-deps:
	$(call apt_install,$(TEST_DEBS))

venv-demo:
	$(call make_venv,$(DEMO_EXTRAS))

venv-test:
	$(call make_venv,$(TEST_EXTRAS))

test: test-deps venv-test install-check test-oldest
	$(PY) -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

venv-oldest:
	@if [ -z "$(OLDEST_PYTHON)" ]; then \
	  echo "Python $(OLDEST), the oldest kiel supports, is not installed: install it" \
	    "(pyenv install $(OLDEST)) or give OLDEST_PYTHON=/path/to/python$(OLDEST)"; exit 1; \
	fi
	$(call make_venv,$(TEST_EXTRAS),$(OLDEST_VENV),$(OLDEST_PYTHON))

test-oldest: test-deps venv-oldest
	$(OLDEST_VENV)/bin/python -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$(OLDEST)', sys.version"
	$(OLDEST_VENV)/bin/python -m pytest $(PYTEST_XDIST) -m "not slow" $(OLDEST_TESTS)

# What a plain `pip install kiel` gives (C CRC-32C, every codec, the command,
# the pytest fixtures): checked in a fresh venv, which needs the network, so
# outside the test suite. Re-done only when what it checks changes.
install-check: $(PLAIN_VENV)/.checked

$(PLAIN_VENV)/.checked: pyproject.toml MANIFEST.in tests/plain_install_check.py \
		kiel/__init__.py kiel/_version.py kiel/protocol/crc32c.py $(wildcard kiel/compression/*.py)
	rm -rf $(PLAIN_VENV)
	$(PYTHON) -m venv $(PLAIN_VENV)
	$(PLAIN_VENV)/bin/python -m pip install -q .
	cd / && $(abspath $(PLAIN_VENV))/bin/python $(abspath tests/plain_install_check.py)
	touch $@

demo: demo-deps venv-demo
	$(PY) -m kiel.demo
	@echo "\n== the Spark pipeline: page views per user per 5-minute window (local[2])"
	$(PY) examples/spark_pageviews.py --messages 5000

lint: venv-test
	$(VENV)/bin/ruff check kiel tests benchmarks examples

types: venv-test
	$(VENV)/bin/mypy kiel

docs: venv-test
	$(VENV)/bin/sphinx-build -W -b html docs docs/_build/html

bench: test-deps venv-test
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(PLAIN_VENV) $(OLDEST_VENV) build dist *.egg-info docs/_build .pytest_cache .hypothesis
