"""The run config: every parameter of a run, its default and its doc, read from `params/*.yaml`.

A params file is a nested mapping whose top-level keys are the sections below. Every section is a
dataclass; each field carries its documentation in `metadata["doc"]`, so `rmlib params --doc`
(and the run manifest) can print what each value means. Sections owned by a module (inference,
mix, warm-up, GRPO) are that module's dataclass: the default lives in exactly one place.

Unknown keys are errors that name the file and the dotted key: a typo never silently falls back
to a default.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


def doc(text: str, default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A dataclass field with its documentation attached."""
    if isinstance(default, list | dict) or dataclasses.is_dataclass(default):
        value = default
        return field(default_factory=lambda: copy.deepcopy(value), metadata={"doc": text}, **kw)
    return field(default=default, metadata={"doc": text}, **kw)


class ConfigError(ValueError):
    """A params file with a wrong key or value; names the file and the dotted key."""


Backend = Literal["hf", "vllm", "http"]
Precision = Literal["auto", "nf4", "bf16", "fp32"]


@dataclass
class RunSection:
    name: str = doc("Run name: the folder under outputs/.", "run")
    seed: int = doc("Master seed; every random choice of the run derives from it.", 0)
    output_root: str = doc("Where run folders go.", "outputs")
    notebooks: list[str] = doc(
        "Notebooks to execute, in order (stems under notebooks/).",
        [
            "01_data",
            "02_rollouts",
            "03_training",
            "04_inference",
            "05_results",
            "06_analysis_quality",
            "07_position_bias",
        ],
    )
    description: str = doc("One line saying what this profile is for.", "")


@dataclass
class ModelSection:
    backbone: str = doc(
        "Hub id, local directory, or an embedded model: 'embedded:smollm2-135m' (demo), "
        "'embedded:tiny-qwen3' (tests).",
        "embedded:smollm2-135m",
    )
    precision: Precision = doc(
        "Weights for inference: nf4 (QLoRA-style 4-bit), bf16, fp32, or auto (bf16 on CUDA and "
        "on CPUs with AMX / AVX-512 BF16, fp32 on other CPUs; the manifest says which and why).",
        "bf16",
    )
    train_precision: Precision = doc(
        "Weights under the LoRA adapter during training (same choices as precision).", "nf4"
    )

    def __post_init__(self) -> None:
        for key in ("precision", "train_precision"):
            value = getattr(self, key)
            if value not in typing.get_args(Precision):
                raise ValueError(
                    f"model.{key} must be one of {typing.get_args(Precision)}, got {value!r}"
                )
    trust_remote_code: bool = doc("Allow model code from the checkpoint (off: safer).", False)
    allow_cpu: bool = doc(
        "Run a non-embedded backbone with no CUDA device. Off: `rmlib run` refuses at once "
        "(Qwen3-4B on a CPU would take weeks); the embedded demo/test models always run on CPU.",
        False,
    )
    enable_thinking: bool = doc(
        "Qwen3 thinking mode; the paper runs non-thinking everywhere. Must match across steps.",
        False,
    )


@dataclass
class DatasetSpec:
    source: str = doc("A loader name (rmlib data stats --help lists them).", "demo")
    path: str | None = doc("Hub id (default) or local file/folder in the hub layout.", None)
    split: str | None = doc("Split; None = the source's evaluation/default split.", None)
    config: str | None = doc("Dataset config (HelpSteer3 'preference', HH-RLHF data_dir).", None)
    n: int | None = doc("Subsample this many pairs (seeded); None = all.", None)
    on_error: str = doc("Bad rows: 'raise' (default) or 'skip' (counted).", "raise")
    options: dict = doc("Extra loader options (e.g. drop_ties).", {})


@dataclass
class DataSection:
    train: DatasetSpec = doc("Preference source for the training rollouts.", DatasetSpec())
    eval: list[DatasetSpec] = doc("Evaluation sets.", [])
    subsample_seed: int | None = doc("Seed for subsampling; None = run.seed.", None)


