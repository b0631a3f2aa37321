"""A sweep's figures as a spread (rmlib.workbook.spread): the figures of one run read from its
metrics.json, their n / mean / min / max over a sweep's runs, and `rmlib sweep --over`, which
sweeps any profile without editing it (the runs faked: each would be a whole workbook)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from rmlib.cli import main
from rmlib.workbook import execute
from rmlib.workbook.spread import run_figures, spread


def _metrics(seed: int) -> dict:
    """What 06 stores, worked by hand per seed: base greedy 0.5 + seed / 10, and so on."""
    methods = [
        {"model": m, "benchmark": "demo", "method": k, "accuracy": v}
        for m, vals in {
            "base": {"greedy": 0.5 + seed / 10, "majority": 0.6, "reflectrm": 0.55},
            "unified": {"greedy": 0.7, "majority": 0.6, "reflectrm": 0.65 + seed / 100},
        }.items()
        for k, v in vals.items()
    ]
    methods.append({"model": "base", "benchmark": "demo", "method": "anchor", "accuracy": 0.9})
    summary = [
        {"model": "base", "rollout_accuracy": 0.6, "reflection_accuracy": 0.4 + seed / 10},
        {"model": "unified", "rollout_accuracy": 0.62, "reflection_accuracy": None},
    ]
    return {
        "analysis_quality": {"methods": methods, "summary": summary},
        "reflection_map": {"parameters": [{"confidence_auc": 0.5 + seed / 20}]},
    }


def test_run_figures_reads_what_06_stored():
    f = run_figures(_metrics(1))
    assert f["base.demo.greedy"] == pytest.approx(0.6)
    assert f["unified.demo.reflectrm_minus_majority"] == pytest.approx(0.06)
    assert f["base.demo.reflectrm_minus_majority"] == pytest.approx(-0.05)
    assert f["base.reflection_accuracy"] == pytest.approx(0.5)
    assert f["unified.stage1_accuracy"] == pytest.approx(0.62)
    assert "unified.reflection_accuracy" not in f  # not computed: left out, not 0
    assert "base.demo.anchor" not in f
    assert f["confidence_auc"] == pytest.approx(0.55)
    assert run_figures({}) == {}


def test_spread_over_runs():
    runs = pd.DataFrame([run_figures(_metrics(s)) for s in (0, 1, 2)])
    table = spread(runs, ["base.demo.greedy", "confidence_auc", "absent"]).set_index("figure")
    assert table.loc["base.demo.greedy"].tolist() == pytest.approx([3, 0.6, 0.5, 0.7])
    assert table.loc["confidence_auc", "max"] == pytest.approx(0.6)
    assert "absent" not in table.index


def test_sweep_over_seeds_writes_the_spread(tmp_path, monkeypatch, capsys):
    params = tmp_path / "p.yaml"
    params.write_text(f"run: {{name: seeds, output_root: {tmp_path}}}\n")
    seen = []

    def fake_execute(params_file, *, name, overrides, progress):
        seen.append((name, overrides))
        seed = overrides["run.seed"]
        return SimpleNamespace(metrics=lambda: _metrics(seed)), []

    monkeypatch.setattr(execute, "execute", fake_execute)
    assert main(["sweep", str(params), "--over", "run.seed=0,1,2"]) == 0
    assert [o for _, o in seen] == [{"run.seed": s} for s in (0, 1, 2)]
    assert len({name for name, _ in seen}) == 3  # a folder each
    out = tmp_path / "seeds-sweep"
    table = pd.read_csv(out / "spread.csv").set_index("figure")
    assert table.loc["unified.demo.reflectrm", "min"] == pytest.approx(0.65)
    assert table.loc["unified.demo.reflectrm", "max"] == pytest.approx(0.67)
    assert table.loc["base.reflection_accuracy", "mean"] == pytest.approx(0.5)
    assert "spread.csv" in capsys.readouterr().out


def test_sweep_over_dry_run_and_bad_values(tmp_path, capsys):
    params = tmp_path / "p.yaml"
    params.write_text(f"run: {{name: seeds, output_root: {tmp_path}}}\n")
    assert main(["sweep", str(params), "--over", "run.seed=3,4", "--dry-run"]) == 0
    points = json.loads(capsys.readouterr().out)
    assert [p["point"] for p in points] == [{"run.seed": 3}, {"run.seed": 4}]
    with pytest.raises(SystemExit):
        main(["sweep", str(params), "--over", "run.seed"])
    assert "expected dotted.key=V1,V2" in capsys.readouterr().err
