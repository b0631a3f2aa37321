"""rmlib.generation.http over real HTTP, against local servers on loopback.

The servers answer the OpenAI completions API (`POST /v1/completions`, `GET /v1/models`) from
the transformers backend on the tiny Qwen3, as a vLLM server answers from its engine. Variants
fail some requests (the client retries), stall (the client times out), or do not serve the model
asked for (a clear error). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from rmlib.generation.base import Backend, Generation, SamplingParams
from rmlib.generation.hf import HFBackend, sample_seed
from rmlib.generation.http import HTTPBackend, HTTPBackendError, ModelNotServedError
from rmlib.generation.store import CachedBackend, GenerationStore
from rmlib.models import TINY_QWEN3, load_backbone

torch.set_num_threads(2)
MODEL = "tiny-qwen3"
SAMPLING = SamplingParams(max_new_tokens=6, temperature=1.0, seed=7)
GREEDY = SamplingParams.greedy(max_new_tokens=6)
PROMPTS = ["first prompt", "a second, longer prompt with more words", "third"]


@pytest.fixture(scope="module")
def hf():
    model, tok = load_backbone(TINY_QWEN3, precision="fp32")
    return HFBackend(model, tok, identity="tiny-fp32", progress=False)


class FakeServer:
    """A completions server on 127.0.0.1 (ephemeral port) answering from an HFBackend.

    fail_first: the first that many attempts of every distinct request (prompt, seed) fail,
    cycling through HTTP 503, HTTP 429 and a dropped connection; fail_after: every request after
    that many completions requests answers 500; delay: seconds to stall before answering.
    """

    def __init__(
        self,
        hf: HFBackend,
        *,
        served: tuple[str, ...] = (MODEL,),
        fail_first: int = 0,
        fail_after: int | None = None,
        delay: float = 0.0,
    ) -> None:
        self.hf, self.served = hf, served
        self.fail_first, self.fail_after, self.delay = fail_first, fail_after, delay
        self.requests = 0
        self.attempts: dict[tuple, int] = {}
        self.bodies: list[dict] = []
        self.lock = threading.Lock()  # one generation at a time: HFBackend is not thread-safe
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # non-daemon handler threads are joined by server_close(): a handler still inside torch
        # when the interpreter exits aborts the process ("terminate called without an active
        # exception", exit 134)
        self.httpd.daemon_threads = False
        self.httpd.block_on_close = True
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
                if self.path != "/v1/models":
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                self._json(200, {"object": "list", "data": [{"id": m} for m in server.served]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests += 1
                    k = server.requests
                    server.bodies.append(body)
                    key = (body.get("prompt"), body.get("seed"))
                    server.attempts[key] = attempt = server.attempts.get(key, 0) + 1
                if self.path != "/v1/completions":
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                if body.get("model") not in server.served:
                    message = f"The model `{body.get('model')}` does not exist."
                    return self._json(404, {"error": {"message": message, "code": 404}})
                if server.delay:
                    time.sleep(server.delay)
                if server.fail_after is not None and k > server.fail_after:
                    return self._json(500, {"error": {"message": "engine died"}})
                if attempt <= server.fail_first:
                    return self._fail(k)
                with server.lock:
                    answer = server.complete(body)
                self._json(200, answer)

            def _fail(self, k: int) -> None:
                kind = k % 3
                if kind == 0:
                    self.close_connection = True  # dropped without an answer
                    self.connection.shutdown(2)
                    return None
                status = 503 if kind == 1 else 429
                headers = {"Retry-After": "0"} if status == 429 else {}
                return self._json(status, {"error": {"message": "busy"}}, headers)

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
        gens = self.hf.generate([body["prompt"]], params, n=int(body.get("n", 1)))[0]
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


@pytest.fixture
def serve(hf) -> Iterator:
    servers: list[FakeServer] = []

    def start(**kw) -> FakeServer:
        servers.append(FakeServer(hf, **kw))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _client(urls, **kw) -> HTTPBackend:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 30.0)
    kw.setdefault("concurrency", 4)
    return HTTPBackend(urls, MODEL, progress=False, **kw)


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
    got = client.generate(PROMPTS, GREEDY)
    assert all(g[0].n_tokens == 6 for g in got) and client.stats.retries >= 1


def test_a_stalled_server_times_out_with_a_clear_error(serve):
    slow = serve(delay=3.0)
    client = _client(slow.url, timeout=0.3, max_retries=2, concurrency=1)
    start = time.monotonic()
    with pytest.raises(HTTPBackendError, match=r"failed 3 times .*timed out") as info:
        client.generate(PROMPTS[:1], GREEDY)
    assert time.monotonic() - start < 2.5  # 3 attempts x 0.3 s, not the server's 3 s each
    assert MODEL in str(info.value) and "timeout 0.3s" in str(info.value)


def test_an_unknown_model_or_adapter_is_a_clear_error(serve):
    server = serve(served=(MODEL, "judge-adapter"))
    client = HTTPBackend(server.url, "no-such-adapter", backoff=0.01, progress=False)
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
    assert client.stats.retries == 0 and server.requests == 1


def test_through_the_store_an_interrupted_run_resumes(tmp_path, serve):
    store = GenerationStore(tmp_path / "gen.sqlite")
    dying = serve(fail_after=4)  # answers 4 requests, then only errors
    first = CachedBackend(_client(dying.url, max_retries=1), store, chunk_prompts=1, progress=False)
    with pytest.raises(HTTPBackendError, match="engine died"):
        first.generate(PROMPTS, SAMPLING, n=2)
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


# ---------------------------------------------------------------- wired into the params


def test_params_select_the_http_backend_for_a_run(tmp_path, hf, serve, monkeypatch):
    """generation.backend 'http' in a params file: the workbook's models are asked of the servers
    under their served names, through the run's store, and give what the local model gives."""
    from rmlib import pipeline
    from rmlib.config import ConfigError, config_from_dict
    from rmlib.run_folder import RunFolder

    server = serve(served=("tiny-qwen3", "unified"))
    cfg = config_from_dict(
        {
            "model": {"backbone": TINY_QWEN3, "precision": "fp32"},
            "generation": {
                "backend": "http",
                "endpoints": [server.url],
                "served_models": {"base": "tiny-qwen3"},
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
    assert tok.padding_side == "left"
    got = gen.generate(PROMPTS, GREEDY)
    for a, b in zip(got, hf.generate(PROMPTS, GREEDY), strict=True):
        _same(a, b)
    assert (run.path / "generations.sqlite").is_file() and gen.stats.misses == len(PROMPTS)
    assert pipeline.served_model(cfg, "unified") == "unified"  # its --lora-modules name
    assert pipeline.served_model(cfg, "base") == "tiny-qwen3"
    with pytest.raises(ConfigError, match="needs generation.endpoints"):
        config_from_dict({"generation": {"backend": "http"}})
    with pytest.raises(ConfigError, match="must be one of"):
        config_from_dict({"generation": {"backend": "vlm"}})
