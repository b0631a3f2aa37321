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

With an nf4 (QLoRA) base the weights cannot go over at all: merging LoRA into 4-bit layers and
copying them is lossy, and vLLM 0.32's CUDA build cannot hold bitsandbytes layers anyway. The
engine then holds the SAME checkpoint unquantized (the nf4 base's compute dtype: bf16 on CUDA,
fp32 on CPU) with LoRA enabled, and receives the policy as an ADAPTER: each sync saves the
current adapter to a fresh directory and registers it under a fresh `LoRARequest` id (vLLM
caches adapters by id), and every generation passes that request. That overrides three points
of TRL's: its quantization argument (TRL asks for bitsandbytes when the model has 4-bit layers),
its sync (merge into the base) and its generate (no `lora_request`). The sampler (unquantized
base + adapter) and the learner (NF4 base + adapter) then differ by the quantization error,
which TRL's importance-sampling correction (`vllm_importance_sampling_correction`, on by
default) accounts for, as it does for any learner/sampler gap.

Why a patch and not a new engine of ours: TRL owns the timing of generation and sync (after each
optimizer step, once per generation batch), the importance-sampling correction and the
multi-process layout; replacing it would restate all of that.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The CPU engine's KV cache in colocate mode (GRPOSettings.vllm_cpu_kv_cache_gib's default):
# GRPO's groups are small (one generation batch at a time), so a little memory suffices.
CPU_COLOCATE_KV_GIB = 0.5


def _on_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def engine_dtype(precision: str, on_cuda: bool | None = None) -> str:
    """The colocated engine's dtype for a training precision: the trainer's for fp32 / bf16; for
    nf4, the 4-bit base's compute dtype (bf16 on CUDA, fp32 on CPU), so that the only gap
    between learner and sampler is the quantization itself."""
    from rmlib.generation.vllm import vllm_dtype

    if precision == "nf4" and not (_on_cuda() if on_cuda is None else on_cuda):
        return "float32"
    return vllm_dtype(precision)[0]


def adapter_bases(precision: str, use_vllm: bool, on_cuda: bool | None = None) -> dict[str, str]:
    """Which base the adapter was trained on and which its GRPO groups were sampled from, for
    training_settings.json and the model card: with use_vllm and an nf4 base they differ (the
    engine serves the adapter on the checkpoint unquantized, in `engine_dtype`)."""
    if not use_vllm:
        return {"trained_on": precision, "sampled_on": precision, "sampled_by": "transformers"}
    sampled = engine_dtype(precision, on_cuda)
    how = "vLLM colocate, " + (
        "unquantized base + the adapter by LoRARequest" if precision == "nf4" else "LoRA merged"
    )
    return {"trained_on": precision, "sampled_on": sampled, "sampled_by": how}


def engine_llm(
    llm_class: Any,
    *,
    dtype: str,
    kv_cache_gib: float | None,
    seed: int = 0,
    lora_rank: int | None = None,
) -> Any:
    """vllm.LLM with TRL's arguments, the trainer's `dtype` and the run's `seed` (added to TRL's
    own, the process index, so data-parallel processes still draw differently); with
    `kv_cache_gib` (CPU), its memory sized for the CPU engine; with `lora_rank` (an nf4 base),
    the checkpoint unquantized with LoRA enabled, for the policy's adapter (module doc)."""

    def make(**kwargs: Any) -> Any:
        kwargs["dtype"] = dtype
        kwargs["seed"] = seed + kwargs.get("seed", 0)
        if lora_rank is not None:
            from rmlib.generation.vllm import vllm_lora_rank

            # TRL passes quantization="bitsandbytes" for a model with 4-bit layers; the engine
            # loads the checkpoint's own (unquantized) weights from model.name_or_path instead
            kwargs["quantization"] = None
            kwargs["enable_lora"] = True
            kwargs["max_lora_rank"] = vllm_lora_rank(lora_rank)
            kwargs["max_loras"] = 1  # one policy adapter at a time (the previous one is removed)
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


