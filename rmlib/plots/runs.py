"""Notebooks 02-04's figures: correct rollouts per training pair, GRPO's training curves, parse
failures by kind and stage.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rmlib.plots.style import (
    FAILURE_COLORS,
    MODEL_COLORS,
    OKABE_ITO,
    empty,
    empty_figure,
    new_figure,
    save,
    styled,
)
from rmlib.run.folder import RunFolder
from rmlib.training.importance import (
    CUT_SEQUENCES,
    FAINT_SEQUENCES,
    IS_RATIO_KEYS,
    LOGP_DIFF_KEYS,
    LOW_TOKENS,
)


@styled
def correct_per_pair(rollouts: pd.DataFrame, n: int, run: RunFolder) -> Figure:
    """How many of a training pair's N sampled verdicts are correct (a parse failure counts as
    not correct): easy pairs (all N) are dropped, mixed pairs give Refl. items, all-wrong pairs
    only Pref. items."""
    if rollouts.empty:
        return empty_figure(run, "correct_per_pair", "Correct verdicts per pair", "No rollouts.")
    per_pair = rollouts.groupby("key")["correct"].apply(lambda s: int(s.astype(bool).sum()))
    counts = per_pair.value_counts().reindex(range(n + 1), fill_value=0)
    kinds = {0: "all wrong", n: "easy (all right): dropped"}
    colors = [
        OKABE_ITO["vermillion"] if k == 0 else OKABE_ITO["grey"] if k == n else OKABE_ITO["blue"]
        for k in counts.index
    ]
    fig, (ax,) = new_figure(size=(7.5, 3.8))
    # matplotlib: the counts are tallied anyway for the legend; histplot would stack a bar per kind
    ax.bar(counts.index, counts.to_numpy(), color=colors)
    for k, c in counts.items():
        ax.annotate(str(c), (k, c), xytext=(0, 2), textcoords="offset points", ha="center")
    n_mixed = int(counts.iloc[1:n].sum()) if n > 1 else 0
    handles = [
        Patch(color=OKABE_ITO["vermillion"], label=f"{kinds[0]}: {counts[0]}"),
        Patch(color=OKABE_ITO["blue"], label=f"mixed (Refl. source): {n_mixed}"),
        Patch(color=OKABE_ITO["grey"], label=f"{kinds[n]}: {counts[n]}"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xticks(range(n + 1))
    ax.set_xlabel(f"correct verdicts out of N = {n} (parse failures count as not correct)")
    ax.set_ylabel("training pairs")
    ax.set_title(f"Correct verdicts per training pair ({len(per_pair)} pairs)")
    fig.tight_layout()
    return save(fig, run, "correct_per_pair")


TRAINING_PANELS: tuple[tuple[str, str], ...] = (
    ("reward", "mean reward (correct 1, wrong 0,\nunparseable: penalty)"),
    ("parse_failure_rate", "parse failures (% of completions)"),
    ("kl", "KL to the base model"),
)


@styled
def training_curves(
    log: pd.DataFrame,
    run: RunFolder,
    warn_share: float | None = None,
    reward_range: tuple[float, float] = (0.0, 1.0),
) -> Figure:
    """Reward (with ± one standard deviation across the batch), parse-failure rate and KL over
    optimizer steps, one line per trained variant; below them, when GRPO sampled on vLLM, what
    TRL's importance sampling did (its ratio, the learner/sampler log-prob gap, the shares of
    sequences it zeroed or clipped and left faint, with `warn_share` drawn as a line). Missing
    columns or values leave a panel that says so.

    reward_range: the lowest and highest reward a completion can get (0 and 1, or the
    unparseable penalty when it is below 0): the ± 1 s.d. band is cut there, since no reward
    lies outside it (a band past it would draw rewards that cannot happen)."""
    sampled = log is not None and any(
        k in log and log[k].notna().any() for k in (CUT_SEQUENCES, *IS_RATIO_KEYS)
    )
    fig, axes = new_figure(2 if sampled else 1, 3, size=(13, 7.4 if sampled else 3.6))
    if log is None or log.empty or "step" not in log:
        for ax in axes:
            empty(ax, "no training log")
        fig.suptitle("Training curves: nothing was trained in this run")
        return save(fig, run, "training_curves")
    variants = list(dict.fromkeys(log["variant"])) if "variant" in log else ["model"]
    for ax, (col, ylabel) in zip(axes, TRAINING_PANELS, strict=False):
        if col not in log or log[col].isna().all():
            empty(ax, f"'{col}' was not logged")
            continue
        for v, g, color in _variant_rows(log, variants, col):
            y = g[col].astype(float) * (100 if col == "parse_failure_rate" else 1)
            # matplotlib: the band is the batch's logged s.d., not an interval lineplot computes
            ax.plot(g["step"], y, marker=".", color=color, label=f"{v} ({len(g)} steps)")
            if col == "reward" and "reward_std" in g and g["reward_std"].notna().any():
                sd = g["reward_std"].astype(float).fillna(0)
                low, high = (y - sd).clip(*reward_range), (y + sd).clip(*reward_range)
                ax.fill_between(g["step"], low, high, color=color, alpha=0.15)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.legend()
    axes[0].set_title("Reward (band: ± 1 s.d. in the batch, within the reward's range)")
    axes[1].set_title("Parse failures")
    axes[2].set_title("KL divergence")
    if sampled:
        _importance_panels(log, variants, axes[3:], warn_share)
    fig.tight_layout()
    return save(fig, run, "training_curves")


def _variant_rows(log: pd.DataFrame, variants: list, col: str):
    """(variant, its rows with `col` logged in step order, its colour) for each variant."""
    for v in variants:
        g = log[log["variant"] == v] if "variant" in log else log
        yield (
            v,
            g.dropna(subset=[col]).sort_values("step"),
            MODEL_COLORS.get(str(v), OKABE_ITO["black"]),
        )


def _importance_panels(
    log: pd.DataFrame, variants: list, axes: list, warn_share: float | None
) -> None:
    """TRL's importance-sampling ratio (mean, min-max band), the log-prob gap (mean, max
    dashed) and the share of sequences cut, per variant (rmlib.training.importance)."""
    ratio_min, ratio_mean, ratio_max = IS_RATIO_KEYS
    gap_mean, gap_max = LOGP_DIFF_KEYS
    panels = (
        (ratio_mean, "importance-sampling ratio\n(learner / sampler; band: min-max)"),
        (gap_mean, "|learner - sampler| log-prob\n(per token; dashed: max)"),
        (
            CUT_SEQUENCES,
            "% zeroed or clipped sequences;\ndashed: faint sequences; dotted: low tokens",
        ),
    )
    for ax, (col, ylabel) in zip(axes, panels, strict=True):
        if col not in log or log[col].isna().all():
            empty(ax, f"'{col}' was not logged")
            continue
        for v, g, color in _variant_rows(log, variants, col):
            scale = 100 if col == CUT_SEQUENCES else 1
            ax.plot(g["step"], g[col] * scale, marker=".", color=color, label=str(v))
            if col == ratio_mean and ratio_min in g and ratio_max in g:
                ax.fill_between(g["step"], g[ratio_min], g[ratio_max], color=color, alpha=0.15)
            if col == gap_mean and gap_max in g:
                ax.plot(g["step"], g[gap_max], ls="--", color=color, alpha=0.7)
            if col == CUT_SEQUENCES and FAINT_SEQUENCES in g:
                ax.plot(g["step"], g[FAINT_SEQUENCES] * 100, ls="--", color=color, alpha=0.7)
            if col == CUT_SEQUENCES and LOW_TOKENS in g:  # weighted below 1 / clip_max
                ax.plot(g["step"], g[LOW_TOKENS] * 100, ls=":", color=color, alpha=0.7)
        if col == ratio_mean:
            ax.axhline(1.0, color=OKABE_ITO["grey"], lw=0.8)
        if col == CUT_SEQUENCES and warn_share is not None:
            ax.axhline(
                100 * warn_share,
                color=OKABE_ITO["vermillion"],
                ls=":",
                label=f"warning above {100 * warn_share:.0f} %",
            )
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.legend()
    axes[0].set_title("Importance-sampling ratio")
    axes[1].set_title("Learner / sampler gap")
    axes[2].set_title("Sequences cut or faint, tokens low")


FAILURE_STAGES: tuple[tuple[str, str], ...] = (
    ("rollouts", "stage 1 (sampled)"),
    ("greedy", "greedy"),
    ("reflections", "stage 2 (reflection)"),
)


def parse_failure_counts(run: RunFolder, models: Sequence[str]) -> pd.DataFrame:
    """Per model and stage: calls and parse failures by kind (models without tables skipped)."""
    rows = []
    for model in models:
        for table, stage in FAILURE_STAGES:
            name = f"{table}_{model}"
            if not run.has_table(name):
                continue
            df = run.read_table(name)
            kinds = df["failure"].dropna().astype(str).value_counts().to_dict() if len(df) else {}
            rows.append({"model": model, "stage": stage, "calls": len(df), **kinds})
    return pd.DataFrame(rows).fillna(0)


@styled
def parse_failures(run: RunFolder, models: list[str]) -> Figure:
    """Parse failures per model and stage, stacked by kind (no <Result> block, cut off at the
    token limit, empty, both answers, a tie); the label gives failures of all calls."""
    counts = parse_failure_counts(run, models)
    title = "Parse failures by model, stage and kind"
    if counts.empty:
        return empty_figure(
            run, "parse_failures", title, "No judgment tables yet for " + ", ".join(models) + "."
        )
    kinds = [k for k in FAILURE_COLORS if k in counts] + sorted(
        set(counts) - set(FAILURE_COLORS) - {"model", "stage", "calls"}
    )
    fig, (ax,) = new_figure(size=(9, max(2.5, 0.45 * len(counts) + 1.4)))
    y = np.arange(len(counts))[::-1]
    left = np.zeros(len(counts))
    for k in kinds:  # matplotlib: stacked bars of counts tallied per kind (no rows to count)
        vals = counts[k].to_numpy(dtype=float)
        ax.barh(y, vals, left=left, color=FAILURE_COLORS.get(k, OKABE_ITO["black"]), label=k)
        left += vals
    labels = []
    for r, total in zip(counts.to_dict("records"), left, strict=True):
        share = 100 * total / r["calls"] if r["calls"] else 0
        labels.append(
            f"{r['model']} · {r['stage']}\n{int(total)} of {int(r['calls'])} ({share:.0f} %)"
        )
    ax.set_yticks(y, labels)
    ax.set_xlabel("parse failures (count)")
    ax.set_title(title)
    if kinds:
        ax.legend(title="kind", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.text(0.5, 0.5, "no parse failures", transform=ax.transAxes, ha="center")
    ax.set_xlim(0, max(1.0, float(left.max()) * 1.1))
    fig.tight_layout()
    return save(fig, run, "parse_failures")
