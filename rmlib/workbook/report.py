"""The run's short report: report.md in the run folder, from what the notebooks wrote.

`write_report(cfg, run)` reads the tables and metrics.json sections of `rmlib.analysis` (and
recomputes the main table when it is missing or older than the predictions), and writes Markdown:
the run's name and parameters, the headline tables, the figures that exist (relative links),
parse-failure counts, how the configuration differs from the paper's, and an honest note when
the intervals are too wide to rank methods. It can be called after any of the results notebooks;
each call rewrites the whole report with everything available so far.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rmlib import analysis
from rmlib.data import label_of
from rmlib.plots.registry import FIGURES, caption
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import MODELS, evaluated_models, headline_model
from rmlib.training.model_card import fill_evaluation
from rmlib.writes import write_text


def write_report(cfg: RunConfig, run: RunFolder) -> Path:
    """Write run/report.md from the run folder's tables and metrics; return its path."""
    main = _main(cfg, run)
    metrics = run.metrics()
    sections = [
        _title(cfg, run),
        _parameters(cfg, run),
        _headline(cfg, main),
        _paired(metrics.get("paired")),
        _analysis(metrics.get("analysis_quality")),
        _bias(metrics.get("position_bias")),
        _failures(metrics, cfg),
        _figures(run),
        _differences(cfg, main),
        _certainty(main, metrics),
    ]
    path = run.path / "report.md"
    write_text(path, "\n\n".join(s for s in sections if s).rstrip() + "\n")
    _fill_model_cards(run, main)
    return path


def _fill_model_cards(run: RunFolder, main: pd.DataFrame) -> None:
    """Each trained adapter's model card gets its own rows of the main table (its evaluation
    section, rewritten with every report)."""
    for model in sorted(set(main["model"]) - {"base"}) if len(main) else []:
        card = run.adapter_dir(model) / "README.md"
        if not card.is_file():
            continue
        rows = analysis.paper_layout(main[main["model"] == model])
        text = (
            f"Run `{run.path.name}`, official scoring, given order; score [95 % interval] in "
            "percent (rmlib.workbook.report).\n\n" + markdown_table(rows)
        )
        fill_evaluation(run.adapter_dir(model), text)


def _main(cfg: RunConfig, run: RunFolder) -> pd.DataFrame:
    """The main table, recomputed when missing or older than any model's predictions."""
    name = "results_main"
    preds = [run.table_path(f"predictions_{m}") for m in evaluated_models(cfg, run)]
    if not preds:
        return pd.DataFrame(columns=analysis.MAIN_COLUMNS)
    if run.has_table(name):
        built = run.table_path(name).stat().st_mtime
        if all(p.stat().st_mtime <= built for p in preds):
            return run.read_table(name)
    table = analysis.main_table(cfg, run)
    analysis.headline(cfg, run)
    return table


# ---- Markdown helpers --------------------------------------------------------------------------


