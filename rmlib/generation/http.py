"""An OpenAI-compatible completions client: the scale-out backend (vLLM, SGLang servers).

`HTTPBackend` implements the same `Backend` protocol as the transformers backend, so it goes
through the same `CachedBackend` and generation store: every sample is committed as its chunk
finishes, and an interrupted evaluation resumes with only the missing samples. Standard library
only (urllib + a thread pool): no new dependency.

What it sends (POST `<endpoint>/v1/completions`, one prompt per request): the rendered prompt,
`max_tokens`, and every sampling setting explicitly (`temperature`, `top_p`, `top_k` with -1 =
off), because vLLM otherwise fills unset ones from the checkpoint's generation_config.json (Qwen3:
temperature 0.6, top-k 20, top-p 0.95); `logprobs` (the chosen token's log-prob per generated
token); `seed`; and `extra_body` (default `VLLM_EXTRAS`: token ids instead of token strings, and
no special tokens added to the already-rendered prompt, as our tokenizer calls do).

Seeds and reproducibility (`seed_mode`):
- "per_sample" (default): one request per sample with n = 1 and seed =
  `rmlib.generation.hf.sample_seed(params.seed, prompt, i)`, so sample i depends only on (seed,
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

    vllm serve Qwen/Qwen3-4B --dtype bfloat16 --max-model-len 8192 \
        --enable-lora --max-lora-rank 16 --lora-modules unified=ADAPTER \
        --logprobs-mode raw_logprobs --generation-config vllm --port 8000 \
        [--tensor-parallel-size 2 | --data-parallel-size 2]
    -> HTTPBackend("http://host:8000", "unified")       (the base model: "Qwen/Qwen3-4B")

    SGLANG_RETURN_ORIGINAL_LOGPROB=1 python -m sglang.launch_server \
        --model-path Qwen/Qwen3-4B --context-length 8192 \
        --enable-lora --max-lora-rank 16 --lora-paths unified=ADAPTER --port 30000 \
        [--tp-size 2 | --dp-size 2]
    -> HTTPBackend("http://host:30000", "Qwen/Qwen3-4B:unified")   (SGLang's base:adapter)

`--generation-config vllm` keeps the checkpoint's sampling defaults out (we send every setting
anyway). Several servers (one per GPU) are listed as several endpoints. Prefix caching, on by
default in both, is what makes the per-sample requests and one pair's reflection prompts cheap.

Errors: connection errors, timeouts, HTTP 408/429/5xx are transient and retried with exponential
backoff (and a `Retry-After` header honoured), rotating over the endpoints; after `max_retries`
retries `HTTPBackendError` says what failed and how often. A 404 or 400 whose message is about the
model or adapter raises `ModelNotServedError` at once, naming the model and the models the server
does serve (see above for how adapters are named). Any other 4xx raises `HTTPBackendError` at
once (retrying a bad request cannot help).
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rmlib.generation.base import Generation, SamplingParams

SeedMode = Literal["per_sample", "server_n"]
# vLLM request extensions: token ids as "token_id:<id>" strings in `logprobs.tokens`, and the
# rendered prompt tokenized as is (the chat template already holds the special tokens).
VLLM_EXTRAS: dict[str, Any] = {"return_tokens_as_token_ids": True, "add_special_tokens": False}
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_TOKEN_ID_PREFIX = "token_id:"


class HTTPBackendError(RuntimeError):
    """A request to an OpenAI-compatible server failed for good (after retries, or at once)."""


class ModelNotServedError(HTTPBackendError):
    """The server does not serve the requested model or adapter name."""


class _Transient(Exception):
    """A failure worth retrying; `retry_after` is the server's hint in seconds, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class HTTPStats:
    """Requests made (model lists included) and retried; tokens the server reported; wall time."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class _Job:
    """One completions request: prompt index, the sample indices its choices fill, its body."""

    prompt: int
    samples: tuple[int, ...]
    body: dict[str, Any]


class HTTPBackend:
    """Backend over one or several OpenAI-compatible completions servers serving `model`.

    endpoints: base URLs (`http://host:8000` or `http://host:8000/v1`), used round-robin, a
    retried request moving on to the next. model: the served model name, or a LoRA adapter's
    served name. identity: what the generation store keys on; the default `"http:<model>"` is
    only a name, so pass the served weights' identity (`rmlib.models.model_identity(base,
    precision=..., adapter=DIR)` hashes the adapter) lest an adapter retrained and served under
    the same name reuse the old one's stored generations. Wrap it in a CachedBackend with large
    `chunk_prompts` (hundreds): each chunk waits for its slowest request.
    concurrency: requests in flight at once. timeout: seconds a request may wait on the socket
    (connect, or silence while reading) before it counts as failed. max_retries: retries of a
    transient failure; the k-th waits min(max_backoff, backoff x 2^k) seconds, jittered by
    +-50 %. seed_mode: see the module docstring. logprobs: the `logprobs` request field (the
    chosen token's log-prob always comes back; >0 adds that many top alternatives, unused here).
    api_key: sent as a Bearer token when given. extra_body: fields merged into every request
    (default VLLM_EXTRAS; {} sends none). progress: a tqdm bar of requests with tokens/s.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        model: str,
        *,
        identity: str | None = None,
        concurrency: int = 16,
        timeout: float = 600.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        seed_mode: SeedMode = "per_sample",
        logprobs: int = 1,
        api_key: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        progress: bool = True,
    ) -> None:
        urls = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if not urls or not model:
            raise ValueError("HTTPBackend needs at least one endpoint and a model name")
        if concurrency < 1 or timeout <= 0 or max_retries < 0 or backoff < 0:
            raise ValueError("concurrency >= 1, timeout > 0, max_retries >= 0, backoff >= 0")
        if seed_mode not in ("per_sample", "server_n"):
            raise ValueError(f"seed_mode must be 'per_sample' or 'server_n', got {seed_mode!r}")
        self.endpoints = [_api_base(u) for u in urls]
        self.model = model
        self.identity = identity or f"http:{model}"
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.seed_mode: SeedMode = seed_mode
        self.logprobs = logprobs
        self.api_key = api_key
        self.extra_body = dict(VLLM_EXTRAS if extra_body is None else extra_body)
        self.progress = progress
        self.stats = HTTPStats()
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._jitter = random.Random()  # own generator: never touches the global random state

    # ------------------------------------------------------------------ public

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, in prompt order."""
        if n < 0 or offset < 0:
            raise ValueError("n and offset must be >= 0")
        if n == 0 or not prompts:
            return [[] for _ in prompts]
        start = time.perf_counter()
        try:
            got = self._run(self._jobs(prompts, params, n, offset))
        finally:
            self.stats.seconds += time.perf_counter() - start
        # greedy: one request per prompt, its answer copied to every sample index
        return [
            [got[(p, s if params.do_sample else offset)].copy() for s in range(offset, offset + n)]
            for p in range(len(prompts))
        ]

    def served_models(self, endpoint: str | None = None) -> list[str]:
        """Model names the server lists at GET /v1/models (adapters included)."""
        base = endpoint or self.endpoints[0]
        answer = self._call(f"{base}/models", None, timeout=min(self.timeout, 30.0), hint=False)
        return [str(m.get("id")) for m in answer.get("data", [])]

    # ------------------------------------------------------------------ requests

    def _jobs(self, prompts: list[str], params: SamplingParams, n: int, offset: int) -> list[_Job]:
        from rmlib.generation.hf import sample_seed  # the same seed derivation as HFBackend

        jobs = []
        for p, prompt in enumerate(prompts):
            if not params.do_sample:
                jobs.append(_Job(p, (offset,), self._body(prompt, params, 1, None)))
            elif self.seed_mode == "server_n":
                body = self._body(prompt, params, n, sample_seed(params.seed, prompt, offset))
                jobs.append(_Job(p, tuple(range(offset, offset + n)), body))
            else:
                for i in range(offset, offset + n):
                    seed = sample_seed(params.seed, prompt, i)
                    jobs.append(_Job(p, (i,), self._body(prompt, params, 1, seed)))
        return jobs

    def _body(
        self, prompt: str, params: SamplingParams, n: int, seed: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": params.max_new_tokens,
            "n": n,
            "logprobs": self.logprobs,
            "echo": False,
            "stream": False,
        }
        if params.do_sample:
            body.update(
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k if params.top_k > 0 else -1,
                seed=seed,
            )
        else:  # greedy; still explicit, so no checkpoint default can turn filtering on
            body.update(temperature=0.0, top_p=1.0, top_k=-1)
        body.update(self.extra_body)
        return body

    def _run(self, jobs: list[_Job]) -> dict[tuple[int, int], Generation]:
        got: dict[tuple[int, int], Generation] = {}
        abort = threading.Event()  # set on a final failure: the other requests stop retrying
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(jobs)))
        try:
            with self._bar(len(jobs)) as bar:
                pending: set[Future] = {pool.submit(self._complete, job, abort) for job in jobs}
                tokens, start = 0, time.perf_counter()
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for future in done:
                        error = future.exception()
                        if error is not None:
                            raise error
                        for key, gen in future.result():
                            got[key] = gen
                            tokens += gen.n_tokens
                    bar.update(len(done))
                    rate = tokens / max(time.perf_counter() - start, 1e-9)
                    bar.set_postfix_str(f"{rate:.0f} tok/s", refresh=False)
        except BaseException:
            abort.set()
            pool.shutdown(wait=False, cancel_futures=True)  # requests in flight end on their own
            raise
        pool.shutdown(wait=True)
        return got

    def _complete(
        self, job: _Job, abort: threading.Event
    ) -> list[tuple[tuple[int, int], Generation]]:
        answer = self._post(job.body, abort)
        choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != len(job.samples):
            raise HTTPBackendError(
                f"server answered {len(choices)} choices for n={len(job.samples)} "
                f"(model {self.model!r})"
            )
        prompt_tokens = int((answer.get("usage") or {}).get("prompt_tokens") or 0)
        gens = [_generation(c, prompt_tokens) for c in choices]
        with self._lock:
            self.stats.prompt_tokens += prompt_tokens
            self.stats.generated_tokens += sum(g.n_tokens for g in gens)
        return [((job.prompt, s), g) for s, g in zip(job.samples, gens, strict=True)]

    def _post(self, body: dict[str, Any], abort: threading.Event) -> dict[str, Any]:
        """POST a completions request, retrying transient failures over the endpoints."""
        failures: list[str] = []
        for attempt in range(self.max_retries + 1):
            if abort.is_set():
                raise HTTPBackendError("cancelled: another request of this call failed")
            base = self._next_endpoint()
            try:
                return self._call(f"{base}/completions", body, timeout=self.timeout)
            except _Transient as e:
                failures.append(f"{base}: {e}")
                if attempt == self.max_retries:
                    break
                with self._lock:
                    self.stats.retries += 1
                abort.wait(self._delay(attempt, e.retry_after))
            except ModelNotServedError:
                raise
            except HTTPBackendError as e:
                raise HTTPBackendError(f"{base}/completions: {e}") from None
        raise HTTPBackendError(
            f"completions request for model {self.model!r} failed {len(failures)} times "
            f"(timeout {self.timeout:g}s, {self.max_retries} retries); last error: {failures[-1]}"
        )

    def _call(
        self, url: str, body: dict[str, Any] | None, *, timeout: float, hint: bool = True
    ) -> dict[str, Any]:
        """One HTTP exchange: the JSON answer, or _Transient / HTTPBackendError.

        hint: on an error about the model, ask the server which models it serves.
        """
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=data, headers=headers)
        with self._lock:
            self.stats.requests += 1
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raise self._http_error(url, e, hint) from None
        except (TimeoutError, http.client.IncompleteRead) as e:
            raise _Transient(f"timed out or cut off after {timeout:g}s ({e!r})") from None
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as e:
            raise _Transient(f"connection failed: {getattr(e, 'reason', e)!r}") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise _Transient(f"answer is not JSON: {raw[:200]!r}") from None

    def _http_error(self, url: str, e: urllib.error.HTTPError, hint: bool) -> Exception:
        message = _error_message(e)
        if e.code in TRANSIENT_STATUS:
            return _Transient(f"HTTP {e.code}: {message}", _retry_after(e))
        lowered = message.lower()
        about_model = self.model in message or any(
            w in lowered for w in ("model", "lora", "adapter")
        )
        if e.code in (400, 404) and about_model:
            served = self._served_hint(url) if hint else ""
            return ModelNotServedError(
                f"{url}: the server does not serve model {self.model!r} (HTTP {e.code}: "
                f"{message}). {served} Pass a served name; a LoRA adapter is served as NAME "
                "(vLLM --lora-modules NAME=PATH) or BASE:NAME (SGLang --lora-paths NAME=PATH)."
            )
        if e.code == 404:
            return HTTPBackendError(
                f"HTTP 404: {message} (an endpoint is the server's base URL, e.g. "
                "http://host:8000 or http://host:8000/v1)"
            )
        return HTTPBackendError(f"HTTP {e.code}: {message}")

    def _served_hint(self, url: str) -> str:
        base = url.rsplit("/", 1)[0]
        try:
            names = self.served_models(base)
        except (HTTPBackendError, _Transient):
            return "Its model list (GET /v1/models) is unavailable."
        return f"Served there: {names}."

    def _next_endpoint(self) -> str:
        with self._lock:
            return self.endpoints[next(self._turn) % len(self.endpoints)]

    def _delay(self, attempt: int, hint: float | None) -> float:
        wait_s = min(self.max_backoff, self.backoff * 2**attempt)
        with self._lock:
            wait_s *= 0.5 + self._jitter.random()
        return min(self.max_backoff, max(wait_s, hint or 0.0))

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


def _api_base(url: str) -> str:
    """`http://h:p`, `http://h:p/` or `http://h:p/v1` -> `http://h:p/v1`."""
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"endpoint {url!r} must start with http:// or https://")
    return url if url.endswith("/v1") else f"{url}/v1"


def _generation(choice: Mapping[str, Any], prompt_tokens: int) -> Generation:
    finish = choice.get("finish_reason")
    if finish not in ("stop", "length"):
        raise HTTPBackendError(f"unexpected finish_reason {finish!r} (want 'stop' or 'length')")
    lp = choice.get("logprobs") or {}
    values = lp.get("token_logprobs")
    if values is None or any(v is None for v in values):
        raise HTTPBackendError(
            "the server returned no per-token log-probs (`logprobs.token_logprobs`): it must "
            "support the completions `logprobs` field"
        )
    ids = _token_ids(lp.get("tokens") or [], choice.get("token_ids"), len(values))
    return Generation(
        text=str(choice.get("text") or ""),
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


def _error_message(e: urllib.error.HTTPError) -> str:
    try:
        raw = e.read().decode("utf-8", "replace")
    except OSError:
        return str(e.reason)
    try:
        payload = json.loads(raw)
    except ValueError:
        return raw.strip()[:500] or str(e.reason)
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        return str(err.get("message") or err.get("detail") or err)[:500]
    return str(err)[:500]


def _retry_after(e: urllib.error.HTTPError) -> float | None:
    value = e.headers.get("Retry-After") if e.headers else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
