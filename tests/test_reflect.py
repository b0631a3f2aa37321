"""Two-stage inference: pure rules checked on hand-made values, the whole method on a scripted
backend whose outputs are known (expectations worked out by hand in the comments)."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Literal

import numpy as np
import pandas as pd
import pytest
from reflect_fakes import Scripted, ScriptedBackend, make_pair, qwen3_tokenizer

from rmlib.judge.judgments import confidence
from rmlib.judge.prompts import PromptFormat
from rmlib.reflect import (
    ReflectConfig,
    draw_random_winners,
    final_vote,
    majority_at_k,
    majority_vote,
    pair_rng,
    reflection_plan,
    run_reflectrm,
    select_anchor,
)
from rmlib.run.config import config_from_dict

# ---- confidence --------------------------------------------------------------------------------


def test_confidence_mean_of_lowest_fraction():
    lp = [-0.1, -3.0, -0.2, -1.0, -0.05, -0.3, -2.0, -0.4, -0.6, -0.7]
    assert confidence(lp, 0.10) == pytest.approx(-3.0)  # ceil(1.0) = 1 token
    assert confidence(lp, 0.20) == pytest.approx((-3.0 - 2.0) / 2)
    assert confidence(lp, 0.25) == pytest.approx((-3.0 - 2.0 - 1.0) / 3)  # ceil(2.5) = 3
    assert confidence(lp, 1.0) == pytest.approx(sum(lp) / 10)


def test_confidence_float_noise_does_not_add_a_token():
    lp = [-5.0, -4.0, -3.0] + [0.0] * 27  # T = 30: 0.1 * 30 = 3.0000000000000004 in floats
    assert confidence(lp, 0.1) == pytest.approx(-4.0)  # 3 tokens, not 4


def test_confidence_short_and_empty():
    assert confidence([-2.0], 0.1) == -2.0  # at least one token
    assert confidence([], 0.1) == -math.inf
    with pytest.raises(ValueError):
        confidence([-1.0], 0.0)


# ---- anchor, plan, votes -----------------------------------------------------------------------


def test_select_anchor_ignores_failures_and_breaks_ties_by_index():
    assert select_anchor([1, None, 2], [-1.0, -0.1, -0.5]) == 2  # 1 failed though most confident
    assert select_anchor([2, 1, 1], [-0.3, -0.3, -0.9]) == 0  # tie: lowest index
    assert select_anchor([None, 2, 1], [-0.1, -0.3, -0.3]) == 1
    assert select_anchor([1, 2], [float("nan"), -9.0]) == 1  # NaN counts as -inf
    assert select_anchor([None, None], [-0.1, -0.2]) is None
    assert select_anchor([], []) is None


def test_reflection_plan_covers_other_parsed_rollouts():
    choices = [1, None, 2, 1, None]
    plan = reflection_plan(choices, 2, np.random.default_rng(0))
    assert [i for i, _ in plan] == [0, 3]
    assert all(slot in (1, 2) for _, slot in plan)
    assert reflection_plan(choices, None, np.random.default_rng(0)) == []
    assert reflection_plan([None, 1], 1, np.random.default_rng(0)) == []  # one parsed: no calls
    with pytest.raises(ValueError):
        reflection_plan(choices, 1, np.random.default_rng(0))  # a failed rollout as anchor


def test_reflection_plan_slots_are_seeded_and_both_used():
    choices = [1] * 41
    a = reflection_plan(choices, 0, pair_rng(0, "k", "plan"))
    b = reflection_plan(choices, 0, pair_rng(0, "k", "plan"))
    assert a == b
    slots = [s for _, s in a]
    assert 5 < slots.count(1) < 35  # 40 fair coins
    assert reflection_plan(choices, 0, pair_rng(1, "k", "plan")) != a


def test_majority_vote_tie_rules():
    assert majority_vote([1, 2, 2, None]) == 2
    assert majority_vote([None, 2, 1], tie_break="first") == 2  # earliest parsed
    assert majority_vote([1, 2], tie_break="none") is None
    assert majority_vote([None, None]) is None
    assert majority_vote([]) is None
    draws = {majority_vote([1, 2], "random", np.random.default_rng(s)) for s in range(20)}
    assert draws == {1, 2}
    with pytest.raises(ValueError):
        majority_vote([1, 2], "random")


def test_final_vote():
    assert final_vote(1, [2, 2, 1]) == 2  # majority of winners overrides the anchor
    assert final_vote(1, []) == 1  # no winners: the anchor alone
    assert final_vote(2, [1, 2]) == 2  # tie: anchor added -> [1, 2, 2]
    assert final_vote(1, [1, 2]) == 1
    assert final_vote(2, [1, 1, 2, 2]) == 2
    assert final_vote(2, [1]) == 1  # one winner against the anchor: the winner
    with pytest.raises(ValueError):
        final_vote(None, [1])  # type: ignore[arg-type]


def test_draw_random_winners():
    choices = [1, 2, None, 1, 2]
    drawn = draw_random_winners(choices, 0, 2, np.random.default_rng(3))
    assert len(drawn) == 2 and set(drawn) <= {1, 3, 4}
    assert draw_random_winners(choices, 0, 0, np.random.default_rng(3)) == []
    with pytest.raises(ValueError):
        draw_random_winners(choices, 0, 4, np.random.default_rng(3))


def test_pair_rng_depends_on_seed_key_and_purpose():
    x = pair_rng(0, "a", "plan").integers(0, 2**31)
    assert x == pair_rng(0, "a", "plan").integers(0, 2**31)
    assert x != pair_rng(0, "b", "plan").integers(0, 2**31)
    assert x != pair_rng(0, "a", "other").integers(0, 2**31)
    assert x != pair_rng(1, "a", "plan").integers(0, 2**31)


def test_config_validation_and_params_section():
    with pytest.raises(ValueError, match="inference.confidence_tokens"):  # checked at load
        config_from_dict({"inference": {"confidence_tokens": "analysis"}})
    with pytest.raises(ValueError, match="inference.confidence_fraction"):  # its range, at load
        config_from_dict({"inference": {"confidence_fraction": 0}})
    # the `inference` params section: every field documented, plain YAML types only (ranges
    # aside: typing.get_type_hints drops the Annotated constraints)
    hints = typing.get_type_hints(ReflectConfig)
    for f in dataclasses.fields(ReflectConfig):
        assert f.metadata.get("doc"), f.name
        plain = (int, float, str, bool, int | None, list[str] | None)
        assert hints[f.name] in plain or typing.get_origin(hints[f.name]) is Literal, f
    assert ReflectConfig().sampling_params().temperature == 1.0
    assert not ReflectConfig().reflection_params().do_sample


# ---- the whole method on a scripted backend ----------------------------------------------------

# N = 4 samples, confidence_fraction 0.25 -> one token: confidence = the lowest log-prob.
SCRIPT = {
    # label 1. Anchor = s0 (conf -0.5; s3 is more confident but failed). Reflections vs s0:
    # s1 (q .9 > .5) wins, s2 (q .1) loses -> winners [1] -> verdict 1. Majority [2,1,1] -> 1.
    # Random winners: 1 of {s1, s2}, both say 1 -> 1. Random anchor: s0 -> [1] -> 1; s1 -> no
    # winners -> 1; s2 -> s0, s1 win -> [2, 1] tie + anchor 1 -> 1. Always 1.
    "t:A:given": Scripted(
        samples=[
            (2, [-0.1, -0.5, -0.2, -0.3]),
            (1, [-1.0, -0.1, -0.1, -0.1]),
            (1, [-2.0, -0.1, -0.1, -0.1]),
            ("missing", [-0.1, -0.1, -0.1, -0.1]),
        ],
        greedy=2,
        quality=[0.5, 0.9, 0.1, 0.0],
    ),
    # label 2. s0 and s1 tie at -0.3 -> anchor s0 (lowest index), verdict 1. Reflections vs s0:
    # s1 loses (.1 < .2), s2 wins (.6), s3 vs s0 fails to parse -> anchor wins. Winners [2] -> 2.
    # Majority [1,1,2,2] tie -> first parsed (s0) -> 1. Random anchor: s0 -> [s2] -> 2;
    # s1 -> s0, s2, s3 win -> [1,2,2] -> 2; s2 -> s3 wins -> 2; s3 -> none -> 2. Always 2.
    "t:B:given": Scripted(
        samples=[
            (1, [-0.3, -0.1, -0.1, -0.1]),
            (1, [-0.1, -0.3, -0.1, -0.1]),
            (2, [-0.9, -0.1, -0.1, -0.1]),
            (2, [-0.8, -0.1, -0.1, -0.1]),
        ],
        greedy=2,
        quality=[0.2, 0.1, 0.6, 0.7],
        refl_fail={frozenset({0, 3})},
    ),
    # label 1. Nothing parses: every rollout-based method is a parse failure.
    "t:C:given": Scripted(
        samples=[
            ("missing", [-0.1] * 4),
            ("empty", [-0.1] * 4),
            ("tie", [-0.1] * 4),
            ("ambiguous", [-0.1] * 4),
        ],
        greedy="missing",
    ),
    # label 2. Only s2 parses: it is the answer of every rollout-based method, no reflections.
    "t:D:given": Scripted(
        samples=[
            ("missing", [-0.1] * 4),
            ("truncated", [-0.1] * 4),
            (2, [-3.0] * 4),
            ("missing", [-0.1] * 4),
        ],
        greedy=1,
    ),
}
LABELS = {"A": 1, "B": 2, "C": 1, "D": 2}


@pytest.fixture(scope="module")
def tokenizer():
    return qwen3_tokenizer()


def _pairs():
    return [make_pair(pid, label) for pid, label in LABELS.items()]


def _cfg(**kw) -> ReflectConfig:
    kw.setdefault("random_anchor_sources", None)  # the fakes' source "t": every benchmark
    return ReflectConfig(
        n_samples=4, confidence_fraction=0.25, max_new_tokens=64, reflection_max_new_tokens=32, **kw
    )


@pytest.fixture(scope="module")
def run(tokenizer):
    backend = ScriptedBackend(SCRIPT)
    return run_reflectrm(_pairs(), backend, PromptFormat(tokenizer), _cfg()), backend


def test_random_anchor_runs_on_its_benchmarks_only(tokenizer):
    # the paper reports the random-anchor ablation on RewardBench and RMB only: by default its
    # N-1 extra reflection calls are made on those two sets and no others
    sources = {"A": "rewardbench", "B": "rm-bench", "C": "rmb", "D": "ppe"}
    pairs = [dataclasses.replace(p, source=sources[p.id]) for p in _pairs()]
    cfg = ReflectConfig(
        n_samples=4, confidence_fraction=0.25, max_new_tokens=64, reflection_max_new_tokens=32
    )
    assert cfg.random_anchor_sources == ["rewardbench", "rmb"]
    result = run_reflectrm(pairs, ScriptedBackend(SCRIPT), PromptFormat(tokenizer), cfg)
    preds = result.predictions
    # C (rmb) parses nothing: its random-anchor row is a parse failure, as every method's
    assert sorted(preds.loc[preds["method"] == "random_anchor", "source"]) == ["rewardbench", "rmb"]
    assert {"reflectrm", "anchor", "majority"} <= set(
        preds.loc[preds["source"] == "rm-bench", "method"]
    )
    refl = result.reflections
    ra = refl[refl["method"] == "random_anchor"]
    assert len(ra) and set(ra["key"]) == {"rewardbench:A:given"}
    assert set(refl.loc[refl["method"] == "reflectrm", "key"]) == {
        "rewardbench:A:given",
        "rm-bench:B:given",
    }


def test_random_anchor_sources_are_registry_names():
    cfg = ReflectConfig(random_anchor_sources=["reward-bench", "RMB"])  # aliases, any case
    assert cfg.random_anchor_sources == ["rewardbench", "rmb"]
    assert cfg.random_anchor_on("rewardbench") and cfg.random_anchor_on("reward-bench")
    assert not cfg.random_anchor_on("rm-bench") and not cfg.random_anchor_on("t")
    assert ReflectConfig(random_anchor_sources=None).random_anchor_on("t")  # None = every set
    assert not ReflectConfig(run_random_anchor=False).random_anchor_on("rewardbench")
    with pytest.raises(ValueError, match="unknown data source 'rewardbnch'"):
        ReflectConfig(random_anchor_sources=["rewardbnch"])
    with pytest.raises(ValueError, match="'inference'.*unknown data source 'nope'"):
        config_from_dict({"inference": {"random_anchor_sources": ["nope"]}})


def _verdicts(result) -> dict[tuple[str, str], object]:
    p = result.predictions
    return {
        (k.split(":")[1], m): (None if pd.isna(v) else int(v))
        for k, m, v in zip(p["key"], p["method"], p["verdict"], strict=True)
    }


def _random_winner_b() -> int:
    # The documented stream: pair_rng(seed, key, "random_winners"), 1 winner from {s1, s2, s3}.
    (drawn,) = draw_random_winners([1, 1, 2, 2], 0, 1, pair_rng(0, "t:B:given", "random_winners"))
    return {1: 1, 2: 2, 3: 2}[drawn]  # s1 says 1; s2, s3 say 2


def test_end_to_end_verdicts(run):
    result, _ = run
    expected = {
        ("A", "greedy"): 2,
        ("A", "majority"): 1,
        ("A", "anchor"): 2,
        ("A", "reflectrm"): 1,
        ("A", "random_winners"): 1,
        ("A", "random_anchor"): 1,
        ("B", "greedy"): 2,
        ("B", "majority"): 1,
        ("B", "anchor"): 1,
        ("B", "reflectrm"): 2,
        ("B", "random_winners"): _random_winner_b(),
        ("B", "random_anchor"): 2,
        ("C", "greedy"): None,
        ("C", "majority"): None,
        ("C", "anchor"): None,
        ("C", "reflectrm"): None,
        ("C", "random_winners"): None,
        ("C", "random_anchor"): None,
        ("D", "greedy"): 1,
        ("D", "majority"): 2,
        ("D", "anchor"): 2,
        ("D", "reflectrm"): 2,
        ("D", "random_winners"): 2,
        ("D", "random_anchor"): 2,
    }
    assert _verdicts(result) == expected
    p = result.predictions.set_index(["key", "method"])
    assert p.loc[("t:A:given", "reflectrm"), "anchor"] == 0
    assert p.loc[("t:A:given", "reflectrm"), "n_winners"] == 1
    assert p.loc[("t:B:given", "reflectrm"), "n_winners"] == 1
    assert p.loc[("t:B:given", "random_winners"), "n_winners"] == 1
    assert p.loc[("t:D:given", "anchor"), "anchor"] == 2
    assert p.loc[("t:D:given", "reflectrm"), "n_winners"] == 0
    assert bool(p.loc[("t:C:given", "reflectrm"), "parse_failure"])
    assert not bool(p.loc[("t:C:given", "reflectrm"), "correct"])
    assert bool(p.loc[("t:A:given", "reflectrm"), "correct"])
    assert not bool(p.loc[("t:A:given", "anchor"), "correct"])
    assert list(p.loc["t:B:given", "n_parsed"].unique()) == [4]


def test_end_to_end_reflections(run):
    result, backend = run
    r = result.reflections
    ra_b = int(
        result.predictions.set_index(["key", "method"]).loc[
            ("t:B:given", "random_anchor"), "anchor"
        ]
    )
    real = r[r["method"] == "reflectrm"]
    assert sorted(zip(real["key"], real["i"], real["anchor"], strict=True)) == [
        ("t:A:given", 1, 0),
        ("t:A:given", 2, 0),
        ("t:B:given", 1, 0),
        ("t:B:given", 2, 0),
        ("t:B:given", 3, 0),
    ]
    wins = dict(zip(zip(real["key"], real["i"], strict=True), real["other_wins"], strict=True))
    assert wins == {
        ("t:A:given", 1): True,
        ("t:A:given", 2): False,
        ("t:B:given", 1): False,
        ("t:B:given", 2): True,
        ("t:B:given", 3): False,
    }
    failed = real[real["failure"].notna()]
    assert list(zip(failed["key"], failed["i"], strict=True)) == [("t:B:given", 3)]
    # The prompt really shows the anchor's critique in the recorded slot (rows in call order).
    rows = zip(r["key"], r["i"], r["anchor"], r["anchor_slot"], strict=True)
    for (key, i, anchor, slot), shown in zip(rows, backend.reflections_seen, strict=True):
        assert shown[0] == key and shown[slot] == anchor and shown[3 - slot] == i
    # The reflection's own accuracy (only where exactly one critique is right).
    pc = dict(zip(zip(real["key"], real["i"], strict=True), real["prefers_correct"], strict=True))
    assert pc[("t:A:given", 1)] == True and pc[("t:A:given", 2)] == False  # noqa: E712
    assert pd.isna(pc[("t:B:given", 1)])  # both wrong
    assert pc[("t:B:given", 2)] == True and pc[("t:B:given", 3)] == False  # noqa: E712
    assert ra_b in (0, 1, 2, 3)


def test_end_to_end_counts_and_calls(run):
    result, backend = run
    c = result.counts
    ra_b = int(
        result.predictions.set_index(["key", "method"]).loc[
            ("t:B:given", "random_anchor"), "anchor"
        ]
    )
    assert c["n_pairs"] == 4 and c["n_rollouts"] == 16
    assert c["rollout_parse_failures"] == {
        "missing": 4,
        "empty": 1,
        "tie": 1,
        "ambiguous": 1,
        "truncated": 1,
    }
    assert c["greedy_parse_failures"] == {"missing": 1}
    assert c["pairs_without_parsed_rollout"] == 1
    assert c["pairs_with_one_parsed_rollout"] == 1
    assert c["reflection_calls"] == {"reflectrm": 5, "random_anchor": 5}
    # s0 vs s3 of B fails whenever it is asked: random anchor s0 or s3 asks it.
    expected_ra_fail = 1 if ra_b in (0, 3) else 0
    assert c["reflection_parse_failures"].get("reflectrm") == 1
    assert c["reflection_parse_failures"].get("random_anchor", 0) == expected_ra_fail
    assert c["truncated_prompts"] == {"judgment_pairs": 0, "reflection_calls": 0}
    # One batched call per stage: stage 1 (4 prompts x 4), greedy (4 x 1), reflections (10 x 1).
    assert [(k, n) for k, _, n in backend.calls] == [(4, 4), (4, 1), (10, 1)]
    stage1, greedy, refl = (p for _, p, _ in backend.calls)
    assert stage1.do_sample and stage1.temperature == 1.0 and stage1.max_new_tokens == 64
    assert not greedy.do_sample and greedy.max_new_tokens == 64
    assert not refl.do_sample and refl.max_new_tokens == 32


def test_rollout_table(run):
    result, _ = run
    r = result.rollouts.set_index(["key", "sample"])
    assert r.loc[("t:A:given", 0), "confidence"] == pytest.approx(-0.5)
    assert r.loc[("t:B:given", 1), "confidence"] == pytest.approx(-0.3)
    assert r.loc[("t:A:given", 1), "choice"] == 1 and bool(r.loc[("t:A:given", 1), "correct"])
    assert pd.isna(r.loc[("t:A:given", 3), "choice"])
    assert not bool(r.loc[("t:A:given", 3), "correct"])
    assert r.loc[("t:D:given", 1), "failure"] == "truncated"
    assert r.loc[("t:D:given", 1), "finish_reason"] == "length"
    assert list(r.loc[("t:A:given", 0), "logprobs"]) == [-0.1, -0.5, -0.2, -0.3]


def test_results_do_not_depend_on_pair_order(tokenizer, run):
    result, _ = run
    again = run_reflectrm(
        list(reversed(_pairs())), ScriptedBackend(SCRIPT), PromptFormat(tokenizer), _cfg()
    )
    cols = ["key", "method", "verdict", "anchor", "n_winners"]
    a = result.predictions[cols].sort_values(["key", "method"]).reset_index(drop=True)
    b = again.predictions[cols].sort_values(["key", "method"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    rc = ["key", "method", "i", "anchor", "anchor_slot", "other_wins"]
    ra = result.reflections[rc].sort_values(rc[:4]).reset_index(drop=True)
    rb = again.reflections[rc].sort_values(rc[:4]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ra, rb)


def test_skipping_optional_baselines(tokenizer):
    backend = ScriptedBackend(SCRIPT)
    res = run_reflectrm(
        _pairs(), backend, PromptFormat(tokenizer), _cfg(run_greedy=False, run_random_anchor=False)
    )
    assert set(res.predictions["method"]) == {"majority", "anchor", "random_winners", "reflectrm"}
    assert res.counts["reflection_calls"] == {"reflectrm": 5}
    assert [(k, n) for k, _, n in backend.calls] == [(4, 4), (5, 1)]


def test_reflection_failure_policy_other_wins(tokenizer):
    res = run_reflectrm(
        _pairs()[:2],
        ScriptedBackend(SCRIPT),
        PromptFormat(tokenizer),
        _cfg(reflection_failure="other_wins", run_random_anchor=False),
    )
    p = res.predictions.set_index(["key", "method"])
    # B: s2 and now s3 (failed reflection) win -> [2, 2] -> 2, two winners.
    assert p.loc[("t:B:given", "reflectrm"), "n_winners"] == 2
    assert res.counts["reflection_parse_failures"] == {"reflectrm": 1}


def test_both_orders_run_each_order_through_the_method(tokenizer):
    mirrored = {  # the swapped order of A: the same judgments with the slots exchanged
        "t:A:swapped": Scripted(
            samples=[
                (3 - c if isinstance(c, int) else c, lp) for c, lp in SCRIPT["t:A:given"].samples
            ],
            greedy=1,
            quality=SCRIPT["t:A:given"].quality,
        ),
    }
    backend = ScriptedBackend({**SCRIPT, **mirrored})
    res = run_reflectrm(
        [make_pair("A", 1)], backend, PromptFormat(tokenizer), _cfg(both_orders=True)
    )
    assert set(res.predictions["key"]) == {"t:A:given", "t:A:swapped"}
    assert set(res.predictions["order"]) == {"given", "swapped"}
    p = res.predictions.set_index(["key", "method"])
    assert p.loc[("t:A:swapped", "reflectrm"), "verdict"] == 2  # label flips with the swap
    assert bool(p.loc[("t:A:swapped", "reflectrm"), "correct"])
    assert p.loc[("t:A:given", "reflectrm"), "verdict"] == 1
    assert backend.calls[0][0] == 2  # both orders in one stage-1 call


def test_truncated_prompts_are_counted(tokenizer):
    from rmlib.judge.prompts import PromptBudget, build_pref_prompt

    long_pair = make_pair("D", 2, r1_extra=" filler" * 1500)
    short = [make_pair(p, LABELS[p]) for p in "ABC"]
    longest_short = max(build_pref_prompt(tokenizer, p).n_tokens for p in short)
    budget = PromptBudget(max_prompt_tokens=longest_short + 400)
    res = run_reflectrm(
        [*short, long_pair], ScriptedBackend(SCRIPT), PromptFormat(tokenizer, budget), _cfg()
    )
    assert res.counts["truncated_prompts"] == {"judgment_pairs": 1, "reflection_calls": 0}
    trunc = res.predictions.groupby("key")["truncated_prompt"].all().to_dict()
    assert trunc == {"t:A:given": False, "t:B:given": False, "t:C:given": False, "t:D:given": True}


class RecordingBackend(ScriptedBackend):
    """The scripted backend, keeping every prompt it is sent."""

    def __init__(self, script):
        super().__init__(script)
        self.prompts: list[str] = []

    def generate(self, prompts, params, n=1, offset=0):
        self.prompts.extend(prompts)
        return super().generate(prompts, params, n, offset)


def _critiques(prompt: str) -> str:
    return prompt.split("## Critiques for Judgment")[1].split("## Output format")[0]


def test_the_runs_prompt_switches_reach_every_stage(tokenizer):
    """critique_with_result and enable_thinking come from the run (prompts / model sections),
    not from ReflectConfig: stage 1, the greedy baseline and stage 2 all render with them."""
    assert "critique_with_result" not in {f.name for f in dataclasses.fields(ReflectConfig)}
    default = RecordingBackend(SCRIPT)
    run_reflectrm(_pairs(), default, PromptFormat(tokenizer), _cfg())
    on = RecordingBackend(SCRIPT)
    res = run_reflectrm(
        _pairs(),
        on,
        PromptFormat(tokenizer, critique_with_result=True, enable_thinking=True),
        _cfg(),
    )
    assert len(res.reflections) and len(on.prompts) == len(default.prompts)
    for prompt in default.prompts:
        assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    for prompt in on.prompts:
        assert prompt.endswith("<|im_start|>assistant\n") and "<think>" not in prompt
    refl_on = [p for p in on.prompts if "## Critiques for Judgment" in p]
    refl_off = [p for p in default.prompts if "## Critiques for Judgment" in p]
    assert refl_on and all(_critiques(p).count("<Result>") == 2 for p in refl_on)
    assert refl_off and all("<Result>" not in _critiques(p) for p in refl_off)


def test_stage2_prompts_have_their_own_budget(tokenizer):
    """Stage-1 prompts are fitted to max_prompt_tokens, stage-2 prompts to
    max_reflection_prompt_tokens: a pair cut for judging is shown whole to the reflection task
    when the reflection budget holds it."""
    from rmlib.judge.prompts import PromptBudget, build_pref_prompt

    long_a = make_pair("A", 1, r1_extra=" filler" * 1500)
    pairs = [long_a, *(make_pair(p, LABELS[p]) for p in "BCD")]
    short = max(build_pref_prompt(tokenizer, p).n_tokens for p in pairs[1:])
    pref_budget = short + 400
    roomy = PromptBudget(max_prompt_tokens=pref_budget, max_reflection_prompt_tokens=100_000)
    backend = RecordingBackend(SCRIPT)
    res = run_reflectrm(pairs, backend, PromptFormat(tokenizer, roomy), _cfg())
    assert res.counts["truncated_prompts"] == {"judgment_pairs": 1, "reflection_calls": 0}
    refl_a = [p for p in backend.prompts if "## Critiques" in p and "case A?" in p]
    assert refl_a and all("filler filler" in p and "[… truncated …]" not in p for p in refl_a)
    assert all(len(tokenizer(p)["input_ids"]) > pref_budget for p in refl_a)

    tight = PromptBudget(max_prompt_tokens=pref_budget, max_reflection_prompt_tokens=pref_budget)
    again = run_reflectrm(pairs, RecordingBackend(SCRIPT), PromptFormat(tokenizer, tight), _cfg())
    a_calls = int((again.reflections["key"] == "t:A:given").sum())
    assert a_calls and again.counts["truncated_prompts"]["reflection_calls"] == a_calls
    # the same verdicts: the critiques (short here) were never what got cut
    assert again.predictions["verdict"].equals(res.predictions["verdict"])


def test_majority_at_k(run):
    result, _ = run
    m = majority_at_k(result.rollouts, ks=(1, 2, 4))
    got = {
        (k.split(":")[1], int(kk)): (None if pd.isna(v) else int(v))
        for k, kk, v in zip(m["key"], m["k"], m["verdict"], strict=True)
    }
    assert got == {
        ("A", 1): 2,
        ("A", 2): 2,
        ("A", 4): 1,  # [2,1] tie -> first; [2,1,1,-] -> 1
        ("B", 1): 1,
        ("B", 2): 1,
        ("B", 4): 1,  # [1,1,2,2] tie -> first
        ("C", 1): None,
        ("C", 2): None,
        ("C", 4): None,
        ("D", 1): None,
        ("D", 2): None,
        ("D", 4): 2,
    }
    assert set(m["method"]) == {"majority@1", "majority@2", "majority@4"}
    with pytest.raises(ValueError):
        majority_at_k(result.rollouts, ks=(8,))


def test_predictions_feed_the_scorer(run):
    from rmlib.scoring import score_predictions

    result, _ = run
    scores = score_predictions(result.predictions, "demo", n_boot=50)["methods"]
    assert scores["reflectrm"]["score"] == 0.75  # A, B, D right; C a parse failure
    assert scores["reflectrm"]["n_parse_failures"] == 1
    assert scores["greedy"]["score"] == 0.25  # only B
    assert scores["anchor"]["score"] == 0.25  # only D
    assert scores["majority"]["score"] == 0.5  # A and D


def test_analysis_quality(run):
    from rmlib.reflect import analysis_quality

    result, _ = run
    q = analysis_quality(result.rollouts, result.reflections, result.predictions, n_bins=2)
    # parsed rollouts: A s0 (wrong), s1, s2 (right); B s0, s1 (wrong), s2, s3 (right); D s2 (right)
    assert q["rollout_accuracy"] == pytest.approx(5 / 8) and q["n_parsed_rollouts"] == 8
    # informative real reflections: A s1 (picked, right), A s2 (lost, wrong pick), B s2 (right),
    # B s3 (failure: not right); B s1 vs s0 both wrong -> left out
    assert q["reflection_accuracy"] == 0.5 and q["n_informative_reflections"] == 4
    assert q["winner_accuracy"] == 1.0 and q["n_winners"] == 2  # A s1, B s2
    assert q["anchor_accuracy"] == 0.25 and q["final_accuracy"] == 0.75
    assert sum(b["n"] for b in q["calibration"]) == 8


@pytest.mark.slow
def test_real_model_through_the_store_resumes(tmp_path):
    """The tiny random Qwen3 through HFBackend + CachedBackend: the plumbing end to end (it
    never writes the format, so every verdict is a counted failure), and a rerun regenerates
    nothing and gives the same tables."""
    import torch

    from rmlib.generation.hf import HFBackend
    from rmlib.generation.models import TINY_QWEN3, load_backbone
    from rmlib.generation.store import CachedBackend, GenerationStore

    torch.set_num_threads(2)
    model, tok = load_backbone(TINY_QWEN3, precision="fp32")
    hf = HFBackend(model, tok, identity="tiny-fp32", progress=False)
    cfg = ReflectConfig(n_samples=3, max_new_tokens=6, reflection_max_new_tokens=6)
    pairs = [make_pair("A", 1), make_pair("B", 2)]
    first_backend = CachedBackend(hf, GenerationStore(tmp_path / "g.sqlite"), progress=False)
    first = run_reflectrm(pairs, first_backend, PromptFormat(tok), cfg)
    r = first.rollouts
    assert len(r) == 6 and (r["n_tokens"] == r["logprobs"].map(len)).all()
    assert r["confidence"].map(math.isfinite).all() and (r["confidence"] <= 0).all()
    assert r["failure"].notna().all() and (r["prompt_tokens"] > 0).all()
    assert first.predictions["parse_failure"].all()
    assert first.counts["reflection_calls"] == {}
    again_backend = CachedBackend(hf, GenerationStore(tmp_path / "g.sqlite"), progress=False)
    again = run_reflectrm(pairs, again_backend, PromptFormat(tok), cfg)
    assert again_backend.stats.misses == 0 and again_backend.stats.hits == 6 + 2
    pd.testing.assert_frame_equal(first.rollouts, again.rollouts)


def _mirror(sc: Scripted) -> Scripted:
    """The swapped order's script: the same judgments with the slots exchanged."""
    flip = lambda c: 3 - c if isinstance(c, int) else c  # noqa: E731
    return Scripted(
        samples=[(flip(c), lp) for c, lp in sc.samples],
        greedy=flip(sc.greedy),
        quality=sc.quality,
        refl_fail=sc.refl_fail,
    )


