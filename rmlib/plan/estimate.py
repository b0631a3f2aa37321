"""Memory and time of a run's parts on one GPU class (`Estimator`), with the activations autograd
keeps for a micro-batch.
"""

from __future__ import annotations

from typing import Any

from rmlib.config import RunConfig
from rmlib.plan.constants import Constant
from rmlib.plan.facts import GiB, GPUClass, ModelFacts, model_facts


def activation_bytes(facts: ModelFacts, tokens: int, checkpointing: bool) -> float:
    """What autograd keeps for one micro-batch of `tokens` tokens, roughly: per decoder layer and
    token, 4 x hidden (norm inputs/outputs, residual), 3 x the query and 3 x the KV width
    (q/k/v with RoPE, attention output) and 4 x intermediate (gate, up, activation, product),
    in bf16. With activation checkpointing only each layer's input is kept, plus one layer
    recomputed at a time. Logits are not counted: on CUDA TRL computes log-probs in tiles."""
    per_layer = 2 * (4 * facts.hidden + 3 * facts.q_dim + 3 * facts.kv_dim + 4 * facts.intermediate)
    if checkpointing:
        return tokens * (facts.layers * 2 * facts.hidden + per_layer)
    return tokens * facts.layers * per_layer


def plan_precision(asked: str) -> str:
    return "bf16" if asked == "auto" else asked  # auto is bf16 on CUDA (models.resolve_precision)


class Estimator:
    """Memory and time of a run's parts on one GPU class, with the constants in use."""

    def __init__(self, cfg: RunConfig, gpu: GPUClass, constants: dict[str, Constant]) -> None:
        self.cfg = cfg
        self.gpu = gpu
        self.constants = constants
        self.c = {k: v.value for k, v in constants.items()}
        self.facts = model_facts(cfg.model.backbone)

    # memory (GiB; None when the backbone is unknown)

    def weights(self, precision: str) -> float | None:
        return None if self.facts is None else self.facts.weight_bytes(precision) / GiB

    def kv_gib(self, tokens: int, precision: str) -> float | None:
        if self.facts is None:
            return None
        return tokens * self.facts.kv_bytes_per_token(4 if precision == "fp32" else 2) / GiB

    def engine(self, share: float, kv_cache_gib: float | None, precision: str) -> dict[str, Any]:
        """A vLLM engine: its share of the card, or weights + kv_cache_gib + reserve."""
        weights = self.weights(precision)
        if kv_cache_gib is not None:
            total = None if weights is None else weights + kv_cache_gib + self.c["vllm_reserve_gib"]
            return {"engine_gib": total, "how": "weights + generation.kv_cache_gib + reserve"}
        return {"engine_gib": share * self.gpu.memory_gib, "how": f"{share:g} of the card"}

    def engine_too_small(self, gib: float | None, precision: str, max_len: int) -> str | None:
        """Why an engine of `gib` cannot start: weights, reserve and one longest sequence."""
        weights, kv = self.weights(precision), self.kv_gib(max_len, precision)
        if gib is None or weights is None or kv is None:
            return None
        need = weights + self.c["vllm_reserve_gib"] + kv
        if gib < need:
            return (
                f"the vLLM engine's {gib:.1f} GiB cannot hold its weights ({weights:.1f} GiB), "
                f"reserve and one {max_len:,}-token sequence's KV ({need:.1f} GiB in all)"
            )
        return None

    def trainer(
        self,
        precision: str,
        lora_r: int,
        adapter_dtype: str,
        tokens: int,
        checkpointing: bool,
        logits: bool = False,
    ) -> dict[str, float] | None:
        """A LoRA trainer's memory: weights, LoRA weights + gradients + AdamW's two states (fp32
        adapter: 16 B a parameter, bf16: 8), activations of one micro-batch (`tokens`; SFT's full
        logits in fp32 with `logits`), workspace."""
        if self.facts is None:
            return None
        lora = self.facts.lora_params(lora_r) * (16 if adapter_dtype == "fp32" else 8)
        act = activation_bytes(self.facts, tokens, checkpointing)
        if logits:
            act += tokens * self.facts.vocab * 6  # bf16 logits + their fp32 copy for the loss
        return {
            "weights_gib": self.facts.weight_bytes(precision) / GiB,
            "lora_and_adamw_gib": lora / GiB,
            "activations_gib": act / GiB,
            "workspace_gib": self.c["trainer_workspace_gib"],
        }

    # time (seconds)

    def generation_s(self, prompt_tokens: int, tokens: int, engine: str) -> dict[str, float]:
        """Prefill of `prompt_tokens` + decode of `tokens` on one of the engines."""
        rate = {
            "vllm": self.c["vllm_decode_tokens_per_s"],
            "colocate": self.c["grpo_vllm_generate_tokens_per_s"],
            "hf": self.c["hf_generate_tokens_per_s"],
        }[engine]
        return {
            "prefill": prompt_tokens / self.c["vllm_prefill_tokens_per_s"],
            "decode": tokens / rate,
        }

    def train_rate(self, precision: str) -> float:
        key = "train_tokens_per_s_nf4" if precision == "nf4" else "train_tokens_per_s_bf16"
        return self.c[key]
