"""The map of when reflection pays (rmlib.analysis.simulation): a model of the method whose
votes are the run's own. At its edges it gives what can be worked out by hand; its votes are the
registry's (spied, replaced, and compared with the registry on raw pairs); the run is placed on
it from its measured parameters."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from results_run import shared_run

from rmlib.analysis import simulation as sim
from rmlib.reflect import registry
from rmlib.reflect.registry import PairVotes, pair_outcomes
from rmlib.reflect.rules import select_anchor
from rmlib.reflect.settings import ReflectConfig

# a warning here prints in the executed notebook 06 (the workbook's noise check fails on it)
# every warning a test raises is an error, except ResourceWarning (Python's default: ignored):
# sockets that earlier tests' stand-in servers left to the garbage collector are reported in
# whichever test the collector happens to run, which under random order can be one of these
pytestmark = pytest.mark.filterwarnings("error", "ignore::ResourceWarning")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("accuracy,auc", [(0.3, 0.8), (0.6, 0.3), (0.8, 0.5)])
def test_reflections_right_on_every_disagreement_make_reflectrm_right_when_any_sample_is(
    n, accuracy, auc
):
    """By hand: a right anchor keeps off every wrong critique, and winners of its own verdict
    only add right votes; a wrong anchor loses to every right critique and, an agreeing critique
    never beating the anchor's (agree_win 0), the winners are exactly the right samples. So the
    vote is right exactly when some parsed sample is (with parse failures in the mix)."""
    model = sim.JudgeModel(
        accuracy,
        confidence_auc=auc,
        reflection_right=1.0,
        reflection_wrong=1.0,
        n_samples=n,
        agree_win=0.0,
        parse_rate=0.7,
    )
    df = sim.simulate_pairs(model, n_pairs=3000, seed=1)
    assert df["any_right"].any() and not df["any_right"].all()
    assert ((df["reflectrm"] == 1) == df["any_right"]).all()
    assert (df.loc[df["n1"] + df["n2"] == 0, "reflectrm"] == 0).all()  # nothing parsed: failure
    # whatever agreeing critiques do, a right anchor is never overturned
    df = sim.simulate_pairs(replace(model, agree_win=0.7), n_pairs=3000, seed=2)
    assert (df.loc[df["anchor_right"], "reflectrm"] == 1).all()


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("accuracy", [0.5, 0.6, 0.75, 0.9])
def test_uninformative_confidence_and_a_coin_for_a_reflection_never_beat_majority(n, accuracy):
    """By hand: with confidence AUC 0.5 the anchor is a random sample, and a reflection at
    chance makes each other sample a winner by a coin, whatever it says: ReflectRM is then the
    majority of a random subset (the anchor breaking ties), which is no more accurate than the
    majority of all N when samples are right more often than not (the run's tie rule, 'first').
    Within sampling noise: the paired difference over 40,000 pairs, at most 3 standard errors
    above 0."""
    model = sim.JudgeModel(accuracy, 0.5, 0.5, 0.5, n_samples=n, agree_win=0.5)
    df = sim.simulate_pairs(model, n_pairs=40_000, seed=3)
    diff = (df["reflectrm"] == 1).astype(float) - (df["majority"] == 1).astype(float)
    se = diff.std() / math.sqrt(len(diff))
    assert diff.mean() <= 3 * se, (diff.mean(), se)
    if accuracy >= 0.75 and n >= 4:
        assert diff.mean() < -3 * se  # clearly worse: it throws samples away


def test_the_votes_are_the_registrys(monkeypatch):
    """Each method's verdict comes from registry.BY_NAME[m].vote, looked up when the model
    votes: a spy sees every method called, and a replaced rule changes the model's result."""
    calls: dict[str, int] = {}

    def spy(name):
        rule = registry.BY_NAME[name].vote

        def vote(v, cfg):
            assert isinstance(v, PairVotes)
            calls[name] = calls.get(name, 0) + 1
            return rule(v, cfg)

        return vote

    for name in sim.SIM_METHODS:
        m = registry.BY_NAME[name]
        monkeypatch.setitem(registry.BY_NAME, name, replace(m, vote=spy(name)))
    model = sim.JudgeModel(0.7, 0.7, 0.8, 0.6, n_samples=4)
    acc = sim.simulated_accuracy(model, n_pairs=2000, seed=4)
    assert set(calls) == set(sim.SIM_METHODS) and min(calls.values()) > 0
    assert 0.5 < acc["reflectrm"] < 1
    always_wrong = replace(registry.BY_NAME["reflectrm"], vote=lambda v, cfg: (2, v.anchor, 0))
    monkeypatch.setitem(registry.BY_NAME, "reflectrm", always_wrong)
    assert sim.simulated_accuracy(model, n_pairs=2000, seed=4)["reflectrm"] == 0.0


@pytest.mark.parametrize("tie_break", ["first", "random", "none"])
def test_a_pairs_counts_vote_as_the_raw_pair_does(tie_break):
    """The one call per distinct count row gives each registered method's verdict of the raw
    pair it stands for (samples in their drawn order, real anchor, real winners), by the
    registry itself (pair_outcomes) on handmade random pairs; with the 'random' tie rule (a
    per-pair draw) every pair is voted on its own."""
    rng = np.random.default_rng(5)
    cfg = ReflectConfig(majority_tie_break=tie_break)
    n = 6
    for k in range(400):
        choices = [None if rng.random() < 0.2 else int(rng.integers(1, 3)) for _ in range(n)]
        conf = list(rng.standard_normal(n))
        anchor = select_anchor(choices, conf)
        others = [i for i, c in enumerate(choices) if c is not None and i != anchor]
        winners = sorted(i for i in others if rng.random() < 0.5) if anchor is not None else []
        greedy = [None, 1, 2][int(rng.integers(0, 3))]
        raw = PairVotes(f"raw:{k}", "x", choices, anchor, winners={"reflectrm": winners},
                        greedy=greedy)  # fmt: skip
        parsed = [c for c in choices if c is not None]
        counts = [
            parsed.count(1),
            parsed.count(2),
            parsed[0] if parsed else 0,
            choices[anchor] if anchor is not None else 0,
            sum(choices[i] == 1 for i in winners),
            sum(choices[i] == 2 for i in winners),
            greedy or 0,
        ]
        canon = sim.canonical_votes(counts, n, raw.key)  # same key: the same tie-break draw
        want, got = pair_outcomes(raw, cfg), pair_outcomes(canon, cfg)
        for m in sim.SIM_METHODS:
            assert got[m][0] == want[m][0], (m, raw, canon)
    df = sim.simulate_pairs(sim.JudgeModel(0.5, n_samples=2), 2000, 6, cfg)
    tied = df[(df["n1"] == 1) & (df["n2"] == 1) & (df["first"] == 1)]
    cols = list(sim.COUNT_COLUMNS)
    commonest = tied.groupby(cols).size().idxmax()  # pairs with one and the same count row
    tied = tied[(tied[cols].to_numpy() == np.asarray(commonest)).all(axis=1)]["majority"]
    assert len(tied) > 20
    if tie_break == "random":  # a coin per pair, not one per count row
        assert set(tied) == {1, 2}
    else:
        assert set(tied) == {1 if tie_break == "first" else 0}


def test_the_anchor_is_select_anchors_and_the_confidence_auc_is_what_was_asked():
    model = sim.JudgeModel(0.6, confidence_auc=0.75, n_samples=5, parse_rate=0.8)
    d = sim._draw(model, 4000, 7)
    for j in range(500):
        drawn = zip(d["parsed"][j], d["right"][j], strict=True)
        choices = [(1 if r else 2) if p else None for p, r in drawn]
        want = select_anchor(choices, list(d["confidence"][j]))
        assert (-1 if want is None else want) == d["anchor_index"][j]
    rows = pd.DataFrame(
        {
            "key": np.repeat(np.arange(4000), 5),
            "choice": np.where(d["parsed"], np.where(d["right"], 1, 2), np.nan).ravel(),
            "correct": d["right"].ravel(),
            "confidence": d["confidence"].ravel(),
        }
    )
    auc, n_cmp = sim.confidence_auc(rows)
    assert n_cmp > 10_000 and abs(auc - 0.75) < 0.02


def test_the_confidence_auc_by_hand():
    rows = pd.DataFrame(
        {
            "key": ["a", "a", "a", "b", "b", "c", "c"],
            "choice": [1, 2, 2, 1, 1, 1, None],
            "correct": [True, False, False, True, True, True, False],
            "confidence": [-1.0, -2.0, -0.5, -1.0, -3.0, -1.0, 5.0],
        }
    )
    # pair a: right -1 beats wrong -2, loses to wrong -0.5; b all right; c's wrong did not parse
    assert sim.confidence_auc(rows) == (0.5, 2)
    assert math.isnan(sim.confidence_auc(rows[rows["key"] == "b"])[0])


def test_the_judge_model_refuses_impossible_parameters():
    with pytest.raises(ValueError, match="confidence_auc"):
        sim.JudgeModel(0.6, confidence_auc=1.0)
    with pytest.raises(ValueError, match="reflection_wrong"):
        sim.JudgeModel(0.6, reflection_wrong=1.2)
    assert sim.JudgeModel(0.6, confidence_auc=0.5).confidence_shift == 0


def test_the_map_is_seeded_and_has_a_cell_per_grid_point():
    kw = {"auc_grid": (0.3, 0.5, 0.9), "reflection_grid": (0.0, 0.5, 1.0), "n_pairs": 800}
    a = sim.reflection_map(0.7, 4, seed=8, **kw)
    assert len(a) == 9 and set(a.columns) >= {"auc", "reflection", "gain", *sim.SIM_METHODS}
    pd.testing.assert_frame_equal(a, sim.reflection_map(0.7, 4, seed=8, **kw))
    assert not a.equals(sim.reflection_map(0.7, 4, seed=9, **kw))
    # a perfect reflection pays over majority at every confidence, a perfectly wrong one costs
    top, bottom = a[a["reflection"] == 1.0], a[a["reflection"] == 0.0]
    assert (top["gain"] > 0).all() and (bottom["gain"] < 0).all()
    fixed = sim.reflection_map(0.7, 4, seed=8, reflection_right=0.9, **kw)
    assert not fixed["gain"].equals(a["gain"])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return shared_run(tmp_path_factory)


def test_the_run_is_placed_on_the_map_from_its_measured_parameters(run):
    cfg = run.config()
    out = sim.reflection_pays(
        cfg, run, auc_grid=(0.3, 0.6), reflection_grid=(0.5, 1.0), n_pairs=500
    )
    prm = out["parameters"].iloc[0]
    assert prm["model"] == "unified" and prm["n_samples"] == cfg.inference.n_samples
    assert prm["fitted"] and 0 < prm["accuracy"] < 1 and 0 <= prm["confidence_auc"] <= 1
    refl = run.read_table("reflections_unified")
    real = refl[refl["method"] == "reflectrm"]
    wrong = real[~real["anchor_correct"].astype(bool) & real["i_correct"].astype(bool)]
    assert prm["reflection_wrong"] == wrong["other_wins"].astype(float).mean()
    assert set(out["map"]["panel"]) == {"same", "overrule"} and len(out["map"]) == 8
    table = out["run"]
    assert list(table["method"]) == list(sim.SIM_METHODS)
    assert table[["predicted", "measured"]].notna().all().all()
    preds = run.read_table("predictions_unified")
    majority = preds[preds["method"] == "majority"]["correct"].mean()
    assert table.set_index("method").loc["majority", "measured"] == pytest.approx(majority)
    metrics = run.metrics()["reflection_map"]
    assert metrics["seed"] == cfg.run.seed and len(metrics["run"]) == 4


def test_a_run_where_nothing_parses_draws_the_map_without_the_run(tmp_path):
    """No parsed judgment: no parameter to place the run by, so no prediction; the map is still
    drawn (at a stage-1 accuracy of 0.5) and the figure says the run is not placed."""
    import matplotlib
    from results_run import build_run

    from rmlib import plots

    run = build_run(tmp_path / "failing", n_pairs=4, failing=True)
    out = sim.reflection_pays(
        run.config(), run, auc_grid=(0.5, 0.8), reflection_grid=(0.5, 1.0), n_pairs=200
    )
    assert not out["parameters"]["fitted"].iloc[0]
    assert out["run"]["predicted"].isna().all() and (out["run"]["measured"] == 0).all()
    assert list(out["map"]["panel"].unique()) == ["same"]  # no reflection case measured
    fig = plots.reflection_map_figure(out["map"], out["run"], out["parameters"], run)
    texts = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert "not placed" in texts
