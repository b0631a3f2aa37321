"""Result tables on a run folder of real demo pairs judged by a scripted backend.

Expectations are worked out by hand from the scripted patterns (tests/results_run.py): per pair
0..7, both orders, unless noted, `unified` follows overrule, fail, easy, split, parsefail,
overrule, easy, none (pair 1 swapped: easy; its given-order greedy judgment is wrong); `base`
always says Response 1. Half the demo pairs have the better response in slot 1.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from results_run import one_order_copy, shared_run

from rmlib import analysis as res
from rmlib import paper
from rmlib.run.config import config_from_dict


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return shared_run(tmp_path_factory)


@pytest.fixture(scope="module")
def cfg(run):
    return run.config()


@pytest.fixture(scope="module")
def main(cfg, run):
    return res.main_table(cfg, run)


def _score(main: pd.DataFrame, model: str, method: str) -> pd.Series:
    row = main[(main["model"] == model) & (main["method"] == method)]
    assert len(row) == 1
    return row.iloc[0]


# ---- main table ---------------------------------------------------------------------------------


def test_main_table_scores_given_order(main):
    # unified, given order: right = overrule, easy, split, parsefail (the winner is right),
    # overrule, easy -> 6 of 8 (fail is wrong, none is a parse failure).
    expected = {
        ("unified", "reflectrm"): (0.75, 1),
        ("unified", "random_winners"): (0.75, 1),
        ("unified", "anchor"): (0.5, 1),  # anchor wrong in overrule x2 and parsefail
        ("unified", "majority"): (0.875, 1),  # only 'none' fails
        ("unified", "greedy"): (0.875, 0),  # pair 1's greedy judgment is wrong
        ("base", "greedy"): (0.5, 0),  # always slot 1: right on the 4 pairs with label 1
        ("base", "reflectrm"): (0.5, 0),
    }
    for (model, method), (score, failures) in expected.items():
        row = _score(main, model, method)
        assert row["score"] == pytest.approx(score), (model, method)
        assert row["n_parse_failures"] == failures, (model, method)
        assert row["n"] == 8 and row["n_rows"] == 8
        assert row["ci_low"] <= row["score"] <= row["ci_high"]
    assert set(main["model"]) == {"base", "unified"}  # rft was not evaluated
    assert len(main) == 12 and set(main["benchmark"]) == {"demo"}
    assert main["paper"].isna().all()  # demo data: nothing to compare with
    assert _score(main, "unified", "reflectrm")["system"] == paper.SYSTEMS[("unified", "reflectrm")]


def test_main_table_is_written_to_the_run(main, run):
    stored = run.read_table("results_main")
    pd.testing.assert_frame_equal(stored, main, check_dtype=False)
    metrics = run.metrics()
    assert metrics["results"]["failure_credit"] == 0.0
    assert len(metrics["results"]["main"]) == len(main)
    assert metrics["scores"]["unified"]["demo"]["methods"]["reflectrm"]["score"] == 0.75
    assert metrics["results"]["configuration_differences"]


def test_paper_layout_puts_the_papers_numbers_beside_ours():
    rows = []
    for bench, scoring in (("rewardbench", "rewardbench"), ("demo", "accuracy")):
        for model, method in (("base", "greedy"), ("unified", "reflectrm"), ("unified", "anchor")):
            value = paper.paper_accuracy(model, method, scoring)
            rows.append(
                {
                    "model": model,
                    "method": method,
                    "benchmark": bench,
                    "scoring": scoring,
                    "score": 0.6,
                    "ci_low": 0.5,
                    "ci_high": 0.7,
                    "n": 10,
                    "paper": math.nan if value is None else value / 100,
                }
            )
    layout = res.paper_layout(pd.DataFrame(rows))
    assert list(layout.index) == ["base · greedy", "unified · reflectrm", "unified · anchor"]
    assert list(layout["RewardBench (n=10) paper"]) == ["84.8", "86.7", ""]
    assert layout.loc["base · greedy", "RewardBench (n=10) ours"] == "60.0 [50.0, 70.0]"
    assert "demo (n=10) paper" not in layout  # no paper number for the demo
    assert "avg ours" not in layout  # only with all four of the paper's benchmarks


def test_paper_layout_average_only_with_all_four_benchmarks():
    rows = [
        {
            "model": "unified",
            "method": "reflectrm",
            "benchmark": b,
            "scoring": b,
            "score": s,
            "ci_low": s,
            "ci_high": s,
            "n": 5,
            "paper": paper.MAIN_TABLE[("unified", "reflectrm")][b] / 100,
        }
        for b, s in zip(res.PAPER_BENCHMARKS, (0.8, 0.7, 0.6, 0.5), strict=True)
    ]
    layout = res.paper_layout(pd.DataFrame(rows))
    assert layout.loc["unified · reflectrm", "avg ours"] == "65.0"
    assert layout.loc["unified · reflectrm", "avg paper"] == "76.4"
    assert layout.loc["unified · reflectrm", "RM-Bench (n=5 prompts) paper"] == "77.7"


def test_subset_table_has_every_demo_family(cfg, run, main):
    subsets = res.subset_table(cfg, run)
    mine = subsets[(subsets["model"] == "unified") & (subsets["method"] == "reflectrm")]
    assert set(mine["part"]) == {"arithmetic", "constraint", "passage", "refusal"}
    assert (mine["n"] == 2).all()
    # given order: arithmetic (overrule, overrule) 1.0; constraint (fail, parsefail) 0.5;
    # passage (easy, easy) 1.0; refusal (split, none) 0.5
    by_part = dict(zip(mine["part"], mine["score"], strict=True))
    assert by_part == pytest.approx(
        {"arithmetic": 1.0, "constraint": 0.5, "passage": 1.0, "refusal": 0.5}
    )


# ---- configuration differences -----------------------------------------------------------------


def test_configuration_differences_name_what_differs(cfg, main):
    diffs = " ".join(res.configuration_differences(cfg, main))
    assert "Backbone: embedded:smollm2-135m" in diffs
    assert "N = 4" in diffs
    assert "not one of the paper's benchmarks" in diffs
    assert "RewardBench, RM-Bench, RMB, PPE-Pref" in diffs
    assert "16 GPUs" in diffs
    assert "rft" in diffs  # the Pref.-only baseline was not evaluated
    assert "pairs drawn at random" not in diffs  # the demo has no 'all' to compare with


def test_configuration_differences_close_to_the_paper():
    cfg = config_from_dict(
        {
            "model": {"backbone": "Qwen/Qwen3-4B"},
            "data": {
                "train": {"source": "helpsteer3"},
                "eval": [
                    {"source": "rewardbench", "n": 100},
                    {"source": "rm-bench"},
                    {"source": "rmb", "path": "RMB_dataset"},  # no hub copy: a path is required
                    {"source": "ppe"},
                ],
            },
            "inference": {"both_orders": True},
            "eval": {"models": ["base", "rft", "unified"]},
        }
    )
    main = pd.DataFrame(
        [{"benchmark": "rm-bench", "partial": True, "missing": "math"}],
        columns=["benchmark", "partial", "missing"],
    )
    diffs = res.configuration_differences(cfg, main)
    text = " ".join(diffs)
    assert "Backbone" not in text and "N = " not in text and "not evaluated" not in text
    assert "instead of HelpSteer3" not in text
    assert "Fine-tuning: QLoRA: LoRA adapters" in text and "nf4 weights on one device" in text
    assert any("RM-Bench is scored on partial data (missing: math)" in d for d in diffs)
    assert "RewardBench: 100 pairs drawn at random (seeded); the paper uses all." in diffs


def test_configuration_differences_say_the_fine_tuning_that_ran():
    """LoRA or QLoRA as train_precision says, on run.gpus devices, with the step the trainer
    makes there (keep_step_on_gpus keeps the profile's)."""
    lora = config_from_dict({"model": {"train_precision": "bf16"}, "run": {"gpus": 2}})
    text = " ".join(res.configuration_differences(lora))
    assert "Fine-tuning: LoRA adapters" in text and "QLoRA" not in text
    assert "bf16 weights on 2 GPUs (data parallel)" in text


# ---- paired comparisons -------------------------------------------------------------------------


def test_paired_table_counts_discordant_pairs(cfg, run):
    table = res.paired_table(cfg, run)
    row = table[(table["a"] == "unified · reflectrm") & (table["b"] == "unified · anchor")].iloc[0]
    # given order: ReflectRM right, anchor wrong on overrule x2 and parsefail; the reverse on fail
    assert (row["a_right_b_wrong"], row["a_wrong_b_right"]) == (3, 1)
    assert row["difference"] == pytest.approx(0.25)
    assert row["p_value"] == pytest.approx(0.625)  # exact McNemar, 3 vs 1
    assert row["ci_low"] <= row["difference"] <= row["ci_high"]
    cross = table[table["a"].str.startswith("unified") & table["b"].str.startswith("base")]
    assert set(zip(cross["a"], cross["b"], strict=True)) == {
        ("unified · reflectrm", "base · greedy"),
        ("unified · greedy", "base · greedy"),
    }
    assert not table["b"].str.startswith("rft").any()
    assert len(run.metrics()["paired"]["comparisons"]) == len(table)


# ---- analysis quality ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def aq(cfg, run):
    return res.analysis_quality_tables(cfg, run)


def test_reflection_accuracy_hand_computed(aq):
    refl = aq["reflection"]
    mine = refl[(refl["model"] == "unified") & (refl["method"] == "reflectrm")].set_index("case")
    # informative calls (one critique right, one wrong): overrule 3 (all prefer the right one),
    # fail 2 (both prefer the wrong one), split 2 (right), parsefail 1 (right). Keys: overrule x4,
    # parsefail x2, split x2, fail x1 (pair 1 given only) -> 12 + 2 + 4 right, 2 wrong.
    assert mine.loc["all informative", "n"] == 20
    assert mine.loc["all informative", "prefers_correct"] == pytest.approx(18 / 20)
    assert mine.loc["anchor wrong", "n"] == 14  # overrule 12 + parsefail 2
    assert mine.loc["anchor wrong", "prefers_correct"] == pytest.approx(1.0)
    assert mine.loc["anchor right", "n"] == 6  # split 4 + fail 2
    assert mine.loc["anchor right", "prefers_correct"] == pytest.approx(4 / 6)
    base = refl[refl["model"] == "base"]
    assert (base["n"] == 0).all()  # every critique says Response 1: nothing to prefer
    assert base["prefers_correct"].isna().all()


def test_method_accuracies_pool_both_orders(aq):
    m = aq["methods"].set_index(["model", "method"])
    # base samples: 3 say 1 (4 on odd pairs, one fails on even pairs) -> 4*3 + 4*4 right of 64
    assert m.loc[("base", "one sample"), "accuracy"] == pytest.approx(28 / 64)
    assert m.loc[("base", "one sample"), "n_parse_failures"] == 8
    # winners: overrule 4 keys x 3 right, fail 1 key (2 wrong + 1 right), parsefail 2 keys x 1
    assert m.loc[("unified", "winners"), "n"] == 17
    assert m.loc[("unified", "winners"), "accuracy"] == pytest.approx(15 / 17)
    # ReflectRM over 16 rows: wrong on pair 1 given and both 'none' orders
    assert m.loc[("unified", "reflectrm"), "accuracy"] == pytest.approx(13 / 16)
    assert m.loc[("unified", "reflectrm"), "n_pairs"] == 8


def test_accuracy_vs_n(aq):
    t = aq["accuracy_vs_n"]
    uni = t[t["model"] == "unified"]
    maj = uni[uni["method"] == "majority"].set_index("k")
    assert list(maj.index) == [1, 2, 4]  # n_grid [1, 2, 4, 8] capped at N = 4
    # k=1: sample 0 is wrong in overrule, fails in parsefail and none -> 8 right of 16
    assert maj.loc[1, "accuracy"] == pytest.approx(0.5)
    assert maj.loc[1, "n_parse_failures"] == 4
    assert maj.loc[4, "accuracy"] == pytest.approx(14 / 16)  # = the 'majority' method
    ref = uni[uni["method"] == "reflectrm"]
    assert list(ref["k"]) == [4] and ref["accuracy"].iloc[0] == pytest.approx(13 / 16)


def test_calibration_bins(aq):
    cal = aq["calibration"]
    uni = cal[cal["model"] == "unified"]
    assert uni["n"].sum() == 52  # 64 samples - 12 parse failures
    assert ((uni["ci_low"] <= uni["accuracy"]) & (uni["accuracy"] <= uni["ci_high"])).all()


def test_analysis_summary_is_in_metrics(aq, run):
    section = run.metrics()["analysis_quality"]
    assert set(section) == {"summary", "calibration", "reflection", "methods", "accuracy_vs_n"}
    uni = next(r for r in section["summary"] if r["model"] == "unified")
    assert uni["reflection_accuracy"] == pytest.approx(0.9)


# ---- position bias ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pb(cfg, run):
    return res.position_bias_tables(cfg, run)


def test_consistency_of_a_first_slot_judge(pb):
    c = pb["consistency"].set_index(["model", "method"])
    base = c.loc[("base", "greedy")]
    assert base["both_correct"] == 0.0  # right in exactly one order of every pair
    assert base["flip_rate"] == 1.0 and base["first_slot_win_rate"] == 1.0
    assert base["label1_share"] == 0.5
    uni = c.loc[("unified", "reflectrm")]
    assert uni["both_correct"] == pytest.approx(6 / 8)  # pair 1 (given) and 'none' fail
    assert uni["n_flip_eligible"] == 7  # 'none' has no parsed verdict
    assert uni["flip_rate"] == pytest.approx(1 / 7)  # pair 1: the same slot twice
    assert uni["flip_ci_low"] <= uni["flip_rate"] <= uni["flip_ci_high"]
    assert (uni["accuracy_given"], uni["accuracy_swapped"]) == (0.75, 0.875)


def test_the_stage1_first_slot_share_is_the_runs_own(pb, run):
    """By hand: the base judge's parsed stage-1 samples all say Response 1 (8 pairs x 2 orders x
    4 samples, the last of the 4 even pairs' samples unparsed in both orders: 64 - 8 parsed),
    against a label share of one half (both orders); unified's share is counted from its table."""
    s = pb["stage1_first_slot"].set_index("stage1_judge")
    base = s.loc["base"]
    assert base["says_response_1"] == 1.0 and base["label1_share"] == 0.5
    assert (base["n_samples"], base["n_rows"]) == (56, 64)
    roll = run.read_table("rollouts_unified")
    parsed = roll[roll["choice"].notna()]
    assert s.loc["unified", "says_response_1"] == pytest.approx((parsed["choice"] == 1).mean())
    assert s.loc["unified", "ci_low"] <= s.loc["unified", "says_response_1"]
    assert run.metrics()["position_bias"]["stage1_first_slot"][0]["stage1_judge"] == "base"


def test_consistency_layout_has_the_papers_average(pb):
    layout = pb["paper"]
    assert layout.loc["base · greedy", "avg paper (5 sets)"] == "54.3"
    assert layout.loc["unified · reflectrm", "avg paper (5 sets)"] == "64.5"
    assert layout.loc["unified · reflectrm", "avg ours"] == "75.0"


def test_length_table(pb, run):
    length = pb["length"]
    lengths = res.pair_lengths(run)
    diff = lengths["len_chosen"] - lengths["len_rejected"]
    bins = res.length_bins(diff, 5)
    assert bins.notna().all()
    per_method = length.groupby(["model", "method"])["n"].sum()
    assert (per_method == 16).all()  # every row lands in one bin
    assert set(length["bin"]) == {str(b) for b in bins.cat.categories if (bins == b).any()}


def test_length_bins_collapse_equal_edges():
    bins = res.length_bins(pd.Series([0, 0, 0, 0, 5, 10]), 5)
    assert list(bins.cat.categories) == ["+0 to +5", "+5 to +10"]
    assert bins.notna().all()
    single = res.length_bins(pd.Series([3, 3]), 5)
    assert single.notna().all() and len(single.cat.categories) == 1


def test_one_order_run(run, tmp_path):
    one = one_order_copy(run, tmp_path / "one")
    pb = res.position_bias_tables(one.config(), one)
    assert (pb["consistency"]["n_pairs_both_orders"] == 0).all()
    assert pb["consistency"]["both_correct"].isna().all()
    assert pb["paper"].empty
    assert any("one order only" in n for n in pb["notes"])
    # the first-slot win rate is still measured
    base = pb["consistency"].set_index(["model", "method"]).loc[("base", "greedy")]
    assert base["first_slot_win_rate"] == 1.0


# ---- worked examples and headline ---------------------------------------------------------------


def test_worked_examples(run):
    ex = res.worked_examples(run, "unified", k=1)
    (over,) = ex["overrule"]
    assert over["key"].endswith("arithmetic/0000:given")  # pair 0, 'overrule'
    assert over["anchor_verdict"] != over["label"] and over["final_correct"]
    assert over["winners"] == [1, 2, 3] and len(over["calls"]) == 3
    assert over["query"].startswith("Compute")
    (fail,) = ex["failure"]
    assert fail["key"].endswith("constraint/0000:given")  # pair 1, 'fail'
    assert fail["what"] == "the reflection overruled a right anchor"
    assert not fail["final_correct"]
    md = res.examples_markdown(ex)
    assert "overruling a wrong anchor" in md and "A reflection failing" in md
    assert over["anchor_critique"].split("</Analysis>")[0] in md
    assert "No such pair" in res.examples_markdown({"overrule": [], "failure": []})


def test_headline(cfg, run, main):
    h = res.headline(cfg, run)
    assert h["model"] == "unified"
    assert h["acc.demo.reflectrm"] == 0.75
    assert h["acc.demo.base.greedy"] == 0.5
    assert h["consistency.demo.reflectrm"] == pytest.approx(0.75)
    assert h["failures.demo.reflectrm"] == 1 and h["n.demo"] == 8
    assert h["acc.demo.reflectrm.ci_low"] <= 0.75 <= h["acc.demo.reflectrm.ci_high"]
    assert all(isinstance(v, int | float | str) or v is None for v in h.values())
    assert run.metrics()["headline"] == h


# ---- helpers -------------------------------------------------------------------------------------


def test_pooled_rate_resamples_whole_groups():
    est, low, high = res.pooled_rate([1, 1, 0, 0], ["a", "a", "b", "b"], n_boot=200, seed=0)
    assert est == 0.5
    assert 0.0 <= low <= est <= high <= 1.0
    # groups of identical values: every resample of groups gives 0, 0.5 or 1
    est, low, high = res.pooled_rate([1, 1, 1], ["a", "b", "c"], n_boot=50, seed=0)
    assert (est, low, high) == (1.0, 1.0, 1.0)
    assert all(math.isnan(x) for x in res.pooled_rate([], [], n_boot=10, seed=0))


def test_wilson_interval():
    low, high = res.wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-3)
    low, high = res.wilson(5, 10)
    assert 0.5 - low == pytest.approx(high - 0.5)
    assert all(math.isnan(x) for x in res.wilson(0, 0))
