"""Notebook 06's figures: calibration of confidence, reflection accuracy, each stage and baseline,
accuracy as N grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from rmlib.data import label_of
from rmlib.plots.style import (
    METHOD_COLORS,
    MODEL_COLORS,
    MODEL_MARKERS,
    OKABE_ITO,
    chance_line,
    empty,
    empty_figure,
    err,
    grid_shape,
    hide_unused,
    method_label,
    new_figure,
    pct,
    save,
    styled,
)
from rmlib.reflect.registry import METHODS
from rmlib.reflect.settings import REFLECTION_CASES
from rmlib.run.folder import RunFolder


@styled
def calibration_curve(calibration: pd.DataFrame, run: RunFolder) -> Figure:
    """Accuracy of the parsed stage-1 judgments in confidence quantile bins (Wilson 95 %
    intervals; bin sizes in the legend). The confidence is a mean log-probability, not a
    probability, so there is no diagonal: a useful confidence has accuracy rising to the right."""
    title = "Does confidence predict correctness? (stage-1 judgments)"
    if calibration.empty:
        return empty_figure(run, "calibration", title, "No parsed stage-1 judgments.")
    fig, (ax,) = new_figure(size=(7.5, 4.2))
    # matplotlib errorbar: the bins' Wilson intervals come from rmlib.analysis (see plots.style)
    for model, g in calibration.groupby("model", sort=False):
        g = g.sort_values("confidence")
        color = MODEL_COLORS.get(str(model), "k")
        ax.errorbar(
            g["confidence"],
            100 * g["accuracy"],
            yerr=err(g["accuracy"], g["ci_low"], g["ci_high"]),
            fmt="-" + MODEL_MARKERS.get(str(model), "o"),
            color=color,
            capsize=3,
            label=f"{model}: {int(g['n'].sum())} judgments, {len(g)} bins of {_n_range(g['n'])}",
        )
    chance_line(ax, axis="y")
    ax.set_ylim(-2, 102)
    ax.set_xlabel("confidence: mean log-prob of the lowest-probability tokens (bin mean)")
    ax.set_ylabel("correct verdicts (%)")
    ax.set_title(title)
    ax.legend(loc="best")
    fig.tight_layout()
    return save(fig, run, "calibration")


CONFIDENCE_BINS = 20  # bins over all models' confidences: a few judgments per bin in the demo


def confidence_rows(run: RunFolder, models: Sequence[str]) -> pd.DataFrame:
    """Parsed stage-1 judgments with a finite confidence, per model (models without rollouts
    skipped), and whether each was right, as the calibration reads them."""
    frames = []
    for model in models:
        if not run.has_table(f"rollouts_{model}"):
            continue
        r = run.read_table(f"rollouts_{model}")
        r = r[r["choice"].notna() & np.isfinite(r["confidence"].astype(float))]
        right = r["correct"].astype(bool)
        frames.append(pd.DataFrame({"model": model, "confidence": r["confidence"], "right": right}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@styled
def confidence_distributions(
    run: RunFolder, models: Sequence[str], bins: int = CONFIDENCE_BINS
) -> Figure:
    """How the confidences of right and wrong stage-1 judgments are spread, one panel per model,
    stacked per bin: where wrong judgments sit left of right ones, the most confident judgment
    (the anchor) is more often right than a random one."""
    title = "Confidence of right and wrong stage-1 judgments"
    df = confidence_rows(run, models)
    if df.empty:
        return empty_figure(run, "confidence", title, "No parsed stage-1 judgments.")
    names = list(dict.fromkeys(df["model"]))
    fig, axes = new_figure(
        1, len(names), size=(5.2 * len(names), 3.8), sharey=True, layout="constrained"
    )
    edges = np.histogram_bin_edges(df["confidence"], bins=bins)  # shared: panels compare
    for ax, (model, g) in zip(axes, df.groupby("model", sort=False), strict=True):
        verdict = np.where(g["right"], "right", "wrong")
        counts = pd.Series(verdict).value_counts()
        sns.histplot(
            x=g["confidence"].to_numpy(),
            hue=[f"{v} ({counts[v]})" for v in verdict],
            hue_order=[f"{v} ({counts.get(v, 0)})" for v in ("right", "wrong")],
            palette=[OKABE_ITO["green"], OKABE_ITO["vermillion"]],
            bins=edges,
            multiple="stack",  # a bin's height is all its judgments, its red part the wrong ones
            alpha=1,
            ax=ax,
        )
        ax.set_title(f"model: {model} ({len(g)} parsed judgments)")
        ax.set_xlabel("confidence: mean log-prob of the lowest-probability tokens")
        ax.set_ylabel("stage-1 judgments")
        sns.move_legend(  # below the axis: a tall bin at either end would hide under it
            ax, "upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, title=None, frameon=False
        )
    fig.suptitle(title, fontweight="bold")
    return save(fig, run, "confidence")


def _n_range(n: pd.Series) -> str:
    lo, hi = int(n.min()), int(n.max())
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


@styled
def reflection_accuracy(reflection: pd.DataFrame, run: RunFolder) -> Figure:
    """How often a stage-2 reflection prefers the correct critique where exactly one of the two
    is correct: overall, when the anchor is wrong (overruling is right) and when it is right
    (keeping it is right); the real anchor and the random-anchor ablation, per model."""
    title = "Reflection accuracy: does stage 2 prefer the correct critique?"
    df = reflection
    if df.empty or not (df["n"] > 0).any():
        return empty_figure(
            run,
            "reflection_accuracy",
            title,
            "No informative reflection: no pair had one right and one wrong "
            "critique compared (or stage 2 never ran).",
        )
    models = list(dict.fromkeys(df["model"]))
    fig, axes = new_figure(
        1, len(models), size=(5.2 * len(models), 4.2), sharey=True, layout="constrained"
    )
    for ax, model in zip(axes, models, strict=True):
        g = df[df["model"] == model]
        if not (g["n"] > 0).any():
            ax.set_title(f"model: {model}")
            empty(ax, "no informative call:\nits critiques never disagreed\n(or stage 2 never ran)")
            continue
        methods = list(dict.fromkeys(g["method"]))
        width = 0.8 / len(methods)
        for j, method in enumerate(methods):
            h = g[g["method"] == method].set_index("case").reindex(list(REFLECTION_CASES))
            x = np.arange(len(REFLECTION_CASES)) - 0.4 + width * (j + 0.5)
            vals = np.array([pct(v) for v in h["prefers_correct"]])
            # matplotlib bar: its error bars come computed by rmlib.analysis (see plots.style)
            ax.bar(
                x,
                np.nan_to_num(vals),
                width,
                color=METHOD_COLORS.get(method, "k"),
                yerr=err(h["prefers_correct"], h["ci_low"], h["ci_high"]),
                capsize=3,
                label=method_label(method) if method != "reflectrm" else "ReflectRM anchor",
            )
            for xi, v, n in zip(x, vals, h["n"], strict=True):
                text = "n=0" if pd.isna(n) or n == 0 else f"n={int(n)}"
                ax.annotate(
                    text,
                    (xi, 1),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                    color="white" if not math.isnan(v) and v > 8 else "black",
                )
        chance_line(ax, axis="y", label=None)
        ax.set_xticks(
            range(len(REFLECTION_CASES)),
            ["all informative\ncalls", "anchor wrong:\noverrule it", "anchor right:\nkeep it"],
        )
        ax.set_ylim(0, 105)
        ax.set_title(f"model: {model}")
        ax.set_ylabel("prefers the correct critique (%, 95 % CI)")
    handles = [
        Patch(color=METHOD_COLORS[m], label=lab)
        for m, lab in (
            ("reflectrm", "anchor: the most confident judgment (ReflectRM)"),
            ("random_anchor", "anchor: a random judgment (ablation)"),
        )
        if m in set(df["method"])
    ]
    handles.append(Line2D([], [], color=OKABE_ITO["grey"], linestyle=":", label="coin flip"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
    fig.suptitle(title, fontweight="bold")
    return save(fig, run, "reflection_accuracy")


# The method-accuracy figure's series: one sampled judgment, every registered method, and the
# winners' own verdicts beside the final vote they feed.
ANALYSIS_METHODS: tuple[str, ...] = (
    "one sample",
    *(m for m in METHODS if m != "reflectrm"),
    "winners",
    "reflectrm",
)


@styled
def method_accuracies(methods: pd.DataFrame, run: RunFolder) -> Figure:
    """Plain accuracy (both orders pooled) of one sampled judgment, greedy, majority vote, the
    anchor, random anchor, random winners, the winners' own verdicts and ReflectRM's final vote:
    one panel per benchmark, one marker per model, 95 % bootstrap intervals over pairs."""
    title = "Accuracy of each stage and baseline"
    if methods.empty:
        return empty_figure(run, "method_accuracy", title, "No predictions.")
    benches = list(dict.fromkeys(methods["benchmark"]))
    models = list(dict.fromkeys(methods["model"]))
    nrows, ncols = grid_shape(len(benches), 2)
    fig, axes = new_figure(
        nrows, ncols, size=(6.8 * ncols, 4.4 * nrows), sharey=True, layout="constrained"
    )
    order = [m for m in ANALYSIS_METHODS if m in set(methods["method"])]
    step = 0.6 / max(1, len(models))
    for ax, bench in zip(axes, benches, strict=False):
        t = methods[methods["benchmark"] == bench]
        for j, model in enumerate(models):
            g = t[t["model"] == model].set_index("method").reindex(order)
            x = np.arange(len(order)) - 0.3 + step * (j + 0.5)
            # matplotlib errorbar: the intervals come computed by rmlib.analysis (see plots.style)
            ax.errorbar(
                x,
                [pct(v) for v in g["accuracy"]],
                yerr=err(g["accuracy"], g["ci_low"], g["ci_high"]),
                fmt=MODEL_MARKERS.get(model, "o"),
                color=MODEL_COLORS.get(model, "k"),
                capsize=3,
                label=f"model: {model}",
            )
        for xi in np.arange(len(order) - 1) + 0.5:
            ax.axvline(xi, color=OKABE_ITO["grey"], linewidth=0.5, alpha=0.5)
        ax.set_xticks(range(len(order)), [method_label(m) for m in order], rotation=30, ha="right")
        ax.grid(axis="x", visible=False)
        chance_line(ax, axis="y")
        ax.set_ylim(-2, 102)
        ax.set_ylabel("accuracy (%, both orders, 95 % CI)")
        ax.set_title(f"{label_of(bench)} ({int(t['n_pairs'].max())} pairs)")
        ax.legend(loc="lower right", fontsize=8)
    hide_unused(axes, len(benches))
    fig.suptitle(title, fontweight="bold")
    return save(fig, run, "method_accuracy")


@styled
def accuracy_vs_n(table: pd.DataFrame, run: RunFolder) -> Figure:
    """Majority vote of the first k of the N stored samples, for growing k, with ReflectRM at N.
    Only majority@k can be computed after the fact; ReflectRM at a smaller N would need new
    stage-2 calls, so it appears at the run's N only."""
    title = "Accuracy as N grows"
    if table.empty:
        return empty_figure(run, "accuracy_vs_n", title, "No stage-1 samples.")
    benches = list(dict.fromkeys(table["benchmark"]))
    nrows, ncols = grid_shape(len(benches), 2)
    fig, axes = new_figure(
        nrows, ncols, size=(6.2 * ncols, 4.2 * nrows), sharey=True, layout="constrained"
    )
    for ax, bench in zip(axes, benches, strict=False):
        t = table[table["benchmark"] == bench]
        for model, g in t.groupby("model", sort=False):
            color = MODEL_COLORS.get(str(model), "k")
            maj = g[g["method"] == "majority"].sort_values("k")
            # matplotlib: band and error bar come computed by rmlib.analysis (see plots.style)
            ax.plot(
                maj["k"],
                100 * maj["accuracy"],
                "-" + MODEL_MARKERS.get(str(model), "o"),
                color=color,
                label=f"{model} · majority@k",
            )
            ax.fill_between(
                maj["k"], 100 * maj["ci_low"], 100 * maj["ci_high"], color=color, alpha=0.12
            )
            ref = g[g["method"] == "reflectrm"]
            if len(ref):
                ax.errorbar(
                    ref["k"],
                    100 * ref["accuracy"],
                    yerr=err(ref["accuracy"], ref["ci_low"], ref["ci_high"]),
                    fmt="*",
                    markersize=13,
                    color=color,
                    capsize=3,
                    label=f"{model} · ReflectRM at N={int(ref['k'].iloc[0])}",
                )
        ks = sorted(set(t["k"]))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        chance_line(ax, axis="y")
        ax.set_ylim(0, 102)
        ax.set_xlabel("k: samples voting (first k of N)")
        ax.set_ylabel("accuracy (%, both orders; band: 95 % CI)")
        ax.set_title(f"{label_of(bench)} ({int(t['n_pairs'].max())} pairs)")
        ax.legend(loc="lower right", fontsize=8)
    hide_unused(axes, len(benches))
    fig.suptitle(
        title + " (majority@k from stored samples; ReflectRM only at the run's N)",
        fontweight="bold",
    )
    return save(fig, run, "accuracy_vs_n")


