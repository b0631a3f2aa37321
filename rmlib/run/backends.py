"""Where each run model's weights are (`ModelRef`: backbone or warmed base, adapter, precision)
and the stored generation backend that serves it: the in-process vLLM engine (adapters by
LoRARequest or merged), the transformers loop, or OpenAI-compatible servers; the vLLM engine
settings a `generation` section gives (`engine_settings`, a run's and a judge's alike) and the
one adapter merge (`merge_once`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rmlib.config import ConfigError
from rmlib.generation.settings import GenerationSection
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.models import MODELS, trained_models


@dataclass
class ModelRef:
    """Where one of the run's models lives: weights (+ an adapter) and how to load them."""

    name: str
    path: str
    adapter: str | None
    precision: str

    @property
    def identity(self) -> str:
        from rmlib.generation.models import model_identity

        return model_identity(self.path, precision=self.precision, adapter=self.adapter)


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


def backend(cfg: RunConfig, run: RunFolder, ref: ModelRef, *, with_adapters: bool = False):
    """(stored backend, tokenizer) for one model: every generation goes through the run's store.

    generation.backend 'vllm' serves it from the process's vLLM engine (adapters by LoRARequest
    on the base weights); 'hf' loads it here into our transformers loop; 'http' asks the
    configured servers for it (`served_model`) and loads only the tokenizer, to render prompts;
    'served' does the same over run.gpus servers of the run's models that rmlib.generation.servers starts
    when the store first misses (and stops at `rmlib.generation.servers.shutdown()` or the process's end).
    with_adapters: this process also serves the run's trained adapters (notebook 04), so the base
    model's vLLM engine enables LoRA and the adapters share it; off (notebook 02's rollouts), an
    engine for the base has no LoRA.
    """
    from rmlib.generation.store import CachedBackend, GenerationStore

    store = GenerationStore(run.path / cfg.generation.store)
    if cfg.generation.backend == "vllm":
        gen, tokenizer = _vllm_backend(cfg, ref, run, with_adapters)
    elif cfg.generation.backend == "served":
        gen, tokenizer = _served_backend(cfg, ref, run)
    else:
        make = {"http": _http_backend, "hf": _hf_backend}
        gen, tokenizer = make[cfg.generation.backend](cfg, ref)
    cached = CachedBackend(
        gen,
        store,
        chunk_prompts=cfg.generation.prompts_per_call(),
        progress=cfg.generation.progress,
    )
    return cached, tokenizer


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


def adapter_mode(cfg: RunConfig, on_cuda: bool | None = None) -> str:
    """How the vLLM backend serves trained adapters: 'lora' (LoRARequest) or 'merged'.
    on_cuda: the device it is for (None: this machine's; the dry run passes the planned card's)."""
    if cfg.generation.adapters != "auto":
        return cfg.generation.adapters
    if on_cuda is None:
        import torch

        on_cuda = torch.cuda.is_available()
    return "lora" if on_cuda else "merged"


def merged_checkpoint(run: RunFolder, ref: ModelRef) -> str:
    """ref's base + adapter merged into models/<name>-merged (made once per adapter)."""
    out = run.path / "models" / f"{ref.name}-merged"
    return merge_once(ref.path, str(ref.adapter), out, ref.identity, ref.precision)


def merge_once(
    base: str,
    adapter: str,
    out: Path,
    identity: str,
    precision: str,
    *,
    trust_remote_code: bool = False,
) -> str:
    """base + adapter merged into `out`, unless `out` already holds that merge.

    Written to a folder of its own beside `out` and renamed, with the identity (adapter
    fingerprint included) stamped in it: a retrained adapter is merged again, a killed merge
    never counts, and two processes merging the same adapter at once (two `rmlib judge` calls
    sharing the merge cache) each write their own folder; the first rename wins.
    """
    import shutil
    import tempfile

    from rmlib.training.sft import merge_adapter

    stamp = "rmlib_identity.txt"

    def done() -> bool:
        return (out / stamp).is_file() and (out / stamp).read_text() == identity

    if done():
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        dtype = "bf16" if precision == "bf16" else "fp32"
        merge_adapter(base, adapter, tmp, dtype=dtype, trust_remote_code=trust_remote_code)
        (tmp / stamp).write_text(identity)
        if not done():  # another process may have finished the same merge meanwhile
            shutil.rmtree(out, ignore_errors=True)  # an older merge (another identity)
            try:
                tmp.rename(out)
            except OSError:
                if not done():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(out)


