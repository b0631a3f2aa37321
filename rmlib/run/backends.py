"""A run's models on the generation backends: where each model's weights are (`ModelRef`:
backbone or warmed base, adapter, precision), the stored backend serving it (built by the one
builder, `rmlib.generation.backends.build_backend`, from the run's `generation` section and the
model's weights), the context the run's generations need, and the servers of a run's models
(`rmlib serve PARAMS`, generation.backend 'served').
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rmlib.generation import backends as gb
from rmlib.generation import servers
from rmlib.generation.registry import Needs, Weights
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import MODELS, adapter_exists, trained_models


@dataclass
class ModelRef:
    """Where one of the run's models lives: weights (+ an adapter) and how to load them."""

    name: str
    path: str
    adapter: str | None
    precision: str


def base_path(cfg: RunConfig, run: RunFolder) -> str:
    """The base model: the warmed-up checkpoint when the profile has a warm-up, else backbone."""
    if cfg.warmup.enabled:
        merged = run.path / "models" / "base"
        if not (merged / "config.json").exists():
            raise FileNotFoundError(
                f"{merged} is missing: the format warm-up (notebook 02_rollouts) has not run"
            )
        return str(merged)
    return cfg.model.backbone


def model_ref(cfg: RunConfig, run: RunFolder, name: str) -> ModelRef:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; one of {MODELS}")
    adapter = None
    if name != "base":
        adapter_dir = run.adapter_dir(name)
        if not (adapter_dir / "adapter_config.json").exists():
            raise FileNotFoundError(
                f"{adapter_dir} holds no adapter: train '{name}' first (notebook 03_training)"
            )
        adapter = str(adapter_dir)
    from rmlib.generation.models import resolve_precision

    precision, _ = resolve_precision(cfg.model.precision)
    return ModelRef(name, base_path(cfg, run), adapter, precision)


def weights(cfg: RunConfig, run: RunFolder, ref: ModelRef) -> Weights:
    """A run model's weights as the backend builder takes them: served under its served name,
    its adapter merged (adapter mode 'merged') into models/<model>-merged."""
    return Weights(
        checkpoint=ref.path,
        precision=ref.precision,
        adapter=ref.adapter,
        served_name=served_model(cfg, ref.name),
        trust_remote_code=cfg.model.trust_remote_code,
        merge_into=run.path / "models" / f"{ref.name}-merged",
    )


def backend(cfg: RunConfig, run: RunFolder, ref: ModelRef, *, with_adapters: bool = False):
    """(stored backend, tokenizer) for one model: every generation goes through the run's store.

    generation.backend 'vllm' serves it from the process's vLLM engine (adapters by LoRARequest
    on the base weights, or merged); 'hf' loads it here into our transformers loop; 'http' asks
    the configured servers for it (`served_model`) and loads only the tokenizer, to render
    prompts; 'served' does the same over run.gpus servers of the run's models, started when the
    store first misses (and stopped at `rmlib.generation.servers.shutdown()` or the process's
    end). with_adapters: this process also serves the run's trained adapters (notebook 04), so
    the base model's vLLM engine enables LoRA and the adapters share it; off (notebook 02's
    rollouts), an engine for the base has no LoRA.
    """
    needs = Needs(
        context_tokens=context_tokens(cfg),
        seed=cfg.run.seed,
        lora_rank=_lora_rank(cfg, with_adapters or ref.adapter is not None),
        servers=lambda: servers.running(
            run_spec(cfg, run),
            server_count(cfg),
            run.path / "serve",
            cfg.generation.serve_start_timeout,
        ),
        source=cfg.source,
    )
    store = run.path / cfg.generation.store
    return gb.build_backend(cfg.generation, weights(cfg, run, ref), store, needs)


def _lora_rank(cfg: RunConfig, adapters: bool) -> int | None:
    """The LoRA rank of a run's vLLM engine: with 'lora' adapters one engine serves the base model
    and all its adapters (LoRA on, at the trained rank, known before the engine starts so base
    and adapters share it); with 'merged', one engine per model, without LoRA."""
    lora = adapters and bool(trained_models(cfg)) and gb.adapter_mode(cfg.generation) == "lora"
    return cfg.grpo.lora_r if lora else None


