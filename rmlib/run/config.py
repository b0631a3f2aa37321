"""The run config: every parameter of a run, its default and its doc, read from `params/*.yaml`.

A params file is a nested mapping whose top-level keys are the sections below. Every section is a
dataclass; each field carries its documentation in `metadata["doc"]`, so `rmlib params --doc`
(and the run manifest) can print what each value means. Sections owned by a module (inference,
mix, warm-up, GRPO) are that module's dataclass: the default lives in exactly one place.

The whole file is validated at load, before any work: it must be a non-empty mapping; pydantic
validates each section's dataclass (its `Literal` types carry the allowed values, every number's
type its range (`Count`, `Share`, ... below), `__pydantic_config__ = PARAMS` makes an unknown key
an error), the sections' own `__post_init__` checks run, then the checks that span sections (data
sources in the registry, every sweep point). Ranges are checked by this validation only: a
section built directly in Python (`ReflectConfig(n_samples=0)`) is not range-checked. A mistake
is one `ConfigError` line naming the file, the dotted key, the bad value and what is allowed: a
typo never silently falls back to a default, and never fails hours into a run.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import itertools
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError

if TYPE_CHECKING:
    from rmlib.reflect.settings import ReflectConfig
    from rmlib.training.grpo_config import GRPOSettings
    from rmlib.training.mix import TrainMixConfig
    from rmlib.training.sft import WarmupConfig
    from rmlib.workbook.plan.settings import PlanSection


def doc(text: str, default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A dataclass field with its documentation attached."""
    if isinstance(default, list | dict) or dataclasses.is_dataclass(default):
        value = default
        return field(default_factory=lambda: copy.deepcopy(value), metadata={"doc": text}, **kw)
    return field(default=default, metadata={"doc": text}, **kw)


class ConfigError(ValueError):
    """A params file with a wrong key or value; names the file and the dotted key."""


# The pydantic config of every params dataclass (`__pydantic_config__ = PARAMS` in its body):
# unknown keys are errors. Lax mode on purpose: YAML already types its scalars, and lax parsing
# accepts `1e-6`, which YAML 1.1 reads as a string, for a float.
PARAMS = ConfigDict(extra="forbid")

# The ranges of the params' numbers, checked at load like any other type (a bad one is the same
# one line: file, dotted key, value, what is allowed). Floats are finite: YAML's .nan and .inf
# parse, and nan would pass every range check.
Count = Annotated[int, Field(ge=1)]  # a number of things, steps or tokens: at least one
CountOrOff = Annotated[int, Field(ge=0)]  # 0 means "off" / "none" (the field's doc says which)
Seed = Annotated[int, Field(ge=0)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # learning rates, temperatures
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # a fraction in [0, 1]
OpenShare = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]  # (0, 1]: top_p, memory
Dropout = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]  # 1 would drop everything
Finite = Annotated[float, Field(allow_inf_nan=False)]

Backend = Literal["hf", "vllm", "http", "served"]
Precision = Literal["auto", "nf4", "bf16", "fp32"]
# The models a profile can evaluate (and so train), in the paper's order: the backbone; GRPO on
# Pref. only (the RFT baseline); Pref. only at the mix's full volume (Table 3); unified
# Pref. + Refl. (ReflectRM); a judge trained on Refl. only (Figure 4), whose stage 2 reflects on
# another model's stage-1 judgments (eval.refl_only_stage1). Their mixes: run_models.MIX_VARIANT.
Model = Literal["base", "rft", "same_volume", "unified", "refl_only"]
# transformers' SchedulerType values (tests/test_config.py checks they agree).
Scheduler = Literal[
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
    "reduce_lr_on_plateau",
    "cosine_with_min_lr",
    "cosine_warmup_with_min_lr",
    "warmup_stable_decay",
    "greedy",
]


def check_run_name(name: str) -> str:
    """A run name is one plain folder name: the run folder is output_root/name, and a name with
    a separator, '..' or an absolute path would put a run's files (executed notebooks, tables)
    outside output_root, over the project's own files."""
    # no separator: so no absolute name either
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(
            f"run name {name!r} is not one folder name: not '', '.' or '..', no '/', '\\' or "
            "NUL, not absolute (run.output_root says where run folders go)"
        )
    return name


