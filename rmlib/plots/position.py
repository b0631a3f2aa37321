"""Notebook 07's figures: correct in both orders, flip rate, first-slot win rate, accuracy by
length difference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rmlib.data import label_of
from rmlib.plots.style import (
    METHOD_COLORS,
    OKABE_ITO,
    chance_line,
    dot_rows,
    empty_figure,
    err,
    grid_shape,
    hide_unused,
    legend_models_methods,
    method_label,
    new_figure,
    paper_handle,
    save,
    styled,
    system_label,
    system_labels,
)
from rmlib.run.folder import RunFolder


def _bias_panels(
    cons: pd.DataFrame,
    run: RunFolder,
    name: str,
    title: str,
    value: str,
    low: str,
    high: str,
    xlabel: str,
    n_col: str,
    reference: Callable[[Axes, pd.DataFrame], None] | None = None,
    extra: list[Any] | None = None,
) -> Figure:
    benches = list(dict.fromkeys(cons["benchmark"]))
    labels = system_labels(cons)
    nrows, ncols = grid_shape(len(benches))
    fig, axes = new_figure(
        nrows,
        ncols,
        size=(4.8 * ncols, (0.32 * len(labels) + 1.4) * nrows + 0.9),
        sharey=True,
        layout="constrained",
    )
    for ax, bench in zip(axes, benches, strict=False):
        rows = cons[cons["benchmark"] == bench]
        dot_rows(ax, rows, value, low, high, labels)
        if reference:
            reference(ax, rows)
        ax.set_title(f"{label_of(bench)}\nn = {int(rows[n_col].max())} {N_WORDS[n_col]}")
        ax.set_xlabel(xlabel)
    hide_unused(axes, len(benches))
    legend_models_methods(fig, cons, extra)
    fig.suptitle(title, fontweight="bold")
    return save(fig, run, name)


N_WORDS: dict[str, str] = {
    "n_pairs_both_orders": "pairs (both orders)",
    "n_flip_eligible": "pairs (both parsed)",
    "n_parsed": "parsed verdicts",
}


ONE_ORDER = (
    "This run judged each pair in one order only (inference.both_orders: false): "
    "there is nothing to compare across orders."
)


def _has_both_orders(cons: pd.DataFrame) -> bool:
    return len(cons) > 0 and bool((cons["n_pairs_both_orders"] > 0).any())


@styled
def consistency_figure(cons: pd.DataFrame, run: RunFolder) -> Figure:
    """Positional consistency: pairs judged right in both orders (the paper's measure), per
    benchmark, model and method, with 95 % bootstrap intervals; the paper's JudgeBench number
    as a hollow diamond where it reports the system."""
    title = "Positional consistency: right in both orders"
    if not _has_both_orders(cons):
        return empty_figure(run, "consistency", title, ONE_ORDER)
    cons = cons[cons["n_pairs_both_orders"] > 0]

    def paper_mark(ax: Axes, rows: pd.DataFrame) -> None:
        from rmlib import paper, scoring

        labels = system_labels(cons)
        y = dict(zip(labels, np.arange(len(labels))[::-1], strict=True))
        for r in rows.to_dict("records"):
            rule = scoring.scoring_of(r["benchmark"])
            if rule not in paper.CONSISTENCY_BENCHMARKS:
                continue
            v = paper.paper_consistency(r["model"], r["method"], rule)
            if v is not None:
                ax.plot(
                    v,
                    y[system_label(r["model"], r["method"])],
                    marker="D",
                    linestyle="",
                    markerfacecolor="none",
                    markeredgecolor="k",
                    markersize=9,
                )

    return _bias_panels(
        cons,
        run,
        "consistency",
        title,
        "both_correct",
        "ci_low",
        "ci_high",
        "right in both orders (%, 95 % CI)",
        "n_pairs_both_orders",
        paper_mark,
        paper_handle() if _has_paper_consistency(cons) else None,
    )


def _has_paper_consistency(df: pd.DataFrame) -> bool:
    """A benchmark whose consistency the paper states alone is drawn (its marker is shown)."""
    from rmlib import paper, scoring

    rules = {scoring.scoring_of(str(b)) for b in set(df["benchmark"])}
    return bool(rules & paper.CONSISTENCY_BENCHMARKS)


@styled
def flip_rates(cons: pd.DataFrame, run: RunFolder) -> Figure:
    """Flip rate: among pairs with both verdicts parsed, how often the chosen response changes
    when the order is swapped (the judge picked the same slot twice). 0 % is order-proof; 100 %
    means the slot, not the content, decides."""
    title = "Flip rate: the verdict follows the slot when the order is swapped"
    if not _has_both_orders(cons):
        return empty_figure(run, "flip_rate", title, ONE_ORDER)
    cons = cons[cons["n_pairs_both_orders"] > 0]
    return _bias_panels(
        cons,
        run,
        "flip_rate",
        title,
        "flip_rate",
        "flip_ci_low",
        "flip_ci_high",
        "pairs whose chosen response flips (%, 95 % CI)",
        "n_flip_eligible",
    )


@styled
def first_slot_win_rate(cons: pd.DataFrame, run: RunFolder) -> Figure:
    """Share of parsed verdicts that pick Response 1, against the share a perfect judge would
    give (dotted: the share of pairs whose better response is in slot 1)."""
    title = "First-slot win rate"
    if cons.empty:
        return empty_figure(run, "first_slot", title, "No predictions.")

    def reference(ax: Axes, rows: pd.DataFrame) -> None:
        chance_line(ax, value=100 * float(rows["label1_share"].mean()), label=None)

    return _bias_panels(
        cons,
        run,
        "first_slot",
        title,
        "first_slot_win_rate",
        "first_ci_low",
        "first_ci_high",
        "verdicts choosing Response 1 (%, 95 % CI)",
        "n_parsed",
        reference,
        [
            Line2D(
                [],
                [],
                color=OKABE_ITO["grey"],
                linestyle=":",
                label="share of pairs whose better response is Response 1",
            )
        ],
    )


@styled
def accuracy_by_length(
    length: pd.DataFrame,
    run: RunFolder,
    methods: Sequence[str] = ("greedy", "majority", "reflectrm"),
) -> Figure:
    """Accuracy by how much longer the better response is than the worse (characters; quantile
    bins over the evaluation pairs). A judge with a length bias does well on the right (better
    is longer) and badly on the left."""
    title = "Accuracy by length difference (better minus worse response)"
    df = length[length["method"].isin(methods)] if len(length) else length
    if df.empty:
        return empty_figure(run, "accuracy_by_length", title, "No predictions.")
    models = list(dict.fromkeys(df["model"]))
    fig, axes = new_figure(
        1, len(models), size=(6 * len(models), 4.4), sharey=True, layout="constrained"
    )
    bins = df.drop_duplicates("bin_index").sort_values("bin_index")
    for ax, model in zip(axes, models, strict=True):
        g = df[df["model"] == model]
        ms = [m for m in methods if m in set(g["method"])]
        step = 0.5 / max(1, len(ms))
        for j, method in enumerate(ms):
            h = g[g["method"] == method].sort_values("bin_index")
            x = h["bin_index"].to_numpy() - 0.25 + step * (j + 0.5)
            # matplotlib errorbar: the intervals come computed by rmlib.analysis (see plots.style)
            ax.errorbar(
                x,
                100 * h["accuracy"],
                yerr=err(h["accuracy"], h["ci_low"], h["ci_high"]),
                fmt="-o",
                color=METHOD_COLORS.get(method, "k"),
                capsize=3,
                label=method_label(method),
            )
        npairs = g.groupby("bin_index")["n_pairs"].max()
        ax.set_xticks(
            bins["bin_index"],
            [
                f"{b}\n({int(npairs.get(i, 0))} pairs)"
                for b, i in zip(bins["bin"], bins["bin_index"], strict=True)
            ],
        )
        chance_line(ax, axis="y")
        ax.set_ylim(-2, 102)
        ax.set_xlabel("characters: better minus worse response")
        ax.set_ylabel("accuracy (%, both orders, 95 % CI)")
        ax.set_title(f"model: {model}")
        ax.legend(loc="lower right")
    fig.suptitle(title, fontweight="bold")
    return save(fig, run, "accuracy_by_length")
