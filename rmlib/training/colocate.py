"""GRPO rollouts on vLLM in the trainer's process (TRL's colocate mode), on GPU and CPU alike.

TRL 1.16 does the work: `GRPOConfig(use_vllm=True, vllm_mode="colocate")` starts a vLLM engine
beside the policy, generates every group on it, and before each generation step pushes the
policy's weights into it (with PEFT: merge the adapter, copy, unmerge). TRL passes the engine no
dtype, so vLLM's `auto` decides: the checkpoint's dtype on CUDA, bf16 on every x86 CPU. The engine
must sample from the policy's own numerics (the importance-sampling correction covers small
learner/sampler gaps, not a precision the run never asked for), so `colocated_generation()` gives
it the trainer's dtype on both. Two more things of TRL's fail on vLLM's CPU build, and it patches
exactly those, nothing on CUDA:

- the engine's KV cache: TRL sizes it by `gpu_memory_utilization`, which the CPU engine reads
  as a share of *all host memory* (and refuses when that much is not free); on CPU we size it in
  bytes instead (`kv_cache_memory_bytes`), with eager execution (no minutes-long compile);
- the weight sync: TRL copies each tensor through the model's `load_weights`, but the CPU engine
  has repacked its linear weights for its GEMM kernels (the originals are gone: "'Parameter'
  object has no attribute 'weight_loader'"). We reload through vLLM's own in-place reload (the
  layerwise loader re-runs each layer's repacking), then repack the tied LM head, which shares
  the embedding and receives no tensor of its own (without that it keeps the old embedding).

Why a patch and not a new engine of ours: TRL owns the timing of generation and sync (after each
optimizer step, once per generation batch), the importance-sampling correction and the
multi-process layout; replacing it would restate all of that.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

# The CPU engine's KV cache in colocate mode (GRPOSettings.vllm_cpu_kv_cache_gib's default):
# GRPO's groups are small (one generation batch at a time), so a little memory suffices.
CPU_COLOCATE_KV_GIB = 0.5


def _on_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# The engine's dtype for each training precision: an nf4 base computes in bf16 on CUDA (and is
# refused with use_vllm anyway: build_trainer), fp32 on CPU (rmlib.models).
ENGINE_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "nf4": "bfloat16"}


def engine_llm(llm_class: Any, *, dtype: str, kv_cache_gib: float | None, seed: int = 0) -> Any:
    """vllm.LLM with TRL's arguments, the trainer's `dtype` and the run's `seed` (added to TRL's
    own, the process index, so data-parallel processes still draw differently); with
    `kv_cache_gib` (CPU), its memory sized for the CPU engine."""

    def make(**kwargs: Any) -> Any:
        kwargs["dtype"] = dtype
        kwargs["seed"] = seed + kwargs.get("seed", 0)
        if kv_cache_gib is None:
            return llm_class(**kwargs)
        kwargs.pop("gpu_memory_utilization", None)
        kwargs["kv_cache_memory_bytes"] = int(kv_cache_gib * (1 << 30))
        kwargs["enforce_eager"] = True
        # a seeded prompt split over engine steps crashes the CPU sampler ("CPU Generator does
        # not use offset"): no chunked prefill, and a step that holds a whole prompt
        # (no length given: one step's tokens, rather than the checkpoint's 40,960 positions)
        step = kwargs.get("max_num_batched_tokens") or 4096
        kwargs["max_model_len"] = kwargs.get("max_model_len") or step
        kwargs["max_num_batched_tokens"] = max(step, kwargs["max_model_len"])
        kwargs["enable_chunked_prefill"] = False
        return llm_class(**kwargs)

    return make


def sync_cpu_engine(generation: Any) -> None:
    """Push the policy's current weights into TRL's colocated CPU engine (see the module doc)."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
    # TRL's iterator yields merged tensors and unmerges when exhausted: copy each as it comes
    weights: Iterator[tuple[str, Any]] = (
        (name, tensor.detach().clone()) for name, tensor in generation._iter_named_params()
    )
    runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    model = runner.get_model()
    head = getattr(model, "lm_head", None)
    if head is not None and getattr(model.config, "tie_word_embeddings", False):
        dispatch_cpu_unquantized_gemm(head, remove_weight=False)
    generation.llm.reset_prefix_cache()


