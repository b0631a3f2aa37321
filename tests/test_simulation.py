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
    assert table[["predicted", "predicted_independent", "measured"]].notna().all().all()
    assert (table["inside"] == table["predicted"].between(table["ci_low"], table["ci_high"])).all()
    assert {"sample_correlation", "call_correlation"} <= set(prm.index)
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
    assert not out["run"]["inside"].any()
    assert list(out["map"]["panel"].unique()) == ["same"]  # no reflection case measured
    fig = plots.reflection_map_figure(out["map"], out["run"], out["parameters"], run)
    texts = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert "not placed" in texts


# --- within-pair correlation and one rule for a failed reflection call (issue 37, item 2) ---


@pytest.mark.parametrize("rho", [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0)])
def test_when_no_call_ever_wins_reflectrm_is_the_anchor_alone(rho):
    """By hand: a reflection that keeps every anchor (reflection_right 1, reflection_wrong 0,
    agree_win 0) makes no winner, so the final vote is the anchor's, whatever the correlations."""
    model = sim.JudgeModel(
        0.6, 0.7, reflection_right=1.0, reflection_wrong=0.0, agree_win=0.0, n_samples=5,
        parse_rate=0.8, sample_correlation=rho[0], call_correlation=rho[1],
    )  # fmt: skip
    df = sim.simulate_pairs(model, n_pairs=1500, seed=11)
    assert (df["w1"] + df["w2"] == 0).all()
    assert (df["reflectrm"] == df["anchor"]).all() and (df["anchor"] == 1).any()


def test_an_explicit_tie_among_the_winners_is_broken_by_the_anchor():
    """By hand, one pair: samples say 1, 1, 2, 2 (the first says 1), the anchor says 2, one
    winner says 1 and one says 2: the winners tie, the anchor is added (1 against 2 + 2), so
    ReflectRM says 2; majority ties 2-2 and the 'first' rule takes the first sample's 1."""
    votes = sim.canonical_votes([2, 2, 1, 2, 1, 1, 1], 4, "tie")
    assert votes.choices == [1, 1, 2, 2] and votes.choices[votes.anchor] == 2
    out = pair_outcomes(votes, ReflectConfig(majority_tie_break="first"))
    assert (out["reflectrm"][0], out["majority"][0], out["anchor"][0]) == (2, 1, 2)
    model = sim.JudgeModel(0.5, n_samples=4)
    df = sim.simulate_pairs(model, 3000, 12, ReflectConfig(majority_tie_break="first"))
    tied = df[(df["w1"] == df["w2"]) & (df["w1"] > 0)]
    assert len(tied) > 20 and (tied["reflectrm"] == tied["anchor"]).all()


def test_fully_correlated_calls_act_as_one_and_fully_correlated_samples_as_one_sample():
    """call_correlation 1: a pair's calls of one case all win or all lose. With a right anchor
    never overruled and agreeing critiques never winning, a wrong anchor is then overruled with
    probability reflection_wrong however many right critiques it meets (one call), whereas
    independent calls overrule it with 1 - (1 - r)^k for k right critiques.
    sample_correlation 1: a pair's samples are all right or all wrong, so majority, the anchor
    and ReflectRM are one sample."""
    r = 0.4
    kw = {"reflection_right": 1.0, "reflection_wrong": r, "agree_win": 0.0, "n_samples": 6}
    one = sim.JudgeModel(0.5, **kw, call_correlation=1.0)
    d = sim._draw(one, 4000, 13)
    others = d["parsed"] & (np.arange(6)[None, :] != d["anchor_index"][:, None])
    for j in range(4000):
        for case in (True, False):
            sel = others[j] & (d["right"][j] == case)
            assert len(set(d["wins"][j][sel])) <= 1  # calls of one case agree
    for rho, want in ((1.0, lambda k: r), (0.0, lambda k: 1 - (1 - r) ** k)):
        df = sim.simulate_pairs(replace(one, call_correlation=rho), 8000, 14)
        for k in (2, 3):
            sel = df[~df["anchor_right"] & (df["n1"] == k)]
            got = (sel["reflectrm"] == 1).mean()
            se = math.sqrt(want(k) * (1 - want(k)) / len(sel))
            assert abs(got - want(k)) < 4 * se, (rho, k, got, want(k), len(sel))
    same = sim.simulate_pairs(sim.JudgeModel(0.7, n_samples=5, sample_correlation=1.0), 2000, 15)
    assert ((same["n1"] == 0) | (same["n2"] == 0)).all()
    assert (same["majority"] == same["anchor"]).all() and (
        same["reflectrm"] == same["anchor"]
    ).all()
    assert abs((same["anchor"] == 1).mean() - 0.7) < 0.04


