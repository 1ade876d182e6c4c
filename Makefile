# The two set-up commands of README.md: `make up` and `make test`. Both work on a fresh Debian
# machine with only Python 3.11+: they create .venv, install the project and everything the real
# local control plane needs (Debian's etcd, kube-apiserver built once from Debian's source package).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Re-install when the project metadata or the C source the install compiles changes.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml agent/system/_cgparse.c | sha1sum | cut -c1-12)

.PHONY: up test venv deps lint typecheck importlint proto-gen crd-gen clean

$(STAMP): pyproject.toml agent/system/_cgparse.c
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP)

# Host prerequisites for the real API server: etcd from Debian, kube-apiserver built and cached.
deps: venv
	bash hack/install-deps.sh

up: deps
	$(BIN)/koord up --nodes 3

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy --strict apis kube agent manager scheduler koord

importlint: venv
	$(BIN)/lint-imports

# Unit tests (no API server, no real node) run on two workers, and so do the integration tests (each
# worker starts its own API server); the rest, which start kubelets and daemons of their own and measure
# them or break them on purpose, run one at a time.
test: deps lint typecheck importlint
	$(BIN)/python -m pytest -q -n 2 --durations=20 tests/unit
	$(BIN)/python -m pytest -q -n 2 --durations=20 tests/integration
	$(BIN)/python -m pytest -q --durations=30 tests --ignore=tests/unit --ignore=tests/integration

# Generated files (tests fail when the committed ones differ from a fresh generation).
proto-gen: venv
	$(BIN)/python hack/gen_proto.py

crd-gen: venv
	$(BIN)/python hack/gen_crds.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
