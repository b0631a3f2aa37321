"""`rmlib judge` in process against the same judge behind `rmlib serve`: same greedy verdicts?

Issue 21's check: N RewardBench pairs, both orders, greedy, judged by SmolLM2 with a format
warm-up LoRA adapter (the demo's, outputs/demo/adapters/warmup; trained once into --adapter
when missing, as params/demo.yaml does it) on vLLM in this process, then by the same model and
adapter served by `rmlib serve --checkpoint` (vLLM's own OpenAI server). On a CPU both merge
the adapter into the model (adapter mode 'auto'; vLLM's CPU LoRA is several times slower), from
one cached merge.
Both predictions are scored by `rmlib score`. Then a sample group: three completions of one
prompt rewarded by the served judge as a TRL reward function would (`rmlib.tools.reward`: group
opponents, both orders; and soft rewards against a reference). Prints one JSON object: wall
times, share parsed, accuracy, how many verdicts agree, the rewards. Timings on a shared
machine are under contention: say so when quoting them.

    python benchmarks/judge_served.py --data ../shared/data/rewardbench -n 50
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from rmlib.cli import main as rmlib

MODEL = "embedded:smollm2-135m"
ROOT = Path(__file__).resolve().parents[1]


def warm_adapter(out: Path) -> float:
    """SmolLM2's format warm-up adapter, trained as params/demo.yaml does it; seconds taken."""
    from rmlib.generation.models import load_tokenizer
    from rmlib.judge.prompts import PromptFormat
    from rmlib.run.config import load_config
    from rmlib.training.sft import run_warmup, warmup_pairs

    cfg = load_config(ROOT / "params" / "demo.yaml")
    start = time.perf_counter()
    run_warmup(
        warmup_pairs(cfg.warmup, seed=cfg.run.seed),
        cfg.warmup,
        out,
        backbone=cfg.model.backbone,
        fmt=PromptFormat.of(load_tokenizer(cfg.model.backbone), cfg),
        seed=cfg.run.seed,
    )
    return time.perf_counter() - start


def rmlib_serve(
    adapter: Path, max_model_len: int, precision: str, log: Path
) -> tuple[subprocess.Popen, str]:
    """`rmlib serve --checkpoint MODEL --adapter judge=ADAPTER`, waited for until it prints its
    endpoint (as a user would read it); returns the process and the endpoint."""
    from rmlib.generation.servers import free_ports

    cmd = [sys.executable, "-m", "rmlib", "serve", "--checkpoint", MODEL,
           "--adapter", f"judge={adapter}", "--max-model-len", str(max_model_len),
           "--precision", precision, "--port", str(free_ports(1)[0])]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C or SIGTERM"):
            log.write_text("".join(lines))
            url = next(s.split()[0] for s in lines if s.strip().startswith("http://"))
            return proc, url
    log.write_text("".join(lines))
    raise RuntimeError(f"rmlib serve exited {proc.wait()}: see {log}")


def judged(argv: list[str]) -> tuple[float, pd.DataFrame]:
    start = time.perf_counter()
    code = rmlib(argv)
    if code:
        raise SystemExit(f"rmlib {' '.join(argv)} exited {code}")
    out = argv[argv.index("-o") + 1]
    return time.perf_counter() - start, pd.read_json(out, lines=True)


