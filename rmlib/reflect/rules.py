"""The method's pure rules over plain values: the anchor, the reflection plan, the votes, the
exact pruning of stage-2 calls, the seeded per-pair random streams. Every random choice draws from
a generator seeded by (cfg.seed, pair key, purpose), so a pair's result never depends on which
other pairs are in the run or in what order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from rmlib.reflect.settings import Choice, TieBreak


def parsed_indices(choices: Sequence[Choice]) -> list[int]:
    return [i for i, c in enumerate(choices) if c in (1, 2)]


def select_anchor(choices: Sequence[Choice], confidences: Sequence[float]) -> int | None:
    """Index of the most confident parsed rollout, or None when none parsed.

    Ties (equal confidence) go to the lowest index: samples are exchangeable draws, so this is
    deterministic without favouring either answer. NaN confidence counts as -inf.
    """
    if len(choices) != len(confidences):
        raise ValueError("choices and confidences differ in length")
    best, best_conf = None, -math.inf
    for i in parsed_indices(choices):
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
    others = [i for i in parsed_indices(choices) if i != anchor]
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
    pool = [i for i in parsed_indices(choices) if i != anchor]
    if k > len(pool):
        raise ValueError(f"cannot draw {k} winners from {len(pool)} candidates")
    return sorted(int(i) for i in rng.choice(pool, size=k, replace=False)) if k else []


def pair_rng(seed: int, key: str, purpose: str) -> np.random.Generator:
    """A generator for one random choice of one pair, independent of every other pair."""
    digest = hashlib.sha256(f"{key}\x00{purpose}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])