def test_zero_correlation_is_the_independent_draws():
    """The latents have their own random stream: at zero correlation the draws are exactly those
    of independent samples and calls (the map before the correlations existed)."""
    a = sim.simulate_pairs(sim.JudgeModel(0.6, 0.7, 0.8, 0.4, n_samples=4), 500, 16)
    b = sim.simulate_pairs(
        sim.JudgeModel(0.6, 0.7, 0.8, 0.4, n_samples=4, sample_correlation=0.0), 500, 16
    )
    pd.testing.assert_frame_equal(a, b)
    c = sim.simulate_pairs(sim.JudgeModel(0.6, 0.7, 0.8, 0.4, n_samples=4, call_correlation=0.5),
                           500, 16)  # fmt: skip
    assert not a.equals(c) and a[["n1", "n2", "anchor"]].equals(c[["n1", "n2", "anchor"]])


def _hand_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Hand-made tables of one model. Stage 1: pair a right, right; b wrong, wrong (and one
    unparsed); c right, wrong. Stage 2 (the real anchor's calls; a random-anchor call that the
    parameters must ignore): pair x, anchor right: a wrong critique won, a wrong critique's call
    failed (the anchor kept), a wrong critique lost, a right critique lost; pair y, anchor
    wrong: a right critique won, a right critique's call failed, a wrong critique won."""
    roll = pd.DataFrame(
        {
            "key": ["a", "a", "b", "b", "b", "c", "c"],
            "choice": [1, 1, 2, 2, None, 1, 2],
            "correct": [True, True, False, False, False, True, False],
            "confidence": [-1.0, -2.0, -1.0, -2.0, -0.5, -1.0, -2.0],
        }
    )
    preds = pd.DataFrame(
        {"method": ["greedy", "greedy", "greedy", "majority"], "verdict": [1, None, 2, 1],
         "correct": [True, False, False, True]}
    )  # fmt: skip
    refl = pd.DataFrame(
        {
            "key": ["x", "x", "x", "x", "y", "y", "y", "x"],
            "method": ["reflectrm"] * 7 + ["random_anchor"],
            "anchor_correct": [True, True, True, True, False, False, False, True],
            "i_correct": [False, False, False, True, True, True, False, False],
            "other_wins": [True, False, False, False, True, False, True, True],
            "failure": [None, "missing", None, None, None, "tie", None, None],
        }
    )
    return roll, preds, refl


def test_the_parameters_by_hand_count_a_failed_call_as_the_anchor_kept():
    roll, preds, refl = _hand_tables()
    p = sim.parameters_from_tables(roll, preds, refl, n_samples=4, model="m")
    assert p["accuracy"] == 3 / 6 and p["parse_rate"] == 6 / 7
    # agreement of two samples of a pair: a and b agree, c not (2 of 3) against 0.5 by
    # independence; full correlation would add 0.5 per comparison: (2/3 - 1/2) / (1/2)
    assert p["sample_correlation"] == pytest.approx(1 / 3) and p["n_sample_correlation"] == 3
    assert p["greedy_parse_rate"] == 2 / 3 and p["greedy_accuracy"] == 1 / 2
    # anchor right, other wrong: 1 win in 3 calls, the failed one a call the anchor won
    # (leaving it out would give 1/2, counting it as a win 2/3 overruled)
    assert p["reflection_right"] == pytest.approx(2 / 3) and p["n_reflection_right"] == 3
    # anchor wrong, other right: 1 win in 2 (the failed call kept the wrong anchor)
    assert p["reflection_wrong"] == 0.5 and p["n_reflection_wrong"] == 2
    assert p["agree_win"] == 0.5 and p["n_agree_win"] == 2  # x's right critique lost, y's won
    assert p["n_call_correlation"] == 6 + 3  # two-call comparisons within x and within y
    no_refl = sim.parameters_from_tables(roll, preds, None, n_samples=4)
    assert math.isnan(no_refl["reflection_right"]) and math.isnan(no_refl["call_correlation"])


def test_the_call_correlation_by_hand():
    """One case (the other sample agrees with the anchor), won at rate 1/2 overall: pair x's
    calls both won, y's both lost, z's split: the same 1/3 as for samples; calls that always
    split are below 0 and clipped to 0 in the model."""
    refl = pd.DataFrame(
        {
            "key": ["x", "x", "y", "y", "z", "z"],
            "method": "reflectrm",
            "anchor_correct": True,
            "i_correct": True,
            "other_wins": [True, True, False, False, True, False],
        }
    )
    roll, preds, _ = _hand_tables()
    p = sim.parameters_from_tables(roll, preds, refl, n_samples=3)
    assert p["call_correlation"] == pytest.approx(1 / 3) and p["n_call_correlation"] == 3
    split = refl.assign(key=["x", "x", "y", "y", "z", "z"], other_wins=[True, False] * 3)
    q = sim.parameters_from_tables(roll, preds, split, n_samples=3)
    assert q["call_correlation"] == pytest.approx(-1.0)
    fitted = sim.judge_model_of(q | {"reflection_right": 0.5, "reflection_wrong": 0.5})
    assert fitted is not None and fitted.call_correlation == 0.0