def notebook_stems() -> list[str]:
    """The workbook's notebooks: the stems of notebooks/*.ipynb in the project."""
    from rmlib.run.folder import project_root  # run_folder imports this module

    return sorted(p.stem for p in (project_root() / "notebooks").glob("*.ipynb"))


def check_notebook(stem: str) -> str:
    """Only the workbook's own notebooks run: a path would let a params file execute any code."""
    allowed = notebook_stems()
    if stem not in allowed:
        raise ValueError(
            f"{stem!r} is not one of the workbook's notebooks (stems of notebooks/*.ipynb): "
            f"{', '.join(allowed)}"
        )
    return stem


@dataclass
class RunSection:
    __pydantic_config__ = PARAMS

    name: Annotated[str, AfterValidator(check_run_name)] = doc(
        "Run name: the folder under output_root (one plain folder name).", "run"
    )
    seed: Seed = doc("Master seed; every random choice of the run derives from it.", 0)
    output_root: str = doc("Where run folders go (any folder).", "outputs")
    notebooks: list[Annotated[str, AfterValidator(check_notebook)]] = doc(
        "Notebooks to execute, in order (stems of notebooks/*.ipynb, e.g. 01_data).",
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
    gpus: Count = doc(
        "GPUs the run uses on one node: GRPO trains with one process per GPU (accelerate), its "
        "step staying the profile's (grpo.keep_step_on_gpus); rollouts and evaluation use one "
        "engine per GPU with generation.backend 'served' (one in-process engine otherwise). "
        "1 = a single GPU (or the CPU).",
        1,
    )
    gpu_class: str | None = doc(
        "The GPU class this profile is sized for (`rmlib run --dry-run --gpu` names them, e.g. "
        "h100-80gb); the run checks it against the card at start. None: not checked.",
        None,
    )


@dataclass
class ModelSection:
    __pydantic_config__ = PARAMS

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
    trust_remote_code: bool = doc("Allow model code from the checkpoint (off: safer).", False)
    allow_cpu: bool = doc(
        "Run a non-embedded backbone with no CUDA device. Off: `rmlib run` refuses at once "
        "(Qwen3-4B on a CPU would take weeks); the embedded demo/test models always run on CPU.",
        False,
    )
    enable_thinking: bool = doc(
        "Qwen3 thinking mode (the chat template's enable_thinking); the paper runs non-thinking "
        "everywhere. The one switch of every rendered prompt: warm-up, rollouts, training mix, "
        "GRPO (TRL's chat_template_kwargs) and evaluation.",
        False,
    )


@dataclass
class DatasetSpec:
    __pydantic_config__ = PARAMS

    source: str = doc("A loader name (rmlib data stats --help lists them).", "demo")
    path: str | None = doc("Hub id (default) or local file/folder in the hub layout.", None)
    split: str | None = doc("Split; None = the source's evaluation/default split.", None)
    config: str | None = doc("Dataset config (HelpSteer3 'preference', HH-RLHF data_dir).", None)
    n: Count | None = doc("Subsample this many pairs (seeded); None = all.", None)
    on_error: Literal["raise", "skip"] = doc(
        "Bad rows: 'raise' (default) or 'skip' (counted).", "raise"
    )
    options: dict = doc("Extra loader options (e.g. drop_ties).", {})


@dataclass
class DataSection:
    __pydantic_config__ = PARAMS

    train: DatasetSpec = doc("Preference source for the training rollouts.", DatasetSpec())
    eval: list[DatasetSpec] = doc("Evaluation sets.", [])
    subsample_seed: Seed | None = doc("Seed for subsampling; None = run.seed.", None)
    pad_to_budget: bool = doc(
        "Lengthen both responses of every pair (their own text repeated) past the longest prompt "
        "budget, so every prompt is cut to its budget: a run at the profile's longest prompts, "
        "whose results mean nothing (`rmlib run --preflight` sets it). Off: the data as it is.",
        False,
    )


@dataclass
class GenerationSection:
    __pydantic_config__ = PARAMS

    backend: Backend = doc(
        "Who generates: 'vllm' (vLLM's engine in this process: continuous batching, paged KV "
        "cache, prefix caching, LoRA adapters; the CPU build on machines without a GPU), 'hf' "
        "(our transformers decode loop: the reference and the fallback) or 'http' "
        "(OpenAI-compatible vLLM/SGLang servers at `endpoints`; rmlib.generation.http has the "
        "serve commands) or 'served' (the same, over run.gpus vLLM servers the run starts on its "
        "first generation the store cannot answer, one per GPU, and stops at its end: "
        "rmlib.generation.servers).",
        "hf",
    )
    max_batch_tokens: Count = doc(
        "backend 'hf': token budget per generation batch (prompt + new tokens, summed over "
        "sequences); on CUDA lowered to what the card's free memory holds at the model's KV "
        "bytes a token (run.log says so), and a batch that still runs out of memory is split.",
        16384,
    )
    max_batch_size: Count = doc("backend 'hf': most sequences in one batch.", 64)
    chunk_prompts: Count | None = doc(
        "Prompts per backend call; each call's samples are stored before the next starts (a kill "
        "loses at most one call). None: 64 for 'hf', 512 for 'vllm' and 'http' (an engine keeps "
        "busy only with many requests in flight).",
        None,
    )
    store: str = doc("Generation store, relative to the run folder (SQLite).", "generations.sqlite")
    progress: bool = doc("Show progress bars.", True)
    gpu_memory_utilization: OpenShare = doc(
        "backend 'vllm' on CUDA: share of the card vLLM takes for weights + KV cache.", 0.85
    )
    kv_cache_gib: Positive | None = doc(
        "backend 'vllm': KV cache size in GiB. None: from gpu_memory_utilization on CUDA, "
        "2 GiB on CPU (the CPU engine would otherwise reserve a share of all host memory).",
        None,
    )
    max_num_seqs: Count = doc("backend 'vllm': most sequences the engine decodes at once.", 256)
    max_num_batched_tokens: Count = doc(
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
        "under models/<model>-merged (`rmlib judge --adapter`: <RMLIB_CACHE>/merged/), one "
        "engine each (vLLM's CPU LoRA kernels are plain torch ops, several times slower than the "
        "merged model); 'auto': lora on CUDA, merged on CPU.",
        "auto",
    )
    cpu_reserved_cores: CountOrOff | None = doc(
        "backend 'vllm' on CPU: cores left to the engine's scheduler process (None: vLLM's "
        "default, 1). 0 lets its worker compute on every core: on a 2-core machine 86 against "
        "57 tok/s measured (SmolLM2-135M, fp32).",
        0,
    )
    endpoints: list[str] = doc("backend 'http': server base URLs (one per server).", [])
    serve_start_timeout: Positive = doc(
        "backend 'served' and `rmlib serve`: seconds the vLLM servers may take to answer "
        "GET /v1/models after they start (loading weights, profiling memory, compiling CUDA "
        "graphs: minutes for a 4B model on a GPU; ~30 s for the tiny model on CPU).",
        900.0,
    )
    served_models: dict = doc(
        "backend 'http': the served name of each run model, e.g. {base: Qwen/Qwen3-4B, "
        "unified: unified}; a model not listed is asked for by the backbone id (base) or by its "
        "own name (the name given to --lora-modules / --lora-paths).",
        {},
    )
    api_key_env: str | None = doc(
        "backend 'http': the environment variable holding the servers' API key (sent as a "
        "Bearer token; a server started with --api-key needs it), e.g. OPENAI_API_KEY; unset or "
        "empty there, the run is refused. None: no key is sent (no other variable is read). The "
        "key itself is never a parameter: params are written into every run folder.",
        None,
    )
    http_api: Literal["completions", "chat"] = doc(
        "backend 'http': the API the servers answer: 'completions' (rendered prompts; vLLM, "
        "SGLang) or 'chat' (chat messages with per-token log-probs, for servers without a "
        "completions endpoint; the tokenizer still counts the prompt budgets).",
        "completions",
    )
    http_vllm_extras: bool = doc(
        "backend 'http': send vLLM's request extensions (token ids for tokens, no added special "
        "tokens, top_k). Off for servers that refuse unknown fields, such as OpenAI's API "
        "(their top-k is then the server's own).",
        True,
    )
    http_logprobs_kind: Literal["raw", "processed", "unknown"] = doc(
        "backend 'http': what the servers' log-probs are, as they were started (no server says "
        "it in its answers): 'raw' (vLLM --logprobs-mode raw_logprobs), 'processed' (after "
        "temperature and top-k/top-p), 'unknown'; recorded with every generation.",
        "unknown",
    )
    http_concurrency: Count = doc(
        "backend 'http': requests in flight at once, over all endpoints. A server batches only "
        "what it has been sent: 256 is vLLM's default batch limit (--max-num-seqs; 1024 on "
        "H100-class GPUs) and about what one Qwen3-4B server's KV cache holds at our lengths, "
        "so a server always has work queued. Raise it with the number of servers.",
        256,
    )
    # A hung server (it accepts, never answers) gives its first error at the handshake, the model
    # list each endpoint is asked for before the first completion: (connect + write + pool +
    # probe) x (max_retries + 1) + backoff = 100.5 s with these defaults, under the 2 minutes a
    # run may wait (rmlib.generation.http.HTTPTimeouts.first_error_seconds). A completion itself
    # may take as long as it needs up to http_read_timeout.
    http_connect_timeout: Positive = doc(
        "backend 'http': seconds to open a connection. A reachable server accepts in "
        "milliseconds; 10 s covers SYN retransmissions (1 s, then 3 s) and a slow name lookup.",
        10.0,
    )
    http_read_timeout: Positive = doc(
        "backend 'http': seconds a completion may wait for the server's answer. Requests are not "
        "streamed, so this bounds one request's whole completion, its wait in the server's "
        "queue included: on a 24 GB card a full batch of 1,024-token judgments can take minutes "
        "(a server that hangs from the start is caught by http_probe_timeout instead).",
        600.0,
    )
    http_probe_timeout: Positive = doc(
        "backend 'http': seconds the model list (GET /v1/models) may take at the handshake "
        "before the first completion: a small answer a live server gives in milliseconds, so a "
        "server that accepts and never answers is named within seconds, not a read timeout.",
        30.0,
    )
    http_write_timeout: Positive = doc(
        "backend 'http': seconds to send a request (one prompt, tens of KB: it goes into the "
        "socket buffer at once; longer means a broken link).",
        5.0,
    )
    http_pool_timeout: Positive = doc(
        "backend 'http': seconds to wait for a free connection (the requests in flight never "
        "outnumber the pool's connections, so a wait means a broken pool).",
        5.0,
    )
    http_max_retries: CountOrOff = doc(
        "backend 'http': the openai client's retries of a failed request (connection error, "
        "timeout, HTTP 408/409/429/5xx) per endpoint before it moves on to the next endpoint; "
        "raise it for a server behind a rate-limiting proxy (429).",
        1,
    )

    def __post_init__(self) -> None:
        if self.backend == "http" and not self.endpoints:
            raise ValueError("generation.backend 'http' needs generation.endpoints (server URLs)")

    def prompts_per_call(self) -> int:
        if self.chunk_prompts is not None:
            return self.chunk_prompts
        return 64 if self.backend == "hf" else 512


@dataclass
class PromptSection:
    __pydantic_config__ = PARAMS

    max_prompt_tokens: Count = doc(
        "Context budget of a judgment (Pref.) prompt: rollouts, stage 1 and greedy judgments, "
        "Pref. training items (paper/ConsistRM: 4,096). Over it (rmlib.judge.prompts): the oldest "
        "earlier turns are dropped first, then the responses cut from their end.",
        4096,
    )
    max_reflection_prompt_tokens: Count = doc(
        "Context budget of a reflection (Refl.) prompt, which holds the query, both responses and "
        "two critiques: Refl. items of the mix and the warm-up, stage 2 of inference (~8k as the "
        "sibling paper notes: a 4,096-token pair and two 1,024-token critiques fit whole). Over "
        "it: the oldest earlier turns are dropped first, then the responses cut from their end, "
        "and only then the critiques, from their start, so each keeps its conclusion.",
        8192,
    )
    critique_with_result: bool = doc(
        "Show a critique's <Result> line in reflection prompts (method.md §1 choice; default: "
        "analysis text only). One value for the warm-up, the training mix and inference.",
        False,
    )

    def __post_init__(self) -> None:
        if self.max_reflection_prompt_tokens < self.max_prompt_tokens:
            # a reflection prompt holds everything a judgment prompt holds, and two critiques
            raise ValueError(
                f"max_reflection_prompt_tokens ({self.max_reflection_prompt_tokens}) must be >= "
                f"max_prompt_tokens ({self.max_prompt_tokens}): a reflection prompt holds the "
                "judgment prompt's pair and two critiques"
            )

    def longest_prompt_tokens(self) -> int:
        """The longest prompt of a run (either task): what an engine's context must hold."""
        return max(self.max_prompt_tokens, self.max_reflection_prompt_tokens)


@dataclass
class RolloutSection:
    __pydantic_config__ = PARAMS

    n_samples: Count = doc("Judgments per training pair from the untrained backbone (paper: 8).", 8)
    # > 0: rollouts are sampled (SamplingParams refuses 0 when sampling)
    temperature: Positive = doc("Sampling temperature of the rollouts (paper: 1.0).", 1.0)
    max_new_tokens: Count = doc("Cap on a rollout judgment's length.", 1024)


@dataclass
class EvalSection:
    __pydantic_config__ = PARAMS

    models: list[Model] = doc(
        "Which models to evaluate (and so train): base, rft (GRPO on the mix's Pref. items "
        "only), same_volume (Pref. only, as many items as the mix: the paper's Table 3), "
        "unified (Pref.+Refl.), refl_only (Refl. items only; its stage 2 reflects on "
        "refl_only_stage1's judgments: the paper's Figure 4).",
        ["base", "unified"],
    )
    refl_only_stage1: Model = doc(
        "Whose stage-1 judgments the refl_only judge reflects on (the same rollouts as that "
        "model's own two-stage inference, taken from the store). Must be evaluated too.",
        "unified",
    )
    n_bootstrap: Count = doc("Bootstrap resamples for confidence intervals.", 1000)
    failure_credit: Share = doc(
        "Credit for a pair whose prediction is a parse failure (upstream RewardBench uses 0.5).",
        0.0,
    )
    n_grid: list[Count] = doc("Sample counts for the accuracy-vs-N curve.", [1, 2, 4, 8])

    def __post_init__(self) -> None:
        if "refl_only" in self.models:
            stage1 = self.refl_only_stage1
            if stage1 == "refl_only" or stage1 not in self.models:
                raise ValueError(
                    f"refl_only reflects on refl_only_stage1's judgments: list "
                    f"'{stage1}' in eval.models too, or set refl_only_stage1 to one of "
                    f"{[m for m in self.models if m != 'refl_only']}"
                )


SECTIONS: dict[str, str] = {
    "run": "rmlib.run.config:RunSection",
    "model": "rmlib.run.config:ModelSection",
    "data": "rmlib.run.config:DataSection",
    "generation": "rmlib.run.config:GenerationSection",
    "prompts": "rmlib.run.config:PromptSection",
    "rollouts": "rmlib.run.config:RolloutSection",
    "warmup": "rmlib.training.sft:WarmupConfig",
    "mix": "rmlib.training.mix:TrainMixConfig",
    "grpo": "rmlib.training.grpo_config:GRPOSettings",
    "inference": "rmlib.reflect.settings:ReflectConfig",
    "eval": "rmlib.run.config:EvalSection",
    "plan": "rmlib.workbook.plan.settings:PlanSection",
}


# Keys that moved: a value every step must agree on has one home. A file still setting an old key
# is told where it went (one line), not only that the key is unknown.
MOVED_KEYS: dict[str, str] = {
    "grpo.enable_thinking": "model.enable_thinking",
    "warmup.critique_with_result": "prompts.critique_with_result",
    "mix.critique_with_result": "prompts.critique_with_result",
    "inference.critique_with_result": "prompts.critique_with_result",
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

    # One typed property per section of SECTIONS (the classes outside this module are imported
    # for type checkers only: they import this module's PARAMS and doc).
    @property
    def run(self) -> RunSection:
        return self.sections["run"]

    @property
    def model(self) -> ModelSection:
        return self.sections["model"]

    @property
    def data(self) -> DataSection:
        return self.sections["data"]

    @property
    def generation(self) -> GenerationSection:
        return self.sections["generation"]

    @property
    def prompts(self) -> PromptSection:
        return self.sections["prompts"]

    @property
    def rollouts(self) -> RolloutSection:
        return self.sections["rollouts"]

    @property
    def warmup(self) -> WarmupConfig:
        return self.sections["warmup"]

    @property
    def mix(self) -> TrainMixConfig:
        return self.sections["mix"]

    @property
    def grpo(self) -> GRPOSettings:
        return self.sections["grpo"]

    @property
    def inference(self) -> ReflectConfig:
        return self.sections["inference"]

    @property
    def eval(self) -> EvalSection:
        return self.sections["eval"]

    @property
    def plan(self) -> PlanSection:
        return self.sections["plan"]

    def to_dict(self) -> dict[str, Any]:
        return {k: dataclasses.asdict(v) for k, v in self.sections.items()}


@functools.cache
def _validator(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def _build(cls: type, data: Any, where: str, source: str) -> Any:
    """Validate a section's mapping into its dataclass (defaults filled, sections' checks run)."""
    try:
        return _validator(cls).validate_python({} if data is None else data)
    except ValidationError as e:
        raise ConfigError(_first_error(e, cls, where, source)) from None


def _first_error(e: ValidationError, cls: type, where: str, source: str) -> str:
    """One line for pydantic's first error: file, dotted key, bad value, what is allowed.

    A moved key (MOVED_KEYS) is reported before any other error: its line names the new key."""
    errors = e.errors()
    moved = [x for x in errors if _dotted(where, x["loc"]) in MOVED_KEYS]
    err = moved[0] if moved else errors[0]
    loc = err["loc"]
    key = _dotted(where, loc)
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    if key in MOVED_KEYS:
        return f"{source}: '{key}' moved to '{MOVED_KEYS[key]}': set it there instead{more}"
    if err["type"] == "unexpected_keyword_argument":
        known = sorted(f.name for f in dataclasses.fields(_class_at(cls, loc[:-1])))
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{source}: unknown key '{key}' ({hint}known: {', '.join(known)}){more}"
    if err["type"] == "value_error":  # a section's own check (__post_init__)
        return f"{source}: '{key}': {err['ctx']['error']}{more}"
    return f"{source}: '{key}': {err['msg']}, got {err['input']!r}{more}"


def _dotted(where: str, loc: tuple) -> str:
    return where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _class_at(cls: type, loc: tuple) -> type:
    """The dataclass at a pydantic error location below `cls` (list indices skipped)."""
    for part in loc:
        if isinstance(part, int):
            continue
        tp = typing.get_type_hints(cls)[part]
        while not dataclasses.is_dataclass(tp):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        cls = tp
    return cls


def config_from_dict(data: dict[str, Any], source: str = "<dict>") -> RunConfig:
    """Validate a whole params mapping: every section, the checks across sections, and every
    point of its sweep (a bad sweep value is refused before the first point runs)."""
    data = {} if data is None else data  # in Python, no sections = every default
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {_not_a_mapping(data)}")
    data = copy.deepcopy(data)
    sweep = data.pop("sweep", {}) or {}
    cfg = _sections(data, source)
    if not isinstance(sweep, dict):
        raise ConfigError(f"{source}: 'sweep' must map dotted keys to lists of values")
    cfg.sweep = sweep
    for point in sweep_points(cfg):
        where = ", ".join(f"{k}={v!r}" for k, v in point.items())
        point_data = copy.deepcopy(data)
        for key, value in point.items():
            set_dotted(point_data, key, value)
        _sections(point_data, f"{source} (sweep point {where})")
    return cfg


def _not_a_mapping(data: Any) -> str:
    """Why a params document is not a params file: it must map section names to sections."""
    if data is None or data == {}:  # a file of nothing (or comments) is a mistake, not defaults
        what = "it is empty"
    elif isinstance(data, list):
        what = "got a list"
    else:
        what = f"got {type(data).__name__} {data!r:.40}"
    return f"a params file maps sections (run, model, ...) to their settings; {what}"


def _sections(data: dict[str, Any], source: str) -> RunConfig:
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], SECTIONS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(
            f"{source}: unknown section '{unknown[0]}' ({hint}known: {', '.join(SECTIONS)}, sweep)"
        )
    # One master seed: the inference seed is the run's unless the file sets it.
    run = data.get("run")
    seed = run.get("seed", RunSection.seed) if isinstance(run, dict) else RunSection.seed
    inference = data.setdefault("inference", {})
    if isinstance(inference, dict) and inference.get("seed") is None:
        inference["seed"] = seed
    sections = {
        name: _build(_section_class(name), data.get(name), name, source) for name in SECTIONS
    }
    cfg = RunConfig(sections=sections, source=source)
    _check_sources(cfg)
    _check_batch(cfg)
    return cfg


def _check_batch(cfg: RunConfig) -> None:
    """The GRPO batch is valid on run.gpus processes, as TRL divides it (grpo_config.batch_plan)."""
    from rmlib.training.grpo_config import batch_plan, per_process

    try:
        batch_plan(per_process(cfg.grpo, cfg.run.gpus), cfg.run.gpus)
    except ValueError as e:
        raise ConfigError(f"{cfg.source}: 'grpo' on run.gpus = {cfg.run.gpus}: {e}") from None


def _check_sources(cfg: RunConfig) -> None:
    """Every dataset names a registered source (the registry lives with the loaders), and a
    source with no hub copy has a path (else 01 would fail on it, after nothing useful)."""
    from rmlib.data import get_source

    specs = {"data.train": cfg.data.train}
    specs.update({f"data.eval[{i}]": s for i, s in enumerate(cfg.data.eval)})
    for where, spec in specs.items():
        try:
            source = get_source(spec.source)
        except ValueError as e:
            raise ConfigError(f"{cfg.source}: '{where}.source': {e}") from None
        if source.path_required and spec.path is None:
            raise ConfigError(
                f"{cfg.source}: '{where}.path': source {source.name!r} has no hub copy; set "
                "path to a local copy (file or folder)"
            )


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a params file; `overrides` maps dotted keys ('mix.ratio') to values."""
    path = Path(path)
    try:
        data = read_yaml(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"params file not found: {path}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}: {_not_a_mapping(data)}")
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value)
    return config_from_dict(data, source=str(path))


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader without YAML 1.1's base-60 numbers: `4:1` (a ratio) stays the
    string '4:1' instead of becoming the int 241 (and `1:30.5` stays text, not 90.5)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        tag = super().resolve(kind, value, implicit)
        numeric = tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
        if kind is yaml.ScalarNode and implicit[0] and numeric and ":" in value:
            return "tag:yaml.org,2002:str"
        return tag


def read_yaml(text: str) -> Any:
    """A params file or a `--set` value, read as YAML (safe; base-60 numbers stay text)."""
    return yaml.load(text, Loader=_ParamsLoader)  # noqa: S506 - a SafeLoader subclass


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"cannot set '{key}': '{p}' is not a mapping")
    node[last] = value


def sweep_points(cfg: RunConfig) -> list[dict[str, Any]]:
    """The grid of a params file's `sweep:` mapping (dotted key → list of values), expanded."""
    for key, values in cfg.sweep.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{cfg.source}: 'sweep.{key}' must be a non-empty list of values")
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
