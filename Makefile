# One command to set up and run the default job, one to set up and run the tests, one to set up the
# benchmarks (README.md).
# `make demo` / `make test` create .venv with uv when it is missing. On a CUDA machine add VLLM=gpu.
VLLM ?= cpu
VENV := .venv
PY := $(VENV)/bin/python
UV := python3 -m uv

.PHONY: setup demo test test-slow lint bench tcmalloc

# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (as on the CI machines) Python would compile torch,
# vLLM and Ray from source in every new process (each Ray actor, each subprocess): importing them and starting
# the first engine took 2.0x as long, 27.9 s against 14.0 s (docs/performance.md, "Start-up and the test suite").
$(VENV)/.synced-$(VLLM): pyproject.toml uv.lock
	python3 -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) sync --frozen --compile-bytecode --extra $(VLLM) --extra ecosystem --group dev
	rm -f $(VENV)/.synced-*
	touch $@

setup: $(VENV)/.synced-$(VLLM)

demo: setup
	$(PY) -m experiments.train

# Two pytest processes side by side, about 8 minutes on 2 cores (docs/results/test_suite_time.md): the envs,
# DAPO's math, the buffer, the repository checks and the experiment entry points in one; the engine, model and
# algorithm tests (the remote Ray actors among them) in the other. Every test runs once: the second takes
# tests/ less the first's paths, and the first's report is printed after it. `$(PY) -m pytest -q` runs the
# same in one process. OMP_WAIT_POLICY=PASSIVE: torch's and vLLM's OpenMP threads sleep instead of spinning
# when they wait; beside a process spinning one of two cores, spinning made a tiny model's training step 2.97x
# slower, sleeping 2.00x (alone, PASSIVE 1.07x; benchmarks.startup, docs/performance.md, "Start-up and the test
# suite").
FIRST_TESTS := tests/envs tests/benchmarks tests/algorithms/dapo tests/algorithms/replay tests/experiments \
	tests/test_layering.py tests/test_self_contained.py
test: setup
	@export OMP_WAIT_POLICY=PASSIVE; $(PY) -m pytest -q $(FIRST_TESTS) > .pytest-first.log 2>&1 & first=$$!; \
	$(PY) -m pytest -q tests $(addprefix --ignore=,$(FIRST_TESTS)); second=$$?; \
	wait $$first; first_status=$$?; \
	echo "=== $(FIRST_TESTS) ==="; cat .pytest-first.log; \
	exit $$(( second || first_status ))

# The slow tier: tests marked `slow` (a real vLLM server, load tests, learning checks longer than a minute), which
# `make test` leaves out. Run it before resolving work that adds to it (docs/training.md, "Tests").
test-slow: setup
	@export OMP_WAIT_POLICY=PASSIVE; $(PY) -m pytest -q -m slow tests

# The benchmarks' baselines (the `bench` extra: TRL, gym-sokoban) into .venv beside the vLLM build. It also
# marks the plain setup done, so a later `make test` keeps them until pyproject.toml or uv.lock change.
# It also installs tcmalloc where it can (the memory figures are measured with it; failure is not an error).
bench: $(VENV)/.synced-$(VLLM)-bench
	-@$(MAKE) --no-print-directory tcmalloc

$(VENV)/.synced-$(VLLM)-bench: pyproject.toml uv.lock
	python3 -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) sync --frozen --compile-bytecode --extra $(VLLM) --extra ecosystem --extra bench --group dev
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
