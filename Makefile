# One command to set up and run the default job, one to set up and run the tests, one to set up the
# benchmarks (README.md).
# `make demo` / `make test` create .venv with uv when it is missing. On a CUDA machine add VLLM=gpu.
VLLM ?= cpu
VENV := .venv
PY := $(VENV)/bin/python
UV := python3 -m uv

.PHONY: setup demo test lint bench

$(VENV)/.synced-$(VLLM): pyproject.toml uv.lock
	python3 -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) sync --frozen --extra $(VLLM) --group dev
	rm -f $(VENV)/.synced-*
	touch $@

setup: $(VENV)/.synced-$(VLLM)

demo: setup
	$(PY) -m experiments.train

test: setup
	$(PY) -m pytest -q

# The benchmarks' baselines (the `bench` extra: TRL, gym-sokoban) into .venv beside the vLLM build. It also
# marks the plain setup done, so a later `make test` keeps them until pyproject.toml or uv.lock change.
bench: $(VENV)/.synced-$(VLLM)-bench

$(VENV)/.synced-$(VLLM)-bench: pyproject.toml uv.lock
	python3 -m pip install --quiet --disable-pip-version-check "uv>=0.9"
	$(UV) sync --frozen --extra $(VLLM) --extra bench --group dev
	rm -f $(VENV)/.synced-*
	touch $(VENV)/.synced-$(VLLM) $@

lint: setup
	$(VENV)/bin/ruff check .