def scored(predictions: Path, data: str) -> str:
    """What `rmlib score` prints for the predictions, both orders."""
    out = subprocess.run(
        [sys.executable, "-m", "rmlib", "score", str(predictions), "--benchmark", "rewardbench",
         "--path", data, "--order", "both"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout


def sample_group(url: str, store: Path, max_new_tokens: int) -> dict[str, Any]:
    """A TRL reward call on one group of three completions, against the served judge."""
    from rmlib.judge.prompts import PromptBudget
    from rmlib.tools.reward import http_judge

    prompt = [{"role": "user", "content": "What is the capital of France? Answer briefly."}]
    completions = [
        [{"role": "assistant", "content": "The capital of France is Paris."}],
        [{"role": "assistant", "content": "The capital of France is Lyon."}],
        [{"role": "assistant", "content": "I like turtles."}],
    ]
    budget = {"max_prompt_tokens": 1024, "max_reflection_prompt_tokens": 1024}
    out: dict[str, Any] = {"completions": [c[0]["content"] for c in completions]}
    for name, config in {
        "group_both_orders": {"opponent": "group"},
        "group_one_order": {"opponent": "group", "both_orders": False},
        "soft_vs_reference": {"opponent": "reference", "soft": True},
    }.items():
        config["inference"] = {"max_new_tokens": max_new_tokens}
        judge = http_judge(url, "judge", MODEL, store, config=config, budget=PromptBudget(**budget),
                           logprobs_kind="raw")  # fmt: skip
        refs = [[{"role": "assistant", "content": "Paris."}]] * 3
        rewards = judge.score([prompt] * 3, completions, refs)
        out[name] = [None if r is None else round(r, 3) for r in rewards]
        out[name + "_verdicts"] = judge.last["verdict"].tolist()
    return out


def headline(scored: str) -> dict[str, Any]:
    """`rmlib score`'s greedy score, interval, parse-failure rate and both-orders consistency."""
    g = json.loads(scored)["methods"]["greedy"]
    both = g["consistency"]["both_correct"]
    return {
        "score": round(g["score"], 4),
        "ci": [round(x, 4) for x in g["ci"]],
        "partial": g["partial"],
        "parse_failure_rate": g["parse_failure_rate"],
        "both_orders_correct": [both["estimate"], both["low"], both["high"]],
    }


def same_texts(workdir: Path) -> float:
    """Share of the in-process judgments whose text the server wrote identically (by prompt)."""
    import sqlite3

    def texts(store: Path) -> dict[tuple[str, int], str]:
        with sqlite3.connect(store) as db:
            rows = db.execute("SELECT prompt_sha, sample, generation FROM generations")
            return {(sha, i): json.loads(g)["text"] for sha, i, g in rows}

    local, served = (
        texts(workdir / "local.generations.sqlite"),
        texts(workdir / "served.generations.sqlite"),
    )
    return round(sum(served.get(k) == t for k, t in local.items()) / len(local), 4)


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="RewardBench's local copy")
    ap.add_argument("--adapter", type=Path, default=ROOT / "outputs/demo/adapters/warmup",
                    help="the warm-up adapter (trained here if absent)")  # fmt: skip
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--precision", default="auto", help="both judges' weights (auto, bf16, fp32)")
    ap.add_argument("--workdir", type=Path, default=Path("judge-served"))
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"n_pairs": args.n, "adapter": str(args.adapter)}
    report["precision"] = args.precision
    if not (args.adapter / "adapter_config.json").is_file():
        report["warmup_seconds"] = round(warm_adapter(args.adapter), 1)
    common = ["judge", "--source", "rewardbench", "--path", args.data, "-n", str(args.n),
              "--model", MODEL, "--method", "greedy", "--orders", "both",
              "--max-new-tokens", str(args.max_new_tokens), "--max-prompt-tokens", "1024",
              "--precision", args.precision, "--no-progress"]  # fmt: skip
    local_out = args.workdir / "local.jsonl"
    local_s, local = judged([*common, "--adapter", str(args.adapter), "-o", str(local_out)])
    from rmlib.generation.vllm import shutdown

    shutdown()  # its memory back before the server starts
    start = time.perf_counter()
    proc, url = rmlib_serve(
        args.adapter, 1024 + args.max_new_tokens, args.precision, args.workdir / "serve.log"
    )
    report["serve_start_seconds"] = round(time.perf_counter() - start, 1)
    served_out = args.workdir / "served.jsonl"
    try:
        served_s, served = judged([*common, "-o", str(served_out), "--endpoint", url,
                                   "--served-model", "judge"])  # fmt: skip
        report["sample_group"] = sample_group(
            url, args.workdir / "reward.sqlite", args.max_new_tokens
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
    report["serve_stopped"] = "servers stopped" in rest
    both = local.merge(served, on=["id", "order"], suffixes=("_local", "_served"))
    same = (both["verdict_local"].fillna(0) == both["verdict_served"].fillna(0)).mean()
    score_local, score_served = scored(local_out, args.data), scored(served_out, args.data)
    report.update(
        rows=len(both),
        local_seconds=round(local_s, 1),
        served_seconds=round(served_s, 1),
        parsed_local=round(float(local["verdict"].notna().mean()), 4),
        parsed_served=round(float(served["verdict"].notna().mean()), 4),
        same_verdicts=round(float(same), 4),
        same_texts=same_texts(args.workdir),
        differing=both.loc[
            both["verdict_local"].fillna(0) != both["verdict_served"].fillna(0), ["id", "order"]
        ].to_dict("records"),
        score_local=headline(score_local),
        score_served=headline(score_served),
    )
    return report


if __name__ == "__main__":
    from rmlib.cli import run_script

    raise SystemExit(run_script(lambda: print(json.dumps(main(), indent=2, default=str))))
