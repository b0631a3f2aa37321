"""Every figure of the workbook, drawn from a scripted run folder (real demo pairs): each writes a
non-empty PNG and SVG, leaves no figure open, and says so when the run lacks its data."""

from __future__ import annotations

import json

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from results_run import one_order_copy, shared_run

from rmlib import analysis as res
from rmlib import plots
from rmlib.data.demo import load_demo
from rmlib.workbook.steps import response_lengths

# a warning in a figure prints in the executed notebook (the workbook's noise check fails on it)
# every warning a test raises is an error, except ResourceWarning (Python's default: ignored):
# sockets that earlier tests' stand-in servers left to the garbage collector are reported in
# whichever test the collector happens to run, which under random order can be one of these
pytestmark = pytest.mark.filterwarnings("error", "ignore::ResourceWarning")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return shared_run(tmp_path_factory)


@pytest.fixture(scope="module")
def tables(run):
    cfg = run.config()
    main = res.main_table(cfg, run)
    return {
        "cfg": cfg,
        "main": main,
        "subsets": res.subset_table(cfg, run),
        "aq": res.analysis_quality_tables(cfg, run),
        "pb": res.position_bias_tables(cfg, run),
        # the map on a small grid (the notebook's default grid is 8 x 11 cells of 4,000 pairs)
        "rp": res.reflection_pays(
            cfg, run, auc_grid=(0.3, 0.5, 0.8), reflection_grid=(0.0, 0.5, 1.0), n_pairs=500
        ),
    }


def _assert_written(run_or_stem, name: str | None = None) -> None:
    stem = run_or_stem.figure_path(name) if name else run_or_stem
    for ext in ("png", "svg"):
        path = stem.parent / f"{stem.name}.{ext}"
        assert path.exists(), path
        # an image, not an empty file (an empty figure's SVG, one sentence as text, is ~2 KB)
        assert path.stat().st_size > (2000 if ext == "png" else 1500), path
    assert plt.get_fignums() == []  # saved figures are closed


def _texts(fig) -> str:
    return " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


def _summary() -> pd.DataFrame:
    """Data summary rows as pipeline.load_data builds them, from real demo pairs."""
    rows = []
    for role, split, n in (("train", "train", 24), ("eval", "eval", 12)):
        stats = load_demo(split=split, n=n).stats()
        rows.append({"role": role, **stats, "subsets": json.dumps(stats["subsets"])})
    return pd.DataFrame(rows)


FIGURES = {
    "accuracy_by_benchmark": lambda t, run: plots.accuracy_by_benchmark(t["main"], run),
    "accuracy_by_subset": lambda t, run: plots.accuracy_by_subset(t["subsets"], run),
    "calibration": lambda t, run: plots.calibration_curve(t["aq"]["calibration"], run),
    "confidence": lambda t, run: plots.confidence_distributions(run, ["base", "rft", "unified"]),
    "reflection_accuracy": lambda t, run: plots.reflection_accuracy(t["aq"]["reflection"], run),
    "method_accuracy": lambda t, run: plots.method_accuracies(t["aq"]["methods"], run),
    "accuracy_vs_n": lambda t, run: plots.accuracy_vs_n(t["aq"]["accuracy_vs_n"], run),
    "reflection_map": lambda t, run: plots.reflection_map_figure(
        t["rp"]["map"], t["rp"]["run"], t["rp"]["parameters"], run
    ),
    "consistency": lambda t, run: plots.consistency_figure(t["pb"]["consistency"], run),
    "flip_rate": lambda t, run: plots.flip_rates(t["pb"]["consistency"], run),
    "first_slot": lambda t, run: plots.first_slot_win_rate(t["pb"]["consistency"], run),
    "accuracy_by_length": lambda t, run: plots.accuracy_by_length(t["pb"]["length"], run),
    "parse_failures": lambda t, run: plots.parse_failures(run, ["base", "rft", "unified"]),
    "correct_per_pair": lambda t, run: plots.correct_per_pair(
        run.read_table("rollouts_unified"), 4, run
    ),
    "data_overview": lambda t, run: plots.data_overview(_summary(), run),
    "length_distributions": lambda t, run: plots.length_distributions(
        response_lengths(run.pairs("pairs_eval")), run
    ),
}


def test_the_figure_registry_names_each_figures_function():
    import inspect

    assert set(FIGURES) <= set(plots.FIGURES)
    for stem, spec in plots.FIGURES.items():
        fn = getattr(plots, spec.draw)
        assert f'"{stem}"' in inspect.getsource(fn), (stem, spec.draw)  # it saves this stem
        assert spec.caption and plots.caption(stem) == spec.caption
    assert plots.caption("my_own_figure") == "my own figure"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_figure_is_written(name, tables, run):
    fig = FIGURES[name](tables, run)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert fig.axes
    _assert_written(run, name)
    edge = matplotlib.colors.to_rgba(plots.theme()["axes.edgecolor"])  # the one theme's
    assert fig.axes[0].spines["left"].get_edgecolor() == edge