class AdapterSync:
    """The policy's adapter as the engine sees it: each `push` saves the trainer's current LoRA
    weights to a fresh directory and registers them under a fresh LoRARequest id (vLLM caches
    adapters by id: reusing one would serve the old weights), removing the previous one."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rmlib-colocate-adapter-"))
        self.request: Any = None  # None until the first sync: LoRA B starts at zero (no-op)
        self.path: Path | None = None
        self.count = 0

    def push(self, llm: Any, model: Any) -> Any:
        from vllm.lora.request import LoRARequest

        self.count += 1
        path = self.root / f"step-{self.count}"
        model.save_pretrained(str(path))  # PEFT: the adapter only (weights + adapter_config)
        request = LoRARequest(f"policy-{self.count}", self.count, str(path))
        llm.llm_engine.add_lora(request)  # load now: a bad adapter fails at the sync
        if self.request is not None:
            llm.llm_engine.remove_lora(self.request.lora_int_id)
            shutil.rmtree(self.path, ignore_errors=True)  # type: ignore[arg-type]
        self.request, self.path = request, path
        return request

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def lora_request(trainer: Any) -> Any:
    """The LoRARequest the colocated engine serves the policy under (None: no adapter mode, or
    before the first sync)."""
    adapter = getattr(trainer.vllm_generation, "adapter", None)
    return None if adapter is None else adapter.request


@contextlib.contextmanager
def colocated_generation(
    precision: str,
    kv_cache_gib: float = CPU_COLOCATE_KV_GIB,
    seed: int = 0,
    lora_rank: int | None = None,
) -> Iterator[None]:
    """While a GRPOTrainer is built: TRL's colocated engine runs in the trainer's `precision`,
    seeded from the run's `seed`; on CPU it also gets the two fixes above. With an nf4
    `precision` (QLoRA), the engine serves the unquantized base and the policy as an adapter of
    rank `lora_rank` (the module doc)."""
    from trl.generation import vllm_generation as tg
    from trl.trainer import grpo_trainer

    on_cuda = _on_cuda()
    dtype = engine_dtype(precision, on_cuda)
    as_adapter = precision == "nf4"
    if as_adapter and lora_rank is None:
        raise ValueError("colocated_generation: an nf4 base needs the LoRA rank (lora_rank)")

    class ColocateGeneration(tg.VLLMGeneration):
        adapter: AdapterSync | None = None

        def _init_vllm(self) -> None:
            real = tg.LLM
            kv = None if on_cuda else kv_cache_gib
            rank = lora_rank if as_adapter and self.mode == "colocate" else None
            tg.LLM = engine_llm(real, dtype=dtype, kv_cache_gib=kv, seed=seed, lora_rank=rank)
            try:
                super()._init_vllm()
            finally:
                tg.LLM = real
            if rank is not None:
                self.adapter = AdapterSync()
                weakref.finalize(self, self.adapter.close)

        def sync_weights(self) -> None:
            if self.adapter is not None:  # QLoRA: the adapter goes over, never merged weights
                self.adapter.push(self.llm, self.accelerator.unwrap_model(self.model))
                return
            if on_cuda or self.mode != "colocate":
                return super().sync_weights()
            sync_cpu_engine(self)

        def generate(self, *args: Any, **kwargs: Any) -> Any:
            request = None if self.adapter is None else self.adapter.request
            if request is None:
                return super().generate(*args, **kwargs)
            # TRL calls self.llm.generate(prompts, sampling_params=..., use_tqdm=False) with no
            # lora_request: shadow the bound method for this call only
            llm = self.llm
            llm.generate = functools.partial(type(llm).generate, llm, lora_request=request)
            try:
                return super().generate(*args, **kwargs)
            finally:
                del llm.generate

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


def engine_logprobs(
    trainer: Any, probe: tuple[list[int], list[int]], lora_request: Any = None
) -> Any:
    """The colocated engine's raw log-probs of the probe's continuation (prompt log-probs), under
    `lora_request` when given (the QLoRA path serves the policy as an adapter: `lora_request`)."""
    import torch
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    ids, continuation = probe
    out = trainer.vllm_generation.llm.generate(
        [TokensPrompt(prompt_token_ids=ids + continuation)],
        SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0),
        use_tqdm=False,
        lora_request=lora_request,
    )
    steps = out[0].prompt_logprobs[len(ids) :]
    return torch.tensor([s[t].logprob for s, t in zip(steps, continuation, strict=True)])


def policy_logprobs(trainer: Any, probe: tuple[list[int], list[int]]) -> Any:
    """The trainer's (policy's) log-probs of the probe's continuation."""
    return _logprobs(trainer.model, probe)


def _logprobs(model: Any, probe: tuple[list[int], list[int]]) -> Any:
    import torch

    ids, continuation = probe
    seq = torch.tensor([ids + continuation], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0, len(ids) - 1 : -1].float()
    chosen = torch.tensor(continuation, device=logits.device)[:, None]
    return torch.log_softmax(logits, -1).gather(-1, chosen)[:, 0].cpu()


