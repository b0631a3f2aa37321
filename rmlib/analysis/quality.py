"""Notebook 06: how analysis quality drives accuracy (method.md §6): calibration of confidence,
reflection accuracy, each stage and baseline, accuracy as N grows. Plain accuracy over every
judged (pair, order); metrics.json section `analysis_quality`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlib import scoring
from rmlib.analysis.common import methods_in, pooled_rate, records, wilson
from rmlib.reflect import analysis_quality, calibration_table, majority_at_k, prefers_correct
from rmlib.reflect.settings import REFLECTION_CASES
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import evaluated_models, stage1_model


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
    `run_models.stage1_model`) has rows only where stage 2 is its own: its summary (with
    `stage1` naming whose judgments), reflection, and the stage-2 methods; its calibration,
    one-sample and majority rows would repeat the stage-1 model's.

    Writes metrics.json section `analysis_quality`.
    """
    parts: dict[str, list[pd.DataFrame]] = {
        k: [] for k in ("summary", "calibration", "reflection", "methods", "accuracy_vs_n")
    }
    for model in evaluated_models(cfg, run):
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


def _reflection(model: str, refl: pd.DataFrame, cfg: RunConfig) -> pd.DataFrame:
    rows = []
    if refl.empty:
        return pd.DataFrame()
    for method, g in refl.groupby("method", sort=False):
        # a failed call counts as the vote and the map count it (prefers_correct), whatever
        # rule the run's stored column followed
        g = g.assign(prefers_correct=prefers_correct(g))
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
                _rate_row(
                    model, source, method, scoring.credited(g, credit), g, g["verdict"].isna(), boot
                )
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
            model, source, "majority", scoring.credited(g, credit), g, g["verdict"].isna(), boot
        )
        rows.append({**row, "k": int(k)})
    for source, p in preds[preds["method"] == "reflectrm"].groupby("source", sort=False):
        row = _rate_row(
            model, source, "reflectrm", scoring.credited(p, credit), p, p["verdict"].isna(), boot
        )
        rows.append({**row, "k": ks[-1]})
    return pd.DataFrame(rows)
