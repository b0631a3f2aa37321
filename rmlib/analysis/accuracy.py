"""Notebook 05: accuracy per benchmark with the official scoring (`rmlib.scoring`) on the given
order, beside the paper's numbers: the main table and its paper layout, subsets, the data-volume
ablation, paired comparisons, and the run's headline numbers. Writes tables/results_main.parquet
and metrics.json sections `results`, `scores`, `paired`, `headline`.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rmlib import paper, scoring
from rmlib.analysis.common import (
    PAPER_BENCHMARKS,
    ci_bounds,
    fmt_ci,
    pairs_by_source,
    records,
    unit_suffix,
)
from rmlib.analysis.differences import configuration_differences
from rmlib.data import label_of
from rmlib.reflect import METHODS
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import MODELS, evaluated_models, headline_model

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


def score_all(cfg: RunConfig, run: RunFolder) -> dict[str, dict[str, dict[str, Any]]]:
    """Official scores of every evaluated model and method on every evaluation set.

    {model: {benchmark (source name): score_predictions(...)}}; written to metrics.json
    section `scores`.
    """
    preds = run.predictions(evaluated_models(cfg, run))
    pairs = pairs_by_source(run)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for model in evaluated_models(cfg, run):
        mine = preds[preds["model"] == model].drop(columns=["model"])
        for source, df in mine.groupby("source", sort=False):
            out.setdefault(model, {})[str(source)] = scoring.score_predictions(
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
    low, high = ci_bounds(res.get("ci"))
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
        head = f"{label_of(b)} (n={n}{unit_suffix(b)})"
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
    published = {r["model"]: r for r in paper.DATA_VOLUME_ABLATION}
    greedy = main[(main["method"] == "greedy") & main["model"].isin(published)]
    models = [m for m in MODELS if m in set(greedy["model"])]
    if len(models) < 2:
        return pd.DataFrame()
    mixes = run.read_table("mix_counts").set_index("model") if run.has_table("mix_counts") else None
    rows = []
    for model in models:
        g = greedy[greedy["model"] == model].set_index("benchmark")
        row: dict[str, Any] = {"model": model, "paper's set": published[model]["training_set"]}
        if mixes is not None and model in mixes.index:
            row["Pref. items"] = int(mixes.loc[model, "Pref."])
            row["Refl. items"] = int(mixes.loc[model, "Refl."])
        for bench, r in g.iterrows():
            row[label_of(str(bench))] = fmt_ci(r["score"], r["ci_low"], r["ci_high"])
        by_rule = g.set_index("scoring")["score"]
        pair = list(paper.DATA_VOLUME_BENCHMARKS)
        if set(pair) <= set(by_rule.index):
            row["RewardBench+RMB avg ours"] = f"{100 * by_rule[pair].mean():.1f}"
        row["RewardBench+RMB avg paper"] = f"{published[model]['avg_rewardbench_rmb']:.1f}"
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
                    low, high = ci_bounds(part.get("ci"))
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
    preds = run.predictions(evaluated_models(cfg, run))
    pairs = pairs_by_source(run)
    rows = []
    for source, df in preds.groupby("source", sort=False):
        for a, b in _comparisons(df):
            pa = _select(df, *a)
            pb = _select(df, *b)
            res = scoring.paired_comparison(
                pa,
                pb,
                benchmark=str(source),
                pairs=pairs.get(str(source)),
                failure_credit=cfg.eval.failure_credit,
                n_boot=cfg.eval.n_bootstrap,
                seed=cfg.run.seed,
            )
            low, high = ci_bounds(res["ci"])
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


def headline(cfg: RunConfig, run: RunFolder) -> dict[str, Any]:
    """Flat headline numbers of the run (metrics.json section `headline`; sweeps compare them).

    Keys: `model` (`run_models.headline_model`: unified when evaluated); per benchmark B and
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
        c = scoring.consistency(g, n_boot=0, seed=cfg.run.seed)
        out[f"consistency.{source}.{method}"] = _flt(c["both_correct"]["estimate"])
    return out


def _flt(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v
