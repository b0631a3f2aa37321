"""The figures' shared look and plumbing: one seaborn theme (`theme`) over the Okabe-Ito palette
(one colour per method, one marker per model across all figures), saving as PNG + SVG under the
run folder, empty-figure messages, percent and error-bar helpers.

seaborn draws what it computes from raw rows: the length shares (`length_distributions`) and
the confidence histograms (`confidence_distributions`). Accuracies and their intervals are
computed by rmlib.analysis under each benchmark's official rule (bootstrap, Wilson), and a point
may lie outside its interval (`err`); seaborn 0.13 draws only intervals it computes itself (its
objects interface takes given bounds, but warns under pandas 3), so those dot plots stay
matplotlib `errorbar` calls, as do bars of counts tallied before drawing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rmlib.reflect.registry import REGISTRY
from rmlib.run.folder import RunFolder
from rmlib.run.models import sort_rows
from rmlib.writes import replacing

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}


# One colour and one legend label per method (the labels: rmlib.reflect.registry's), plus the
# analysis figures' own series ("one sample": a single sampled judgment; "winners": the
# winners' own verdicts), which are no inference method. A registered method not named here
# gets the next Okabe-Ito colour no method uses (in the registry's order), so a new vote needs
# no entry here to be drawn.
_METHOD_COLOURS: dict[str, str] = {
    "greedy": "blue",
    "majority": "sky",
    "anchor": "orange",
    "random_anchor": "purple",
    "random_winners": "black",
    "reflectrm": "vermillion",
}
_ANALYSIS_SERIES: dict[str, tuple[str, str]] = {
    "one sample": ("grey", "one sampled judgment"),
    "winners": ("green", "winners' verdicts"),
}


def _method_colours() -> dict[str, str]:
    named = {**_METHOD_COLOURS, **{n: c for n, (c, _) in _ANALYSIS_SERIES.items()}}
    free = iter(c for c in OKABE_ITO if c not in named.values())
    for m in REGISTRY:
        if m.name not in named:
            named[m.name] = next(free, "grey")
    return {name: OKABE_ITO[colour] for name, colour in named.items()}


METHOD_COLORS: dict[str, str] = _method_colours()
METHOD_LABELS: dict[str, str] = {
    **{m.name: m.label for m in REGISTRY},
    **{name: label for name, (_, label) in _ANALYSIS_SERIES.items()},
}


MODEL_COLORS: dict[str, str] = {
    "base": OKABE_ITO["blue"],
    "rft": OKABE_ITO["orange"],
    "same_volume": OKABE_ITO["yellow"],
    "unified": OKABE_ITO["vermillion"],
    "refl_only": OKABE_ITO["purple"],
}


MODEL_MARKERS: dict[str, str] = {
    "base": "o",
    "rft": "s",
    "same_volume": "^",
    "unified": "D",
    "refl_only": "v",
}


FAILURE_COLORS: dict[str, str] = {
    "missing": OKABE_ITO["orange"],
    "truncated": OKABE_ITO["vermillion"],
    "empty": OKABE_ITO["grey"],
    "ambiguous": OKABE_ITO["purple"],
    "tie": OKABE_ITO["sky"],
}


THEME_STYLE = "whitegrid"  # seaborn's: a light grid to read dots and intervals against
THEME_CONTEXT = "paper"  # seaborn's scale for line widths and markers in a notebook-width figure
RC: dict[str, Any] = {  # over the theme: the sizes the figures' layouts are measured for
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.fonttype": "none",  # text stays text in the SVG (searchable, small)
}


PNG_DPI = 150


def save_to(fig: Figure, stem: Path) -> Figure:
    """Write `stem`.png and `stem`.svg, close the figure (no open-figure build-up), return it."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    with replacing(stem.parent / f"{stem.name}.png") as tmp:  # never through a link
        fig.savefig(tmp, format="png", dpi=PNG_DPI, bbox_inches="tight")
    with replacing(stem.parent / f"{stem.name}.svg") as tmp:
        fig.savefig(tmp, format="svg", bbox_inches="tight")
    plt.close(fig)
    return fig


def save(fig: Figure, run: RunFolder, name: str) -> Figure:
    """Save a figure as figures/<name>.png and .svg of the run folder."""
    return save_to(fig, run.figure_path(name))


