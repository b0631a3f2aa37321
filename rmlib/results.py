"""The run's result tables: accuracy, paired comparisons, analysis quality, position bias.

Pure functions over the tables a run folder holds (`pairs_eval`, and per evaluated model
`rollouts_<m>`, `reflections_<m>`, `predictions_<m>`; see `rmlib.pipeline`). Each builder also
writes what it computed, JSON-ready, to a section of `metrics.json` (named in its docstring), and
the main table to `tables/results_main.parquet`, so the report and a sweep read them back without
recomputing.

Two kinds of accuracy appear, and the tables say which:
- the **official score** of each benchmark (`rmlib.metrics.score_predictions`: RewardBench's
  weighted sections, RM-Bench's 3x3 matrix, ...) on the benchmark's given order, as in the
  paper's main table (`main_table`, `paired_table`, `headline`);
- **plain accuracy over every judged (pair, order)** for the analysis tables (methods, accuracy
  vs N, length bins): simpler, comparable across methods and models, pooled over both orders.

Parse failures score `cfg.eval.failure_credit` (default 0) everywhere, and are counted beside each
number. Intervals are percentile bootstrap 95 % intervals with `cfg.eval.n_bootstrap` resamples
and seed `cfg.run.seed`; analysis intervals resample whole pairs (both orders and all samples of a
pair stay together), except the calibration bins, which use a Wilson interval (see
`analysis_quality_tables`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmlib import metrics, paper
from rmlib.config import RunConfig
from rmlib.data.pair import Pair
from rmlib.pipeline import (
    MODELS,
    all_predictions,
    evaluated_models,
    headline_model,
    read_pairs,
    stage1_model,
)
from rmlib.reflect import METHODS, analysis_quality, calibration_table, majority_at_k
from rmlib.run_folder import RunFolder

PAPER_BENCHMARKS: tuple[str, ...] = ("rewardbench", "rmbench", "rmb", "ppe")
MAIN_COLUMNS: list[str] = [
    "model",
    "method",
    "system",
    "benchmark",
    "scoring",
    "score",
    "ci_low",
    "ci_high",
    "n",
    "n_rows",
    "n_parse_failures",
    "parse_failure_rate",
    "partial",
    "missing",
    "paper",
]
PART_KINDS: tuple[str, ...] = (
    "sections",
    "subsets",
    "domains",
    "levels",
    "components",
    "categories",
)
# What a wide interval means for the report and the notebooks: any 95 % interval wider than this
# (in accuracy, 0.2 = 20 points) gets an honest note that the sample is too small to rank methods.
WIDE_INTERVAL = 0.20


# ---- shared helpers ----------------------------------------------------------------------------


def models_of(cfg: RunConfig, run: RunFolder) -> list[str]:
    """Evaluated models in the paper's order (base, rft, unified)."""
    done = set(evaluated_models(cfg, run))
    return [m for m in MODELS if m in done]


def methods_in(df: pd.DataFrame) -> list[str]:
    """The methods present in a table, in the order of `rmlib.reflect.METHODS`."""
    present = set(df["method"])
    return [m for m in METHODS if m in present] + sorted(present - set(METHODS))


def pairs_by_source(run: RunFolder) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for p in read_pairs(run, "pairs_eval"):
        out.setdefault(p.source, []).append(p)
    return out


def pooled_rate(
    values: Sequence[float] | np.ndarray,
    groups: Sequence[Any],
    *,
    n_boot: int,
    seed: int,
) -> tuple[float, float, float]:
    """Pooled mean of `values` with a bootstrap interval that resamples whole groups (pairs).

    Rows of one pair (both orders, N samples) are not independent: resampling pairs keeps them
    together. Returns (estimate, low, high); NaN for no rows.
    """
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    codes, uniq = pd.factorize(pd.Series(list(groups), dtype=object))
    sums = np.bincount(codes, weights=v, minlength=len(uniq))
    counts = np.bincount(codes, minlength=len(uniq)).astype(float)

    def scorer(idx: np.ndarray) -> float:
        c = counts[idx].sum()
        return float(sums[idx].sum() / c) if c else math.nan

    ci = metrics.bootstrap_ci(scorer, n_units=len(uniq), n_boot=n_boot, seed=seed)
    return float(ci.estimate), float(ci.low), float(ci.high)


