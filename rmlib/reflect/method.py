"""`run_reflectrm`: the whole method and its baselines over a backend, in one batched call per
stage, returning the rollouts, reflections, predictions, greedy and count tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from rmlib.data.pair import Pair, both_orders
from rmlib.generation.base import Backend
from rmlib.judge import judgments as judge
from rmlib.judge.prompts import PromptFormat
from rmlib.reflect.quality import prefers_correct
from rmlib.reflect.registry import REGISTRY, PairVotes, pair_outcomes
from rmlib.reflect.rules import (
    pair_rng,
    parsed_indices,
    reflection_plan,
    reflection_rounds,
    select_anchor,
    settled_verdict,
)
from rmlib.reflect.settings import PREDICTION_COLUMNS, Choice, ReflectConfig

# The stage-2 plans: whose critique each sample's is compared with (the anchor; the ablation's
# random anchor). Reflection rows carry the plan as their `method`.
STAGE2_PLANS: tuple[str, ...] = ("reflectrm", "random_anchor")


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
    fmt: PromptFormat,
    cfg: ReflectConfig | None = None,
    *,
    reflection_backend: Backend | None = None,
    stages: Literal[1, 2] = 2,
    samples: bool = True,
) -> ReflectResult:
    """The whole method and its baselines on `pairs` (and their swaps when cfg.both_orders).

    Generation goes through `backend` only (pass a CachedBackend so everything is stored): one
    call for all stage-1 samples, one for the greedy baseline, one for all reflections.
    `reflection_backend` (None = `backend`) runs stage 2 instead: another model reflecting on
    `backend`'s judgments (the reflection-only judge of the paper's Figure 4).
    `fmt` renders every prompt (its budget's reflection limit applies to stage 2). How prompts
    are shown is the run's, not inference's: the pipeline builds `fmt` from the run's `prompts`
    and `model` sections (`PromptFormat.of`).

    stages: 1 = stage 1 alone (no reflection is generated; the predictions hold the registry's
    stage-1 methods only, `Method.stage`), 2 = both. samples: off, no stage-1 samples are
    drawn (the greedy baseline alone, no other prediction; with stages 1 only).
    """
    cfg = cfg or ReflectConfig()
    pairs = judged_orders(pairs, cfg)
    _check_unique_keys(pairs)
    if stages == 2 and not samples:
        raise ValueError("stage 2 reflects on stage 1's samples: samples=False needs stages=1")
    rollouts = judge.judge_pairs(
        pairs if samples else [],
        backend,
        fmt,
        n=cfg.n_samples,
        params=cfg.sampling_params(),
        confidence_fraction=cfg.confidence_fraction,
    )
    greedy = (
        judge.judge_pairs(
            pairs,
            backend,
            fmt,
            n=1,
            params=cfg.greedy_params(),
            confidence_fraction=cfg.confidence_fraction,
        )
        if cfg.run_greedy
        else rollouts.iloc[0:0].copy()
    )
    plans = (
        [  # none without samples: nothing to vote on but the greedy baseline
            _plan_pair(p, rollouts_by_key, cfg)
            for p, rollouts_by_key in _with_groups(pairs, rollouts)
        ]
        if samples
        else []
    )
    stage2 = reflection_backend if reflection_backend is not None else backend
    if stages == 2:
        reflections = _run_reflections(plans, stage2, fmt, cfg)
    else:  # no call: the empty table of a round without calls
        reflections = judge.judge_reflections([], stage2, fmt, params=cfg.reflection_params())
    reflections = _annotate_reflections(reflections, plans)
    predictions = _predictions(plans, reflections, greedy, rollouts, cfg)
    if stages == 1:  # a stage-2 vote without stage 2 would be the anchor's verdict: left out
        stage1 = [m.name for m in REGISTRY if m.stage == 1]
        predictions = predictions[predictions["method"].isin(stage1)].reset_index(drop=True)
    counts = _counts(rollouts, greedy, reflections, plans)
    return ReflectResult(rollouts, reflections, predictions, greedy, counts, cfg)


def judged_orders(pairs: Sequence[Pair], cfg: ReflectConfig) -> list[Pair]:
    """The pairs in every order the run judges: given, and swapped where `cfg` asks or where a
    pair's protocol needs both orders (`meta["both_orders"]`: RewardBench 2's comparisons)."""
    if not cfg.both_orders:
        return both_orders(pairs, 0, cfg.seed)  # a draw of none: only those pairs are twinned
    return both_orders(pairs, cfg.swapped_pairs, cfg.seed)


def _run_reflections(
    plans: list[_PairPlan],
    backend: Backend,
    fmt: PromptFormat,
    cfg: ReflectConfig,
) -> pd.DataFrame:
    """Stage 2 for every pair and anchor: one backend call per round.

    Without pruning there is one round (every planned call). With `cfg.prune_reflections` the
    calls come in the rounds of `reflection_rounds`; before each round a pair whose verdict is
    already settled (`settled_verdict`) drops its remaining calls, counted in `pp.pruned`.
    """
    jobs = []  # (plan, method, anchor index, rounds of calls)
    for pp in plans:
        for method, anchor in zip(STAGE2_PLANS, (pp.anchor, pp.random_anchor), strict=True):
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
            fmt,
            params=cfg.reflection_params(),
            failure_policy=cfg.reflection_failure,
        )
        won = df[df["other_wins"].astype(bool)]
        for method, key, i in zip(won["method"], won["key"], won["i"], strict=True):
            wins.setdefault((method, key), []).append(int(i))
        frames.append(df)
    if not frames:
        return judge.judge_reflections([], backend, fmt, params=cfg.reflection_params())
    return _in_plan_order(pd.concat(frames, ignore_index=True), plans)


def _in_plan_order(refl: pd.DataFrame, plans: list[_PairPlan]) -> pd.DataFrame:
    """Reflection rows by pair (input order), then method, then rollout index."""
    rank = {pp.pair.key: n for n, pp in enumerate(plans)}
    method_rank = {plan: n for n, plan in enumerate(STAGE2_PLANS)}
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
    if cfg.random_anchor_on(pair.source) and anchor is not None:
        parsed = parsed_indices(choices)
        random_anchor = int(pair_rng(cfg.seed, pair.key, "random_anchor").choice(parsed))
        plans["random_anchor"] = reflection_plan(
            choices, random_anchor, pair_rng(cfg.seed, pair.key, "random_anchor_plan")
        )
    return _PairPlan(pair, choices, texts, anchor, random_anchor, plans)


def _annotate_reflections(refl: pd.DataFrame, plans: list[_PairPlan]) -> pd.DataFrame:
    """Add each critique's verdict and correctness, and whether the reflection chose the right one.

    `prefers_correct` is defined only when exactly one of the two critiques is correct (method.md
    §6: the reflection's own accuracy); an unparseable reflection counts as the vote counts it
    (`other_wins`: by default the anchor wins), `rmlib.reflect.quality.prefers_correct`.
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
    refl["prefers_correct"] = prefers_correct(refl)
    return refl


def _predictions(
    plans: list[_PairPlan],
    reflections: pd.DataFrame,
    greedy: pd.DataFrame,
    rollouts: pd.DataFrame,
    cfg: ReflectConfig,
) -> pd.DataFrame:
    """One row per pair and registered method (`rmlib.reflect.registry`), in registry order."""
    wins = {
        (m, k): sorted(int(i) for i in g.loc[g["other_wins"], "i"])
        for (m, k), g in reflections.groupby(["method", "key"], sort=False)
    }
    greedy_choice = {k: c for k, c in zip(greedy["key"], greedy["choice"], strict=True)}
    truncated = rollouts.groupby("key")["truncated_prompt"].any().to_dict()
    rows: list[dict[str, Any]] = []
    for pp in plans:
        key = pp.pair.key
        g = greedy_choice.get(key)
        votes = PairVotes(
            key=key,
            source=pp.pair.source,
            choices=pp.choices,
            anchor=pp.anchor,
            random_anchor=pp.random_anchor,
            winners={plan: wins.get((plan, key), []) for plan in STAGE2_PLANS},
            pruned=pp.pruned,
            greedy=None if g is None or pd.isna(g) else int(g),
        )
        for method, (verdict, anchor, n_winners) in pair_outcomes(votes, cfg).items():
            rows.append(_prediction_row(pp, method, verdict, anchor, n_winners, truncated[key]))
    df = pd.DataFrame(rows, columns=PREDICTION_COLUMNS)
    for col in ("verdict", "anchor", "n_winners"):
        df[col] = df[col].astype("Int64")  # nullable: None = parse failure / not applicable
    return df


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
        "n_parsed": len(parsed_indices(pp.choices)),
        "anchor": anchor,
        "n_winners": n_winners,
        "truncated_prompt": bool(truncated),
    }


def _counts(
    rollouts: pd.DataFrame, greedy: pd.DataFrame, refl: pd.DataFrame, plans: list[_PairPlan]
) -> dict[str, Any]:
    n_parsed = Counter(len(parsed_indices(pp.choices)) for pp in plans)
    refl_fail = refl[refl["failure"].notna()]
    return {
        "n_pairs": len(plans),
        "n_rollouts": len(rollouts),
        "rollout_parse_failures": _kinds(rollouts),
        "greedy_parse_failures": _kinds(greedy),
        "pairs_without_parsed_rollout": n_parsed.get(0, 0),
        "pairs_with_one_parsed_rollout": n_parsed.get(1, 0),
        "pairs_unanimous": sum(
            1 for pp in plans if len({pp.choices[i] for i in parsed_indices(pp.choices)}) == 1
        ),
        "reflection_calls": {str(k): int(v) for k, v in refl["method"].value_counts().items()},
        "reflection_calls_pruned": {
            m: sum(pp.pruned.get(m, 0) for pp in plans) for m in STAGE2_PLANS
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
