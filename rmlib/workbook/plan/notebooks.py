"""`plan(cfg, gpu=...)`: one row per notebook (generations, tokens, optimizer steps, peak memory,
hours) and the notes that go with them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from rmlib.config import ConfigError
from rmlib.generation.backends import adapter_mode
from rmlib.generation.registry import BACKENDS
from rmlib.generation.vllm import vllm_dtype
from rmlib.reads import read_text
from rmlib.run.backends import context_tokens
from rmlib.run.config import RunConfig, describe
from rmlib.run.models import stage1_model, trained_models
from rmlib.training.grpo_config import batch_plan, per_process
from rmlib.workbook.plan.constants import (
    ASSUMED,
    CPU_CLASS,
    cpu_card,
    is_cpu_constants,
    plan_constants,
    train_flops_per_param,
)
from rmlib.workbook.plan.counts import (
    Scenario,
    detectable_difference,
    eval_calls,
    eval_context,
    grpo_schedule,
    mix_completion_tokens,
    mix_items,
    mix_items_upper_bound,
    mix_prompt_tokens,
    models_eval_calls,
    paper_mix,
    protocols,
    set_pairs,
    swapped_pairs,
    upper_scenario,
    warmup_steps,
)
from rmlib.workbook.plan.estimate import Estimator
from rmlib.workbook.plan.facts import (
    DEFAULT_GPU,
    GPU_CLASSES,
    REFERENCE_MODEL,
    GPUClass,
    class_of_device,
    gpu_class,
    model_facts,
)
from rmlib.workbook.plan.lengths import read_lengths, source_length


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


def _rollouts_row(cfg: RunConfig, est: Estimator, n_train: int, sc: Scenario) -> dict[str, Any]:
    """02: the optional format warm-up (LoRA SFT), then N rollouts of every training pair; the
    warm-up trainer and the engine hold the card in turn, so the peak is the larger. The
    rollouts spread over the scenario's GPUs (one engine each); the warm-up runs on one."""
    ro, gen = cfg.rollouts, cfg.generation
    prompt = sc.prompt(cfg, cfg.data.train.source)
    each = sc.judged(ro.max_new_tokens)
    tokens = round(n_train * ro.n_samples * each)
    prompt_tokens = round(n_train * prompt)  # a pair's samples share one prefill
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
        precision = est.precision(w.precision)
        row["optimizer_steps"] = warmup_steps(cfg)
        tokens_in = w.batch_size * w.max_length
        phases["warm-up trainer"] = est.trainer(
            precision, w.lora_r, "fp32", tokens_in, w.gradient_checkpointing, True, 0, "warmup_"
        )
        per_step = w.batch_size * w.gradient_accumulation_steps * w.max_length
        sft_flops = 6 if w.gradient_checkpointing else 4  # forward, backward (+ recompute)
        seconds["warmup"] = row["optimizer_steps"] * per_step / est.train_rate(precision, sft_flops)
    phases["generation"], row["memory_how"], blocked = _generation_memory(cfg, est)
    _set_memory(row, phases)
    if BACKENDS[gen.backend].engine == "vllm":
        seconds["engine_start"] = est.c["vllm_engine_start_s"]
    engine_gib, served = _generation_engine(cfg, est)
    engines = sc.engines(cfg)  # each engine generates its share of the pairs at once
    seconds.update(
        est.generation_s(
            prompt_tokens / engines,
            tokens / engines,
            _rate_engine(cfg),
            engine_gib=engine_gib,
            precision=served,
            ctx=prompt + each / 2,
            queued=n_train * ro.n_samples / engines,
        )
    )
    return _finish(row, est, seconds, blocked)


def _rate_engine(cfg: RunConfig) -> str:
    """Whose decode rate the time model takes: the transformers loop's, else vLLM's (a remote
    server's unknown rate is taken as a vLLM engine's on the planned card)."""
    return "hf" if BACKENDS[cfg.generation.backend].engine == "transformers" else "vllm"


