"""rmlib.training.mix: pair classes, exact Pref./Refl. counts, ratio, seeding, prompts, saving."""

from __future__ import annotations

import json
import logging
from fractions import Fraction

import pandas as pd
import pytest

from rmlib.data.demo import load_demo
from rmlib.data.pair import DataError, Pair
from rmlib.generation.models import load_tokenizer, qwen3_tokenizer_dir
from rmlib.judge.prompts import PromptBudget, PromptFormat, render
from rmlib.judge.verdict import result_sentence
from rmlib.run.config import config_from_dict
from rmlib.training.mix import (
    TrainMixConfig,
    build_mix,
    classify_pairs,
    counts_table,
    load_mix,
    pair_class,
    ratio_counts,
    ratio_text,
    select_items,
)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(str(qwen3_tokenizer_dir()))


def judgment(pair: Pair, sample: int, choice: int) -> str:
    return (
        f"<Analysis>marker {pair.key} sample {sample}</Analysis>\n"
        f"<Result>{result_sentence(choice)}</Result>"
    )


def rollouts_for(pairs: list[Pair], outcomes: list[str]) -> pd.DataFrame:
    """One row per sample; outcome letters: c = correct, w = parsed wrong, f = unparseable."""
    rows = []
    for pair, spec in zip(pairs, outcomes, strict=True):
        for s, o in enumerate(spec):
            choice = {"c": pair.label, "w": 3 - pair.label, "f": None}[o]
            rows.append(
                {
                    "key": pair.key,
                    "id": pair.id,
                    "label": pair.label,
                    "sample": s,
                    "text": "no verdict" if choice is None else judgment(pair, s, choice),
                    "choice": choice,
                    "failure": "missing" if choice is None else None,
                    "correct": o == "c",
                }
            )
    df = pd.DataFrame(rows)
    df["choice"] = df["choice"].astype("Int64")
    return df


# 10 pairs, N = 4: 3 easy, 4 mixed, 2 all-wrong (one all unparseable), 1 correct-or-failed.
HAND = ["cccc", "cccc", "cccc", "ccww", "cwff", "wwwc", "cwcw", "wwww", "ffff", "cccf"]


@pytest.fixture(scope="module")
def hand_case():
    pairs = load_demo(split="train", n=len(HAND), seed=0).pairs
    return pairs, rollouts_for(pairs, HAND)


def test_pair_classes_of_the_hand_built_case(hand_case):
    pairs, rollouts = hand_case
    classes = classify_pairs(rollouts, pairs)
    assert classes["class"].tolist() == [
        "easy",
        "easy",
        "easy",
        "mixed",
        "mixed",
        "mixed",
        "mixed",
        "all_wrong",
        "all_wrong",
        "correct_or_failed",
    ]
    assert classes.loc[4, ["n_correct", "n_wrong", "n_failed"]].tolist() == [1, 1, 2]
    lenient = classify_pairs(rollouts, pairs, failure_is_wrong=False)["class"].tolist()
    assert lenient[9] == "easy" and lenient[8] == "all_wrong" and lenient[4] == "mixed"


def test_pair_class_rule():
    assert pair_class(8, 0, 0) == "easy"
    assert pair_class(7, 0, 1) == "correct_or_failed"
    assert pair_class(7, 0, 1, failure_is_wrong=False) == "easy"
    assert pair_class(1, 1, 6) == "mixed"
    assert pair_class(0, 0, 8) == "all_wrong"


