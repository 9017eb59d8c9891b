# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# tests must not write into the working tree (no bytecode caches there either)
export PYTHONDONTWRITEBYTECODE := 1
export MYPY_CACHE_DIR := $(CURDIR)/$(VENV)/.mypy_cache
# The editable install is setuptools' "strict" mode: a tree of links, laid out as the package
# (build/__editable__.*/mempager/ with embedders/ and index/ inside), on the path through a .pth.
# Static tools (mypy, lint-imports) read it as they would an installed wheel; no import hook.
# A module added or removed changes the tree, so the links are remade when the file list changes.
EDITABLE := --config-settings editable_mode=strict

.PHONY: run test install install-dev bench clean lint-imports typecheck FORCE

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned: this takes the CPU wheel on disk; an unpinned torch pulls a CUDA build.
	$(PIP) install -q torch==2.13.0
	touch $@

$(VENV)/.installed: $(VENV)/.base pyproject.toml
	$(PIP) install -q -e '.[local]' $(EDITABLE)
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e '.[local,dev]' $(EDITABLE)
	touch $@

# the list of source files; rewritten only when it differs, so the links are remade only then
$(VENV)/.sources: FORCE | $(VENV)/.base
	@find pager embedders index -name '*.py' -o -name 'py.typed' | LC_ALL=C sort > $@.new
	@cmp -s $@.new $@ && rm -f $@.new || mv $@.new $@

# index/*.c (the lexical lane's compiled kernel and token scan) and pager/lanes/*.c (score fusion) are built in
# place by the same install: a change to one rebuilds them
$(VENV)/.linked: $(VENV)/.sources $(VENV)/.installed $(wildcard index/*.c pager/lanes/*.c)
	$(PIP) install -q --no-deps -e . $(EDITABLE)
	touch $@

install: $(VENV)/.installed $(VENV)/.linked
install-dev: $(VENV)/.installed-dev $(VENV)/.linked

# STORE=path puts the demo store elsewhere (the tests use a temp dir).
run: install
	$(VENV)/bin/mempager demo $(if $(STORE),--store $(STORE))

# pytest exits 5 when it collected nothing; that is a failure here, never a green run.
# Two workers (pytest-xdist), whole files to one worker: a module's fixtures (a server, a browser,
# a PostgreSQL schema) start once; files with slow tests go first (tests/conftest.py).
# mypy runs beside the tests, its report printed after theirs: on a fresh clone (no cache) it takes
# ~100 s of one core, and the suite leaves ~10% of two cores idle (waiting on children, servers,
# sleeps). Either failing fails the target. On 2 cores: 1,664 tests, pytest 630-818 s (~12-14 min in all)
# on the earlier sessions' EPYC; on an AVX2-only one (all CPU-bound work ~2x slower) 991-1,081 s
# (~17-18 min) since the ONNX export is traced (embedders/onnx_export.py), 1,058-1,203 s before.
TEST_WORKERS ?= 2
test: install-dev
	$(VENV)/bin/lint-imports --no-cache --no-logo
	@echo "mypy, beside the tests: its report follows theirs"; \
	$(VENV)/bin/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile; tests=$$?; \
	wait $$mypy; typed=$$?; \
	echo "mypy:"; cat $(VENV)/mypy.log; \
	if [ $$tests -ne 0 ]; then echo "make test: pytest failed (exit $$tests)" >&2; exit $$tests; fi; \
	if [ $$typed -ne 0 ]; then echo "make test: mypy failed (exit $$typed)" >&2; exit $$typed; fi

# the import contracts alone ([tool.importlinter] in pyproject.toml)
lint-imports: install-dev
	$(VENV)/bin/lint-imports --no-cache --no-logo

# mypy --strict alone ([tool.mypy] in pyproject.toml)
typecheck: install-dev
	$(VENV)/bin/mypy

# every benchmark, results into benchmarks/results/ (adds Chroma, the side-by-side baseline)
bench: install-dev
	$(PIP) install -q -e '.[local,dev,mcp,bench]'
	$(PY) -m benchmarks.run_all

clean:
	rm -rf $(VENV) .mempager build index/*.so
