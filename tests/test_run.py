"""The papermill runner: plan without models, resume by params hash, clear failure messages."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rmlib import run as runner
from rmlib.config import load_config
from rmlib.plan import plan as plan_run

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rmlib", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("profile", ["demo", "smoke", "qwen3-4b-quick", "qwen3-4b-paper"])
def test_dry_run_plans_every_profile_offline(profile):
    out = _cli("run", f"params/{profile}.yaml", "--dry-run", "--json", cwd=ROOT)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["run"] == profile
    assert plan["generations_total"] > 0 and plan["generated_tokens_upper_bound"] > 0
    assert "01_data" in plan["notebooks"]
    assert [r["notebook"] for r in plan["per_notebook"]] == plan["notebooks"]
    assert plan["gpu"]["class"] == "h100-80gb" and plan["hours_estimate"] >= 0
    assert "torch" not in out.stderr.lower() or "error" not in out.stderr.lower()


def test_dry_run_counts_generations_by_hand():
    cfg = load_config(ROOT / "params" / "smoke.yaml")
    plan = plan_run(cfg)
    inf = cfg.inference
    # per pair and order: 1 greedy + N samples + (N-1) reflections for the anchor and for the
    # random anchor
    per_pair = 1 + inf.n_samples + 2 * (inf.n_samples - 1)
    assert plan["generations"]["eval/base/demo"] == 4 * 2 * per_pair
    assert plan["generations"]["rollouts"] == 8 * cfg.rollouts.n_samples


def test_bad_params_fail_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("inference:\n  n_sample: 4\n")
    out = _cli("run", str(bad), "--dry-run", cwd=ROOT)
    assert out.returncode == 1  # a bad file is a data error; 2 is for usage
    assert "unknown key 'inference.n_sample'" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_run_resumes_and_names_the_failing_cell(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text((ROOT / "params" / "smoke.yaml").read_text() + "\n# test overrides\n")
    over = {"run.notebooks": ["01_data"], "run.output_root": str(tmp_path / "out")}
    run, results = runner.execute(params, name="t", overrides=over, progress=False)
    assert [r.status for r in results] == ["ran"]
    assert (run.path / "notebooks" / "01_data.ipynb").exists()
    assert run.has_table("pairs_eval") and (run.path / "manifest.json").exists()
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["prompt_version"] and manifest["versions"]["transformers"]

    _, again = runner.execute(params, name="t", overrides=over, progress=False)
    assert [r.status for r in again] == ["skipped"]  # same params: resumed, not re-run

    changed = {**over, "data.eval": [{"source": "demo", "split": "eval", "n": 2}]}
    _, rerun = runner.execute(params, name="t", overrides=changed, progress=False)
    assert [r.status for r in rerun] == ["ran"]  # params changed: the notebook runs again

    broken = {**over, "data.train": {"source": "llmbar", "path": str(tmp_path / "missing")}}
    with pytest.raises(runner.NotebookFailed, match=r"notebook 01_data failed in cell \d+"):
        runner.execute(params, name="t", overrides=broken, progress=False)
    state = json.loads((run.path / "state.json").read_text())
    assert state["01_data"]["status"] == "failed"


@pytest.mark.slow
def test_a_notebook_is_done_only_under_the_same_params_source_and_library(tmp_path, monkeypatch):
    over = {"run.output_root": str(tmp_path), "run.notebooks": ["01_data"]}
    params = ROOT / "params" / "smoke.yaml"
    run, results = runner.execute(params, overrides=over, progress=False)
    assert [r.status for r in results] == ["ran"]
    state = json.loads((run.path / "state.json").read_text())["01_data"]
    assert {"params_hash", "notebook_hash", "library_hash"} <= state.keys()
    assert not (run.path / "state.json.tmp").exists()  # written atomically, then renamed
    _, again = runner.execute(params, overrides=over, progress=False)
    assert [r.status for r in again] == ["skipped"]
    monkeypatch.setattr(runner, "library_hash", lambda: "other-library")
    _, rerun = runner.execute(params, overrides=over, progress=False)
    assert [r.status for r in rerun] == ["ran"]
    assert (
        "re-run 01_data (changed since it completed: library)" in (run.path / "run.log").read_text()
    )


# Nonsense refused by `rmlib run --dry-run` before any work: (arguments after the params file,
# the one line it must print). The dry run runs the same torch-free checks as `rmlib run`.
DRY_RUN_REFUSALS = [
    (
        ["--set", "rollouts.n_samples=0"],
        "'rollouts.n_samples': Input should be greater than or equal to 1, got 0",
    ),
    (["--set", "grpo.per_device_train_batch_size=0"], "'grpo.per_device_train_batch_size': "),
    (["--set", "inference.temperature=-1"], "'inference.temperature': "),
    (["--set", "inference.max_new_tokens=0"], "'inference.max_new_tokens': "),
    (["--set", "run.notebooks=[01_data, 02_rolouts]"], "'run.notebooks[1]': no notebook"),
    (["--set", "grpo.trl={num_iteratons: 2}"], "'grpo.trl': ['num_iteratons'] are not trl"),
]


@pytest.mark.parametrize("extra, line", DRY_RUN_REFUSALS, ids=lambda v: str(v)[:40])
def test_dry_run_refuses_nonsense_in_one_line(capsys, extra, line):
    from rmlib.cli import main

    params = str(ROOT / "params" / "smoke.yaml")
    assert main(["run", params, "--dry-run", *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"rmlib: error: {params}: ") and line in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_dry_run_refuses_a_params_file_that_is_not_a_mapping(tmp_path, capsys):
    from rmlib.cli import main

    for text in ("", "- run\n- model\n", "7\n"):
        params = tmp_path / "p.yaml"
        params.write_text(text)
        assert main(["run", str(params), "--dry-run"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"rmlib: error: {params}: a params file maps sections (run, model")
        assert err.count("\n") == 1


def test_dry_run_takes_a_ratio_override(capsys):
    """`--set mix.ratio=4:1` is the ratio '4:1', not YAML 1.1's base-60 int 241 (refused)."""
    from rmlib.cli import main

    params = str(ROOT / "params" / "smoke.yaml")
    assert main(["run", params, "--dry-run", "--json", "--set", "mix.ratio=4:1"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == "smoke"


@pytest.mark.parametrize(
    "argv, line",
    [
        (["score", "p.jsonl", "--benchmark", "rewardbench", "--n-boot", "0"], "--n-boot: expected"),
        (["score", "p.jsonl", "--benchmark", "rmb", "--failure-credit", "2"], "--failure-credit"),
        (["score", "p.jsonl", "--benchmark", "rmb", "--seed", "-1"], "--seed: expected"),
        (["data", "stats", "demo", "--seed", "-1"], "--seed: expected an integer >= 0, got '-1'"),
    ],
    ids=["n-boot", "failure-credit", "score-seed", "stats-seed"],
)
def test_cli_numeric_options_refuse_out_of_range_values(capsys, argv, line):
    from rmlib.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert line in err.splitlines()[-1] and "Traceback" not in err


def test_run_refuses_a_missing_notebook_before_any_work(tmp_path):
    from rmlib.config import ConfigError

    over = {"run.notebooks": ["01_data", "99_nope"], "run.output_root": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"'run.notebooks\[1\]': no notebook '99_nope'"):
        runner.execute(ROOT / "params" / "smoke.yaml", overrides=over, progress=False)
    assert not any(tmp_path.iterdir())  # no run folder: 01_data never ran