@pytest.mark.parametrize(
    ("ratio", "variant", "max_refl", "pref", "refl"),
    [
        ("4:1", "mix", None, 4, 1),  # exact: a pool of 7 non-easy pairs holds 4 Pref. for 1 Refl.
        ("2:1", "mix", None, 6, 3),  # 3 of the 4 mixed pairs: the pool allows 6 Pref.
        ("1:1", "mix", None, 4, 4),
        ("3:2", "mix", None, 6, 4),
        ("1:2", "mix", None, 2, 4),
        ("1:1", "mix", 2, 2, 2),
        ("1:0", "mix", None, 7, 0),  # Pref. only: every non-easy pair
        ("1:1", "pref_only", None, 4, 0),  # the mix's Pref. items
        ("4:1", "pref_only", None, 4, 0),
        ("1:2", "pref_same_volume", None, 6, 0),  # 2 + 4 = the mix's total
        ("1:1", "pref_same_volume", None, 7, 0),  # 8 wanted, the pool caps it at 7
        ("4:1", "refl_only", None, 0, 1),  # the mix's Refl. items
        ("1:2", "refl_only", None, 0, 4),
    ],
)
def test_exact_counts(hand_case, tokenizer, ratio, variant, max_refl, pref, refl):
    pairs, rollouts = hand_case
    cfg = TrainMixConfig(ratio=ratio, variant=variant, max_refl=max_refl)
    mix = build_mix(rollouts, pairs, PromptFormat(tokenizer), cfg, seed=3, backbone="tiny")
    tasks = mix.dataset["task"]
    assert (tasks.count("pref"), tasks.count("refl")) == (pref, refl)
    got = (mix.counts["pref"], mix.counts["refl"], mix.counts["total"])
    assert got == (pref, refl, pref + refl)
    easy = {p.key for p, o in zip(pairs, HAND, strict=True) if o == "cccc"}
    mixed = {pairs[i].key for i in (3, 4, 5, 6)}
    keys = mix.dataset["pair_key"]
    assert not easy & set(keys)  # easy pairs are dropped
    assert {k for k, t in zip(keys, tasks, strict=True) if t == "refl"} <= mixed
    assert len(set(keys[i] for i, t in enumerate(tasks) if t == "pref")) == pref  # no repeats


def test_counts_table_layout(hand_case, tokenizer):
    pairs, rollouts = hand_case
    mix = build_mix(
        rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio="1:1"), backbone="tiny"
    )
    table = mix.counts_table()
    assert table.columns.tolist() == [
        "backbone",
        "variant",
        "ratio requested",
        "ratio obtained",
        "exact",
        "Pref. pool",
        "Pref. requested",
        "Pref.",
        "Refl. pool",
        "Refl. requested",
        "Refl.",
        "Sum",
        "paper Pref.",
        "paper Refl.",
        "paper Sum",
        "pairs",
        "N",
        "easy",
        "mixed",
        "all-wrong",
        "correct+failed",
    ]
    row = table.iloc[0].to_dict()
    assert {
        k: row[k] for k in table.columns if k not in ("Pref. requested", "Refl. requested")
    } == {
        "backbone": "tiny",
        "variant": "mix",
        "ratio requested": "1:1",
        "ratio obtained": "1:1",
        "exact": "ratio",  # which wins when the caps and the ratio disagree
        "Pref. pool": 7,
        "Pref.": 4,
        "Refl. pool": 4,
        "Refl.": 4,
        "Sum": 8,
        "paper Pref.": 13_692,  # the paper's Qwen3-4B mix beside ours
        "paper Refl.": 3_420,
        "paper Sum": 17_112,
        "pairs": 10,
        "N": 4,
        "easy": 3,
        "mixed": 4,
        "all-wrong": 2,
        "correct+failed": 1,
    }
    assert table["Pref. requested"].isna().all() and table["Refl. requested"].isna().all()
    assert len(counts_table([mix.counts, mix.counts])) == 2


# ---------------------------------------------------------------- the ratio rule


def classes_of(n_mixed: int, n_all_wrong: int, n_easy: int = 0) -> pd.DataFrame:
    """A pair-class table (what select_items reads) without rollouts: keys m*, w*, e*."""
    rows = [(f"m{i:05d}", "mixed") for i in range(n_mixed)]
    rows += [(f"w{i:05d}", "all_wrong") for i in range(n_all_wrong)]
    rows += [(f"e{i:05d}", "easy") for i in range(n_easy)]
    return pd.DataFrame(rows, columns=["key", "class"])


