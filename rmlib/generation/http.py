"""An OpenAI-compatible completions client: the scale-out backend (vLLM, SGLang servers).

`HTTPBackend` implements the same `Backend` protocol as the transformers backend, so it goes
through the same `CachedBackend` and generation store: every sample is committed as its chunk
finishes, and an interrupted evaluation resumes with only the missing samples.

Transport: the `openai` package's `AsyncOpenAI`, one client per endpoint, with the client's own
retries and timeouts. A call sends all its requests at once, up to `concurrency` in flight over
all endpoints (a server batches only what it has been sent: give it a few hundred, at least its
`--max-num-seqs`, so its queue never runs dry), collects the answers as they arrive and returns
when the last is in; CachedBackend then commits the chunk and sends the next. A chunk's last
requests leave the server under-filled, so keep chunks (generation.chunk_prompts: 512 prompts)
several times the concurrency. The clients live on one event loop in a private thread, not on
the caller's: a Jupyter cell, whose own loop is already running, calls `generate` as a script
does, and connections stay open from one call to the next.

What it sends (POST `<endpoint>/v1/completions`, one prompt per request): the rendered prompt,
`max_tokens`, and every sampling setting explicitly (`temperature`, `top_p`, `top_k` with -1 =
off), because vLLM otherwise fills unset ones from the checkpoint's generation_config.json (Qwen3:
temperature 0.6, top-k 20, top-p 0.95); `logprobs` (the chosen token's log-prob per generated
token); `seed`; and `extra_body` (default `VLLM_EXTRAS`: token ids instead of token strings, and
no special tokens added to the already-rendered prompt, as our tokenizer calls do).

Seeds and reproducibility (`seed_mode`):
- "per_sample" (default): one request per sample with n = 1 and seed =
  `rmlib.generation.base.sample_seed(params.seed, prompt, i)`, so sample i depends only on (seed,
  prompt, params, i), as the contract asks: asking for samples 4..7 later gives what 0..7 at once
  gave. The server's automatic prefix caching (vLLM, SGLang) prefills the prompt once for its n
  requests. Reproducible up to the server's batch numerics: a request's logits can change in the
  last bits with what else the server batches, which can flip a near-tied draw (the same caveat
  as any batched backend).
- "server_n": one request per prompt with `n` and seed = sample_seed(params.seed, prompt,
  offset). Fewer requests, but the samples then depend on (offset, n): samples 4..7 asked for
  later are not those of one 0..7 request. Use only when all samples are asked for at once.
Greedy (`do_sample=False`): one request at temperature 0 per prompt, copied to the n samples.
The draws are the server's own (not our Gumbel-max), so the same seed gives different tokens
than `HFBackend`: give this backend its own `identity` (default `"http:<model>"`).

Log-probabilities: the contract wants the raw temperature-1 distribution's (method.md §4). What a
server returns depends on its configuration, not on this client:
- vLLM (V1): `--logprobs-mode raw_logprobs` returns log-probs before temperature and top-k/top-p
  (its default in current versions; say it explicitly); `processed_logprobs` would return those
  of the tempered, filtered sampling distribution.
- SGLang: returns the sampling distribution's log-probs (after temperature) unless started with
  the environment variable `SGLANG_RETURN_ORIGINAL_LOGPROB=1`.
At temperature 1 without top-k/top-p (the paper's stage 1) and in greedy stage 2, where nothing is
applied before the chosen token's log-prob, both agree anyway.

Serving Qwen3-4B with a trained adapter (ADAPTER = outputs/<run>/adapters/unified; check the
flags against your server version):

    vllm serve Qwen/Qwen3-4B --dtype bfloat16 --max-model-len 9216 \
        --enable-lora --max-lora-rank 16 --lora-modules unified=ADAPTER \
        --logprobs-mode raw_logprobs --generation-config vllm --port 8000 \
        [--tensor-parallel-size 2 | --data-parallel-size 2]
    -> HTTPBackend("http://host:8000", "unified")       (the base model: "Qwen/Qwen3-4B")

    SGLANG_RETURN_ORIGINAL_LOGPROB=1 python -m sglang.launch_server \
        --model-path Qwen/Qwen3-4B --context-length 9216 \
        --enable-lora --max-lora-rank 16 --lora-paths unified=ADAPTER --port 30000 \
        [--tp-size 2 | --dp-size 2]
    -> HTTPBackend("http://host:30000", "Qwen/Qwen3-4B:unified")   (SGLang's base:adapter)

`--max-model-len` (SGLang: `--context-length`) must hold the run's longest prompt budget + its
longest generation (`rmlib.run.backends.context_tokens`; 9,216 = a reflection prompt's 8,192 + 1,024
new tokens in the paper profile): a `context_tokens` the server's reported length cannot hold is
refused before the first request. `--generation-config vllm` keeps the checkpoint's sampling
defaults out (we send every setting anyway). Several servers (one per GPU) are listed as several
endpoints. Prefix caching, on by default in both, is what makes the per-sample requests and one
pair's reflection prompts cheap.

A server started with `--api-key KEY` (vLLM, SGLang) wants that key as a Bearer token: pass
`api_key` (a run reads it from the variable generation.api_key_env names). Without one the
placeholder "EMPTY" is sent, never `OPENAI_API_KEY`: a key goes only where it was given for. A
server's error page may echo the request's headers: every error text is stripped of the key.

Timeouts (`HTTPTimeouts`, one per phase of a request): a request is not streamed, so the server
sends nothing until its completion is whole, and the read timeout bounds the whole generation of
one request (its wait in the server's queue included), not only a silence: 600 s by default, as
a full batch of long judgments on a small card can take minutes. A hang is caught earlier: before
its first completion the backend asks each server for its model list (the handshake, with the
short `probe` read timeout), so a server that accepts connections and never answers is named
within 2 minutes (100.5 s: `HTTPTimeouts.first_error_seconds`), where 600 s x 6 attempts made a
run wait an hour before; with several endpoints, one that is down is a notice and the others take
its requests. rmlib.run.config's generation.http_* parameters say why each number.

Chat completions (`api="chat"`), for servers without a completions endpoint (hosted APIs, some
gateways): each prompt is then a *chat envelope*, not rendered text: `chat_prompt(messages,
chat_template_kwargs)`, which `ChatMessagesTokenizer` makes where the judge renders its prompts
(it wraps the judge's own tokenizer, so the prompt budgets still count the tokens the server's
template will produce). The request is POST `<endpoint>/v1/chat/completions` with the messages,
`logprobs: true` and `top_logprobs` (the `logprobs` setting), the same explicit sampling fields,
and `chat_template_kwargs` (e.g. `enable_thinking`) in `extra_body`. Per-token log-probs come
from `choices[].logprobs.content`; a server that returns none is refused with one line naming the
endpoint (log-probs are the confidence and the soft reward: a judge without them is not one this
method can use). The generation store keys on the envelope, so a chat judgment and a completions
judgment of the same pair are different stored samples.

Which log-probs (`logprobs_kind`): no OpenAI-compatible server says in its answer whether its
log-probs are raw or processed (vLLM's `--logprobs-mode` is a server flag, reported nowhere in
a completion), so the caller declares what the server was started with: "raw" (vLLM
`raw_logprobs`, SGLang with SGLANG_RETURN_ORIGINAL_LOGPROB=1), "processed" (vLLM
`processed_logprobs`, SGLang's default, most hosted APIs), or "unknown" (default). Every
generation records it in `Generation.meta["logprobs_kind"]`, and judgment tables carry it on.

Errors: the openai client retries connection errors, timeouts and HTTP 408/409/429/5xx itself,
with exponential backoff (0.5 s doubling to 8 s, jittered; a `Retry-After` of up to 2 minutes
honoured) up to `max_retries` times (default 1); a request that still fails moves on to the next
endpoint (each endpoint once; one that failed so in the last minute is tried last), and after the
last `HTTPBackendError` says what failed and how often. A 404 or 400 whose message is about the
model or adapter raises `ModelNotServedError` at once, naming the model and the models the server
does serve (see above for how adapters are named). A 401/403 says the server wants an API key.
Any other 4xx raises `HTTPBackendError` at once (retrying a bad request cannot help). Every error
names the endpoint's URL and the model.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import warnings
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

import httpx2
import openai
from openai import _constants as openai_constants
from openai.types import Completion, CompletionChoice
from openai.types.chat import ChatCompletion
from openai.types.chat.chat_completion import Choice as ChatChoice

from rmlib.generation.base import Generation, SamplingParams, sample_seed
from rmlib.generation.settings import GenerationSection

SeedMode = Literal["per_sample", "server_n"]
Api = Literal["completions", "chat"]
LogprobsKind = Literal["raw", "processed", "unknown"]
LOGPROBS_KINDS: tuple[str, ...] = ("raw", "processed", "unknown")
# The prefix of a chat envelope: a prompt that is JSON messages for the chat API, not rendered text
CHAT_PROMPT_PREFIX = "rmlib-chat-v1:"
# vLLM request extensions: token ids as "token_id:<id>" strings in `logprobs.tokens`, and the
# rendered prompt tokenized as is (the chat template already holds the special tokens).
VLLM_EXTRAS: dict[str, Any] = {"return_tokens_as_token_ids": True, "add_special_tokens": False}
_TOKEN_ID_PREFIX = "token_id:"
_DOWN_SECONDS = 60.0  # an endpoint that failed for good is tried last for this long
# The HTTP requests the current task's completions request has sent (first try and retries):
# set per request, counted by the clients' request hook, which runs in the task that sends.
_ATTEMPTS: ContextVar[list[int] | None] = ContextVar("rmlib_http_attempts", default=None)
T = TypeVar("T")


def _run_default(name: str) -> Any:
    """A generation.http_* parameter's default: rmlib.run.config documents the numbers and why."""
    return GenerationSection.__dataclass_fields__[f"http_{name}"].default


