"""The dry run's constants, each labelled: assumed (a one-line bandwidth- or FLOPS-bound estimate
at gpu_check's shape), measured (read from a `benchmarks/gpu_check.py --output` file), or from
the spec sheet.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmlib.reads import read_text
from rmlib.workbook.plan.facts import REFERENCE_MODEL, GiB, GPUClass, model_facts

ASSUMED = "assumed (unmeasured)"


MEASURED = "measured"


SPEC = "spec sheet"


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


DECODE_MFU = 0.3  # of peak bf16 FLOPS a large-batch (compute-bound) decode step achieves


PREFILL_MFU = 0.4


TRAIN_MFU = 0.35


TRAIN_FLOPS_PER_PARAM = 10  # the paper profile's: train_flops_per_param says why


def train_flops_per_param(g: Any) -> tuple[int, str]:
    """FLOPs a token of GRPO's trainer costs, per base parameter, counting every forward TRL 1.16
    runs (trl/trainer/grpo_trainer.py): 2 the policy forward; 2 its backward (LoRA: gradients
    of the activations only, the frozen base gets no weight gradient); 2 the checkpointed
    forward recomputed (gradient_checkpointing); 2 the old-log-prob forward, which
    `_generate_and_score_completions` runs when use_vllm with vllm_importance_sampling_correction
    (TRL's default True) or when gradient_accumulation_steps is not a multiple of
    steps_per_generation; 2 the reference forward (adapter disabled) when beta > 0."""
    parts = [("policy forward", 2), ("backward (LoRA)", 2)]
    if g.gradient_checkpointing:
        parts.append(("checkpoint recompute", 2))
    completions = g.per_device_train_batch_size * g.gradient_accumulation_steps
    per_generation = (g.generation_batch_size or completions) // g.per_device_train_batch_size
    correction = g.trl.get("vllm_importance_sampling_correction", True)
    if (g.use_vllm and correction) or g.gradient_accumulation_steps % max(per_generation, 1):
        parts.append(("old-log-prob forward", 2))
    if g.beta > 0:
        parts.append(("reference forward", 2))
    total = sum(n for _, n in parts)
    return total, " + ".join(f"{n} {what}" for what, n in parts)


HF_STEP_FLOOR_S = 0.040  # transformers' eager decode step: launches + NF4 dequantisation


NF4_TRAIN_SLOWDOWN = 0.5


VLLM_RESERVE_GIB = 1.5  # an engine's activations and CUDA graphs, outside weights and KV


TRAINER_WORKSPACE_GIB = 1.0


NOTEBOOK_OVERHEAD_S = 30.0


def efficiency(gpu: GPUClass, share: float) -> float:
    """`share` of a spec-sheet figure, or 1 when the card's figures are achieved ones."""
    return 1.0 if gpu.achieved else share


def _bandwidth_rate(gpu: GPUClass, weights: float, batch: int, kv_seq: float) -> float:
    """Decode tokens/s when each step reads the weights once and every sequence's KV cache."""
    bandwidth = efficiency(gpu, DECODE_BANDWIDTH_SHARE) * gpu.bandwidth_gb_s * 1e9
    return bandwidth * batch / (weights + batch * kv_seq)


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
    prefill = efficiency(gpu, PREFILL_MFU) * flops / (2 * ref.params)
    train = efficiency(gpu, TRAIN_MFU) * flops / (TRAIN_FLOPS_PER_PARAM * ref.params)
    bw = f"{DECODE_BANDWIDTH_SHARE:.0%} of {gpu.bandwidth_gb_s:,.0f} GB/s"
    step = f"(bf16 weights {w16 / 1e9:.1f} GB + {{b}} x {ctx:,} tokens x {kv:,} B of KV) a step"
    return {
        "vllm_decode_tokens_per_s": Constant(
            round(decode),
            "tok/s",
            ASSUMED,
            "the plan computes each notebook's rate from its engine's batch and context "
            f"(Estimator.decode_rate: bandwidth-bound, or compute-bound at {DECODE_MFU:.0%} of "
            "the bf16 FLOPS); shown here at gpu_check's "
            f"engine shape: {bw} x {batch} sequences (KV room of 0.85 of the card, at most "
            f"{REF_ENGINE_BATCH}) / " + step.format(b=batch),
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
            "the plan computes GRPO's rate from the colocated engine's share of the card, the "
            "generation batch and the context (Estimator.decode_rate); shown here at "
            f"gpu_check's generation batch: {bw} x {REF_GENERATION_BATCH} sequences / "
            + step.format(b=REF_GENERATION_BATCH),
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
            "token: policy forward, backward, checkpoint recompute, old-log-prob and reference "
            "forwards; the plan counts each profile's own, train_flops_per_param)",
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
        "notebook_overhead_s": Constant(
            NOTEBOOK_OVERHEAD_S,
            "s",
            ASSUMED,
            "a GPU notebook's time outside its model work: kernel start, imports, tables",
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
        "GRPO trainer on the NF4 base, prompt + completion tokens of every completion trained, "
        "all step time outside generation and weight sync",
    ),
    # gpu_check trains the NF4 base only: train_tokens_per_s_bf16 stays assumed
    "grpo_vllm_generate_tokens_per_s": (
        ("vllm", "grpo_colocate", "generated_tokens_per_s"),
        "GRPO's colocated vLLM engine",
    ),
    "vllm_engine_start_s": (("vllm", "engine", "engine_start_s"), "vLLM engine start"),
    "grpo_sync_s": (
        ("vllm", "grpo_colocate", "sync_s_per_sync"),
        "one weight sync of the policy into the colocated engine, timed on its own",
    ),
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
        data = json.loads(read_text(path, "gpu_check constants file"))
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
        part = _dig(data, keys[:2]) if keys[0] == "vllm" else None
        if isinstance(part, dict) and part.get("status") not in (None, "ran"):
            continue  # a part that failed or timed out measured nothing to plan with
        value = _dig(data, keys)
        _check_number(path, ".".join(keys), value, optional=True)
        if isinstance(value, int | float) and value > 0:
            unit = "s" if name.endswith("_s") else "tok/s"
            out[name] = Constant(
                float(value), unit, MEASURED, f"{where}: {'.'.join(keys)} ({what})"
            )
    batches = _dig(data, ("vllm", "engine", "batches"))
    if isinstance(batches, dict) and batches:
        largest = max(batches, key=lambda b: int(b) if str(b).isdigit() else -1)
        value = _dig(batches, (largest, "generated_tokens_per_s"))
        _check_number(path, f"vllm.engine.batches.{largest}.generated_tokens_per_s", value, True)
        if isinstance(value, int | float) and value > 0:
            key = f"vllm.engine.batches.{largest}.generated_tokens_per_s"
            out["vllm_decode_tokens_per_s"] = Constant(
                float(value),
                "tok/s",
                MEASURED,
                f"{where}: {key} (engine at batch {largest}: samples of one prompt)",
            )
    about = {
        "file": str(path),
        "device": device,
        "check": data.get("check"),
        "settings": data.get("settings"),
        "peak_reserved_gib_nf4_trainer": data.get("peak_reserved_gib"),
        "device_used_gib_vllm_colocate": _dig(data, ("vllm", "grpo_colocate", "device_used_gib")),
        # what gpu_check can measure but this file did not (a part unrun, or --trainer-only)
        "unmeasured": [name for name in GPU_CHECK_CONSTANTS if name not in out],
    }
    return out, about


# every constant a gpu_check file can give (MEASURED_KEYS and the engine's largest batch)
GPU_CHECK_CONSTANTS: tuple[str, ...] = (*MEASURED_KEYS, "vllm_decode_tokens_per_s")


CPU_CLASS = "cpu"

CPU_KIND = "rmlib-cpu-constants"  # the "kind" of a benchmarks/calibrate_cpu.py file


def is_cpu_constants(path: str | Path | None) -> bool:
    if path is None:
        return False
    try:
        return json.loads(read_text(path, "constants file")).get("kind") == CPU_KIND
    except (OSError, ValueError, AttributeError):  # cpu_card / measured_constants say why
        return False


def cpu_card(path: str | Path) -> tuple[GPUClass, dict[str, Constant], dict[str, Any]]:
    """The CPU a calibrate_cpu.py file measured, as a card whose bandwidth and FLOPS are the
    achieved ones (`GPUClass.achieved`), and the constants it measured (engine start, notebook
    overhead, train rate...)."""
    path = Path(path)
    try:
        data = json.loads(read_text(path, "CPU constants file"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a CPU constants file (not JSON: {e})") from None
    need = ("bandwidth_gb_s", "tflops", "memory_gib", "device")
    ours = isinstance(data, dict) and data.get("kind") == CPU_KIND
    if not ours or any(k not in data for k in need):
        raise ValueError(f"{path}: not a CPU constants file of benchmarks/calibrate_cpu.py")
    for key in ("memory_gib", "bandwidth_gb_s", "tflops"):
        _check_number(path, key, data[key], positive=True)
    measured = data.get("constants") or {}
    if not isinstance(measured, dict):
        raise ValueError(f"{path}: constants: expected an object of name -> number")
    for name, value in measured.items():
        _check_number(path, f"constants.{name}", value)
    where = f"calibrate_cpu on {data['device']} ({path.name})"
    card = GPUClass(
        CPU_CLASS,
        str(data["device"]),
        float(data["memory_gib"]),
        float(data["bandwidth_gb_s"]),
        float(data["tflops"]),
        f"{MEASURED}: {where} (achieved, {data.get('precision', 'fp32')})",
        achieved=True,
    )
    constants = {
        name: Constant(float(value), _unit(name), MEASURED, where)
        for name, value in measured.items()
    }
    about = {"file": str(path), "device": data["device"], "precision": data.get("precision")}
    return card, constants, about


def _check_number(
    path: Path, key: str, value: Any, optional: bool = False, positive: bool = False
) -> None:
    """A number read from a constants file: finite and not negative (`positive`: above 0), not
    true/false; None or absent only where `optional`. One ValueError naming file and key."""
    if value is None and optional:
        return
    bound = "above 0" if positive else "0 or more"
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise ValueError(f"{path}: {key}: expected a finite number {bound}, got {value!r}")


def _unit(name: str) -> str:
    """A measured constant's unit, from its name (train_mfu: a share of the card's FLOPS)."""
    return "s" if name.endswith("_s") else "share" if name.endswith("_mfu") else "tok/s"


def plan_constants(
    gpu: GPUClass, path: str | Path | None
) -> tuple[dict[str, Constant], dict | None]:
    constants = assumed_constants(gpu)
    about = None
    if gpu.name == CPU_CLASS and path is not None:
        _, measured, about = cpu_card(path)
        constants.update(measured)
    elif path is not None:
        measured, about = measured_constants(path)
        constants.update(measured)
    spec = f"{SPEC}: {gpu.spec}"
    constants["memory_gib"] = Constant(gpu.memory_gib, "GiB", SPEC, spec)
    constants["bandwidth_gb_s"] = Constant(gpu.bandwidth_gb_s, "GB/s", SPEC, spec)
    constants["bf16_tflops"] = Constant(gpu.bf16_tflops, "TFLOPS", SPEC, spec)
    return constants, about
