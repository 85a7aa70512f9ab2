# Every target does its own set-up, so a fresh Debian machine needs only
# `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Debian packages the real parts need: ZooKeeper (and a headless JRE for it),
# kcat for interop tests.
DEBS := zookeeper kcat openjdk-17-jre-headless
EXTRAS := test,snappy,spark,bench,docs,lint
PYTEST_ARGS ?=

.PHONY: test demo system-deps venv lint types docs bench clean

system-deps:
	@missing=""; for p in $(DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

venv: $(VENV)/.installed

test: system-deps venv
	$(PY) -m pytest $(PYTEST_ARGS)

demo: system-deps venv
	$(PY) -m kiel.demo
	@echo "\n== the Spark pipeline: page views per user per 5-minute window (local[2])"
	$(PY) examples/spark_pageviews.py --messages 5000

lint: venv
	$(VENV)/bin/ruff check kiel tests benchmarks examples

types: venv
	$(VENV)/bin/mypy kiel

docs: venv
	$(VENV)/bin/sphinx-build -W -b html docs docs/_build/html

bench: system-deps venv
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info docs/_build .pytest_cache .hypothesis