@dataclass(frozen=True)
class HTTPTimeouts:
    """Seconds each phase of one HTTP request may take (httpx's connect, read, write, pool), and
    the openai client's retries of a failed request per endpoint; `probe`: the read timeout of
    the model list asked at the handshake. The defaults are a run's (generation.http_*;
    rmlib.run.config says why each number): a server that accepts and never answers is named within
    `first_error_seconds()` <= 120 s, a completion may take up to `worst_case_seconds()`."""

    connect: float = _run_default("connect_timeout")
    read: float = _run_default("read_timeout")
    probe: float = _run_default("probe_timeout")
    write: float = _run_default("write_timeout")
    pool: float = _run_default("pool_timeout")
    max_retries: int = _run_default("max_retries")

    def __post_init__(self) -> None:
        if min(self.connect, self.read, self.probe, self.write, self.pool) <= 0 or (
            self.max_retries < 0
        ):
            raise ValueError(f"timeouts must be > 0 and max_retries >= 0, got {self}")

    def httpx(self, read: float | None = None) -> httpx2.Timeout:
        read = self.read if read is None else read
        return httpx2.Timeout(connect=self.connect, read=read, write=self.write, pool=self.pool)

    def worst_case_seconds(self, endpoints: int = 1, read: float | None = None) -> float:
        """The longest a request can take to fail: every attempt on every endpoint spends each
        phase's whole timeout (`read`: the read timeout, default a completion's), plus the
        client's longest backoff before each retry (a Retry-After header, which a hung server
        does not send, can add up to 2 minutes)."""
        attempt = self.connect + self.write + self.pool + (self.read if read is None else read)
        backoff = sum(
            min(openai_constants.INITIAL_RETRY_DELAY * 2**k, openai_constants.MAX_RETRY_DELAY)
            for k in range(self.max_retries)
        )
        return endpoints * (attempt * (self.max_retries + 1) + backoff)

    def first_error_seconds(self, endpoints: int = 1) -> float:
        """The longest a server that hangs from the start keeps a run waiting: the handshake's
        model list fails first, on each endpoint in turn."""
        return self.worst_case_seconds(endpoints, read=min(self.probe, self.read))

    def describe(self) -> str:
        return (
            f"timeouts: connect {self.connect:g}s, read {self.read:g}s; "
            f"{self.max_retries} retries per endpoint"
        )


