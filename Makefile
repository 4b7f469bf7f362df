# kwmonitor: `make run` brings the demo up, `make test` runs every test.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python

.PHONY: run test venv env migrate clean-var

run: venv env
	scripts/run.sh

test: venv env
	scripts/test.sh

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
