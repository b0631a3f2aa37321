"""The run's result tables: accuracy, paired comparisons, analysis quality, position bias.

Pure functions over the tables a run folder holds (`pairs_eval`, and per evaluated model
`rollouts_<m>`, `reflections_<m>`, `predictions_<m>`; see `rmlib.workbook.steps`). Each builder also
writes what it computed, JSON-ready, to a section of `metrics.json` (named in its docstring), and
the main table to `tables/results_main.parquet`, so the report and a sweep read them back without
recomputing.

Two kinds of accuracy appear, and the tables say which:
- the **official score** of each benchmark (`rmlib.scoring.score_predictions`: RewardBench's
  weighted sections, RM-Bench's 3x3 matrix, ...) on the benchmark's given order, as in the
  paper's main table (`main_table`, `paired_table`, `headline`);
- **plain accuracy over every judged (pair, order)** for the analysis tables (methods, accuracy
  vs N, length bins): simpler, comparable across methods and models, pooled over both orders.

Parse failures score `cfg.eval.failure_credit` (default 0) everywhere, and are counted beside each
number. Intervals are percentile bootstrap 95 % intervals with `cfg.eval.n_bootstrap` resamples
and seed `cfg.run.seed`; analysis intervals resample whole pairs (both orders and all samples of a
pair stay together), except the calibration bins, which use a Wilson interval (see
`analysis_quality_tables`).

One module per job, named by its notebook: `accuracy` (05: main table, paper layout, subsets,
data volume, paired comparisons, headline), `differences` (05: what differs from the paper),
`quality` (06), `simulation` (06's map of when reflection pays: a model of the method, not a
result), `position` (07), `examples` (06's worked pairs), `common` (shared rates and
formatting). Official scoring rules live in `rmlib.scoring`, figures in `rmlib.plots`.
"""

from rmlib.analysis.accuracy import (
    CROSS_MODEL,
    MAIN_COLUMNS,
    PART_KINDS,
    data_volume_table,
    headline,
    main_table,
    paired_table,
    paper_layout,
    score_all,
    subset_table,
)
from rmlib.analysis.common import (
    PAPER_BENCHMARKS,
    WIDE_INTERVAL,
    ci_bounds,
    fmt_ci,
    methods_in,
    pairs_by_source,
    pooled_rate,
    records,
    rule_label,
    unit_suffix,
    wide_intervals,
    wilson,
)
from rmlib.analysis.differences import configuration_differences, show_differences
from rmlib.analysis.examples import examples_markdown, show_examples, worked_examples
from rmlib.analysis.position import (
    consistency_layout,
    length_bias_table,
    length_bins,
    pair_lengths,
    position_bias_tables,
    stage1_first_slot,
)
from rmlib.analysis.quality import analysis_quality_tables, n_grid
from rmlib.analysis.simulation import (
    JudgeModel,
    measured_parameters,
    reflection_map,
    reflection_pays,
    simulate_pairs,
    simulated_accuracy,
    what_if,
)

__all__ = [
    "CROSS_MODEL",
    "JudgeModel",
    "MAIN_COLUMNS",
    "PAPER_BENCHMARKS",
    "PART_KINDS",
    "WIDE_INTERVAL",
    "analysis_quality_tables",
    "ci_bounds",
    "configuration_differences",
    "consistency_layout",
    "data_volume_table",
    "examples_markdown",
    "fmt_ci",
    "headline",
    "length_bias_table",
    "length_bins",
    "main_table",
    "measured_parameters",
    "methods_in",
    "n_grid",
    "pair_lengths",
    "paired_table",
    "pairs_by_source",
    "paper_layout",
    "pooled_rate",
    "position_bias_tables",
    "stage1_first_slot",
    "records",
    "reflection_map",
    "reflection_pays",
    "rule_label",
    "score_all",
    "show_differences",
    "show_examples",
    "simulate_pairs",
    "simulated_accuracy",
    "subset_table",
    "unit_suffix",
    "what_if",
    "wide_intervals",
    "wilson",
    "worked_examples",
]
