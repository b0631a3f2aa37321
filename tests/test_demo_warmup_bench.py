"""benchmarks/demo_warmup.py's per-family table: the figures docs/demo-judge.md reports, computed
from rollout and greedy tables whose answers are worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scripts import load_script


def _bench():
    return load_script("benchmarks/demo_warmup.py")


def _rollouts() -> pd.DataFrame:
    rows = [
        # refusal pair a: two right samples more confident than one wrong one, one unparsed
        ("a", "refusal", 1, True, -0.1),
        ("a", "refusal", 1, True, -0.2),
        ("a", "refusal", 2, False, -0.9),
        ("a", "refusal", None, False, -math.inf),
        # passage pair b: the wrong sample is the confident one
        ("b", "passage", 2, True, -0.8),
        ("b", "passage", 1, False, -0.1),
        # passage pair c: all right, so no comparison
        ("c", "passage", 1, True, -0.3),
    ]
    return pd.DataFrame(rows, columns=["key", "subset", "choice", "correct", "confidence"])


def test_family_table_counts_parse_rate_accuracy_of_parsed_and_within_pair_auc():
    greedy = pd.DataFrame(
        {
            "key": ["a", "b", "c"],
            "subset": ["refusal", "passage", "passage"],
            "correct": [True, None, True],
        }
    )
    rows = {r["family"]: r for r in _bench().family_table(_rollouts(), greedy)}
    assert rows["refusal"]["parse_rate"] == 0.75
    assert rows["refusal"]["stage1_accuracy"] == pytest.approx(0.667, abs=1e-3)
    assert rows["refusal"]["confidence_auc"] == 1.0 and rows["refusal"]["auc_comparisons"] == 2
    assert rows["passage"]["stage1_accuracy"] == pytest.approx(0.667, abs=1e-3)
    assert rows["passage"]["confidence_auc"] == 0.0 and rows["passage"]["auc_comparisons"] == 1
    assert rows["passage"]["greedy_accuracy"] == 0.5  # an unparsed greedy judgment is wrong
    assert rows["all"]["samples"] == 7 and rows["all"]["auc_comparisons"] == 3
    assert rows["all"]["confidence_auc"] == pytest.approx(2 / 3, abs=1e-3)  # rounded to 3 places


def test_stage2_summary_counts_reflection_accuracy_and_the_gain_over_majority_by_hand():
    rollouts = pd.DataFrame(
        {
            "key": ["a", "a", "b", "b"],
            "choice": [1, 2, 1, None],
            "correct": [True, False, True, False],
            "confidence": [-0.1, -0.2, -0.3, -0.4],
        }
    )
    # ReflectRM's calls: two informative (a right critique overrules a wrong anchor; a wrong one
    # beats a right anchor), one where both critiques are right (uninformative); the random
    # anchor's call is not ReflectRM's
    reflections = pd.DataFrame(
        {
            "key": ["a", "a", "b", "b"],
            "method": ["reflectrm", "reflectrm", "reflectrm", "random_anchor"],
            "other_wins": [True, True, False, False],
            "i_correct": [True, False, True, False],
            "anchor_correct": [False, True, True, True],
        }
    )
    predictions = pd.DataFrame(
        {
            "key": ["a", "b", "a", "b"],
            "method": ["reflectrm", "reflectrm", "majority", "majority"],
            "verdict": [1, 1, None, 2],
            "label": [1, 1, 1, 1],
            "correct": [True, True, None, False],
        }
    )
    tables = {"rollouts": rollouts, "reflections": reflections, "predictions": predictions}
    out = _bench().stage2_summary(tables, failure_credit=0.5)
    assert out["stage1_accuracy"] == pytest.approx(2 / 3)  # parsed samples: right, wrong, right
    assert out["reflection_accuracy"] == pytest.approx(0.5)
    assert out["n_informative_reflections"] == 2
    assert out["accuracy"] == {"reflectrm": 1.0, "majority": 0.25}  # failure 0.5 + wrong 0
    assert out["reflectrm_minus_majority"] == pytest.approx(0.75)