def selected(classes: pd.DataFrame, seed: int = 0, **cfg) -> tuple[list, list, dict]:
    return select_items(classes, TrainMixConfig(**cfg), seed)


REALISTIC = classes_of(n_mixed=800, n_all_wrong=100, n_easy=300)  # 900 non-easy, 800 mixed


@pytest.mark.parametrize(
    ("ratio", "pref", "refl"),
    [("4:1", 900, 225), ("5:1", 900, 180), ("3:1", 900, 300), ("2:1", 900, 450), ("1:1", 800, 800)],
)
def test_ratio_is_exact_when_refl_is_plentiful(ratio, pref, refl, caplog):
    # the realistic case: 800 of 900 non-easy pairs are mixed, so Pref. (the whole pool at most)
    # is what limits the mix and Refl. is subsampled (the old rule gave 900 : 800 at "4:1")
    with caplog.at_level(logging.WARNING, logger="rmlib.training.mix"):
        pref_keys, refl_keys, counts = selected(REALISTIC, ratio=ratio)
    assert (len(pref_keys), len(refl_keys)) == (pref, refl) == (counts["pref"], counts["refl"])
    p, r = (int(x) for x in ratio.split(":"))
    assert Fraction(pref, refl) == Fraction(p, r) and counts["ratio_obtained"] == ratio
    assert len(set(refl_keys)) == refl and all(k.startswith("m") for k in refl_keys)
    assert len(set(pref_keys)) == pref and not any(k.startswith("e") for k in pref_keys)
    assert counts["note"] == "" and not caplog.records


def test_ratio_is_exact_when_refl_is_short(tokenizer):
    pairs = load_demo(split="train", n=60, seed=1).pairs
    outcomes = ["cw"] * 10 + ["ww"] * 45 + ["cc"] * 5  # 10 mixed, pool of 55
    rollouts = rollouts_for(pairs, outcomes)
    for ratio, want in [("4:1", 40), ("5:1", 50), ("2:1", 20)]:
        mix = build_mix(rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio=ratio))
        assert (mix.counts["pref"], mix.counts["refl"]) == (want, 10)
        assert mix.dataset["task"].count("pref") == want and mix.counts["note"] == ""
    # 6:1 would need 60 Pref. for the 10 Refl.: the pool of 55 holds 54 Pref. for 9 Refl.
    mix = build_mix(rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio="6:1"))
    assert (mix.counts["pref"], mix.counts["refl"], mix.counts["ratio_obtained"]) == (54, 9, "6:1")


def test_refl_is_subsampled_when_pref_is_short(tokenizer):
    pairs = load_demo(split="train", n=16, seed=1).pairs
    rollouts = rollouts_for(pairs, ["cw"] * 10 + ["ww"] * 2 + ["cc"] * 4)  # pool 12, 10 mixed
    mix = build_mix(rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio="4:1"), seed=2)
    tasks, keys = mix.dataset["task"], mix.dataset["pair_key"]
    assert (tasks.count("pref"), tasks.count("refl")) == (12, 3)
    mixed = {p.key for p in pairs[:10]}
    assert {k for k, t in zip(keys, tasks, strict=True) if t == "refl"} < mixed


