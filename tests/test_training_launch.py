"""rmlib.training.launch: a trained model's GRPO in a child process of its own.

The real trainings through it run in the smoke profiles (tests/test_workbook.py: two models on
the colocated vLLM engine, each in its own process); these are the job file and the relay.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from rmlib.training.grpo_config import GRPOSettings
from rmlib.training.launch import SPEC_JSON, TrainJob, command, run_job


def job(tmp_path, **settings) -> TrainJob:
    cfg = replace(GRPOSettings(), **settings)
    return TrainJob.of(
        cfg, mix=str(tmp_path / "mix"), output=str(tmp_path / "out"), backbone="embedded:tiny-qwen3"
    )


def test_a_job_file_gives_back_the_same_settings(tmp_path):
    cfg = replace(GRPOSettings(), learning_rate=3e-4, use_vllm=True, trl={"num_iterations": 2})
    original = TrainJob.of(cfg, mix="m", output=str(tmp_path / "out"), backbone="b", seed=7)
    path = original.save()
    assert path == tmp_path / "out" / SPEC_JSON
    again = TrainJob.load(path)
    assert again == original and again.grpo_settings() == cfg


def test_one_process_or_several_under_accelerate(tmp_path):
    spec = tmp_path / SPEC_JSON
    assert command(spec) == [sys.executable, "-m", "rmlib.training.grpo", "--spec", str(spec)]
    several = command(spec, processes=4)
    assert several[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert several[several.index("--num_processes") + 1] == "4"
    assert several[-4:] == ["-m", "rmlib.training.grpo", "--spec", str(spec)]


def test_a_failed_child_raises_with_its_own_words(tmp_path, capfd):
    """The child's error (here: no training mix) reaches the notebook twice: relayed as it is
    printed, and at the end of the parent's exception."""
    with pytest.raises(RuntimeError, match=r"own process \(exit 1\)") as failed:
        run_job(job(tmp_path))
    assert "not a saved training mix" in str(failed.value)
    assert "not a saved training mix" in capfd.readouterr().out
    with pytest.raises(ValueError, match="processes"):
        run_job(job(tmp_path), processes=0)
