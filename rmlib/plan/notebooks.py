"""`plan(cfg, gpu=...)`: one row per notebook (generations, tokens, optimizer steps, peak memory,
hours) and the notes that go with them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmlib.backends import context_tokens
from rmlib.config import RunConfig, describe
from rmlib.generation.vllm import vllm_dtype
from rmlib.plan.constants import ASSUMED, plan_constants
from rmlib.plan.counts import (
    eval_calls,
    grpo_schedule,
    mix_items_upper_bound,
    mix_prompt_tokens,
    models_eval_calls,
    paper_mix,
    protocols,
    set_pairs,
    swapped_pairs,
    warmup_steps,
)
from rmlib.plan.estimate import Estimator, plan_precision
from rmlib.plan.facts import (
    DEFAULT_GPU,
    GPU_CLASSES,
    REFERENCE_MODEL,
    GPUClass,
    class_of_device,
    gpu_class,
    model_facts,
)
from rmlib.run_models import stage1_model, trained_models


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def empty_row(notebook: str, **fields: Any) -> dict[str, Any]:
    row = {
        "notebook": notebook,
        "generations": 0,
        "generated_tokens_upper_bound": 0,
        "prompt_tokens_upper_bound": 0,
        "optimizer_steps": 0,
        "peak_gpu_gib": None,
        "fits": None,
        "hours": None,
        "memory": {},  # GiB by term (`memory_terms` says each one's phase and what it is)
        "memory_terms": [],  # {phase, term, gib, what}; a phase's terms are held at once
        "parts": [],
        "notes": [],
    }
    row.update(fields)
    return row


def _set_memory(row: dict[str, Any], phases: dict[str, list[dict[str, Any]] | None]) -> None:
    """A notebook's memory from its phases: each a list of terms held at once, the phases
    holding the card in turn, so the peak is the largest phase's sum (None: unknown)."""
    sums: list[float | None] = []
    for phase, terms in phases.items():
        if terms is None:
            sums.append(None)
            continue
        values = [t["gib"] for t in terms]
        sums.append(None if None in values else sum(values))
        row["memory_terms"] += [{"phase": phase, **t} for t in terms]
    row["memory"] = {t["term"]: t["gib"] for t in row["memory_terms"]}
    row["peak_gpu_gib"] = None if not sums or None in sums else max(sums)


def _finish(
    row: dict[str, Any], est: Estimator, seconds: dict[str, float], blocked: str | None = None
) -> dict[str, Any]:
    """Round, flag a peak over the card (or an engine that cannot start: `blocked`), add up the
    hours."""
    peak = row["peak_gpu_gib"]
    row["memory"] = {k: _gib(v) for k, v in row["memory"].items()}
    row["memory_terms"] = [{**t, "gib": _gib(t["gib"])} for t in row["memory_terms"]]
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
    row = empty_row(
        "02_rollouts",
        generations=n_train * ro.n_samples,
        generated_tokens_upper_bound=tokens,
        prompt_tokens_upper_bound=prompt_tokens,
    )
    seconds: dict[str, float] = {}
    phases: dict[str, list[dict[str, Any]] | None] = {}
    if cfg.warmup.enabled:
        w = cfg.warmup
        precision = plan_precision(w.precision)
        row["optimizer_steps"] = warmup_steps(cfg)
        tokens_in = w.batch_size * w.max_length
        phases["warm-up trainer"] = est.trainer(
            precision, w.lora_r, "fp32", tokens_in, w.gradient_checkpointing, True, 0, "warmup_"
        )
        per_step = w.batch_size * w.gradient_accumulation_steps * w.max_length
        seconds["warmup"] = row["optimizer_steps"] * per_step / est.train_rate(precision)
    phases["generation"], row["memory_how"], blocked = _generation_memory(cfg, est)
    _set_memory(row, phases)
    if gen.backend != "hf":
        seconds["engine_start"] = est.c["vllm_engine_start_s"]
    engine = "hf" if gen.backend == "hf" else "vllm"
    seconds.update(est.generation_s(prompt_tokens, tokens, engine))
    return _finish(row, est, seconds, blocked)


def _generation_memory(
    cfg: RunConfig, est: Estimator
) -> tuple[list[dict[str, Any]], str, str | None]:
    """02/04's generation backend: (its memory terms, how it is counted, why its engine cannot
    start)."""
    gen = cfg.generation
    precision = plan_precision(cfg.model.precision)
    if gen.backend == "http":
        return [], "generation on the servers at generation.endpoints", None
    if gen.backend == "hf":
        weights, kv = est.weights(precision), est.kv_gib(gen.max_batch_tokens, precision)
        terms = [
            {"term": "weights_gib", "gib": weights, "what": f"weights ({precision})"},
            {
                "term": "kv_cache_gib",
                "gib": kv,
                "what": f"KV cache of generation.max_batch_tokens ({gen.max_batch_tokens:,})",
            },
        ]
        return terms, "weights + KV cache of generation.max_batch_tokens (no activations)", None
    # the engine's weights: vLLM serves an nf4 base in bf16 (rmlib.generation.vllm.vllm_dtype)
    precision = "fp32" if vllm_dtype(precision)[0] == "float32" else "bf16"
    engine = est.engine(gen.gpu_memory_utilization, gen.kv_cache_gib, precision)
    max_len = context_tokens(cfg)  # the engine's max_model_len
    blocked = est.engine_too_small(engine["engine_gib"], precision, max_len)
    how = engine["how"] if gen.kv_cache_gib is not None else "generation.gpu_memory_utilization"
    terms = est.engine_terms(engine["engine_gib"], precision, how)
    return terms, f"vLLM engine: {engine['how']}", blocked