def test_figures_carry_their_n_and_interval_labels(tables, run):
    text = _texts(plots.accuracy_by_benchmark(tables["main"], run))
    assert "n = 8 pairs" in text and "parse failures: 5" in text  # 0 base + 5 unified
    assert "95 % CI" in text
    text = _texts(plots.calibration_curve(tables["aq"]["calibration"], run))
    assert "unified: 52 judgments" in text
    text = _texts(plots.reflection_accuracy(tables["aq"]["reflection"], run))
    assert "n=20" in text and "no informative call" in text  # unified; base never disagrees
    text = _texts(plots.accuracy_vs_n(tables["aq"]["accuracy_vs_n"], run))
    assert "ReflectRM at N=4" in text


def test_paper_numbers_are_drawn_where_they_exist(run):
    main = pd.DataFrame(
        [
            {
                "model": model,
                "method": method,
                "benchmark": "rewardbench",
                "score": 0.7,
                "ci_low": 0.6,
                "ci_high": 0.8,
                "n": 100,
                "n_parse_failures": 2,
                "paper": paper,
            }
            for model, method, paper in (
                ("base", "greedy", 0.848),
                ("unified", "reflectrm", 0.867),
                ("unified", "majority", np.nan),
            )
        ]
    )
    fig = plots.accuracy_by_benchmark(main, run)
    hollow = [
        line
        for line in fig.axes[0].lines
        if line.get_marker() == "D" and line.get_markerfacecolor() == "none"
    ]
    assert sorted(round(line.get_xdata()[0], 1) for line in hollow) == [84.8, 86.7]
    assert "paper (Qwen3-4B)" in _texts(fig)


def test_one_order_run_draws_empty_figures_that_say_why(run, tmp_path):
    one = one_order_copy(run, tmp_path / "one")
    pb = res.position_bias_tables(one.config(), one)
    for fn, name in (
        (plots.consistency_figure, "consistency"),
        (plots.flip_rates, "flip_rate"),
    ):
        fig = fn(pb["consistency"], one)
        assert "one order only" in _texts(fig)
        _assert_written(one, name)
    fig = plots.first_slot_win_rate(pb["consistency"], one)  # still measurable
    assert "one order only" not in _texts(fig)


def test_training_curves_tolerate_missing_columns(run):
    log = pd.DataFrame(
        {
            "step": [1, 2, 3, 1, 2, 3],
            "variant": ["unified"] * 3 + ["rft"] * 3,
            "reward": [0.2, 0.4, np.nan, 0.1, 0.2, 0.3],
            "parse_failure_rate": [0.5, 0.25, 0.0, 0.5, 0.5, 0.25],
        }
    )
    fig = plots.training_curves(log, run)
    assert "'kl' was not logged" in _texts(fig)
    assert "unified (2 steps)" in _texts(fig)  # the NaN reward is skipped
    _assert_written(run, "training_curves")
    assert "nothing was trained" in _texts(plots.training_curves(pd.DataFrame(), run))


def test_the_reward_band_stays_within_the_rewards_range(run):
    """A mean of 0.9 with a batch s.d. of 0.3 would draw the band to 1.2: it is cut at 1, and a
    mean of 0.1 at 0 (or at the unparseable penalty, when that is the lowest reward)."""
    from matplotlib.collections import PolyCollection

    log = pd.DataFrame(
        {"step": [1, 2, 3], "variant": "unified", "reward": [0.9, 0.1, -0.2],
         "reward_std": [0.3, 0.3, 0.5]}
    )  # fmt: skip

    def band(fig):
        (poly,) = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
        ys = np.concatenate([p.vertices[:, 1] for p in poly.get_paths()])
        return ys.min(), ys.max()

    assert band(plots.training_curves(log, run)) == (0.0, 1.0)
    low, high = band(plots.training_curves(log, run, reward_range=(-0.5, 1.0)))
    assert low == pytest.approx(-0.5) and high == 1.0