class HTTPBackendError(RuntimeError):
    """A request to an OpenAI-compatible server failed for good (after retries, or at once)."""


class ModelNotServedError(HTTPBackendError):
    """The server does not serve the requested model or adapter name."""


class ServerUnreachableError(HTTPBackendError):
    """A server that cannot be connected to, or does not answer within the timeouts."""


class ContextTooShortError(HTTPBackendError):
    """The server's context (max_model_len) cannot hold the longest prompt + generation asked."""


@dataclass
class HTTPStats:
    """HTTP requests sent (retries and model lists included) and retried; tokens the server
    reported; wall time."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class _Job:
    """One completions request: prompt index, the sample indices its choices fill, its fields."""

    prompt: int
    samples: tuple[int, ...]
    request: dict[str, Any]


class HTTPBackend:
    """Backend over one or several OpenAI-compatible completions servers serving `model`.

    endpoints: base URLs (`http://host:8000` or `http://host:8000/v1`), used round-robin, a
    request that fails for good on one moving on to the next. model: the served model name, or a
    LoRA adapter's served name. identity: what the generation store keys on; the default
    `"http:<model>"` is only a name, so pass the served weights' identity
    (`rmlib.generation.models.model_identity(base, precision=..., adapter=DIR)` hashes the adapter)
    lest an adapter retrained and served under the same name reuse the old one's stored generations.
    Wrap it in a CachedBackend with large `chunk_prompts` (hundreds): each chunk waits for its
    slowest request. concurrency: requests in flight at once, over all endpoints. timeouts:
    `HTTPTimeouts` (per phase of a request, and the openai client's retries of a transient
    failure per endpoint).
    seed_mode: see the module docstring. logprobs: the `logprobs` request field (the chosen
    token's log-prob always comes back; >0 adds that many top alternatives, unused here).
    api_key: sent as a Bearer token; None: no key (the environment is not read). extra_body:
    fields merged into every request (default VLLM_EXTRAS, or none with vllm_extras off: then
    no top_k either, for servers that refuse unknown fields). progress: a tqdm bar
    of requests. context_tokens: the longest prompt + generation that will be sent (a run: its
    longest prompt budget + longest generation, `rmlib.run.backends.context_tokens`); before the
    first request each server's `max_model_len` (vLLM lists it in GET /v1/models) must hold it,
    or `ContextTooShortError` says so; a server that reports none gets a one-line warning. None:
    not checked.
    api: "completions" (default: rendered prompts) or "chat" (chat envelopes, for servers without
    a completions endpoint; module docstring). logprobs_kind: what the server's log-probs are,
    as the caller knows from how it was started ("raw", "processed", "unknown"); recorded in
    every generation's meta.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        model: str,
        *,
        identity: str | None = None,
        concurrency: int = 256,
        timeouts: HTTPTimeouts = HTTPTimeouts(),
        seed_mode: SeedMode = "per_sample",
        logprobs: int = 1,
        api_key: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        progress: bool = True,
        context_tokens: int | None = None,
        api: Api = "completions",
        logprobs_kind: LogprobsKind = "unknown",
        vllm_extras: bool = True,
    ) -> None:
        urls = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if not urls or not model:
            raise ValueError("HTTPBackend needs at least one endpoint and a model name")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if seed_mode not in ("per_sample", "server_n"):
            raise ValueError(f"seed_mode must be 'per_sample' or 'server_n', got {seed_mode!r}")
        if api not in ("completions", "chat"):
            raise ValueError(f"api must be 'completions' or 'chat', got {api!r}")
        if logprobs_kind not in LOGPROBS_KINDS:
            raise ValueError(
                f"logprobs_kind must be one of {LOGPROBS_KINDS}, got {logprobs_kind!r}"
            )
        self.api: Api = api
        self.logprobs_kind: LogprobsKind = logprobs_kind
        self.endpoints = [_api_base(u) for u in urls]
        self.model = model
        self.identity = identity or f"http:{model}"
        self.concurrency = concurrency
        self.timeouts = timeouts
        self.seed_mode: SeedMode = seed_mode
        self.logprobs = logprobs
        self.api_key = api_key or None
        # a server that refuses unknown fields (OpenAI's API) gets none of vLLM's, top_k too
        self.vllm_extras = vllm_extras
        default = VLLM_EXTRAS if vllm_extras else {}
        self.extra_body = dict(default if extra_body is None else extra_body)
        self.progress = progress
        self.context_tokens = context_tokens
        self._handshaken = False
        self.stats = HTTPStats()
        self.clients = [self._client(base) for base in self.endpoints]
        self._turn = itertools.count()
        self._down_until = [0.0] * len(self.endpoints)

    # ------------------------------------------------------------------ public

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, in prompt order."""
        if n < 0 or offset < 0:
            raise ValueError("n and offset must be >= 0")
        if n == 0 or not prompts:
            return [[] for _ in prompts]
        if not self._handshaken:  # here, not at construction: a cached run needs no server
            self._handshake()
        start = time.perf_counter()
        try:
            got = _on_loop(self._run(self._jobs(prompts, params, n, offset)))
        finally:
            self.stats.seconds += time.perf_counter() - start
        # greedy: one request per prompt, its answer copied to every sample index
        return [
            [got[(p, s if params.do_sample else offset)].copy() for s in range(offset, offset + n)]
            for p in range(len(prompts))
        ]

    def served_models(self, endpoint: str | None = None) -> list[str]:
        """Model names the server lists at GET /v1/models (adapters included).

        endpoint: one of `endpoints` (default: the first).
        """
        return [card.id for card in self._cards(endpoint)]

    def max_model_len(self, endpoint: str | None = None) -> int | None:
        """The context length (prompt + generation) the server reports for `model`, or None.

        vLLM lists `max_model_len` on its base model's entry of GET /v1/models (an adapter's
        entry has none: the adapter runs in its base's engine, so the base's applies); SGLang
        and others may list none. endpoint: one of `endpoints` (default: the first).
        """
        return self._length_in(self._cards(endpoint))

    def _length_in(self, cards: list[Any]) -> int | None:
        by_id = {card.id: card for card in cards}
        mine = by_id.get(self.model)
        for card in (mine, by_id.get(getattr(mine, "parent", None) or "")):
            length = _reported_length(card)
            if length is not None:
                return length
        # no entry of its own (an SGLang BASE:NAME adapter): one engine, its smallest length
        lengths = [x for x in map(_reported_length, cards) if x is not None]
        return min(lengths) if lengths else None

    def _handshake(self) -> None:
        """Before the first completion, each server's model list: servers that are down or hang
        are named within `timeouts.first_error_seconds()` (not a completion's read timeout):
        all of them, an error; some, a notice (the others take their requests). With
        `context_tokens`, each max_model_len must hold them (or one line says what to set). A
        server without a model list (HTTP 404) gets a notice."""
        down = []
        for i, endpoint in enumerate(self.endpoints):
            try:
                cards = self._cards(endpoint, missing_ok=True)
            except ServerUnreachableError as e:
                down.append(e)
                self._down_until[i] = time.monotonic() + _DOWN_SECONDS  # tried last, as said
                continue
            if cards is None:
                warnings.warn(
                    f"{endpoint}/models lists no models (HTTP 404): the server's context length "
                    "is not checked",
                    stacklevel=3,
                )
            elif self.context_tokens is not None:
                self._check_context(endpoint, self._length_in(cards))
        if len(down) == len(self.endpoints):
            raise down[0] if len(down) == 1 else ServerUnreachableError("; ".join(map(str, down)))
        for e in down:
            warnings.warn(f"{e}: its requests go to the other endpoints first", stacklevel=3)
        self._handshaken = True

    def _check_context(self, endpoint: str, length: int | None) -> None:
        need, url = int(self.context_tokens or 0), f"{endpoint}/models"
        if length is None:
            warnings.warn(
                f"{url} reports no max_model_len for model {self.model!r}: not checked "
                f"that its context holds {need:,} tokens (prompt + generation)",
                stacklevel=4,
            )
        elif length < need:
            raise ContextTooShortError(
                f"{url}: the server's max_model_len for model {self.model!r} is {length:,} "
                f"tokens, but prompts + generations need up to {need:,}: restart it with "
                f"--max-model-len {need} (vLLM; SGLang: --context-length {need}), or lower "
                "the budgets (a run: prompts.max_reflection_prompt_tokens and the "
                "max_new_tokens caps)"
            )

    def _cards(self, endpoint: str | None, missing_ok: bool = False) -> list[Any] | None:
        """The entries of GET /v1/models (openai `Model`s; servers' extra fields kept); with
        `missing_ok`, None where the server has no such route (HTTP 404)."""
        i = 0 if endpoint is None else self.endpoints.index(_api_base(endpoint))
        url = f"{self.endpoints[i]}/models"
        try:
            return _on_loop(self._served(i))
        except openai.APIStatusError as e:
            if missing_ok and e.status_code == 404:
                return None
            raise self._status_error(url, e) from None
        except openai.APIConnectionError as e:  # timeouts included
            what = f"{_describe(e, self.api_key)} ({self.timeouts.describe()})"
            raise ServerUnreachableError(f"{url} (model {self.model!r}): {what}") from None
        except openai.APIError as e:
            raise self._error(url, _describe(e, self.api_key)) from None

    # ------------------------------------------------------------------ requests

    def _client(self, base: str) -> openai.AsyncOpenAI:
        # async, not the sync client on threads: hundreds of requests in flight cost one
        # coroutine each on one thread, not a thread each
        http = openai.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            ),
            event_hooks={"request": [self._sent]},
        )
        return openai.AsyncOpenAI(
            base_url=base,
            # the client wants a key, and reads OPENAI_API_KEY when given None: a placeholder,
            # which a server started without --api-key ignores
            api_key=self.api_key or "EMPTY",
            timeout=self.timeouts.httpx(),
            max_retries=self.timeouts.max_retries,
            http_client=http,
        )

    def _jobs(self, prompts: list[str], params: SamplingParams, n: int, offset: int) -> list[_Job]:
        jobs = []
        for p, prompt in enumerate(prompts):
            if not params.do_sample:
                jobs.append(_Job(p, (offset,), self._request(prompt, params, 1, None)))
            elif self.seed_mode == "server_n":
                seed, samples = sample_seed(params.seed, prompt, offset), range(offset, offset + n)
                jobs.append(_Job(p, tuple(samples), self._request(prompt, params, n, seed)))
            else:
                for i in range(offset, offset + n):
                    seed = sample_seed(params.seed, prompt, i)
                    jobs.append(_Job(p, (i,), self._request(prompt, params, 1, seed)))
        return jobs

    def _request(
        self, prompt: str, params: SamplingParams, n: int, seed: int | None
    ) -> dict[str, Any]:
        """Keyword arguments of `completions.create` (or `chat.completions.create`) for one
        request."""
        extra = dict(self.extra_body)
        request: dict[str, Any] = {"model": self.model, "max_tokens": params.max_new_tokens, "n": n}
        if self.api == "chat":
            messages, template_kwargs = read_chat_prompt(prompt)
            request.update(messages=messages, logprobs=True, top_logprobs=self.logprobs)
            if template_kwargs and self.vllm_extras:  # vLLM's (and SGLang's) extension too
                extra.setdefault("chat_template_kwargs", template_kwargs)
        else:
            request.update(prompt=prompt, logprobs=self.logprobs, echo=False)
        if params.do_sample:
            request.update(temperature=params.temperature, top_p=params.top_p, seed=seed)
            top_k = params.top_k if params.top_k > 0 else -1
        else:  # greedy; still explicit, so no checkpoint default can turn filtering on
            request.update(temperature=0.0, top_p=1.0)
            top_k = -1
        if self.vllm_extras:
            extra.setdefault("top_k", top_k)
        if extra:
            request["extra_body"] = extra
        return request

    async def _run(self, jobs: list[_Job]) -> dict[tuple[int, int], Generation]:
        """All jobs, `concurrency` at a time; the first failure cancels the others."""
        slots = asyncio.Semaphore(self.concurrency)

        async def one(job: _Job) -> list[tuple[tuple[int, int], Generation]]:
            async with slots:
                return await self._complete(job)

        tasks = [asyncio.create_task(one(job)) for job in jobs]
        got: dict[tuple[int, int], Generation] = {}
        try:
            with self._bar(len(jobs)) as bar:
                tokens, start = 0, time.perf_counter()
                for answer in asyncio.as_completed(tasks):
                    for key, gen in await answer:
                        got[key] = gen
                        tokens += gen.n_tokens
                    bar.update(1)
                    rate = tokens / max(time.perf_counter() - start, 1e-9)
                    bar.set_postfix_str(f"{rate:.0f} tok/s", refresh=False)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return got

    async def _complete(self, job: _Job) -> list[tuple[tuple[int, int], Generation]]:
        answer, url = await self._create(job.request)
        choices = sorted(answer.choices, key=lambda c: c.index)
        if len(choices) != len(job.samples):
            raise self._error(
                url, f"the server answered {len(choices)} choices for n={len(job.samples)}"
            )
        prompt_tokens = answer.usage.prompt_tokens if answer.usage else 0
        read = _chat_generation if self.api == "chat" else _generation
        try:
            gens = [read(c, prompt_tokens) for c in choices]  # type: ignore[arg-type]
        except ValueError as e:
            raise self._error(url, str(e)) from None
        for g in gens:
            g.meta["logprobs_kind"] = self.logprobs_kind
        self.stats.prompt_tokens += prompt_tokens
        self.stats.generated_tokens += sum(g.n_tokens for g in gens)
        return [((job.prompt, s), g) for s, g in zip(job.samples, gens, strict=True)]

    async def _create(self, request: dict[str, Any]) -> tuple[Completion | ChatCompletion, str]:
        """One completions request: retried by the client on its endpoint, then on the next.
        Returns the answer and the URL that gave it."""
        attempts, failures = [0], []
        refused: tuple[int, openai.APIStatusError] | None = None
        token = _ATTEMPTS.set(attempts)
        try:
            for i in self._endpoint_order():
                url = f"{self.endpoints[i]}{self._route}"
                client = self.clients[i]
                try:
                    if self.api == "chat":
                        return await client.chat.completions.create(**request), url
                    return await client.completions.create(**request), url
                except openai.APIStatusError as e:
                    if not _transient(e.status_code):
                        refused = (i, e)
                        break
                    failures.append((url, _describe(e, self.api_key)))
                except openai.APIConnectionError as e:  # timeouts included
                    failures.append((url, _describe(e, self.api_key)))
                except openai.APIError as e:  # an answer the client could not read
                    raise self._error(url, _describe(e, self.api_key)) from None
                self._down_until[i] = time.monotonic() + _DOWN_SECONDS
        finally:
            _ATTEMPTS.reset(token)
            self.stats.retries += max(attempts[0] - 1, 0)
        if refused is not None:  # after the count: the model list asked for here is no retry
            raise await self._refused(*refused)
        url, last = failures[-1]
        others = [u for u, _ in failures[:-1] if u != url]
        tried = f"; also failed at {', '.join(others)}" if others else ""
        raise self._error(
            url,
            f"the request failed {attempts[0]} time{'s' * (attempts[0] != 1)} "
            f"({self.timeouts.describe()}){tried}; last error: {last}",
        )

    async def _refused(self, i: int, e: openai.APIStatusError) -> HTTPBackendError:
        """The error for a request the server refused (retrying cannot help)."""
        url, message = f"{self.endpoints[i]}{self._route}", _error_message(e, self.api_key)
        lowered = message.lower()
        about_model = self.model in message or any(
            w in lowered for w in ("model", "lora", "adapter")
        )
        if e.status_code in (400, 404) and about_model:
            try:
                served = f"Served there: {[m.id for m in await self._served(i)]}."
            except openai.APIError:
                served = "Its model list (GET /v1/models) is unavailable."
            return ModelNotServedError(
                f"{url}: the server does not serve model {self.model!r} (HTTP {e.status_code}: "
                f"{message}). {served} Pass a served name; a LoRA adapter is served as NAME "
                "(vLLM --lora-modules NAME=PATH) or BASE:NAME (SGLang --lora-paths NAME=PATH)."
            )
        return self._status_error(url, e)

    @property
    def _route(self) -> str:
        return "/chat/completions" if self.api == "chat" else "/completions"

    def _status_error(self, url: str, e: openai.APIStatusError) -> HTTPBackendError:
        message = _error_message(e, self.api_key)
        if e.status_code in (401, 403):
            sent = "the key sent was refused" if self.api_key else "none was sent"
            return self._error(
                url,
                f"HTTP {e.status_code}: {message}. The server wants an API key "
                f"(--api-key) and {sent}: pass api_key (a run: set generation.api_key_env to "
                "the environment variable holding it).",
            )
        if e.status_code == 404:
            return self._error(
                url,
                f"HTTP 404: {message} (an endpoint is the server's base URL, e.g. "
                "http://host:8000 or http://host:8000/v1)",
            )
        return self._error(url, f"HTTP {e.status_code}: {message}")

    def _error(self, url: str, what: str) -> HTTPBackendError:
        """The one form of this backend's errors: where (URL), for which model, what."""
        return HTTPBackendError(f"{url} (model {self.model!r}): {what}")

    async def _served(self, i: int) -> list[Any]:
        # a model list is small and quick: the read timeout of a whole generation is too long
        probe = min(self.timeouts.probe, self.timeouts.read)
        page = await self.clients[i].models.list(timeout=self.timeouts.httpx(read=probe))
        return list(page.data)

    async def _sent(self, request: httpx2.Request) -> None:
        """The clients' request hook: counts every HTTP request, first tries and retries."""
        self.stats.requests += 1
        attempts = _ATTEMPTS.get()
        if attempts is not None:
            attempts[0] += 1

    def _endpoint_order(self) -> list[int]:
        """Every endpoint once, from the next in turn; those that just failed for good last."""
        k, now = len(self.endpoints), time.monotonic()
        first = next(self._turn)
        return sorted(((first + j) % k for j in range(k)), key=lambda i: self._down_until[i] > now)

    def _bar(self, total: int) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            unit="req",
            desc=f"http {self.model}",
            disable=not self.progress,
            leave=False,
            dynamic_ncols=True,
        )


# ---------------------------------------------------------------------- helpers

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _on_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the module's event loop (one daemon thread, started on first use) and wait.

    An interrupted wait (Ctrl-C) cancels it: its requests in flight are closed.
    """
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="rmlib-http", daemon=True).start()
    future = asyncio.run_coroutine_threadsafe(coro, _loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def _api_base(url: str) -> str:
    """`http://h:p`, `http://h:p/` or `http://h:p/v1` -> `http://h:p/v1`."""
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"endpoint {url!r} must start with http:// or https://")
    return url if url.endswith("/v1") else f"{url}/v1"


def _transient(status: int) -> bool:
    """The statuses the openai client retries: worth another endpoint once its retries end."""
    return status in (408, 409, 429) or status >= 500


def _describe(e: openai.APIError, secret: str | None) -> str:
    """A failed request in a few words, without `secret` (the API key)."""
    if isinstance(e, openai.APIStatusError):
        return f"HTTP {e.status_code}: {_error_message(e, secret)}"
    cause = e.__cause__
    return _redact(f"{e.message} ({cause!r})" if cause is not None else e.message, secret)


def _error_message(e: openai.APIStatusError, secret: str | None) -> str:
    """The server's own message: `error.message` (OpenAI, vLLM), `detail` (FastAPI), or text;
    without `secret` (the API key), taken out before the message is cut, so no part is left."""
    body = e.body
    if isinstance(body, Mapping):
        body = body.get("message") or body.get("detail") or body
    text = str(body or e.response.text.strip() or e.response.reason_phrase)
    return _redact(text, secret)[:500]


def _redact(text: str, secret: str | None) -> str:
    """`text` with `secret` replaced: a server's error page may echo the request's headers, and
    an error's text reaches run.log and the executed notebook."""
    return text.replace(secret, "<api key>") if secret else text


def _reported_length(card: Any) -> int | None:
    """A model entry's `max_model_len` (vLLM's extra field), or None when it has none."""
    value = getattr(card, "max_model_len", None)
    return value if isinstance(value, int) and value > 0 else None


def _generation(choice: CompletionChoice, prompt_tokens: int) -> Generation:
    finish = choice.finish_reason
    if finish not in ("stop", "length"):
        raise ValueError(f"unexpected finish_reason {finish!r} (want 'stop' or 'length')")
    lp = choice.logprobs
    values = lp.token_logprobs if lp is not None else None
    if values is None or any(v is None for v in values):
        raise ValueError(
            "the server returned no per-token log-probs (`logprobs.token_logprobs`): it must "
            "support the completions `logprobs` field"
        )
    ids = _token_ids(lp.tokens or [], getattr(choice, "token_ids", None), len(values))
    return Generation(
        text=choice.text or "",
        token_ids=ids,
        logprobs=[float(v) for v in values],
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
    )


def _token_ids(tokens: Iterable[str], listed: Any, count: int) -> list[int]:
    """Token ids from "token_id:<id>" strings (vLLM), else a `token_ids` list, else -1 each.

    -1 keeps the count right (n_tokens, the confidence's T) where a server reports only strings.
    """
    tokens = list(tokens)
    if tokens and all(isinstance(t, str) and t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
        return [int(t[len(_TOKEN_ID_PREFIX) :]) for t in tokens]
    if isinstance(listed, list) and len(listed) == count:
        return [int(t) for t in listed]
    return [-1] * count


def _chat_generation(choice: ChatChoice, prompt_tokens: int) -> Generation:
    """A chat completion's choice as a Generation: the message's text, and the per-token
    log-probs of `logprobs.content` (refused when the server sent none)."""
    finish = choice.finish_reason
    if finish not in ("stop", "length"):
        raise ValueError(f"unexpected finish_reason {finish!r} (want 'stop' or 'length')")
    content = choice.logprobs.content if choice.logprobs is not None else None
    text = choice.message.content or ""
    if content is None or (text and not content):
        raise ValueError(
            "the server returned no per-token log-probs (`choices[].logprobs.content`) for a "
            "chat completion asked with `logprobs: true`: this judge needs them (confidence, "
            "soft rewards); use a server or model that returns chat log-probs"
        )
    ids = _token_ids((t.token for t in content), None, len(content))
    return Generation(
        text=text,
        token_ids=ids,
        logprobs=[float(t.logprob) for t in content],
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
    )


def chat_prompt(messages: Sequence[Mapping[str, str]], template_kwargs: Mapping[str, Any]) -> str:
    """A chat envelope: the messages (and chat-template keyword arguments) the chat API sends,
    as one canonical string, so that a prompt stays a string for the store and the backends."""
    body = {"messages": [dict(m) for m in messages], "chat_template_kwargs": dict(template_kwargs)}
    return CHAT_PROMPT_PREFIX + json.dumps(body, ensure_ascii=False, sort_keys=True)


def read_chat_prompt(prompt: str) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """(messages, chat-template kwargs) of a chat envelope; a rendered prompt is refused."""
    if not prompt.startswith(CHAT_PROMPT_PREFIX):
        raise ValueError(
            "api='chat' sends messages, but this prompt is rendered text: build the judge's "
            "prompts with rmlib.generation.http.ChatMessagesTokenizer(tokenizer) in place of "
            "the tokenizer"
        )
    body = json.loads(prompt[len(CHAT_PROMPT_PREFIX) :])
    return body["messages"], body["chat_template_kwargs"]


class ChatMessagesTokenizer:
    """The judge's tokenizer for the chat API: `apply_chat_template` returns a chat envelope
    (`chat_prompt`) instead of rendered text; counting an envelope's tokens renders it with the
    wrapped tokenizer's own template, so the prompt budgets hold as for completions (exactly,
    when the wrapped tokenizer is the served model's). Everything else is the wrapped tokenizer.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], **kwargs: Any) -> str:
        if kwargs.get("tokenize") or not kwargs.get("add_generation_prompt", False):
            raise ValueError("a chat envelope is the prompt of a new assistant turn, untokenized")
        template = {k: v for k, v in kwargs.items() if k not in _RENDER_KEYS}
        return chat_prompt(messages, template)

    def __call__(self, text: str, **kwargs: Any) -> Any:
        return self.tokenizer(self._rendered(text), **kwargs)

    def _rendered(self, text: str) -> str:
        if not text.startswith(CHAT_PROMPT_PREFIX):
            return text
        messages, template = read_chat_prompt(text)
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **template
        )

    def __getattr__(self, name: str) -> Any:  # encode, decode, chat_template, …
        return getattr(self.tokenizer, name)


# apply_chat_template's own switches, not the template's variables
_RENDER_KEYS = frozenset(
    {"tokenize", "add_generation_prompt", "return_dict", "continue_final_message"}
)