def markdown_table(df: pd.DataFrame, index: bool = True) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency); '|' in cells is escaped."""
    if df is None or df.empty:
        return "_(empty)_"
    frame = df.reset_index() if index and df.index.name is not None else df
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def _pct(v: Any) -> str:
    return "–" if v is None or pd.isna(v) else f"{100 * float(v):.1f}"


# ---- sections ----------------------------------------------------------------------------------


def _title(cfg: RunConfig, run: RunFolder) -> str:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Run report: {cfg.run.name}"]
    if cfg.run.description:
        lines.append(cfg.run.description)
    lines.append(
        f"_Written {when} from `{run.path}` by `rmlib.workbook.report`. Scores are in percent; "
        "intervals are 95 % bootstrap intervals._"
    )
    return "\n\n".join(lines)


def _parameters(cfg: RunConfig, run: RunFolder) -> str:
    train = cfg.data.train
    evals = ", ".join(
        f"{s.source}" + (f"/{s.split}" if s.split else "") + (f" (n={s.n})" if s.n else "")
        for s in cfg.data.eval
    )
    rows = [
        ("backbone", f"{cfg.model.backbone} ({cfg.model.precision} inference)"),
        ("format warm-up", "yes" if cfg.warmup.enabled else "no"),
        ("training source", f"{train.source}" + (f" (n={train.n})" if train.n else "")),
        ("Pref. : Refl.", cfg.mix.ratio),
        ("evaluation sets", evals or "none"),
        ("models evaluated", ", ".join(evaluated_models(cfg, run)) or "none yet"),
        ("N (stage-1 samples)", str(cfg.inference.n_samples)),
        ("both orders", _orders(cfg)),
        ("parse-failure credit", f"{cfg.eval.failure_credit:g}"),
        ("bootstrap resamples", str(cfg.eval.n_bootstrap)),
        ("seed", str(cfg.run.seed)),
    ]
    table = pd.DataFrame(rows, columns=["parameter", "value"])
    return "## Parameters\n\n" + markdown_table(table, index=False)


def _orders(cfg: RunConfig) -> str:
    inf = cfg.inference
    if not inf.both_orders:
        return "no"
    if inf.swapped_pairs is None:
        return "yes"
    return f"up to {inf.swapped_pairs:,} pairs of each benchmark"


def _headline(cfg: RunConfig, main: pd.DataFrame) -> str:
    if main.empty:
        return "## Accuracy\n\n_No predictions yet: run 04_inference._"
    layout = analysis.paper_layout(main)
    return (
        "## Accuracy per benchmark (official scoring, given order)\n\n"
        f"Ours: score [95 % interval]; paper: Qwen3-4B as published, shown only where the paper "
        f"reports the same system on the same benchmark. Parse failures score "
        f"{cfg.eval.failure_credit:g}.\n\n" + markdown_table(layout)
    )


def _paired(section: dict[str, Any] | None) -> str:
    rows = (section or {}).get("comparisons") or []
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    model_a = df["a"].str.split(" · ").str[0]
    within = model_a == df["b"].str.split(" · ").str[0]
    df = df[~within | (model_a == headline_model(set(model_a)))]
    table = pd.DataFrame(
        {
            "A": df["a"],
            "B": df["b"],
            "benchmark": df["benchmark"].map(label_of),
            "A − B": [
                analysis.fmt_ci(d, lo, hi)
                for d, lo, hi in zip(df["difference"], df["ci_low"], df["ci_high"], strict=True)
            ],
            "McNemar p": [f"{p:.3g}" for p in df["p_value"]],
            "n": df["n_units"],
        }
    )
    return (
        "## Paired comparisons\n\nDifference of official scores on the same pairs (points, "
        "paired bootstrap 95 % interval) and the exact McNemar test on per-pair correctness: "
        "ReflectRM against each baseline of the headline model, and the paper's steps between "
        "models (all comparisons: metrics.json, section `paired`).\n\n"
        + markdown_table(table, index=False)
    )


def _analysis(section: dict[str, Any] | None) -> str:
    rows = (section or {}).get("summary") or []
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    table = pd.DataFrame(
        {
            "model": df["model"],
            "one sample": df["rollout_accuracy"].map(_pct),
            "reflection prefers correct": [
                f"{_pct(a)} (n={n})"
                for a, n in zip(
                    df["reflection_accuracy"], df["n_informative_reflections"], strict=True
                )
            ],
            "winners' verdicts": df["winner_accuracy"].map(_pct),
            "anchor": df["anchor_accuracy"].map(_pct),
            "ReflectRM": df["final_accuracy"].map(_pct),
        }
    )
    return (
        "## Analysis quality\n\nPlain accuracy (%) over every judged pair and order; reflection "
        "accuracy counts only calls where exactly one of the two critiques is correct.\n\n"
        + markdown_table(table, index=False)
    )


def _bias(section: dict[str, Any] | None) -> str:
    rows = (section or {}).get("consistency") or []
    if not rows:
        return ""
    cons = pd.DataFrame(rows)
    layout = analysis.consistency_layout(cons)
    parts = ["## Position bias"]
    if layout.empty:
        parts.append("_One order per pair only: consistency and flip rates were not measured._")
    else:
        parts.append("Right in both orders (%), the paper's positional consistency:")
        parts.append(markdown_table(layout))
    notes = (section or {}).get("notes") or []
    parts += [f"- {n}" for n in notes]
    return "\n\n".join(parts)


def _failures(metrics: dict[str, Any], cfg: RunConfig) -> str:
    rows = []
    for model in MODELS:
        c = metrics.get(f"counts_{model}")
        if not c:
            continue
        rows.append(
            {
                "model": model,
                "pairs × orders": c.get("n_pairs"),
                "stage-1 failures": _kinds(c.get("rollout_parse_failures"), c.get("n_rollouts")),
                "greedy failures": _kinds(c.get("greedy_parse_failures")),
                "reflection failures": _kinds(c.get("reflection_failure_kinds")),
                "no parsed rollout": c.get("pairs_without_parsed_rollout"),
                "truncated prompts": (c.get("truncated_prompts") or {}).get("judgment_pairs"),
            }
        )
    if not rows:
        return ""
    return (
        "## Parse failures\n\nCounted, never dropped: a pair with no parsed stage-1 judgment is a "
        f"parse failure of every rollout-based method and scores {cfg.eval.failure_credit:g}.\n\n"
        + markdown_table(pd.DataFrame(rows), index=False)
    )


def _kinds(kinds: dict[str, int] | None, total: int | None = None) -> str:
    if not kinds:
        return "0"
    n = sum(kinds.values())
    detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    share = f" of {total}" if total else ""
    return f"{n}{share} ({detail})"


def _figures(run: RunFolder) -> str:
    folder = run.path / "figures"
    present = {p.stem for p in folder.glob("*.png")}
    order = [n for n in FIGURES if n in present] + sorted(present - set(FIGURES))
    if not order:
        return ""
    lines = ["## Figures"]
    for name in order:
        text = caption(name)
        lines.append(f"### {text}\n\n![{text}](figures/{name}.png)")
    return "\n\n".join(lines)


def _differences(cfg: RunConfig, main: pd.DataFrame) -> str:
    items = analysis.configuration_differences(cfg, main)
    return "## How this run differs from the paper\n\n" + "\n".join(f"- {d}" for d in items)


def _certainty(main: pd.DataFrame, metrics: dict[str, Any]) -> str:
    if main.empty:
        return ""
    wide = analysis.wide_intervals(main)
    n_min = int(pd.to_numeric(main["n"]).min())
    lines = ["## How sure are these numbers?"]
    if len(wide):
        widest = float((main["ci_high"] - main["ci_low"]).max())
        lines.append(
            f"{len(wide)} of {len(main)} scores have a 95 % interval wider than "
            f"{100 * analysis.WIDE_INTERVAL:.0f} points (widest {100 * widest:.0f}; smallest "
            f"benchmark n = {n_min}). With so few pairs, differences between methods or models "
            "of this size are not evidence of a real difference: read the paired comparisons "
            "(their intervals and McNemar p-values) before drawing any conclusion."
        )
    else:
        lines.append(
            f"Every score's 95 % interval is within {100 * analysis.WIDE_INTERVAL:.0f} points "
            f"(smallest benchmark n = {n_min})."
        )
    failing = main[pd.to_numeric(main["parse_failure_rate"]) >= 0.5]
    if len(failing):
        lines.append(
            f"{len(failing)} of {len(main)} scores rest on predictions of which half or more are "
            "parse failures: they measure whether the model keeps the output format, not how "
            "well it judges (see Parse failures above)."
        )
    return "\n\n".join(lines)
