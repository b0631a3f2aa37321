"""What a reader of an executed notebook should not have to wade through, decided once.

Applied by `rmlib/__init__` before any engine is imported (vLLM reads its variables at import).
Each line silenced here says nothing a reader can act on; tests/test_workbook.py fails a smoke run
on any other warning, and tests/test_quiet.py holds each entry below on both CPU classes (the
messages of the AVX-512 BF16 / AMX class are raised by faking that class's capability check).

Three mechanisms, because the engine runs in processes that never import rmlib:
- in this process: logger levels and filters, `warnings` filters;
- in child processes (vLLM's engine core, papermill's kernels, a model's training process):
  environment variables they inherit, `VLLM_LOGGING_LEVEL`, `TORCH_CPP_LOG_LEVEL`,
  `HF_DATASETS_DISABLE_PROGRESS_BARS` and `PYTHONWARNINGS`;
- in children spawned from a notebook's kernel: `spawned_children_import_rmlib`, because a
  variable is read only once vLLM configures its logging, after it has logged at import.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# (logger, text in the message): one record each, filtered where it is logged
LOG_LINES: tuple[tuple[str, str], ...] = (
    # bitsandbytes on CPUs with AVX-512 BF16 tries to fetch a 4-bit GEMM kernel from the hub
    # through the `kernels` package, which we never install (it would download at run time);
    # its fallback is the plain kernel, which is what the guard in rmlib.generation.models expects
    (
        "bitsandbytes.backends.cpu.ops",
        "Failed to load CPU gemm_4bit_forward from kernels-community",
    ),
    # transformers warns that "mtime may not be reliable" when two checkpoints are saved within a
    # second (short demo/smoke steps), then orders them by step number, which is right
    ("transformers.trainer_utils", "mtime may not be reliable"),
)

# (category, start of the message): Python warnings, here and (by PYTHONWARNINGS) in children
WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    # TRL 1.16 declares vLLM 0.22-0.31; we run 0.32 (the release whose torch pin is ours) and
    # test what we use of it (tests/test_training_colocate.py)
    (UserWarning, "TRL currently supports vLLM versions"),
    # vLLM 0.32's Triton dispatcher scans module attributes and so touches torch's deprecated
    # alias (a FutureWarning per import, in the engine's process too; nothing of ours uses it)
    (FutureWarning, "`torch.distributed.reduce_op` is deprecated"),
)


def _python_warnings_option(category: type[Warning], message: str) -> str:
    # PYTHONWARNINGS escapes the message itself and splits options on commas
    assert "," not in message and ":" not in message, message
    return f"ignore:{message}:{category.__name__}"


def apply() -> None:
    """Install every filter above, in this process and for the processes it starts."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # torch's C++ warnings raised outside a Python call (no Python handler) go straight to
    # stderr: vLLM's CPU worker binding its memory to a NUMA node prints "[W… utils.cpp:68]
    # Warning: NUMA binding: Using MEMBIND policy …" in every engine and training process. C++
    # warnings raised inside Python calls still become Python warnings; errors still print.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    # datasets draws a bar for every map / filter / cast over a table (TRL's SFT and GRPO
    # trainers prepare their data sets through several): about a dozen bars over a few dozen
    # rows in 02's warm-up cell, none a reader can act on. Read by datasets at import, here and
    # in the training process; a user who wants them sets the variable to 0 first.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    # Imported through TRL, vLLM can log before it configures its logger (its Triton hint then
    # reaches stderr through Python's last-resort handler); its logger's level holds either way
    logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"])
    for name, text in LOG_LINES:
        logging.getLogger(name).addFilter(lambda record, t=text: t not in record.getMessage())
    options = [o for o in os.environ.get("PYTHONWARNINGS", "").split(",") if o]
    for category, message in WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category)
        option = _python_warnings_option(category, message)
        if option not in options:
            options.append(option)
    os.environ["PYTHONWARNINGS"] = ",".join(options)


@contextmanager
def spawned_children_import_rmlib() -> Iterator[None]:
    """While open, a process started by multiprocessing's spawn imports rmlib (so `apply`)
    before anything else, in a notebook's kernel as under `rmlib run`.

    Why: vLLM's CPU platform spawns its engine processes, and a spawned child first imports its
    parent's main module: under `rmlib run` that is rmlib's CLI, which imports rmlib. In a
    kernel (papermill's, JupyterLab's) __main__ is IPython's namespace, with no module to
    import, so the child imported vLLM with Python's logging unconfigured and vLLM's
    import-time notice "Triton is installed, but doesn't include CPU backend" reached the
    notebook through the kernel's captured stderr, once per engine process. The stand-in main
    names `rmlib.spawn_main`; a parent whose main the child can import already is left as it is.
    """
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) or getattr(main, "__file__", None):
        yield
        return
    stand_in = types.ModuleType("__main__")
    stand_in.__spec__ = importlib.util.find_spec("rmlib.spawn_main")
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        sys.modules["__main__"] = main
