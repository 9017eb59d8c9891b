# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# tests must not write into the working tree (no bytecode caches there either)
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test install install-dev bench clean

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned: this takes the CPU wheel on disk; an unpinned torch pulls a CUDA build.
	$(PIP) install -q torch==2.13.0
	touch $@

$(VENV)/.installed: $(VENV)/.base pyproject.toml
	$(PIP) install -q -e '.[local]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e '.[local,dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# STORE=path puts the demo store elsewhere (the tests use a temp dir).
run: install
	$(VENV)/bin/mempager demo $(if $(STORE),--store $(STORE))

# pytest exits 5 when it collected nothing; that is a failure here, never a green run.
test: install-dev
	$(PY) -m pytest -q

# every benchmark, results into benchmarks/results/ (adds Chroma, the side-by-side baseline)
bench: install-dev
	$(PIP) install -q -e '.[local,dev,mcp,bench]'
	$(PY) -m benchmarks.run_all

clean:
	rm -rf $(VENV) .mempager
