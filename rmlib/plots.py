"""Every figure of the workbook, drawn from run-folder tables.

Each function takes tables (DataFrames) and the `RunFolder`, draws one figure, saves it as PNG and
SVG under `run.figure_path(name)` through `save`, and returns the matplotlib Figure (a notebook
cell shows it). Figures are closed after saving, so a long batch run holds no open figures, and
nothing needs a display: without one pyplot uses the Agg backend.

Conventions: accuracies in percent; every point or bar with its 95 % interval as an error bar
and its n in a label; parse failures counted in the tables beside the figures; colours from the
Okabe-Ito palette (distinguishable with the common colour-vision deficiencies), one colour per
method and one marker per model across all figures. A figure whose data the run lacks (one
order only, no reflections, a missing table) is still drawn, with a sentence saying why it is
empty.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from rmlib.run_folder import RunFolder

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
METHOD_COLORS: dict[str, str] = {
    "one sample": OKABE_ITO["grey"],
    "greedy": OKABE_ITO["blue"],
    "majority": OKABE_ITO["sky"],
    "anchor": OKABE_ITO["orange"],
    "random_anchor": OKABE_ITO["purple"],
    "random_winners": OKABE_ITO["black"],
    "winners": OKABE_ITO["green"],
    "reflectrm": OKABE_ITO["vermillion"],
}
METHOD_LABELS: dict[str, str] = {
    "one sample": "one sampled judgment",
    "greedy": "greedy",
    "majority": "majority of N",
    "anchor": "anchor alone",
    "random_anchor": "random anchor",
    "random_winners": "random winners",
    "winners": "winners' verdicts",
    "reflectrm": "ReflectRM",
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
RC: dict[str, Any] = {
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


# ---- saving and common pieces ------------------------------------------------------------------


def save_to(fig: Figure, stem: Path) -> Figure:
    """Write `stem`.png and `stem`.svg, close the figure (no open-figure build-up), return it."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(stem.parent / f"{stem.name}.png", dpi=PNG_DPI, bbox_inches="tight")
    fig.savefig(stem.parent / f"{stem.name}.svg", bbox_inches="tight")
    plt.close(fig)
    return fig


def save(fig: Figure, run: RunFolder, name: str) -> Figure:
    """Save a figure as figures/<name>.png and .svg of the run folder."""
    return save_to(fig, run.figure_path(name))


def styled(fn: Callable[..., Figure]) -> Callable[..., Figure]:
    """Draw under the workbook's style (rcParams apply while artists are created)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        with matplotlib.rc_context(RC):
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


def _grid(n: int, ncols: int = 3) -> tuple[int, int]:
    cols = max(1, min(ncols, n))
    return math.ceil(n / cols), cols


def _hide_unused(axes: list[Axes], used: int) -> None:
    for ax in axes[used:]:
        ax.set_axis_off()


def _bench_label(bench: str) -> str:
    from rmlib.results import benchmark_label

    return benchmark_label(bench)


def unit_word(bench: str) -> str:
    """What the n of an official score counts, per benchmark's scoring rule."""
    from rmlib import metrics

    return {
        "rmbench": "prompts (9 pairs each)",
        "rmb": "items",
        "judgebench": "pairs (both orders)",
    }.get(metrics.scoring_of(bench), "pairs")


def chance_line(ax: Axes, axis: str = "x", value: float = 50.0, label: str | None = "chance"):
    line = ax.axvline if axis == "x" else ax.axhline
    line(value, color=OKABE_ITO["grey"], linestyle=":", linewidth=1, label=label)


# ---- 01 data -----------------------------------------------------------------------------------

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
    shares = pd.DataFrame(
        {
            "longer": (diff > 0).groupby(group).mean(),
            "equal": (diff == 0).groupby(group).mean(),
            "shorter": (diff < 0).groupby(group).mean(),
        }
    ).reindex(names)
    left = np.zeros(len(names))
    y = np.arange(len(names))[::-1]
    for col, color in (
        ("longer", OKABE_ITO["green"]),
        ("equal", OKABE_ITO["grey"]),
        ("shorter", OKABE_ITO["vermillion"]),
    ):
        vals = 100 * shares[col].to_numpy()
        b.barh(y, vals, left=left, color=color, label=f"better is {col}")
        left += vals
    b.set_yticks(y, names)
    chance_line(b, label=None)
    b.set_xlim(0, 100)
    b.set_xlabel("pairs (%)")
    b.set_title("Is the better response the longer one?")
    b.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize=8, frameon=False)
    fig.tight_layout()
    return save(fig, run, "length_distributions")