def test_swapped_pairs_draw_whole_groups_per_source():
    from rmlib.data.pair import both_orders

    def pair(source, pid, group=None):
        return dataclasses.replace(
            make_pair(pid, 1), source=source, meta={"group": group} if group else {}
        )

    rmbench = [pair("rm", f"{g}{i}", group=g) for g in "abcdef" for i in range(3)]
    judge = [pair("jb", f"j{i}") for i in range(5)]
    out = both_orders(rmbench + judge, swapped_pairs=6, seed=1)
    swapped = [p for p in out if p.order == "swapped"]
    assert [p for p in out if p.order == "given"] == rmbench + judge  # every pair, once
    # whole groups of 3 up to 6 pairs; all of a set smaller than the draw
    rm = [p for p in swapped if p.source == "rm"]
    assert len(rm) == 6 and {len({q.id for q in rm if q.id[0] == p.id[0]}) for p in rm} == {3}
    assert len([p for p in swapped if p.source == "jb"]) == 5
    assert both_orders(rmbench + judge, swapped_pairs=6, seed=1) == out  # seeded
    # each source has its own draw: adding a set does not redraw another's
    alone = [p for p in both_orders(rmbench, swapped_pairs=6, seed=1) if p.order == "swapped"]
    assert alone == rm
    assert both_orders(judge) == [q for p in judge for q in (p, p.swapped())]
    with pytest.raises(ValueError, match="both_orders"):
        _cfg(swapped_pairs=6)


