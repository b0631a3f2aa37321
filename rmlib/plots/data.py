"""Notebook 01's figures: the evaluation and training sets (counts, subsets, label balance by
position) and their response lengths.
"""

from __future__ import annotations

import json
import math
from typing import Any

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rmlib.plots.style import OKABE_ITO, chance_line, empty_figure, new_figure, save, styled
from rmlib.run.folder import RunFolder

MAX_SUBSETS_PER_SET = 12


def _set_name(row: Any) -> str:
    split = f"/{row['split']}" if row.get("split") not in (None, "") else ""
    return f"{row['role']}: {row['source']}{split}"


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        return json.loads(value)
    return {}


@styled
def data_overview(summary: pd.DataFrame, run: RunFolder) -> Figure:
    """Pairs per subset of every set, and the share of pairs whose better response is in slot 1
    (a judge that always says "Response 1" scores exactly that share)."""
    if summary.empty:
        return empty_figure(run, "data_overview", "Data overview", "No data sets were loaded.")
    bars: list[tuple[str, str, int]] = []  # (set, subset label, count)
    for row in summary.to_dict("records"):
        name = _set_name(row)
        subsets = sorted(_as_dict(row.get("subsets")).items(), key=lambda kv: -kv[1])
        if len(subsets) > MAX_SUBSETS_PER_SET:
            rest = subsets[MAX_SUBSETS_PER_SET - 1 :]
            subsets = subsets[: MAX_SUBSETS_PER_SET - 1]
            subsets.append((f"{len(rest)} other subsets", sum(v for _, v in rest)))
        bars += [(name, str(s), int(v)) for s, v in subsets]
    sets = list(dict.fromkeys(b[0] for b in bars)) or [
        _set_name(r) for r in summary.to_dict("records")
    ]
    colors = {s: list(OKABE_ITO.values())[1:][i % 8] for i, s in enumerate(sets)}
    height = max(3.0, 0.26 * len(bars) + 1.5)
    fig, (a, b) = new_figure(1, 2, size=(11, height), gridspec_kw={"width_ratios": [3, 2]})
    y = np.arange(len(bars))[::-1]
    # matplotlib: the counts come tallied in the data summary (one bar each, no rows to count)
    a.barh(y, [c for *_, c in bars], color=[colors[s] for s, *_ in bars])
    a.set_yticks(y, [f"{s}" for _, s, _ in bars])
    for yi, (_, _, c) in zip(y, bars, strict=True):
        a.annotate(f"{c:,}", (c, yi), xytext=(3, 0), textcoords="offset points", va="center")
    a.set_xlabel("pairs")
    a.set_title("Pairs per subset")
    a.legend(
        handles=[Patch(color=colors[s], label=s) for s in sets],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        ncol=len(sets),
        frameon=False,
    )
    _label_balance(b, summary, colors)
    fig.suptitle("What the run judges: sizes and label position", fontweight="bold")
    fig.tight_layout()
    return save(fig, run, "data_overview")


def _label_balance(ax: Axes, summary: pd.DataFrame, colors: dict[str, str]) -> None:
    rows = summary.to_dict("records")
    names = [_set_name(r) for r in rows]
    shares = [_as_dict(r.get("label_balance")).get("share") for r in rows]
    y = np.arange(len(rows))[::-1]
    vals = [math.nan if s is None else 100 * float(s) for s in shares]
    # matplotlib: each share comes computed in the data summary (one bar each, nothing to count)
    ax.barh(y, np.nan_to_num(vals), color=[colors.get(n, OKABE_ITO["grey"]) for n in names])
    ax.set_yticks(y, [f"{n}\n(n={int(r['n_pairs']):,})" for n, r in zip(names, rows, strict=True)])
    for yi, v in zip(y, vals, strict=True):
        text = "–" if math.isnan(v) else f"{v:.0f} %"
        ax.annotate(
            text,
            (0 if math.isnan(v) else v, yi),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
        )
    chance_line(ax, label="50 % (balanced)")
    ax.set_xlim(0, 100)
    ax.set_xlabel("pairs whose better response is Response 1 (%)")
    ax.set_title("Label position per set")
    ax.legend(loc="lower right")


@styled
def length_distributions(lengths: pd.DataFrame, run: RunFolder) -> Figure:
    """Characters of the better and the worse response per set, and how often the better one is
    the longer: a set where it usually is rewards a judge that simply prefers length."""
    if lengths.empty:
        return empty_figure(run, "length_distributions", "Response lengths", "No pairs.")
    group = lengths["role"] + ": " + lengths["source"] if "role" in lengths else lengths["source"]
    names = list(dict.fromkeys(group))
    height = max(3.0, 0.7 * len(names) + 1.6)
    fig, (a, b) = new_figure(1, 2, size=(11, height))
    pos = np.arange(len(names))[::-1] * 3.0
    # matplotlib's boxplot, not seaborn's: seaborn 0.13.2 passes `vert=` to it, deprecated in
    # matplotlib 3.11, and the warning would print in notebook 01
    for offset, col, color, label in (
        (0.45, "len_chosen", OKABE_ITO["green"], "better (chosen)"),
        (-0.45, "len_rejected", OKABE_ITO["vermillion"], "worse (rejected)"),
    ):
        data = [lengths.loc[group == n, col].clip(lower=1).to_numpy() for n in names]
        bp = a.boxplot(
            data,
            positions=pos + offset,
            orientation="horizontal",
            widths=0.7,
            patch_artist=True,
            showfliers=False,
            medianprops={"color": OKABE_ITO["black"], "linewidth": 1.5},
        )
        for box in bp["boxes"]:
            box.set(facecolor=color, alpha=0.7)
        a.plot([], [], color=color, linewidth=6, alpha=0.7, label=label)
    a.set_xscale("log")
    plain = matplotlib.ticker.FuncFormatter(
        lambda v, _: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"
    )
    a.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.xaxis.set_major_formatter(plain)
    a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    a.set_yticks(pos, [f"{n}\n(n={int((group == n).sum()):,})" for n in names])
    a.set_xlabel("response length (characters, log scale)")
    a.set_title("Response lengths (boxes: quartiles; whiskers: 1.5 IQR)")
    a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    diff = lengths["len_chosen"] - lengths["len_rejected"]
    longer = np.select([diff > 0, diff == 0], ["longer", "equal"], "shorter")
    sns.histplot(
        y=group.to_numpy(),
        hue=[f"better is {w}" for w in longer],
        hue_order=[f"better is {w}" for w in ("longer", "equal", "shorter")],
        palette=[OKABE_ITO["green"], OKABE_ITO["grey"], OKABE_ITO["vermillion"]],
        multiple="fill",  # each set's bar is its shares, whatever its size
        discrete=True,
        shrink=0.8,
        alpha=1,
        ax=b,
    )
    b.set_yticks(range(len(names)), names)
    b.set_ylim(len(names) - 0.5, -0.5)  # first set on top, as in the boxes beside
    b.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(xmax=1))
    chance_line(b, value=0.5, label=None)
    b.set_xlim(0, 1)
    b.set_xlabel("pairs (%)")
    b.set_title("Is the better response the longer one?")
    sns.move_legend(  # seaborn stacks the first hue rightmost: the legend reads as the bars do
        b,
        "upper center",
        bbox_to_anchor=(0.5, -0.22),
        ncol=3,
        title=None,
        fontsize=8,
        frameon=False,
        reverse=True,
    )
    fig.tight_layout()
    return save(fig, run, "length_distributions")