# ---- 02 rollouts, 03 training, 04 inference ------------------------------------------------------


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
def training_curves(log: pd.DataFrame, run: RunFolder) -> Figure:
    """Reward (with ± one standard deviation across the batch), parse-failure rate and KL over
    optimizer steps, one line per trained variant. Missing columns or values leave a panel that
    says so."""
    fig, axes = new_figure(1, 3, size=(13, 3.6))
    if log is None or log.empty or "step" not in log:
        for ax in axes:
            empty(ax, "no training log")
        fig.suptitle("Training curves: nothing was trained in this run")
        return save(fig, run, "training_curves")
    variants = list(dict.fromkeys(log["variant"])) if "variant" in log else ["model"]
    for ax, (col, ylabel) in zip(axes, TRAINING_PANELS, strict=True):
        if col not in log or log[col].isna().all():
            empty(ax, f"'{col}' was not logged")
            continue
        for v in variants:
            g = log[log["variant"] == v] if "variant" in log else log
            g = g.dropna(subset=[col]).sort_values("step")
            color = MODEL_COLORS.get(str(v), OKABE_ITO["black"])
            y = g[col].astype(float) * (100 if col == "parse_failure_rate" else 1)
            ax.plot(g["step"], y, marker=".", color=color, label=f"{v} ({len(g)} steps)")
            if col == "reward" and "reward_std" in g and g["reward_std"].notna().any():
                sd = g["reward_std"].astype(float).fillna(0)
                ax.fill_between(g["step"], y - sd, y + sd, color=color, alpha=0.15)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.legend()
    axes[0].set_title("Reward (band: ± 1 s.d. in the batch)")
    axes[1].set_title("Parse failures")
    axes[2].set_title("KL divergence")
    fig.tight_layout()
    return save(fig, run, "training_curves")


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
    for k in kinds:
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


# ---- 05 results --------------------------------------------------------------------------------


def _dot_rows(
    ax: Axes,
    rows: pd.DataFrame,
    value: str,
    low: str,
    high: str,
    labels: list[str],
) -> None:
    """One row per (model, method): a marker at `value` (%), its interval as an error bar."""
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


def _system_labels(df: pd.DataFrame) -> list[str]:
    from rmlib.results import sort_rows

    order = sort_rows(df)
    return list(
        dict.fromkeys(
            system_label(m, k) for m, k in zip(order["model"], order["method"], strict=True)
        )
    )


def _legend_models_methods(fig: Figure, df: pd.DataFrame, extra: list[Any] | None = None) -> None:
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


@styled
def accuracy_by_benchmark(main: pd.DataFrame, run: RunFolder) -> Figure:
    """Official score of every model and method per benchmark with its 95 % bootstrap interval
    (markers: model; colours: method); the paper's number (Qwen3-4B) as a hollow diamond where
    the paper reports the same system on the same benchmark."""
    if main.empty:
        return empty_figure(run, "accuracy_by_benchmark", "Accuracy", "No scores.")
    benches = list(dict.fromkeys(main["benchmark"]))
    labels = _system_labels(main)
    nrows, ncols = _grid(len(benches))
    fig, axes = new_figure(
        nrows,
        ncols,
        size=(4.6 * ncols, (0.32 * len(labels) + 1.4) * nrows + 0.9),
        sharey=True,
        layout="constrained",
    )
    for ax, bench in zip(axes, benches, strict=False):
        rows = main[main["benchmark"] == bench]
        _dot_rows(ax, rows, "score", "ci_low", "ci_high", labels)
        _paper_marks(ax, rows, labels)
        chance_line(ax)
        n = int(rows["n"].max())
        failures = int(rows["n_parse_failures"].sum())
        ax.set_title(
            f"{_bench_label(bench)}\nn = {n} {unit_word(bench)}, parse failures: {failures}"
        )
        ax.set_xlabel("official score (%, 95 % CI)")
    _hide_unused(axes, len(benches))
    _legend_models_methods(fig, main, _paper_handle() if main["paper"].notna().any() else None)
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
        ax.set_title(_bench_label(bench))
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


# ---- 06 analysis quality -----------------------------------------------------------------------


@styled
def calibration_curve(calibration: pd.DataFrame, run: RunFolder) -> Figure:
    """Accuracy of the parsed stage-1 judgments in confidence quantile bins (Wilson 95 %
    intervals; bin sizes in the legend). The confidence is a mean log-probability, not a
    probability, so there is no diagonal: a useful confidence has accuracy rising to the right."""
    title = "Does confidence predict correctness? (stage-1 judgments)"
    if calibration.empty:
        return empty_figure(run, "calibration", title, "No parsed stage-1 judgments.")
    fig, (ax,) = new_figure(size=(7.5, 4.2))
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
    from rmlib.results import REFLECTION_CASES

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


