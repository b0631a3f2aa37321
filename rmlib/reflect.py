"""Two-stage reflective inference (ReflectRM, method.md §4) and its baselines.

Stage 1 samples N judgments of a pair; the most confident parsed one is the *anchor*. Stage 2
asks the judge, greedily, to compare each other parsed judgment's critique with the anchor's
(slots drawn at random); the *winners* are those whose critique beat the anchor's. The final
verdict is the majority of the winners' verdicts, the anchor added when there are no winners or
they tie.

The selection and voting rules are pure functions over plain values (`select_anchor`,
`reflection_plan`, `final_vote`, `majority_vote`; each judgment's confidence is
`rmlib.judge.confidence`); `run_reflectrm` wires them to a backend through `rmlib.judge`, in one
batched backend call per stage, and returns the tables. The import runs one way: judge knows
nothing of this module.

Rules on parse failures (method.md §4):
- a rollout whose verdict does not parse takes no part: it cannot be the anchor, a critique or
  a winner; with one parsed rollout it is the answer; with none the prediction is a parse
  failure (verdict None);
- a reflection whose output does not parse counts as "the anchor wins" (`reflection_failure`),
  and is counted.

Every random choice draws from a generator seeded by (cfg.seed, pair key, purpose), so a pair's
result never depends on which other pairs are in the run or in what order.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from rmlib import judge
from rmlib.config import PARAMS, doc
from rmlib.data.pair import Pair, both_orders
from rmlib.generation.base import Backend, SamplingParams

Choice = int | None
TieBreak = Literal["none", "first", "random"]

METHODS: tuple[str, ...] = (
    "greedy",
    "majority",
    "anchor",
    "random_anchor",
    "random_winners",
    "reflectrm",
)
# The methods whose verdict depends on stage 2 (the others are stage 1 alone)
STAGE2_METHODS: tuple[str, ...] = ("random_anchor", "random_winners", "reflectrm")
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

    n_samples: int = doc("Stage-1 judgments per pair (paper: N = 8).", 8)
    temperature: float = doc("Stage-1 sampling temperature (paper: 1.0).", 1.0)
    top_p: float = doc("Stage-1 nucleus sampling; 1.0 = off (paper: not stated, off).", 1.0)
    top_k: int = doc("Stage-1 top-k sampling; 0 = off (paper: not stated, off).", 0)
    max_new_tokens: int = doc("Cap on a stage-1 (and greedy baseline) judgment's tokens.", 1024)
    reflection_max_new_tokens: int = doc("Cap on a stage-2 reflection's tokens (greedy).", 1024)
    confidence_fraction: float = doc(
        "Confidence = mean log-prob of the lowest ceil(fraction * T) generated tokens "
        "(paper: lowest 10 %).",
        0.10,
    )
    confidence_tokens: Literal["all"] = doc(
        "Which generated tokens the confidence reads (choice): 'all' (the only rule implemented).",
        "all",
    )
    seed: int = doc(
        "Seed of stage-1 sampling and of every random draw (slots, random anchor/winners); "
        "unset in a params file = run.seed (one master seed).",
        0,
    )
    both_orders: bool = doc(
        "Run each pair also with the responses swapped, each order through the full method.",
        False,
    )
    swapped_pairs: int | None = doc(
        "With both_orders: only a seeded draw of about this many pairs of each benchmark (whole "
        "groups: an RM-Bench prompt's cells, an RMB best-of-N item) is also judged swapped; the "
        "rest in the given order only. The paper's Table 5 protocol is 1,000: all of JudgeBench "
        "(350 pairs) and 1,000 of each other set, while Table 1 scores every pair in the given "
        "order, judged once for both. None: every pair in both orders.",
        None,
    )
    run_greedy: bool = doc("Also make one greedy judgment per pair (the 'greedy' baseline).", True)
    run_random_anchor: bool = doc(
        "Run the 'random anchor' baseline (N-1 more reflection calls per pair).", True
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
        if self.n_samples < 1:
            raise ValueError("n_samples must be >= 1")
        if not 0 < self.confidence_fraction <= 1:
            raise ValueError("confidence_fraction must be in (0, 1]")
        if self.swapped_pairs is not None and (not self.both_orders or self.swapped_pairs < 1):
            raise ValueError("swapped_pairs needs both_orders: true and a count >= 1")

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


# ---- pure rules ------------------------------------------------------------------------------


def _parsed(choices: Sequence[Choice]) -> list[int]:
    return [i for i, c in enumerate(choices) if c in (1, 2)]


def select_anchor(choices: Sequence[Choice], confidences: Sequence[float]) -> int | None:
    """Index of the most confident parsed rollout, or None when none parsed.

    Ties (equal confidence) go to the lowest index: samples are exchangeable draws, so this is
    deterministic without favouring either answer. NaN confidence counts as -inf.
    """
    if len(choices) != len(confidences):
        raise ValueError("choices and confidences differ in length")
    best, best_conf = None, -math.inf
    for i in _parsed(choices):
        c = confidences[i]
        c = -math.inf if c is None or math.isnan(c) else float(c)
        if best is None or c > best_conf:  # strict: an equal later sample never displaces
            best, best_conf = i, c
    return best


def reflection_plan(
    choices: Sequence[Choice], anchor: int | None, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """Stage-2 calls: (i, anchor_slot) for each other parsed rollout i, in index order.

    `anchor_slot` (1 or 2) is where the anchor's critique is shown; the other critique takes the
    other slot. Slots are fair coin flips from `rng`, one per call in index order.
    """
    if anchor is None:
        return []
    if choices[anchor] not in (1, 2):
        raise ValueError(f"anchor {anchor} did not parse")
    others = [i for i in _parsed(choices) if i != anchor]
    slots = rng.integers(1, 3, size=len(others))
    return [(i, int(s)) for i, s in zip(others, slots, strict=True)]


def majority_vote(
    choices: Sequence[Choice],
    tie_break: TieBreak = "first",
    rng: np.random.Generator | None = None,
) -> int | None:
    """Majority of the parsed choices (None entries ignored); None when nothing parsed.

    tie_break: 'none' returns None on a tie; 'first' returns the earliest parsed choice;
    'random' draws 1 or 2 from `rng` (required).
    """
    parsed = [c for c in choices if c in (1, 2)]
    if not parsed:
        return None
    ones = parsed.count(1)
    twos = len(parsed) - ones
    if ones != twos:
        return 1 if ones > twos else 2
    if tie_break == "none":
        return None
    if tie_break == "first":
        return parsed[0]
    if tie_break == "random":
        if rng is None:
            raise ValueError("tie_break='random' needs rng")
        return int(rng.integers(1, 3))
    raise ValueError(f"unknown tie_break {tie_break!r}")


def final_vote(anchor_choice: int, winner_choices: Sequence[int]) -> int:
    """Majority of the winners; with no winners or a tie, the anchor joins and votes again.

    Two classes and an odd count after the anchor joins a tie: the result is always 1 or 2.
    """
    if anchor_choice not in (1, 2):
        raise ValueError(f"anchor_choice must be 1 or 2, got {anchor_choice!r}")
    if any(c not in (1, 2) for c in winner_choices):
        raise ValueError("winners must all have parsed verdicts")
    vote = majority_vote(winner_choices, tie_break="none")
    if vote is None:
        vote = majority_vote([*winner_choices, anchor_choice], tie_break="none")
    assert vote is not None  # a tie plus one vote cannot tie
    return vote


def settled_verdict(
    anchor_choice: int, winner_choices: Sequence[int], pending_choices: Sequence[int]
) -> int | None:
    """The final verdict if no outcome of the pending reflection calls can change it, else None.

    Each pending call (given by the verdict of its rollout) may or may not add a winner; the
    final vote depends only on how many winners of each verdict there are, so trying every count
    of extra 1-winners and 2-winners covers every outcome. With no pending call this is
    `final_vote`.
    """
    p1 = sum(1 for c in pending_choices if c == 1)
    p2 = len(pending_choices) - p1
    outcomes = {
        final_vote(anchor_choice, [*winner_choices, *([1] * x), *([2] * y)])
        for x in range(p1 + 1)
        for y in range(p2 + 1)
    }
    return outcomes.pop() if len(outcomes) == 1 else None


def reflection_rounds(
    choices: Sequence[Choice], anchor: int, plan: Sequence[tuple[int, int]]
) -> list[list[tuple[int, int]]]:
    """The calls of `plan` in pruning order: those whose critique disagrees with the anchor's,
    then those that agree (a disagreeing winner is the only way to overturn the anchor, so
    when none wins the agreeing calls are moot). Empty rounds are dropped."""
    disagree = [c for c in plan if choices[c[0]] != choices[anchor]]
    agree = [c for c in plan if choices[c[0]] == choices[anchor]]
    return [r for r in (disagree, agree) if r]


def draw_random_winners(
    choices: Sequence[Choice], anchor: int, k: int, rng: np.random.Generator
) -> list[int]:
    """k distinct rollouts drawn from the parsed non-anchor ones (sorted indices)."""
    pool = [i for i in _parsed(choices) if i != anchor]
    if k > len(pool):
        raise ValueError(f"cannot draw {k} winners from {len(pool)} candidates")
    return sorted(int(i) for i in rng.choice(pool, size=k, replace=False)) if k else []


def pair_rng(seed: int, key: str, purpose: str) -> np.random.Generator:
    """A generator for one random choice of one pair, independent of every other pair."""
    digest = hashlib.sha256(f"{key}\x00{purpose}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


# ---- the whole method over a backend ---------------------------------------------------------


@dataclass
class ReflectResult:
    """Tables of one run of the method (see docs/architecture.md for their columns).

    rollouts: one row per stage-1 sample; greedy: one row per pair (greedy baseline; empty when
    skipped); reflections: one row per stage-2 call (`method` says for which anchor);
    predictions: one row per (pair key, method); counts: calls, failures, truncations.
    """

    rollouts: pd.DataFrame
    reflections: pd.DataFrame
    predictions: pd.DataFrame
    greedy: pd.DataFrame
    counts: dict[str, Any]
    config: ReflectConfig = field(default_factory=ReflectConfig)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "rollouts": self.rollouts,
            "greedy": self.greedy,
            "reflections": self.reflections,
            "predictions": self.predictions,
        }


@dataclass
class _PairPlan:
    pair: Pair
    choices: list[Choice]
    texts: list[str]
    anchor: int | None
    random_anchor: int | None
    plans: dict[str, list[tuple[int, int]]]
    pruned: dict[str, int] = field(default_factory=dict)  # method -> calls skipped (exact)


def run_reflectrm(
    pairs: Sequence[Pair],
    backend: Backend,
    tokenizer: Any,
    cfg: ReflectConfig | None = None,
    budget: Any = None,
    *,
    critique_with_result: bool = False,
    enable_thinking: bool = False,
    reflection_backend: Backend | None = None,
) -> ReflectResult:
    """The whole method and its baselines on `pairs` (and their swaps when cfg.both_orders).

    Generation goes through `backend` only (pass a CachedBackend so everything is stored): one
    call for all stage-1 samples, one for the greedy baseline, one for all reflections.
    `reflection_backend` (None = `backend`) runs stage 2 instead: another model reflecting on
    `backend`'s judgments (the reflection-only judge of the paper's Figure 4).
    `budget` is a `rmlib.prompts.PromptBudget` (None = its defaults; its reflection limit
    applies to stage 2). How prompts are shown is the run's, not inference's: the pipeline passes
    `prompts.critique_with_result` and `model.enable_thinking`.
    """
    cfg = cfg or ReflectConfig()
    pairs = judged_orders(pairs, cfg)
    _check_unique_keys(pairs)
    rollouts = judge.judge_pairs(
        pairs,
        backend,
        tokenizer,
        n=cfg.n_samples,
        params=cfg.sampling_params(),
        budget=budget,
        confidence_fraction=cfg.confidence_fraction,
        enable_thinking=enable_thinking,
    )
    greedy = (
        judge.judge_pairs(
            pairs,
            backend,
            tokenizer,
            n=1,
            params=cfg.greedy_params(),
            budget=budget,
            confidence_fraction=cfg.confidence_fraction,
            enable_thinking=enable_thinking,
        )
        if cfg.run_greedy
        else rollouts.iloc[0:0].copy()
    )
    plans = [
        _plan_pair(p, rollouts_by_key, cfg) for p, rollouts_by_key in _with_groups(pairs, rollouts)
    ]
    shown = {"critique_with_result": critique_with_result, "enable_thinking": enable_thinking}
    stage2 = reflection_backend if reflection_backend is not None else backend
    reflections = _run_reflections(plans, stage2, tokenizer, cfg, budget, **shown)
    reflections = _annotate_reflections(reflections, plans)
    predictions = _predictions(plans, reflections, greedy, rollouts, cfg)
    counts = _counts(rollouts, greedy, reflections, plans)
    return ReflectResult(rollouts, reflections, predictions, greedy, counts, cfg)


def judged_orders(pairs: Sequence[Pair], cfg: ReflectConfig) -> list[Pair]:
    """The pairs in every order the run judges: given, and swapped where `cfg` asks."""
    if not cfg.both_orders:
        return list(pairs)
    return both_orders(pairs, cfg.swapped_pairs, cfg.seed)


def _run_reflections(
    plans: list[_PairPlan],
    backend: Backend,
    tokenizer: Any,
    cfg: ReflectConfig,
    budget: Any,
    *,
    critique_with_result: bool,
    enable_thinking: bool,
) -> pd.DataFrame:
    """Stage 2 for every pair and anchor: one backend call per round.

    Without pruning there is one round (every planned call). With `cfg.prune_reflections` the
    calls come in the rounds of `reflection_rounds`; before each round a pair whose verdict is
    already settled (`settled_verdict`) drops its remaining calls, counted in `pp.pruned`.
    """
    jobs = []  # (plan, method, anchor index, rounds of calls)
    for pp in plans:
        for method, anchor in (("reflectrm", pp.anchor), ("random_anchor", pp.random_anchor)):
            calls = pp.plans.get(method, [])
            if anchor is None or not calls:
                continue
            rounds = (
                reflection_rounds(pp.choices, anchor, calls) if cfg.prune_reflections else [calls]
            )
            jobs.append((pp, method, anchor, rounds))
    frames: list[pd.DataFrame] = []
    wins: dict[tuple[str, str], list[int]] = {}
    for r in range(max((len(j[3]) for j in jobs), default=0)):
        requests = []
        for pp, method, anchor, rounds in jobs:
            if r >= len(rounds) or pp.pruned.get(method):
                continue
            ch = pp.choices
            pending = [ch[i] for rnd in rounds[r:] for i, _ in rnd]
            known = [ch[i] for i in wins.get((method, pp.pair.key), [])]
            if cfg.prune_reflections and settled_verdict(ch[anchor], known, pending) is not None:
                pp.pruned[method] = len(pending)  # type: ignore[assignment]
                continue
            requests += [
                judge.ReflectionRequest(
                    pair=pp.pair,
                    i=i,
                    anchor=anchor,
                    anchor_slot=slot,
                    critique_i=pp.texts[i],
                    critique_anchor=pp.texts[anchor],
                    method=method,
                )
                for i, slot in rounds[r]
            ]
        if not requests:
            continue
        df = judge.judge_reflections(
            requests,
            backend,
            tokenizer,
            params=cfg.reflection_params(),
            budget=budget,
            critique_with_result=critique_with_result,
            enable_thinking=enable_thinking,
            failure_policy=cfg.reflection_failure,
        )
        won = df[df["other_wins"].astype(bool)]
        for method, key, i in zip(won["method"], won["key"], won["i"], strict=True):
            wins.setdefault((method, key), []).append(int(i))
        frames.append(df)
    if not frames:
        return judge.judge_reflections([], backend, tokenizer, params=cfg.reflection_params())
    return _in_plan_order(pd.concat(frames, ignore_index=True), plans)


def _in_plan_order(refl: pd.DataFrame, plans: list[_PairPlan]) -> pd.DataFrame:
    """Reflection rows by pair (input order), then method, then rollout index."""
    rank = {pp.pair.key: n for n, pp in enumerate(plans)}
    method_rank = {"reflectrm": 0, "random_anchor": 1}
    order = sorted(
        range(len(refl)),
        key=lambda n: (
            rank[refl["key"].iat[n]],
            method_rank.get(refl["method"].iat[n], 2),
            int(refl["i"].iat[n]),
        ),
    )
    return refl.iloc[order].reset_index(drop=True)


def _check_unique_keys(pairs: Sequence[Pair]) -> None:
    dup = [k for k, c in Counter(p.key for p in pairs).items() if c > 1]
    if dup:
        raise ValueError(f"duplicate pair keys (each pair and order once): {dup[:3]}")


def _with_groups(pairs: Sequence[Pair], rollouts: pd.DataFrame):
    groups = {k: g.sort_values("sample") for k, g in rollouts.groupby("key", sort=False)}
    for p in pairs:
        yield p, groups[p.key]


def _plan_pair(pair: Pair, rows: pd.DataFrame, cfg: ReflectConfig) -> _PairPlan:
    choices = [None if pd.isna(c) else int(c) for c in rows["choice"]]
    confs = [float(c) for c in rows["confidence"]]
    texts = list(rows["text"])
    anchor = select_anchor(choices, confs)
    plans = {"reflectrm": reflection_plan(choices, anchor, pair_rng(cfg.seed, pair.key, "plan"))}
    random_anchor = None
    if cfg.run_random_anchor and anchor is not None:
        parsed = _parsed(choices)
        random_anchor = int(pair_rng(cfg.seed, pair.key, "random_anchor").choice(parsed))
        plans["random_anchor"] = reflection_plan(
            choices, random_anchor, pair_rng(cfg.seed, pair.key, "random_anchor_plan")
        )
    return _PairPlan(pair, choices, texts, anchor, random_anchor, plans)


def _annotate_reflections(refl: pd.DataFrame, plans: list[_PairPlan]) -> pd.DataFrame:
    """Add each critique's verdict and correctness, and whether the reflection chose the right one.

    `prefers_correct` is defined only when exactly one of the two critiques is correct (method.md
    §6: the reflection's own accuracy); an unparseable reflection counts as not preferring it.
    """
    by_key = {pp.pair.key: pp for pp in plans}
    i_choice, a_choice, label = [], [], []
    for key, i, a in zip(refl["key"], refl["i"], refl["anchor"], strict=True):
        pp = by_key[key]
        i_choice.append(pp.choices[i])
        a_choice.append(pp.choices[a])
        label.append(pp.pair.label)
    refl = refl.copy()
    refl["i_choice"], refl["anchor_choice"], refl["label"] = i_choice, a_choice, label
    refl["i_correct"] = refl["i_choice"] == refl["label"]
    refl["anchor_correct"] = refl["anchor_choice"] == refl["label"]
    picked_other = refl["choice"].notna() & (refl["choice"] != refl["anchor_slot"])
    picked_correct = (picked_other & refl["i_correct"]) | (
        refl["choice"].notna() & ~picked_other & refl["anchor_correct"]
    )
    informative = refl["i_correct"] != refl["anchor_correct"]
    refl["prefers_correct"] = picked_correct.astype("boolean").where(informative, pd.NA)
    return refl


def _predictions(
    plans: list[_PairPlan],
    reflections: pd.DataFrame,
    greedy: pd.DataFrame,
    rollouts: pd.DataFrame,
    cfg: ReflectConfig,
) -> pd.DataFrame:
    wins = {
        (m, k): sorted(int(i) for i in g.loc[g["other_wins"], "i"])
        for (m, k), g in reflections.groupby(["method", "key"], sort=False)
    }
    greedy_choice = {k: c for k, c in zip(greedy["key"], greedy["choice"], strict=True)}
    truncated = rollouts.groupby("key")["truncated_prompt"].any().to_dict()
    rows: list[dict[str, Any]] = []
    for pp in plans:
        key = pp.pair.key
        verdicts = _pair_verdicts(pp, wins, cfg)
        if cfg.run_greedy:
            g = greedy_choice[key]
            verdicts["greedy"] = (None if pd.isna(g) else int(g), None, None)
        for method in METHODS:
            if method not in verdicts:
                continue
            verdict, anchor, n_winners = verdicts[method]
            rows.append(_prediction_row(pp, method, verdict, anchor, n_winners, truncated[key]))
    df = pd.DataFrame(rows, columns=PREDICTION_COLUMNS)
    for col in ("verdict", "anchor", "n_winners"):
        df[col] = df[col].astype("Int64")  # nullable: None = parse failure / not applicable
    return df


def _pair_verdicts(
    pp: _PairPlan, wins: dict[tuple[str, str], list[int]], cfg: ReflectConfig
) -> dict[str, tuple[Choice, int | None, int | None]]:
    """(verdict, anchor index, number of winners) of every rollout-based method for one pair."""
    key, ch = pp.pair.key, pp.choices
    tie_rng = pair_rng(cfg.seed, key, "majority_tie")
    majority = majority_vote(ch, cfg.majority_tie_break, tie_rng)  # type: ignore[arg-type]
    out: dict[str, tuple[Choice, int | None, int | None]] = {"majority": (majority, None, None)}
    if pp.anchor is None:  # nothing parsed: every rollout-based method fails
        for m in ("anchor", "reflectrm", *(() if cfg.prune_reflections else ("random_winners",))):
            out[m] = (None, None, None)
        if cfg.run_random_anchor:
            out["random_anchor"] = (None, None, None)
        return out
    a = pp.anchor
    winners = wins.get(("reflectrm", key), [])
    out["anchor"] = (ch[a], a, None)
    # a pruned pair's winner count is partial (its verdict is exact): no count is reported
    n_won = None if pp.pruned.get("reflectrm") else len(winners)
    out["reflectrm"] = (final_vote(ch[a], [ch[i] for i in winners]), a, n_won)
    if not cfg.prune_reflections:  # the ablation draws as many winners as the method found
        drawn = draw_random_winners(ch, a, len(winners), pair_rng(cfg.seed, key, "random_winners"))
        out["random_winners"] = (final_vote(ch[a], [ch[i] for i in drawn]), a, len(drawn))
    if pp.random_anchor is not None:
        ra = pp.random_anchor
        ra_winners = wins.get(("random_anchor", key), [])
        out["random_anchor"] = (
            final_vote(ch[ra], [ch[i] for i in ra_winners]),
            ra,
            None if pp.pruned.get("random_anchor") else len(ra_winners),
        )
    return out


def _prediction_row(
    pp: _PairPlan,
    method: str,
    verdict: Choice,
    anchor: int | None,
    n_winners: int | None,
    truncated: bool,
) -> dict[str, Any]:
    p = pp.pair
    return {
        "key": p.key,
        "id": p.id,
        "source": p.source,
        "subset": p.subset,
        "order": p.order,
        "label": p.label,
        "method": method,
        "verdict": verdict,
        "correct": verdict == p.label,
        "parse_failure": verdict is None,
        "n_parsed": len(_parsed(pp.choices)),
        "anchor": anchor,
        "n_winners": n_winners,
        "truncated_prompt": bool(truncated),
    }


def _counts(
    rollouts: pd.DataFrame, greedy: pd.DataFrame, refl: pd.DataFrame, plans: list[_PairPlan]
) -> dict[str, Any]:
    n_parsed = Counter(len(_parsed(pp.choices)) for pp in plans)
    refl_fail = refl[refl["failure"].notna()]
    return {
        "n_pairs": len(plans),
        "n_rollouts": len(rollouts),
        "rollout_parse_failures": _kinds(rollouts),
        "greedy_parse_failures": _kinds(greedy),
        "pairs_without_parsed_rollout": n_parsed.get(0, 0),
        "pairs_with_one_parsed_rollout": n_parsed.get(1, 0),
        "pairs_unanimous": sum(
            1 for pp in plans if len({pp.choices[i] for i in _parsed(pp.choices)}) == 1
        ),
        "reflection_calls": {str(k): int(v) for k, v in refl["method"].value_counts().items()},
        "reflection_calls_pruned": {
            m: sum(pp.pruned.get(m, 0) for pp in plans) for m in ("reflectrm", "random_anchor")
        },
        "reflection_parse_failures": {
            str(k): int(v) for k, v in refl_fail["method"].value_counts().items()
        },
        "reflection_failure_kinds": _kinds(refl),
        "truncated_prompts": {
            "judgment_pairs": int(rollouts.groupby("key")["truncated_prompt"].any().sum()),
            "reflection_calls": int(refl["truncated_prompt"].sum()) if len(refl) else 0,
        },
        "generated_tokens": {
            "rollouts": int(rollouts["n_tokens"].sum()),
            "greedy": int(greedy["n_tokens"].sum()) if len(greedy) else 0,
            "reflections": int(refl["n_tokens"].sum()) if len(refl) else 0,
        },
    }


def _kinds(df: pd.DataFrame) -> dict[str, int]:
    if not len(df):
        return {}
    return {str(k): int(v) for k, v in df["failure"].dropna().value_counts().items()}


def majority_at_k(
    rollouts: pd.DataFrame,
    ks: Sequence[int] = (1, 2, 4, 8),
    tie_break: TieBreak = "first",
    seed: int = 0,
) -> pd.DataFrame:
    """Majority vote of each pair's first k samples, for each k: accuracy as N grows (§6).

    Returns a predictions table (method 'majority@k', plus column k). A k larger than a pair's
    sample count raises: the curve would silently flatten otherwise.
    """
    rows: list[dict[str, Any]] = []
    for key, g in rollouts.groupby("key", sort=False):
        g = g.sort_values("sample")
        choices = [None if pd.isna(c) else int(c) for c in g["choice"]]
        first = g.iloc[0]
        for k in ks:
            if k > len(choices):
                raise ValueError(f"majority@{k}: pair {key} has only {len(choices)} samples")
            rng = pair_rng(seed, str(key), f"majority_tie@{k}")
            verdict = majority_vote(choices[:k], tie_break, rng)
            rows.append(
                {
                    "key": key,
                    "id": first["id"],
                    "source": first["source"],
                    "subset": first["subset"],
                    "order": first["order"],
                    "label": first["label"],
                    "method": f"majority@{k}",
                    "k": k,
                    "verdict": verdict,
                    "correct": verdict == first["label"],
                    "parse_failure": verdict is None,
                }
            )
    return pd.DataFrame(rows)


def analysis_quality(
    rollouts: pd.DataFrame,
    reflections: pd.DataFrame,
    predictions: pd.DataFrame,
    n_bins: int = 5,
) -> dict[str, Any]:
    """How analysis quality drives accuracy (method.md §6), from one run's tables.

    rollout_accuracy: share of parsed stage-1 verdicts that are right; reflection_accuracy: how
    often a reflection prefers the correct critique where exactly one of the two is correct
    (failures count as not); winner_accuracy: share of the real method's winners whose verdict
    is right; anchor/final accuracy from the predictions; calibration: parsed rollouts in
    `n_bins` confidence quantile bins (mean confidence, accuracy, n).
    """
    parsed = rollouts[rollouts["choice"].notna()]
    real = reflections[reflections["method"] == "reflectrm"] if len(reflections) else reflections
    informative = real["prefers_correct"].dropna() if len(real) else pd.Series(dtype=bool)
    winners = real[real["other_wins"].astype(bool)] if len(real) else real
    by_method = predictions.groupby("method")["correct"].mean().to_dict()
    return {
        "rollout_accuracy": _mean_or_none(parsed["correct"]),
        "n_parsed_rollouts": len(parsed),
        "reflection_accuracy": _mean_or_none(informative),
        "n_informative_reflections": len(informative),
        "winner_accuracy": _mean_or_none(winners["i_correct"]) if len(winners) else None,
        "n_winners": len(winners),
        "anchor_accuracy": by_method.get("anchor"),
        "final_accuracy": by_method.get("reflectrm"),
        "calibration": calibration_table(parsed, n_bins).to_dict("records"),
    }


def calibration_table(parsed_rollouts: pd.DataFrame, n_bins: int = 5) -> pd.DataFrame:
    """Parsed rollouts in confidence quantile bins: mean confidence, accuracy, count per bin."""
    cols = ["bin", "confidence", "accuracy", "n"]
    conf = parsed_rollouts["confidence"].replace(-math.inf, np.nan)
    ok = conf.notna()
    if not ok.any():
        return pd.DataFrame(columns=cols)
    bins = pd.qcut(conf[ok].rank(method="first"), q=min(n_bins, int(ok.sum())), labels=False)
    df = pd.DataFrame(
        {
            "bin": bins,
            "confidence": conf[ok],
            "correct": parsed_rollouts.loc[ok, "correct"].astype(float),
        }
    )
    out = (
        df.groupby("bin")
        .agg(confidence=("confidence", "mean"), accuracy=("correct", "mean"), n=("correct", "size"))
        .reset_index()
    )
    return out[cols]


def _mean_or_none(x: pd.Series) -> float | None:
    return float(x.astype(float).mean()) if len(x) else None