def vllm_settings(cfg: RunConfig, path: str, precision: str, *, adapters: bool = False):
    """The vLLM engine settings of a run: with 'lora' adapters, one engine for the base model
    and all its adapters; with 'merged', one per model. adapters: the engine serves the run's
    trained adapters (LoRA on only then, and only in 'lora' mode)."""
    # known before the engine starts, so base and adapters share it: any trained model
    lora = adapters and bool(trained_models(cfg)) and adapter_mode(cfg) == "lora"
    return engine_settings(
        cfg.generation,
        model=path,
        precision=precision,
        max_model_len=context_tokens(cfg),
        seed=cfg.run.seed,
        lora_rank=cfg.grpo.lora_r if lora else None,
    )


def engine_settings(
    gen: GenerationSection,
    *,
    model: str,
    precision: str,
    max_model_len: int,
    seed: int,
    lora_rank: int | None = None,
):
    """vLLM engine settings from a `generation` section: a run's engines (`vllm_settings`) and
    a judge's (`rmlib.tools.judge.engine_settings`, also behind `rmlib serve --checkpoint`) come
    from here alike. lora_rank: LoRA on at that rank (None: off)."""
    import torch

    from rmlib.generation.vllm import EngineSettings, vllm_dtype

    dtype, quantization = vllm_dtype(precision)
    on_cuda = torch.cuda.is_available()
    return EngineSettings(
        model=model,
        dtype=dtype,
        quantization=quantization,
        max_model_len=max_model_len,
        enable_lora=lora_rank is not None,
        max_lora_rank=lora_rank or 16,
        gpu_memory_utilization=gen.gpu_memory_utilization,
        kv_cache_gib=gen.kv_cache_gib,
        max_num_batched_tokens=gen.max_num_batched_tokens,
        max_num_seqs=gen.max_num_seqs,
        enforce_eager=(not on_cuda) if gen.enforce_eager is None else gen.enforce_eager,
        seed=seed,
        cpu_reserved_cores=gen.cpu_reserved_cores,
    )


def _vllm_backend(cfg: RunConfig, ref: ModelRef, run: RunFolder, with_adapters: bool):
    from rmlib.generation.models import load_tokenizer, resolve_model
    from rmlib.generation.vllm import VLLMBackend, checkpoint_stop_ids, engine

    path, adapter, kind = resolve_model(ref.path), ref.adapter, "vllm"
    if adapter and adapter_mode(cfg) == "merged":
        path, adapter, kind = merged_checkpoint(run, ref), None, "vllm-merged"
    tokenizer = load_tokenizer(ref.path, trust_remote_code=cfg.model.trust_remote_code)
    settings = vllm_settings(cfg, path, ref.precision, adapters=with_adapters or bool(adapter))
    gen = VLLMBackend(
        lambda: engine(settings),  # started on the first generation the store cannot answer
        tokenizer,
        # its own samples: vLLM's RNG and kernels are not the transformers loop's, and a merged
        # model's numerics are not base + LoRA's
        identity=f"{kind}:{ref.identity}",
        stop_ids=checkpoint_stop_ids(path, tokenizer),
        adapter=adapter,
    )
    return gen, tokenizer


def served_model(cfg: RunConfig, name: str) -> str:
    """The name a vLLM/SGLang server serves run model `name` under."""
    default = cfg.model.backbone if name == "base" else name
    return str(cfg.generation.served_models.get(name, default))


