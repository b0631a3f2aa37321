"""The `model` and `generation` sections of a params file: which weights, in which precision, and
who generates them with which engine settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator

from rmlib.config import PARAMS, Count, CountOrOff, OpenShare, Positive, Precision, doc
from rmlib.generation.registry import backend_names


def check_backend(name: str) -> str:
    """generation.backend names a registered backend (rmlib.generation.registry)."""
    names = [repr(n) for n in backend_names()]
    if name not in backend_names():
        allowed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise ValueError(f"Input should be {allowed}, got {name!r}")
    return name


# A value of generation.backend: the name of a registered backend
Backend = Annotated[str, AfterValidator(check_backend)]


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
    model_runner: Literal["auto", "v1", "v2"] = doc(
        "backend 'vllm' and 'served', GRPO's colocated engine (grpo.use_vllm) and `rmlib "
        "serve`: vLLM's model runner (VLLM_USE_V2_MODEL_RUNNER, set in every engine process). "
        "'auto': vLLM's choice (0.32: V2 wherever Triton imports, so every CUDA machine; V1 on "
        "CPU); 'v1': the older runner, if V2 fails on a model or feature; 'v2'.",
        "auto",
    )
    cpu_reserved_cores: CountOrOff | None = doc(
        "backend 'vllm' on CPU: cores left to the engine's scheduler process (None: vLLM's "
        "default, 1). 0 lets its worker compute on every core: on a 2-core machine 86 against "
        "57 tok/s measured (SmolLM2-135M, fp32).",
        0,
    )
    engine_in_process: bool | None = doc(
        "backend 'vllm': run vLLM's engine core and its worker in the calling process "
        "(VLLM_ENABLE_V1_MULTIPROCESSING=0) rather than in two processes of their own. None: in "
        "process on CPU, where each of those processes imports vLLM and torch again (an engine "
        "start took 16 s against 3 s in process on the Zen 4 class; the same samples, bit for "
        "bit, and the same speed), its own processes on CUDA, where the engine core schedules "
        "while the GPU computes; an exported VLLM_ENABLE_V1_MULTIPROCESSING is kept. Where "
        "another engine's distributed groups live in the process (TRL's colocated GRPO engine), "
        "it starts in processes of its own (rmlib.generation.vllm.other_engine_state).",
        None,
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