def test_swapped_pairs_reuse_the_given_order(tokenizer, tmp_path):
    from rmlib.generation.store import CachedBackend, GenerationStore

    script = {**SCRIPT, **{k.replace("given", "swapped"): _mirror(s) for k, s in SCRIPT.items()}}
    scripted = ScriptedBackend(script)
    with GenerationStore(tmp_path / "g.sqlite") as store:
        cached = CachedBackend(scripted, store, progress=False)
        given = run_reflectrm(_pairs(), cached, PromptFormat(tokenizer), _cfg())
        asked: list[str] = []
        generate = scripted.generate

        def recording(prompts, *args, **kw):
            asked.extend(scripted._key(p) for p in prompts)
            return generate(prompts, *args, **kw)

        scripted.generate = recording
        both = run_reflectrm(
            _pairs(), cached, PromptFormat(tokenizer), _cfg(both_orders=True, swapped_pairs=2)
        )
    keys = set(both.predictions["key"])
    swapped = {k for k in keys if k.endswith(":swapped")}
    assert len(swapped) == 2 and len(keys) == len(LABELS) + 2
    # the given order is judged once for both protocols: the second run asked only for the
    # swapped twins, and its given-order verdicts are the first run's
    assert asked and set(asked) == swapped
    cols = ["key", "method", "verdict"]
    again = both.predictions[both.predictions["order"] == "given"][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(again, given.predictions[cols].reset_index(drop=True))


# ---- the methods' registry ---------------------------------------------------------------------


def test_every_registered_method_has_a_colour_a_label_and_a_stage():
    from rmlib.plots.style import METHOD_COLORS, METHOD_LABELS, OKABE_ITO
    from rmlib.reflect import METHODS, REGISTRY, STAGE2_METHODS

    assert METHODS == ("greedy", "majority", "anchor", "random_anchor", "random_winners",
                       "reflectrm")  # fmt: skip
    assert STAGE2_METHODS == ("random_anchor", "random_winners", "reflectrm")
    for m in REGISTRY:
        assert METHOD_COLORS[m.name] in OKABE_ITO.values() and METHOD_LABELS[m.name] == m.label
    assert len({METHOD_COLORS[m.name] for m in REGISTRY}) == len(REGISTRY)  # one colour per method


def test_a_new_vote_is_a_rule_and_a_registry_entry(tokenizer, monkeypatch):
    """A vote added to the registry alone reaches the predictions table, computed per pair."""
    from rmlib.reflect import registry

    def unanimous(v, cfg):  # every parsed sample agrees, else no verdict
        parsed = {c for c in v.choices if c is not None}
        return (parsed.pop() if len(parsed) == 1 else None), None, None

    extra = registry.Method("unanimous", 1, unanimous, "unanimous", "every parsed sample agrees")
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, extra))
    result = run_reflectrm(_pairs(), ScriptedBackend(SCRIPT), PromptFormat(tokenizer), _cfg())
    got = _verdicts(result)
    # A and B have samples of both verdicts, C none parsed, D one parsed sample (2)
    assert {pid: got[(pid, "unanimous")] for pid in LABELS} == {
        "A": None, "B": None, "C": None, "D": 2
    }  # fmt: skip
