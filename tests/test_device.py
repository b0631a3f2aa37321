"""The machine a run needs, checked before any work (rmlib.workbook.device): each condition
faked, each refusal one line naming what to install or change."""

import os
from pathlib import Path

import pytest

from rmlib.config import ConfigError
from rmlib.run.config import load_config
from rmlib.workbook import device
from rmlib.workbook.device import Machine, check_device

ROOT = Path(__file__).resolve().parents[1]
READY = {"c_compiler": "/usr/bin/cc", "python_h": True, "ok": True}
A100 = Machine(True, "13.0", "580.95.05", ((8, 0),), READY)


def _quick(**over):
    return load_config(ROOT / "params" / "qwen3-4b-quick.yaml", over)


def _one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def test_a_good_gpu_machine_passes_and_the_cpu_runs_the_embedded_models():
    check_device(_quick(), machine=A100)
    smoke = load_config(ROOT / "params" / "smoke.yaml")
    check_device(smoke, machine=Machine(False, None, None))


def test_a_cpu_build_of_torch_beside_a_gpu_is_named():
    with pytest.raises(ConfigError) as e:
        check_device(_quick(), machine=Machine(False, None, "580.95.05"))
    assert "is a CPU build, though nvidia-smi sees a GPU (driver 580.95.05)" in _one_line(e)


def test_an_old_driver_is_named_with_the_floor_not_as_no_gpu():
    with pytest.raises(ConfigError) as e:
        check_device(_quick(), machine=Machine(False, "13.0", "550.54.15"))
    line = _one_line(e)
    assert "the NVIDIA driver 550.54.15 is older than 580" in line
    assert "update the driver to 580.65.06 or newer" in line
    assert "needs a CUDA device" not in line


def test_no_gpu_at_all_keeps_its_line():
    with pytest.raises(ConfigError, match="needs a CUDA device and none is visible"):
        check_device(_quick(), machine=Machine(False, "13.0", None))


def test_a_card_without_bf16_is_refused_for_bf16_and_nf4_and_fp32_runs():
    t4 = Machine(True, "13.0", "580.95.05", ((7, 5),), READY)
    with pytest.raises(ConfigError) as e:
        check_device(_quick(), machine=t4)
    assert "GPU 0 has compute capability 7.5, and bf16 and nf4" in _one_line(e)
    assert "need 8.0 (Ampere) or newer" in str(e.value)
    check_device(_quick(**{"model.precision": "fp32", "model.train_precision": "fp32"}), machine=t4)


def test_a_missing_toolchain_is_named_where_triton_compiles():
    bare = Machine(True, "13.0", "580.95.05", ((9, 0),), {"c_compiler": None, "python_h": False})
    with pytest.raises(ConfigError) as e:
        check_device(_quick(), machine=bare)
    line = _one_line(e)
    assert "Triton compiles kernels here (generation.backend vllm" in line
    assert "a C compiler (cc, gcc or clang) and Python's headers" in line
    assert "apt-get install build-essential python3-dev" in line
    # nothing compiles: an http run that trains nothing
    remote = _quick(
        **{"generation.backend": "http", "generation.endpoints": ["http://h:1"],
           "eval.models": ["base"]}
    )  # fmt: skip
    check_device(remote, machine=bare)


def test_the_toolchain_probe_and_this_machine():
    chain = device.toolchain()
    assert set(chain) == {"c_compiler", "python_h", "ok"}
    here = device.probe()
    assert isinstance(here.cuda, bool) and here.toolchain == chain


def test_a_hung_nvidia_smi_costs_one_short_wait_said_once(tmp_path, monkeypatch, caplog):
    """Before: each call waited 30 s in silence (over two minutes before a run started)."""
    from rmlib.workbook import device

    calls = tmp_path / "calls"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho call >> {calls}\nexec sleep 30\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(device, "SMI_TIMEOUT_S", 0.5)
    monkeypatch.setattr(device, "_SMI_HUNG", [])
    assert device.nvidia_smi("name") == [] and device.nvidia_smi("driver_version") == []
    assert calls.read_text().count("call") == 1
    said = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert said == [
        f"{smi} did not answer in 0.5 s (a hung driver?): this machine's GPUs are taken as none"
    ]