def test_caps_are_met_at_the_ratio():
    big = classes_of(n_mixed=5000, n_all_wrong=15000)  # more than the paper's caps allow
    _, _, c = selected(big, ratio="4:1", max_pref=13_692, max_refl=3_420)
    assert (c["pref"], c["refl"]) == (13_680, 3_420)  # 13,692 : 3,420 is 4.004 : 1
    assert (c["pref_requested"], c["refl_requested"]) == (13_680, 3_420) and c["note"] == ""
    _, _, c = selected(REALISTIC, ratio="4:1", max_pref=500)
    assert (c["pref"], c["refl"], c["pref_requested"], c["refl_requested"]) == (500, 125, 500, 125)
    _, _, c = selected(REALISTIC, ratio="4:1", max_refl=100)
    assert (c["pref"], c["refl"], c["pref_requested"], c["refl_requested"]) == (400, 100, 400, 100)
    # caps above what the rollouts hold: the shortfall shows as requested vs obtained
    _, _, c = selected(REALISTIC, ratio="4:1", max_pref=13_692, max_refl=3_420)
    assert (c["pref"], c["refl"], c["pref_requested"], c["refl_requested"]) == (
        900,
        225,
        13_680,
        3_420,
    )
    _, _, c = selected(REALISTIC, ratio="4:1", max_pref=3)  # 3 Pref. cannot carry 1 Refl.
    assert (c["pref"], c["refl"], c["ratio_obtained"]) == (0, 0, "0:0") and c["note"]


def test_caps_win_over_the_ratio_when_asked(caplog):
    # the paper's counts, 13,692 : 3,420 (4.004 : 1), exactly: mix.exact 'caps'
    big = classes_of(n_mixed=5000, n_all_wrong=15000)
    caps = {"ratio": "4:1", "max_pref": 13_692, "max_refl": 3_420, "exact": "caps"}
    with caplog.at_level(logging.WARNING, logger="rmlib.training.mix"):
        pref, refl, c = selected(big, **caps)
    assert (len(pref), len(refl), c["pref"], c["refl"], c["total"]) == (
        13_692,
        3_420,
        13_692,
        3_420,
        17_112,
    )
    assert (c["pref_requested"], c["refl_requested"]) == (13_692, 3_420)
    assert c["note"] == "" and not caplog.records  # what was asked for: no warning
    assert c["ratio_obtained"] == "4.00:1" and c["exact"] == "caps"
    # rft trains on the same Pref. draw alone; same_volume on as many Pref. items as the mix;
    # refl_only on the mix's Refl. items
    rft_pref, rft_refl, rc = selected(big, variant="pref_only", **caps)
    assert rft_pref == pref and rft_refl == [] and rc["total"] == 13_692
    same, _, sc = selected(big, variant="pref_same_volume", **caps)
    assert sc["pref"] == 17_112 and same[:13_692] == pref
    _, only, oc = selected(big, variant="refl_only", **caps)
    assert only == refl and (oc["pref"], oc["refl"]) == (0, 3_420)
    # a pool short of its cap: the exact ratio within the caps, the shortfall shown
    _, _, c = selected(REALISTIC, **caps)
    assert (c["pref"], c["refl"], c["pref_requested"], c["refl_requested"]) == (
        900,
        225,
        13_692,
        3_420,
    )
    few_mixed = classes_of(n_mixed=3_000, n_all_wrong=15_000)
    _, _, c = selected(few_mixed, **caps)
    assert (c["pref"], c["refl"], c["ratio_obtained"]) == (12_000, 3_000, "4:1")
    # the default keeps the ratio exact: 13,680 + 3,420
    _, _, c = selected(big, ratio="4:1", max_pref=13_692, max_refl=3_420)
    assert (c["pref"], c["refl"]) == (13_680, 3_420)


def test_caps_rule_needs_both_caps():
    with pytest.raises(ValueError, match="needs both max_pref and max_refl"):
        TrainMixConfig(exact="caps", max_pref=100)
    with pytest.raises(ValueError, match="two non-zero parts"):
        TrainMixConfig(ratio="1:0", exact="caps", max_pref=100, max_refl=10)
    with pytest.raises(ValueError, match="'mix'.*needs both max_pref and max_refl"):
        config_from_dict({"mix": {"exact": "caps"}})
    with pytest.raises(ValueError, match="'mix.exact'"):
        config_from_dict({"mix": {"exact": "counts"}})


