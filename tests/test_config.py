"""The run config: strict keys, documented fields, every profile valid, sweeps expand."""

from pathlib import Path

import pytest

from rmlib.config import ConfigError, config_from_dict, describe, load_config, sweep_points

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "params").glob("*.yaml"))


def test_profiles_exist():
    names = {p.stem for p in PROFILES}
    assert {"demo", "smoke", "qwen3-4b-quick", "qwen3-4b-paper"} <= names


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_profile_loads_and_every_field_is_documented(path):
    cfg = load_config(path)
    rows = describe(cfg)
    undocumented = [r["key"] for r in rows if not r["doc"]]
    assert not undocumented, f"{path.name}: fields without a doc: {undocumented}"
    assert cfg.run.name == path.stem


def test_unknown_key_names_file_and_dotted_key(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("inference:\n  n_sample: 4\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown key 'inference.n_sample'"):
        load_config(p)


def test_unknown_section_and_wrong_type(tmp_path):
    with pytest.raises(ConfigError, match="unknown section 'infer'"):
        config_from_dict({"infer": {}})
    with pytest.raises(ConfigError, match="'rollouts.n_samples' must be int"):
        config_from_dict({"rollouts": {"n_samples": "eight"}})
    with pytest.raises(ConfigError, match=r"'data.eval\[0\].nn'"):
        config_from_dict({"data": {"eval": [{"source": "demo", "nn": 3}]}})


def test_invalid_value_is_rejected_by_the_section():
    with pytest.raises(ConfigError, match="inference"):
        config_from_dict({"inference": {"n_samples": 0}})


def test_overrides_and_ints_for_floats(tmp_path):
    cfg = load_config(ROOT / "params" / "smoke.yaml", {"inference.n_samples": 3, "grpo.beta": 0})
    assert cfg.inference.n_samples == 3
    assert cfg.grpo.beta == 0.0 and isinstance(cfg.grpo.beta, float)


def test_defaults_match_the_paper_where_it_states_them():
    cfg = config_from_dict({})
    assert cfg.inference.n_samples == 8 and cfg.inference.temperature == 1.0
    assert cfg.inference.confidence_fraction == 0.10
    assert cfg.rollouts.n_samples == 8 and cfg.mix.ratio == "4:1"
    assert cfg.grpo.num_generations == 8 and cfg.grpo.beta == 1e-3
    assert cfg.grpo.max_completion_length == 1024 and cfg.model.enable_thinking is False


def test_sweep_grid_expands():
    cfg = config_from_dict({"sweep": {"mix.ratio": ["1:0", "4:1"], "inference.n_samples": [2, 4]}})
    points = sweep_points(cfg)
    assert len(points) == 4
    assert {"mix.ratio": "1:0", "inference.n_samples": 4} in points


def test_precision_and_backend_are_checked_at_load():
    with pytest.raises(ConfigError, match=r"model.precision must be one of .* got 'bf61'"):
        config_from_dict({"model": {"precision": "bf61"}})
    with pytest.raises(ConfigError, match=r"generation.backend must be one of .* got 'vlm'"):
        config_from_dict({"generation": {"backend": "vlm"}})
    assert (
        config_from_dict({"generation": {"backend": "vllm"}}).generation.prompts_per_call() == 512
    )
    assert config_from_dict({}).generation.prompts_per_call() == 64


def test_auto_precision_follows_the_cpu(monkeypatch):
    from rmlib import models

    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(models, "_cpu_flags", lambda: ["avx2", "fma"])
    assert models.resolve_precision("auto")[0] == "fp32"
    monkeypatch.setattr(models, "_cpu_flags", lambda: ["avx512f", "amx_bf16", "amx_tile"])
    used, why = models.resolve_precision("auto")
    assert used == "bf16" and "amx_bf16" in why
    assert models.resolve_precision("nf4") == ("nf4", "set by the profile")
    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: True)
    assert models.resolve_precision("auto")[0] == "bf16"


def test_a_real_backbone_without_cuda_is_refused_before_any_work():
    from rmlib.run import check_device

    qwen = load_config(ROOT / "params" / "qwen3-4b-quick.yaml")
    with pytest.raises(ConfigError, match=r"needs a CUDA device .* model.allow_cpu: true"):
        check_device(qwen, cuda=False)
    check_device(qwen, cuda=True)
    qwen.model.allow_cpu = True
    check_device(qwen, cuda=False)
    check_device(load_config(ROOT / "params" / "smoke.yaml"), cuda=False)  # embedded: CPU is fine


def test_vllm_engine_settings_of_a_run():
    from rmlib.pipeline import vllm_settings

    over = {"generation.backend": "vllm", "generation.adapters": "lora"}
    cfg = load_config(ROOT / "params" / "smoke.yaml", over)
    s = vllm_settings(cfg, "/models/base", "fp32")
    # one engine for base and the trained adapters, long enough for any prompt + generation
    assert s.enable_lora and s.max_lora_rank == cfg.grpo.lora_r
    assert s.max_model_len == cfg.prompts.max_prompt_tokens + 24 and s.dtype == "float32"
    assert s.enforce_eager  # no CUDA here: eager (a compile would take minutes)
    base_only = load_config(ROOT / "params" / "smoke.yaml", {"eval.models": ["base"]})
    assert not vllm_settings(base_only, "/models/base", "fp32").enable_lora
    # auto on a machine with no CUDA: adapters merged (vLLM's CPU LoRA ops are plain torch)
    auto = load_config(ROOT / "params" / "smoke.yaml", {"generation.backend": "vllm"})
    assert not vllm_settings(auto, "/models/base", "fp32").enable_lora
