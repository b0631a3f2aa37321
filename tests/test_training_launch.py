"""rmlib.training.launch: a trained model's GRPO in a child process of its own, or in several
under accelerate (run.gpus).

The real one-process trainings through it run in the smoke profiles (tests/test_workbook.py: two
models on the colocated vLLM engine, each in its own process); here: the job file, the relay, the
batch arithmetic on 1, 2 and 8 processes, a rank dying with its launcher, and GRPO on two CPU
processes (gloo) through the same launcher as `rmlib run`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from scripts import alive

from rmlib.config import ConfigError
from rmlib.run.config import config_from_dict, load_config
from rmlib.training.grpo_config import GRPOSettings, batch_plan, per_process
from rmlib.training.launch import SPEC_JSON, TrainJob, command, run_job

ROOT = Path(__file__).resolve().parents[1]


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
    assert several[:4] == [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu"]
    option = lambda name: several[several.index(name) + 1]  # noqa: E731
    assert option("--num_processes") == "4"
    assert option("--main_process_port") == "0"  # a free port: runs on one node do not collide
    assert option("--mixed_precision") == "no"  # grpo.bf16 decides, not an accelerate config
    assert several[-4:] == ["-m", "rmlib.training.grpo", "--spec", str(spec)]
    # the module form parses as `accelerate launch` does (every option known, the entry kept)
    from accelerate.commands.launch import launch_command_parser

    args = launch_command_parser().parse_args(several[3:])
    assert (args.num_processes, args.module) == (4, True)
    assert args.training_script == "rmlib.training.grpo"
    assert args.training_script_args == ["--spec", str(spec)]


PAPER = dict(
    num_generations=8, per_device_train_batch_size=4, generation_batch_size=512
)  # params/qwen3-4b-paper.yaml


@pytest.mark.parametrize(
    ("processes", "accumulation", "steps_per_generation", "completions"),
    [
        (1, 128, 128, 512),  # the paper profile on one GPU: 4 x 128
        (2, 64, 64, 512),  # the same step on two: 4 x 2 x 64
        (8, 16, 16, 512),  # and on eight: 4 x 8 x 16 (refused before: 16 % (512 / 4))
        (8, 128, 16, 4096),  # the one-GPU accumulation on eight: a step 8 times larger
    ],
)
def test_the_batch_is_trls_on_1_2_and_8_processes(
    processes, accumulation, steps_per_generation, completions
):
    cfg = replace(GRPOSettings(), **PAPER, gradient_accumulation_steps=accumulation)
    plan = batch_plan(cfg, processes)
    assert (plan.generation_batch, plan.steps_per_generation) == (512, steps_per_generation)
    assert (plan.step_completions, plan.step_prompts) == (completions, completions // 8)
    # TRL's own GRPOConfig agrees (its world size faked: it reads the process count from there)
    trl = _trl_config(cfg, processes)
    assert (trl.generation_batch_size, trl.steps_per_generation) == (512, steps_per_generation)


def _trl_config(cfg: GRPOSettings, processes: int):
    from unittest import mock

    from trl import GRPOConfig

    with mock.patch.object(GRPOConfig, "world_size", processes):
        return GRPOConfig(
            output_dir="unused",
            report_to="none",
            num_generations=cfg.num_generations,
            per_device_train_batch_size=cfg.per_device_train_batch_size,
            gradient_accumulation_steps=cfg.gradient_accumulation_steps,
            generation_batch_size=cfg.generation_batch_size,
            use_cpu=True,
            bf16=False,
        )


def test_an_impossible_batch_is_one_line_at_load():
    """Refused when the params load (before any notebook), naming run.gpus and the arithmetic."""
    paper = ROOT / "params" / "qwen3-4b-paper.yaml"
    # the paper's batch on 8 GPUs passes: its accumulation of 128 becomes 16 a process
    assert load_config(paper, {"run.gpus": 8}).run.gpus == 8
    assert load_config(paper, {"run.gpus": 8, "grpo.keep_step_on_gpus": False}).run.gpus == 8
    with pytest.raises(ConfigError) as uneven:  # 512 completions do not split over 4 x 3
        load_config(paper, {"run.gpus": 3, "grpo.keep_step_on_gpus": False})
    assert "\n" not in str(uneven.value)
    assert "'grpo' on run.gpus = 3: generation_batch_size (512) must be a multiple of" in str(
        uneven.value
    )
    with pytest.raises(ConfigError, match=r"= 512 / \(4 x 8\) = 16: a checkpoint must not split"):
        load_config(paper, {"run.gpus": 8, "grpo.gradient_accumulation_steps": 64})
    with pytest.raises(ConfigError, match=r"\(128\) must be a multiple of the processes \(3\)"):
        load_config(paper, {"run.gpus": 3})  # the step cannot stay 512 on 3 GPUs either
    with pytest.raises(ConfigError, match=r"\(12\) must be a multiple of the processes \(8\)"):
        load_config(paper, {"run.gpus": 8, "grpo.gradient_accumulation_steps": 12})
    # no generation batch: TRL makes it micro-batch x processes x accumulation (4 x 2 x 1 = 8)
    grpo = {"generation_batch_size": None, "gradient_accumulation_steps": 1}
    with pytest.raises(ConfigError, match=r"generation_batch_size \(4; .*num_generations \(8\)"):
        config_from_dict({"grpo": grpo})
    per_process_sizes = {**grpo, "keep_step_on_gpus": False}
    assert config_from_dict({"grpo": per_process_sizes, "run": {"gpus": 2}}).run.gpus == 2
    # TRL refuses the uneven split too, only later (when 03 builds the trainer)
    with pytest.raises(ValueError, match="divisible by the global batch size"):
        _trl_config(replace(GRPOSettings(), **PAPER, gradient_accumulation_steps=16), 3)


@pytest.mark.parametrize("processes", [1, 2, 8])
def test_the_profiles_step_stays_on_any_gpu_count(processes):
    """keep_step_on_gpus (default): the accumulation is divided by the processes, so the step is
    the paper's 512 completions on 1, 2 or 8 GPUs; once per-process, it is not divided again."""
    cfg = replace(GRPOSettings(), **PAPER, gradient_accumulation_steps=128)
    mine = per_process(cfg, processes)
    assert mine.gradient_accumulation_steps == 128 // processes
    assert batch_plan(mine, processes).step_completions == 512
    assert per_process(mine, processes) == mine
    off = replace(cfg, keep_step_on_gpus=False)
    assert batch_plan(per_process(off, processes), processes).step_completions == 512 * processes