def test_pref_only_ratio(caplog):
    with caplog.at_level(logging.WARNING, logger="rmlib.training.mix"):
        pref, refl, c = selected(REALISTIC, ratio="1:0")
        assert (len(pref), refl, c["ratio_obtained"], c["note"]) == (900, [], "1:0", "")
        _, _, c = selected(REALISTIC, ratio="1:0", max_pref=250, max_refl=10)
        assert (c["pref"], c["refl"], c["pref_requested"], c["refl_requested"]) == (250, 0, 250, 0)
        _, _, c = selected(classes_of(0, 30), ratio="1:0")  # no mixed pair: still every pair
        assert (c["pref"], c["refl"]) == (30, 0)
    assert not caplog.records
    _, _, c = selected(classes_of(0, 30), ratio="4:1")  # while 4:1 has nothing to pair them with
    assert (c["pref"], c["refl"]) == (0, 0) and "not the requested 4:1" in c["note"]


def test_ratio_counts_rule():
    four = (Fraction(4), Fraction(1))
    assert ratio_counts(*four, 900, 800) == (900, 225)
    assert ratio_counts(*four, 903, 800) == (900, 225)  # exact rather than 903 : 225
    assert ratio_counts(*four, 8, 6) == (8, 2)  # the demo's rollouts (was 8 : 6)
    assert ratio_counts(*four, None, 10) == (40, 10)
    assert ratio_counts(*four, None, None) == (None, None)
    three_two = (Fraction(3), Fraction(2))
    assert ratio_counts(*three_two, 8, 3) == (5, 3)  # 4.5 rounds half up, never above the pool
    assert ratio_counts(*three_two, 7, 100) == (6, 4)
    assert ratio_counts(Fraction(1), Fraction(0), 7, 4) == (7, 0)
    assert ratio_counts(Fraction(0), Fraction(1), 7, 4) == (0, 4)
    assert [ratio_text(*c) for c in [(900, 225), (6, 4), (5, 3), (903, 225), (5, 0), (0, 0)]] == [
        "4:1",
        "3:2",
        "5:3",
        "4.01:1",
        "1:0",
        "0:0",
    ]


def test_rounded_ratio_is_reported_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="rmlib.training.mix"):
        _, _, c = selected(classes_of(n_mixed=3, n_all_wrong=5), ratio="3:2")
    assert (c["pref"], c["refl"], c["ratio_obtained"]) == (5, 3, "5:3")
    assert "5 : 3" in c["note"] and "not the requested 3:2" in c["note"]
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert c["note"] in caplog.records[0].getMessage()


def test_subsampling_is_seeded():
    shuffled = REALISTIC.sample(frac=1.0, random_state=0).reset_index(drop=True)
    a, b, c = selected(REALISTIC, seed=0), selected(REALISTIC, seed=0), selected(shuffled, seed=0)
    assert a == b == c  # same seed, any row order: the same items
    other = selected(REALISTIC, seed=1)
    assert set(other[1]) != set(a[1]) and len(other[1]) == len(a[1]) == 225
    assert selected(REALISTIC, seed=0, variant="pref_only")[0] == a[0]  # the mix's Pref. items
    same = selected(REALISTIC, seed=0, variant="pref_same_volume")
    assert set(a[0]) <= set(same[0]) and len(same[0]) == 900  # 1,125 wanted, the pool has 900
    assert same[2]["pref_requested"] == 1125 and "pool has 900" in same[2]["note"]
    refl = selected(REALISTIC, seed=0, variant="refl_only")
    assert refl[1] == a[1] and refl[0] == []  # the mix's Refl. items, no Pref.


