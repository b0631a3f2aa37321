"""`rmlib run PARAMS --preflight`: the profile itself at its longest lengths, a few items, its own
fresh folder, one pass/FAIL line a notebook."""

import json
import os
from pathlib import Path

import pytest

from rmlib import cli
from rmlib.data import load
from rmlib.run.config import load_config
from rmlib.workbook import preflight as pf
from rmlib.workbook.steps import padded

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ["smoke", "demo", "qwen3-4b-quick", "qwen3-4b-paper"]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profiles_preflight_is_a_valid_profile_at_its_own_batch_sizes(profile):
    params = ROOT / "params" / f"{profile}.yaml"
    cfg = load_config(params)
    pre = load_config(params, pf.preflight_overrides(cfg, items=3, steps=2))
    assert pre.run.name == f"{cfg.run.name}-preflight" and pre.data.pad_to_budget
    assert all(s.n == 3 for s in pre.data.eval)
    assert [s.source for s in pre.data.eval] == [s.source for s in cfg.data.eval]
    # what sizes memory is the profile's own: budgets, caps, batches, engine shares, precision
    for section in ("prompts", "generation", "model"):
        assert pre.sections[section] == cfg.sections[section]
    for key in (
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "generation_batch_size",
        "max_completion_length",
        "num_generations",
        "vllm_gpu_memory_utilization",
        "use_vllm",
    ):
        assert getattr(pre.grpo, key) == getattr(cfg.grpo, key), key
    assert pre.rollouts == cfg.rollouts
    assert pre.grpo.max_steps == 2
    floor = "min_tokens" if cfg.grpo.use_vllm else "min_new_tokens"
    assert pre.grpo.trl["generation_kwargs"] == {floor: cfg.grpo.max_completion_length}
    # enough training pairs to fill one generation batch twice over
    batch = cfg.grpo.generation_batch_size or (
        cfg.grpo.per_device_train_batch_size * cfg.grpo.gradient_accumulation_steps
    )
    assert pre.data.train.n >= 2 * batch // cfg.grpo.num_generations
    assert set(pre.eval.models) <= set(cfg.eval.models) and len(pre.eval.models) <= 3


def test_the_preflights_training_pairs_do_not_grow_with_the_gpu_count():
    """The generation batch is global (all processes together): 8 GPUs fill it with the same
    prompts as one, so the preflight's training pairs stay the same."""
    params = ROOT / "params" / "qwen3-4b-paper.yaml"
    one = pf.preflight_overrides(load_config(params), 4, 2)["data.train"]["n"]
    eight = pf.preflight_overrides(load_config(params, {"run.gpus": 8}), 4, 2)["data.train"]["n"]
    assert one == eight == 2 * 512 // 8


def test_the_preflight_keeps_the_base_and_the_longest_prompted_trained_model():
    params = ROOT / "params" / "smoke.yaml"
    every = {"eval.models": ["base", "rft", "same_volume", "unified", "refl_only"]}
    assert pf._models(load_config(params, every)) == {"eval.models": ["base", "unified"]}
    refl = {"eval.models": ["rft", "refl_only"], "eval.refl_only_stage1": "rft"}
    assert pf._models(load_config(params, refl)) == {"eval.models": ["rft", "refl_only"]}


def test_a_padded_pair_is_the_same_pair_only_longer():
    pair = load("demo", split="eval", n=1).pairs[0]
    long = padded(pair, 5000)
    assert len(long.response1) >= 5000 and len(long.response2) >= 5000
    assert long.response1.startswith(pair.response1) and long.label == pair.label
    assert long.context == pair.context and long.id == pair.id


def test_a_folder_that_is_no_preflights_is_never_emptied(tmp_path, capsys):
    (tmp_path / "smoke-preflight").mkdir()
    (tmp_path / "smoke-preflight" / "keep.txt").write_text("mine")
    code = cli.main(
        [
            "run",
            str(ROOT / "params" / "smoke.yaml"),
            "--preflight",
            "--set",
            f"run.output_root={tmp_path}",
        ]
    )
    assert code == cli.EXIT_ERROR
    assert "is no preflight folder" in capsys.readouterr().err
    assert (tmp_path / "smoke-preflight" / "keep.txt").read_text() == "mine"


def _earlier_preflight(tmp_path: Path) -> Path:
    folder = tmp_path / "smoke-preflight"
    (folder / "tables").mkdir(parents=True)
    (folder / pf.MARKER).write_text("made by an earlier preflight")
    (folder / "generations.sqlite").write_text("the running preflight's store")
    return folder


def test_a_preflight_running_in_its_folder_is_never_emptied_by_a_second(tmp_path, capsys):
    """The folder is emptied only under its lock: a second preflight while the first holds it
    is refused naming the first's pid, and the first's store is untouched."""
    from rmlib.run.lock import holding

    folder = _earlier_preflight(tmp_path)
    argv = ["run", str(ROOT / "params" / "smoke.yaml"), "--preflight"]
    with holding(folder):  # the running preflight (an flock: another open file, as a process)
        code = cli.main([*argv, "--set", f"run.output_root={tmp_path}"])
    assert code == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"run folder {folder} is in use by another rmlib run (pid {os.getpid()};" in err
    assert (folder / "generations.sqlite").read_text() == "the running preflight's store"