def vllm_settings(cfg: RunConfig, path: str, precision: str, *, adapters: bool = False) -> Any:
    """The vLLM engine settings of a run's model at `path`. adapters: the engine serves the run's
    trained adapters (LoRA on only then, and only in 'lora' mode)."""
    return gb.engine_settings(
        cfg.generation,
        model=path,
        precision=precision,
        max_model_len=context_tokens(cfg),
        seed=cfg.run.seed,
        lora_rank=_lora_rank(cfg, adapters),
    )


def max_new_tokens(cfg: RunConfig) -> int:
    """The longest generation any step of the run asks for (rollouts, judgments, reflections)."""
    return max(
        cfg.rollouts.max_new_tokens,
        cfg.inference.max_new_tokens,
        cfg.inference.reflection_max_new_tokens,
    )


def context_tokens(cfg: RunConfig) -> int:
    """The context a run's generations need: the longest prompt budget (stage 2's reflection
    prompts pass here too) + the longest generation. An engine's or server's max_model_len must
    hold it."""
    return cfg.prompts.longest_prompt_tokens() + max_new_tokens(cfg)


def served_model(cfg: RunConfig, name: str) -> str:
    """The name a vLLM/SGLang server serves run model `name` under."""
    default = cfg.model.backbone if name == "base" else name
    return str(cfg.generation.served_models.get(name, default))


def api_key(cfg: RunConfig) -> str | None:
    """The run's servers' API key (`rmlib.generation.backends.api_key`: the rule)."""
    return gb.api_key(cfg.generation, cfg.source)


def run_spec(
    cfg: RunConfig,
    run: RunFolder,
    *,
    models: Sequence[str] | None = None,
    adapters: Mapping[str, str] | None = None,
) -> servers.ServeSpec:
    """The servers of a run: its base model (the warmed-up checkpoint when the profile has a
    warm-up) under its served name, and adapters under theirs (rmlib.run.backends.served_model).

    models: the run's models to serve (default: base and every trained model whose adapter
    exists). adapters: more adapters, served name -> folder (e.g. one trained elsewhere).
    """
    from rmlib.generation.models import resolve_model, resolve_precision

    if models is None:
        models = ["base", *(m for m in trained_models(cfg) if adapter_exists(run, m))]
    lora: dict[str, str] = {}
    for name in models:
        if name != "base":
            lora[served_model(cfg, name)] = str(model_ref(cfg, run, name).adapter)
        elif name not in MODELS:
            raise ValueError(f"unknown model {name!r}; one of {MODELS}")
    lora.update(adapters or {})
    precision, _ = resolve_precision(cfg.model.precision)
    engine = vllm_settings(cfg, resolve_model(base_path(cfg, run)), precision)
    settings = servers.with_loras(engine, lora)
    return servers.ServeSpec(
        engine=settings,
        served_name=served_model(cfg, "base"),
        adapters=tuple(lora.items()),
        api_key=api_key(cfg),
    )


def server_count(cfg: RunConfig) -> int:
    """How many servers a run starts: one per GPU (run.gpus)."""
    return cfg.run.gpus


@contextlib.contextmanager
def served(
    cfg: RunConfig,
    run: RunFolder,
    *,
    count: int | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    models: Sequence[str] | None = None,
    adapters: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Iterator[servers.Servers]:
    """Servers for a run's models while the block runs (`.endpoints`: their base URLs).

    count: servers (default run.gpus: one per GPU; on CPU that many, on their own cores).
    timeout: seconds they may take to answer (default generation.serve_start_timeout). Logs
    go to <run>/serve/."""
    spec = run_spec(cfg, run, models=models, adapters=adapters)
    started = servers.start_servers(
        spec,
        count or server_count(cfg),
        host=host,
        port=port,
        log_dir=run.path / "serve",
        timeout=cfg.generation.serve_start_timeout if timeout is None else timeout,
    )
    with started:
        yield started
