# One command to set up and run the default job, one to set up and run the tests, one to set up the
# benchmarks (README.md).
# `make demo` / `make test` create .venv with uv when it is missing. On a CUDA machine add VLLM=gpu.
VLLM ?= cpu
VENV := .venv
PY := $(VENV)/bin/python
UV := python3 -m uv

.PHONY: setup demo test lint bench tcmalloc

$(VENV)/.synced-$(VLLM): pyproject.toml uv.lock
	python3 -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) sync --frozen --extra $(VLLM) --extra ecosystem --group dev
	rm -f $(VENV)/.synced-*
	touch $@

setup: $(VENV)/.synced-$(VLLM)

demo: setup
	$(PY) -m experiments.train

test: setup
	$(PY) -m pytest -q

# The benchmarks' baselines (the `bench` extra: TRL, gym-sokoban) into .venv beside the vLLM build. It also
# marks the plain setup done, so a later `make test` keeps them until pyproject.toml or uv.lock change.
# It also installs tcmalloc where it can (the memory figures are measured with it; failure is not an error).
bench: $(VENV)/.synced-$(VLLM)-bench
	-@$(MAKE) --no-print-directory tcmalloc

$(VENV)/.synced-$(VLLM)-bench: pyproject.toml uv.lock
	python3 -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) sync --frozen --extra $(VLLM) --extra ecosystem --extra bench --group dev
	rm -f $(VENV)/.synced-*
	touch $(VENV)/.synced-$(VLLM) $@

lint: setup
	$(VENV)/bin/ruff check .

# tcmalloc (gperftools' minimal build), which `python -m experiments.<command>` preloads where it is installed:
# lower peak memory at the same speed (experiments/common/allocator.py). Needs apt-get (Debian/Ubuntu) and root or
# sudo; elsewhere, install the system's gperftools/tcmalloc package.
tcmalloc: setup
	@if $(PY) -c "import sys, experiments.common.allocator as a; sys.exit(a.chosen_library({}) is None)"; then :; \
	elif command -v apt-get >/dev/null; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get install -y -q libtcmalloc-minimal4 || { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q libtcmalloc-minimal4; }; \
	else echo "no apt-get here: install gperftools' tcmalloc (libtcmalloc_minimal.so.4) with the system's package manager"; exit 1; fi
	@$(PY) -m experiments.which_allocator
