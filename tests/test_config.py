"""The run config: strict keys, documented fields, every profile valid, sweeps expand."""

import re
import typing
from pathlib import Path

import pytest

from rmlib.config import ConfigError, Scheduler, set_dotted
from rmlib.run.config import SECTIONS, config_from_dict, describe, load_config, sweep_points

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
    with pytest.raises(ConfigError, match=r"bad.yaml:2: unknown key 'inference.n_sample'"):
        load_config(p)


# Mistakes a user makes in a params file, and the one line each must give (file, dotted key,
# bad value, what is allowed), all at load: before any model is built.
BAD_PARAMS = [
    ({"infer": {}}, r"unknown section 'infer' \(did you mean 'inference'\?"),
    ({"rollouts": {"n_samples": "eight"}}, r"'rollouts.n_samples': .*valid integer.*'eight'"),
    ({"data": {"eval": [{"source": "demo", "nn": 3}]}}, r"unknown key 'data.eval\[0\].nn'"),
    (
        {"grpo": {"num_generation": 8}},
        r"unknown key 'grpo.num_generation' \(did you mean "
        r"'num_generations'\?",
    ),
    (
        {"model": {"precision": "bf61"}},
        r"'model.precision': .*'auto', 'nf4', 'bf16' or 'fp32'.*"
        r"got 'bf61'",
    ),
    (
        {"generation": {"backend": "vlm"}},
        r"'generation.backend': .*'hf', 'vllm', 'http' or 'served'",
    ),
    ({"grpo": {"loss_type": "dapoo"}}, r"'grpo.loss_type': .*'dapo'.*got 'dapoo'"),
    ({"grpo": {"scale_rewards": True}}, r"'grpo.scale_rewards': .*'group', 'batch' or 'none'"),
    ({"grpo": {"lr_scheduler_type": "cosin"}}, r"'grpo.lr_scheduler_type': .*'cosine'"),
    (
        {"data": {"eval": [{"source": "demo", "on_error": "ignore"}]}},
        r"'data.eval\[0\].on_error': .*'raise' or 'skip'.*got 'ignore'",
    ),
    (
        {"data": {"eval": [{"source": "rewardbnch"}]}},
        r"'data.eval\[0\].source': unknown data source 'rewardbnch'; valid sources: .*rewardbench",
    ),
    ({"data": {"train": {"source": "nope"}}}, r"'data.train.source': unknown data source"),
    (
        {"data": {"eval": [{"source": "demo"}, {"source": "rmb"}]}},
        r"'data.eval\[1\].path': source 'rmb' has no hub copy; set path to a local copy",
    ),
    (
        {"eval": {"models": ["base", "unifed"]}},
        r"'eval.models\[1\]': .*'base', 'rft', 'same_volume', 'unified' or "
        r"'refl_only'.*got 'unifed'",
    ),
    ({"eval": {"models": "unified"}}, r"'eval.models': .*valid list.*got 'unified'"),
    ({"eval": {"n_grid": 4}}, r"'eval.n_grid': .*valid list"),
    (
        {"inference": {"n_samples": 0}},
        r"'inference.n_samples': .*greater than or equal to 1.*got 0",
    ),
    (
        {"grpo": {"num_generations": 3}},
        r"'grpo': generation_batch_size \(16; .*\) must be a multiple of num_generations \(3\)",
    ),
    (
        {"inference": {"swapped_pairs": 10}},
        r"'inference': swapped_pairs needs both_orders: true",
    ),
    ({"inference": {"reflection_failure": "anchor"}}, r"'inference.reflection_failure'"),
    ({"warmup": {"precision": "fp16"}}, r"'warmup.precision'"),
    ({"generation": {"adapters": "peft"}}, r"'generation.adapters': .*'auto', 'lora' or 'merged'"),
    ({"run": "demo"}, r"section 'run' is str 'demo': a section maps its keys to values"),
    (
        {"sweep": {"model.precision": ["bf16", "fp8"]}},
        r"sweep point model.precision='fp8'.*'model.precision'.*got 'fp8'",
    ),
    ({"sweep": {"grpo.bta": [0.0, 0.1]}}, r"sweep point .*unknown key 'grpo.bta'"),
    (
        {"prompts": {"max_prompt_tokens": 4096, "max_reflection_prompt_tokens": 2048}},
        r"'prompts': max_reflection_prompt_tokens \(2048\) must be >= max_prompt_tokens \(4096\)",
    ),
    (
        {"sweep": {"inference.n_samples": 4}},
        r"'sweep.inference.n_samples' must be a non-empty list",
    ),
    # a run name is one folder name under run.output_root: never the project root or elsewhere
    *[
        ({"run": {"name": name}}, rf"'run.name': run name {re.escape(repr(name))} is not one")
        for name in ["", ".", "..", "../x", "/tmp/x", "a/b", "a\\b", "a\0b"]
    ],
    # only the workbook's notebooks run: a params file cannot execute a notebook from anywhere
    *[
        (
            {"run": {"notebooks": ["01_data", stem]}},
            r"'run.notebooks\[1\]': .* is not one of the workbook's notebooks "
            r"\(stems of notebooks/\*.ipynb\): 01_data, 02_rollouts, .*07_position_bias",
        )
        for stem in ["../x", "/tmp/evil", "notebooks/01_data", "01_data.ipynb", "08_nothing", ""]
    ],
]


