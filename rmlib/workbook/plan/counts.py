"""What a run will do, from the params alone: pairs per set, the largest training mix each model
can get, GRPO's steps as TRL batches them, the warm-up's steps, and per pair and order the
generations, tokens and prefills of two-stage inference; per benchmark the pairs of each of the
paper's protocols.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from rmlib.data import find_source
from rmlib.data.settings import DatasetSpec
from rmlib.paper import MIX_COUNTS
from rmlib.run.config import RunConfig
from rmlib.run.models import MIX_VARIANT, stage1_model
from rmlib.training.grpo_config import GRPOSettings, per_process
from rmlib.training.mix import mix_counts

INF = math.inf


@dataclass(frozen=True)
class Scenario:
    """What a count assumes about lengths and pools. The upper bound: every prompt at its budget
    (prompt lengths infinite before the budget), every generation at its cap, no easy pair. The
    expected: measured or assumed mean prompts per source (`rmlib.workbook.plan.lengths`) and the
    plan section's judgment / reflection lengths and easy share, each within its budget or cap."""

    name: str  # "upper" or "expected"
    prompts: dict[str, float] = field(default_factory=dict)  # source -> mean judgment prompt
    judgment: float = INF
    reflection: float = INF
    easy_share: float = 0.0
    gpus: int = 1

    def engines(self, cfg: RunConfig) -> int:
        """Engines that share 02's and 04's generations: one per GPU when the run serves them
        (generation.backend 'served'), else the one in-process engine (or server set) it has."""
        return self.gpus if cfg.generation.backend == "served" else 1

    def prompt(self, cfg: RunConfig, source: str) -> float:
        """A judgment prompt of `source` within prompts.max_prompt_tokens."""
        return min(cfg.prompts.max_prompt_tokens, self.prompts.get(source, INF))

    def judged(self, cap: int) -> float:
        return min(cap, self.judgment)

    def reflected(self, cap: int) -> float:
        return min(cap, self.reflection)

    def refl_prompt(self, cfg: RunConfig, source: str, critique_cap: int) -> float:
        """A reflection prompt of `source`: the pair's prompt and two critiques, within
        prompts.max_reflection_prompt_tokens."""
        pair = self.prompts.get(source, INF)
        return min(cfg.prompts.max_reflection_prompt_tokens, pair + 2 * self.judged(critique_cap))


def upper_scenario(gpus: int = 1) -> Scenario:
    return Scenario("upper", gpus=gpus)


def set_pairs(spec: DatasetSpec) -> int:
    """Pairs of a set: `n`, else the demo's generated size, else the published size (0 unknown)."""
    if spec.n is not None:
        return spec.n
    if spec.source == "demo":
        from rmlib.data.demo import default_size

        return default_size(spec.split or "eval")
    known = find_source(spec.source)
    if known and known.pairs_for is not None:
        return known.pairs_for(dict(spec.options))
    return (known.published_pairs or 0) if known else 0


def mix_items(cfg: RunConfig, model: str, n_train: int, sc: Scenario) -> dict[str, int]:
    """`model`'s training mix with the scenario's easy share dropped from both pools
    (`mix_items_upper_bound` at share 0)."""
    pool = round(n_train * (1 - sc.easy_share))
    return mix_items_upper_bound(cfg, model, n_train, pool)


def mix_items_upper_bound(
    cfg: RunConfig, model: str, n_train: int, pool: int | None = None
) -> dict[str, int]:
    """The largest training mix `model` can get (rmlib.training.mix's rule, `mix_counts`, with
    every training pair non-easy and mixed): Pref. <= the pairs, Refl. = Pref. x r/p, both within
    max_pref / max_refl, or the caps themselves with mix.exact 'caps'; each model trains on its
    MIX_VARIANT of it (rft: the Pref. items; same_volume: Pref. items as many as the mix holds,
    within the pool of non-easy pairs, which max_pref does not cap, as in mix.select_items;
    refl_only: the Refl.)."""
    pool = n_train if pool is None else pool
    pref, refl = mix_counts(cfg.mix, pool, pool)
    variant = MIX_VARIANT.get(model)
    if variant == "pref_only":
        refl = 0
    elif variant == "pref_same_volume":
        pref, refl = min(pref + refl, pool), 0
    elif variant == "refl_only":
        pref = 0
    return {"pref": pref, "refl": refl, "total": pref + refl}