def _training_row(cfg: RunConfig, est: Estimator, n_train: int) -> dict[str, Any]:
    """03: GRPO for every trained model, one after the other (the peak is one model's)."""
    g = cfg.grpo
    precision = plan_precision(cfg.model.train_precision)
    mixes = {m: mix_items_upper_bound(cfg, m, n_train) for m in trained_models(cfg)}
    # memory at the longest prompt a micro-batch may hold: a Refl. item's, if any mix has one
    has_refl = any(mix["refl"] for mix in mixes.values())
    budget = cfg.prompts.longest_prompt_tokens() if has_refl else cfg.prompts.max_prompt_tokens
    row = empty_row("03_training")
    seconds: dict[str, float] = {}
    tokens = g.per_device_train_batch_size * (budget + g.max_completion_length)
    scored = g.per_device_train_batch_size * g.max_completion_length  # the completions' log-probs
    trainer = est.trainer(
        precision, g.lora_r, g.adapter_dtype, tokens, g.gradient_checkpointing, False, scored
    )
    held: list[dict[str, Any]] | None = None if trainer is None else list(trainer)
    blocked = None
    if g.use_vllm:
        engine_gib = g.vllm_gpu_memory_utilization * est.gpu.memory_gib
        max_len = g.vllm_max_model_length or budget + g.max_completion_length
        # an nf4 (QLoRA) trainer's engine holds the checkpoint unquantized: bf16 weights on CUDA
        served = "bf16" if precision == "nf4" else precision
        why = est.engine_too_small(engine_gib, served, max_len)
        blocked = f"colocated engine: {why}" if why else None
        if held is not None:
            held += est.engine_terms(engine_gib, served, "grpo.vllm_gpu_memory_utilization")
        row["memory_how"] = "trainer (micro-batch at the budget) + grpo.vllm_gpu_memory_utilization"
    else:
        # TRL's transformers generation decodes the whole generation batch at once
        batch = g.generation_batch_size or g.per_device_train_batch_size
        kv = est.kv_gib(batch * (budget + g.max_completion_length), "bf16")
        if held is not None:
            what = f"KV cache of the generation batch ({batch} sequences)"
            held.append({"term": "generation_kv_gib", "gib": kv, "what": what})
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
                "paper_mix": paper_mix(model),
                "schedule": sched,
                "hours": round(sum(part.values()) / 3600, 3),
            }
        )
    if row["parts"]:
        engine = "colocated engine" if g.use_vllm else "generation KV"
        _set_memory(row, {f"trainer ({precision}) + {engine}": held})
    else:
        row["notes"].append("eval.models trains nothing (base only)")
        blocked = None
    return _finish(row, est, seconds, blocked)


def _inference_row(cfg: RunConfig, est: Estimator, eval_sets: dict[str, int]) -> dict[str, Any]:
    """04: two-stage inference with its baselines, every model on every set."""
    judged = {r["benchmark"]: r["judged_pair_orders"] for r in protocols(cfg, eval_sets)}
    per = {source: models_eval_calls(cfg, source) for source in judged}
    models = cfg.eval.models
    gens, tokens, prompt_tokens = (
        sum(n * per[source][k] for source, n in judged.items())
        for k in ("generations", "tokens", "prompt_tokens")
    )
    row = empty_row(
        "04_inference",
        generations=gens,
        generated_tokens_upper_bound=tokens,
        prompt_tokens_upper_bound=prompt_tokens,
    )
    terms, row["memory_how"], blocked = _generation_memory(cfg, est)
    _set_memory(row, {"generation": terms})
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
            per = eval_calls(cfg, source, stage1_model(cfg, model) != model)
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


def plan(
    cfg: RunConfig, gpu: str | None = None, gpu_constants: str | Path | None = None
) -> dict[str, Any]:
    """What a run will do, notebook by notebook, and its estimated cost on GPU class `gpu`
    (default: the class of the gpu_constants file's device, else h100-80gb); computed without
    loading a model or touching the network (module docstring: how)."""
    card = _pick_gpu(gpu, gpu_constants)
    constants, about = plan_constants(card, gpu_constants)
    est = Estimator(cfg, card, constants)
    n_train = set_pairs(cfg.data.train)
    eval_sets = {spec.source: set_pairs(spec) for spec in cfg.data.eval}
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
        return empty_row(nb, notes=["no GPU work (data, tables, figures): not estimated"])
    return empty_row(nb, notes=["not a workbook notebook rmlib knows: not estimated"])


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
            f"{len(assumed)} constants are {ASSUMED}: run benchmarks/gpu_check.py --output "
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