def _generation_engine(cfg: RunConfig, est: Estimator) -> tuple[float | None, str]:
    """02/04's vLLM engine: its GiB and the precision it serves."""
    precision = est.precision(cfg.model.precision)
    served = "fp32" if vllm_dtype(precision)[0] == "float32" else "bf16"
    gen = cfg.generation
    return est.engine(gen.gpu_memory_utilization, gen.kv_cache_gib, served)["engine_gib"], served


def _generation_memory(
    cfg: RunConfig, est: Estimator
) -> tuple[list[dict[str, Any]], str, str | None]:
    """02/04's generation backend: (its memory terms, how it is counted, why its engine cannot
    start)."""
    gen = cfg.generation
    precision = est.precision(cfg.model.precision)
    engine = BACKENDS[gen.backend].engine
    if engine == "remote":
        return [], "generation on the servers at generation.endpoints", None
    if engine == "transformers":
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


def _training_row(cfg: RunConfig, est: Estimator, n_train: int, sc: Scenario) -> dict[str, Any]:
    """03: GRPO for every trained model, one after the other (the peak is one model's). On N GPUs
    (data parallel at the same global batch): each rank generates and trains 1/N of a step on
    its own colocated engine; steps and weight syncs stay as many."""
    g = cfg.grpo
    precision = est.precision(cfg.model.train_precision)
    mixes = {m: mix_items(cfg, m, n_train, sc) for m in trained_models(cfg)}
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
    # an nf4 (QLoRA) trainer's engine holds the checkpoint unquantized: bf16 weights on CUDA
    served = "bf16" if precision == "nf4" else precision
    engine_gib = _colocated_gib(cfg, est, served)
    if g.use_vllm:
        max_len = g.vllm_max_model_length or budget + g.max_completion_length
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
    flops, flops_why = train_flops_per_param(g)
    row["train_flops_per_param"] = {"value": flops, "why": flops_why}
    row["notes"].append(
        f"trainer FLOPs a token: {flops} x params ({flops_why}; TRL 1.16's GRPOTrainer)"
    )
    for model, mix in mixes.items():
        prompt = mix_prompt_tokens(cfg, mix, sc)
        completion = mix_completion_tokens(cfg, mix, sc)
        sched = grpo_schedule(g, mix["total"], sc.gpus)
        steps = sched["steps"]
        if sched["items"] and not steps:
            row["notes"].append(
                f"{model}: {mix['total']} mix items cannot fill one generation batch of "
                f"{sched['generation_batch'] // g.num_generations} prompts"
            )
        gen_tokens = round(sched["generations"] * completion)
        # vLLM prefills a prompt once for its group; TRL's transformers path each copy
        prefills = steps * (
            sched["prompts_per_step"] if g.use_vllm else sched["completions_per_step"]
        )
        row["generations"] += sched["generations"]
        row["generated_tokens_upper_bound"] += gen_tokens
        row["prompt_tokens_upper_bound"] += round(prefills * prompt)
        row["optimizer_steps"] += steps
        part = est.generation_s(
            prefills * prompt / sc.gpus,
            gen_tokens / sc.gpus,
            "colocate" if g.use_vllm else "hf",
            engine_gib=engine_gib,
            precision=served,
            ctx=prompt + completion / 2,
            queued=sched["generation_batch"] / sc.gpus,
        )
        trained = steps * sched["completions_per_step"] * (prompt + completion)
        part["train"] = trained / sc.gpus / est.train_rate(precision, flops)
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


def _colocated_gib(cfg: RunConfig, est: Estimator, served: str) -> float | None:
    """GRPO's colocated engine: its share of the card, or on a CPU weights + its KV + reserve
    (grpo.vllm_cpu_kv_cache_gib)."""
    g = cfg.grpo
    if est.gpu.name == CPU_CLASS:
        weights = est.weights(served)
        kv = g.vllm_cpu_kv_cache_gib
        return None if weights is None else weights + kv + est.c["vllm_reserve_gib"]
    return g.vllm_gpu_memory_utilization * est.gpu.memory_gib


