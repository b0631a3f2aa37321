"""Notebook 05's figures: accuracy per benchmark and per subset with 95 % intervals, the paper's
numbers as hollow diamonds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rmlib.data import label_of, unit_of
from rmlib.plots.style import (
    METHOD_COLORS,
    MODEL_MARKERS,
    OKABE_ITO,
    chance_line,
    dot_rows,
    empty_figure,
    err,
    grid_shape,
    hide_unused,
    legend_models_methods,
    new_figure,
    paper_handle,
    pct,
    save,
    styled,
    system_label,
    system_labels,
)
from rmlib.run.folder import RunFolder


@styled
def accuracy_by_benchmark(main: pd.DataFrame, run: RunFolder) -> Figure:
    """Official score of every model and method per benchmark with its 95 % bootstrap interval
    (markers: model; colours: method); the paper's number (Qwen3-4B) as a hollow diamond where
    the paper reports the same system on the same benchmark."""
    if main.empty:
        return empty_figure(run, "accuracy_by_benchmark", "Accuracy", "No scores.")
    benches = list(dict.fromkeys(main["benchmark"]))
    labels = system_labels(main)
    nrows, ncols = grid_shape(len(benches))
    fig, axes = new_figure(
        nrows,
        ncols,
        size=(4.6 * ncols, (0.32 * len(labels) + 1.4) * nrows + 0.9),
        sharey=True,
        layout="constrained",
    )
    for ax, bench in zip(axes, benches, strict=False):
        rows = main[main["benchmark"] == bench]
        dot_rows(ax, rows, "score", "ci_low", "ci_high", labels)
        _paper_marks(ax, rows, labels)
        chance_line(ax)
        n = int(rows["n"].max())
        failures = int(rows["n_parse_failures"].sum())
        ax.set_title(f"{label_of(bench)}\nn = {n} {unit_of(bench)}, parse failures: {failures}")
        ax.set_xlabel("official score (%, 95 % CI)")
    hide_unused(axes, len(benches))
    legend_models_methods(fig, main, paper_handle() if main["paper"].notna().any() else None)
    fig.suptitle("Accuracy per benchmark", fontweight="bold")
    return save(fig, run, "accuracy_by_benchmark")


def _paper_marks(ax: Axes, rows: pd.DataFrame, labels: list[str]) -> None:
    y = dict(zip(labels, np.arange(len(labels))[::-1], strict=True))
    for r in rows.to_dict("records"):
        if not pd.isna(r["paper"]):
            ax.plot(
                pct(r["paper"]),
                y[system_label(r["model"], r["method"])],
                marker="D",
                markerfacecolor="none",
                markeredgecolor=OKABE_ITO["black"],
                markersize=9,
                linestyle="",
            )


MAX_PARTS = 14


def _pick_parts(df: pd.DataFrame) -> pd.DataFrame:
    """The parts worth a panel: RewardBench's sections (its 23 subsets are too many), RM-Bench's
    domains and levels, and any other kind with at most MAX_PARTS parts."""
    keep = []
    for kind, g in df.groupby("kind", sort=False):
        if kind == "domain_levels":
            continue
        if kind == "subsets" and ("sections" in set(df["kind"]) or g["part"].nunique() > MAX_PARTS):
            continue
        keep.append(g)
    return pd.concat(keep) if keep else df.iloc[0:0]


@styled
def accuracy_by_subset(
    subsets: pd.DataFrame, run: RunFolder, methods: Sequence[str] = ("greedy", "reflectrm")
) -> Figure:
    """Score per subset (or section, domain, hard/normal/easy level, component, category) of
    each benchmark, for the given methods of every model, with 95 % bootstrap intervals."""
    title = "Accuracy by subset"
    df = subsets[subsets["method"].isin(methods)] if len(subsets) else subsets
    if df.empty:
        return empty_figure(run, "accuracy_by_subset", title, "No per-subset scores.")
    benches = list(dict.fromkeys(df["benchmark"]))
    panels = [(b, _pick_parts(df[df["benchmark"] == b])) for b in benches]
    panels = [(b, p) for b, p in panels if len(p)]
    if not panels:
        return empty_figure(
            run, "accuracy_by_subset", title, "These benchmarks have no subsets in this run."
        )
    series = list(dict.fromkeys(zip(df["model"], df["method"], strict=True)))
    heights = [0.3 * p["part"].nunique() * max(1, len(series)) / 2 + 1.2 for _, p in panels]
    fig, axes = new_figure(
        len(panels),
        1,
        size=(8, sum(heights) + 1.0),
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    for ax, (bench, p) in zip(axes, panels, strict=True):
        parts = list(dict.fromkeys(zip(p["kind"], p["part"], strict=True)))
        y = np.arange(len(parts))[::-1]
        step = 0.7 / max(1, len(series))
        for s, (model, method) in enumerate(series):
            g = p[(p["model"] == model) & (p["method"] == method)].set_index(["kind", "part"])
            g = g.reindex(parts)
            # matplotlib errorbar: the intervals come computed by rmlib.analysis (see plots.style)
            ax.errorbar(
                [pct(v) for v in g["score"]],
                y + 0.35 - step * (s + 0.5),
                xerr=err(g["score"], g["ci_low"], g["ci_high"]),
                fmt=MODEL_MARKERS.get(model, "o"),
                color=METHOD_COLORS.get(method, "k"),
                capsize=2,
                markersize=5,
                label=system_label(model, method),
            )
        ns = p.groupby(["kind", "part"], sort=False)["n"].max().fillna(p["n"].max())
        ax.set_yticks(
            y, [f"{_kind_word(k)}{n} (n={_int_or_dash(ns.get((k, n)))})" for k, n in parts]
        )
        chance_line(ax, label=None)
        ax.set_xlim(-2, 102)
        ax.set_title(label_of(bench))
        ax.set_xlabel("score (%, 95 % CI)")
    axes[0].legend(loc="lower left", bbox_to_anchor=(1.0, 0.0), frameon=False)
    fig.suptitle(title, fontweight="bold")
    return save(fig, run, "accuracy_by_subset")


def _kind_word(kind: str) -> str:
    return {
        "sections": "section ",
        "levels": "level ",
        "domains": "domain ",
        "components": "",
        "categories": "",
        "subsets": "",
    }.get(kind, "")


def _int_or_dash(v: Any) -> str:
    return "–" if v is None or pd.isna(v) else str(int(v))
