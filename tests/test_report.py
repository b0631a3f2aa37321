"""report.md from a scripted run folder (real demo pairs), and the results notebooks run on it."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from results_run import shared_run

from rmlib import analysis as res
from rmlib import plots
from rmlib.run.folder import RunFolder
from rmlib.workbook import report as rep

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")


@pytest.fixture()
def run(tmp_path_factory, tmp_path):
    """A private copy of the shared scripted run (these tests add and remove figures)."""
    shared = shared_run(tmp_path_factory)
    shutil.copytree(shared.path, tmp_path / "run")
    for figure in (tmp_path / "run" / "figures").glob("*"):  # other tests' figures
        figure.unlink()
    return RunFolder(tmp_path / "run")


def test_report_holds_the_headline_tables_and_links_existing_figures(run):
    cfg = run.config()
    main = res.main_table(cfg, run)
    plots.accuracy_by_benchmark(main, run)
    pb = res.position_bias_tables(cfg, run)
    plots.consistency_figure(pb["consistency"], run)
    res.analysis_quality_tables(cfg, run)
    res.paired_table(cfg, run)

    path = rep.write_report(cfg, run)
    text = path.read_text()
    assert path == run.path / "report.md"
    assert text.startswith("# Run report: results-test")
    for heading in (
        "## Parameters",
        "## Accuracy per benchmark",
        "## Paired comparisons",
        "## Analysis quality",
        "## Position bias",
        "## Parse failures",
        "## Figures",
        "## How this run differs from the paper",
        "## How sure are these numbers?",
    ):
        assert heading in text, heading
    assert "| unified · reflectrm |" in text and "75.0 [" in text  # ReflectRM's score
    assert "embedded:smollm2-135m" in text and "| N (stage-1 samples) | 4 |" in text
    assert "- Backbone: embedded:smollm2-135m here" in text
    assert "wider than 20 points" in text  # n = 8: an honest note
    assert "12 of 64 (ambiguous 2, empty 2, missing 4, tie 2, truncated 2)" in text
    links = LINK.findall(text)
    assert sorted(links) == ["figures/accuracy_by_benchmark.png", "figures/consistency.png"]
    assert all((run.path / link).exists() for link in links)


def test_report_without_figures_or_results_sections(run):
    cfg = run.config()
    for f in (run.path / "figures").glob("*"):
        f.unlink()
    metrics = run.metrics()
    for section in ("paired", "analysis_quality", "position_bias"):
        metrics.pop(section, None)
    run.metrics_file.write_text(json.dumps(metrics))
    text = rep.write_report(cfg, run).read_text()
    assert "## Figures" not in text and not LINK.findall(text)
    assert "## Paired comparisons" not in text and "## Position bias" not in text
    assert "## Accuracy per benchmark" in text  # the main table is rebuilt when missing


def test_report_rebuilds_a_main_table_older_than_the_predictions(run):
    cfg = run.config()
    res.main_table(cfg, run)
    built = run.table_path("results_main").stat().st_mtime
    preds = run.table_path("predictions_unified")
    os.utime(preds, (built + 10, built + 10))
    rep.write_report(cfg, run)
    assert run.table_path("results_main").stat().st_mtime > built
    assert run.metrics()["headline"]["model"] == "unified"


def test_markdown_table_escapes_cells():
    df = pd.DataFrame({"a": ["x|y", "line\nbreak"], "b": [0.123456, float("nan")]})
    md = rep.markdown_table(df, index=False).splitlines()
    assert md[0] == "| a | b |" and md[1] == "|---|---|"
    assert md[2] == "| x\\|y | 0.123 |"
    assert md[3] == "| line break |  |"
    assert rep.markdown_table(pd.DataFrame()) == "_(empty)_"


NOTEBOOKS = ("05_results", "06_analysis_quality", "07_position_bias")


@pytest.mark.slow
def test_results_notebooks_run_on_the_scripted_run(run):
    """Execute notebooks 05-07 with papermill (run_dir as the parameter) on the run folder."""
    import nbformat
    import papermill as pm

    missing = [nb for nb in NOTEBOOKS if not (ROOT / "notebooks" / f"{nb}.ipynb").exists()]
    if missing:
        pytest.skip(f"notebooks not built yet: {missing}")
    for nb in NOTEBOOKS:
        out = run.path / "notebooks" / f"{nb}.ipynb"
        pm.execute_notebook(
            str(ROOT / "notebooks" / f"{nb}.ipynb"),
            str(out),
            parameters={"run_dir": str(run.path)},
            cwd=str(ROOT / "notebooks"),
            kernel_name="python3",
            progress_bar=False,
        )
        outputs = [
            o for c in nbformat.read(out, 4).cells if c.cell_type == "code" for o in c.outputs
        ]
        assert not [o for o in outputs if o.output_type == "error"], nb
        assert any("image/png" in o.get("data", {}) for o in outputs), nb  # figures display
    text = (run.path / "report.md").read_text()
    links = LINK.findall(text)
    assert "figures/accuracy_by_length.png" in links and "figures/calibration.png" in links
    assert all((run.path / link).exists() for link in links)
    assert run.metrics()["headline"]["acc.demo.reflectrm"] == 0.75


def test_a_run_where_nothing_parses(tmp_path):
    """Every table, figure and the report survive a run with no parsed output at all (what a
    tiny random model gives), and say so rather than fail."""
    from results_run import build_run

    run = build_run(tmp_path / "failing", n_pairs=4, failing=True)
    cfg = run.config()
    main = res.main_table(cfg, run)
    assert (main["score"] == 0).all() and (main["n_parse_failures"] == 4).all()
    aq = res.analysis_quality_tables(cfg, run)
    assert aq["calibration"].empty and aq["reflection"].empty
    pb = res.position_bias_tables(cfg, run)
    assert pb["consistency"]["flip_rate"].isna().all()
    assert res.worked_examples(run, "unified") == {"overrule": [], "failure": []}
    plots.accuracy_by_benchmark(main, run)
    plots.calibration_curve(aq["calibration"], run)
    plots.reflection_accuracy(aq["reflection"], run)
    plots.method_accuracies(aq["methods"], run)
    plots.accuracy_vs_n(aq["accuracy_vs_n"], run)
    plots.flip_rates(pb["consistency"], run)
    plots.first_slot_win_rate(pb["consistency"], run)
    plots.accuracy_by_length(pb["length"], run)
    res.paired_table(cfg, run)
    assert res.headline(cfg, run)["acc.demo.reflectrm"] == 0.0
    text = rep.write_report(cfg, run).read_text()
    assert "## Parse failures" in text and "no parsed rollout" in text
    assert "12 of 12 scores rest on predictions of which half or more are parse failures" in text
    assert all((run.path / link).exists() for link in LINK.findall(text))