def wilson(k: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95 % interval of a proportion k/n (NaN for n = 0)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def credited(df: pd.DataFrame, credit: float) -> np.ndarray:
    """Per prediction row: 1 right, 0 wrong, `credit` for a parse failure (verdict null)."""
    failed = df["verdict"].isna().to_numpy()
    return np.where(failed, credit, df["correct"].astype(bool).to_numpy(dtype=float))


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows (numpy scalars as Python numbers, NaN and NA as None)."""
    return [{str(k): _json(v) for k, v in r.items()} for r in df.to_dict("records")]


def _json(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _ci_bounds(ci: Any) -> tuple[float, float]:
    if not ci or ci[0] is None or ci[1] is None:
        return math.nan, math.nan
    return float(ci[0]), float(ci[1])


# ---- accuracy per benchmark: the main table --------------------------------------------------


def score_all(cfg: RunConfig, run: RunFolder) -> dict[str, dict[str, dict[str, Any]]]:
    """Official scores of every evaluated model and method on every evaluation set.

    {model: {benchmark (source name): score_predictions(...)}}; written to metrics.json
    section `scores`.
    """
    preds = all_predictions(cfg, run)
    pairs = pairs_by_source(run)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for model in models_of(cfg, run):
        mine = preds[preds["model"] == model].drop(columns=["model"])
        for source, df in mine.groupby("source", sort=False):
            out.setdefault(model, {})[str(source)] = metrics.score_predictions(
                df.reset_index(drop=True),
                str(source),
                pairs.get(str(source)),
                failure_credit=cfg.eval.failure_credit,
                n_boot=cfg.eval.n_bootstrap,
                seed=cfg.run.seed,
            )
    run.update_metrics("scores", out)
    return out


def main_table(
    cfg: RunConfig, run: RunFolder, scores: dict[str, Any] | None = None
) -> pd.DataFrame:
    """Per evaluated model x method x benchmark: official score, 95 % interval, n, parse
    failures, and the paper's number where benchmark and system match.

    One row each (columns MAIN_COLUMNS; scores and `paper` as fractions in [0, 1]). `system` is
    the paper's name of the (model, method) when the paper reports it. `partial`/`missing` say
    when part of a benchmark is absent (e.g. RM-Bench without math). Writes the table to
    tables/results_main.parquet and metrics.json section `results`.
    """
    scores = scores if scores is not None else score_all(cfg, run)
    rows = []
    for model, by_bench in scores.items():
        for bench, result in by_bench.items():
            scoring = result["scoring"]
            for method in [m for m in METHODS if m in result["methods"]]:
                rows.append(_main_row(model, method, bench, scoring, result["methods"][method]))
    table = pd.DataFrame(rows, columns=MAIN_COLUMNS)
    run.write_table("results_main", table)
    run.update_metrics(
        "results",
        {
            "main": records(table),
            "failure_credit": cfg.eval.failure_credit,
            "n_bootstrap": cfg.eval.n_bootstrap,
            "configuration_differences": configuration_differences(cfg, table),
        },
    )
    return table


def _main_row(model: str, method: str, bench: str, scoring: str, res: dict) -> dict[str, Any]:
    low, high = _ci_bounds(res.get("ci"))
    missing = [
        str(x)
        for key in (
            "missing_subsets",
            "missing_domains",
            "missing_components",
            "missing_categories",
        )
        for x in res.get(key, []) or []
    ]
    paper_value = paper.paper_accuracy(model, method, scoring)
    return {
        "model": model,
        "method": method,
        "system": paper.SYSTEMS.get((model, method), ""),
        "benchmark": bench,
        "scoring": scoring,
        "score": res.get("score"),
        "ci_low": low,
        "ci_high": high,
        "n": res.get("n"),
        "n_rows": res.get("n_rows"),
        "n_parse_failures": res.get("n_parse_failures"),
        "parse_failure_rate": res.get("parse_failure_rate"),
        "partial": bool(res.get("partial", False)),
        "missing": ", ".join(missing),
        "paper": paper_value / 100 if paper_value is not None else math.nan,
    }


def benchmark_label(bench: str) -> str:
    """Display name: the paper's spelling for its benchmarks, else the source name."""
    return paper.BENCHMARK_NAMES.get(metrics.scoring_of(bench), bench)


def unit_suffix(bench: str) -> str:
    """' prompts' / ' items' where a benchmark's official n counts something other than pairs."""
    return {"rmbench": " prompts", "rmb": " items"}.get(metrics.scoring_of(bench), "")


def fmt_ci(score: Any, low: Any, high: Any, digits: int = 1) -> str:
    """'62.5 [50.0, 75.0]' in percent; '–' when there is no score."""
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return "–"
    s = f"{100 * score:.{digits}f}"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return s
    return f"{s} [{100 * low:.{digits}f}, {100 * high:.{digits}f}]"


def paper_layout(main: pd.DataFrame) -> pd.DataFrame:
    """The main table laid out like the paper's: one row per system (model · method), per
    benchmark our score [95 % interval] and, where the paper reports that system on that
    benchmark, its number beside it (percent). An `avg` column appears only when the run has all
    four of the paper's accuracy benchmarks (otherwise no average is comparable)."""
    if main.empty:
        return pd.DataFrame()
    benches = list(dict.fromkeys(main["benchmark"]))
    index = list(dict.fromkeys(zip(main["model"], main["method"], strict=True)))
    out = pd.DataFrame(index=pd.Index([f"{m} · {k}" for m, k in index], name="model · method"))
    out["paper's system"] = [paper.SYSTEMS.get(i, "") for i in index]
    for b in benches:
        rows = main[main["benchmark"] == b].set_index(["model", "method"])
        n = int(rows["n"].max())
        head = f"{benchmark_label(b)} (n={n}{unit_suffix(b)})"
        out[f"{head} ours"] = [
            fmt_ci(*rows.loc[i, ["score", "ci_low", "ci_high"]]) if i in rows.index else "–"
            for i in index
        ]
        paper_vals = [rows.loc[i, "paper"] if i in rows.index else math.nan for i in index]
        if any(not math.isnan(v) for v in paper_vals):
            out[f"{head} paper"] = ["" if math.isnan(v) else f"{100 * v:.1f}" for v in paper_vals]
    scorings = set(main["scoring"])
    if all(s in scorings for s in PAPER_BENCHMARKS):
        sub = main[main["scoring"].isin(PAPER_BENCHMARKS)]
        avg = sub.groupby(["model", "method"])["score"].mean()
        out["avg ours"] = [f"{100 * avg[i]:.1f}" if i in avg.index else "–" for i in index]
        out["avg paper"] = [
            f"{paper.MAIN_TABLE[i]['avg']:.1f}" if i in paper.MAIN_TABLE else "" for i in index
        ]
    return out


def data_volume_table(cfg: RunConfig, run: RunFolder, main: pd.DataFrame) -> pd.DataFrame:
    """The paper's same-data-volume ablation: each of rft, same_volume and unified judged greedy,
    with its training items (mix_counts), its score [95 % interval] on every benchmark of the
    run, the mean of RewardBench and RMB where both were scored (the paper's measure), and the
    paper's mean beside it. Empty when fewer than two of the three were evaluated."""
    greedy = main[(main["method"] == "greedy") & main["model"].isin(paper.DATA_VOLUME_MODELS)]
    models = [m for m in MODELS if m in set(greedy["model"])]
    if len(models) < 2:
        return pd.DataFrame()
    mixes = run.read_table("mix_counts").set_index("model") if run.has_table("mix_counts") else None
    published = {r["training_set"]: r for r in paper.DATA_VOLUME_ABLATION}
    rows = []
    for model in models:
        g = greedy[greedy["model"] == model].set_index("benchmark")
        name = paper.DATA_VOLUME_MODELS[model]
        row: dict[str, Any] = {"model": model, "paper's set": name}
        if mixes is not None and model in mixes.index:
            row["Pref. items"] = int(mixes.loc[model, "Pref."])
            row["Refl. items"] = int(mixes.loc[model, "Refl."])
        for bench, r in g.iterrows():
            row[benchmark_label(str(bench))] = fmt_ci(r["score"], r["ci_low"], r["ci_high"])
        by_rule = g.set_index("scoring")["score"]
        if {"rewardbench", "rmb"} <= set(by_rule.index):
            row["RewardBench+RMB avg ours"] = f"{100 * by_rule[['rewardbench', 'rmb']].mean():.1f}"
        row["RewardBench+RMB avg paper"] = f"{published[name]['avg_rewardbench_rmb']:.1f}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("model")


def subset_table(
    cfg: RunConfig, run: RunFolder, scores: dict[str, Any] | None = None
) -> pd.DataFrame:
    """Per model x method x benchmark, every part the official score is made of (subsets,
    sections, RM-Bench domains and hard/normal/easy levels, RMB components, JudgeBench
    categories): score, 95 % interval, n, parse failures.

    Reads metrics.json section `scores` (written by `main_table`) when present.
    """
    scores = scores if scores is not None else run.metrics().get("scores")
    if scores is None:
        scores = score_all(cfg, run)
    rows = []
    for model, by_bench in scores.items():
        for bench, result in by_bench.items():
            for method, res in result["methods"].items():
                for kind, name, part, n in _parts(res):
                    low, high = _ci_bounds(part.get("ci"))
                    rows.append(
                        {
                            "model": model,
                            "method": method,
                            "benchmark": bench,
                            "kind": kind,
                            "part": name,
                            "score": part.get("score"),
                            "ci_low": low,
                            "ci_high": high,
                            "n": n,
                            "n_parse_failures": part.get("n_parse_failures"),
                        }
                    )
    cols = ["model", "method", "benchmark", "kind", "part", "score", "ci_low", "ci_high", "n"]
    return pd.DataFrame(rows, columns=[*cols, "n_parse_failures"])


def _parts(res: dict[str, Any]):
    """(kind, name, part dict, n) of every scored part; a level counts all the prompts above it."""
    for kind in PART_KINDS:
        for name, part in (res.get(kind) or {}).items():
            if isinstance(part, dict) and "score" in part:
                yield kind, str(name), part, part.get("n", res.get("n"))
                if kind == "domains":  # RM-Bench: each domain's hard/normal/easy
                    for lvl in ("hard", "normal", "easy"):
                        if isinstance(part.get(lvl), dict):
                            yield "domain_levels", f"{name}/{lvl}", part[lvl], part.get("n")


# ---- what differs from the paper ---------------------------------------------------------------


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
        "templates (rmlib.prompts, fields Context / Responses for Judgment / Critiques for "
        "Judgment, <Analysis>/<Result> tags)."
    )
    if cfg.eval.failure_credit != 0:
        out.append(
            f"Parse failures are credited {cfg.eval.failure_credit:g} here (the paper does not "
            "say how it scores them)."
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
    from rmlib.models import resolve_precision  # imports torch: only when a report is written

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
    g = cfg.grpo
    out = [
        f"Fine-tuning: QLoRA-style LoRA adapters (r={g.lora_r}, {g.lora_target_modules}) over "
        f"{cfg.model.train_precision} weights on one device; the paper fine-tunes every weight "
        "on 16 GPUs."
    ]
    per_step = g.per_device_train_batch_size * g.gradient_accumulation_steps
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
        rule = metrics.scoring_of(spec.source)
        present.add(rule)
        name = benchmark_label(spec.source)
        if rule not in (*PAPER_BENCHMARKS, "judgebench"):
            out.append(
                f"'{spec.source}' is not one of the paper's benchmarks (the project's demo data "
                "or another set): there is no paper number to compare it with."
            )
        if spec.n is not None and rule in (*PAPER_BENCHMARKS, "judgebench"):
            out.append(f"{name}: {spec.n} pairs drawn at random (seeded); the paper uses all.")
        if spec.path and Path(spec.path).exists():  # a local copy, not a hub id
            out.append(f"{name} is read from a local copy ({spec.path}).")
    absent = [paper.BENCHMARK_NAMES[b] for b in PAPER_BENCHMARKS if b not in present]
    if absent:
        out.append("The paper's benchmarks not in this run: " + ", ".join(absent) + ".")
    if main is not None and len(main):
        part = main[main["partial"].astype(bool)].drop_duplicates("benchmark")
        for bench, missing in zip(part["benchmark"], part["missing"], strict=True):
            out.append(
                f"{benchmark_label(bench)} is scored on partial data (missing: {missing or '?'}); "
                "its score averages only the parts present."
            )
    return out


# ---- paired comparisons ------------------------------------------------------------------------

CROSS_MODEL: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
    (("unified", "reflectrm"), ("base", "greedy")),
    (("unified", "greedy"), ("base", "greedy")),
    (("unified", "greedy"), ("rft", "greedy")),
    (("rft", "greedy"), ("base", "greedy")),
    # the data-volume ablation: Refl. items against as many more Pref. items
    (("unified", "greedy"), ("same_volume", "greedy")),
    # Figure 4: the unified judge's own stage 2 against a separate reflection-only judge's, on
    # the same stage-1 judgments
    (("unified", "reflectrm"), ("refl_only", "reflectrm")),
)


