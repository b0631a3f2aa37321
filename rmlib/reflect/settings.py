"""The `inference` section (`ReflectConfig`: N, sampling, confidence, orders, baselines, the
failure and tie rules) and the predictions table's columns. The methods themselves (names,
stages, votes, labels, colours) are `rmlib.reflect.registry`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rmlib.config import PARAMS, Count, CountOrOff, OpenShare, Positive, Seed, doc
from rmlib.generation.base import SamplingParams

Choice = int | None


TieBreak = Literal["none", "first", "random"]


# The cases the analysis of stage-2 calls reports (notebook 06's table and figure): every
# informative call, those whose anchor was wrong (overruling it is right), and right (keeping it)
REFLECTION_CASES: tuple[str, ...] = ("all informative", "anchor wrong", "anchor right")
PREDICTION_COLUMNS: list[str] = [
    "key",
    "id",
    "source",
    "subset",
    "order",
    "label",
    "method",
    "verdict",
    "correct",
    "parse_failure",
    "n_parsed",
    "anchor",
    "n_winners",
    "truncated_prompt",
]


@dataclass
class ReflectConfig:
    __pydantic_config__ = PARAMS

    """Settings of two-stage inference; the `inference` section of a params file."""

    n_samples: Count = doc("Stage-1 judgments per pair (paper: N = 8).", 8)
    # > 0: stage 1 samples (SamplingParams refuses 0 when sampling)
    temperature: Positive = doc("Stage-1 sampling temperature (paper: 1.0).", 1.0)
    top_p: OpenShare = doc("Stage-1 nucleus sampling; 1.0 = off (paper: not stated, off).", 1.0)
    top_k: CountOrOff = doc("Stage-1 top-k sampling; 0 = off (paper: not stated, off).", 0)
    max_new_tokens: Count = doc("Cap on a stage-1 (and greedy baseline) judgment's tokens.", 1024)
    reflection_max_new_tokens: Count = doc("Cap on a stage-2 reflection's tokens (greedy).", 1024)
    confidence_fraction: OpenShare = doc(
        "Confidence = mean log-prob of the lowest ceil(fraction * T) generated tokens "
        "(paper: lowest 10 %).",
        0.10,
    )
    confidence_tokens: Literal["all"] = doc(
        "Which generated tokens the confidence reads (choice): 'all' (the only rule implemented).",
        "all",
    )
    seed: Seed = doc(
        "Seed of stage-1 sampling and of every random draw (slots, random anchor/winners); "
        "unset in a params file = run.seed (one master seed).",
        0,
    )
    both_orders: bool = doc(
        "Run each pair also with the responses swapped, each order through the full method.",
        False,
    )
    swapped_pairs: Count | None = doc(
        "With both_orders: only a seeded draw of about this many pairs of each benchmark (whole "
        "groups: an RM-Bench prompt's cells, an RMB best-of-N item) is also judged swapped; the "
        "rest in the given order only. The paper's Table 5 protocol is 1,000: all of JudgeBench "
        "(350 pairs) and 1,000 of each other set, while Table 1 scores every pair in the given "
        "order, judged once for both. None: every pair in both orders.",
        None,
    )
    run_greedy: bool = doc("Also make one greedy judgment per pair (the 'greedy' baseline).", True)
    run_random_anchor: bool = doc(
        "Run the 'random anchor' baseline (N-1 more reflection calls per pair) on the benchmarks "
        "random_anchor_sources names.",
        True,
    )
    random_anchor_sources: list[str] | None = doc(
        "The benchmarks (data source names, rmlib.data.SOURCES; aliases accepted) the 'random "
        "anchor' baseline runs on, when run_random_anchor: the paper reports it on RewardBench "
        "and RMB only (its inference ablation). None = every benchmark.",
        ["rewardbench", "rmb"],
    )
    reflection_failure: Literal["anchor_wins", "other_wins"] = doc(
        "An unparseable reflection counts as 'anchor_wins' (method.md default) or 'other_wins'.",
        "anchor_wins",
    )
    prune_reflections: bool = doc(
        "Skip stage-2 calls that cannot change the final verdict (exact: same verdicts as the "
        "full method). Calls whose two critiques disagree run first, the rest only when still "
        "needed. Every informative call still runs, so reflection accuracy is unchanged; but the "
        "winner count is then partial, so the 'random_winners' baseline is not computed. "
        "Off: every call (the default, for the analysis-quality notebook).",
        False,
    )
    majority_tie_break: Literal["first", "random", "none"] = doc(
        "Tie rule of the plain majority baseline: 'first' (the earliest parsed sample's verdict, "
        "itself a random draw), 'random' (seeded coin), or 'none' (tie = parse failure).",
        "first",
    )

    def __post_init__(self) -> None:
        if self.swapped_pairs is not None and not self.both_orders:
            raise ValueError("swapped_pairs needs both_orders: true")
        if self.random_anchor_sources is not None:
            from rmlib.data import get_source

            # the registry's names, as pairs carry them (an alias or a typo is caught here)
            self.random_anchor_sources = [
                get_source(name).name for name in self.random_anchor_sources
            ]

    def random_anchor_on(self, source: str) -> bool:
        """Whether the 'random anchor' baseline runs on pairs of `source` (a source name or one
        of its aliases, as a params file's data section may spell it)."""
        if not self.run_random_anchor:
            return False
        if self.random_anchor_sources is None:
            return True
        from rmlib.data import find_source

        spec = find_source(source)
        return (spec.name if spec else source) in self.random_anchor_sources

    def sampling_params(self) -> SamplingParams:
        """Stage-1 settings (sampled)."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            do_sample=True,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
        )

    def greedy_params(self) -> SamplingParams:
        """The greedy baseline's settings (one judgment, do_sample=False)."""
        return SamplingParams.greedy(self.max_new_tokens)

    def reflection_params(self) -> SamplingParams:
        """Stage-2 settings (greedy, as in the paper)."""
        return SamplingParams.greedy(self.reflection_max_new_tokens)
