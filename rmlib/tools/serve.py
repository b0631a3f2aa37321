"""`rmlib serve --checkpoint`: vLLM servers for any checkpoint and adapters, without a run folder,
on the engine `rmlib judge` would start in process for the same model (the servers themselves:
`rmlib.generation.servers`; a run's models: `rmlib.run.backends.served`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rmlib.generation.backends import adapter_mode
from rmlib.generation.servers import ServeSpec, with_loras
from rmlib.generation.settings import GenerationSection, ModelSection
from rmlib.tools.judge import JudgeConfig, JudgeSection, engine_settings


def checkpoint_spec(
    model: str,
    *,
    served_name: str | None = None,
    adapters: Mapping[str, str] | None = None,
    precision: str = "auto",
    max_model_len: int | None = None,
    lora_rank: int | None = None,
    api_key: str | None = None,
    generation: GenerationSection | None = None,
) -> ServeSpec:
    """Servers for any checkpoint (a hub id, a local folder, an embedded model) without a run
    folder (`rmlib serve --checkpoint`): `model` under `served_name` (default: `model`) and
    `adapters` (served name -> folder), on the engine `rmlib judge` would start in process for
    the same model (rmlib.tools.judge.engine_settings: one home for both). precision: auto, fp32,
    bf16 or nf4 (served in bf16: rmlib.generation.vllm.vllm_dtype). max_model_len: longest
    prompt + completion (None: what a default `rmlib judge` call needs, the reflection prompt's
    budget + its completion). lora_rank: the adapters' largest LoRA rank (None: read from their
    adapter_config.json). generation: the engine's section (KV cache, batch sizes, and
    `adapters`: 'lora' serves the adapters by LoRA beside the base model; 'merged', or 'auto'
    without CUDA, serves one adapter merged into the base under the adapter's name, the base
    itself not served: one model per vLLM server). Default: GenerationSection's defaults."""
    cfg = JudgeConfig(
        model=ModelSection(backbone=model, precision=precision),
        generation=replace(generation or GenerationSection(), backend="vllm"),
    )
    lora = dict(adapters or {})
    if lora and adapter_mode(cfg.generation) == "merged":
        if len(lora) > 1 or served_name:
            raise ValueError(
                "adapters are served merged here (adapter mode 'merged', or 'auto' without "
                "CUDA: vLLM's CPU LoRA is several times slower), one model per server under the "
                "adapter's own name: give one adapter and no served name, or serve by LoRA "
                "(adapter mode 'lora')"
            )
        ((name, path),) = lora.items()
        cfg = replace(cfg, judge=JudgeSection(adapter=path))
        return ServeSpec(engine_settings(cfg, max_model_len=max_model_len), name, (), api_key)
    settings = with_loras(engine_settings(cfg, max_model_len=max_model_len), lora, lora_rank)
    return ServeSpec(settings, served_name or model, tuple(lora.items()), api_key)


def fit_max_model_len(model: str, max_model_len: int | None) -> tuple[int | None, str | None]:
    """`rmlib serve --checkpoint`'s context, fitted to the model's window (its config.json, read
    offline before any weights load): the default (a default `rmlib judge` call's) clipped to
    the window, with the line that says so; a --max-model-len over it refused in one line. An
    unknown window leaves it as it is."""
    from rmlib.generation.models import context_window

    window = context_window(model)
    if window is None:
        return max_model_len, None
    if max_model_len is not None:
        if max_model_len > window:
            raise ValueError(
                f"--max-model-len {max_model_len:,} exceeds {model}'s context window of "
                f"{window:,} tokens: give --max-model-len {window} or less"
            )
        return max_model_len, None
    need = JudgeConfig().context_tokens()
    if need <= window:
        return None, None
    return window, (
        f"{model} holds {window:,} tokens: served with --max-model-len {window} (a default "
        f"rmlib judge call needs {need:,}; against this server it clips its prompt budgets to "
        "the same window)"
    )