def paper_mix(model: str) -> dict[str, int | None]:
    """The paper's training set of `model`'s MIX_VARIANT (Qwen3-4B, rmlib.paper.MIX_COUNTS):
    Pref. and Refl. items, None where the paper states none."""
    published = MIX_COUNTS.get(MIX_VARIANT.get(model, ""), {})
    return {"pref": published.get("pref"), "refl": published.get("refl")}


def mix_prompt_tokens(cfg: RunConfig, mix: dict[str, int], sc: Scenario | None = None) -> float:
    """A mix's mean prompt: Pref. items a training pair's judgment prompt, Refl. items its
    reflection prompt (two rollout critiques); the upper bound has every item at its budget."""
    sc = sc or upper_scenario()
    source = cfg.data.train.source
    pref = sc.prompt(cfg, source)
    refl = sc.refl_prompt(cfg, source, cfg.rollouts.max_new_tokens)
    if not mix["total"]:
        return float(pref)
    return (mix["pref"] * pref + mix["refl"] * refl) / mix["total"]


def mix_completion_tokens(cfg: RunConfig, mix: dict[str, int], sc: Scenario) -> float:
    """A mix's mean GRPO completion: a judgment for a Pref. item, a reflection for a Refl. one,
    each within grpo.max_completion_length."""
    cap = cfg.grpo.max_completion_length
    if not mix["total"]:
        return float(sc.judged(cap))
    return (mix["pref"] * sc.judged(cap) + mix["refl"] * sc.reflected(cap)) / mix["total"]


