# One command to set up and run the default job, one to set up and run the tests (README.md).
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

lint: setup
	$(VENV)/bin/ruff check .