def paired_table(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """ReflectRM against each baseline on the same pairs (paired bootstrap of the official score
    difference, exact McNemar test on per-pair correctness), within each model, and the paper's
    cross-model steps (unified vs base, unified vs rft, ...) where both models were evaluated.

    Columns: a, b (model · method), benchmark, score_a, score_b, difference, ci_low, ci_high,
    n_units, a_right_b_wrong, a_wrong_b_right, p_value. Writes metrics.json section `paired`.
    """
    preds = all_predictions(cfg, run)
    pairs = pairs_by_source(run)
    rows = []
    for source, df in preds.groupby("source", sort=False):
        for a, b in _comparisons(df):
            pa = _select(df, *a)
            pb = _select(df, *b)
            res = metrics.paired_comparison(
                pa,
                pb,
                benchmark=str(source),
                pairs=pairs.get(str(source)),
                failure_credit=cfg.eval.failure_credit,
                n_boot=cfg.eval.n_bootstrap,
                seed=cfg.run.seed,
            )
            low, high = _ci_bounds(res["ci"])
            rows.append(
                {
                    "a": f"{a[0]} · {a[1]}",
                    "b": f"{b[0]} · {b[1]}",
                    "benchmark": str(source),
                    "score_a": res["a"],
                    "score_b": res["b"],
                    "difference": res["difference"],
                    "ci_low": low,
                    "ci_high": high,
                    "n_units": res["n_units"],
                    "a_right_b_wrong": res["mcnemar"]["a_right_b_wrong"],
                    "a_wrong_b_right": res["mcnemar"]["a_wrong_b_right"],
                    "p_value": res["mcnemar"]["p_value"],
                }
            )
    table = pd.DataFrame(rows)
    run.update_metrics("paired", {"comparisons": records(table)})
    return table


def _select(df: pd.DataFrame, model: str, method: str) -> pd.DataFrame:
    sel = df[(df["model"] == model) & (df["method"] == method)]
    return sel.drop(columns=["model", "method"]).reset_index(drop=True)


def _comparisons(df: pd.DataFrame) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    have = set(zip(df["model"], df["method"], strict=True))
    out = []
    for model in [m for m in MODELS if (m, "reflectrm") in have]:
        for method in METHODS:
            if method != "reflectrm" and (model, method) in have:
                out.append(((model, "reflectrm"), (model, method)))
    out += [(a, b) for a, b in CROSS_MODEL if a in have and b in have]
    return out


# ---- analysis quality --------------------------------------------------------------------------


def analysis_quality_tables(
    cfg: RunConfig, run: RunFolder, n_bins: int = 5
) -> dict[str, pd.DataFrame]:
    """How analysis quality drives accuracy (method.md §6), per evaluated model.

    - `summary`: rollout, reflection, winner, anchor and final accuracy (rmlib.reflect
      .analysis_quality) with counts;
    - `calibration`: parsed stage-1 judgments in `n_bins` confidence quantile bins: mean
      confidence, accuracy, n, and a Wilson 95 % interval (samples treated as independent: the
      bins cut across pairs, so there is no pair-level resampling here);
    - `reflection`: how often a stage-2 call prefers the correct critique where exactly one of
      the two is correct, overall and split by whether the anchor was right (keeping it is
      correct) or wrong (overruling it is correct), for the real and the random anchor;
    - `methods`: plain accuracy (all orders pooled) of one sampled judgment, greedy, majority,
      anchor, random anchor, random winners, the winners' own verdicts, and ReflectRM;
    - `accuracy_vs_n`: majority of the first k samples for k in cfg.eval.n_grid (capped at the
      samples each pair has, N added), beside ReflectRM at N. Only majority@k can be computed
      after the fact from stored rollouts; ReflectRM at smaller N would need new stage-2 calls.

    A model that reflects on another's stage-1 judgments (the reflection-only judge,
    `pipeline.stage1_model`) has rows only where stage 2 is its own: its summary (with
    `stage1` naming whose judgments), reflection, and the stage-2 methods; its calibration,
    one-sample and majority rows would repeat the stage-1 model's.

    Writes metrics.json section `analysis_quality`.
    """
    parts: dict[str, list[pd.DataFrame]] = {
        k: [] for k in ("summary", "calibration", "reflection", "methods", "accuracy_vs_n")
    }
    for model in models_of(cfg, run):
        t = {n: run.read_table(f"{n}_{model}") for n in ("rollouts", "reflections", "predictions")}
        own = stage1_model(cfg, model) == model
        parts["summary"].append(_summary(model, t).assign(stage1=stage1_model(cfg, model)))
        if own:
            parts["calibration"].append(_calibration(model, t["rollouts"], n_bins))
        parts["reflection"].append(_reflection(model, t["reflections"], cfg))
        parts["methods"].append(_methods(model, t, cfg, own_stage1=own))
        parts["accuracy_vs_n"].append(_accuracy_vs_n(model, t, cfg, own_stage1=own))
    tables = {k: _concat(v) for k, v in parts.items()}
    run.update_metrics("analysis_quality", {k: records(v) for k, v in tables.items()})
    return tables


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _summary(model: str, t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    aq = analysis_quality(t["rollouts"], t["reflections"], t["predictions"])
    aq.pop("calibration")
    return pd.DataFrame([{"model": model, **aq}])


def _calibration(model: str, rollouts: pd.DataFrame, n_bins: int) -> pd.DataFrame:
    cal = calibration_table(rollouts[rollouts["choice"].notna()], n_bins)
    if cal.empty:
        return cal
    cal = cal.copy()
    bounds = [wilson(a * n, int(n)) for a, n in zip(cal["accuracy"], cal["n"], strict=True)]
    cal["ci_low"] = [b[0] for b in bounds]
    cal["ci_high"] = [b[1] for b in bounds]
    cal.insert(0, "model", model)
    return cal


REFLECTION_CASES: tuple[str, ...] = ("all informative", "anchor wrong", "anchor right")


def _reflection(model: str, refl: pd.DataFrame, cfg: RunConfig) -> pd.DataFrame:
    rows = []
    if refl.empty:
        return pd.DataFrame()
    for method, g in refl.groupby("method", sort=False):
        info = g[g["prefers_correct"].notna()]
        for case in REFLECTION_CASES:
            sel = info
            if case == "anchor wrong":
                sel = info[~info["anchor_correct"].astype(bool)]
            elif case == "anchor right":
                sel = info[info["anchor_correct"].astype(bool)]
            est, low, high = pooled_rate(
                sel["prefers_correct"].astype(bool).to_numpy(dtype=float),
                sel["key"],
                n_boot=cfg.eval.n_bootstrap,
                seed=cfg.run.seed,
            )
            rows.append(
                {
                    "model": model,
                    "method": str(method),
                    "case": case,
                    "prefers_correct": est,
                    "ci_low": low,
                    "ci_high": high,
                    "n": len(sel),
                    "n_calls": len(g),
                    "n_parse_failures": int(g["failure"].notna().sum()),
                }
            )
    return pd.DataFrame(rows)


def _methods(
    model: str, t: dict[str, pd.DataFrame], cfg: RunConfig, *, own_stage1: bool = True
) -> pd.DataFrame:
    boot = {"n_boot": cfg.eval.n_bootstrap, "seed": cfg.run.seed}
    credit = cfg.eval.failure_credit
    rows = []
    preds, roll, refl = t["predictions"], t["rollouts"], t["reflections"]
    for source, p in preds.groupby("source", sort=False):
        r = roll[roll["source"] == source]
        sample_vals = np.where(r["choice"].isna(), credit, r["correct"].astype(float))
        if own_stage1:
            rows.append(
                _rate_row(model, source, "one sample", sample_vals, r, r["choice"].isna(), boot)
            )
        for method in methods_in(p):
            g = p[p["method"] == method]
            rows.append(
                _rate_row(model, source, method, credited(g, credit), g, g["verdict"].isna(), boot)
            )
        if len(refl):
            w = refl[(refl["source"] == source) & (refl["method"] == "reflectrm")]
            w = w[w["other_wins"].astype(bool)]
            vals = w["i_correct"].astype(float).to_numpy()
            rows.append(_rate_row(model, source, "winners", vals, w, np.zeros(len(w), bool), boot))
    return pd.DataFrame(rows)


def _rate_row(
    model: str,
    source: str,
    method: str,
    values: np.ndarray,
    rows: pd.DataFrame,
    failed: Any,
    boot: dict[str, int],
) -> dict[str, Any]:
    est, low, high = pooled_rate(values, rows["id"], **boot)
    return {
        "model": model,
        "benchmark": str(source),
        "method": method,
        "accuracy": est,
        "ci_low": low,
        "ci_high": high,
        "n": len(rows),
        "n_pairs": int(rows["id"].nunique()),
        "n_parse_failures": int(np.asarray(failed, dtype=bool).sum()),
    }


def n_grid(cfg: RunConfig, rollouts: pd.DataFrame) -> list[int]:
    """cfg.eval.n_grid capped at the fewest samples any pair has, with that N itself added."""
    if rollouts.empty:
        return []
    n = int(rollouts.groupby("key")["sample"].count().min())
    return sorted({k for k in cfg.eval.n_grid if 1 <= k <= n} | {n})


def _accuracy_vs_n(
    model: str, t: dict[str, pd.DataFrame], cfg: RunConfig, *, own_stage1: bool = True
) -> pd.DataFrame:
    roll, preds = t["rollouts"], t["predictions"]
    ks = n_grid(cfg, roll)
    if not ks:
        return pd.DataFrame()
    boot = {"n_boot": cfg.eval.n_bootstrap, "seed": cfg.run.seed}
    credit = cfg.eval.failure_credit
    maj = majority_at_k(
        roll, ks, tie_break=cfg.inference.majority_tie_break, seed=cfg.inference.seed
    )
    maj["verdict"] = maj["verdict"].astype("Int64")
    rows = []
    for (source, k), g in maj.groupby(["source", "k"], sort=True) if own_stage1 else []:
        row = _rate_row(
            model, source, "majority", credited(g, credit), g, g["verdict"].isna(), boot
        )
        rows.append({**row, "k": int(k)})
    for source, p in preds[preds["method"] == "reflectrm"].groupby("source", sort=False):
        row = _rate_row(
            model, source, "reflectrm", credited(p, credit), p, p["verdict"].isna(), boot
        )
        rows.append({**row, "k": ks[-1]})
    return pd.DataFrame(rows)


# ---- position bias -----------------------------------------------------------------------------


def position_bias_tables(cfg: RunConfig, run: RunFolder, n_bins: int = 5) -> dict[str, Any]:
    """Position and length bias, per evaluated model, method and benchmark.

    - `consistency`: correct in both orders (the paper's positional consistency) with its
      interval, flip rate (among pairs with both verdicts parsed, the chosen *response* changes
      with the order, i.e. the same slot number is picked twice), first-slot win rate (share of
      parsed verdicts that say Response 1) beside `label1_share` (what a perfect judge would
      score), accuracy in each order, JudgeBench's sign rule, parse-failure rate;
    - `paper`: the consistency table laid out like the paper's (systems x benchmarks, plus the
      average), the paper's numbers beside ours where it reports them;
    - `length`: plain accuracy by the length difference of the two responses (characters of the
      better minus the worse), in `n_bins` quantile bins over the pairs;
    - `notes`: what could not be measured in this run, in words.

    Writes metrics.json section `position_bias`.
    """
    preds = all_predictions(cfg, run)
    boot = {"n_boot": cfg.eval.n_bootstrap, "seed": cfg.run.seed}
    rows = []
    for (model, source, method), g in preds.groupby(["model", "source", "method"], sort=False):
        rows.append(_bias_row(model, source, method, g.drop(columns=["model"]), boot))
    cons = pd.DataFrame(rows)
    cons = sort_rows(cons, "benchmark")
    length = length_table(run, preds, cfg, n_bins)
    notes = _bias_notes(cons)
    out = {
        "consistency": cons,
        "paper": consistency_layout(cons),
        "length": length,
        "notes": notes,
    }
    run.update_metrics(
        "position_bias",
        {"consistency": records(cons), "length": records(length), "notes": notes},
    )
    return out


def sort_rows(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Rows by `by` (in order of first appearance), then model and method in the paper's order."""
    if df.empty:
        return df
    model_rank = {m: i for i, m in enumerate(MODELS)}
    method_rank = {m: i for i, m in enumerate(METHODS)}
    first = {v: i for i, v in enumerate(dict.fromkeys(df[by]))} if by else {}
    key = df.assign(
        _b=df[by].map(first) if by else 0,
        _m=df["model"].map(model_rank).fillna(99),
        _k=df["method"].map(method_rank).fillna(99),
    )
    return (
        key.sort_values(["_b", "_m", "_k"], kind="stable")
        .drop(columns=["_b", "_m", "_k"])
        .reset_index(drop=True)
    )


def _bias_row(
    model: str, source: str, method: str, df: pd.DataFrame, boot: dict[str, int]
) -> dict[str, Any]:
    c = metrics.consistency(df, **boot)
    df = metrics.paired_rows(df)  # the rates below read the same rows as `c`
    flips = _flip_indicators(df)
    first = df[df["verdict"].notna()]
    f_est, f_low, f_high = pooled_rate(flips["flip"].astype(float), flips["id"], **boot)
    s_est, s_low, s_high = pooled_rate(
        (first["verdict"].astype(int) == 1).astype(float), first["id"], **boot
    )
    bc = c["both_correct"]
    acc = c["accuracy_by_order"]
    return {
        "model": model,
        "method": method,
        "benchmark": str(source),
        "both_correct": bc["estimate"],
        "ci_low": bc["low"],
        "ci_high": bc["high"],
        "n_pairs_both_orders": c["n_pairs_both_orders"],
        "flip_rate": c["flip_rate"],
        "flip_ci_low": f_low,
        "flip_ci_high": f_high,
        "n_flip_eligible": c["n_flip_eligible"],
        "first_slot_win_rate": c["first_slot_win_rate"],
        "first_ci_low": s_low,
        "first_ci_high": s_high,
        "n_parsed": c["n_parsed"],
        "label1_share": float((df["label"].astype(int) == 1).mean()),
        "accuracy_given": acc.get("given"),
        "accuracy_swapped": acc.get("swapped"),
        "sign_rule_accuracy": c["sign_rule_accuracy"],
        "parse_failure_rate": c["parse_failure_rate"],
        "n_rows": c["n_rows"],
    }


def _flip_indicators(df: pd.DataFrame) -> pd.DataFrame:
    """Per pair with both orders parsed: did the chosen response change (same slot twice)?"""
    wide = df.pivot_table(index="id", columns="order", values="verdict", aggfunc="first")
    if not {"given", "swapped"} <= set(wide.columns):
        return pd.DataFrame({"id": [], "flip": []})
    wide = wide.dropna(subset=["given", "swapped"])
    return pd.DataFrame(
        {"id": wide.index, "flip": (wide["given"] == wide["swapped"]).to_numpy(dtype=bool)}
    )


def _bias_notes(cons: pd.DataFrame) -> list[str]:
    notes = []
    if cons.empty:
        return ["No predictions: run 04_inference first."]
    if (cons["n_pairs_both_orders"] == 0).all():
        notes.append(
            "This run judged each pair in one order only (inference.both_orders: false): "
            "consistency and flip rates are empty; the first-slot win rate is still measured."
        )
    wide = cons[(cons["ci_high"] - cons["ci_low"]) > WIDE_INTERVAL]
    if len(wide):
        notes.append(
            f"{len(wide)} of {len(cons)} consistency intervals are wider than "
            f"{100 * WIDE_INTERVAL:.0f} points: too few pairs to rank methods."
        )
    return notes


def consistency_layout(cons: pd.DataFrame) -> pd.DataFrame:
    """Correct-in-both-orders (%) laid out like the paper's consistency table: one row per
    system, one column per benchmark and the plain average over the benchmarks present, with
    the paper's average (and JudgeBench) beside ours where it reports the system."""
    if cons.empty or (cons["n_pairs_both_orders"] == 0).all():
        return pd.DataFrame()
    cons = cons[cons["n_pairs_both_orders"] > 0]
    index = list(dict.fromkeys(zip(cons["model"], cons["method"], strict=True)))
    out = pd.DataFrame(index=pd.Index([f"{m} · {k}" for m, k in index], name="model · method"))
    out["paper's system"] = [paper.SYSTEMS.get(i, "") for i in index]
    for bench, g in cons.groupby("benchmark", sort=False):
        g = g.set_index(["model", "method"])
        head = f"{benchmark_label(str(bench))} (n={int(g['n_pairs_both_orders'].max())})"
        out[head] = [
            fmt_ci(*g.loc[i, ["both_correct", "ci_low", "ci_high"]]) if i in g.index else "–"
            for i in index
        ]
        if metrics.scoring_of(str(bench)) == "judgebench":
            out[f"{head} paper"] = [_paper_cons(i, "judgebench") for i in index]
    avg = cons.groupby(["model", "method"])["both_correct"].mean()
    out["avg ours"] = [f"{100 * avg[i]:.1f}" if i in avg.index else "–" for i in index]
    out["avg paper (5 sets)"] = [_paper_cons(i, "avg") for i in index]
    return out


def _paper_cons(system: tuple[str, str], key: str) -> str:
    v = paper.paper_consistency(*system, key)
    return "" if v is None else f"{v:.1f}"


def pair_lengths(run: RunFolder) -> pd.DataFrame:
    """Per evaluation pair (source, id): characters of the better and the worse response."""
    pe = run.read_table("pairs_eval")
    l1, l2 = pe["response1"].str.len(), pe["response2"].str.len()
    better_is_1 = pe["label"].astype(int) == 1
    return pd.DataFrame(
        {
            "source": pe["source"],
            "id": pe["id"].astype(str),
            "len_chosen": l1.where(better_is_1, l2),
            "len_rejected": l2.where(better_is_1, l1),
        }
    ).drop_duplicates(["source", "id"])


def length_bins(diff: pd.Series, n_bins: int = 5) -> pd.Series:
    """Quantile bins of a length difference (characters), labelled by their ranges.

    Equal edges collapse (many pairs may have the same difference), so there may be fewer bins.
    Returns an ordered categorical aligned with `diff`.
    """
    # edges at observed values (method 'lower'): no float noise splitting a run of equal values
    qs = np.linspace(0, 1, n_bins + 1)
    edges = np.unique(np.quantile(diff.to_numpy(dtype=float), qs, method="lower"))
    if len(edges) == 1:
        edges = np.array([edges[0] - 0.5, edges[0] + 0.5])
    labels = [f"{lo:+.0f} to {hi:+.0f}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    return pd.cut(diff, bins=edges, labels=labels, include_lowest=True, ordered=True)


def length_table(
    run: RunFolder, preds: pd.DataFrame, cfg: RunConfig, n_bins: int = 5
) -> pd.DataFrame:
    """Plain accuracy of every model and method by the better-minus-worse length difference.

    Columns: model, method, bin (label, characters), bin_index, diff_mean, accuracy, ci_low,
    ci_high, n (rows), n_pairs, n_parse_failures. Bins are quantiles over the evaluation pairs
    (all sources together), the same for every method.
    """
    lengths = pair_lengths(run)
    lengths["diff"] = lengths["len_chosen"] - lengths["len_rejected"]
    lengths["bin"] = length_bins(lengths["diff"], n_bins)
    df = preds.assign(id=preds["id"].astype(str)).merge(
        lengths[["source", "id", "diff", "bin"]], on=["source", "id"], how="inner"
    )
    boot = {"n_boot": cfg.eval.n_bootstrap, "seed": cfg.run.seed}
    rows = []
    cats = list(lengths["bin"].cat.categories)
    for (model, method, b), g in df.groupby(["model", "method", "bin"], sort=False, observed=True):
        est, low, high = pooled_rate(credited(g, cfg.eval.failure_credit), g["id"], **boot)
        rows.append(
            {
                "model": model,
                "method": method,
                "bin": str(b),
                "bin_index": cats.index(b),
                "diff_mean": float(g["diff"].mean()),
                "accuracy": est,
                "ci_low": low,
                "ci_high": high,
                "n": len(g),
                "n_pairs": int(g["id"].nunique()),
                "n_parse_failures": int(g["verdict"].isna().sum()),
            }
        )
    out = pd.DataFrame(rows)
    return sort_rows(out, "bin_index") if len(out) else out


# ---- worked examples ---------------------------------------------------------------------------


def worked_examples(run: RunFolder, model: str, k: int = 1) -> dict[str, list[dict[str, Any]]]:
    """Up to k pairs where ReflectRM's reflection overruled a wrong anchor (`overrule`), and up
    to k where it failed (`failure`): it overruled a right anchor, or kept a wrong one although a
    correct critique was offered. Each example holds the pair's texts, the anchor's critique, and
    every stage-2 call (the other critique, the reflection's output, who won).
    """
    t = {n: run.read_table(f"{n}_{model}") for n in ("rollouts", "reflections", "predictions")}
    pairs = {p.key: p for p in read_pairs(run, "pairs_eval")}
    final = t["predictions"][t["predictions"]["method"] == "reflectrm"]
    refl = t["reflections"]
    refl = refl[refl["method"] == "reflectrm"] if len(refl) else refl
    out: dict[str, list[dict[str, Any]]] = {"overrule": [], "failure": []}
    for row in final.itertuples(index=False):
        case = _case(row, refl)
        if case and len(out[case[0]]) < k:
            out[case[0]].append(_example(row, case[1], t["rollouts"], refl, pairs))
    return out


def _case(row: Any, refl: pd.DataFrame) -> tuple[str, str] | None:
    if pd.isna(row.anchor) or pd.isna(row.verdict) or refl.empty:
        return None
    mine = refl[refl["key"] == row.key]
    anchor_right = bool(mine["anchor_correct"].iloc[0]) if len(mine) else None
    if anchor_right is None:
        return None
    if not anchor_right and row.correct:
        return "overrule", "the reflection overruled a wrong anchor"
    if anchor_right and not row.correct:
        return "failure", "the reflection overruled a right anchor"
    if not anchor_right and not row.correct and mine["i_correct"].astype(bool).any():
        return "failure", "a wrong anchor stood although a correct critique was offered"
    return None


def _example(
    row: Any,
    what: str,
    rollouts: pd.DataFrame,
    refl: pd.DataFrame,
    pairs: dict[str, Pair],
) -> dict[str, Any]:
    roll = rollouts[rollouts["key"] == row.key].set_index("sample")
    anchor = int(row.anchor)
    given_key = row.key.rsplit(":", 1)[0] + ":given"
    pair = pairs.get(row.key) or pairs.get(given_key)
    if pair is not None and pair.key != row.key:
        pair = pair.swapped()
    calls = [
        {
            "i": int(c.i),
            "i_verdict": _int(c.i_choice),
            "i_correct": bool(c.i_correct),
            "anchor_slot": int(c.anchor_slot),
            "critique": roll.loc[int(c.i), "text"],
            "reflection": c.text,
            "other_wins": bool(c.other_wins),
            "failure": None if pd.isna(c.failure) else str(c.failure),
        }
        for c in refl[refl["key"] == row.key].itertuples(index=False)
    ]
    return {
        "what": what,
        "key": row.key,
        "label": int(row.label),
        "query": pair.query if pair else "",
        "response1": pair.response1 if pair else "",
        "response2": pair.response2 if pair else "",
        "anchor": anchor,
        "anchor_verdict": _int(roll.loc[anchor, "choice"]),
        "anchor_confidence": float(roll.loc[anchor, "confidence"]),
        "anchor_critique": roll.loc[anchor, "text"],
        "calls": calls,
        "winners": [c["i"] for c in calls if c["other_wins"]],
        "final_verdict": _int(row.verdict),
        "final_correct": bool(row.correct),
    }


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def examples_markdown(examples: dict[str, list[dict[str, Any]]], max_chars: int = 600) -> str:
    """The worked examples as Markdown (texts shortened to `max_chars`)."""
    titles = {
        "overrule": "A reflection overruling a wrong anchor",
        "failure": "A reflection failing",
    }
    parts = []
    for case, title in titles.items():
        parts.append(f"### {title}")
        if not examples.get(case):
            parts.append("_No such pair in this run._")
        for ex in examples.get(case, []):
            parts.append(_example_md(ex, max_chars))
    return "\n\n".join(parts)


def _example_md(ex: dict[str, Any], n: int) -> str:
    lines = [
        f"**{ex['key']}**: {ex['what']}. Label: Response {ex['label']} is better; anchor "
        f"(sample {ex['anchor']}, confidence {ex['anchor_confidence']:.3f}) says Response "
        f"{ex['anchor_verdict']}; winners {ex['winners'] or 'none'}; final verdict: Response "
        f"{ex['final_verdict']} ({'right' if ex['final_correct'] else 'wrong'}).",
        f"> **Query:** {_quote(ex['query'], n)}",
        f"> **Response 1:** {_quote(ex['response1'], n)}",
        f"> **Response 2:** {_quote(ex['response2'], n)}",
        f"**Anchor's critique** (sample {ex['anchor']}):",
        f"```\n{_short(ex['anchor_critique'], n)}\n```",
    ]
    for c in ex["calls"]:
        verdict = "beats the anchor" if c["other_wins"] else "loses to the anchor"
        fail = f" (reflection unparseable: {c['failure']})" if c["failure"] else ""
        lines.append(
            f"**Sample {c['i']}** (says Response {c['i_verdict']}, "
            f"{'right' if c['i_correct'] else 'wrong'}) {verdict}{fail}:\n\n"
            f"```\n{_short(c['critique'], n)}\n```\nReflection (anchor in slot "
            f"{c['anchor_slot']}):\n\n```\n{_short(c['reflection'], n)}\n```"
        )
    return "\n\n".join(lines)


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _quote(text: str, n: int) -> str:
    return _short(text, n).replace("\n", "\n> ")


def show_examples(examples: dict[str, list[dict[str, Any]]], max_chars: int = 600) -> Any:
    """The worked examples rendered for a notebook (IPython Markdown)."""
    from IPython.display import Markdown

    return Markdown(examples_markdown(examples, max_chars))


# ---- headline ----------------------------------------------------------------------------------


def headline(cfg: RunConfig, run: RunFolder) -> dict[str, Any]:
    """Flat headline numbers of the run (metrics.json section `headline`; sweeps compare them).

    Keys: `model` (`pipeline.headline_model`: unified when evaluated); per benchmark B and
    method M of that model `acc.B.M` (official score, fraction) with `acc.B.M.ci_low`/`.ci_high`
    and `failures.B.M` (parse failures); `acc.B.base.greedy` for reference; `avg.M`, the plain
    mean over the benchmarks present; `consistency.B.M` (correct in both orders) when both orders
    were run; `n.B` (units scored).
    """
    table = run.read_table("results_main") if run.has_table("results_main") else None
    if table is None or table.empty:
        table = main_table(cfg, run)
    last = headline_model(set(table["model"]))
    out: dict[str, Any] = {"model": last, "failure_credit": cfg.eval.failure_credit}
    mine = table[table["model"] == last]
    for r in mine.itertuples(index=False):
        key = f"acc.{r.benchmark}.{r.method}"
        out[key] = _flt(r.score)
        out[f"{key}.ci_low"], out[f"{key}.ci_high"] = _flt(r.ci_low), _flt(r.ci_high)
        out[f"failures.{r.benchmark}.{r.method}"] = int(r.n_parse_failures)
        out[f"n.{r.benchmark}"] = int(r.n)
    if last != "base":
        for r in table[(table["model"] == "base") & (table["method"] == "greedy")].itertuples():
            out[f"acc.{r.benchmark}.base.greedy"] = _flt(r.score)
    for method, g in mine.groupby("method", sort=False):
        out[f"avg.{method}"] = _flt(g["score"].mean())
    out.update(_headline_consistency(cfg, run, last))
    run.update_metrics("headline", out)
    return out


def _headline_consistency(cfg: RunConfig, run: RunFolder, model: str) -> dict[str, Any]:
    preds = run.read_table(f"predictions_{model}")
    if set(preds["order"]) != {"given", "swapped"}:
        return {}
    out = {}
    for (source, method), g in preds.groupby(["source", "method"], sort=False):
        c = metrics.consistency(g, n_boot=0, seed=cfg.run.seed)
        out[f"consistency.{source}.{method}"] = _flt(c["both_correct"]["estimate"])
    return out


def _flt(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def wide_intervals(table: pd.DataFrame, width: float = WIDE_INTERVAL) -> pd.DataFrame:
    """Rows of a table (score/accuracy with ci_low, ci_high) whose interval is wider than
    `width`: the numbers the notebooks and the report flag as too uncertain to rank."""
    if table.empty or "ci_low" not in table:
        return table.iloc[0:0]
    return table[(table["ci_high"] - table["ci_low"]) > width]