def test_a_job_refuses_a_batch_its_launch_cannot_split(tmp_path, monkeypatch):
    """Started by hand under `accelerate launch` on 3 processes, a job sized for 1 or 8 stops
    in one line before it reads its mix or loads a model."""
    from rmlib.training.grpo import main

    path = job(tmp_path, **PAPER, gradient_accumulation_steps=16).save()
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(SystemExit, match=r"grpo: generation_batch_size \(512\) .* = 12\)"):
        main(["--spec", str(path)])


def test_a_child_is_no_rank_of_a_stale_rendezvous(tmp_path, monkeypatch, capfd):
    """A kernel that built a colocated trainer holds TRL's RANK / WORLD_SIZE / MASTER_PORT; the
    child must not inherit them (it would check its batch for, and join, a world that is gone)."""
    import rmlib.training.launch as launch

    for name in launch.DISTRIBUTED_ENV:
        monkeypatch.setenv(name, "3")
    probe = "import os; print('inherited:', sorted(set(os.environ) & set({names!r})))"
    monkeypatch.setattr(
        launch,
        "command",
        lambda spec, n: [sys.executable, "-c", probe.format(names=launch.DISTRIBUTED_ENV)],
    )
    run_job(job(tmp_path))
    assert "inherited: []" in capfd.readouterr().out


def test_a_failed_child_raises_with_its_own_words(tmp_path, capfd):
    """The child's error (here: no training mix) reaches the notebook twice: relayed as it is
    printed, and at the end of the parent's exception."""
    with pytest.raises(RuntimeError, match=r"own process \(exit 1\)") as failed:
        run_job(job(tmp_path))
    assert "not a saved training mix" in str(failed.value)
    assert "not a saved training mix" in capfd.readouterr().out
    with pytest.raises(ValueError, match="processes"):
        run_job(job(tmp_path), processes=0)


def test_failed_ranks_fail_the_launch_with_their_words(tmp_path, capfd):
    """Under accelerate (two ranks), a rank's error stops the launch, non-zero, and its words
    reach the parent's exception as with one process."""
    with pytest.raises(RuntimeError, match=r"own process \(exit [1-9]") as failed:
        run_job(job(tmp_path), processes=2)
    assert "not a saved training mix" in str(failed.value)
    assert "accelerate.commands.launch" in str(failed.value)


