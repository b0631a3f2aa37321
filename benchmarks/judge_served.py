"""`rmlib judge` in process against the same judge behind `vllm serve`: same greedy verdicts?

Issue 21's check: N RewardBench pairs, both orders, greedy, judged by a format-warmed SmolLM2
(the demo profile's warm-up, made into --judge once when missing) on vLLM in this process, then
by the same checkpoint served by vLLM's OpenAI-compatible server; prints one JSON object: wall
times, share parsed, accuracy, and how many verdicts agree. Timings on a shared machine are
under contention: say so when quoting them.

    python benchmarks/judge_served.py --data ../shared/data/rewardbench --judge /tmp/warm -n 50
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rmlib.cli import main as rmlib


def warm_judge(out: Path) -> float:
    """SmolLM2 format-warmed as params/demo.yaml does it, merged into `out`; seconds taken."""
    from rmlib.backends import prompt_budget
    from rmlib.config import load_config
    from rmlib.training.sft import run_warmup, warmup_pairs

    cfg = load_config(Path(__file__).parents[1] / "params" / "demo.yaml")
    start = time.perf_counter()
    run_warmup(
        warmup_pairs(cfg.warmup, seed=cfg.run.seed),
        cfg.warmup,
        out.with_name(out.name + "-adapter"),
        backbone=cfg.model.backbone,
        seed=cfg.run.seed,
        budget=prompt_budget(cfg),
        merged_dir=out,
        critique_with_result=cfg.prompts.critique_with_result,
        enable_thinking=cfg.model.enable_thinking,
    )
    return time.perf_counter() - start


def serve(model: Path, dtype: str, max_model_len: int, log: Path) -> tuple[subprocess.Popen, str]:
    """vLLM's own server for `model`, with the flags the judge needs (raw log-probs, the
    checkpoint's generation config off, no chunked prefill on CPU); returns it and its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", "judge", "--host", "127.0.0.1", "--port", str(port),
        "--dtype", dtype, "--max-model-len", str(max_model_len), "--enforce-eager",
        "--kv-cache-memory-bytes", str(2 << 30), "--max-num-batched-tokens", "8192",
        "--no-enable-chunked-prefill", "--logprobs-mode", "raw_logprobs",
        "--generation-config", "vllm", "--seed", "0",
    ]  # fmt: skip
    env = dict(os.environ, VLLM_CPU_NUM_OF_RESERVED_CPU="0")
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    from rmlib.generation.http import HTTPBackend, HTTPBackendError

    probe = HTTPBackend(url, "judge", progress=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            probe.served_models()
            return
        except HTTPBackendError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve did not come up (exit {proc.poll()})") from None
            time.sleep(2)


def judged(argv: list[str]) -> tuple[float, pd.DataFrame]:
    start = time.perf_counter()
    code = rmlib(argv)
    if code:
        raise SystemExit(f"rmlib {' '.join(argv)} exited {code}")
    out = argv[argv.index("-o") + 1]
    return time.perf_counter() - start, pd.read_json(out, lines=True)


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="RewardBench's local copy")
    ap.add_argument("--judge", type=Path, required=True, help="warmed checkpoint (made if absent)")
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--workdir", type=Path, default=Path("judge-served"))
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"n_pairs": args.n}
    if not (args.judge / "config.json").is_file():
        report["warmup_seconds"] = round(warm_judge(args.judge), 1)
    from rmlib.models import resolve_precision

    precision, _ = resolve_precision("auto")
    common = ["judge", "--source", "rewardbench", "--path", args.data, "-n", str(args.n),
              "--model", str(args.judge), "--method", "greedy", "--orders", "both",
              "--max-new-tokens", str(args.max_new_tokens), "--max-prompt-tokens", "1024",
              "--precision", precision, "--no-progress"]  # fmt: skip
    local_s, local = judged([*common, "-o", str(args.workdir / "local.jsonl")])
    from rmlib.generation.vllm import shutdown

    shutdown()  # its memory back before the server starts
    dtype = "bfloat16" if precision == "bf16" else "float32"
    proc, url = serve(args.judge, dtype, 1024 + args.max_new_tokens, args.workdir / "serve.log")
    try:
        start = time.perf_counter()
        wait_up(url, proc)
        report["serve_start_seconds"] = round(time.perf_counter() - start, 1)
        served_s, served = judged([*common, "-o", str(args.workdir / "served.jsonl"),
                                   "--endpoint", url, "--served-model", "judge"])  # fmt: skip
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    both = local.merge(served, on=["id", "order"], suffixes=("_local", "_served"))
    same = (both["verdict_local"].fillna(0) == both["verdict_served"].fillna(0)).mean()
    report.update(
        precision=precision,
        rows=len(both),
        local_seconds=round(local_s, 1),
        served_seconds=round(served_s, 1),
        parsed_local=round(float(local["verdict"].notna().mean()), 4),
        parsed_served=round(float(served["verdict"].notna().mean()), 4),
        accuracy_local=round(float((local["verdict"] == local["label"]).mean()), 4),
        same_verdicts=round(float(same), 4),
        differing=both.loc[
            both["verdict_local"].fillna(0) != both["verdict_served"].fillna(0), ["id", "order"]
        ].to_dict("records"),
    )
    return report


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