# the two panels of the map (rmlib.analysis.simulation.reflection_pays): the y axis of each
MAP_PANELS: dict[str, str] = {
    "same": "reflection accuracy (anchor right and wrong alike)",
    "overrule": "reflection accuracy when the anchor is wrong",
}
MAP_TITLES: dict[str, str] = {
    "same": "(a) one reflection accuracy for both cases",
    "overrule": "(b) overruling a wrong anchor; a right one kept {keep} (the run's)",
}


def _cell_position(value: float, grid: Sequence[float], descending: bool = False) -> float:
    """Where `value` falls on a heatmap axis of cells centred on `grid` (clipped to its ends)."""
    grid = sorted(grid)
    centres = np.arange(len(grid)) + 0.5
    if descending:
        centres = centres[::-1]
    return float(np.interp(value, grid, centres))


@styled
def reflection_map_figure(
    grid: pd.DataFrame, run_table: pd.DataFrame, parameters: pd.DataFrame, run: RunFolder
) -> Figure:
    """ReflectRM minus majority of N, in points, in the model of the method (a model, not a
    result): heatmaps over confidence AUC x reflection accuracy at the run's N and stage-1
    accuracy, with the run placed on each from its measured parameters and, under them, the
    accuracy the model predicts for the run beside the accuracy measured."""
    title = "When does reflection pay? A model of the method, not a result"
    if grid.empty:
        return empty_figure(run, "reflection_map", title, "No simulated map.")
    panels = [p for p in MAP_PANELS if p in set(grid["panel"])]
    fig, axes = new_figure(1, len(panels), size=(6.0 * len(panels), 5.4), layout="constrained")
    gain = 100 * grid["gain"]
    lim = max(float(np.nanmax(np.abs(gain))), 1.0)
    prm = parameters.iloc[0] if len(parameters) else pd.Series(dtype=object)
    for ax, panel in zip(axes, panels, strict=True):
        g = grid[grid["panel"] == panel]
        table = (100 * g.pivot(index="reflection", columns="auc", values="gain")).sort_index(
            ascending=False
        )
        sns.heatmap(
            table,
            ax=ax,
            # blue: ReflectRM above majority, red: below; limits symmetric about 0, so the
            # diverging map's middle is 0 (seaborn's `center` would warn under this matplotlib)
            cmap="vlag_r",
            vmin=-lim,
            vmax=lim,
            annot=np.rint(table.to_numpy()).astype(int),  # whole points, no "-0"
            fmt="d",
            annot_kws={"fontsize": 7},
            cbar=panel == panels[-1],
            cbar_kws={"label": "ReflectRM minus majority of N (points)"},
        )
        ax.set_xticklabels([f"{x:.1f}" for x in table.columns])
        ax.set_yticklabels([f"{y:.1f}" for y in table.index])
        ax.set_xlabel("confidence AUC (right judgment more confident than a wrong one)")
        ax.set_ylabel(MAP_PANELS[panel])
        keep = f"{pct(prm.get('reflection_right', math.nan)):.0f} %"
        ax.set_title(MAP_TITLES[panel].format(keep=keep), fontsize=9)
        _place_run(ax, prm, panel, list(table.columns), list(table.index))
    fixed = ", ".join(
        f"{label} {pct(prm.get(key, math.nan)):.0f} %"
        for key, label in (
            ("accuracy", "stage-1 accuracy"),
            ("parse_rate", "parsed"),
            ("agree_win", "an agreeing critique beats the anchor's"),
        )
    )
    # the within-pair correlations as measured (the model clips them to [0, 1])
    rho = ", ".join(
        f"{label} {float(prm.get(key, math.nan)):.2f}"
        for key, label in (
            ("sample_correlation", "within-pair correlation of samples"),
            ("call_correlation", "of stage-2 calls"),
        )
    )
    fig.suptitle(f"{title}\nN = {prm.get('n_samples')}, {fixed};\n{rho} (the run's)", fontsize=10)
    fig.text(0.01, -0.02, _prediction_line(run_table), fontsize=8, ha="left", va="top", wrap=True)
    return save(fig, run, "reflection_map")


