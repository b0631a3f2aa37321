"""RewardBench 2: the loader, the pairwise protocol's per-completion scores, upstream's rule on
hand-computed tables, and `rmlib score` on per-completion scores files (shared sample)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlib import data
from rmlib.data.pair import DataError
from rmlib.scoring import score_file, score_predictions
from rmlib.scoring.rewardbench2 import (
    best_of_n_result,
    completion_scores,
    completions_aggregate,
    prompt_stats,
    ties_score,
)

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "rewardbench2"


@pytest.fixture(scope="module")
def sample():
    if not SAMPLE.is_dir():
        pytest.skip(f"{SAMPLE} is absent: the RewardBench 2 sample is not on this machine")
    return pd.read_parquet(SAMPLE / "data" / "test-00000-of-00001.parquet")


# ---------------------------------------------------------------- upstream's rule, by hand


def test_best_of_4_ties_at_the_top_cost_what_they_cost_upstream():
    assert best_of_n_result([5, 1, 1, 1]) == 1.0
    assert best_of_n_result([3, 3, 1, 0]) == 0.5  # the correct one shares the top with one
    assert best_of_n_result([2, 2, 2, 1]) == pytest.approx(1 / 3)
    assert best_of_n_result([4, 4, 4, 4]) == 0.25
    assert best_of_n_result([2, 3, 1, 0]) == 0.0


def test_ties_group_whose_correct_answers_straddle_an_incorrect_one():
    # tied:0 has 3 correct (5, 2, 4) around an incorrect 3: spread 5-2 = 3, margin 2-3 = -1
    tied = prompt_stats([5, 2, 4, 3, 1], 3)
    assert tied == (False, 3, -1)
    ref = prompt_stats([6, 2, 1], 1)  # ref:0: margin 6-2 = 4, accurate; no spread of one
    assert ref == (True, None, 4)
    score, parts = ties_score([tied], [ref], [(tied, ref)])
    # 0.30*0 + 0.30*1 + 0.20*(-1 > 3) + 0.20*(min(4,-1) > 3) + 0.01*tanh(-1/3 - 1)
    assert parts["correctness_preferred"] == parts["correctness_preferred_hard"] == 0.0
    assert parts["correctness_margin_score"] == pytest.approx(math.tanh(-4 / 3))
    assert score == pytest.approx(0.30 + 0.01 * math.tanh(-4 / 3))


def test_ties_division_by_a_zero_spread():
    # equal correct scores: spread 0. A positive margin over 0 is +inf (tanh 1, as upstream's
    # numpy gives); a zero margin over 0 is NaN, which upstream sets to 0.
    tied, ref = prompt_stats([4, 4, 1], 2), prompt_stats([4, 1], 1)
    assert tied == (True, 0, 3)
    score, parts = ties_score([tied], [ref], [(tied, ref)])
    assert parts["correctness_margin_score"] == 1.0
    assert score == pytest.approx(0.30 + 0.30 + 0.20 + 0.20 + 0.01)
    flat_tied, flat_ref = prompt_stats([4, 4, 4], 2), prompt_stats([4, 4], 1)
    score, parts = ties_score([flat_tied], [flat_ref], [(flat_tied, flat_ref)])
    assert parts["correctness_margin_score"] == 0.0 and score == 0.0


def test_six_subset_mean_and_ties_prompt_units():
    table = pd.DataFrame(
        [
            ("Factuality", "0", 1, [1, 0, 0, 0]),
            ("Factuality", "1", 1, [1, 1, 0, 0]),  # 0.5
            ("Precise IF", "0", 1, [0, 1, 0, 0]),  # the same id in another subset
            ("Ties", "tied:3", 2, [4, 4, 1]),
            ("Ties", "ref:3", 1, [4, 1]),
        ],
        columns=["subset", "id", "num_correct", "scores"],
    )
    agg = completions_aggregate(table)
    assert agg.units == ["Factuality/0", "Factuality/1", "Precise IF/0", "Ties/3"]
    est = agg.fn(np.arange(4))
    # Factuality 0.75, Precise IF 0, Ties 1.01 -> mean of the three present
    assert list(est[1:]) == pytest.approx([0.75, 0.0, 1.01])
    assert est[0] == pytest.approx((0.75 + 0.0 + 1.01) / 3)
    assert agg.details["partial"] and agg.details["missing_subsets"] == ["Math", "Safety", "Focus"]


# ---------------------------------------------------------------- the pairwise protocol


def _pair_rows(pairs, verdicts):
    """Prediction rows: verdicts[(pair id, order)] = 'correct' | 'wrong' | None."""
    rows = []
    for p in pairs:
        for q in (p, p.swapped()):
            v = verdicts.get((p.id, q.order), "correct")
            verdict = None if v is None else q.label if v == "correct" else 3 - q.label
            rows.append({"id": p.id, "order": q.order, "verdict": verdict})
    return pd.DataFrame(rows), [q for p in pairs for q in (p, p.swapped())]


def _record(tmp_path: Path, rows: list[dict]) -> str:
    f = tmp_path / "rb2.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(f)


BEST_OF_4 = {
    "id": "0",
    "prompt": "Q?",
    "chosen": ["right"],
    "rejected": ["w1", "w2", "w3"],
    "num_correct": 1,
    "num_incorrect": 3,
    "total_completions": 4,
    "models": ["a", "b", "c", "d"],
    "subset": "Math",
    "additional_metadata": {"method": "natural"},
}


def test_per_completion_win_rates_from_both_orders(tmp_path):
    pairs = data.load("rewardbench2", _record(tmp_path, [BEST_OF_4])).pairs
    assert [p.id for p in pairs] == ["Math/0/0v1", "Math/0/0v2", "Math/0/0v3"]
    # correct beats w1 in both orders, loses to w2 in one order, fails to parse against w3 once
    verdicts = {("Math/0/0v2", "swapped"): "wrong", ("Math/0/0v3", "given"): None}
    preds, both = _pair_rows(pairs, verdicts)
    from rmlib.scoring.predictions import attach_pairs, validate_predictions

    (rec,) = completion_scores(attach_pairs(validate_predictions(preds), both)).to_dict("records")
    assert rec["scores"] == pytest.approx([4.5 / 6, 0.0, 0.5, 0.25])
    res = score_predictions(preds, "rewardbench2", both, n_boot=10)
    assert res["methods"]["default"]["subsets"]["Math"]["score"] == 1.0
    # the same verdicts as a predictions file: `rmlib score` attaches the pairs from --path
    f = tmp_path / "preds.jsonl"
    preds.to_json(f, orient="records", lines=True)
    res = score_file(f, "rewardbench2", _record(tmp_path, [BEST_OF_4]), n_boot=10)
    assert res["ids_checked"] and res["methods"]["default"]["subsets"]["Math"]["score"] == 1.0
    # a judge that always answers "Response 1": every completion wins half its games
    always1 = preds.assign(verdict=1)
    res = score_predictions(always1, "rewardbench2", both, n_boot=10)
    assert res["methods"]["default"]["score"] == 0.25


def test_bad_rows_are_refused_in_one_located_line(tmp_path):
    cases = [
        (
            {"chosen": ["a", "b"], "num_correct": 2, "num_incorrect": 3, "total_completions": 5},
            "field 'chosen': a Math record needs exactly 1 correct completion, got 2",
        ),
        ({"num_incorrect": 4}, "field 'num_incorrect': num_incorrect 4 disagrees with the lists"),
        ({"total_completions": 5}, "field 'total_completions'"),
        ({"subset": "Chat"}, "field 'subset': unknown RewardBench 2 subset 'Chat'"),
        ({"subset": "Ties", "id": "7"}, "field 'id': a Ties id is 'tied:N' or 'ref:N'"),
    ]
    for change, message in cases:
        path = _record(tmp_path, [BEST_OF_4, {**BEST_OF_4, "id": "1", **change}])
        with pytest.raises(DataError) as err:
            data.load("rewardbench2", path)
        assert str(err.value) == f"{path}, line 2, {message}" or (
            str(err.value).startswith(f"{path}, line 2, ") and message in str(err.value)
        )
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown subsets"):
        data.load("rewardbench2", path, subsets=["Chat"])


def test_shared_sample_loads_with_string_ids_repeated_across_subsets(sample):
    res = data.load("rewardbench2", str(SAMPLE))
    assert res.n_rows == 72 and res.split == "test"
    groups = {p.meta["group"] for p in res.pairs}
    assert "Factuality/0" in groups and "Precise IF/0" in groups and len(groups) == 72
    n_best_of_4 = sum(p.subset != "Ties" for p in res.pairs)
    assert n_best_of_4 == 3 * 50
    # every Ties completion meets min(k, other class) opponents of the other class
    for k in (1, 2):
        ties = [
            p
            for p in data.load("rewardbench2", str(SAMPLE), ties_opponents=k).pairs
            if p.subset == "Ties"
        ]
        met: dict[tuple[str, int], set[int]] = {}
        for p in ties:
            g, c, i = p.meta["group"], p.meta["better"], p.meta["worse"]
            met.setdefault((g, c), set()).add(i)
            met.setdefault((g, i), set()).add(c)
        assert all(len(v) >= 1 for v in met.values())
        assert sum(len(v) for v in met.values()) == 2 * len(ties)
    only = data.load("rewardbench2", str(SAMPLE), subsets=["Focus"])
    assert {p.subset for p in only.pairs} == {"Focus"} and only.dropped[
        "subset Ties not selected"
    ] == 22


# ---------------------------------------------------------------- rmlib score, shared sample


def _scores_file(tmp_path: Path, sample: pd.DataFrame, drop: int = 0, **change) -> Path:
    f = tmp_path / "scores.jsonl"
    with f.open("w") as out:
        for rec in sample.to_dict("records")[drop:]:
            row = {
                "subset": rec["subset"],
                "id": rec["id"],
                "scores": [1.0] * rec["num_correct"] + [0.0] * rec["num_incorrect"],
            }
            out.write(json.dumps({**row, **change}) + "\n")
    return f


def test_score_file_oracle_partial_and_mismatch(tmp_path, sample, capsys):
    from rmlib.cli import main

    oracle = _scores_file(tmp_path, sample)
    assert (
        main(
            [
                "score",
                str(oracle),
                "--benchmark",
                "rewardbench2",
                "--path",
                str(SAMPLE),
                "--n-boot",
                "20",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    m = res["methods"]["default"]
    # an oracle: every best-of-4 subset 1; Ties 0.3+0.3+0.2+0.2+0.01*tanh(1/0) = 1.01
    assert m["official"] and res["ids_checked"]
    assert m["subsets"]["Ties"]["score"] == pytest.approx(1.01)
    assert m["score"] == pytest.approx((5 + 1.01) / 6)
    partial = score_file(
        _scores_file(tmp_path, sample, drop=1), "rewardbench2", str(SAMPLE), n_boot=5
    )
    assert not partial["methods"]["default"]["official"]
    assert "not an official score" in partial["warning"]
    wrong = _scores_file(tmp_path, sample, scores=[1.0, 0.0])
    assert main(["score", str(wrong), "--benchmark", "rewardbench2", "--path", str(SAMPLE)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"rmlib: error: {wrong}, line 1, field 'scores': 2 scores for 'Factuality/0', which has 4"
    ]
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({"subset": "Factuality", "id": "999", "scores": [1, 0]}) + "\n")
    with pytest.raises(
        DataError, match="line 1, field 'id': no RewardBench 2 record 'Factuality/999'"
    ):
        score_file(unknown, "rewardbench2", str(SAMPLE))


def test_every_comparison_is_twinned_and_the_dry_run_counts_the_full_set(tmp_path):
    from rmlib.data.pair import both_orders
    from rmlib.data.rewardbench2 import set_pairs

    pairs = data.load("rewardbench2", _record(tmp_path, [BEST_OF_4])).pairs
    twinned = both_orders(pairs, swapped_pairs=0)  # a draw of none still twins these
    assert [p.order for p in twinned] == ["given", "swapped"] * 3
    # 3 comparisons per best-of-4 record of the card's sizes; Ties at the sample's mean cost
    assert set_pairs({"subsets": ["Math", "Focus"]}) == 3 * (183 + 495)
    assert set_pairs({}) > set_pairs({"ties_opponents": 1}) > 3 * (1865 - 102)


def test_05s_tables_show_the_six_subsets_and_the_mean_with_intervals(sample, tmp_path):
    from rmlib.analysis.accuracy import _main_row, subset_table

    pairs = data.load("rewardbench2", str(SAMPLE)).pairs
    preds, both = _pair_rows(pairs, {})  # an oracle in both orders
    result = score_predictions(preds.assign(method="greedy"), "rewardbench2", both, n_boot=20)
    table = subset_table(None, None, scores={"base": {"rewardbench2": result}})
    assert list(table["part"]) == ["Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties"]
    assert table["ci_low"].notna().all() and table["ci_high"].notna().all()
    row = _main_row("base", "greedy", "rewardbench2", "rewardbench2", result["methods"]["greedy"])
    # upstream's Ties reaches 1.01 (its tanh term), so a perfect mean is slightly above 1
    assert row["score"] == pytest.approx((5 + 1.01) / 6) and math.isnan(row["paper"])
