"""The paper's two extra baselines as models: the same-volume Pref. judge (its data-volume
ablation) and the reflection-only judge (its Figure 4), on the scripted run of results_run.

`same_volume` is scripted like `base` (a first-slot judge); `refl_only` reflects on `unified`'s
stage-1 judgments with the critique quality reversed, so it prefers the critique `unified`'s own
reflection rejects: every informative call that `unified` gets right, it gets wrong.
"""

from __future__ import annotations

import dataclasses
import shutil

import pandas as pd
import pytest
import yaml
from results_run import DemoBackend, base_script, qwen3_tokenizer, shared_run, unified_script

from rmlib import analysis as res
from rmlib.judge.prompts import PromptFormat
from rmlib.reflect import STAGE2_METHODS, run_reflectrm
from rmlib.run import models as run_models
from rmlib.run.config import config_from_dict
from rmlib.run.folder import RunFolder
from rmlib.workbook import steps as pl

MODELS = ["base", "same_volume", "unified", "refl_only"]


def _reversed(script):
    out = {}
    for key, sc in script.items():
        top = max(sc.quality, default=0.0)
        out[key] = dataclasses.replace(sc, quality=[top - q for q in sc.quality])
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    shared = shared_run(tmp_path_factory)
    dest = tmp_path_factory.mktemp("ablations")
    shutil.copytree(shared.path / "tables", dest / "tables")
    data = yaml.safe_load(shared.params_file.read_text())
    data["eval"]["models"] = MODELS
    run = RunFolder(dest)
    run.write_params(config_from_dict(data))
    if run.has_table("results_main"):
        run.table_path("results_main").unlink()
    cfg = run.config()
    pairs = run.pairs("pairs_eval")
    tok = qwen3_tokenizer()
    same = run_reflectrm(
        pairs, DemoBackend(base_script(pairs), pairs), PromptFormat(tok), cfg.inference
    )
    stage1 = DemoBackend(unified_script(pairs), pairs)
    judge = DemoBackend(_reversed(unified_script(pairs)), pairs)
    refl = run_reflectrm(
        pairs,
        stage1,
        PromptFormat(tok),
        dataclasses.replace(cfg.inference, run_greedy=False),
        reflection_backend=judge,
    )
    assert judge.reflections_seen and not stage1.reflections_seen  # stage 2 on the judge only
    for model, result, own in (("same_volume", same, True), ("refl_only", refl, False)):
        for name, table in pl.evaluation_tables(result, own_stage1=own).items():
            run.write_table(f"{name}_{model}", table)
    counts = [
        {"model": "same_volume", "Pref.": 10, "Refl.": 0},
        {"model": "unified", "Pref.": 8, "Refl.": 2},
    ]
    run.write_table("mix_counts", pd.DataFrame(counts))
    return run


def test_refl_only_needs_its_stage1_model_evaluated():
    with pytest.raises(ValueError, match="refl_only_stage1"):
        config_from_dict({"eval": {"models": ["base", "refl_only"]}})
    with pytest.raises(ValueError, match="refl_only_stage1"):
        config_from_dict({"eval": {"models": ["refl_only"], "refl_only_stage1": "refl_only"}})
    cfg = config_from_dict({"eval": {"models": ["base", "refl_only"], "refl_only_stage1": "base"}})
    assert run_models.stage1_model(cfg, "refl_only") == "base"
    assert run_models.stage1_model(cfg, "base") == "base"
    assert run_models.trained_models(cfg) == ["refl_only"]


def test_the_reflection_only_judge_has_only_stage2_rows(run):
    preds = run.read_table("predictions_refl_only")
    assert set(preds["method"]) == set(STAGE2_METHODS)
    # its stage 1 is unified's: the same rollouts, and its anchors are unified's anchors
    ours, theirs = run.read_table("rollouts_refl_only"), run.read_table("rollouts_unified")
    cols = ["key", "sample", "choice", "confidence"]
    pd.testing.assert_frame_equal(ours[cols], theirs[cols])
    main = res.main_table(run.config(), run)
    rows = main[main["model"] == "refl_only"]
    assert set(rows["method"]) == set(STAGE2_METHODS)
    assert rows.loc[rows["method"] == "reflectrm", "system"].str.contains("Figure 4").all()


def test_reflection_tables_compare_the_two_judges_on_the_same_calls(run):
    cfg = run.config()
    aq = res.analysis_quality_tables(cfg, run)
    refl = aq["reflection"]
    real = refl[(refl["method"] == "reflectrm") & (refl["case"] == "all informative")]
    by_model = real.set_index("model")
    # the same informative calls, opposite preferences
    assert by_model.loc["refl_only", "n"] == by_model.loc["unified", "n"] > 0
    assert by_model.loc["refl_only", "prefers_correct"] == pytest.approx(
        1 - by_model.loc["unified", "prefers_correct"]
    )
    # what would repeat unified's stage 1 under refl_only's name is left out
    assert "refl_only" not in set(aq["calibration"]["model"])
    methods = aq["methods"]
    assert not ((methods["model"] == "refl_only") & (methods["method"] == "one sample")).any()
    vs_n = aq["accuracy_vs_n"]
    assert set(vs_n.loc[vs_n["model"] == "refl_only", "method"]) == {"reflectrm"}
    summary = aq["summary"].set_index("model")
    assert summary.loc["refl_only", "stage1"] == "unified"


def test_data_volume_table_and_paired_comparisons(run):
    cfg = run.config()
    main = res.main_table(cfg, run)
    table = res.data_volume_table(cfg, run, main)
    assert list(table.index) == ["same_volume", "unified"]  # rft not evaluated
    assert table.loc["same_volume", "paper's set"] == "Pref. 17.1k"
    assert table.loc["unified", "RewardBench+RMB avg paper"] == "80.3"
    assert (table.loc["unified", "Pref. items"], table.loc["unified", "Refl. items"]) == (8, 2)
    paired = res.paired_table(cfg, run)
    pairs = set(zip(paired["a"], paired["b"], strict=True))
    assert ("unified · greedy", "same_volume · greedy") in pairs
    assert ("unified · reflectrm", "refl_only · reflectrm") in pairs
    assert res.headline(cfg, run)["model"] == "unified"  # not the ablation judge