def _place_run(
    ax, prm: pd.Series, panel: str, aucs: Sequence[float], refls: Sequence[float]
) -> None:
    """The run's measured parameters as a star on one panel (nothing where one is missing)."""
    auc = prm.get("confidence_auc", math.nan)
    right, wrong = prm.get("reflection_right", math.nan), prm.get("reflection_wrong", math.nan)
    if panel == "same":  # one accuracy: both cases weighted by their calls
        nr, nw = prm.get("n_reflection_right", 0) or 0, prm.get("n_reflection_wrong", 0) or 0
        y = (nr * right + nw * wrong) / (nr + nw) if nr + nw else math.nan
    else:
        y = wrong
    if not all(isinstance(v, float | int) and math.isfinite(v) for v in (auc, y)):
        ax.text(
            0.5,
            -0.16,
            "the run lacks a parameter: not placed",
            transform=ax.transAxes,
            ha="center",
            fontsize=8,
        )
        return
    x_pos = _cell_position(float(auc), aucs)
    y_pos = _cell_position(float(y), refls, descending=True)
    ax.plot(
        x_pos,
        y_pos,
        marker="*",
        markersize=16,
        color=OKABE_ITO["black"],
        markeredgecolor="white",
        linestyle="none",
    )
    below = y_pos < len(refls) / 2  # upper half of the panel: the label goes below the star
    ax.annotate(
        f"this run\nAUC {auc:.2f}, reflection {y:.2f}",
        (x_pos, y_pos),
        xytext=(10, -30 if below else 10),
        textcoords="offset points",
        fontsize=8,
        bbox={"boxstyle": "round", "fc": "white", "alpha": 0.8},
    )


def _prediction_line(run_table: pd.DataFrame) -> str:
    """'the model predicts for the run ... measured ...', one entry per method."""
    if run_table.empty:
        return ""
    parts = []
    for _, r in run_table.iterrows():
        measured = f"{pct(r['measured']):.1f} % [{pct(r['ci_low']):.1f}, {pct(r['ci_high']):.1f}]"
        predicted = pct(r["predicted"])
        model = f"{predicted:.1f} %" if math.isfinite(predicted) else "none (run not placed)"
        if math.isfinite(predicted) and not r.get("inside", True):
            model += " (outside the interval)"
        parts.append(f"{method_label(str(r['method']))}: model {model}, measured {measured}")
    name = run_table["model"].iloc[0]
    return f"The run ({name}), model from its measured parameters beside measured: " + "; ".join(
        parts
    )