def test_the_reflection_table_counts_a_failed_call_as_the_map_does():
    """06's reflection table (prefers the correct critique) by hand on the hand-made calls: with
    the anchor right, x's calls prefer wrong, right (failed: the anchor kept), right; with the
    anchor wrong, y's prefer right, wrong (failed: the wrong anchor kept). Whatever the stored
    column says (here: every call not preferring it), the table follows the vote's rule."""
    from types import SimpleNamespace

    from rmlib.analysis.quality import _reflection
    from rmlib.reflect import prefers_correct

    _, _, refl = _hand_tables()
    got = prefers_correct(refl)
    assert list(got.astype(object).where(got.notna(), None)) == [
        False, True, True, None, True, False, None, False
    ]  # fmt: skip
    cfg = SimpleNamespace(eval=SimpleNamespace(n_bootstrap=20), run=SimpleNamespace(seed=0))
    stored = refl.assign(prefers_correct=False)
    table = _reflection("m", stored, cfg).set_index(["method", "case"])["prefers_correct"]
    assert table[("reflectrm", "anchor right")] == pytest.approx(2 / 3)
    assert table[("reflectrm", "anchor wrong")] == pytest.approx(1 / 2)
    assert table[("reflectrm", "all informative")] == pytest.approx(3 / 5)


def test_the_measured_correlations_recover_the_simulated_ones():
    """Tables written from simulated draws give back the model's parameters, the correlations
    included (the estimator and the model are the same arithmetic)."""
    model = sim.JudgeModel(0.65, 0.6, 0.7, 0.4, n_samples=4, agree_win=0.3,
                           sample_correlation=0.4, call_correlation=0.6)  # fmt: skip
    n_pairs, n = 4000, model.n_samples
    d = sim._draw(model, n_pairs, 17)
    rows = pd.DataFrame(
        {
            "key": np.repeat(np.arange(n_pairs), n),
            "choice": np.where(d["parsed"], np.where(d["right"], 1, 2), np.nan).ravel(),
            "correct": d["right"].ravel(),
            "confidence": d["confidence"].ravel(),
        }
    )
    j, i = np.nonzero(d["parsed"] & (np.arange(n)[None, :] != d["anchor_index"][:, None]))
    keep = d["anchor_index"][j] >= 0
    j, i = j[keep], i[keep]
    refl = pd.DataFrame(
        {
            "key": j,
            "method": "reflectrm",
            "anchor_correct": d["right"][j, d["anchor_index"][j]],
            "i_correct": d["right"][j, i],
            "other_wins": d["wins"][j, i],
        }
    )
    preds = pd.DataFrame({"method": ["greedy"], "verdict": [1], "correct": [True]})
    p = sim.parameters_from_tables(rows, preds, refl, n_samples=n)
    for name in ("accuracy", "reflection_right", "reflection_wrong", "agree_win"):
        assert p[name] == pytest.approx(getattr(model, name), abs=0.03), name
    assert p["sample_correlation"] == pytest.approx(0.4, abs=0.05)
    assert p["call_correlation"] == pytest.approx(0.6, abs=0.05)


def test_what_if_moves_one_parameter_of_the_runs_judge():
    """06's exercise: the run's measured judge beside the same judge with a parameter moved."""
    from rmlib.analysis import what_if
    from rmlib.run.config import config_from_dict

    cfg = config_from_dict({"inference": {"n_samples": 4}, "eval": {"failure_credit": 0.0}})
    measured = pd.DataFrame(
        [
            {
                "accuracy": 0.6,
                "confidence_auc": 0.5,
                "reflection_right": 0.5,
                "reflection_wrong": 0.5,
                "n_samples": 4,
                "parse_rate": 1.0,
            }
        ]
    )
    same = what_if(cfg, measured).set_index("method")
    assert (same["difference"] == 0).all()
    # majority of 4 at 0.6, a 2-2 tie going to the first sample: P(3 or 4) + P(2) / 2 = 0.648
    assert same.loc["majority", "run's judge"] == pytest.approx(0.648, abs=0.02)
    # reflections right on every disagreement and no same-verdict winner: ReflectRM is right
    # exactly when one of the four samples is, 1 - 0.4^4 (4,000 simulated pairs)
    perfect = what_if(
        cfg, measured, reflection_right=1.0, reflection_wrong=1.0, agree_win=0.0
    ).set_index("method")
    assert perfect.loc["reflectrm", "changed"] == pytest.approx(1 - 0.4**4, abs=0.01)
    assert perfect.loc["majority", "difference"] == 0  # the votes without stage 2 do not move
    with pytest.raises(ValueError, match="reflection_wrongg: not a parameter"):
        what_if(cfg, measured, reflection_wrongg=0.8)
    with pytest.raises(ValueError, match="call_correlation must be in"):
        what_if(cfg, measured, call_correlation=2.0)
