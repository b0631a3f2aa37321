"""Notebook 07: position and length bias: correct in both orders (the paper's positional
consistency, laid out like its Table 5), flip rate, first-slot win rate, accuracy by length
difference; metrics.json section `position_bias`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rmlib import paper, scoring
from rmlib.analysis.common import WIDE_INTERVAL, fmt_ci, pooled_rate, records
from rmlib.data import label_of
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import evaluated_models, sort_rows, stage1_model


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
    - `stage1_first_slot`: per stage-1 judge, the share of its parsed stage-1 samples that say
      Response 1 (`stage1_first_slot`), so the notebook shows this run's own slot preference
      rather than claiming one;
    - `notes`: what could not be measured in this run, in words.

    Writes metrics.json section `position_bias`.
    """
    preds = run.predictions(evaluated_models(cfg, run))
    boot = {"n_boot": cfg.eval.n_bootstrap, "seed": cfg.run.seed}
    rows = []
    for (model, source, method), g in preds.groupby(["model", "source", "method"], sort=False):
        rows.append(_bias_row(model, source, method, g.drop(columns=["model"]), boot))
    cons = pd.DataFrame(rows)
    cons = sort_rows(cons, "benchmark")
    length = length_bias_table(run, preds, cfg, n_bins)
    notes = _bias_notes(cons)
    stage1 = stage1_first_slot(cfg, run)
    out = {
        "consistency": cons,
        "stage1_first_slot": stage1,
        "paper": consistency_layout(cons),
        "length": length,
        "notes": notes,
    }
    run.update_metrics(
        "position_bias",
        {
            "consistency": records(cons),
            "length": records(length),
            "stage1_first_slot": records(stage1),
            "notes": notes,
        },
    )
    return out


def stage1_first_slot(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """Per stage-1 judge of the evaluated models (a reflection-only judge reads another's): the
    share of its parsed stage-1 samples that say Response 1, with a bootstrap 95 % interval over
    pairs, beside `label1_share` (the share of those samples' pairs whose better response is
    Response 1: what a judge without slot preference would give), over every benchmark and order
    judged; `n_samples` parsed of `n_rows`."""
    boot = {"n_boot": cfg.eval.n_bootstrap, "seed": cfg.run.seed}
    rows = []
    judges = dict.fromkeys(stage1_model(cfg, m) for m in evaluated_models(cfg, run))
    for judge in judges:
        if not run.has_table(f"rollouts_{judge}"):
            continue
        roll = run.read_table(f"rollouts_{judge}")
        parsed = roll[roll["choice"].notna()]
        est, low, high = pooled_rate(
            (parsed["choice"].astype(int) == 1).astype(float), parsed["id"], **boot
        )
        rows.append(
            {
                "stage1_judge": judge,
                "says_response_1": est,
                "ci_low": low,
                "ci_high": high,
                "label1_share": float((parsed["label"].astype(int) == 1).mean())
                if len(parsed)
                else np.nan,
                "n_samples": len(parsed),
                "n_rows": len(roll),
            }
        )
    return pd.DataFrame(rows)


def _bias_row(
    model: str, source: str, method: str, df: pd.DataFrame, boot: dict[str, int]
) -> dict[str, Any]:
    c = scoring.consistency(df, **boot)
    df = scoring.paired_rows(df)  # the rates below read the same rows as `c`
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
        head = f"{label_of(str(bench))} (n={int(g['n_pairs_both_orders'].max())})"
        out[head] = [
            fmt_ci(*g.loc[i, ["both_correct", "ci_low", "ci_high"]]) if i in g.index else "–"
            for i in index
        ]
        rule = scoring.scoring_of(str(bench))
        if rule in paper.CONSISTENCY_BENCHMARKS:
            out[f"{head} paper"] = [_paper_cons(i, rule) for i in index]
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


def length_bias_table(
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
        est, low, high = pooled_rate(scoring.credited(g, cfg.eval.failure_credit), g["id"], **boot)
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