def adapter_reference_logprobs(trainer: Any, probe: tuple[list[int], list[int]]) -> Any:
    """What the QLoRA engine should compute: the checkpoint loaded unquantized in the engine's
    dtype by transformers, the trainer's CURRENT LoRA weights attached by PEFT (copied from the
    trainer's model, not read from the synced directory, so a stale or wrong save shows)."""
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    policy = trainer.accelerator.unwrap_model(trainer.model)
    dtype = trainer.vllm_generation.llm.llm_engine.model_config.dtype  # a torch.dtype
    device = next(policy.parameters()).device
    base = AutoModelForCausalLM.from_pretrained(
        policy.name_or_path, dtype=dtype, use_safetensors=True
    ).to(device)
    config = policy.peft_config[policy.active_adapter]
    reference = get_peft_model(base, config)
    set_peft_model_state_dict(reference, get_peft_model_state_dict(policy))
    reference.eval()
    try:
        return _logprobs(reference, probe)
    finally:
        del reference, base


def engine_gap(trainer: Any, probe: tuple[list[int], list[int]]) -> float:
    """The gap the engine has with the learner's numerics when nothing is out of date: the max
    abs difference of the probe's log-probs between the engine and its reference (QLoRA: the
    unquantized checkpoint + the trainer's adapter in transformers+PEFT, `adapter_reference_
    logprobs`; otherwise the policy itself), synced as TRL syncs. Measured before training, on
    an adapter that has not moved, it is this machine's and this dtype's floor for
    `sync_report` (bf16 on a GPU: 1e-2 to 1e-1; fp32 on CPU: about 1e-6)."""
    trainer.vllm_generation.sync_weights()
    request = lora_request(trainer)
    engine = engine_logprobs(trainer, probe, request)
    served = getattr(trainer.vllm_generation, "adapter", None) is not None  # QLoRA
    reference = (adapter_reference_logprobs if served else policy_logprobs)(trainer, probe)
    return float((engine - reference).abs().max())


# sync_report's rule: the engine is synced when its gap to the reference is within this many
# times the floor (`engine_gap` of an unchanged adapter), and the policy moved further than
# that; never tighter than SYNC_MIN_TOLERANCE (an exact floor of 0 is no tolerance at all)
SYNC_FLOOR_FACTOR = 3.0
SYNC_MIN_TOLERANCE = 1e-5


def sync_report(
    trainer: Any,
    probe: tuple[list[int], list[int]],
    before: Any,
    floor: float | None = None,
    factor: float = SYNC_FLOOR_FACTOR,
) -> dict[str, Any]:
    """After training: sync as TRL does before a generation step, then compare the engine with
    the policy. Without `floor`: synced = the engine is ten times closer to the policy than the
    policy moved from `before` (its log-probs before training), so a stale engine cannot pass.

    With `floor` (`engine_gap` measured on this machine before training, the adapter unchanged):
    the tolerance is `factor` x floor (at least SYNC_MIN_TOLERANCE); synced = the engine is
    within it of its reference AND the policy moved beyond it (else a stale engine could not be
    told from a synced one: "inconclusive", not synced). This holds in bf16 on a GPU, where the
    engine/learner gap is of the order of two steps' shift, as in fp32 on CPU.

    QLoRA (the engine serves the adapter on the unquantized base): the engine is compared with
    `adapter_reference_logprobs`, and `engine_vs_policy_max_abs` is the NF4 learner /
    unquantized sampler gap, which TRL's importance-sampling correction covers."""
    trainer.vllm_generation.sync_weights()
    request = lora_request(trainer)
    policy = policy_logprobs(trainer, probe)
    moved = float((policy - before).abs().max())
    engine = engine_logprobs(trainer, probe, request)
    error = float((engine - policy).abs().max())
    report: dict[str, Any] = {
        "policy_moved_max_abs": round(moved, 6),
        "engine_vs_policy_max_abs": round(error, 6),
        "synced": moved > 10 * error,
    }
    gap = error
    if request is not None:
        gap = float((engine - adapter_reference_logprobs(trainer, probe)).abs().max())
        report["engine_vs_reference_max_abs"] = round(gap, 6)
        report["synced"] = moved > 10 * gap
        report["served_as"] = f"LoRARequest {request.lora_name} on the unquantized base"
    if floor is not None:
        tolerance = max(factor * floor, SYNC_MIN_TOLERANCE)
        report["rule"] = (
            f"engine gap <= {factor:g} x the unchanged adapter's gap ({floor:.3g}, measured "
            f"here) = {tolerance:.3g} < policy moved"
        )
        report["floor_max_abs"] = round(floor, 8)
        report["tolerance"] = round(tolerance, 8)
        report["synced"] = gap <= tolerance < moved
        if moved <= tolerance:
            report["why"] = (
                f"inconclusive: the policy moved {moved:.3g}, within the tolerance "
                f"{tolerance:.3g}: a stale engine would pass too (more steps or a higher lr)"
            )
        elif gap > tolerance:
            report["why"] = f"the engine is {gap:.3g} from the policy, over {tolerance:.3g}"
    return report