def theme() -> dict[str, Any]:
    """The one theme of every figure: seaborn's style and context, the Okabe-Ito colours in
    turn (black last), then RC. Applied per figure (`styled`), not by `sns.set_theme`: that
    would restyle every figure a user draws in the same kernel."""
    colors = [c for name, c in OKABE_ITO.items() if name != "black"] + [OKABE_ITO["black"]]
    return {
        **sns.axes_style(THEME_STYLE),
        **sns.plotting_context(THEME_CONTEXT),
        "axes.prop_cycle": cycler(color=colors),
        **RC,
    }


def styled(fn: Callable[..., Figure]) -> Callable[..., Figure]:
    """Draw under the workbook's theme (rcParams apply while artists are created)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with matplotlib.rc_context(theme()):
            return fn(*args, **kwargs)

    return wrapper


def new_figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float], **kw: Any):
    """A pyplot figure (so notebooks display it) and a flat list of its axes."""
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False, **kw)
    return fig, list(axes.ravel())


def empty(ax: Axes, message: str) -> None:
    """Say in the plot why there is nothing to draw."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes)


def empty_figure(run: RunFolder, name: str, title: str, message: str) -> Figure:
    fig, (ax,) = new_figure(size=(7, 2.2))
    ax.set_title(title)
    empty(ax, message)
    return save(fig, run, name)


def pct(x: Any) -> float:
    return math.nan if x is None or pd.isna(x) else 100 * float(x)


def err(values: Sequence[Any], lows: Sequence[Any], highs: Sequence[Any]) -> np.ndarray:
    """Asymmetric error-bar lengths in percent (missing bounds draw no bar)."""
    v = np.array([pct(x) for x in values])
    lo = np.array([pct(x) for x in lows])
    hi = np.array([pct(x) for x in highs])
    below = np.nan_to_num(np.clip(v - lo, 0, None))
    above = np.nan_to_num(np.clip(hi - v, 0, None))
    return np.vstack([below, above])


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def system_label(model: str, method: str) -> str:
    return f"{model} · {method_label(method)}"


def grid_shape(n: int, ncols: int = 3) -> tuple[int, int]:
    cols = max(1, min(ncols, n))
    return math.ceil(n / cols), cols


def hide_unused(axes: list[Axes], used: int) -> None:
    for ax in axes[used:]:
        ax.set_axis_off()


def chance_line(ax: Axes, axis: str = "x", value: float = 50.0, label: str | None = "chance"):
    line = ax.axvline if axis == "x" else ax.axhline
    line(value, color=OKABE_ITO["grey"], linestyle=":", linewidth=1, label=label)


def dot_rows(
    ax: Axes,
    rows: pd.DataFrame,
    value: str,
    low: str,
    high: str,
    labels: list[str],
) -> None:
    """One row per (model, method): a marker at `value` (%), its interval as an error bar
    (matplotlib's: the interval comes computed, which seaborn's dot plots cannot draw)."""
    y = np.arange(len(labels))[::-1]
    pos = dict(zip(labels, y, strict=True))
    for r in rows.to_dict("records"):
        lab = system_label(r["model"], r["method"])
        ax.errorbar(
            pct(r[value]),
            pos[lab],
            xerr=err([r[value]], [r[low]], [r[high]]),
            fmt=MODEL_MARKERS.get(r["model"], "o"),
            color=METHOD_COLORS.get(r["method"], OKABE_ITO["black"]),
            markersize=6,
            capsize=3,
        )
    ax.set_yticks(y, labels)
    ax.set_xlim(-2, 102)


def system_labels(df: pd.DataFrame) -> list[str]:
    order = sort_rows(df)
    return list(
        dict.fromkeys(
            system_label(m, k) for m, k in zip(order["model"], order["method"], strict=True)
        )
    )


def legend_models_methods(fig: Figure, df: pd.DataFrame, extra: list[Any] | None = None) -> None:
    handles = [
        Line2D(
            [],
            [],
            marker=MODEL_MARKERS.get(m, "o"),
            color=OKABE_ITO["black"],
            linestyle="",
            label=f"model: {m}",
        )
        for m in dict.fromkeys(df["model"])
    ]
    handles += [
        Line2D(
            [], [], marker="s", color=METHOD_COLORS.get(k, "k"), linestyle="", label=method_label(k)
        )
        for k in dict.fromkeys(df["method"])
    ]
    fig.legend(
        handles=handles + (extra or []),
        loc="outside lower center",
        ncol=min(5, len(handles) + len(extra or [])),
        frameon=False,
    )


def paper_handle() -> list[Any]:
    return [
        Line2D(
            [],
            [],
            marker="D",
            markerfacecolor="none",
            color=OKABE_ITO["black"],
            linestyle="",
            label="paper (Qwen3-4B)",
        )
    ]