def test_an_earlier_preflights_folder_is_emptied_under_its_lock(tmp_path, monkeypatch):
    """What the runner sees once it holds the lock: the earlier preflight's files gone (a link
    unlinked, its target kept), the lock and the marker there."""
    from rmlib.run.lock import holder
    from rmlib.workbook import execute as runner

    folder = _earlier_preflight(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the preflight's")
    (folder / "tables" / "link.txt").symlink_to(outside)
    seen = {}

    def notebooks(cfg, run, **_):
        seen["entries"] = sorted(e.name for e in run.path.iterdir())
        seen["holder"] = holder(run.path)
        return []

    monkeypatch.setattr(runner, "_execute", notebooks)
    pf.run_preflight(
        ROOT / "params" / "smoke.yaml",
        items=2,
        steps=1,
        overrides={"run.output_root": str(tmp_path)},
        progress=False,
    )
    assert seen["holder"] == str(os.getpid())
    assert seen["entries"] == sorted(
        [".lock", pf.MARKER, "adapters", "figures", "notebooks", "tables"]
    )
    assert not any((folder / "tables").iterdir()) and outside.read_text() == "not the preflight's"


def test_preflight_refuses_dry_run_and_force(capsys):
    for flag in ("--dry-run", "--force"):
        code = cli.main(["run", str(ROOT / "params" / "smoke.yaml"), "--preflight", flag])
        assert code == cli.EXIT_USAGE
        assert "--preflight runs into its own fresh folder" in capsys.readouterr().err


def test_the_summary_reads_each_notebooks_state(tmp_path):
    cfg = load_config(
        ROOT / "params" / "smoke.yaml",
        {"run.notebooks": ["01_data", "02_rollouts", "03_training", "04_inference"]},
    )
    state = {
        "01_data": {"status": "completed", "seconds": 3.0},
        "02_rollouts": {"status": "completed", "seconds": 9.5},
        "03_training": {"status": "failed", "cell_index": 2},
    }
    (tmp_path / "state.json").write_text(json.dumps(state))
    rows = pf.checks(cfg, tmp_path, "notebook 03_training failed in cell 2: OutOfMemoryError")
    assert [(r.notebook, r.status) for r in rows] == [
        ("01_data", "pass"),
        ("02_rollouts", "pass"),
        ("03_training", "FAIL"),
        ("04_inference", "not run"),
    ]
    text = pf.format_checks(tmp_path, rows)
    assert "03_training: notebook 03_training failed in cell 2" in text
    assert text.endswith("preflight FAILED")


def test_a_03_that_trained_no_step_fails_the_preflight(tmp_path):
    cfg = load_config(ROOT / "params" / "smoke.yaml", {"run.notebooks": ["03_training"]})
    (tmp_path / "state.json").write_text(json.dumps({"03_training": {"status": "completed"}}))
    settings = tmp_path / "training" / "unified" / "training_settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"global_step": 0}))
    [row] = pf.checks(cfg, tmp_path)
    assert row.status == "FAIL" and "made no optimizer step" in row.note
    settings.write_text(json.dumps({"global_step": 2}))
    assert pf.checks(cfg, tmp_path)[0].status == "pass"


@pytest.mark.slow
def test_the_smoke_preflight_runs_its_prompts_at_the_budget_in_a_fresh_folder(tmp_path, capsys):
    """01 and 02 of the smoke profile's preflight (smaller budgets, no warm-up: CI time): every
    rollout prompt at the judgment budget; a second preflight starts from an empty folder."""
    argv = [
        "run",
        str(ROOT / "params" / "smoke.yaml"),
        "--preflight",
        "--preflight-items",
        "2",
        "--set",
        f"run.output_root={tmp_path}",
        "--set",
        "run.notebooks=[01_data, 02_rollouts]",
        "--set",
        "prompts.max_prompt_tokens=256",
        "--set",
        "prompts.max_reflection_prompt_tokens=384",
        "--set",
        "warmup.enabled=false",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "  pass    01_data" in out and "  pass    02_rollouts" in out
    assert out.rstrip().endswith("preflight PASSED")
    folder = tmp_path / "smoke-preflight"
    import pandas as pd

    rollouts = pd.read_parquet(folder / "tables" / "rollouts_train.parquet")
    assert rollouts["truncated_prompt"].all()
    assert rollouts["prompt_tokens"].between(250, 256).all()
    (folder / "stale.txt").write_text("from the first preflight")
    assert cli.main([*argv, "--set", "run.notebooks=[01_data]"]) == 0  # 01 alone: CI time
    assert not (folder / "stale.txt").exists() and (folder / pf.MARKER).is_file()
