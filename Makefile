# kwmonitor: `make run` brings the demo up, `make test` runs every test. Both first check the Debian
# packages they need (scripts/system_packages.sh: installed as root, else the command to run is named).
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python

.PHONY: run test venv env migrate packages-run packages-test

run: packages-run venv env
	scripts/run.sh

test: packages-test venv env
	scripts/test.sh

packages-run:
	@scripts/system_packages.sh run

packages-test:
	@scripts/system_packages.sh test

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

env:
	scripts/ensure_env.sh

migrate: venv env
	$(PY) manage.py migrate --noinput
