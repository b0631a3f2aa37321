"""How a run's configuration differs from the paper's, in plain sentences (notebook 05 and the
report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from rmlib import paper, scoring
from rmlib.analysis.common import PAPER_BENCHMARKS, rule_label
from rmlib.data import label_of
from rmlib.run.config import RunConfig


def configuration_differences(cfg: RunConfig, main: pd.DataFrame | None = None) -> list[str]:
    """Plain-language statements of how this run's configuration differs from the paper's
    (backbone, fine-tuning, data, N, subsampling, benchmarks, partial data, orders, prompts).

    `main` (the main table) adds what only the scores know: benchmarks scored on partial data.
    """
    c = paper.CONFIGURATION
    out = _model_differences(cfg, c) + _training_differences(cfg, c)
    out += _inference_differences(cfg, c) + _data_differences(cfg, main)
    has_models = main is not None and "model" in main and len(main)
    evaluated = set(main["model"]) if has_models else set(cfg.eval.models)
    if "rft" not in evaluated:
        out.append("The Pref.-only GRPO baseline (rft) is not evaluated in this run.")
    out.append(
        "Prompt wording: the paper's prompts are not published; this run uses the project's own "
        "templates (rmlib.judge.prompts, fields Context / Responses for Judgment / Critiques for "
        "Judgment, <Analysis>/<Result> tags)."
    )
    if cfg.eval.failure_credit != 0:
        out.append(
            f"Parse failures are credited {cfg.eval.failure_credit:g} here (the paper does not "
            "say how it scores them), except on RM-Bench, whose official rule credits them "
            "nothing."
        )
    return out


def show_differences(cfg: RunConfig, main: pd.DataFrame | None = None) -> Any:
    """`configuration_differences` as a Markdown bullet list, for a notebook."""
    from IPython.display import Markdown

    return Markdown("\n".join(f"- {d}" for d in configuration_differences(cfg, main)))


def _model_differences(cfg: RunConfig, c: dict[str, Any]) -> list[str]:
    out = []
    backbone = cfg.model.backbone
    if "qwen3-4b" not in backbone.lower():
        out.append(
            f"Backbone: {backbone} here, {c['backbone']} in the paper: numbers are not "
            "comparable in size, only in direction."
        )
    if cfg.model.enable_thinking:
        out.append("Thinking mode is on here; the paper runs Qwen3 in non-thinking mode.")
    from rmlib.generation.models import (
        resolve_precision,  # imports torch: only when a report is written
    )

    precision, _ = resolve_precision(cfg.model.precision)
    if precision != "bf16":
        out.append(f"Inference weights in {precision} (the paper: full precision).")
    if cfg.warmup.enabled:
        out.append(
            f"A supervised format warm-up (LoRA SFT on {cfg.warmup.n_examples} well-formed "
            "judgments) comes first and its result is this run's base model; the paper has no "
            "SFT stage (its base is the untrained backbone)."
        )
    return out


def _training_differences(cfg: RunConfig, c: dict[str, Any]) -> list[str]:
    from rmlib.generation.models import (
        resolve_precision,  # imports torch: only when a report is written
    )
    from rmlib.training.grpo_config import batch_plan, per_process

    g = cfg.grpo
    weights, _ = resolve_precision(cfg.model.train_precision)
    method = "QLoRA: LoRA" if weights == "nf4" else "LoRA"
    gpus = cfg.run.gpus
    devices = "one device" if gpus == 1 else f"{gpus} GPUs (data parallel)"
    out = [
        f"Fine-tuning: {method} adapters (r={g.lora_r}, {g.lora_target_modules}) over "
        f"{weights} weights on {devices}; the paper fine-tunes every weight on 16 GPUs."
    ]
    # the step as the trainer makes it on run.gpus processes (keep_step_on_gpus keeps it)
    per_step = batch_plan(per_process(g, gpus), gpus).step_completions
    if per_step != c["batch_size"]:
        out.append(f"GRPO batch: {per_step} completions per step (paper: {c['batch_size']}).")
    if g.max_steps is not None and g.max_steps > 0:
        out.append(f"GRPO stops after {g.max_steps} steps (paper: {c['epochs']} epochs).")
    elif g.num_train_epochs != c["epochs"]:
        out.append(f"GRPO runs {g.num_train_epochs:g} epochs (paper: {c['epochs']}).")
    if g.learning_rate != c["learning_rate"]:
        out.append(f"Learning rate {g.learning_rate:g} (paper: {c['learning_rate']:g}).")
    if g.max_completion_length != c["max_completion_tokens"]:
        out.append(
            f"Completions capped at {g.max_completion_length} tokens in training "
            f"(paper: {c['max_completion_tokens']})."
        )
    if cfg.rollouts.n_samples != c["rollouts_per_pair"]:
        out.append(
            f"Training rollouts: {cfg.rollouts.n_samples} judgments per pair "
            f"(paper: {c['rollouts_per_pair']})."
        )
    if cfg.mix.ratio != c["mix_ratio"]:
        out.append(f"Pref. : Refl. ratio {cfg.mix.ratio} (paper: {c['mix_ratio']}).")
    if cfg.mix.max_pref is not None or cfg.mix.max_refl is not None:
        out.append(
            f"Training items capped (Pref. ≤ {cfg.mix.max_pref}, Refl. ≤ {cfg.mix.max_refl}); "
            f"the paper trains on {c['pref_items']:,} Pref. + {c['refl_items']:,} Refl. items."
        )
    return out


def _inference_differences(cfg: RunConfig, c: dict[str, Any]) -> list[str]:
    inf = cfg.inference
    out = []
    if inf.n_samples != c["n_samples"]:
        out.append(f"N = {inf.n_samples} stage-1 judgments per pair (paper: N = {c['n_samples']}).")
    if inf.temperature != c["temperature"]:
        out.append(f"Stage-1 temperature {inf.temperature:g} (paper: {c['temperature']:g}).")
    if inf.confidence_fraction != c["confidence_fraction"]:
        out.append(
            f"Confidence reads the lowest {100 * inf.confidence_fraction:g} % of tokens "
            f"(paper: {100 * c['confidence_fraction']:g} %)."
        )
    if inf.max_new_tokens < c["max_completion_tokens"]:
        out.append(
            f"Judgments are cut at {inf.max_new_tokens} new tokens (paper: up to "
            f"{c['max_completion_tokens']}); cut-off judgments count as parse failures."
        )
    if not inf.both_orders:
        out.append(
            "One order per pair only: positional consistency (correct in both orders) and flip "
            "rates cannot be measured in this run."
        )
    elif inf.swapped_pairs is None:
        out.append(
            "Positional consistency is measured on this run's evaluation pairs; the paper uses "
            f"{c['consistency_sets']}."
        )
    else:
        out.append(
            f"Positional consistency is measured on a seeded draw of up to {inf.swapped_pairs:,} "
            f"pairs of each benchmark, judged in both orders (the paper: {c['consistency_sets']}); "
            "accuracy is scored on every pair in the given order. The analysis tables pool every "
            "judged (pair, order), so those pairs count twice there."
        )
    return out


def _data_differences(cfg: RunConfig, main: pd.DataFrame | None) -> list[str]:
    out = []
    train = cfg.data.train
    if train.source != paper.CONFIGURATION["training_source"]:
        out.append(
            f"Training pairs come from '{train.source}'"
            + (f" ({train.n} pairs)" if train.n else "")
            + " instead of HelpSteer3-Preference (about 40k pairs)."
        )
    elif train.n:
        out.append(f"Training pairs: {train.n} drawn from HelpSteer3 (the paper: all, ~40k).")
    present = set()
    for spec in cfg.data.eval:
        rule = scoring.scoring_of(spec.source)
        present.add(rule)
        name = label_of(spec.source)
        reported = (*PAPER_BENCHMARKS, *paper.CONSISTENCY_BENCHMARKS)
        if rule not in reported:
            out.append(
                f"'{spec.source}' is not one of the paper's benchmarks (the project's demo data "
                "or another set): there is no paper number to compare it with."
            )
        if spec.n is not None and rule in reported:
            out.append(f"{name}: {spec.n} pairs drawn at random (seeded); the paper uses all.")
        if spec.path and Path(spec.path).exists():  # a local copy, not a hub id
            out.append(f"{name} is read from a local copy ({spec.path}).")
    absent = [rule_label(b) for b in PAPER_BENCHMARKS if b not in present]
    if absent:
        out.append("The paper's benchmarks not in this run: " + ", ".join(absent) + ".")
    if main is not None and len(main):
        part = main[main["partial"].astype(bool)].drop_duplicates("benchmark")
        for bench, missing in zip(part["benchmark"], part["missing"], strict=True):
            out.append(
                f"{label_of(bench)} is scored on partial data (missing: {missing or '?'}); "
                "its score averages only the parts present."
            )
    return out
