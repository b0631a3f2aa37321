"""Memory and time of a run's parts on one GPU class (`Estimator`), with the activations autograd
keeps for a micro-batch.
"""

from __future__ import annotations

from typing import Any

from rmlib.run.config import RunConfig
from rmlib.workbook.plan.constants import (
    DECODE_BANDWIDTH_SHARE,
    DECODE_MFU,
    MEASURED,
    NF4_TRAIN_SLOWDOWN,
    PREFILL_MFU,
    TRAIN_FLOPS_PER_PARAM,
    TRAIN_MFU,
    Constant,
    efficiency,
)
from rmlib.workbook.plan.facts import REFERENCE_MODEL, GiB, GPUClass, ModelFacts, model_facts


def activation_bytes(facts: ModelFacts, tokens: int, checkpointing: bool) -> float:
    """What autograd keeps for one micro-batch of `tokens` tokens, roughly: per decoder layer and
    token, 4 x hidden (norm inputs/outputs, residual), 3 x the query and 3 x the KV width
    (q/k/v with RoPE, attention output) and 4 x intermediate (gate, up, activation, product),
    in bf16. With activation checkpointing only each layer's input is kept, plus one layer
    recomputed at a time. Logits are a term of their own (`Estimator.trainer`)."""
    per_layer = 2 * (4 * facts.hidden + 3 * facts.q_dim + 3 * facts.kv_dim + 4 * facts.intermediate)
    if checkpointing:
        return tokens * (facts.layers * 2 * facts.hidden + per_layer)
    return tokens * facts.layers * per_layer


# TRL 1.16's fused LM head (trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE and
# trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE): the tile GRPO's log-probs are projected in
LOGPROB_TILE_TOKENS = 4096


LOGPROB_TILE_VOCAB = 32768


def _term(term: str, gib: float | None, what: str) -> dict[str, Any]:
    return {"term": term, "gib": gib, "what": what}


def plan_precision(asked: str, auto: str = "bf16") -> str:
    return auto if asked == "auto" else asked  # auto is bf16 on CUDA (models.resolve_precision)