@dataclass
class GenerationSection:
    backend: Backend = doc(
        "Who generates: 'vllm' (vLLM's engine in this process: continuous batching, paged KV "
        "cache, prefix caching, LoRA adapters; the CPU build on machines without a GPU), 'hf' "
        "(our transformers decode loop: the reference and the fallback) or 'http' "
        "(OpenAI-compatible vLLM/SGLang servers at `endpoints`; rmlib.generation.http has the "
        "serve commands).",
        "hf",
    )
    max_batch_tokens: int = doc(
        "backend 'hf': token budget per generation batch (prompt + new tokens, summed over "
        "sequences).",
        16384,
    )
    max_batch_size: int = doc("backend 'hf': most sequences in one batch.", 64)
    chunk_prompts: int | None = doc(
        "Prompts per backend call; each call's samples are stored before the next starts (a kill "
        "loses at most one call). None: 64 for 'hf', 512 for 'vllm' and 'http' (an engine keeps "
        "busy only with many requests in flight).",
        None,
    )
    store: str = doc("Generation store, relative to the run folder (SQLite).", "generations.sqlite")
    progress: bool = doc("Show progress bars.", True)
    gpu_memory_utilization: float = doc(
        "backend 'vllm' on CUDA: share of the card vLLM takes for weights + KV cache.", 0.85
    )
    kv_cache_gib: float | None = doc(
        "backend 'vllm': KV cache size in GiB. None: from gpu_memory_utilization on CUDA, "
        "2 GiB on CPU (the CPU engine would otherwise reserve a share of all host memory).",
        None,
    )
    max_num_seqs: int = doc("backend 'vllm': most sequences the engine decodes at once.", 256)
    max_num_batched_tokens: int = doc(
        "backend 'vllm': tokens one engine step runs (prefill chunks + decodes); raised to the "
        "longest prompt + new tokens if lower (a seeded prompt must not be split over steps).",
        8192,
    )
    enforce_eager: bool | None = doc(
        "backend 'vllm': skip torch.compile and CUDA graphs. None: eager on CPU (starts in tens "
        "of seconds instead of minutes), compiled on CUDA (faster decode steps).",
        None,
    )
    adapters: Literal["auto", "lora", "merged"] = doc(
        "backend 'vllm': how a trained model's adapter is served. 'lora': by LoRARequest on the "
        "base model's engine (one engine for all models); 'merged': merged into a checkpoint "
        "under models/<model>-merged, one engine each (vLLM's CPU LoRA kernels are plain torch "
        "ops, several times slower than the merged model); 'auto': lora on CUDA, merged on CPU.",
        "auto",
    )
    cpu_reserved_cores: int | None = doc(
        "backend 'vllm' on CPU: cores left to the engine's scheduler process (None: vLLM's "
        "default, 1). 0 lets its worker compute on every core: on a 2-core machine 86 against "
        "57 tok/s measured (SmolLM2-135M, fp32).",
        0,
    )
    endpoints: list[str] = doc("backend 'http': server base URLs (one per server).", [])
    served_models: dict = doc(
        "backend 'http': the served name of each run model, e.g. {base: Qwen/Qwen3-4B, "
        "unified: unified}; a model not listed is asked for by the backbone id (base) or by its "
        "own name (the name given to --lora-modules / --lora-paths).",
        {},
    )
    api_key_env: str = doc(
        "backend 'http': the environment variable holding the servers' API key (sent as a "
        "Bearer token; a server started with --api-key needs it). The key itself is never a "
        "parameter: params are written into every run folder.",
        "OPENAI_API_KEY",
    )
    http_concurrency: int = doc("backend 'http': requests in flight at once.", 16)
    http_timeout: float = doc("backend 'http': seconds before a request is retried.", 600.0)

    def __post_init__(self) -> None:
        if self.backend not in typing.get_args(Backend):
            raise ValueError(
                f"generation.backend must be one of {typing.get_args(Backend)}, "
                f"got {self.backend!r}"
            )
        if self.backend == "http" and not self.endpoints:
            raise ValueError("generation.backend 'http' needs generation.endpoints (server URLs)")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("generation.gpu_memory_utilization must be in (0, 1]")
        if self.adapters not in ("auto", "lora", "merged"):
            raise ValueError(
                f"generation.adapters must be 'auto', 'lora' or 'merged', got {self.adapters!r}"
            )

    def prompts_per_call(self) -> int:
        if self.chunk_prompts is not None:
            return self.chunk_prompts
        return 64 if self.backend == "hf" else 512


@dataclass
class PromptSection:
    max_prompt_tokens: int = doc(
        "Context budget of a prompt; longer inputs are cut by the policy in rmlib.prompts.", 4096
    )


