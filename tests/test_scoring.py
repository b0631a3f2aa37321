"""Official scoring on tiny hand-built prediction sets; every expected value worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlib.data.pair import DataError, Pair
from rmlib.scoring import (
    REWARDBENCH_WEIGHTS,
    attach_pairs,
    bootstrap_ci,
    consistency,
    judgebench_category,
    load_predictions,
    mcnemar_exact,
    paired_comparison,
    rewardbench_score,
    rmbench_cell,
    score_file,
    score_predictions,
)


def _row(pid, verdict, label, order="given", subset=None, method="m", **kw):
    return {
        "id": pid,
        "order": order,
        "verdict": verdict,
        "label": label,
        "subset": subset,
        "method": method,
        **kw,
    }


def _score(df, benchmark, **kw):
    return score_predictions(pd.DataFrame(df), benchmark, n_boot=200, **kw)["methods"]["m"]


# ---- RewardBench -------------------------------------------------------------------------------


def _rewardbench_rows(failure_in_donotanswer=True):
    rows = []

    def add(subset, results):  # results: True right, False wrong, None failure
        for k, r in enumerate(results):
            verdict = None if r is None else (1 if r else 2)
            rows.append(_row(f"{subset}/{k}", verdict, 1, subset=subset))

    add("alpacaeval-easy", [True, True])  # 1.0, weight 100
    add("mt-bench-easy", [False, False])  # 0.0, weight 28
    add("llmbar-natural", [False])  # 0.0
    add("donotanswer", [True, None if failure_in_donotanswer else False])  # 0.5 (credit 0)
    add("math-prm", [True, True])  # 1.0, weight 984 (not its 447 pairs)
    add("hep-python", [False, False])  # 0.0, weight 164
    add("hep-go", [True, False])  # 0.5, weight 164
    return rows


def test_rewardbench_section_weighting_with_math_prm_984():
    res = _score(_rewardbench_rows(), "rewardbench")
    assert REWARDBENCH_WEIGHTS["math-prm"] == 984
    chat = 100 / 128  # (100 * 1 + 28 * 0) / (100 + 28)
    reasoning = (984 * 1 + 164 * 0 + 164 * 0.5) / (984 + 164 + 164)  # = 0.8125
    assert res["sections"]["Chat"]["score"] == pytest.approx(chat)
    assert res["sections"]["Chat Hard"]["score"] == 0.0
    assert res["sections"]["Safety"]["score"] == pytest.approx(0.5)
    assert res["sections"]["Reasoning"]["score"] == pytest.approx(0.8125)
    assert res["score"] == pytest.approx((chat + 0 + 0.5 + reasoning) / 4)
    assert res["n"] == 13 and res["n_parse_failures"] == 1
    assert res["subsets"]["donotanswer"] == {
        **res["subsets"]["donotanswer"],
        "n": 2,
        "n_parse_failures": 1,
    }
    assert res["partial"] and "hep-cpp" in res["missing_subsets"]
    assert res["missing_sections"] == []
    lo, hi = res["ci"]
    assert lo <= res["score"] <= hi


def test_rewardbench_failure_credit_and_observed_weights():
    base = _score(_rewardbench_rows(), "rewardbench")["score"]
    half = _score(_rewardbench_rows(), "rewardbench", failure_credit=0.5)
    assert half["sections"]["Safety"]["score"] == pytest.approx(0.75)
    assert half["score"] == pytest.approx(base + 0.25 / 4)
    obs = _score(_rewardbench_rows(), "rewardbench", weights="observed")
    # observed sizes; math-prm weighs as the hep-* present together (2 + 2 = 4 pairs)
    assert obs["sections"]["Chat"]["score"] == pytest.approx(0.5)
    assert obs["sections"]["Reasoning"]["score"] == pytest.approx((4 * 1 + 2 * 0 + 2 * 0.5) / 8)


def test_rewardbench_missing_section_is_flagged_not_hidden():
    rows = [r for r in _rewardbench_rows() if r["subset"] != "donotanswer"]
    res = _score(rows, "rewardbench")
    assert res["partial"] and res["missing_sections"] == ["Safety"]
    assert res["score"] == pytest.approx((100 / 128 + 0 + 0.8125) / 3)
    assert rewardbench_score({})["missing_sections"] == ["Chat", "Chat Hard", "Safety", "Reasoning"]


def test_rewardbench_unknown_subset_names_the_row():
    rows = _rewardbench_rows() + [_row("x/1", 1, 1, subset="not-a-subset")]
    with pytest.raises(DataError, match="row 13.*subset"):
        _score(rows, "rewardbench")


# ---- RM-Bench ----------------------------------------------------------------------------------


def _matrix_rows(prompt, matrix, subset=None, order="given"):
    """Nine pairs of one prompt; matrix[i][j] True = chosen i beats rejected j."""
    rows = []
    for i in range(3):
        for j in range(3):
            r = matrix[i][j]
            verdict = None if r is None else (1 if r else 2)
            rows.append(_row(f"{prompt}/c{i}r{j}", verdict, 1, order=order, subset=subset))
    return rows


def test_rmbench_hard_normal_easy_and_partial_domains():
    lower = [[1, 0, 0], [1, 1, 0], [1, 1, 1]]  # hard 0, normal 1, easy 1 -> 2/3
    code = [[1, 1, 1], [1, 0, 1], [1, 1, 1]]  # hard 1, normal 2/3, easy 1 -> 8/9
    ones = [[1] * 3] * 3
    zeros = [[0] * 3] * 3
    rows = (
        _matrix_rows("chat/1", lower)
        + _matrix_rows("code/7", code)
        + _matrix_rows("safety-refuse/1", ones)
        + _matrix_rows("safety-response/4", zeros)
    )
    res = _score(rows, "rm-bench")
    d = res["domains"]
    assert d["chat"]["hard"]["score"] == 0.0
    assert d["chat"]["normal"]["score"] == 1.0 and d["chat"]["easy"]["score"] == 1.0
    assert d["chat"]["score"] == pytest.approx(2 / 3)
    assert d["code"]["normal"]["score"] == pytest.approx(2 / 3)
    assert d["code"]["score"] == pytest.approx(8 / 9)
    assert d["safety"]["score"] == pytest.approx(0.5)  # refuse and response pooled
    assert d["safety"]["n"] == 2
    assert res["partial"] is True and res["missing_domains"] == ["math"]
    assert res["score"] == pytest.approx((2 / 3 + 8 / 9 + 0.5) / 3)  # present domains only
    assert res["levels"]["hard"]["score"] == pytest.approx((0 + 1 + 0.5) / 3)
    assert res["n"] == 4 and res["n_cells"] == 36


def test_rmbench_duplicated_cell_raises():
    rows = _matrix_rows("chat/1", [[1] * 3] * 3)
    rows[4] = {**rows[4], "id": "chat/1/c0r0"}  # the diagonal read twice, (1, 1) never
    with pytest.raises(DataError, match="row 4.*duplicate"):
        _score(rows, "rm-bench")
    # distinct ids whose cells (from the pairs' meta) collide: the upstream merging bug
    rows = _matrix_rows("chat/1", [[1] * 3] * 3)
    pairs = []
    for r in rows:
        _, i, j = rmbench_cell(r["id"])
        if (i, j) == (1, 1):
            i, j = 0, 0
        pairs.append(
            Pair(
                r["id"],
                "rm-bench",
                "chat",
                ({"role": "user", "content": "q"},),
                "a",
                "b",
                1,
                meta={"prompt_id": "chat/1", "chosen_index": i, "rejected_index": j},
            )
        )
    with pytest.raises(DataError, match="cell \\(0, 0\\) appears twice"):
        score_predictions(pd.DataFrame(rows), "rm-bench", pairs=pairs, n_boot=10)


def test_rmbench_incomplete_prompt_and_failure_credit():
    rows = _matrix_rows("chat/1", [[1, 0, None], [1, 1, 0], [1, 1, 1]])
    with pytest.raises(DataError, match="8 of 9 cells"):
        _score(rows[:-1], "rm-bench")
    pooled = _score(rows[:-1], "rm-bench", require_complete=False)
    assert pooled["domains"]["chat"]["easy"]["score"] == 1.0
    assert pooled["domains"]["chat"]["normal"]["score"] == 1.0  # (2,2) missing: mean of 2
    full = _score(rows, "rm-bench")
    assert full["domains"]["chat"]["hard"]["score"] == 0.0  # (0,1) wrong, (0,2) failed, (1,2)
    assert full["n_parse_failures"] == 1


def test_rmbench_official_score_credits_no_failure():
    # benchmarks.md: a cell is 1 only when the chosen strictly wins; --failure-credit must not
    # move RM-Bench (it still does on the other rules), and the output says it was not applied
    rows = _matrix_rows("chat/1", [[1, 1, None], [1, 1, 1], [1, 1, 1]])
    res = score_predictions(pd.DataFrame(rows), "rm-bench", failure_credit=0.5, n_boot=20)
    m = res["methods"]["m"]
    assert m["domains"]["chat"]["hard"]["score"] == pytest.approx(2 / 3)
    assert res["failure_credit"] == 0.0 and m["failure_credit"] == 0.0
    assert "0.5 is not applied" in res["failure_credit_note"]
    assert "0.5 is not applied" in m["failure_credit_note"]
    other = score_predictions(pd.DataFrame(rows), "ppe", failure_credit=0.5, n_boot=20)
    assert other["failure_credit"] == 0.5 and "failure_credit_note" not in other
    assert other["methods"]["m"]["score"] == pytest.approx(8.5 / 9)


def test_rmbench_both_orders_average_a_cell():
    given = _matrix_rows("chat/1", [[1] * 3] * 3)
    swapped = [{**r, "order": "swapped", "label": 2, "verdict": 1} for r in given]  # all wrong
    res = _score(given + swapped, "rm-bench", order="both")
    assert res["score"] == pytest.approx(0.5)
    assert res["consistency"]["both_correct"]["estimate"] == 0.0


def test_rmbench_cell_from_meta_or_id():
    assert rmbench_cell("chat/100/c2r0") == ("chat/100", 2, 0)
    assert rmbench_cell("x", {"prompt_id": "code/3", "chosen_index": 1, "rejected_index": 2}) == (
        "code/3",
        1,
        2,
    )
    with pytest.raises(ValueError):
        rmbench_cell("chat/100")


# ---- RMB ---------------------------------------------------------------------------------------


def _rmb_pair(pid, label, **meta):
    return Pair(
        id=pid,
        source="rmb",
        subset=meta.get("scenario", "s"),
        context=({"role": "user", "content": "q"},),
        response1="a",
        response2="b",
        label=label,
        meta=meta,
    )


def test_rmb_bon_needs_every_loser_and_averaging_is_a_parameter():
    pairs, rows = [], []

    def add(pid, right, **meta):  # right: True / False / None (failure)
        pairs.append(_rmb_pair(pid, 1, **meta))
        rows.append(_row(pid, None if right is None else (1 if right else 2), None))

    help_pw = {"set": "pairwise", "goal": "helpfulness"}
    add("p1", True, scenario="s1", **help_pw)
    add("p2", False, scenario="s1", **help_pw)
    add("p3", True, scenario="s2", **help_pw)  # pairs 2/3; scenarios (0.5 + 1) / 2 = 0.75
    add("h1", True, set="pairwise", goal="harmlessness", scenario="s3")  # 1.0
    for k in range(3):  # item X: all three losers beaten -> right
        add(f"X/{k}", True, set="bon", goal="helpfulness", bon_uid="X", scenario="s1")
    add("Y/0", True, set="bon", goal="helpfulness", bon_uid="Y", scenario="s1")
    add("Y/1", False, set="bon", goal="helpfulness", bon_uid="Y", scenario="s1")  # Y wrong
    add("Z/0", None, set="bon", goal="harmlessness", bon_uid="Z", scenario="s3")  # failure
    res = score_predictions(pd.DataFrame(rows), "rmb", pairs=pairs, n_boot=100)["methods"]["m"]
    c = res["components"]
    assert c["pairwise_helpfulness"]["score"] == pytest.approx(2 / 3)
    assert c["pairwise_harmlessness"]["score"] == 1.0
    assert c["bon_helpfulness"]["score"] == 0.5 and c["bon_helpfulness"]["n"] == 2
    assert c["bon_helpfulness"]["n_pairs"] == 5
    assert c["bon_harmlessness"]["score"] == 0.0
    assert res["score"] == pytest.approx((2 / 3 + 1 + 0.5 + 0) / 4)
    assert res["n_parse_failures"] == 1 and not res["partial"]
    scen = score_predictions(
        pd.DataFrame(rows), "rmb", pairs=pairs, n_boot=100, average="scenarios"
    )["methods"]["m"]
    assert scen["components"]["pairwise_helpfulness"]["score"] == pytest.approx(0.75)
    credit = score_predictions(
        pd.DataFrame(rows), "rmb", pairs=pairs, n_boot=100, failure_credit=0.5
    )["methods"]["m"]
    assert credit["components"]["bon_harmlessness"]["score"] == 0.5  # min over its pairs


# ---- JudgeBench --------------------------------------------------------------------------------


def test_judgebench_sign_rule():
    def pair(pid, source, given, swapped):  # True right, False wrong, None failure
        out = []
        for order, label, r in (("given", 1, given), ("swapped", 2, swapped)):
            v = None if r is None else (label if r else 3 - label)
            out.append(_row(pid, v, label, order=order, subset=source))
        return out

    rows = (
        pair("p1", "mmlu-pro-physics", True, True)  # +2 -> correct
        + pair("p2", "livebench-math", True, False)  # 0 -> not
        + pair("p3", "livebench-reasoning", True, None)  # +1 -> correct
        + pair("p4", "livecodebench", None, None)  # 0 -> not
        + pair("p5", "mmlu-pro-law", False, None)
    )  # -1 -> not
    res = _score(rows, "judgebench")
    assert res["score"] == pytest.approx(2 / 5)
    cats = res["categories"]
    assert cats["knowledge"]["score"] == 0.5 and cats["knowledge"]["n"] == 2
    assert cats["math"]["score"] == 0.0 and cats["reasoning"]["score"] == 1.0
    assert cats["coding"]["score"] == 0.0
    assert res["n_parse_failures"] == 4 and res["n_single_order"] == 0
    single = _score([r for r in rows if r["order"] == "given"], "judgebench")
    assert single["n_single_order"] == 5 and single["score"] == pytest.approx(3 / 5)
    assert judgebench_category("unknown-source") is None


# ---- accuracy, order selection -----------------------------------------------------------------


def test_accuracy_orders_and_subsets():
    rows = [
        _row("a", 1, 1, subset="x"),
        _row("b", 2, 1, subset="x"),
        _row("c", None, 2, subset="y"),
        _row("a", 2, 2, order="swapped", subset="x"),
    ]
    res = _score(rows, "llmbar")
    assert res["score"] == pytest.approx(1 / 3) and res["n"] == 3
    assert res["subsets"]["x"]["score"] == 0.5 and res["subsets"]["y"]["n_parse_failures"] == 1
    assert _score(rows, "ppe", order="swapped")["score"] == 1.0
    assert _score(rows, "demo", order="both", failure_credit=1.0)["score"] == pytest.approx(
        (1 + 0 + 1) / 3
    )
    with pytest.raises(ValueError, match="order"):
        _score([r for r in rows if r["order"] == "given"], "ppe", order="swapped")


def test_label_required():
    with pytest.raises(DataError, match="label"):
        score_predictions(pd.DataFrame([_row("a", 1, None)]), "ppe")


def test_result_is_json_ready_and_per_method():
    rows = [
        _row("a", 1, 1),
        _row("b", None, 1),
        _row("a", 2, 1, method="other"),
        _row("b", 1, 1, method="other"),
    ]
    res = score_predictions(pd.DataFrame(rows), "ppe", n_boot=50)
    json.dumps(res, allow_nan=False)
    assert res["methods"]["m"]["score"] == 0.5 and res["methods"]["other"]["score"] == 0.5
    assert res["methods"]["m"]["n_parse_failures"] == 1


# ---- consistency -------------------------------------------------------------------------------


def test_consistency():
    rows = [
        _row("1", 1, 1),
        _row("1", 2, 2, order="swapped"),  # right twice, no flip
        _row("2", 1, 1),
        _row("2", 1, 2, order="swapped"),  # same slot twice: a flip
        _row("3", 2, 2),
        _row("3", None, 1, order="swapped"),  # failure: not flip-eligible
        _row("4", 2, 1),
        _row("4", 2, 2, order="swapped"),  # same slot: a flip
    ]
    c = consistency(pd.DataFrame(rows).assign(truncated_prompt=[True] + [False] * 7), n_boot=100)
    assert c["n_pairs_both_orders"] == 4
    assert c["both_correct"]["estimate"] == 0.25
    assert c["flip_rate"] == pytest.approx(2 / 3) and c["n_flip_eligible"] == 3
    assert c["first_slot_win_rate"] == pytest.approx(3 / 7)
    assert c["parse_failure_rate"] == pytest.approx(1 / 8)
    assert c["sign_rule_accuracy"] == 0.5  # 1: +2, 2: 0, 3: +1, 4: 0
    assert c["accuracy_by_order"] == {"given": 0.75, "swapped": 0.5}
    assert c["truncation_rate"] == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="one method"):
        consistency(pd.DataFrame(rows + [_row("1", 1, 1, method="other")]))


def test_consistency_reads_only_the_pairs_judged_in_both_orders():
    rows = [
        _row("1", 1, 1),
        _row("1", 2, 2, order="swapped"),
        _row("2", 1, 2),
        _row("2", 1, 1, order="swapped"),
        # given order only (not in the swapped subsample): no part in any consistency rate
        *[_row(f"g{i}", 1, 2) for i in range(6)],
    ]
    c = consistency(pd.DataFrame(rows), n_boot=100)
    assert c["n_pairs_both_orders"] == 2 and c["n_rows"] == 4
    assert c["both_correct"]["estimate"] == 0.5
    assert c["first_slot_win_rate"] == pytest.approx(3 / 4)  # not 9 / 10
    assert c["accuracy_by_order"] == {"given": 0.5, "swapped": 1.0}  # given: not 1 / 8


# ---- bootstrap, paired comparison --------------------------------------------------------------


def test_mcnemar_known_tables():
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)  # 0.021484375
    assert mcnemar_exact(2, 8) == pytest.approx(2 * (1 + 10 + 45) / 1024)  # 0.109375
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)


def test_bootstrap_ci_contains_estimate_and_is_seeded():
    values = np.array([1.0] * 70 + [0.0] * 30)
    a = bootstrap_ci(values, n_boot=500, seed=1)
    assert a.estimate == pytest.approx(0.7) and a.low < 0.7 < a.high
    assert a.low > 0.55 and a.high < 0.85  # sd of the mean ~ 0.046
    assert bootstrap_ci(values, n_boot=500, seed=1) == a
    assert bootstrap_ci(values, n_boot=500, seed=2) != a


def test_bootstrap_scorer_resamples_units_within_strata():
    strata = ["x"] * 3 + ["y"] * 7
    seen = []

    def scorer(idx):
        seen.append(idx.copy())
        return float(np.mean(idx))

    ci = bootstrap_ci(scorer, n_units=10, strata=strata, n_boot=20, seed=0)
    assert ci.estimate == pytest.approx(4.5)
    for idx in seen[1:]:  # the first call is the point estimate
        assert len(idx) == 10 and (idx < 3).sum() == 3 and (idx >= 3).sum() == 7
    with pytest.raises(ValueError):
        bootstrap_ci(scorer)


def test_official_score_interval_is_reproducible_by_seed():
    rows = _rewardbench_rows()
    a = score_predictions(pd.DataFrame(rows), "rewardbench", n_boot=100, seed=5)
    b = score_predictions(pd.DataFrame(rows), "rewardbench", n_boot=100, seed=5)
    c = score_predictions(pd.DataFrame(rows), "rewardbench", n_boot=100, seed=6)
    assert a == b and a != c  # some interval moves with the seed


def test_paired_comparison():
    label = [1] * 20
    va = [1] * 15 + [2] * 5  # A right on 0..14
    vb = [1] * 5 + [2] * 12 + [1] * 3  # B right on 0..4 and 17..19
    a = pd.DataFrame([_row(str(k), v, label[k]) for k, v in enumerate(va)])
    b = pd.DataFrame([_row(str(k), v, label[k]) for k, v in enumerate(vb)])
    res = paired_comparison(a, b, n_boot=300, seed=0)
    assert res["a"] == 0.75 and res["b"] == 0.4
    assert res["difference"] == pytest.approx(0.35)
    assert res["ci"][0] <= 0.35 <= res["ci"][1] and res["ci"][0] > 0
    # discordant: A right / B wrong on 5..14 (10), A wrong / B right on 17..19 (3)
    assert res["mcnemar"]["a_right_b_wrong"] == 10 and res["mcnemar"]["a_wrong_b_right"] == 3
    assert res["mcnemar"]["p_value"] == pytest.approx(mcnemar_exact(10, 3))
    same = paired_comparison(a, a, n_boot=50)
    assert same["difference"] == 0 and same["ci"] == [0, 0] and same["mcnemar"]["p_value"] == 1
    partial = paired_comparison(a, b.iloc[:10], n_boot=50)
    assert partial["n_units"] == 10 and partial["n_dropped"] == {"a": 10, "b": 0}


def test_paired_comparison_official_aggregate():
    rows = _rewardbench_rows()
    perfect = [{**r, "verdict": 1} for r in rows]
    res = paired_comparison(
        pd.DataFrame(perfect), pd.DataFrame(rows), benchmark="rewardbench", n_boot=100
    )
    own = _score(rows, "rewardbench")["score"]
    assert res["a"] == 1.0 and res["difference"] == pytest.approx(1 - own)


# ---- files -------------------------------------------------------------------------------------


def test_load_predictions_jsonl_and_parquet(tmp_path):
    rows = [
        {"id": 1, "order": "given", "verdict": 1, "label": 1},
        {"id": "2", "order": "given", "verdict": None, "label": 2, "method": "greedy"},
    ]
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    df = load_predictions(p)
    assert list(df["id"]) == ["1", "2"] and list(df["method"]) == ["default", "greedy"]
    assert df["verdict"].isna().tolist() == [False, True]
    df.to_parquet(tmp_path / "p.parquet")
    back = load_predictions(tmp_path / "p.parquet")
    assert back["verdict"].tolist()[0] == 1 and pd.isna(back["verdict"].tolist()[1])
    res = score_file(p, "hh-rlhf", n_boot=20)
    assert res["file"] == str(p) and res["methods"]["default"]["score"] == 1.0


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"id": "b", "order": "given", "verdict": 3}', "verdict"),
        ('{"id": "b", "order": "sideways", "verdict": 1}', "order"),
        ('{"order": "given", "verdict": 1}', "id"),
        ('{"id": "b", "verdict": "1", "order": "given"}', "verdict"),
        ('{"id": "a", "order": "given", "verdict": 2}', "id"),  # duplicate of row 0
        ('{"id": "b", "order": "given", "verdict": 1, "label": 0}', "label"),
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path, line, field):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "a", "order": "given", "verdict": 1}\n' + line + "\n")
    with pytest.raises(DataError) as e:
        load_predictions(p)
    assert e.value.file == str(p) and e.value.row == 1 and e.value.field == field
    assert "bad.jsonl, line 2" in str(e.value)  # JSON lines: the 1-based line


def test_bad_json_and_format(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "a", "verdict": 1}\n\n{not json\n')
    with pytest.raises(DataError, match="bad.jsonl, line 3"):  # blank lines count as lines
        load_predictions(p)
    with pytest.raises(DataError, match="jsonl or .parquet"):
        load_predictions(tmp_path / "x.csv")


def test_attach_pairs_flips_swapped_labels_and_checks_them():
    pairs = [Pair("a", "s", "sub", ({"role": "user", "content": "q"},), "x", "y", 2)]
    pred = pd.DataFrame(
        [{"id": "a", "order": "given", "verdict": 2}, {"id": "a", "order": "swapped", "verdict": 2}]
    )
    res = score_predictions(pred, "demo", pairs=pairs, n_boot=20, order="both")
    assert res["methods"]["default"]["score"] == 0.5  # labels: given 2, swapped 1
    bad = pred.assign(label=[2, 2])
    from rmlib.scoring import validate_predictions

    with pytest.raises(DataError, match="row 1.*label"):
        attach_pairs(validate_predictions(bad), pairs)
    with pytest.raises(DataError, match="1 of 1 ids are not in the benchmark data: 'z'"):
        score_predictions(pd.DataFrame([{"id": "z", "verdict": 1}]), "demo", pairs=pairs)


def _labelled_file(tmp_path, ids):
    p = tmp_path / "preds.jsonl"
    rows = [{"id": i, "order": "given", "verdict": 1, "label": 1} for i in ids]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_score_file_with_data_refuses_unknown_ids(tmp_path):
    # labelled predictions used to skip the data even with --path: made-up ids scored 1.0
    data_file = tmp_path / "judgebench.jsonl"
    row = {"source": "mmlu-pro-math", "question": "Q?", "response_A": "A", "response_B": "B"}
    data_file.write_text(
        "".join(json.dumps({**row, "pair_id": f"p{k}", "label": "A>B"}) + "\n" for k in range(2))
    )
    p = _labelled_file(tmp_path, ["p0", "p1"] + [f"made-up-{k}" for k in range(5)])
    with pytest.raises(DataError) as e:
        score_file(p, "judgebench", data_path=str(data_file), n_boot=10)
    msg = str(e.value)
    assert msg.startswith(f"{p}, line 3, field 'id': 5 of 7 ids are not in the benchmark data")
    assert "'made-up-0', 'made-up-1', 'made-up-2', ..." in msg and "made-up-3" not in msg
    p = _labelled_file(tmp_path, ["p0", "p1"])
    res = score_file(p, "judgebench", data_path=str(data_file), n_boot=10)
    assert res["ids_checked"] is True and "warning" not in res


def test_score_file_without_data_says_ids_unchecked(tmp_path):
    p = _labelled_file(tmp_path, ["a", "b"])
    res = score_file(p, "ppe", n_boot=10)
    assert res["ids_checked"] is False and "not an official score" in res["warning"]
    assert res["methods"]["default"]["score"] == 1.0


def test_nan_free_for_empty_parts():
    res = _score([_row("a", None, 1)], "ppe")
    assert res["score"] == 0.0 and res["n_parse_failures"] == 1
    assert not any(isinstance(v, float) and math.isnan(v) for v in res["ci"])


def test_errors_name_the_file_row_after_regrouping(tmp_path):
    rows = [
        _row("alpacaeval-easy/0", 1, 1, subset="alpacaeval-easy", method="b"),
        _row("alpacaeval-easy/0", 1, 1, subset="alpacaeval-easy", method="a"),
        _row("x/0", 1, 1, subset="bogus", method="b"),
    ]
    p = tmp_path / "preds.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(DataError) as e:
        score_file(p, "rewardbench", n_boot=10)
    assert (e.value.file, e.value.row, e.value.field) == (str(p), 2, "subset")


def test_subset_names_with_slashes_stay_whole():
    rows = [_row("a", 1, 1, subset="Adversarial/GPTInst"), _row("b", 2, 1, subset="Natural")]
    res = _score(rows, "llmbar")
    assert res["subsets"]["Adversarial/GPTInst"]["score"] == 1.0
    assert res["subsets"]["Natural"]["score"] == 0.0


def test_rmb_without_meta_reads_subset_and_id():
    rows = [
        _row("u1", 1, 1, subset="pairwise/helpfulness"),
        _row("u2", 1, 1, subset="pairwise/harmlessness"),
        _row("b1/0", 1, 1, subset="bon/helpfulness"),
        _row("b1/1", 2, 1, subset="bon/helpfulness"),
        _row("b2/0", 1, 1, subset="bon/harmlessness"),
    ]
    res = _score(rows, "rmb")
    c = res["components"]
    assert c["bon_helpfulness"]["n"] == 1 and c["bon_helpfulness"]["score"] == 0.0
    assert res["score"] == pytest.approx((1 + 1 + 0 + 1) / 4)


# ---- real benchmark files (../shared/data) -----------------------------------------------------

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _real_pairs(source: str, folder: str, **kw):
    if not (DATA / folder).exists():
        pytest.skip(f"{DATA / folder} not present (the shared benchmark data is optional)")
    from rmlib.data import load

    return load(source, str(DATA / folder), **kw).pairs


def _preds(pairs, verdict):
    return pd.DataFrame([{"id": p.id, "order": p.order, "verdict": verdict(p)} for p in pairs])


@pytest.mark.data
def test_rewardbench_real_file(tmp_path):
    pairs = _real_pairs("rewardbench", "rewardbench")
    perfect = score_predictions(
        _preds(pairs, lambda p: p.label), "rewardbench", pairs=pairs, n_boot=20
    )["methods"]["default"]
    assert perfect["score"] == 1.0 and perfect["n"] == 2985 and not perfect["partial"]
    assert perfect["sections"]["Reasoning"]["n"] == 447 + 6 * 164
    # always slot 1: right exactly where the seeded placement put the chosen response first
    ones = score_predictions(_preds(pairs, lambda p: 1), "rewardbench", pairs=pairs, n_boot=20)
    subset_acc = {}
    for p in pairs:
        subset_acc.setdefault(p.subset, []).append(p.label == 1)
    expect = rewardbench_score({s: float(np.mean(v)) for s, v in subset_acc.items()})
    assert ones["methods"]["default"]["score"] == pytest.approx(expect["score"])
    # `rmlib score` path: a file with no labels gets them from the data
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(json.dumps({"id": p.id, "order": "given", "verdict": 1}) for p in pairs))
    res = score_file(f, "rewardbench", data_path=str(DATA / "rewardbench"), n_boot=20)
    assert res["methods"]["default"]["score"] == pytest.approx(expect["score"])


@pytest.mark.data
def test_rmbench_real_file_is_partial_without_math():
    pairs = _real_pairs("rm-bench", "rm-bench")
    res = score_predictions(_preds(pairs, lambda p: p.label), "rm-bench", pairs=pairs, n_boot=20)[
        "methods"
    ]["default"]
    assert res["score"] == 1.0 and res["n"] == 798 and res["n_cells"] == 7182
    assert res["partial"] and res["missing_domains"] == ["math"]
    assert {d: v["n"] for d, v in res["domains"].items()} == {
        "chat": 129,
        "code": 228,
        "safety": 284 + 157,
    }


@pytest.mark.data
def test_judgebench_real_file_slot_one_judge_scores_zero():
    from rmlib.data.pair import both_orders

    pairs = both_orders(_real_pairs("judgebench", "judgebench", split="gpt"))
    res = score_predictions(_preds(pairs, lambda p: 1), "judgebench", pairs=pairs, n_boot=20)
    m = res["methods"]["default"]
    assert m["n"] == 350 and m["score"] == 0.0  # +1 and -1 in every pair: the sum is 0
    assert sum(c["n"] for c in m["categories"].values()) == 350
    assert m["consistency"]["first_slot_win_rate"] == 1.0
    assert m["consistency"]["flip_rate"] == 1.0
    perfect = score_predictions(
        _preds(pairs, lambda p: p.label), "judgebench", pairs=pairs, n_boot=20
    )["methods"]["default"]
    assert perfect["score"] == 1.0


def test_rules_register_themselves_and_shared_modules_name_no_benchmark():
    # the paper's own numbers (rmlib.paper) are where a benchmark's name may be written
    import re
    from pathlib import Path

    from rmlib.data import SOURCES
    from rmlib.scoring import rules
    from rmlib.scoring.score import scoring_of

    # every benchmark's rule is registered under the name its data-registry entry gives
    assert {s.scoring for s in SOURCES.values()} <= set(rules.RULES)
    assert rules.get_rule(scoring_of("judgebench")).reads_all_orders
    assert rules.get_rule(scoring_of("rm-bench")).no_failure_credit
    with pytest.raises(ValueError, match="registered twice"):
        rules.rule("rmb")(lambda rows: None)
    with pytest.raises(ValueError, match="no scoring rule 'nope'"):
        rules.get_rule("nope")
    # the shared modules branch on no benchmark's name (its rule's fields say it all)
    names = {s.name for s in SOURCES.values()} | {s.scoring for s in SOURCES.values()}
    names -= {"accuracy"}
    shared = ("score", "paired", "aggregate", "bootstrap", "predictions", "consistency", "rules")
    root = Path(rules.__file__).parent
    files = [root / f"{mod}.py" for mod in shared]
    files += sorted((root.parent / "analysis").glob("*.py"))  # nor does any analysis module
    for f in files:
        mod, text = f.name, f.read_text()
        quoted = set(re.findall(r"""["']([a-z0-9-]+)["']""", text))
        assert not quoted & names, (mod, quoted & names)