class Estimator:
    """Memory and time of a run's parts on one GPU class, with the constants in use."""

    def __init__(
        self,
        cfg: RunConfig,
        gpu: GPUClass,
        constants: dict[str, Constant],
        auto_precision: str = "bf16",
    ) -> None:
        self.cfg = cfg
        self.gpu = gpu
        self.constants = constants
        self.c = {k: v.value for k, v in constants.items()}
        self.facts = model_facts(cfg.model.backbone)
        # 'auto' precision: bf16 on CUDA; on a calibrated CPU what its file says it ran
        self.auto_precision = auto_precision

    def precision(self, asked: str) -> str:
        return plan_precision(asked, self.auto_precision)

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

    def engine_terms(
        self, total: float | None, precision: str, what: str, prefix: str = "engine_"
    ) -> list[dict[str, Any]]:
        """An engine of `total` GiB (`what`: how it is sized) split as vLLM fills it: the served
        weights, the reserve (activations, CUDA graphs) and the KV cache in the rest (0 when the
        rest is negative: the engine cannot start, `engine_too_small` says why)."""
        weights, reserve = self.weights(precision), self.c["vllm_reserve_gib"]
        kv = None if total is None or weights is None else max(total - weights - reserve, 0.0)
        return [
            _term(f"{prefix}weights_gib", weights, f"engine weights ({precision}, as served)"),
            _term(f"{prefix}kv_cache_gib", kv, f"engine KV cache (the rest of {what})"),
            _term(f"{prefix}reserve_gib", reserve, "engine reserve (activations, CUDA graphs)"),
        ]

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
        scored_tokens: int = 0,
        prefix: str = "",
    ) -> list[dict[str, Any]] | None:
        """A LoRA trainer's memory, term by term: weights at the training precision; the LoRA
        weights, their gradients and AdamW's two states (4 + 4 + 8 B a parameter in fp32, half in
        bf16); the activations autograd keeps for one micro-batch of `tokens`
        (`activation_bytes`); the logits; a workspace. Logits: SFT's full logits in fp32 with
        `logits` (TRL's SFTTrainer materialises them), else GRPO's fused LM head (TRL 1.16,
        `add_fused_lm_head`), which projects the `scored_tokens` completion tokens in fp32 tiles
        of at most LOGPROB_TILE_TOKENS x LOGPROB_TILE_VOCAB and never holds the whole vocab."""
        if self.facts is None:
            return None
        f = self.facts
        n = f.lora_params(lora_r)
        width = 4 if adapter_dtype == "fp32" else 2
        act = activation_bytes(f, tokens, checkpointing)
        if logits:
            logit_bytes = tokens * f.vocab * 6  # bf16 logits + their fp32 copy for the loss
            how = f"logits: {tokens:,} tokens x {f.vocab:,} vocab x 6 B (bf16 + fp32 for the loss)"
        else:
            rows = min(scored_tokens, LOGPROB_TILE_TOKENS)
            logit_bytes = rows * min(f.vocab, LOGPROB_TILE_VOCAB) * 4
            how = (
                f"logits: TRL's fused LM head, one fp32 tile of {rows:,} of the "
                f"{scored_tokens:,} completion tokens x {min(f.vocab, LOGPROB_TILE_VOCAB):,} of "
                f"the {f.vocab:,} vocab (full logits would be "
                f"{scored_tokens * f.vocab * 2 / GiB:.1f} GiB in bf16)"
            )
        kept = "checkpointed" if checkpointing else "no checkpointing"
        return [
            _term(
                f"{prefix}weights_gib", f.weight_bytes(precision) / GiB, f"weights ({precision})"
            ),
            _term(
                f"{prefix}lora_params_gib",
                n * width / GiB,
                f"LoRA r={lora_r}: {n / 1e6:.1f} M params",
            ),
            _term(f"{prefix}lora_grads_gib", n * width / GiB, f"LoRA gradients ({adapter_dtype})"),
            _term(f"{prefix}adamw_states_gib", n * 2 * width / GiB, "AdamW's two states"),
            _term(f"{prefix}activations_gib", act / GiB, f"activations: {tokens:,} tokens, {kept}"),
            _term(f"{prefix}logits_gib", logit_bytes / GiB, how),
            _term(f"{prefix}workspace_gib", self.c["trainer_workspace_gib"], "trainer workspace"),
        ]

    # time (seconds)

    def measured(self, key: str) -> bool:
        return key in self.constants and self.constants[key].source == MEASURED

    def decode_rate(
        self, engine_gib: float | None, precision: str, ctx: float, queued: float
    ) -> tuple[float, int, str]:
        """Decode tokens/s of one vLLM engine of `engine_gib` serving `precision` weights, with
        `queued` sequences waiting at a mean context of `ctx` tokens: its batch is what the KV
        room holds (engine - weights - reserve), at most `queued` and generation.max_num_seqs;
        a step reads the weights once and every sequence's KV (bandwidth-bound) or does 2 x
        params FLOPs a sequence (compute-bound), whichever is slower. Returns (tok/s, batch,
        which bound)."""
        f = self.facts or model_facts(REFERENCE_MODEL)
        assert f is not None
        weights = f.weight_bytes(precision)
        kv = f.kv_bytes_per_token(4 if precision == "fp32" else 2) * max(ctx, 1.0)
        room = (engine_gib or 0.0) * GiB - weights - self.c["vllm_reserve_gib"] * GiB
        fits = max(int(room // kv), 1)
        batch = max(1, min(int(queued), self.cfg.generation.max_num_seqs, fits))
        bandwidth = efficiency(self.gpu, DECODE_BANDWIDTH_SHARE) * self.gpu.bandwidth_gb_s * 1e9
        t_bw = (weights + batch * kv) / bandwidth
        flops = efficiency(self.gpu, DECODE_MFU) * self.gpu.bf16_tflops * 1e12
        t_flops = 2 * f.params * batch / flops
        bound = "bandwidth" if t_bw >= t_flops else "compute"
        return batch / max(t_bw, t_flops), batch, bound

    def prefill_rate(self) -> float:
        if self.measured("vllm_prefill_tokens_per_s") or self.facts is None:
            return self.c["vllm_prefill_tokens_per_s"]
        flops = efficiency(self.gpu, PREFILL_MFU) * self.gpu.bf16_tflops * 1e12
        return flops / (2 * self.facts.params)

    def generation_s(
        self,
        prompt_tokens: float,
        tokens: float,
        engine: str,
        *,
        engine_gib: float | None = None,
        precision: str = "bf16",
        ctx: float | None = None,
        queued: float = 1e9,
    ) -> dict[str, float]:
        """Prefill of `prompt_tokens` + decode of `tokens` on one engine: vLLM's rate from its
        batch and context (`decode_rate`) unless a gpu_check file measured it; transformers'
        eager loop at its constant."""
        key = {
            "vllm": "vllm_decode_tokens_per_s",
            "colocate": "grpo_vllm_generate_tokens_per_s",
            "hf": "hf_generate_tokens_per_s",
        }[engine]
        if engine == "hf" or self.measured(key) or engine_gib is None or ctx is None:
            rate = self.c[key]
        else:
            rate = self.decode_rate(engine_gib, precision, ctx, queued)[0]
        return {"prefill": prompt_tokens / self.prefill_rate(), "decode": tokens / rate}

    def train_rate(self, precision: str, flops_per_param: float = TRAIN_FLOPS_PER_PARAM) -> float:
        """Trainer tokens/s (prompt + completion tokens): measured, else TRAIN_MFU (or a CPU's
        measured train_mfu) of the card's FLOPS over `flops_per_param` x params FLOPs a token
        (NF4: x NF4_TRAIN_SLOWDOWN)."""
        key = "train_tokens_per_s_nf4" if precision == "nf4" else "train_tokens_per_s_bf16"
        if self.measured(key) or self.facts is None:
            return self.c[key]
        # a CPU constants file measures the share a training step achieves of its matmul FLOPS
        measured = self.measured("train_mfu")
        share = self.c["train_mfu"] if measured else efficiency(self.gpu, TRAIN_MFU)
        flops = share * self.gpu.bf16_tflops * 1e12
        rate = flops / (flops_per_param * self.facts.params)
        return rate * (NF4_TRAIN_SLOWDOWN if precision == "nf4" else 1.0)
