"""A run stopped by out-of-memory resumes with only memory settings changed: the same params hash
(no completed notebook runs again), the same generation store keys (nothing stored is made
again), a hint naming those settings on the error line; and the GPU-class check at start."""

import json
from pathlib import Path

import pytest

from rmlib.config import MEMORY_SETTINGS, NOT_RESULTS, ConfigError
from rmlib.run.config import load_config
from rmlib.workbook import device
from rmlib.workbook import execute as runner

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "params" / "smoke.yaml"

# Every memory setting changed at once, to values the smoke profile accepts (the GRPO
# micro-batch halves, the accumulation doubles: the same completions per optimizer step).
MEMORY_ONLY = {
    "generation.max_batch_tokens": 2048,
    "generation.max_batch_size": 3,
    "generation.chunk_prompts": 2,
    "generation.gpu_memory_utilization": 0.5,
    "generation.kv_cache_gib": 1.0,
    "generation.max_num_seqs": 8,
    "generation.max_num_batched_tokens": 4096,
    "grpo.per_device_train_batch_size": 1,
    "grpo.gradient_accumulation_steps": 2,
    "grpo.gradient_checkpointing": True,
    "grpo.vllm_gpu_memory_utilization": 0.4,
    "grpo.vllm_cpu_kv_cache_gib": 0.25,
    "run.gpu_class": "h100-80gb",
}


def test_the_memory_settings_list_names_real_params():
    cfg = load_config(SMOKE).to_dict()
    for key in MEMORY_SETTINGS:
        section, name = key.split(".")
        assert name in cfg[section], key
    assert set(MEMORY_ONLY) == set(NOT_RESULTS)  # the test changes every one of them


def test_memory_settings_keep_the_params_hash_and_results_settings_do_not():
    base = runner.params_hash(load_config(SMOKE))
    assert runner.params_hash(load_config(SMOKE, MEMORY_ONLY)) == base
    # the optimizer's batch is a result setting: the micro-batch alone changes it
    assert runner.params_hash(load_config(SMOKE, {"grpo.gradient_accumulation_steps": 2})) != base
    assert runner.params_hash(load_config(SMOKE, {"rollouts.max_new_tokens": 8})) != base
    # GRPO's generation batch too: TRL drops an incomplete last one (the steps an epoch change)
    four = {"grpo.per_device_train_batch_size": 1, "grpo.gradient_accumulation_steps": 4}
    assert runner.params_hash(load_config(SMOKE, {**four, "grpo.generation_batch_size": 2})) != (
        runner.params_hash(load_config(SMOKE, {**four, "grpo.generation_batch_size": 4}))
    )


def test_a_finished_training_stays_finished_under_memory_changes():
    from rmlib.training.grpo import _results_settings

    cfg = load_config(SMOKE)
    before = json.loads(json.dumps(cfg.to_dict()["grpo"]))
    after = json.loads(json.dumps(load_config(SMOKE, MEMORY_ONLY).to_dict()["grpo"]))
    assert before != after and _results_settings(before) == _results_settings(after)
    lr = {**before, "learning_rate": 0.5}
    assert _results_settings(lr) != _results_settings(before)


@pytest.mark.parametrize(
    "error",
    [
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: GRPO for x failed in its own process (exit 1): ... torch.OutOfMemoryError",
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
    ],
)
def test_an_out_of_memory_error_line_names_the_memory_settings(error):
    hint = runner.oom_hint(error)
    for key in (
        "grpo.per_device_train_batch_size",
        "generation.gpu_memory_utilization",
        "generation.max_num_seqs",
        "grpo.vllm_gpu_memory_utilization",
    ):
        assert key in hint
    assert "\n" not in hint


def test_other_errors_get_no_memory_hint():
    assert runner.oom_hint("KeyError: 'label'") == ""


