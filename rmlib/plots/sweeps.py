"""`rmlib sweep`'s figure: each headline number against the swept parameter(s)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rmlib.data import label_of
from rmlib.plots.style import (
    METHOD_COLORS,
    chance_line,
    empty,
    err,
    grid_shape,
    hide_unused,
    method_label,
    new_figure,
    pct,
    save_to,
    styled,
)

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
    nrows, ncols = grid_shape(max(1, len(benches)), 2)
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
            # matplotlib errorbar: the intervals come computed by rmlib.analysis (see plots.style)
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
        ax.set_title(label_of(bench))
        ax.legend(loc="lower right")
    hide_unused(axes, len(benches))
    fig.suptitle("Sweep: headline score per point", fontweight="bold")
    return save_to(fig, path_stem)