@pytest.mark.parametrize("data, message", BAD_PARAMS, ids=lambda v: ascii(v)[:40])
def test_every_mistake_is_one_line_naming_the_key_the_value_and_what_is_allowed(data, message):
    with pytest.raises(ConfigError, match=message) as e:
        config_from_dict(data, source="bad.yaml")
    assert str(e.value).startswith("bad.yaml") and "\n" not in str(e.value)


def test_a_plain_run_name_and_the_workbooks_notebooks_load():
    run = {"name": "demo-2.v1_x", "output_root": "/anywhere/else", "notebooks": ["05_results"]}
    cfg = config_from_dict({"run": run})
    assert (cfg.run.name, cfg.run.output_root, cfg.run.notebooks) == tuple(run.values())


# Keys that moved to one home: a file still setting one is told the new key, in one line.
MOVED = [
    ("grpo", "enable_thinking", True, "model.enable_thinking"),
    ("warmup", "critique_with_result", True, "prompts.critique_with_result"),
    ("mix", "critique_with_result", True, "prompts.critique_with_result"),
    ("inference", "critique_with_result", True, "prompts.critique_with_result"),
]


@pytest.mark.parametrize("section, key, value, new", MOVED, ids=lambda v: str(v))
def test_a_moved_key_is_refused_with_its_new_home(tmp_path, section, key, value, new):
    p = tmp_path / "old.yaml"
    # an unknown key listed first: the moved key's pointer is still the line given
    p.write_text(f"{section}:\n  aaa_unknown: 1\n  {key}: {str(value).lower()}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    line = str(e.value)
    assert f"'{section}.{key}' moved to '{new}'" in line and "\n" not in line
    assert line.startswith(str(p))
    with pytest.raises(ConfigError, match=f"'{section}.{key}' moved to '{new}'"):
        config_from_dict({"sweep": {f"{section}.{key}": [True, False]}})
    section_name, field_name = new.split(".")
    cfg = config_from_dict({section_name: {field_name: value}})  # the new home takes it
    assert getattr(getattr(cfg, section_name), field_name) is value


def test_one_home_for_each_shared_prompt_setting():
    """enable_thinking and critique_with_result live in exactly one section each."""
    import dataclasses

    from rmlib.run.config import SECTIONS as _SECTIONS

    homes = {
        key: [n for n in SECTIONS if key in {f.name for f in dataclasses.fields(_SECTIONS[n])}]
        for key in ("enable_thinking", "critique_with_result", "max_reflection_prompt_tokens")
    }
    assert homes == {
        "enable_thinking": ["model"],
        "critique_with_result": ["prompts"],
        "max_reflection_prompt_tokens": ["prompts"],
    }


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_section_refuses_an_unknown_key(section):
    """Each section's dataclass carries `__pydantic_config__ = PARAMS` (else pydantic ignores
    unknown keys silently)."""
    with pytest.raises(ConfigError, match=rf"unknown key '{section}.no_such_key'"):
        config_from_dict({section: {"no_such_key": 1}})


# Numbers out of their range: (dotted key, bad value). Each is refused at load, in one line that
# names the key; the value's type is right, so only the range can refuse it.
OUT_OF_RANGE = [
    ("run.seed", -1),
    ("data.train.n", 0),
    ("data.eval", [{"source": "demo", "n": -3}]),
    ("data.subsample_seed", -1),
    ("generation.max_batch_tokens", 0),
    ("generation.max_batch_size", 0),
    ("generation.chunk_prompts", 0),
    ("generation.gpu_memory_utilization", 0),
    ("generation.gpu_memory_utilization", 1.5),
    ("generation.kv_cache_gib", 0),
    ("generation.max_num_seqs", 0),
    ("generation.max_num_batched_tokens", -1),
    ("generation.cpu_reserved_cores", -1),
    ("generation.http_concurrency", 0),
    ("generation.http_connect_timeout", 0),
    ("generation.http_read_timeout", -1),
    ("generation.http_write_timeout", 0),
    ("generation.http_pool_timeout", 0),
    ("generation.http_max_retries", -1),
    ("prompts.max_prompt_tokens", 0),
    ("prompts.max_reflection_prompt_tokens", 0),
    ("rollouts.n_samples", 0),
    ("rollouts.temperature", -0.5),
    ("rollouts.temperature", 0),  # rollouts sample: 0 would fail in 02
    ("rollouts.temperature", float("nan")),
    ("rollouts.max_new_tokens", 0),
    ("warmup.n_examples", 0),
    ("warmup.refl_share", 1.5),
    ("warmup.epochs", 0),
    ("warmup.batch_size", 0),
    ("warmup.gradient_accumulation_steps", 0),
    ("warmup.learning_rate", 0),
    ("warmup.lora_r", 0),
    ("warmup.lora_alpha", 0),
    ("warmup.lora_dropout", 1.0),
    ("warmup.max_length", 0),
    ("warmup.data_seed", -1),
    ("warmup.seed", -1),
    ("warmup.torch_threads", 0),
    ("mix.max_pref", -1),
    ("mix.max_refl", -1),
    ("mix.seed", -2),
    ("grpo.num_generations", 1),
    ("grpo.learning_rate", 0),
    ("grpo.learning_rate", -1e-6),
    ("grpo.beta", -0.1),
    ("grpo.max_completion_length", 0),
    ("grpo.num_train_epochs", 0),
    ("grpo.max_steps", 0),
    ("grpo.max_steps", -2),
    ("grpo.per_device_train_batch_size", 0),
    ("grpo.gradient_accumulation_steps", 0),
    ("grpo.generation_batch_size", 0),
    ("grpo.epsilon", 0),
    ("grpo.temperature", 0),
    ("grpo.temperature", float("inf")),
    ("grpo.top_p", 0),
    ("grpo.top_p", 1.1),
    ("grpo.top_k", -1),
    ("grpo.warmup_ratio", 1.0),
    ("grpo.warmup_ratio", -0.1),
    ("grpo.weight_decay", -0.01),
    ("grpo.max_grad_norm", -1),
    ("grpo.lora_r", 0),
    ("grpo.lora_alpha", 0),
    ("grpo.lora_dropout", -0.1),
    ("grpo.unparseable_penalty", float("nan")),
    ("grpo.save_steps", 0),
    ("grpo.save_total_limit", 0),
    ("grpo.logging_steps", 0),
    ("grpo.seed", -1),
    ("grpo.torch_threads", 0),
    ("grpo.vllm_gpu_memory_utilization", 0),
    ("grpo.vllm_cpu_kv_cache_gib", 0),
    ("grpo.vllm_max_model_length", 0),
    ("inference.n_samples", 0),
    ("inference.temperature", -1.0),
    ("inference.temperature", 0),  # stage 1 samples: 0 would fail in 04, after training
    ("inference.top_p", 0),
    ("inference.top_k", -5),
    ("inference.max_new_tokens", 0),
    ("inference.reflection_max_new_tokens", 0),
    ("inference.confidence_fraction", 0),
    ("inference.confidence_fraction", 1.01),
    ("inference.seed", -1),
    ("inference.swapped_pairs", 0),
    ("eval.n_bootstrap", 0),
    ("eval.failure_credit", -0.5),
    ("eval.failure_credit", 1.5),
    ("eval.n_grid", [1, 0]),
]


def _key_pattern(key: str) -> str:
    """The dotted key as the error names it (a list's bad item by its index)."""
    return {"data.eval": r"data\.eval\[0\]\.n", "eval.n_grid": r"eval\.n_grid\[1\]"}.get(
        key, key.replace(".", r"\.")
    )


@pytest.mark.parametrize("key, value", OUT_OF_RANGE, ids=lambda v: str(v))
def test_every_number_out_of_its_range_is_refused_at_load_naming_its_key(key, value):
    data: dict = {}
    set_dotted(data, key, value)
    with pytest.raises(ConfigError, match=rf"^bad\.yaml: '{_key_pattern(key)}': ") as e:
        config_from_dict(data, source="bad.yaml")
    assert "\n" not in str(e.value)


def test_every_number_of_the_params_has_a_range():
    """A numeric field added as a bare int or float (no range) fails here."""
    import dataclasses

    from rmlib.data.settings import DatasetSpec
    from rmlib.run.config import SECTIONS as _SECTIONS

    classes = dict(_SECTIONS) | {"data.eval[]": DatasetSpec}

    def bare(tp: object) -> bool:
        """int or float with no Annotated range, itself or in a union (int | None) or a list."""
        if typing.get_origin(tp) is typing.Annotated:
            return False
        return tp in (int, float) or any(bare(a) for a in typing.get_args(tp))

    unranged = [
        f"{name}.{f.name}"
        for name, cls in classes.items()
        for f in dataclasses.fields(cls)
        if bare(typing.get_type_hints(cls, include_extras=True)[f.name])
    ]
    assert unranged == []


# Edge values that are in range (0 where the doc says it means off / none, 1 for shares)
GOOD_EDGES = [
    ("run.seed", 0),
    ("data.train.n", 1),
    ("generation.gpu_memory_utilization", 1.0),
    ("generation.cpu_reserved_cores", 0),
    ("prompts.max_prompt_tokens", 1),
    ("rollouts.n_samples", 1),
    ("rollouts.temperature", 1e-3),
    ("rollouts.max_new_tokens", 1),
    ("warmup.refl_share", 0.0),
    ("warmup.refl_share", 1.0),
    ("warmup.lora_dropout", 0.0),
    ("mix.max_pref", 0),
    ("mix.max_refl", 0),
    ("grpo.num_generations", 2),
    ("grpo.beta", 0),
    ("grpo.max_steps", -1),
    ("grpo.max_steps", 1),
    ("grpo.top_p", 1.0),
    ("grpo.top_k", 0),
    ("grpo.warmup_ratio", 0.0),
    ("grpo.weight_decay", 0.0),
    ("grpo.max_grad_norm", 0.0),
    ("grpo.unparseable_penalty", -1.0),
    ("grpo.generation_batch_size", None),
    ("inference.n_samples", 1),
    ("inference.top_k", 0),
    ("inference.confidence_fraction", 1.0),
    ("inference.seed", 0),
    ("eval.n_bootstrap", 1),
    ("eval.failure_credit", 0.0),
    ("eval.failure_credit", 1.0),
    ("eval.n_grid", [1]),
]


@pytest.mark.parametrize("key, value", GOOD_EDGES, ids=lambda v: str(v))
def test_edge_values_in_range_are_accepted(key, value):
    data: dict = {}
    set_dotted(data, key, value)
    section, *rest = key.split(".")
    node = getattr(config_from_dict(data), section)
    for part in rest:
        node = getattr(node, part)
    assert node == value


@pytest.mark.parametrize(
    "text, what",
    [
        ("", "it is empty"),
        ("# only a comment\n", "it is empty"),
        ("{}\n", "it is empty"),
        ("- run\n- model\n", "got a list"),
        ("42\n", "got int 42"),
        ("demo\n", "got str 'demo'"),
    ],
    ids=["empty", "comment", "empty-mapping", "list", "int", "str"],
)
def test_a_params_file_that_is_not_a_mapping_is_refused(tmp_path, text, what):
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    line = str(e.value)
    assert line.startswith(f"{p}:1: a params file maps sections") and line.endswith(what)
    with pytest.raises(ConfigError, match=r"^dict: a params file maps sections .*got a list"):
        config_from_dict(["run"], source="dict")  # type: ignore[arg-type]


def test_a_ratio_stays_text_in_files_and_overrides(tmp_path):
    """YAML 1.1 reads 4:1 as the base-60 int 241; a params file and --set read it as '4:1'."""
    from rmlib.cli import _set_option

    assert _set_option("mix.ratio=4:1") == ("mix.ratio", "4:1")
    assert _set_option("inference.n_samples=4") == ("inference.n_samples", 4)
    assert _set_option("eval.n_grid=[1, 2]") == ("eval.n_grid", [1, 2])
    assert _set_option("grpo.trl={num_iterations: 2}") == ("grpo.trl", {"num_iterations": 2})
    p = tmp_path / "p.yaml"
    p.write_text("mix:\n  ratio: 4:1\n")
    assert load_config(p).mix.ratio == "4:1"
    assert (
        load_config(ROOT / "params" / "smoke.yaml", dict([_set_option("mix.ratio=2:1")])).mix.ratio
        == "2:1"
    )


def test_yaml_scientific_floats_load(tmp_path):
    """YAML 1.1 reads `1e-6` as a string; the validator takes it as the float it means."""
    p = tmp_path / "p.yaml"
    p.write_text("grpo:\n  learning_rate: 1e-6\n")
    assert load_config(p).grpo.learning_rate == 1e-6


def test_one_master_seed_derives_the_inference_seed():
    assert config_from_dict({"run": {"seed": 7}}).inference.seed == 7
    assert config_from_dict({"run": {"seed": 7}, "inference": {"n_samples": 2}}).inference.seed == 7
    assert config_from_dict({"run": {"seed": 7}, "inference": {"seed": 3}}).inference.seed == 3
    assert config_from_dict({}).inference.seed == 0


def test_scheduler_names_are_transformers_own():
    from transformers.trainer_utils import SchedulerType

    assert set(typing.get_args(Scheduler)) == {s.value for s in SchedulerType}


def test_the_invalid_value_is_rejected_by_the_section():
    with pytest.raises(ConfigError, match="inference.n_samples"):
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
    # the judgment prompt's budget is ConsistRM's 4,096; a reflection prompt (pair + two
    # critiques of up to 1,024 tokens) gets its own ~8k
    assert cfg.prompts.max_prompt_tokens == 4096
    assert cfg.prompts.max_reflection_prompt_tokens == 8192
    assert cfg.prompts.critique_with_result is False


def test_sweep_grid_expands():
    cfg = config_from_dict({"sweep": {"mix.ratio": ["1:0", "4:1"], "inference.n_samples": [2, 4]}})
    points = sweep_points(cfg)
    assert len(points) == 4
    assert {"mix.ratio": "1:0", "inference.n_samples": 4} in points


def test_chunk_size_follows_the_backend():
    assert (
        config_from_dict({"generation": {"backend": "vllm"}}).generation.prompts_per_call() == 512
    )
    assert config_from_dict({}).generation.prompts_per_call() == 64


def test_auto_precision_follows_the_cpu(monkeypatch):
    from rmlib.generation import models

    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(models, "_cpu_flags", lambda: ["avx2", "fma"])
    assert models.resolve_precision("auto")[0] == "fp32"
    monkeypatch.setattr(models, "_cpu_flags", lambda: ["avx512f", "amx_bf16", "amx_tile"])
    monkeypatch.setattr(models.torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    used, why = models.resolve_precision("auto")
    assert used == "bf16" and "amx_bf16" in why
    # torch held to AVX2 kernels (ATEN_CPU_CAPABILITY=avx2) on the same silicon: fp32
    monkeypatch.setattr(models.torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    used, why = models.resolve_precision("auto")
    assert used == "fp32" and "AVX2" in why and "amx_bf16" in why
    assert models.resolve_precision("nf4") == ("nf4", "set by the profile")
    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: True)
    assert models.resolve_precision("auto")[0] == "bf16"


def test_a_real_backbone_without_cuda_is_refused_before_any_work():
    from rmlib.workbook.device import Machine, check_device

    qwen = load_config(ROOT / "params" / "qwen3-4b-quick.yaml")
    with pytest.raises(ConfigError, match=r"needs a CUDA device .* model.allow_cpu: true"):
        check_device(qwen, machine=Machine(False, "13.0", None))
    ready = {"c_compiler": "/usr/bin/cc", "python_h": True}
    check_device(qwen, machine=Machine(True, "13.0", "580.95.05", ((9, 0),), ready))
    qwen.model.allow_cpu = True
    check_device(qwen, cuda=False)
    check_device(load_config(ROOT / "params" / "smoke.yaml"), cuda=False)  # embedded: CPU is fine


def test_vllm_engine_settings_of_a_run():
    from rmlib.run.backends import vllm_settings

    over = {"generation.backend": "vllm", "generation.adapters": "lora"}
    cfg = load_config(ROOT / "params" / "smoke.yaml", over)
    s = vllm_settings(cfg, "/models/base", "fp32", adapters=True)
    # one engine for base and the trained adapters, long enough for any prompt + generation:
    # stage 2's reflection prompts (the larger budget) pass through it too
    assert s.enable_lora and s.max_lora_rank == cfg.grpo.lora_r
    # an engine that serves no adapter (02's rollouts of the base) has no LoRA
    assert not vllm_settings(cfg, "/models/base", "fp32").enable_lora
    assert cfg.prompts.max_reflection_prompt_tokens > cfg.prompts.max_prompt_tokens
    assert s.max_model_len == cfg.prompts.max_reflection_prompt_tokens + 24
    assert s.dtype == "float32"
    assert s.enforce_eager  # no CUDA here: eager (a compile would take minutes)
    base_only = load_config(ROOT / "params" / "smoke.yaml", {"eval.models": ["base"]})
    assert not vllm_settings(base_only, "/models/base", "fp32", adapters=True).enable_lora
    # auto on a machine with no CUDA: adapters merged (vLLM's CPU LoRA ops are plain torch)
    auto = load_config(ROOT / "params" / "smoke.yaml", {"generation.backend": "vllm"})
    assert not vllm_settings(auto, "/models/base", "fp32", adapters=True).enable_lora


def test_the_base_engine_enables_lora_only_where_adapters_are_served(tmp_path, monkeypatch):
    """02's rollouts (backend() as 02 calls it) start an engine without LoRA; 04's base model
    (with_adapters) starts the engine its adapters share. No engine starts: its settings are
    caught."""
    from rmlib.generation import vllm as rv
    from rmlib.generation.models import TINY_QWEN3
    from rmlib.run import backends
    from rmlib.run.folder import RunFolder

    over = {"generation.backend": "vllm", "generation.adapters": "lora"}
    cfg = load_config(ROOT / "params" / "smoke.yaml", over)
    monkeypatch.setattr(rv, "engine", lambda settings: settings)
    ref = backends.ModelRef("base", TINY_QWEN3, None, "fp32")
    run = RunFolder(tmp_path / "run")
    rollouts, _ = backends.backend(cfg, run, ref)
    evaluation, _ = backends.backend(cfg, run, ref, with_adapters=True)
    assert not rollouts.backend.llm.enable_lora
    assert evaluation.backend.llm.enable_lora


def test_mix_variants_have_one_list():
    from rmlib.training.mix import VARIANTS, TrainMixConfig

    hint = typing.get_type_hints(TrainMixConfig)["variant"]
    assert set(typing.get_args(hint)) == set(VARIANTS)


def test_run_config_has_a_typed_property_per_section():
    from rmlib.run.config import SECTIONS, RunConfig

    cfg = config_from_dict({})
    props = {n for n, v in vars(RunConfig).items() if isinstance(v, property)}
    assert props == set(SECTIONS)
    assert all(getattr(cfg, s) is cfg.sections[s] for s in SECTIONS)


def test_a_lora_rank_vllm_cannot_serve_is_refused_at_load():
    """vLLM's largest max_lora_rank is 512: a larger grpo.lora_r fails at load, not at 04's
    engine start hours later (ranks in between are served under the next allowed one)."""
    for bad, bound in ((600, "less than or equal to 512"), (0, "greater than or equal to 1")):
        with pytest.raises(
            ConfigError, match=rf"'grpo.lora_r': Input should be {bound}, got {bad}$"
        ):
            config_from_dict({"grpo": {"lora_r": bad}})
    assert config_from_dict({"grpo": {"lora_r": 512}}).grpo.lora_r == 512
    assert config_from_dict({"grpo": {"lora_r": 24}}).grpo.lora_r == 24


def test_a_local_data_path_is_read_from_where_the_user_typed_it(tmp_path, monkeypatch):
    # notebooks execute in notebooks/: a path relative to the cwd of `rmlib run` must be made
    # absolute before the run's params.yaml is written, or 01 looks for it in notebooks/
    (tmp_path / "data" / "rb2").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    cfg = load_config(
        ROOT / "params" / "demo.yaml",
        overrides={
            "data.eval": [
                {"source": "rewardbench2", "path": "data/rb2"},
                {"source": "rewardbench2", "path": "allenai/reward-bench-2"},
            ]
        },
    )
    local, hub = cfg.data.eval
    assert local.path == str(tmp_path.resolve() / "data" / "rb2")
    assert hub.path == "allenai/reward-bench-2"  # no such folder here: a hub id, as typed