def test_training_curves_add_the_importance_sampling_row_when_vllm_sampled(run):
    log = pd.DataFrame(
        {
            "step": [1, 2],
            "variant": ["unified"] * 2,
            "reward": [0.2, 0.4],
            "sampling/importance_sampling_ratio/min": [0.1, 0.2],
            "sampling/importance_sampling_ratio/mean": [0.9, 1.0],
            "sampling/importance_sampling_ratio/max": [3.0, 3.0],
            "sampling/sampling_logp_difference/mean": [0.3, 0.2],
            "sampling/sampling_logp_difference/max": [4.0, 3.5],
            "sampling/is_cut_sequences": [0.5, 0.25],
            "sampling/is_faint_sequences": [1.0, 0.75],
            "sampling/is_low_tokens": [0.4, 0.1],
        }
    )
    fig = plots.training_curves(log, run, warn_share=0.2)
    assert len(fig.axes) == 6
    texts = _texts(fig)
    assert "Sequences cut or faint, tokens low" in texts and "warning above 20 %" in texts
    cut, faint, low = (line.get_ydata() for line in fig.axes[5].get_lines()[:3])
    assert list(cut) == [50.0, 25.0] and list(faint) == [100.0, 75.0]  # drawn in percent
    assert list(low) == [40.0, 10.0]  # tokens weighted below 1 / clip_max
    # no vLLM sampling logged: the one row of three, as before
    assert len(plots.training_curves(log[["step", "variant", "reward"]], run).axes) == 3


def test_parse_failures_skip_models_without_tables(run, tmp_path):
    counts = plots.parse_failure_counts(run, ["base", "rft", "unified"])
    assert set(counts["model"]) == {"base", "unified"}
    uni = counts[(counts["model"] == "unified") & (counts["stage"] == "stage 1 (sampled)")]
    # overrule/... patterns: parsefail (missing, truncated) x2 keys, none (4 kinds) x2 keys
    assert uni[["missing", "truncated", "empty", "tie", "ambiguous"]].iloc[0].tolist() == [
        4,
        2,
        2,
        2,
        2,
    ]
    from rmlib.run.folder import RunFolder

    empty_run = RunFolder(tmp_path / "empty")
    fig = plots.parse_failures(empty_run, ["base"])
    assert "No judgment tables" in _texts(fig)


def test_correct_per_pair_colours_and_counts(run):
    rollouts = run.read_table("rollouts_unified")
    fig = plots.correct_per_pair(rollouts, 4, run)
    heights = [p.get_height() for p in fig.axes[0].patches]
    # per key correct counts: overrule 3, fail 2 (given) / easy 4 (swapped), easy 4, split 2,
    # parsefail 1, none 0 -> 0: 2 keys, 1: 2, 2: 3, 3: 4, 4: 5
    assert heights == [2, 2, 3, 4, 5]
    assert "easy (all right): dropped: 5" in _texts(fig)


def test_confidence_distributions_stack_every_parsed_judgment(tables, run, tmp_path):
    fig = plots.confidence_distributions(run, ["base", "rft", "unified"])
    calibration = tables["aq"]["calibration"]
    for ax in fig.axes:
        model = ax.get_title().split()[1]
        heights = sum(p.get_height() for p in ax.patches if p.get_height() > 0)
        # every parsed judgment once, the same ones the calibration bins (rft: no tables)
        assert heights == calibration.loc[calibration["model"] == model, "n"].sum() > 0
    assert [ax.get_title().split()[1] for ax in fig.axes] == ["base", "unified"]
    assert "wrong (12)" in _texts(fig)  # unified: 40 right, 12 wrong of 52 parsed
    from rmlib.run.folder import RunFolder

    fig = plots.confidence_distributions(RunFolder(tmp_path / "empty"), ["base"])
    assert "No parsed stage-1 judgments" in _texts(fig)


def test_sweep_figure(tmp_path):
    table = pd.DataFrame(
        {
            "mix.ratio": ["1:0", "2:1", "4:1"],
            "run": ["a", "b", "c"],
            "acc.demo.reflectrm": [0.5, 0.6, 0.7],
            "acc.demo.reflectrm.ci_low": [0.4, 0.5, 0.6],
            "acc.demo.reflectrm.ci_high": [0.6, 0.7, 0.8],
            "acc.demo.greedy": [0.5, 0.55, 0.5],
            "acc.demo.base.greedy": [0.5, 0.5, 0.5],  # reference column, not a line
        }
    )
    fig = plots.sweep_figure(table, ["mix.ratio"], tmp_path / "comparison")
    _assert_written(tmp_path / "comparison")
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["1:0", "2:1", "4:1"]
    assert len(fig.axes[0].get_legend().get_texts()) == 3  # ReflectRM, greedy, chance
    empty = plots.sweep_figure(table[["mix.ratio", "run"]], ["mix.ratio"], tmp_path / "none")
    assert "no headline scores" in _texts(empty)


def test_err_bars_never_negative():
    e = plots.err([0.5, np.nan, 0.9], [0.6, 0.1, None], [0.7, 0.2, 1.0])
    assert (e >= 0).all() and e.shape == (2, 3)
    assert e[1, 0] == pytest.approx(20.0) and e[0, 0] == 0.0  # a bound above the point: no bar
