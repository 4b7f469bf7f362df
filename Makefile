# kwmonitor: `make run` brings the demo up, `make test` runs every test,
# `make cluster` runs a local Spark standalone cluster (SPARK_MASTER=... make run uses it).
# run and test first check the Debian packages they need (scripts/system_packages.sh: installed
# as root, else the command to run is named).
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python

.PHONY: run test cluster venv env migrate packages-run packages-test compiled

run: packages-run venv env
	scripts/run.sh

test: packages-test venv env
	scripts/test.sh

packages-run:
	@scripts/system_packages.sh run

packages-test:
	@scripts/system_packages.sh test

# Options: CLUSTER_ARGS="--workers 3 --port 7077" (python -m streaming.spark.cluster --help).
cluster: venv
	$(PY) -m streaming.spark.cluster --dir var/spark-cluster $(CLUSTER_ARGS)

# The venv, then the engine's Cython extensions (scripts/build_ext.py: only what changed is rebuilt).
venv: $(VENV)/.installed compiled

compiled: $(VENV)/.installed
	$(PY) scripts/build_ext.py

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

env:
	scripts/ensure_env.sh

migrate: venv env
	$(PY) manage.py migrate --noinput
