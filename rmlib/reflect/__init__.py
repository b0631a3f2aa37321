"""Two-stage reflective inference (ReflectRM, method.md §4) and its baselines.

Stage 1 samples N judgments of a pair; the most confident parsed one is the *anchor*. Stage 2
asks the judge, greedily, to compare each other parsed judgment's critique with the anchor's
(slots drawn at random); the *winners* are those whose critique beat the anchor's. The final
verdict is the majority of the winners' verdicts, the anchor added when there are no winners or
they tie.

The selection and voting rules are pure functions over plain values (`select_anchor`,
`reflection_plan`, `final_vote`, `majority_vote`; each judgment's confidence is
`rmlib.judge.judgments.confidence`); `run_reflectrm` wires them to a backend through
`rmlib.judge.judgments`, in one batched backend call per stage, and returns the tables. The import
runs one way: judge knows nothing of this module.

Rules on parse failures (method.md §4):
- a rollout whose verdict does not parse takes no part: it cannot be the anchor, a critique or
  a winner; with one parsed rollout it is the answer; with none the prediction is a parse
  failure (verdict None);
- a reflection whose output does not parse counts as "the anchor wins" (`reflection_failure`),
  and is counted.

Every random choice draws from a generator seeded by (cfg.seed, pair key, purpose), so a pair's
result never depends on which other pairs are in the run or in what order.

Modules: `settings` (the `inference` section), `rules` (the pure selection and voting rules),
`registry` (the methods: name, stage, vote, label, colour), `method` (`run_reflectrm` over a
backend), `quality` (what notebook 06 reads back).
"""

from rmlib.reflect.method import ReflectResult, judged_orders, run_reflectrm
from rmlib.reflect.quality import (
    analysis_quality,
    calibration_table,
    majority_at_k,
    prefers_correct,
)
from rmlib.reflect.registry import METHODS, REGISTRY, STAGE2_METHODS, Method, PairVotes
from rmlib.reflect.rules import (
    draw_random_winners,
    final_vote,
    majority_vote,
    pair_rng,
    parsed_indices,
    reflection_plan,
    reflection_rounds,
    select_anchor,
    settled_verdict,
)
from rmlib.reflect.settings import (
    PREDICTION_COLUMNS,
    Choice,
    ReflectConfig,
    TieBreak,
)

__all__ = [
    "Choice",
    "METHODS",
    "Method",
    "PairVotes",
    "REGISTRY",
    "PREDICTION_COLUMNS",
    "ReflectConfig",
    "ReflectResult",
    "STAGE2_METHODS",
    "TieBreak",
    "analysis_quality",
    "prefers_correct",
    "calibration_table",
    "draw_random_winners",
    "final_vote",
    "judged_orders",
    "majority_at_k",
    "majority_vote",
    "pair_rng",
    "parsed_indices",
    "reflection_plan",
    "reflection_rounds",
    "run_reflectrm",
    "select_anchor",
    "settled_verdict",
]