def test_seeded_draws(tokenizer):
    pairs = load_demo(split="train", n=40, seed=2).pairs
    outcomes = ["ccww", "wcfc"] * 6 + ["wwww"] * 28
    rollouts = rollouts_for(pairs, outcomes)
    cfg = TrainMixConfig(ratio="2:1")

    def draw(seed, rows=rollouts, ps=pairs):
        d = build_mix(rows, ps, PromptFormat(tokenizer), cfg, seed=seed).dataset
        return list(
            zip(
                d["pair_key"],
                d["task"],
                d["label"],
                d["critique1_sample"],
                d["critique2_sample"],
                strict=True,
            )
        )

    assert draw(0) == draw(0)
    assert draw(0) != draw(1)
    # the draw does not depend on the order of the inputs
    shuffled = rollouts.sample(frac=1.0, random_state=0).reset_index(drop=True)
    assert draw(0, shuffled, list(reversed(pairs))) == draw(0)
    # the per-pair seed is in the config too, and overrides the run seed
    seeded = build_mix(
        rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio="2:1", seed=1), seed=0
    )
    assert list(seeded.dataset["pair_key"]) == [k for k, *_ in draw(1)]


def test_pref_sets_of_the_variants_nest(tokenizer):
    pairs = load_demo(split="train", n=40, seed=2).pairs
    rollouts = rollouts_for(pairs, ["cw"] * 8 + ["ww"] * 32)

    def pref_keys(variant):
        d = build_mix(
            rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio="2:1", variant=variant)
        )
        return {
            k for k, t in zip(d.dataset["pair_key"], d.dataset["task"], strict=True) if t == "pref"
        }

    mix, rft, same = pref_keys("mix"), pref_keys("pref_only"), pref_keys("pref_same_volume")
    assert mix == rft and len(mix) == 16 and len(same) == 24 and rft < same


def test_items_hold_the_right_prompts_and_labels(hand_case, tokenizer):
    pairs, rollouts = hand_case
    by_key = {p.key: p for p in pairs}
    mix = build_mix(rollouts, pairs, PromptFormat(tokenizer), TrainMixConfig(ratio="1:1"), seed=5)
    for row in mix.dataset:
        pair = by_key[row["pair_key"]]
        content = row["prompt"][0]["content"]
        assert row["prompt"][0]["role"] == "user" and pair.response1 in content
        if row["task"] == "pref":
            assert row["label"] == pair.label and "Critique 1" not in content
            continue
        spec = HAND[pairs.index(pair)]
        s_good = row[f"critique{row['label']}_sample"]
        s_bad = row[f"critique{3 - row['label']}_sample"]
        assert spec[s_good] == "c" and spec[s_bad] == "w"  # never an unparseable critique
        good = content.split(f"[Critique {row['label']} begins]")[1].split("ends]")[0]
        assert f"marker {pair.key} sample {s_good}" in good
        assert "<Result>" not in content.split("## Critiques for Judgment")[1].split("##")[0]
    labels = [r["label"] for r in mix.dataset if r["task"] == "refl"]
    assert set(labels) <= {1, 2}


def _long_pair() -> Pair:
    pair = load_demo(split="train", n=1, seed=0).pairs[0]
    return Pair(
        id="long",
        source="demo",
        subset="x",
        context=pair.context,
        response1="alpha " * 600,
        response2="beta " * 600,
        label=1,
        meta=pair.meta,
    )


def test_truncated_prompts_follow_our_budget(tokenizer):
    long = _long_pair()
    rollouts = rollouts_for([long], ["cw"])
    # each task its own limit: Pref. items 400 tokens, Refl. items 500
    budget = PromptBudget(max_prompt_tokens=400, max_reflection_prompt_tokens=500)
    mix = build_mix(rollouts, [long], PromptFormat(tokenizer, budget), TrainMixConfig(ratio="1:1"))
    assert sorted(mix.dataset["task"]) == ["pref", "refl"]
    for row in mix.dataset:
        limit = budget.limit(row["task"])
        assert row["truncated_prompt"] and limit - 50 < row["prompt_tokens"] <= limit
        text = render(tokenizer, row["prompt"])
        assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) == row["prompt_tokens"]
        assert "[… truncated …]" in row["prompt"][0]["content"]
    assert mix.provenance["budget"]["max_reflection_prompt_tokens"] == 500