@dataclass
class RolloutSection:
    n_samples: int = doc("Judgments per training pair from the untrained backbone (paper: 8).", 8)
    temperature: float = doc("Sampling temperature of the rollouts (paper: 1.0).", 1.0)
    max_new_tokens: int = doc("Cap on a rollout judgment's length.", 1024)


@dataclass
class EvalSection:
    models: list[str] = doc(
        "Which models to evaluate: base, rft (GRPO on Pref. only), unified (Pref.+Refl.).",
        ["base", "unified"],
    )
    n_bootstrap: int = doc("Bootstrap resamples for confidence intervals.", 1000)
    failure_credit: float = doc(
        "Credit for a pair whose prediction is a parse failure (upstream RewardBench uses 0.5).",
        0.0,
    )
    n_grid: list[int] = doc("Sample counts for the accuracy-vs-N curve.", [1, 2, 4, 8])


SECTIONS: dict[str, str] = {
    "run": "rmlib.config:RunSection",
    "model": "rmlib.config:ModelSection",
    "data": "rmlib.config:DataSection",
    "generation": "rmlib.config:GenerationSection",
    "prompts": "rmlib.config:PromptSection",
    "rollouts": "rmlib.config:RolloutSection",
    "warmup": "rmlib.training.sft:WarmupConfig",
    "mix": "rmlib.training.mix:TrainMixConfig",
    "grpo": "rmlib.training.grpo:GRPOSettings",
    "inference": "rmlib.reflect:ReflectConfig",
    "eval": "rmlib.config:EvalSection",
}


def _section_class(name: str) -> type:
    module, _, attr = SECTIONS[name].partition(":")
    return getattr(__import__(module, fromlist=[attr]), attr)


@dataclass
class RunConfig:
    """All sections of one run, plus where it came from."""

    sections: dict[str, Any]
    source: str = "<dict>"
    sweep: dict[str, list] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["sections"][name]
        except KeyError:
            raise AttributeError(name) from None

    def to_dict(self) -> dict[str, Any]:
        return {k: dataclasses.asdict(v) for k, v in self.sections.items()}


def _build(cls: type, data: Any, where: str, source: str) -> Any:
    """Build dataclass `cls` from a mapping, strictly (unknown keys and wrong types are errors)."""
    if dataclasses.is_dataclass(data):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: '{where}' must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{where}.{unknown[0]}' (known: {', '.join(sorted(names))})"
        )
    kwargs = {k: _coerce(hints[k], v, f"{where}.{k}", source) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: '{where}': {e}") from e


def _coerce(tp: Any, value: Any, where: str, source: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        tp = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where, source)
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, list):
            raise ConfigError(f"{source}: '{where}' must be a list")
        return [_build(args[0], v, f"{where}[{i}]", source) for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    simple = {int: int, float: float, str: str, bool: bool}.get(tp)
    if simple and not isinstance(value, simple) or (tp is int and isinstance(value, bool)):
        raise ConfigError(f"{source}: '{where}' must be {tp.__name__}, got {value!r}")
    return value


def config_from_dict(data: dict[str, Any], source: str = "<dict>") -> RunConfig:
    data = copy.deepcopy(data or {})
    sweep = data.pop("sweep", {}) or {}
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(
            f"{source}: unknown section '{unknown[0]}' (known: {', '.join(SECTIONS)}, sweep)"
        )
    sections = {
        name: _build(_section_class(name), data.get(name), name, source) for name in SECTIONS
    }
    return RunConfig(sections=sections, source=source, sweep=sweep)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a params file; `overrides` maps dotted keys ('mix.ratio') to values."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"params file not found: {path}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value)
    return config_from_dict(data, source=str(path))


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def sweep_points(cfg: RunConfig) -> list[dict[str, Any]]:
    """The grid of a params file's `sweep:` mapping (dotted key → list of values), expanded."""
    keys = list(cfg.sweep)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*cfg.sweep.values())]


def describe(cfg: RunConfig) -> list[dict[str, Any]]:
    """Every parameter with its value and doc (for the manifest and `--dry-run`)."""
    rows: list[dict[str, Any]] = []

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
            else:
                rows.append(
                    {"key": prefix + f.name, "value": value, "doc": f.metadata.get("doc", "")}
                )

    for name, section in cfg.sections.items():
        walk(section, f"{name}.")
    return rows
