"""Exact pruning of stage-2 calls: the pruned method gives the full method's verdict on every
pair, runs only calls the full method runs, and saves calls where the judge agrees with itself."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from reflect_fakes import Scripted, ScriptedBackend, make_pair, qwen3_tokenizer

from rmlib.generation.store import CachedBackend, GenerationStore
from rmlib.judge.prompts import PromptFormat
from rmlib.reflect import (
    ReflectConfig,
    final_vote,
    reflection_rounds,
    run_reflectrm,
    settled_verdict,
)

# ---- the pure rule, against brute force over every outcome -------------------------------------


def _brute_force(anchor: int, winners: list[int], pending: list[int]) -> int | None:
    outcomes = {
        final_vote(anchor, winners + [c for c, won in zip(pending, mask, strict=True) if won])
        for mask in itertools.product((False, True), repeat=len(pending))
    }
    return outcomes.pop() if len(outcomes) == 1 else None


def test_settled_verdict_matches_every_outcome():
    checked = settled = 0
    for anchor in (1, 2):
        for nw in range(4):
            for winners in itertools.product((1, 2), repeat=nw):
                for npend in range(5):
                    for pending in itertools.product((1, 2), repeat=npend):
                        got = settled_verdict(anchor, list(winners), list(pending))
                        assert got == _brute_force(anchor, list(winners), list(pending)), (
                            anchor,
                            winners,
                            pending,
                        )
                        checked += 1
                        settled += got is not None
    assert 0 < settled < checked  # both answers occur: the check can fail either way


def test_settled_verdict_cases():
    assert settled_verdict(1, [], [1, 1, 1]) == 1  # unanimous: nothing can overturn the anchor
    assert settled_verdict(1, [], [2]) is None  # one dissenting winner would flip it
    assert settled_verdict(1, [2, 2], [1]) == 2  # one agreeing winner cannot catch up
    assert settled_verdict(1, [2], [1]) is None  # ...but here it ties, and the anchor decides
    assert settled_verdict(2, [1], []) == 1  # nothing pending: the final vote itself


def test_reflection_rounds_put_disagreeing_critiques_first():
    choices = [1, 2, None, 1, 2]
    plan = [(1, 2), (3, 1), (4, 1)]
    assert reflection_rounds(choices, 0, plan) == [[(1, 2), (4, 1)], [(3, 1)]]
    assert reflection_rounds([1, 1, 1], 0, [(1, 1), (2, 2)]) == [[(1, 1), (2, 2)]]


# ---- the whole method: full vs pruned on the same scripted rollouts ------------------------------


def _random_script(n_pairs: int, n: int, seed: int) -> tuple[list, dict[str, Scripted]]:
    """Pairs whose judge agrees with itself to varying degrees (some unanimous, some split,
    some with failures), critique qualities and failing reflections drawn at random."""
    rng = np.random.default_rng(seed)
    pairs, script = [], {}
    for k in range(n_pairs):
        label = int(rng.integers(1, 3))
        pair = make_pair(f"P{k}", label)
        p_one = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0])
        samples = []
        for _ in range(n):
            choice = "missing" if rng.random() < 0.1 else (1 if rng.random() < p_one else 2)
            samples.append((choice, list(-rng.random(8))))
        fails = {frozenset(map(int, rng.choice(n, 2, replace=False))) for _ in range(2)}
        script[pair.key] = Scripted(samples, quality=list(rng.random(n)), refl_fail=fails)
        pairs.append(pair)
    return pairs, script


@pytest.fixture(scope="module")
def tokenizer():
    return qwen3_tokenizer()


def _cfg(**kw) -> ReflectConfig:
    kw.setdefault("n_samples", 6)
    kw.setdefault("random_anchor_sources", None)  # the fakes' source "t": every benchmark
    return ReflectConfig(max_new_tokens=64, reflection_max_new_tokens=32, **kw)


def _verdicts(result, method: str) -> dict[str, object]:
    p = result.predictions[result.predictions["method"] == method]
    return {
        k: (None if pd.isna(v) else int(v)) for k, v in zip(p["key"], p["verdict"], strict=True)
    }


@pytest.mark.parametrize("failure", ["anchor_wins", "other_wins"])
def test_pruned_method_gives_the_full_verdict_on_every_pair(tokenizer, failure):
    pairs, script = _random_script(60, 6, seed=7)
    full_backend, pruned_backend = ScriptedBackend(script), ScriptedBackend(script)
    full = run_reflectrm(
        pairs, full_backend, PromptFormat(tokenizer), _cfg(reflection_failure=failure)
    )
    pruned = run_reflectrm(
        pairs,
        pruned_backend,
        PromptFormat(tokenizer),
        _cfg(reflection_failure=failure, prune_reflections=True),
    )
    for method in ("reflectrm", "random_anchor", "anchor", "majority", "greedy"):
        assert _verdicts(pruned, method) == _verdicts(full, method), method
    assert "random_winners" not in set(pruned.predictions["method"])  # needs the full count

    # only calls the full method makes, and executed + pruned = all of them, per method
    assert set(pruned_backend.reflections_seen) <= set(full_backend.reflections_seen)
    saved = pruned.counts["reflection_calls_pruned"]
    for method in ("reflectrm", "random_anchor"):
        ran = pruned.counts["reflection_calls"].get(method, 0)
        assert ran + saved[method] == full.counts["reflection_calls"][method], method
        assert saved[method] > 0, method
    assert full.counts["reflection_calls_pruned"] == {"reflectrm": 0, "random_anchor": 0}

    # every informative call (critiques disagree) still runs: reflection accuracy is unchanged
    def informative(r):
        refl = r.reflections
        return refl[refl["prefers_correct"].notna()][["key", "method", "i", "prefers_correct"]]

    pd.testing.assert_frame_equal(
        informative(pruned).reset_index(drop=True), informative(full).reset_index(drop=True)
    )
    # a pruned pair reports no winner count (it would be partial)
    pr = pruned.predictions[pruned.predictions["method"] == "reflectrm"]
    assert pr["n_winners"].isna().sum() > 0


def test_unanimous_pairs_make_no_reflection_call(tokenizer):
    pairs, script = _random_script(30, 4, seed=3)
    pruned = run_reflectrm(
        pairs,
        ScriptedBackend(script),
        PromptFormat(tokenizer),
        _cfg(n_samples=4, prune_reflections=True),
    )
    unanimous = {
        p.key for p in pairs if len({c for c, _ in script[p.key].samples if c in (1, 2)}) == 1
    }
    assert unanimous and pruned.counts["pairs_unanimous"] == len(unanimous)
    assert not unanimous & set(pruned.reflections["key"])


def test_pruned_run_reads_everything_from_the_full_runs_store(tokenizer, tmp_path):
    """On the same stored rollouts, the pruned run generates nothing new."""
    pairs, script = _random_script(20, 4, seed=11)
    store = GenerationStore(tmp_path / "gen.sqlite")
    full = run_reflectrm(
        pairs,
        CachedBackend(ScriptedBackend(script), store, progress=False),
        PromptFormat(tokenizer),
        _cfg(n_samples=4),
    )
    cached = CachedBackend(ScriptedBackend(script), store, progress=False)
    pruned = run_reflectrm(
        pairs, cached, PromptFormat(tokenizer), _cfg(n_samples=4, prune_reflections=True)
    )
    assert cached.stats.misses == 0 and cached.stats.hits > 0
    assert _verdicts(pruned, "reflectrm") == _verdicts(full, "reflectrm")