def test_the_runs_prompt_switches_reach_every_item(tokenizer):
    """critique_with_result and enable_thinking are the caller's (the run's prompts and model
    sections): Refl. critiques show their <Result> line, and truncated items are recovered under
    the thinking switch TRL will render them with."""
    long = _long_pair()
    rollouts = rollouts_for([long], ["cw"])
    budget = PromptBudget(max_prompt_tokens=400, max_reflection_prompt_tokens=500)
    cfg = TrainMixConfig(ratio="1:1")
    shown = build_mix(
        rollouts, [long], PromptFormat(tokenizer, budget, critique_with_result=True), cfg
    ).dataset
    refl = next(r for r in shown if r["task"] == "refl")["prompt"][0]["content"]
    critiques = refl.split("## Critiques for Judgment")[1].split("## Output format")[0]
    assert critiques.count("<Result>") == 2
    hidden = build_mix(rollouts, [long], PromptFormat(tokenizer, budget), cfg).dataset
    refl = next(r for r in hidden if r["task"] == "refl")["prompt"][0]["content"]
    assert "<Result>" not in refl.split("## Critiques for Judgment")[1].split("## Output format")[0]

    thinking = build_mix(
        rollouts, [long], PromptFormat(tokenizer, budget, enable_thinking=True), cfg
    )
    assert thinking.provenance["enable_thinking"] is True
    assert thinking.provenance["critique_with_result"] is False
    for row in thinking.dataset:
        text = render(tokenizer, row["prompt"], enable_thinking=True)
        assert "<think>" not in text  # rendered with the switch the item was fitted under
        assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) == row["prompt_tokens"]


def test_bad_rollout_tables_are_located(hand_case, tokenizer):
    pairs, rollouts = hand_case
    missing = rollouts.drop(index=5)
    with pytest.raises(DataError, match="field 'sample'.*incomplete"):
        classify_pairs(missing, pairs)
    dup = pd.concat([rollouts, rollouts.iloc[[7]]], ignore_index=True)
    with pytest.raises(DataError, match=f"row {len(rollouts)}, field 'sample'"):
        classify_pairs(dup, pairs)
    wrong_label = rollouts.copy()
    wrong_label.loc[2, "label"] = 3 - int(wrong_label.loc[2, "label"])
    with pytest.raises(DataError, match="row 2, field 'label'"):
        classify_pairs(wrong_label, pairs)
    with pytest.raises(DataError, match="unknown pair"):
        classify_pairs(rollouts, pairs[1:])
    with pytest.raises(DataError, match="field 'text'"):
        classify_pairs(rollouts.drop(columns=["text"]), pairs)
    with pytest.raises(ValueError, match="ratio"):
        TrainMixConfig(ratio="4-1")
    with pytest.raises(ValueError, match="mix.variant"):  # checked where params load
        config_from_dict({"mix": {"variant": "rft"}})


def test_save_and_load(hand_case, tokenizer, tmp_path):
    pairs, rollouts = hand_case
    mix = build_mix(
        rollouts,
        pairs,
        PromptFormat(tokenizer),
        TrainMixConfig(ratio="1:1"),
        seed=7,
        backbone="embedded:tiny-qwen3",
    )
    mix.save(tmp_path / "mix")
    dataset, prov = load_mix(tmp_path / "mix")
    assert dataset.to_list() == mix.dataset.to_list()
    assert prov["backbone"] == "embedded:tiny-qwen3" and prov["n_samples"] == 4
    assert prov["seed"] == 7 and prov["ratio"] == "1:1" and prov["sources"] == ["demo"]
    assert json.loads((tmp_path / "mix" / "provenance.json").read_text())["counts"]["refl"] == 4
    saved = pd.read_csv(tmp_path / "mix" / "counts.csv")
    assert saved["Sum"].tolist() == [8] and saved["ratio obtained"].tolist() == ["1:1"]
    assert prov["counts"]["refl_pool"] == 4 and prov["counts"]["pref_pool"] == 7
