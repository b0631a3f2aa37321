"""The inference methods, in one registry: name, stage, vote rule and label.

Every table's `method` column, the order methods are listed in, which methods need stage 2, the
figures' legend labels and colours all come from `REGISTRY`. A vote is a pure function of one
pair's stage-1 verdicts, its anchors and the winners stage 2 found for them (`PairVotes`), so
adding a vote over the existing stages is a rule here and an entry in `REGISTRY`: the
predictions table, the analysis tables (`rmlib.analysis`), the figures (colour, label) and
`run_models.sort_rows` pick it up.

What a new *stage-2 plan* (a new anchor whose critique the others are compared with, as
'random_anchor' has) needs besides: its calls in `rmlib.reflect.method` (`_plan_pair`,
`_run_reflections`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from rmlib.reflect.rules import draw_random_winners, final_vote, majority_vote, pair_rng
from rmlib.reflect.settings import Choice

if TYPE_CHECKING:
    from rmlib.reflect.settings import ReflectConfig

# (verdict, anchor index, number of winners): one method's answer for one pair
Outcome = tuple[Choice, int | None, int | None]
FAILED: Outcome = (None, None, None)


@dataclass(frozen=True)
class PairVotes:
    """What the votes of one pair (in one order) read.

    choices: each stage-1 sample's verdict (None: unparsed). anchor: the most confident parsed
    sample (None: nothing parsed). random_anchor: the ablation's drawn anchor (None: not run on
    this pair). winners: per stage-2 plan ('reflectrm', 'random_anchor'), the samples whose
    critique beat that plan's anchor. pruned: per plan, calls skipped as unable to change the
    verdict (the winner count is then partial). greedy: the greedy judgment's verdict.
    """

    key: str
    source: str
    choices: Sequence[Choice]
    anchor: int | None
    random_anchor: int | None = None
    winners: Mapping[str, Sequence[int]] = field(default_factory=dict)
    pruned: Mapping[str, int] = field(default_factory=dict)
    greedy: Choice = None


# A vote rule: the outcome for one pair, or None where the method is not computed for it (a
# baseline switched off, or not run on this benchmark).
Vote = Callable[[PairVotes, "ReflectConfig"], Outcome | None]


@dataclass(frozen=True)
class Method:
    """One inference method. stage: 1 = stage-1 judgments alone, 2 = needs stage 2's winners.
    label: its name in tables and legends (its colour is the figures': rmlib.plots.style)."""

    name: str
    stage: Literal[1, 2]
    vote: Vote
    label: str
    doc: str = ""


def vote_greedy(v: PairVotes, cfg: ReflectConfig) -> Outcome | None:
    return (v.greedy, None, None) if cfg.run_greedy else None


def vote_majority(v: PairVotes, cfg: ReflectConfig) -> Outcome | None:
    rng = pair_rng(cfg.seed, v.key, "majority_tie")
    return majority_vote(list(v.choices), cfg.majority_tie_break, rng), None, None  # type: ignore[arg-type]


def vote_anchor(v: PairVotes, cfg: ReflectConfig) -> Outcome | None:
    if v.anchor is None:
        return FAILED
    return v.choices[v.anchor], v.anchor, None


def vote_reflectrm(v: PairVotes, cfg: ReflectConfig) -> Outcome | None:
    return _winners_vote(v, v.anchor, "reflectrm")


def vote_random_anchor(v: PairVotes, cfg: ReflectConfig) -> Outcome | None:
    if not cfg.random_anchor_on(v.source):
        return None
    if v.anchor is None:  # nothing parsed: no anchor to draw either
        return FAILED
    return _winners_vote(v, v.random_anchor, "random_anchor")


def vote_random_winners(v: PairVotes, cfg: ReflectConfig) -> Outcome | None:
    """As many winners as ReflectRM found, drawn at random (the ablation); a pruned run knows
    only part of the count, so the ablation is not computed there."""
    if cfg.prune_reflections:
        return None
    if v.anchor is None:
        return FAILED
    ch, a = v.choices, v.anchor
    n = len(v.winners.get("reflectrm", []))
    drawn = draw_random_winners(list(ch), a, n, pair_rng(cfg.seed, v.key, "random_winners"))
    return final_vote(ch[a], [ch[i] for i in drawn]), a, len(drawn)  # type: ignore[misc]


def _winners_vote(v: PairVotes, anchor: int | None, plan: str) -> Outcome:
    """The majority of the winners' verdicts, the anchor's added on no winners or a tie."""
    if anchor is None:
        return FAILED
    ch, winners = v.choices, v.winners.get(plan, [])
    # a pruned pair's winner count is partial (its verdict is exact): no count is reported
    n_won = None if v.pruned.get(plan) else len(winners)
    return final_vote(ch[anchor], [ch[i] for i in winners]), anchor, n_won  # type: ignore[arg-type]


REGISTRY: tuple[Method, ...] = (
    Method("greedy", 1, vote_greedy, "greedy", "one greedy judgment"),
    Method("majority", 1, vote_majority, "majority of N", "majority of the N samples"),
    Method("anchor", 1, vote_anchor, "anchor alone", "the most confident sample"),
    Method(
        "random_anchor",
        2,
        vote_random_anchor,
        "random anchor",
        "stage 2 around a randomly drawn anchor (ablation)",
    ),
    Method(
        "random_winners",
        2,
        vote_random_winners,
        "random winners",
        "as many winners as ReflectRM found, drawn at random (ablation)",
    ),
    Method(
        "reflectrm",
        2,
        vote_reflectrm,
        "ReflectRM",
        "majority of the samples whose critique beat the anchor's (the method)",
    ),
)
BY_NAME: dict[str, Method] = {m.name: m for m in REGISTRY}
METHODS: tuple[str, ...] = tuple(m.name for m in REGISTRY)
# The methods whose verdict depends on stage 2 (the others are stage 1 alone)
STAGE2_METHODS: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.stage == 2)


def pair_outcomes(v: PairVotes, cfg: ReflectConfig) -> dict[str, Outcome]:
    """Every registered method's outcome for one pair, in registry order (those it computes)."""
    out = {}
    for m in REGISTRY:
        outcome = m.vote(v, cfg)
        if outcome is not None:
            out[m.name] = outcome
    return out