ANALYSIS_METHODS: tuple[str, ...] = (
    "one sample",
    "greedy",
    "majority",
    "anchor",
    "random_anchor",
    "random_winners",
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
    nrows, ncols = _grid(len(benches), 2)
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
        ax.set_title(f"{_bench_label(bench)} ({int(t['n_pairs'].max())} pairs)")
        ax.legend(loc="lower right", fontsize=8)
    _hide_unused(axes, len(benches))
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
    nrows, ncols = _grid(len(benches), 2)
    fig, axes = new_figure(
        nrows, ncols, size=(6.2 * ncols, 4.2 * nrows), sharey=True, layout="constrained"
    )
    for ax, bench in zip(axes, benches, strict=False):
        t = table[table["benchmark"] == bench]
        for model, g in t.groupby("model", sort=False):
            color = MODEL_COLORS.get(str(model), "k")
            maj = g[g["method"] == "majority"].sort_values("k")
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
        ax.set_title(f"{_bench_label(bench)} ({int(t['n_pairs'].max())} pairs)")
        ax.legend(loc="lower right", fontsize=8)
    _hide_unused(axes, len(benches))
    fig.suptitle(
        title + " (majority@k from stored samples; ReflectRM only at the run's N)",
        fontweight="bold",
    )
    return save(fig, run, "accuracy_vs_n")


# ---- 07 position bias --------------------------------------------------------------------------


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
    labels = _system_labels(cons)
    nrows, ncols = _grid(len(benches))
    fig, axes = new_figure(
        nrows,
        ncols,
        size=(4.8 * ncols, (0.32 * len(labels) + 1.4) * nrows + 0.9),
        sharey=True,
        layout="constrained",
    )
    for ax, bench in zip(axes, benches, strict=False):
        rows = cons[cons["benchmark"] == bench]
        _dot_rows(ax, rows, value, low, high, labels)
        if reference:
            reference(ax, rows)
        ax.set_title(f"{_bench_label(bench)}\nn = {int(rows[n_col].max())} {N_WORDS[n_col]}")
        ax.set_xlabel(xlabel)
    _hide_unused(axes, len(benches))
    _legend_models_methods(fig, cons, extra)
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
        from rmlib import metrics, paper

        labels = _system_labels(cons)
        y = dict(zip(labels, np.arange(len(labels))[::-1], strict=True))
        for r in rows.to_dict("records"):
            if metrics.scoring_of(r["benchmark"]) != "judgebench":
                continue
            v = paper.paper_consistency(r["model"], r["method"], "judgebench")
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
        _paper_handle() if _has_judgebench(cons) else None,
    )


def _has_judgebench(df: pd.DataFrame) -> bool:
    from rmlib import metrics

    return any(metrics.scoring_of(str(b)) == "judgebench" for b in set(df["benchmark"]))


def _paper_handle() -> list[Any]:
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


# ---- sweeps ------------------------------------------------------------------------------------

SWEEP_METHODS: tuple[str, ...] = ("reflectrm", "greedy", "majority")


@styled
def sweep_figure(table: pd.DataFrame, keys: list[str], path_stem: Path) -> Figure:
    """Headline score against the swept parameter(s): one panel per benchmark, one line per
    method (ReflectRM, greedy, majority), 95 % intervals where the headline carries them. Points
    are in sweep order; with several keys the x labels name every key's value."""
    cols = [c for c in table.columns if c.startswith("acc.") and c.count(".") == 2]
    benches = list(dict.fromkeys(c.split(".")[1] for c in cols))
    xlabels = (
        [
            ", ".join(f"{k.split('.')[-1]}={r[k]}" for k in keys)
            if len(keys) > 1
            else str(r[keys[0]])
            for r in table.to_dict("records")
        ]
        if keys
        else list(table["run"])
    )
    nrows, ncols = _grid(max(1, len(benches)), 2)
    fig, axes = new_figure(
        nrows, ncols, size=(6 * ncols, 4 * nrows), sharey=True, layout="constrained"
    )
    if not benches:
        empty(axes[0], "The runs wrote no headline scores (acc.* in metrics.json).")
        return save_to(fig, path_stem)
    x = np.arange(len(table))
    for ax, bench in zip(axes, benches, strict=False):
        for j, method in enumerate(SWEEP_METHODS):
            col = f"acc.{bench}.{method}"
            if col not in table:
                continue
            lo, hi = table.get(f"{col}.ci_low"), table.get(f"{col}.ci_high")
            yerr = err(table[col], lo, hi) if lo is not None and hi is not None else None
            ax.errorbar(
                x + 0.06 * (j - 1),  # dodge: overlapping intervals stay readable
                [pct(v) for v in table[col]],
                yerr=yerr,
                fmt="-o",
                capsize=3,
                color=METHOD_COLORS[method],
                label=method_label(method),
            )
        ax.set_xticks(
            x,
            xlabels,
            rotation=30 if len(keys) > 1 else 0,
            ha="right" if len(keys) > 1 else "center",
        )
        chance_line(ax, axis="y")
        ax.set_ylim(0, 102)
        ax.set_xlabel(" × ".join(keys) if keys else "run")
        ax.set_ylabel("official score (%, 95 % CI)")
        ax.set_title(_bench_label(bench))
        ax.legend(loc="lower right")
    _hide_unused(axes, len(benches))
    fig.suptitle("Sweep: headline score per point", fontweight="bold")
    return save_to(fig, path_stem)