def _inference_row(
    cfg: RunConfig, est: Estimator, eval_sets: dict[str, int], sc: Scenario
) -> dict[str, Any]:
    """04: two-stage inference with its baselines, every model on every set; the pairs spread
    over the scenario's GPUs (one engine each)."""
    judged = {r["benchmark"]: r["judged_pair_orders"] for r in protocols(cfg, eval_sets)}
    per = {source: models_eval_calls(cfg, source, sc) for source in judged}
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
    engine = _rate_engine(cfg)
    engine_gib, served = _generation_engine(cfg, est)
    ctx = sum(
        n * per[s]["generations"] * eval_context(cfg, s, sc) for s, n in judged.items()
    ) / max(gens, 1)
    engines = sc.engines(cfg)
    seconds = est.generation_s(
        prompt_tokens / engines,
        tokens / engines,
        engine,
        engine_gib=engine_gib,
        precision=served,
        ctx=ctx,
        queued=max(gens, 1) / engines,
    )
    if BACKENDS[cfg.generation.backend].engine == "vllm":
        # adapters by LoRARequest share the base model's engine: one start; merged, each model
        # starts its own ('auto' resolved for the card planned for)
        mode = adapter_mode(cfg.generation, on_cuda=est.gpu.name != CPU_CLASS)
        engines = len(models) if mode == "merged" else 1
        seconds["engine_start"] = engines * est.c["vllm_engine_start_s"]
    return _finish(row, est, seconds, blocked)


def _legacy_counts(cfg: RunConfig, n_train: int, eval_sets: dict[str, int]) -> dict[str, Any]:
    """The dry run's original keys: generations by step, their sum, the token upper bound."""
    ro = cfg.rollouts
    gens = {"rollouts": n_train * ro.n_samples}
    tokens = {"rollouts": gens["rollouts"] * ro.max_new_tokens}
    for source, n in eval_sets.items():
        judged = n + swapped_pairs(cfg, n, source)
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


GPU_COUNTS = (1, 2, 4, 8)  # the node sizes the dry run plans for (--gpu-count)


def expected_scenario(cfg: RunConfig, measured: dict[str, Any], gpus: int) -> Scenario:
    """The expected lengths: each source's mean judgment prompt (a lengths file's, else the
    built-in figure), the plan section's judgment / reflection lengths and easy share."""
    sources = [cfg.data.train.source, *(spec.source for spec in cfg.data.eval)]
    return Scenario(
        "expected",
        prompts={s: source_length(s, measured).prompt_tokens for s in sources},
        judgment=cfg.plan.judgment_tokens,
        reflection=cfg.plan.reflection_tokens,
        easy_share=cfg.plan.easy_share,
        gpus=gpus,
    )


