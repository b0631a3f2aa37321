"""The one builder of a generation backend (`build_backend`) and the makers of the registered
backends: vLLM's engine in this process, the transformers loop, OpenAI-compatible servers, and
vLLM servers a run starts. A run's models (rmlib.run.backends), `rmlib judge`, the reward
functions and `rmlib serve --checkpoint` all build through here, from a `generation` section and
the weights, never from a whole run config.

Each maker imports its engine when called (torch, vLLM, openai): importing this module is cheap.
Also here, because every vLLM engine and server is built from them: the engine settings of a
`generation` section (`engine_settings`), how adapters are served (`adapter_mode`), and the one
adapter merge (`merge_once`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from rmlib.config import ConfigError
from rmlib.generation.registry import BACKENDS, Needs, Weights, register
from rmlib.generation.settings import GenerationSection
from rmlib.generation.store import CachedBackend, GenerationStore


def build_backend(
    gen: GenerationSection, weights: Weights, store: str | Path, needs: Needs
) -> tuple[CachedBackend, Any]:
    """(stored backend, tokenizer) for `weights` on the backend `gen.backend` names: every
    generation goes through the SQLite store at `store` first. Engines, merges and server
    handshakes wait for the first generation the store cannot answer."""
    gen_backend, tokenizer = BACKENDS[gen.backend].maker(gen, weights, needs)
    cached = CachedBackend(
        gen_backend,
        GenerationStore(store),
        chunk_prompts=gen.prompts_per_call(),
        progress=gen.progress,
    )
    return cached, tokenizer


def adapter_mode(gen: GenerationSection, on_cuda: bool | None = None) -> str:
    """How the vLLM backend serves an adapter: 'lora' (LoRARequest) or 'merged'.
    on_cuda: the device it is for (None: this machine's; the dry run passes the planned card's)."""
    if gen.adapters != "auto":
        return gen.adapters
    if on_cuda is None:
        import torch

        on_cuda = torch.cuda.is_available()
    return "lora" if on_cuda else "merged"


def api_key(gen: GenerationSection, source: str = "params") -> str | None:
    """The servers' API key: from the variable generation.api_key_env names and from nowhere
    else (None when it names none: no key is sent). A named variable that is unset or empty is
    refused, never made up for from another variable: that key may belong to another server."""
    name = gen.api_key_env
    if name is None:
        return None
    key = os.environ.get(name)
    if not key:
        raise ConfigError(
            f"{source}: 'generation.api_key_env' names the environment variable {name!r}, "
            f"which is unset or empty: export the servers' API key as {name}, or remove "
            "generation.api_key_env to send none"
        )
    return key


def engine_settings(
    gen: GenerationSection,
    *,
    model: str,
    precision: str,
    max_model_len: int,
    seed: int,
    lora_rank: int | None = None,
) -> Any:
    """vLLM engine settings from a `generation` section: every engine in a process and behind
    `rmlib serve` comes from here. lora_rank: LoRA on at that rank (None: off)."""
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
        model_runner=gen.model_runner,
        in_process=engine_in_process(gen.engine_in_process, on_cuda),
    )


def engine_in_process(asked: bool | None, on_cuda: bool) -> bool | None:
    """Whether an engine runs in the calling process (GenerationSection.engine_in_process):
    what was asked; else in process on CPU, unless VLLM_ENABLE_V1_MULTIPROCESSING is exported
    (None: vLLM reads it)."""
    from rmlib.generation.vllm import MULTIPROCESSING_ENV

    if asked is not None:
        return asked
    return None if on_cuda or MULTIPROCESSING_ENV in os.environ else True


def vllm_engine_settings(gen: GenerationSection, weights: Weights, needs: Needs) -> Any:
    """The vLLM engine that serves `weights` (merged, or with LoRA at `needs.lora_rank`, else at
    the adapter's own rank): the in-process backend's and `rmlib serve --checkpoint`'s alike.
    Merges the adapter when the adapter mode merges (once: `merged_checkpoint`)."""
    from rmlib.generation.vllm import adapter_rank

    assert weights.precision is not None and needs.context_tokens is not None
    path, lora = vllm_weights(gen, weights)
    return engine_settings(
        gen,
        model=path,
        precision=weights.precision,
        max_model_len=needs.context_tokens,
        seed=needs.seed,
        lora_rank=needs.lora_rank or (adapter_rank(lora) if lora else None),
    )


def vllm_weights(gen: GenerationSection, weights: Weights) -> tuple[str, str | None]:
    """(checkpoint folder a vLLM engine loads, adapter it serves by LoRA or None): with an
    adapter in 'merged' mode (adapter_mode), the merge, made once (`merged_checkpoint`)."""
    from rmlib.generation.models import resolve_model

    if weights.adapter is None or adapter_mode(gen) != "merged":
        return resolve_model(weights.checkpoint), weights.adapter
    return merged_checkpoint(weights), None


def merged_checkpoint(weights: Weights) -> str:
    """weights' checkpoint + adapter merged into one checkpoint, made once: in `merge_into`
    (a run's models/<model>-merged), else in the model cache, <RMLIB_CACHE>/merged/<key> (delete
    the folder to reclaim its space), keyed by the base checkpoint's absolute path and files
    (sizes, times) and the adapter's content. vLLM's CPU LoRA ops gather every token's LoRA
    weights: measured here (SmolLM2-135M, 8 RewardBench judgments of 128 tokens) LoRA took
    179 s against 79 s without an adapter."""
    from rmlib.generation.models import cache_dir, model_identity, resolve_model

    assert weights.adapter is not None and weights.precision is not None
    path = resolve_model(weights.checkpoint)
    if weights.merge_into is not None:
        out, identity = weights.merge_into, weights.identity
    else:
        # the identity of a local checkpoint holds its files' names, sizes and times
        base = Path(path).resolve()
        identity = model_identity(str(base), precision=weights.precision, adapter=weights.adapter)
        out = cache_dir() / "merged" / hashlib.sha256(identity.encode()).hexdigest()[:16]
    return merge_once(
        path,
        weights.adapter,
        out,
        identity,
        weights.precision,
        trust_remote_code=weights.trust_remote_code,
    )


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
    from rmlib.generation.models import merge_adapter

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


# ---------------------------------------------------------------- the registered backends


@register("hf", who="the transformers decode loop", engine="transformers")
def _hf(gen: GenerationSection, weights: Weights, needs: Needs) -> tuple[Any, Any]:
    from rmlib.generation.hf import HFBackend
    from rmlib.generation.models import load_backbone

    assert weights.precision is not None
    model, tokenizer = load_backbone(
        weights.checkpoint,
        precision=weights.precision,  # type: ignore[arg-type]
        adapter=weights.adapter,
        trust_remote_code=weights.trust_remote_code,
    )
    backend = HFBackend(
        model,
        tokenizer,
        identity=weights.identity,
        max_batch_tokens=gen.max_batch_tokens,
        max_batch_size=gen.max_batch_size,
        progress=gen.progress,
    )
    return backend, tokenizer


@register("vllm", who="vLLM's engine in this process")
def _vllm(gen: GenerationSection, weights: Weights, needs: Needs) -> tuple[Any, Any]:
    from rmlib.generation.models import load_tokenizer, resolve_model
    from rmlib.generation.vllm import VLLMBackend, checkpoint_stop_ids, engine, require_vllm

    require_vllm(f"{needs.source}: generation backend 'vllm'")
    assert weights.precision is not None and needs.context_tokens is not None
    merged = weights.adapter is not None and adapter_mode(gen) == "merged"
    tokenizer = load_tokenizer(weights.checkpoint, trust_remote_code=weights.trust_remote_code)

    backend = VLLMBackend(
        # settings (and a merge) on the first sample the store cannot answer
        lambda: engine(vllm_engine_settings(gen, weights, needs)),
        tokenizer,
        # its own samples: vLLM's RNG and kernels are not the transformers loop's, and a merged
        # model's numerics are not base + LoRA's
        identity=f"{'vllm-merged' if merged else 'vllm'}:{weights.identity}",
        stop_ids=checkpoint_stop_ids(resolve_model(weights.checkpoint), tokenizer),
        adapter=None if merged else weights.adapter,
    )
    return backend, tokenizer


@register(
    "http",
    who="OpenAI-compatible servers (generation.endpoints)",
    engine="remote",
    servers=True,
)
def _http(gen: GenerationSection, weights: Weights, needs: Needs) -> tuple[Any, Any]:
    return http_client(gen, weights, needs, gen.endpoints), http_tokenizer(gen, weights)


@register(
    "served",
    who="vLLM servers the run starts, one a GPU (rmlib serve)",
    servers=True,
    run_only=True,
)
def _served(gen: GenerationSection, weights: Weights, needs: Needs) -> tuple[Any, Any]:
    """The HTTP backend over servers started on the first generation the store cannot answer
    (`needs.servers`: a run's). Its identity is the 'http' backend's for the same weights, so
    samples from servers a user started with `rmlib serve` and from these are the same."""
    from rmlib.generation.servers import ServedBackend

    if needs.servers is None:
        raise ConfigError(
            f"{needs.source}: generation.backend 'served' starts servers for a run's models: "
            "use 'http' with the servers' endpoints here"
        )
    # `rmlib serve` starts vLLM with raw log-probs (rmlib.generation.servers), so their kind is
    # known
    raw = replace(needs, logprobs_kind="raw")
    backend = ServedBackend(
        needs.servers,
        make=lambda endpoints: http_client(gen, weights, raw, endpoints),
        identity=http_identity(weights),
    )
    return backend, http_tokenizer(gen, weights)


def http_identity(weights: Weights) -> str:
    """The store's key of a served model: the served name alone does not say which weights, so
    the local identity is kept in it where the weights are known."""
    served = weights.served_name or weights.checkpoint
    return f"http:{served}:{weights.identity}" if weights.identity else f"http:{served}"


def http_tokenizer(gen: GenerationSection, weights: Weights) -> Any:
    """The tokenizer that renders and counts prompts for servers: the chat API takes messages,
    so prompts are built as chat envelopes, counted as rendered."""
    from rmlib.generation.http import ChatMessagesTokenizer
    from rmlib.generation.models import load_tokenizer

    tokenizer = load_tokenizer(weights.checkpoint, trust_remote_code=weights.trust_remote_code)
    return ChatMessagesTokenizer(tokenizer) if gen.http_api == "chat" else tokenizer


def http_client(gen: GenerationSection, weights: Weights, needs: Needs, endpoints: list[str]):
    """The HTTP backend of a generation section's http_* settings over `endpoints`."""
    from rmlib.generation.http import HTTPBackend, HTTPTimeouts

    return HTTPBackend(
        endpoints,
        weights.served_name or weights.checkpoint,
        identity=http_identity(weights),
        concurrency=gen.http_concurrency,
        timeouts=HTTPTimeouts(
            connect=gen.http_connect_timeout,
            read=gen.http_read_timeout,
            probe=gen.http_probe_timeout,
            write=gen.http_write_timeout,
            pool=gen.http_pool_timeout,
            max_retries=gen.http_max_retries,
        ),
        api_key=needs.api_key if needs.api_key is not None else api_key(gen, needs.source),
        extra_body=needs.extra_body,
        progress=gen.progress,
        context_tokens=needs.context_tokens,
        api=gen.http_api,
        logprobs_kind=needs.logprobs_kind or gen.http_logprobs_kind,
        vllm_extras=gen.http_vllm_extras,
    )
