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

One module per notebook: `data` (01), `runs` (02-04), `accuracy` (05), `quality` (06),
`position` (07), `sweeps` (`rmlib sweep`); `style` holds the palette, markers and saving;
`registry` names every figure: stem, drawing function, caption. Figures
draw tables that `rmlib.analysis` computed; they read no run table themselves beyond what a
caller passes (except the run's parse-failure counts, 04).
"""

from rmlib.plots.accuracy import MAX_PARTS, accuracy_by_benchmark, accuracy_by_subset
from rmlib.plots.data import MAX_SUBSETS_PER_SET, data_overview, length_distributions
from rmlib.plots.position import (
    N_WORDS,
    ONE_ORDER,
    accuracy_by_length,
    consistency_figure,
    first_slot_win_rate,
    flip_rates,
)
from rmlib.plots.quality import (
    ANALYSIS_METHODS,
    CONFIDENCE_BINS,
    MAP_PANELS,
    accuracy_vs_n,
    calibration_curve,
    confidence_distributions,
    confidence_rows,
    method_accuracies,
    reflection_accuracy,
    reflection_map_figure,
)
from rmlib.plots.registry import FIGURES, FigureSpec, caption
from rmlib.plots.runs import (
    FAILURE_STAGES,
    TRAINING_PANELS,
    correct_per_pair,
    parse_failure_counts,
    parse_failures,
    training_curves,
)
from rmlib.plots.style import (
    FAILURE_COLORS,
    METHOD_COLORS,
    METHOD_LABELS,
    MODEL_COLORS,
    MODEL_MARKERS,
    OKABE_ITO,
    PNG_DPI,
    RC,
    chance_line,
    dot_rows,
    empty,
    empty_figure,
    err,
    grid_shape,
    hide_unused,
    legend_models_methods,
    method_label,
    new_figure,
    paper_handle,
    pct,
    save,
    save_to,
    styled,
    system_label,
    system_labels,
    theme,
)
from rmlib.plots.sweeps import SWEEP_METHODS, sweep_figure

__all__ = [
    "FIGURES",
    "FigureSpec",
    "caption",
    "ANALYSIS_METHODS",
    "CONFIDENCE_BINS",
    "FAILURE_COLORS",
    "FAILURE_STAGES",
    "MAX_PARTS",
    "MAP_PANELS",
    "MAX_SUBSETS_PER_SET",
    "METHOD_COLORS",
    "METHOD_LABELS",
    "MODEL_COLORS",
    "MODEL_MARKERS",
    "N_WORDS",
    "OKABE_ITO",
    "ONE_ORDER",
    "PNG_DPI",
    "RC",
    "SWEEP_METHODS",
    "TRAINING_PANELS",
    "accuracy_by_benchmark",
    "accuracy_by_length",
    "accuracy_by_subset",
    "accuracy_vs_n",
    "calibration_curve",
    "confidence_distributions",
    "confidence_rows",
    "chance_line",
    "consistency_figure",
    "correct_per_pair",
    "data_overview",
    "dot_rows",
    "empty",
    "empty_figure",
    "err",
    "first_slot_win_rate",
    "flip_rates",
    "grid_shape",
    "hide_unused",
    "legend_models_methods",
    "length_distributions",
    "method_accuracies",
    "method_label",
    "new_figure",
    "paper_handle",
    "parse_failure_counts",
    "parse_failures",
    "pct",
    "reflection_accuracy",
    "reflection_map_figure",
    "save",
    "save_to",
    "styled",
    "sweep_figure",
    "system_label",
    "system_labels",
    "theme",
    "training_curves",
]