def plan(
    cfg: RunConfig,
    gpu: str | None = None,
    gpu_constants: str | Path | None = None,
    gpu_count: int | None = None,
    lengths: str | Path | None = None,
) -> dict[str, Any]:
    """What a run will do, notebook by notebook, and its estimated cost on GPU class `gpu`
    (default: the class of the gpu_constants file's device, else the profile's run.gpu_class,
    else h100-80gb; a CPU constants
    file of benchmarks/calibrate_cpu.py plans for that CPU) with `gpu_count` GPUs (default
    run.gpus): the upper bound and the expected figures (`lengths`: a lengths file, default
    plan.lengths); computed without loading a model or touching the network (module
    docstring: how)."""
    card, auto = _pick_gpu(gpu, gpu_constants, cfg.run.gpu_class)
    constants, about = plan_constants(card, gpu_constants)
    est = Estimator(cfg, card, constants, auto)
    gpus = gpu_count or cfg.run.gpus
    try:
        batch_plan(per_process(cfg.grpo, gpus), gpus)
    except ValueError as e:
        raise ConfigError(f"{cfg.source}: 'grpo' on {gpus} GPUs: {e}") from None
    measured = read_lengths(lengths or cfg.plan.lengths)
    n_train = set_pairs(cfg.data.train)
    eval_sets = {spec.source: set_pairs(spec) for spec in cfg.data.eval}
    expected = expected_scenario(cfg, measured, gpus)
    rows = _rows(cfg, est, n_train, eval_sets, upper_scenario(gpus))
    for row, exp in zip(rows, _rows(cfg, est, n_train, eval_sets, expected), strict=True):
        _merge_expected(row, exp)
    peaks = [r["peak_gpu_gib"] for r in rows if r["peak_gpu_gib"] is not None]
    return {
        "run": cfg.run.name,
        "notebooks": cfg.run.notebooks,
        "backbone": cfg.model.backbone,
        "gpu_count": gpus,
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
        "hours_expected": round(sum(r["hours_expected"] or 0 for r in rows), 3),
        "scaling": _scaling(cfg, est, n_train, eval_sets, expected),
        "lengths": _lengths_used(cfg, expected, measured),
        "detectable_difference": detectable_difference(cfg, eval_sets)
        if "04_inference" in cfg.run.notebooks
        else None,
        "model": est.facts.to_dict()
        if est.facts
        else {"backbone": cfg.model.backbone, "facts": "unknown"},
        "gpu": {
            "class": card.name,
            "cards": card.cards,
            "memory_gib": card.memory_gib,
            "constants": {k: v.to_dict() for k, v in constants.items()},
            "measured": about if card.name != CPU_CLASS else None,
        },
        "notes": _notes(cfg, est, about, gpus),
    }


def _rows(
    cfg: RunConfig, est: Estimator, n_train: int, eval_sets: dict[str, int], sc: Scenario
) -> list[dict[str, Any]]:
    return [_notebook_row(nb, cfg, est, n_train, eval_sets, sc) for nb in cfg.run.notebooks]


_EXPECTED_KEYS = {  # the expected row's key -> the upper-bound row's key it sits beside
    "generations_expected": "generations",
    "generated_tokens_expected": "generated_tokens_upper_bound",
    "prompt_tokens_expected": "prompt_tokens_upper_bound",
    "optimizer_steps_expected": "optimizer_steps",
    "hours_expected": "hours",
    "seconds_expected": "seconds",
}


def _merge_expected(row: dict[str, Any], exp: dict[str, Any]) -> None:
    for key, source in _EXPECTED_KEYS.items():
        row[key] = exp.get(source)
    for part, part_exp in zip(row["parts"], exp["parts"], strict=True):
        part["hours_expected"] = part_exp["hours"]
        part["mix_items_expected"] = part_exp["mix_items_upper_bound"]


def _scaling(
    cfg: RunConfig, est: Estimator, n_train: int, eval_sets: dict[str, int], sc: Scenario
) -> list[dict[str, Any]]:
    """Total hours on 1, 2, 4 and 8 GPUs, expected and upper bound: the gain of a node."""
    out = []
    for n in GPU_COUNTS:
        try:
            batch_plan(per_process(cfg.grpo, n), n)
        except ValueError:  # this batch cannot be split over n processes
            out.append({"gpus": n, "hours_expected": None, "hours_upper": None})
            continue
        hours = {}
        for scenario in (upper_scenario(n), dataclasses.replace(sc, gpus=n)):
            rows = _rows(cfg, est, n_train, eval_sets, scenario)
            hours[scenario.name] = round(sum(r["hours"] or 0 for r in rows), 2)
        out.append({"gpus": n, "hours_expected": hours["expected"], "hours_upper": hours["upper"]})
    return out


def _lengths_used(cfg: RunConfig, sc: Scenario, measured: dict[str, Any]) -> list[dict[str, Any]]:
    """The expected scenario's mean judgment prompt per source, and where each comes from."""
    out = []
    for source in sc.prompts:
        length = source_length(source, measured)
        out.append(
            {
                "source": source,
                "prompt_tokens": length.prompt_tokens,
                "within_budget": sc.prompt(cfg, source),
                "from": length.source,
                "basis": length.basis,
            }
        )
    return out