# A stand-in for torchrun: starts a rank in a session of its own (as torchrun does), then waits.
LAUNCHER = """
import os, subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True, env=os.environ)
time.sleep(120)
"""
RANK = """
import os, pathlib, time
from rmlib.training.launch import follow_launcher
follow_launcher()
pathlib.Path(os.environ["RANK_PID_FILE"]).write_text(str(os.getpid()))
time.sleep(120)
"""


@pytest.mark.parametrize("under_torchrun", [True, False])
def test_a_rank_dies_with_its_launcher(tmp_path, under_torchrun):
    """A killed launcher (the notebook kernel's process group killed after Ctrl-C) takes its
    ranks with it, though they run in sessions of their own; without LOCAL_RANK (not a rank of
    torchrun) nothing changes, which shows the rank would otherwise outlive it."""
    pid_file = tmp_path / "rank.pid"
    env = {**os.environ, "RANK_PID_FILE": str(pid_file), "PYTHONPATH": str(ROOT)}
    env.pop("LOCAL_RANK", None)
    if under_torchrun:
        env["LOCAL_RANK"] = "0"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, RANK], env=env)
    try:
        deadline = time.monotonic() + 240  # a generous bound: slow CPUs under load
        while not pid_file.exists() or not pid_file.read_text():
            assert launcher.poll() is None and time.monotonic() < deadline, "no rank started"
            time.sleep(0.1)
        rank = int(pid_file.read_text())
        launcher.kill()
        launcher.wait()
        # under torchrun the rank must go, within a generous 60 s; otherwise it must outlive 10 s
        deadline = time.monotonic() + (60 if under_torchrun else 10)
        while alive(rank) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive(rank) is not under_torchrun
    finally:
        launcher.kill()
        if pid_file.exists() and pid_file.read_text() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_grpo_on_two_cpu_processes_through_the_runs_launcher(tmp_path, capfd):
    """GRPO data parallel on two processes (gloo on the CPU; use_vllm off: two engines do not fit
    two cores), started by run_job as `rmlib run` starts it with run.gpus: 2.

    The step arithmetic (TRL's): group 2, micro-batch 2 completions per process, the profile's
    accumulation 2 divided over the 2 processes (keep_step_on_gpus) = 1 a process, generation
    batch None = micro-batch x processes x accumulation = 2 x 2 x 1 = 4 completions =
    2 prompts per optimizer step. The mix holds 3 prompts; TRL's sampler keeps whole generation
    batches, so an epoch is floor(3 / 2) = 1 step, and 2 epochs are 2 optimizer steps. Two
    processes each training alone (the failure this guards against: accelerate without gloo)
    would each make 1-prompt steps: floor(3 / 1) x 2 = 6."""
    from test_training_grpo import tiny_mix, tiny_settings

    from rmlib.generation.models import TINY_QWEN3
    from rmlib.generation.vllm import model_runner_env
    from rmlib.training.progress import progress_table

    mix, path = tiny_mix(tmp_path)
    assert len(mix.dataset) == 3
    settings = tiny_settings(
        generation_batch_size=None,
        gradient_accumulation_steps=2,
        num_train_epochs=2,
        torch_threads=1,
        logging_steps=1,
    )
    out = tmp_path / "train"
    runner = model_runner_env("v1")  # generation.model_runner, as steps.train passes it
    job = TrainJob.of(
        settings, mix=str(path), output=str(out), backbone=TINY_QWEN3, seed=3, env=runner
    )
    run_job(job, processes=2)
    relayed = capfd.readouterr().out
    step = "2 completions x 2 processes x 1 accumulation = 4 completions (2 prompts of 2)"
    assert step in relayed
    meta = json.loads((out / "training_settings.json").read_text())
    assert (meta["processes"], meta["global_step"]) == (2, 2)
    # DDP ran without searching for unused parameters (every LoRA weight is used: a step with an
    # unused trainable parameter would have failed DDP's reduction on the second step)
    assert meta["ddp_find_unused_parameters"] is False
    assert meta["vllm_model_runner_env"] == "0"  # read in the training process
    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    assert progress_table(out)["step"].tolist() == [1, 2]