def grpo_schedule(g: GRPOSettings, items: int, processes: int = 1) -> dict[str, Any]:
    """Optimizer steps and generations of one GRPO run on `items` prompts on `processes`
    data-parallel processes, as TRL 1.16 and transformers count them (a profile's sizes made
    per process by grpo_config.per_process: the step stays the profile's under
    grpo.keep_step_on_gpus).

    A step takes per_device_train_batch_size x gradient_accumulation_steps completions
    (prompts = that / num_generations); TRL's sampler draws whole generation batches of
    generation_batch_size / num_generations prompts and drops an incomplete last one; each is
    read steps_per_generation times (= generation batch / micro-batch), and transformers makes
    ceil(micro-batches / accumulation) steps of an epoch. grpo.max_steps > 0 replaces the epochs
    (the trainer cycles the data), so it is exact, not a cap.
    """
    g = per_process(g, processes)  # ValueError: the accumulation does not divide
    world = g.per_device_train_batch_size * processes
    completions = world * g.gradient_accumulation_steps
    generation_batch = g.generation_batch_size or completions
    prompts_per_round = generation_batch // g.num_generations
    rounds = items // prompts_per_round if prompts_per_round else 0
    micro_batches = rounds * (generation_batch // world)  # each process's
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


def eval_calls(
    cfg: RunConfig, source: str, stage2_only: bool = False, sc: Scenario | None = None
) -> dict[str, int]:
    """Per pair and order of benchmark `source`, two-stage inference with its baselines:
    generations, generated tokens (upper bound) and prompt tokens prefilled (estimate). The
    random anchor's N-1 reflection calls count only on the benchmarks it runs on
    (inference.random_anchor_sources). `stage2_only`: a judge reflecting on another model's
    stored stage 1 (refl_only) makes its reflection calls only.

    Prefill: the judgment prompt once for the greedy judgment and the N samples; a pair's
    reflection prompts share their instructions, context and both responses (prefix caching on
    vLLM, shared-prefix prefill in our transformers loop), so the first is prefilled whole (at the
    reflection budget) and each other adds its two critiques (each at most
    inference.max_new_tokens), all within the reflection budget.
    """
    sc = sc or upper_scenario()
    inf = cfg.inference
    refl_prompt = sc.refl_prompt(cfg, source, inf.max_new_tokens)
    greedy = 1 if inf.run_greedy and not stage2_only else 0
    samples = 0 if stage2_only else inf.n_samples
    reflections = (inf.n_samples - 1) * (2 if inf.random_anchor_on(source) else 1)
    critiques = min(refl_prompt, 2 * sc.judged(inf.max_new_tokens))
    prefill = 0 if stage2_only else sc.prompt(cfg, source)
    prefill += refl_prompt + (reflections - 1) * critiques if reflections else 0
    return {
        "generations": greedy + samples + reflections,
        "tokens": round(
            (greedy + samples) * sc.judged(inf.max_new_tokens)
            + reflections * sc.reflected(inf.reflection_max_new_tokens)
        ),
        "prompt_tokens": round(prefill),
    }


def eval_context(cfg: RunConfig, source: str, sc: Scenario) -> float:
    """The mean context (prompt + half the output) of `source`'s evaluation generations, by
    generation: what the engine's KV holds per sequence on average."""
    inf = cfg.inference
    judged = sc.judged(inf.max_new_tokens)
    stage1 = (1 if inf.run_greedy else 0) + inf.n_samples
    reflections = (inf.n_samples - 1) * (2 if inf.random_anchor_on(source) else 1)
    refl = sc.refl_prompt(cfg, source, inf.max_new_tokens)
    ctx = stage1 * (sc.prompt(cfg, source) + judged / 2)
    ctx += reflections * (refl + sc.reflected(inf.reflection_max_new_tokens) / 2)
    return ctx / max(stage1 + reflections, 1)


def models_eval_calls(cfg: RunConfig, source: str, sc: Scenario | None = None) -> dict[str, int]:
    """`eval_calls` on `source` summed over the evaluated models (a reflection-only judge: stage
    2 only)."""
    per = [eval_calls(cfg, source, stage1_model(cfg, m) != m, sc) for m in cfg.eval.models]
    return {k: sum(p[k] for p in per) for k in ("generations", "tokens", "prompt_tokens")}


def swapped_pairs(cfg: RunConfig, n: int, source: str | None = None) -> int:
    """Pairs of an n-pair set also judged in the swapped order (inference.both_orders and
    swapped_pairs; a draw of whole groups lands near its count, counted here as exact; every
    pair of a source whose protocol needs both orders)."""
    inf = cfg.inference
    known = find_source(source) if source else None
    if known and known.both_orders:
        return n
    if not inf.both_orders:
        return 0
    return n if inf.swapped_pairs is None else min(n, inf.swapped_pairs)


def protocols(cfg: RunConfig, eval_sets: dict[str, int]) -> list[dict[str, Any]]:
    """Per evaluation set, what each of the paper's protocols judges: accuracy (Table 1) scores
    every pair in the given order; positional consistency (Table 5) the pairs judged in both
    orders, whose given order is the same judgment. Generations count every evaluated model
    (the random anchor's calls on the benchmarks it runs on)."""
    rows = []
    for source, n in eval_sets.items():
        per = models_eval_calls(cfg, source)["generations"]
        swapped = swapped_pairs(cfg, n, source)
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


def detectable_difference(cfg: RunConfig, eval_sets: dict[str, int]) -> dict[str, Any]:
    """The smallest paired accuracy difference between two models the evaluation can detect
    (two-sided test at plan.alpha with plan.power): McNemar's normal approximation, where the
    difference of two models judged on the same n pairs has variance about d / n (d: the
    share of discordant pairs, plan.discordance, assumed). Per benchmark on its accuracy pairs
    (Table 1's protocol); for the mean over benchmarks (the paper's 'average' column) the
    variances add over K benchmarks and the mean divides by K. RM-Bench's nine pairs a prompt
    are counted as independent pairs (they are not quite)."""
    p = cfg.plan
    z = NormalDist().inv_cdf(1 - p.alpha / 2) + NormalDist().inv_cdf(p.power)
    rows = [
        {"benchmark": b, "pairs": n, "points": round(100 * z * math.sqrt(p.discordance / n), 2)}
        for b, n in eval_sets.items()
        if n
    ]
    mean = None
    if rows:
        var = sum(p.discordance / r["pairs"] for r in rows) / len(rows) ** 2
        mean = round(100 * z * math.sqrt(var), 2)
    return {
        "per_benchmark": rows,
        "mean_over_benchmarks": mean,
        "assumes": f"discordance {p.discordance:g} (plan.discordance), alpha {p.alpha:g}, "
        f"power {p.power:g}",
    }