@pytest.mark.slow
def test_a_run_stopped_in_02_resumes_with_memory_changes_without_generating_again(tmp_path):
    """01 and 02 of the smoke profile; 02 marked failed as an out-of-memory would leave it; the
    rerun with every memory setting changed skips 01, reruns 02, and adds no store row."""
    from rmlib.generation.store import GenerationStore

    over = {
        "run.notebooks": ["01_data", "02_rollouts"],
        "run.output_root": str(tmp_path),
        "warmup.enabled": False,  # CI time: the store is the point, not the warm-up
    }
    run, first = runner.execute(SMOKE, name="oom", overrides=over, progress=False)
    assert [r.status for r in first] == ["ran", "ran"]
    store = GenerationStore(run.path / "generations.sqlite")
    rows = store.count()
    store.close()
    assert rows > 0
    rollouts = run.read_table("rollouts_train")
    state = json.loads((run.path / "state.json").read_text())
    state["02_rollouts"]["status"] = "failed"  # as an out-of-memory in 02 leaves it
    (run.path / "state.json").write_text(json.dumps(state))
    # no gpu_class here: this machine has no GPU to check it against (tested below)
    memory = {k: v for k, v in MEMORY_ONLY.items() if k != "run.gpu_class"}
    _, again = runner.execute(SMOKE, name="oom", overrides={**over, **memory}, progress=False)
    assert [r.status for r in again] == ["skipped", "ran"]
    store = GenerationStore(run.path / "generations.sqlite")
    assert store.count() == rows  # every generation came from the store
    store.close()
    assert run.read_table("rollouts_train").equals(rollouts)


# ---- the GPU class at start


def _profile(gpu_class: str | None, gpus: int = 1):
    # the paper profile: its GRPO batch splits over 1, 2, 4 or 8 processes (smoke's does not)
    paper = SMOKE.parent / "qwen3-4b-paper.yaml"
    return load_config(paper, {"run.gpu_class": gpu_class, "run.gpus": gpus})


def test_a_card_smaller_than_the_profiles_class_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        device.check_gpu_class(_profile("h100-80gb"), cards=[("NVIDIA L4", 22.0)])
    line = str(err.value)
    assert "run.gpu_class is h100-80gb" in line and "NVIDIA L4 (22.0 GiB, 24gb)" in line
    assert "--set run.gpu_class=null" in line and "\n" not in line


def test_the_profiles_class_or_a_larger_card_runs(caplog):
    device.check_gpu_class(_profile("h100-80gb"), cards=[("NVIDIA H100 80GB HBM3", 79.6)])
    assert not caplog.records
    device.check_gpu_class(_profile("24gb"), cards=[("NVIDIA H200", 139.8)])
    assert "run.gpu_class is 24gb but GPU 0 is NVIDIA H200" in caplog.text


def test_every_gpu_the_run_uses_is_checked_and_no_class_means_no_check():
    cards = [("NVIDIA H100 80GB HBM3", 79.6), ("NVIDIA A10G", 22.0)]
    device.check_gpu_class(_profile("h100-80gb", gpus=1), cards=cards)  # uses GPU 0 only
    with pytest.raises(ConfigError, match="GPU 1 is NVIDIA A10G"):
        device.check_gpu_class(_profile("h100-80gb", gpus=2), cards=cards)
    device.check_gpu_class(_profile(None), cards=[("NVIDIA L4", 22.0)])
    device.check_gpu_class(_profile("h200"), cards=[])  # CPU: check_device's to rule


def test_more_gpus_than_visible_are_refused_before_any_work():
    """run.gpus: 8 on a node showing 4 would pass 01 and 02 and fail at 03's launch."""
    cards = [("NVIDIA H100 80GB HBM3", 79.6)] * 4
    device.check_gpu_class(_profile(None, gpus=4), cards=cards)
    with pytest.raises(ConfigError, match=r"run.gpus is 8 but 4 GPU\(s\) are visible"):
        device.check_gpu_class(_profile(None, gpus=8), cards=cards)
    device.check_gpu_class(_profile(None, gpus=2), cards=[])  # CPU processes (gloo): no GPU


def test_the_cards_come_from_nvidia_smi_with_the_visible_devices(monkeypatch):
    seen = []

    def smi(field, *extra):
        seen.append((field, extra))
        return ["NVIDIA H100 80GB HBM3, 81559 MiB"]

    monkeypatch.setattr(device, "nvidia_smi", smi)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert device.visible_gpus() == [("NVIDIA H100 80GB HBM3", 81559 / 1024)]
    assert seen == [("name,memory.total", ("--id=3",))]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device.visible_gpus() == []


def test_the_gpu_profiles_name_their_class():
    assert load_config(ROOT / "params" / "qwen3-4b-quick.yaml").run.gpu_class == "24gb"
    assert load_config(ROOT / "params" / "qwen3-4b-paper.yaml").run.gpu_class == "h100-80gb"
