"""judge: real prompts and verdict parsing over a scripted backend; tables checked cell by cell."""

from __future__ import annotations

import pandas as pd
import pytest
from reflect_fakes import Scripted, ScriptedBackend, make_pair, qwen3_tokenizer

from rmlib.generation.base import Generation, SamplingParams
from rmlib.judge.judgments import (
    REFLECTION_COLUMNS,
    ROLLOUT_COLUMNS,
    ReflectionRequest,
    judge_pairs,
    judge_reflections,
)
from rmlib.judge.prompts import PromptFormat

SCRIPT = {
    "t:A:given": Scripted(
        samples=[(1, [-0.1, -2.0, -0.5]), ("missing", [-0.3]), (2, [])], quality=[0.9, 0.1, 0.5]
    ),
    "t:B:given": Scripted(
        samples=[(2, [-1.0]), ("truncated", [-0.2, -0.2]), (2, [-0.4])],
        quality=[0.1, 0.2, 0.3],
        refl_fail={frozenset({0, 2})},
    ),
}
SAMPLED = SamplingParams(max_new_tokens=16, seed=3)


@pytest.fixture(scope="module")
def fmt():
    return PromptFormat(qwen3_tokenizer())


@pytest.fixture(scope="module")
def rollouts(fmt):
    backend = ScriptedBackend(SCRIPT)
    df = judge_pairs(
        [make_pair("A", 1), make_pair("B", 2)],
        backend,
        fmt,
        n=3,
        params=SAMPLED,
        confidence_fraction=0.5,
    )
    return df, backend


def test_rollout_table_columns_and_values(rollouts):
    df, backend = rollouts
    assert list(df.columns) == list(ROLLOUT_COLUMNS)
    assert len(df) == 6 and backend.calls == [(2, SAMPLED, 3)]  # one batched call
    r = df.set_index(["key", "sample"])
    a0 = r.loc[("t:A:given", 0)]
    assert (a0["id"], a0["source"], a0["subset"], a0["order"], a0["label"]) == (
        "A",
        "t",
        "subA",
        "given",
        1,
    )
    assert a0["choice"] == 1 and pd.isna(a0["failure"]) and bool(a0["correct"])
    assert a0["confidence"] == pytest.approx((-2.0 - 0.5) / 2)  # ceil(0.5 * 3) = 2 lowest
    assert a0["n_tokens"] == 3 and a0["prompt_tokens"] == 7  # the backend's count
    assert not a0["truncated_prompt"]
    assert r.loc[("t:A:given", 1), "failure"] == "missing"
    assert not bool(r.loc[("t:A:given", 1), "correct"])  # False on failure, not NaN
    assert r.loc[("t:A:given", 2), "confidence"] == float("-inf")  # no tokens
    assert not bool(r.loc[("t:A:given", 2), "correct"])  # says 2, label 1
    b1 = r.loc[("t:B:given", 1)]
    assert b1["failure"] == "truncated" and b1["finish_reason"] == "length"
    assert str(df["choice"].dtype) == "Int64"


def test_rollout_table_round_trips_parquet(rollouts, tmp_path):
    df, _ = rollouts
    df.to_parquet(tmp_path / "r.parquet")
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert list(back.loc[0, "logprobs"]) == [-0.1, -2.0, -0.5]
    assert back["choice"].isna().sum() == 2


def test_reflections(fmt, rollouts):
    df, _ = rollouts
    pairs = {"t:A:given": make_pair("A", 1), "t:B:given": make_pair("B", 2)}
    text = dict(zip(zip(df["key"], df["sample"], strict=True), df["text"], strict=True))

    def req(key, i, anchor, slot):
        return ReflectionRequest(pairs[key], i, anchor, slot, text[(key, i)], text[(key, anchor)])

    requests = [
        req("t:A:given", 2, 0, 1),  # A: s2 (q .5) vs anchor s0 (q .9) -> anchor (slot 1) wins
        req("t:A:given", 2, 0, 2),  # the same with slots exchanged -> anchor (slot 2) wins
        req("t:B:given", 0, 2, 2),  # B: s0 vs s2 is scripted to fail -> anchor wins, counted
        # B: s1 (q .2; a hand-written critique) vs anchor s0 (q .1) -> other wins
        ReflectionRequest(pairs["t:B:given"], 1, 0, 1, "CRIT B/given/s1", text[("t:B:given", 0)]),
    ]
    backend = ScriptedBackend(SCRIPT)
    out = judge_reflections(requests, backend, fmt, params=SamplingParams.greedy(8))
    assert list(out.columns) == list(REFLECTION_COLUMNS)
    assert backend.calls[0][0] == 4 and backend.calls[0][2] == 1
    assert list(out["choice"].astype("object").where(out["choice"].notna(), None)) == [
        1,
        2,
        None,
        2,
    ]
    assert list(out["other_wins"]) == [False, False, False, True]
    assert list(out["failure"].fillna("-")) == ["-", "-", "ambiguous", "-"]
    assert backend.reflections_seen[0] == ("t:A:given", 0, 2)  # anchor in slot 1
    assert backend.reflections_seen[1] == ("t:A:given", 2, 0)  # anchor in slot 2
    flipped = judge_reflections(
        requests[2:3],
        ScriptedBackend(SCRIPT),
        fmt,
        params=SamplingParams.greedy(8),
        failure_policy="other_wins",
    )
    assert list(flipped["other_wins"]) == [True]


def test_request_validation():
    p = make_pair("A", 1)
    with pytest.raises(ValueError):
        ReflectionRequest(p, 1, 0, 3, "x", "y")
    with pytest.raises(ValueError):
        ReflectionRequest(p, 1, 1, 1, "x", "y")
    assert ReflectionRequest(p, 1, 0, 2, "mine", "anchor's").critiques == ("mine", "anchor's")


def test_empty_inputs_make_no_backend_call(fmt):
    backend = ScriptedBackend(SCRIPT)
    assert judge_reflections([], backend, fmt, params=SamplingParams.greedy(8)).empty
    assert judge_pairs([], backend, fmt, n=2, params=SAMPLED).empty
    assert backend.calls == []


def test_backend_returning_wrong_counts_is_an_error(fmt):
    class Short:
        identity = "short"

        def generate(self, prompts, params, n=1, offset=0):
            return [[Generation("x", [], [], "stop")] for _ in prompts[:-1]]

    with pytest.raises(RuntimeError, match="short"):
        judge_pairs([make_pair("A", 1), make_pair("B", 2)], Short(), fmt, n=1, params=SAMPLED)