def api_key(cfg: RunConfig) -> str | None:
    """The servers' API key: from the variable generation.api_key_env names and from nowhere
    else (None when it names none: no key is sent). A named variable that is unset or empty is
    refused, never made up for from another variable: that key may belong to another server."""
    name = cfg.generation.api_key_env
    if name is None:
        return None
    key = os.environ.get(name)
    if not key:
        raise ConfigError(
            f"{cfg.source}: 'generation.api_key_env' names the environment variable {name!r}, "
            f"which is unset or empty: export the servers' API key as {name}, or remove "
            "generation.api_key_env to send none"
        )
    return key


def _served_backend(cfg: RunConfig, ref: ModelRef, run: RunFolder):
    """The HTTP backend over servers of the run's models (base and every trained adapter, so
    notebook 04's models share them) started on the first generation the store cannot answer."""
    from rmlib.generation.servers import ServedBackend, run_spec

    served = served_model(cfg, ref.name)
    gen = ServedBackend(
        cfg,
        run,
        run_spec(cfg, run),
        # `rmlib serve` starts vLLM with raw log-probs (serve.py), so their kind is known
        make=lambda endpoints: _http_client(cfg, ref, endpoints, logprobs_kind="raw"),
        identity=_http_identity(served, ref),
    )
    return gen, _http_tokenizer(cfg, ref)


def _http_identity(served: str, ref: ModelRef) -> str:
    # the served name alone does not say which weights: keep the local identity in it
    return f"http:{served}:{ref.identity}"


def _http_backend(cfg: RunConfig, ref: ModelRef):
    return _http_client(cfg, ref, cfg.generation.endpoints), _http_tokenizer(cfg, ref)


def _http_tokenizer(cfg: RunConfig, ref: ModelRef):
    from rmlib.generation.http import ChatMessagesTokenizer
    from rmlib.generation.models import load_tokenizer

    tokenizer = load_tokenizer(ref.path, trust_remote_code=cfg.model.trust_remote_code)
    # the chat API takes messages: prompts are built as chat envelopes, counted as rendered
    return ChatMessagesTokenizer(tokenizer) if cfg.generation.http_api == "chat" else tokenizer


def _http_client(
    cfg: RunConfig, ref: ModelRef, endpoints: list[str], *, logprobs_kind: str | None = None
):
    served = served_model(cfg, ref.name)
    return http_client(
        cfg.generation,
        endpoints,
        served,
        identity=_http_identity(served, ref),
        api_key=api_key(cfg),
        context_tokens=context_tokens(cfg),
        logprobs_kind=logprobs_kind,
    )


def http_client(
    g: GenerationSection,
    endpoints: list[str],
    served: str,
    *,
    identity: str,
    api_key: str | None,
    context_tokens: int | None,
    logprobs_kind: str | None = None,
):
    """The HTTP backend of a generation section's http_* settings (a run's or a judge's):
    `served` is the model name the servers answer to, `identity` keys the store."""
    from rmlib.generation.http import HTTPBackend, HTTPTimeouts

    return HTTPBackend(
        endpoints,
        served,
        identity=identity,
        concurrency=g.http_concurrency,
        timeouts=HTTPTimeouts(
            connect=g.http_connect_timeout,
            read=g.http_read_timeout,
            probe=g.http_probe_timeout,
            write=g.http_write_timeout,
            pool=g.http_pool_timeout,
            max_retries=g.http_max_retries,
        ),
        api_key=api_key,
        progress=g.progress,
        context_tokens=context_tokens,
        api=g.http_api,
        logprobs_kind=logprobs_kind or g.http_logprobs_kind,
        vllm_extras=g.http_vllm_extras,
    )


def _hf_backend(cfg: RunConfig, ref: ModelRef):
    from rmlib.generation.hf import HFBackend
    from rmlib.generation.models import load_backbone

    model, tokenizer = load_backbone(
        ref.path,
        precision=ref.precision,
        adapter=ref.adapter,
        trust_remote_code=cfg.model.trust_remote_code,
    )
    hf = HFBackend(
        model,
        tokenizer,
        identity=ref.identity,
        max_batch_tokens=cfg.generation.max_batch_tokens,
        max_batch_size=cfg.generation.max_batch_size,
        progress=cfg.generation.progress,
    )
    return hf, tokenizer