@contextlib.contextmanager
def colocated_generation(
    precision: str, kv_cache_gib: float = CPU_COLOCATE_KV_GIB, seed: int = 0
) -> Iterator[None]:
    """While a GRPOTrainer is built: TRL's colocated engine runs in the trainer's `precision`,
    seeded from the run's `seed`; on CPU it also gets the two fixes above."""
    from trl.generation import vllm_generation as tg
    from trl.trainer import grpo_trainer

    on_cuda = _on_cuda()
    dtype = ENGINE_DTYPE[precision]

    class ColocateGeneration(tg.VLLMGeneration):
        def _init_vllm(self) -> None:
            real = tg.LLM
            kv = None if on_cuda else kv_cache_gib
            tg.LLM = engine_llm(real, dtype=dtype, kv_cache_gib=kv, seed=seed)
            try:
                super()._init_vllm()
            finally:
                tg.LLM = real

        def sync_weights(self) -> None:
            if on_cuda or self.mode != "colocate":
                return super().sync_weights()
            sync_cpu_engine(self)

    original = grpo_trainer.VLLMGeneration
    grpo_trainer.VLLMGeneration = ColocateGeneration
    try:
        yield
    finally:
        grpo_trainer.VLLMGeneration = original


# ---- does the sync sync? ------------------------------------------------------------------------
# A fixed judgment-like text: the engine's log-probs of its continuation after a sync must equal
# the policy's (tests/test_training_colocate.py on CPU; benchmarks/gpu_check.py on a GPU, with
# and without sleep mode, which TRL issue #5312 reports leaving the engine's weights stale).
PROBE_PROMPT = "<|im_start|>user\nWhich response is better?<|im_end|>\n<|im_start|>assistant\n"
PROBE_CONTINUATION = "<Analysis>Response A answers the question; B does not.</Analysis>"


def probe_ids(tokenizer: Any) -> tuple[list[int], list[int]]:
    """(prompt ids, continuation ids) of the probe text."""
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return encode(PROBE_PROMPT), encode(PROBE_CONTINUATION)


def engine_logprobs(trainer: Any, probe: tuple[list[int], list[int]]) -> Any:
    """The colocated engine's raw log-probs of the probe's continuation (prompt log-probs)."""
    import torch
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    ids, continuation = probe
    out = trainer.vllm_generation.llm.generate(
        [TokensPrompt(prompt_token_ids=ids + continuation)],
        SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0),
        use_tqdm=False,
    )
    steps = out[0].prompt_logprobs[len(ids) :]
    return torch.tensor([s[t].logprob for s, t in zip(steps, continuation, strict=True)])


def policy_logprobs(trainer: Any, probe: tuple[list[int], list[int]]) -> Any:
    """The trainer's (policy's) log-probs of the probe's continuation."""
    import torch

    ids, continuation = probe
    model = trainer.model
    seq = torch.tensor([ids + continuation], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(ids) - 1 : -1].float()
    chosen = torch.tensor(continuation, device=logits.device)[:, None]
    return torch.log_softmax(logits, -1).gather(-1, chosen)[:, 0].cpu()


def sync_report(trainer: Any, probe: tuple[list[int], list[int]], before: Any) -> dict[str, Any]:
    """After training: sync as TRL does before a generation step, then compare the engine with
    the policy. Synced = the engine is ten times closer to the policy than the policy moved
    from `before` (its log-probs before training), so a stale engine cannot pass."""
    trainer.vllm_generation.sync_weights()
    policy = policy_logprobs(trainer, probe)
    moved = float((policy - before).abs().max())
    error = float((engine_logprobs(trainer, probe) - policy).abs().max())
    return {
        "policy_moved_max_abs": round(moved, 6),
        "engine_vs_policy_max_abs": round(error, 6),
        "synced": moved > 10 * error,
    }
