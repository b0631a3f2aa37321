"""rmlib.workbook.exercises: a chapter's exercise changes one setting and reruns on the run's own
stored generations, writing nothing to the run's tables. The run is the scripted one of
tests/results_run.py (real demo pairs, a scripted judge), its generations served through a real
GenerationStore so the test counts what was reused and what was generated."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
from reflect_fakes import qwen3_tokenizer
from results_run import DemoBackend, shared_run, unified_script

import rmlib.run.backends
from rmlib.config import ConfigError
from rmlib.generation.store import CachedBackend, GenerationStore
from rmlib.workbook import exercises


@pytest.fixture
def run(tmp_path_factory, tmp_path, monkeypatch):
    shared = shared_run(tmp_path_factory)
    run = type(shared)(shutil.copytree(shared.path, tmp_path / "run"))
    pairs = run.pairs("pairs_eval")
    store = GenerationStore(run.path / "generations.sqlite")
    scripted = DemoBackend(unified_script(pairs), pairs)

    def backend(cfg, run_, ref, *, with_adapters=False):
        assert ref.name == "unified" and with_adapters
        return CachedBackend(scripted, store, progress=False), qwen3_tokenizer()

    monkeypatch.setattr(rmlib.run.backends, "backend", backend)
    # the scripted run trained nothing: its 'unified' is the scripted judge, not an adapter
    monkeypatch.setattr(
        rmlib.run.backends, "model_ref", lambda cfg, run_, name: SimpleNamespace(name=name)
    )
    return run


def test_an_unchanged_rerun_reproduces_the_run_and_a_second_generates_nothing(run, capsys):
    before = {p.name: p.read_bytes() for p in (run.path / "tables").iterdir()}
    cfg = run.config()
    same = exercises.rerun_inference(cfg, run, {}, model="unified")
    assert (same["difference"].abs() < 1e-12).all() and (same["verdicts changed"] == 0).all()
    assert set(same["method"]) >= {"greedy", "majority", "anchor", "reflectrm"}
    first = capsys.readouterr().out
    assert "0 generations from the run's store" in first  # this store started empty
    again = exercises.rerun_inference(cfg, run, {}, model="unified")
    pd.testing.assert_frame_equal(same, again)
    assert " 0 generated now" in capsys.readouterr().out
    after = {p.name: p.read_bytes() for p in (run.path / "tables").iterdir()}
    assert after == before  # the run's tables are never rewritten


def test_pruning_keeps_every_verdict_and_n2_reuses_the_first_two_samples(run, capsys):
    cfg = run.config()
    exercises.rerun_inference(cfg, run, {}, model="unified")  # fill the store
    capsys.readouterr()
    pruned = exercises.rerun_inference(
        cfg, run, {"inference.prune_reflections": True}, model="unified"
    ).set_index("method")
    assert pruned.loc["reflectrm", "verdicts changed"] == 0  # pruning is exact
    assert pd.isna(pruned.loc["random_winners", "changed"])  # not computed with pruning
    assert " 0 generated now" in capsys.readouterr().out  # a subset of the calls made
    n2 = exercises.rerun_inference(cfg, run, {"inference.n_samples": 2}, model="unified")
    n2 = n2.set_index("method")
    assert n2.loc["greedy", "verdicts changed"] == 0  # greedy does not depend on N
    assert n2.loc["majority", "verdicts changed"] > 0  # two samples vote otherwise


def test_only_the_exercise_section_may_change_and_values_are_validated(run):
    cfg = run.config()
    with pytest.raises(ConfigError, match="model.backbone: this exercise changes 'inference"):
        exercises.rerun_inference(cfg, run, {"model.backbone": "x"})
    with pytest.raises(ConfigError, match="n_samples"):
        exercises.rerun_inference(cfg, run, {"inference.n_samples": 0})


def test_compare_predictions_counts_by_hand():
    def rows(method, verdicts, labels):
        return [
            {"key": f"k{i}", "method": method, "verdict": v, "label": lab}
            for i, (v, lab) in enumerate(zip(verdicts, labels, strict=True))
        ]

    labels = [1, 2, 1, 2]
    before = pd.DataFrame(rows("m", [1, 2, 2, None], labels) + rows("only_before", [1], [1]))
    after = pd.DataFrame(rows("m", [1, 1, 1, 2], labels))
    table = exercises.compare_predictions(before, after, credit=0.5).set_index("method")
    # before: right, right, wrong, failure (0.5) = 2.5 / 4; after: right, wrong, right, right
    assert table.loc["m", "run"] == pytest.approx(2.5 / 4)
    assert table.loc["m", "changed"] == pytest.approx(3 / 4)
    assert table.loc["m", "difference"] == pytest.approx(0.125)
    assert table.loc["m", "verdicts changed"] == 3  # k1, k2, and the failure k3 that now parses
    assert pd.isna(table.loc["only_before", "changed"])


def test_04s_worked_pair_is_one_where_reflectrm_and_majority_disagree(tmp_path_factory, capsys):
    from rmlib.workbook.steps import worked_example

    run = shared_run(tmp_path_factory)
    table = worked_example(run, "unified")
    out = capsys.readouterr().out
    preds = run.read_table("predictions_unified")
    key = next(k for k in preds["key"] if out.count(f"pair {k}:"))
    verdict = {
        m: preds[(preds.key == key) & (preds.method == m)]["verdict"].iloc[0]
        for m in ("reflectrm", "majority")
    }
    assert verdict["reflectrm"] != verdict["majority"], out
    assert "where ReflectRM and majority vote disagree" in out
    assert table["critique"].str.len().gt(0).all()  # each sample's critique text is shown
    assert (table["role"] == "anchor").sum() == 1
    beat = table[table["role"] != "anchor"]
    assert beat["reflection"].str.contains("Critique").all()  # each call's own words


def test_a_run_folder_without_its_models_says_so_in_one_line(tmp_path_factory, tmp_path, capsys):
    shared = shared_run(tmp_path_factory)
    run = type(shared)(shutil.copytree(shared.path, tmp_path / "run"))  # tables, no adapters
    table = exercises.rerun_inference(run.config(), run, {}, model="unified")
    assert table.empty
    assert "holds no adapter" in capsys.readouterr().out