def _pick_gpu(
    gpu: str | None, gpu_constants: str | Path | None, profile_class: str | None = None
) -> tuple[GPUClass, str]:
    """The card planned for and what 'auto' precision means on it."""
    if is_cpu_constants(gpu_constants):
        assert gpu_constants is not None
        if gpu is not None:  # the file's CPU would be planned for, the card ignored
            raise ValueError(
                f"--gpu {gpu} and {gpu_constants} (a CPU constants file of "
                "benchmarks/calibrate_cpu.py) name two machines: drop --gpu to plan this CPU, or "
                "give a gpu_check file to plan the card"
            )
        card, _, about = cpu_card(gpu_constants)
        return card, about.get("precision") or "fp32"
    if gpu is not None:
        return gpu_class(gpu), "bf16"
    if gpu_constants is not None:
        try:
            device = json.loads(read_text(gpu_constants, "constants file")).get("device", "")
        except (OSError, ValueError, AttributeError):
            device = ""
        found = class_of_device(str(device))
        if found:
            return GPU_CLASSES[found], "bf16"
    return gpu_class(profile_class or DEFAULT_GPU), "bf16"


def _notebook_row(
    nb: str,
    cfg: RunConfig,
    est: Estimator,
    n_train: int,
    eval_sets: dict[str, int],
    sc: Scenario,
) -> dict[str, Any]:
    if nb == "02_rollouts":
        row = _rollouts_row(cfg, est, n_train, sc)
    elif nb == "03_training":
        row = _training_row(cfg, est, n_train, sc)
    elif nb == "04_inference":
        row = _inference_row(cfg, est, eval_sets, sc)
    elif nb in ("01_data", "05_results", "06_analysis_quality", "07_position_bias"):
        return empty_row(nb, notes=["no GPU work (data, tables, figures): not estimated"])
    else:
        return empty_row(nb, notes=["not a workbook notebook rmlib knows: not estimated"])
    # kernel start, imports, tables: outside the model work the rest counts
    overhead = est.c["notebook_overhead_s"]
    row["seconds"]["notebook"] = overhead
    row["hours"] = round(row["hours"] + overhead / 3600, 3)
    return row


def _notes(cfg: RunConfig, est: Estimator, about: dict | None, gpus: int) -> list[str]:
    notes = [
        "upper bounds (≤): every generation at its cap, every training pair in the mix, every "
        "prompt at its budget (prompts.max_prompt_tokens "
        f"{cfg.prompts.max_prompt_tokens:,}, a reflection prompt "
        f"prompts.max_reflection_prompt_tokens {cfg.prompts.max_reflection_prompt_tokens:,}); "
        "prompt tokens are prefills, once for a prompt's samples, a pair's later reflection "
        "prompts adding their two critiques; evaluation pairs from n or the published sizes",
        "expected (exp.): each source's mean judgment prompt (the table above), judgments of "
        f"plan.judgment_tokens {cfg.plan.judgment_tokens:,}, reflections of "
        f"plan.reflection_tokens {cfg.plan.reflection_tokens:,} (each within its cap) and "
        f"plan.easy_share {cfg.plan.easy_share:g} of the training pairs dropped as easy; "
        "decode rates from each engine's batch and context (bandwidth- or compute-bound)",
        f"memory and hours are estimates for the {est.gpu.name} class ({est.gpu.cards}); memory "
        "at the budgets (the upper bound)",
    ]
    if cfg.generation.backend != "served":
        notes.append(
            f"02 and 04 generate on one engine (generation.backend {cfg.generation.backend}) "
            f"however many GPUs: only GRPO uses {gpus if gpus > 1 else 'N'} of them; "
            "generation.backend: served spreads rollouts and evaluation over one vLLM server "
            "a GPU (rmlib serve)"
        )
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
