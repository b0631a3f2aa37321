"""Official per-benchmark scoring, bootstrap intervals, paired comparison and consistency.


Input is a predictions table (docs/architecture.md): one row per judged pair and order, columns
`id, order` (given/swapped), `verdict` (1, 2 or null = parse failure), `label`, optional
`method`, `subset`. `rmlib.reflect` writes such tables; `load_predictions` reads them from jsonl
or parquet. Scores are fractions in [0, 1].

Scoring rules (docs/benchmarks.md, exact):
- RewardBench: accuracy per subset; a section is the mean of its subsets' accuracies weighted by
  subset size (the official sizes), math-prm weighing 984 (= the six hep-* subsets together);
  the score is the plain mean of the four sections.
- RM-Bench: per prompt a 3x3 matrix M[i][j] = chosen i beats rejected j (styles: concise,
  detailed plain, detailed markdown); averaged over a domain's prompts; hard = cells above the
  diagonal (i < j), normal = the diagonal, easy = below; safety-refuse and safety-response pooled
  into safety; domain = mean of hard, normal, easy; overall = mean of domains.
- RMB: pairwise accuracy per goal (helpfulness, harmlessness); a best-of-N item is right only if
  the best answer beats every loser; headline = mean of the four (pairwise/BoN x goal).
- PPE-Preference, LLMBar, HH-RLHF, the demo, anything else: accuracy (per subset too).
- JudgeBench: each order scores +1 if right, -1 if wrong, 0 on a failure; a pair is correct if
  the sum is positive; per category (knowledge, reasoning, math, coding) and overall.

Parse failures get `failure_credit` (default 0; upstream RewardBench uses 0.5) and are counted
beside every score; RM-Bench's official rule credits them nothing whatever the credit
(`Rule.no_failure_credit`; the result carries a `failure_credit_note`).
A benchmark part that is absent (RM-Bench math in the local copy) is never
averaged away silently: the result says `partial: true` and lists what is missing.

Single-order scores use the order named by `order` ('given' by default; 'both' averages the two
orders of each pair). Bootstrap intervals resample pair ids (RM-Bench: prompts; RMB best-of-N:
items) with replacement, stratified by the unit the official aggregate averages over (subset,
domain, goal, category) so every part stays present, and recompute the official aggregate.

One module per job: `score` (the entry point and the rule a benchmark selects), one module per
official rule (`rewardbench`, `rmbench`, `rmb`, `judgebench`; plain accuracy in `aggregate`),
`bootstrap`, `predictions` (reading and checking tables), `consistency`, `paired`. Adding a
benchmark with an official rule: its loader, its data-registry entry (`rmlib.data.SOURCES`:
scoring, unit, size, display name), and its rule module, registered where the rule is defined
(`@rules.rule(name, ...)`: what the scoring code must know about it, e.g. that it reads both
orders, is a field of its `Rule`) and imported once by `score`. No shared scoring module tests
a benchmark's name.
"""

from rmlib.scoring.aggregate import credited
from rmlib.scoring.bootstrap import CI, bootstrap_ci
from rmlib.scoring.consistency import consistency, paired_rows
from rmlib.scoring.judgebench import JUDGEBENCH_CATEGORIES, judgebench_category
from rmlib.scoring.paired import mcnemar_exact, paired_comparison
from rmlib.scoring.predictions import attach_pairs, load_predictions, validate_predictions
from rmlib.scoring.rewardbench import REWARDBENCH_WEIGHTS, rewardbench_score
from rmlib.scoring.rmbench import rmbench_cell
from rmlib.scoring.score import aggregate, score_file, score_predictions, scoring_of

__all__ = [
    "CI",
    "JUDGEBENCH_CATEGORIES",
    "REWARDBENCH_WEIGHTS",
    "aggregate",
    "attach_pairs",
    "bootstrap_ci",
    "consistency",
    "credited",
    "judgebench_category",
    "load_predictions",
    "mcnemar_exact",
    "paired_comparison",
    "paired_rows",
    "rewardbench_score",
    "rmbench_cell",
    "score_file",
    "score_predictions",
    "scoring_of",
    "validate_predictions",
]
