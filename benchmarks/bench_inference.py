"""Inference cost benchmark: the naive path against our batched path, in one process.

On the same pairs, seed and model, each method runs twice with a fresh temporary generation
store (nothing is cached across measurements):

- naive: one prompt at a time, its N samples decoded together but each prefilling the prompt
  again, as `model.generate(num_return_sequences=N)` does, and no prefix shared (`--naive
  sequential`: one sequence at a time, slower still);
- batched: our path (HFBackend batches under a token budget, each prompt prefilled once for its
  samples, shared prefixes, e.g. one pair's reflection prompts, prefilled once);
- vllm: the vLLM engine in this process (rmlib.generation.vllm: continuous batching, prefix
  caching), the CPU build here; its start (tens of seconds) happens before any timing, and its
  `prefill_tokens` are the prompt tokens its prefix cache did not serve.

Methods: greedy judging (one greedy judgment per pair), majority vote (N sampled judgments),
the two-stage method (`rmlib.reflect.run_reflectrm`: stage 1 = the same N samples, stage 2 = the
reflection calls) and `two_stage_pruned`, the same with exact pruning of stage-2 calls
(`prune_reflections`: calls that cannot change the final verdict are not made; the JSON checks
that its verdicts equal the full method's and counts the calls saved). The pruned run has a
fresh store too, so its stage 1 is generated again and its figures are a whole run's.
Majority vote's generation work is exactly stage 1 of the two-stage run (the
same `judge_pairs` call), so by default its figures are those of stage 1, timed inside the
two-stage run; `--separate-majority` measures it in a run of its own instead.

Without `--adapter` (or `--warmup DIR`) on the embedded SmolLM2 the judge is un-warmed: no
verdict parses, so stage 2 makes no call and two-stage costs what majority vote does (the JSON
says `warmed: false`). `stage2_full` measures stage 2's workload regardless: N-1 reflection calls
per pair on the stage-1 rollouts, as if every verdict had parsed (the worst case, what a judge
that always parses pays); `two_stage_full_over_majority` is then (stage 1 + that) / stage 1. It
runs on the batched path only unless `--naive-stage2-full`.

Prints one JSON object: per path and method the wall time, generated / prefilled / prompt tokens
and forward passes, the ratios (naive / batched, two-stage / majority), the targets of issue 5,
and the outcomes (parse rate, unanimous pairs, reflection calls made and saved by pruning).
Timings on a shared CPU are only as good as the machine is
quiet: `machine.loadavg_*` says how busy it was, and `--threads auto` uses only idle cores.

    .venv/bin/python benchmarks/bench_inference.py                # 32 RewardBench pairs, N = 8
    .venv/bin/python benchmarks/bench_inference.py --quick        # smoke test, a minute or less
    .venv/bin/python benchmarks/bench_inference.py --warmup /tmp/warm --max-new-tokens 128
    .venv/bin/python benchmarks/bench_inference.py --model DIR --adapter DIR --pairs 32 --n 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # runnable as a script from anywhere
    sys.path.insert(0, str(ROOT))

SHARED_DATA = ROOT.parent / "shared" / "data"
# Tokens a reflection prompt adds to the Pref. prompt besides the two critiques (its task text,
# section headers, critique markers): ~50 with SmolLM2's and Qwen3's tokenizers; the margin
# covers critiques that re-tokenize longer than they were generated.
REFLECTION_EXTRA_TOKENS = 160
QUICK = {"pairs": 3, "n": 2, "max_new_tokens": 4, "max_prompt_tokens": 640}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default="embedded:smollm2-135m", help="hub id, local dir or embedded name"
    )
    ap.add_argument("--adapter", default=None, help="a (format-warmed) LoRA adapter directory")
    ap.add_argument(
        "--warmup",
        default=None,
        metavar="DIR",
        help="use the format warm-up adapter in DIR, training it there first when absent "
        "(rmlib.training.sft, demo pairs; minutes on CPU)",
    )
    ap.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16", "nf4"],
        help="fp32 is the fastest on CPUs without bf16 units",
    )
    ap.add_argument(
        "--data",
        default="auto",
        choices=["auto", "rewardbench", "demo"],
        help="auto: RewardBench from ../shared/data when present, else demo pairs",
    )
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--n", type=int, default=8, help="stage-1 samples per pair (paper: 8)")
    ap.add_argument(
        "--max-new-tokens",
        type=int,
        default=16,
        help="cap on every judgment and reflection (small: CPU time; >= 96 for a warmed judge)",
    )
    ap.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=1024,
        help="prompt budget (rmlib.judge.prompts.PromptBudget); pairs whose prompts would need "
        "truncation are skipped",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--naive",
        default="repeat",
        choices=["repeat", "sequential"],
        help="repeat: a prompt's samples decoded together, each prefilled; sequential: one "
        "sequence at a time",
    )
    ap.add_argument(
        "--threads",
        default="auto",
        help="torch CPU threads; auto: the cores not already busy (load average), at least 1 "
        "(oversubscribed threads make batched timings meaningless)",
    )
    ap.add_argument("--max-batch-tokens", type=int, default=32_768)
    ap.add_argument("--max-batch-size", type=int, default=64)
    ap.add_argument(
        "--max-padding",
        type=float,
        default=None,
        help="batched path: HFBackend max_padding (default: rmlib.generation.hf.MAX_PADDING)",
    )
    ap.add_argument(
        "--chunk-prompts",
        type=int,
        default=64,
        help="prompts per backend call of the batched path's CachedBackend",
    )
    ap.add_argument(
        "--methods",
        default="greedy,majority,two_stage,two_stage_pruned,stage2_full",
        help="stage2_full: N-1 reflection calls per pair on the first path's stage-1 rollouts, "
        "as if all parsed (needs two_stage or majority before it)",
    )
    ap.add_argument(
        "--paths", default="batched,naive", help="any of batched, naive, vllm (comma-separated)"
    )
    ap.add_argument(
        "--vllm-kv-cache-gib", type=float, default=2.0, help="vllm path: KV cache size on CPU"
    )
    ap.add_argument(
        "--naive-stage2-full",
        action="store_true",
        help="also run stage2_full on the naive path (long: every reflection prompt prefilled "
        "whole)",
    )
    ap.add_argument(
        "--naive-pruned",
        action="store_true",
        help="also run two_stage_pruned on the naive path",
    )
    ap.add_argument(
        "--separate-majority",
        action="store_true",
        help="measure majority vote in its own run instead of as stage 1",
    )
    ap.add_argument(
        "--quick", action="store_true", help=f"smoke test: {QUICK} (explicit options still win)"
    )
    ap.add_argument("--progress", action="store_true", help="show the backends' progress bars")
    ap.add_argument(
        "--throughput",
        action="store_true",
        help="instead: decode tokens/s at batch sizes 1, 8, 64, plain vs fast path "
        "(generation_throughput; --max-new-tokens, --max-prompt-tokens set the lengths)",
    )
    ap.add_argument("--out", default=None, help="also write the JSON to this file")
    args = ap.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}
        for key, value in QUICK.items():
            if f"--{key.replace('_', '-')}" not in given:
                setattr(args, key, value)
    return args


# ---------------------------------------------------------------- data


def load_pairs(
    kind: str, n: int, seed: int, tok: Any, max_prompt_tokens: int, room: int
) -> tuple[list[Any], dict[str, Any]]:
    """n pairs whose prompts need no truncation: RewardBench from ../shared/data (seeded draw
    over all 2,985 pairs), or demo eval pairs.

    A pair is kept when its Pref. prompt plus `room` tokens (the two critiques and the reflection
    task's extra text) fit max_prompt_tokens: a truncated reflection prompt is cut differently
    for each critique pair, so it would no longer share its prefix with the pair's other
    reflection prompts (rmlib.judge.prompts), which would misstate stage 2's cost.
    """
    import random

    from rmlib import data
    from rmlib.judge.prompts import PromptBudget, build_pref_prompt

    folder = SHARED_DATA / "rewardbench"
    if kind == "rewardbench" or (kind == "auto" and folder.is_dir()):
        if not folder.is_dir():
            raise SystemExit(f"{folder} is missing: use --data demo")
        candidates = data.load("rewardbench", str(folder), seed=seed).pairs
        info = {"source": "rewardbench", "path": str(folder)}
    else:
        from rmlib.data.demo import load_demo

        candidates = load_demo(split="eval", n=max(n, 32), seed=seed).pairs
        info = {"source": "demo", "path": "demo:generated"}
    order = list(range(len(candidates)))
    random.Random(seed).shuffle(order)
    unlimited = PromptBudget(max_prompt_tokens=1 << 30)
    keep, skipped = [], 0
    for i in order:
        if len(keep) == n:
            break
        tokens = build_pref_prompt(tok, candidates[i], unlimited).n_tokens
        if tokens + room <= max_prompt_tokens:
            keep.append(i)
        else:
            skipped += 1
    pairs = [candidates[i] for i in sorted(keep)]
    info.update(pairs=len(pairs), skipped_too_long=skipped, room_tokens=room)
    return pairs, info


# ---------------------------------------------------------------- model


def one_budget(tokens: int) -> Any:
    """One limit for both tasks: the engine is sized by --max-prompt-tokens, and load_pairs keeps
    pairs whose reflection prompts fit it whole."""
    from rmlib.judge.prompts import PromptBudget

    return PromptBudget(max_prompt_tokens=tokens, max_reflection_prompt_tokens=tokens)


def warmup_adapter(args: argparse.Namespace) -> str:
    """The format warm-up adapter in args.warmup, trained there first if it is not there yet."""
    folder = Path(args.warmup)
    if (folder / "adapter_config.json").is_file():
        return str(folder)
    from rmlib.generation.models import load_tokenizer
    from rmlib.judge.prompts import PromptFormat
    from rmlib.training.sft import WarmupConfig, run_warmup, warmup_pairs

    cfg = WarmupConfig(enabled=True, torch_threads=cpu_threads(args.threads))
    _log(f"training the format warm-up adapter into {folder} …")
    run_warmup(
        warmup_pairs(cfg, seed=args.seed),
        cfg,
        folder,
        backbone=args.model,
        fmt=PromptFormat(load_tokenizer(args.model), one_budget(args.max_prompt_tokens)),
        seed=args.seed,
    )
    return str(folder)


def warm_up_kernels(model: Any, tok: Any) -> None:
    """One short generation on each path's shape, untimed: first-call costs (allocator, kernel
    selection, lazy imports) must not land on whichever measurement comes first."""
    from rmlib.generation.base import SamplingParams
    from rmlib.generation.hf import HFBackend

    text = tok.apply_chat_template(
        [{"role": "user", "content": "Say hello."}], tokenize=False, add_generation_prompt=True
    )
    for batch in (1, 64):
        hf = HFBackend(model, tok, identity="warm-up", max_batch_size=batch, progress=False)
        hf.generate([text, text + " "], SamplingParams(max_new_tokens=2, seed=0), n=2)


# ---------------------------------------------------------------- measuring


class Recorder:
    """Passes calls to a backend; records each call's wall time and the HF counters it moved."""

    def __init__(self, inner: Any, hf: Any) -> None:
        self.inner, self.hf, self.identity = inner, hf, inner.identity
        self.calls: list[dict[str, Any]] = []

    def generate(self, prompts: list[str], params: Any, n: int = 1, offset: int = 0) -> Any:
        before = self.hf.stats.as_dict()
        start = time.perf_counter()
        out = self.inner.generate(prompts, params, n=n, offset=offset)
        after = self.hf.stats.as_dict()
        # counters a backend does not keep (vLLM: positions, forward passes) count as 0
        row = {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS}
        row.update(
            seconds=time.perf_counter() - start, sampled=params.do_sample, prompts=len(prompts), n=n
        )
        self.calls.append(row)
        return out


COUNTERS = (
    "sequences",
    "prompt_tokens",
    "prefill_tokens",
    "prefill_positions",
    "generated_tokens",
    "forward_calls",
)


def summarize(calls: list[dict[str, Any]], n_pairs: int) -> dict[str, Any]:
    """Totals of some recorded calls, with throughput."""
    out: dict[str, Any] = {k: int(sum(c[k] for c in calls)) for k in COUNTERS}
    wall = sum(c["seconds"] for c in calls)
    out["wall_s"] = round(wall, 3)
    out["generations"] = int(sum(c["prompts"] * c["n"] for c in calls))
    out["pairs_per_s"] = round(n_pairs / wall, 4) if wall else None
    out["generated_tokens_per_s"] = round(out["generated_tokens"] / wall, 2) if wall else None
    return out


def make_backend(
    path: str, model: Any, tok: Any, identity: str, args: argparse.Namespace, store_dir: Path
) -> tuple[Recorder, Any]:
    from rmlib.generation.hf import HFBackend
    from rmlib.generation.store import CachedBackend, GenerationStore

    if path == "vllm":
        gen, chunk = vllm_backend(tok, identity, args), 512
        store = GenerationStore(store_dir / f"{path}-{time.monotonic_ns()}.sqlite")
        cached = CachedBackend(gen, store, chunk_prompts=chunk, progress=args.progress)
        return Recorder(cached, gen), store
    if path == "naive":  # one prompt per call (chunk 1), no sharing of any prefill
        sequential = args.naive == "sequential"
        hf = HFBackend(
            model,
            tok,
            identity=identity,
            max_batch_tokens=args.max_batch_tokens,
            max_batch_size=1 if sequential else args.max_batch_size,
            min_shared_prefix=0,
            share_prompt_prefill=False,
            progress=args.progress,
        )
        chunk = 1
    else:
        hf = HFBackend(
            model,
            tok,
            identity=identity,
            max_batch_tokens=args.max_batch_tokens,
            max_batch_size=args.max_batch_size,
            max_padding=args.max_padding,
            progress=args.progress,
        )
        chunk = args.chunk_prompts
    store = GenerationStore(store_dir / f"{path}-{time.monotonic_ns()}.sqlite")  # fresh each time
    cached = CachedBackend(hf, store, chunk_prompts=chunk, progress=args.progress)
    return Recorder(cached, hf), store


def vllm_backend(tok: Any, identity: str, args: argparse.Namespace) -> Any:
    """The vllm path's backend: one engine for the whole benchmark (started on first use)."""
    import torch

    from rmlib.generation import vllm as rv
    from rmlib.generation.models import resolve_model

    local = resolve_model(args.model)
    on_cuda = torch.cuda.is_available()
    dtype, quantization = rv.vllm_dtype(args.precision)
    settings = rv.EngineSettings(
        model=local,
        dtype=dtype,
        quantization=quantization,
        max_model_len=args.max_prompt_tokens + args.max_new_tokens,
        enable_lora=args.adapter is not None,
        kv_cache_gib=None if on_cuda else args.vllm_kv_cache_gib,
        enforce_eager=not on_cuda,
        seed=args.seed,
    )
    return rv.VLLMBackend(
        rv.engine(settings),
        tok,
        identity=f"vllm:{identity}",
        stop_ids=rv.checkpoint_stop_ids(local, tok),
        adapter=args.adapter,
    )


def run_method(method: str, path: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """One measurement: the method on every pair through a fresh store; its tables and costs."""
    from rmlib.generation.base import SamplingParams
    from rmlib.judge import judgments as judge
    from rmlib.judge.prompts import PromptFormat
    from rmlib.reflect import ReflectConfig, run_reflectrm

    args, pairs = ctx["args"], ctx["pairs"]
    backend, store = make_backend(
        path, ctx["model"], ctx["tok"], ctx["identity"], args, ctx["store_dir"]
    )
    cfg = ReflectConfig(
        n_samples=args.n,
        max_new_tokens=args.max_new_tokens,
        reflection_max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        run_greedy=False,
        run_random_anchor=False,
        prune_reflections=method == "two_stage_pruned",
    )
    fmt = PromptFormat(ctx["tok"], ctx["budget"])
    try:
        if method == "greedy":
            table = judge.judge_pairs(
                pairs,
                backend,
                fmt,
                n=1,
                params=SamplingParams.greedy(args.max_new_tokens),
            )
            return {"cost": summarize(backend.calls, len(pairs)), "rollouts": table}
        if method == "majority":
            table = judge.judge_pairs(
                pairs,
                backend,
                fmt,
                n=args.n,
                params=cfg.sampling_params(),
                confidence_fraction=cfg.confidence_fraction,
            )
            return {"cost": summarize(backend.calls, len(pairs)), "rollouts": table}
        if method == "stage2_full":
            requests = full_reflection_requests(pairs, ctx["stage1_rollouts"], args.seed)
            table = judge.judge_reflections(
                requests,
                backend,
                fmt,
                params=cfg.reflection_params(),
            )
            cost = summarize(backend.calls, len(pairs))
            cost["reflection_calls"] = len(requests)
            return {"cost": cost, "rollouts": table.assign(sample=table["i"])}
        result = run_reflectrm(pairs, backend, fmt, cfg)
        stage1 = [c for c in backend.calls if c["sampled"]]
        stage2 = [c for c in backend.calls if not c["sampled"]]
        cost = summarize(backend.calls, len(pairs))
        cost["stage1"] = summarize(stage1, len(pairs))
        cost["stage2"] = summarize(stage2, len(pairs))
        cost["reflection_calls"] = int(len(result.reflections))
        cost["reflection_calls_pruned"] = result.counts["reflection_calls_pruned"]["reflectrm"]
        return {"cost": cost, "rollouts": result.rollouts, "result": result}
    finally:
        store.close()


def full_reflection_requests(pairs: Sequence[Any], rollouts: Any, seed: int) -> list[Any]:
    """Stage 2 as if every rollout had parsed: N-1 reflection calls per pair, the most confident
    rollout as anchor, slots drawn as run_reflectrm draws them. The workload a judge that always
    parses would give stage 2 (its worst case), whatever this model's parse rate."""
    from rmlib.judge.judgments import ReflectionRequest
    from rmlib.reflect import pair_rng, reflection_plan, select_anchor

    groups = {k: g.sort_values("sample") for k, g in rollouts.groupby("key", sort=False)}
    requests = []
    for pair in pairs:
        rows = groups[pair.key]
        texts, parsed = list(rows["text"]), [1] * len(rows)
        anchor = select_anchor(parsed, [float(c) for c in rows["confidence"]])
        for i, slot in reflection_plan(parsed, anchor, pair_rng(seed, pair.key, "plan")):
            requests.append(
                ReflectionRequest(pair, i, anchor, slot, texts[i], texts[anchor], "full")
            )
    return requests


# ---------------------------------------------------------------- outcomes and ratios


def agreement(a: Any, b: Any) -> float | None:
    """Share of generations (same key and sample) whose text is identical on both paths."""
    if a is None or b is None or not len(a):
        return None
    left = a.set_index(["key", "sample"])["text"]
    right = b.set_index(["key", "sample"])["text"]
    return round(float((left == right.reindex(left.index)).mean()), 4)


def outcomes(result: Any, n: int) -> dict[str, Any]:
    """Parse rate, unanimity and the reflection calls the verdict could not depend on."""
    import pandas as pd

    ro, refl = result.rollouts, result.reflections
    parsed = ro[ro["choice"].notna()]
    per_pair = parsed.groupby("key")["choice"].agg(["nunique", "size"])
    agreeing = set(per_pair.index[per_pair["nunique"] == 1])
    unanimous = set(per_pair.index[(per_pair["nunique"] == 1) & (per_pair["size"] == n)])
    n_pairs = int(ro["key"].nunique())
    calls_agreeing = int(refl["key"].isin(agreeing).sum()) if len(refl) else 0
    return {
        "rollout_parse_rate": round(len(parsed) / len(ro), 4) if len(ro) else None,
        "unanimous_pairs_share": round(len(unanimous) / n_pairs, 4) if n_pairs else None,
        "reflection_calls": int(len(refl)),
        # every parsed verdict agrees: the final verdict is decided, these calls cannot change it
        "reflection_calls_in_agreeing_pairs": calls_agreeing,
        "reflection_parse_failures": int(refl["failure"].notna().sum()) if len(refl) else 0,
        "accuracy_reflectrm": _accuracy(result.predictions, "reflectrm", pd),
        "accuracy_majority": _accuracy(result.predictions, "majority", pd),
    }


def _accuracy(pred: Any, method: str, pd: Any) -> float | None:
    rows = pred[pred["method"] == method]
    return round(float(rows["correct"].mean()), 4) if len(rows) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"naive_over_batched": {}, "two_stage_over_majority": {}}
    for method in ("greedy", "majority", "two_stage", "two_stage_pruned", "stage2_full"):
        nv, bt = results.get("naive", {}).get(method), results.get("batched", {}).get(method)
        if nv and bt:
            out["naive_over_batched"][method] = {
                k: _ratio(nv[k], bt[k]) for k in ("wall_s", "prefill_tokens", "forward_calls")
            }
    for path, by_method in results.items():
        maj, two = by_method.get("majority"), by_method.get("two_stage")
        pruned = by_method.get("two_stage_pruned")
        keys = ("wall_s", "generated_tokens", "prefill_tokens")
        if maj and two:
            out["two_stage_over_majority"][path] = {k: _ratio(two[k], maj[k]) for k in keys}
        if maj and pruned:
            out.setdefault("two_stage_pruned_over_majority", {})[path] = {
                k: _ratio(pruned[k], maj[k]) for k in keys
            }
        full = by_method.get("stage2_full")
        if maj and full:  # stage 1 + a stage 2 in which every rollout parsed
            out.setdefault("two_stage_full_over_majority", {})[path] = {
                k: _ratio(maj[k] + full[k], maj[k])
                for k in ("wall_s", "generated_tokens", "prefill_tokens")
            }
    out["vllm_over_batched_tokens_per_s"] = vllm_speedups(results)
    return out


def vllm_speedups(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Generated tokens/s of the vllm path over the batched (transformers) path, per stage."""
    vl, bt = results.get("vllm", {}), results.get("batched", {})

    def rate(by_method: dict[str, Any], method: str, stage: str | None = None) -> float | None:
        cost = by_method.get(method)
        if cost and stage:
            cost = cost.get(stage)
        return cost.get("generated_tokens_per_s") if cost else None

    return {
        "stage1": _ratio(rate(vl, "majority"), rate(bt, "majority")),
        "stage2": _ratio(rate(vl, "two_stage", "stage2"), rate(bt, "two_stage", "stage2")),
        "stage2_full": _ratio(rate(vl, "stage2_full"), rate(bt, "stage2_full")),
    }


def targets(r: dict[str, Any]) -> dict[str, Any]:
    two_maj = r["two_stage_over_majority"].get("batched", {}).get("wall_s")
    pruned_maj = r.get("two_stage_pruned_over_majority", {}).get("batched", {}).get("wall_s")
    full_maj = r.get("two_stage_full_over_majority", {}).get("batched", {}).get("wall_s")
    vllm = r.get("vllm_over_batched_tokens_per_s", {})
    vllm_two_maj = r["two_stage_over_majority"].get("vllm", {}).get("wall_s")
    vllm_full_maj = r.get("two_stage_full_over_majority", {}).get("vllm", {}).get("wall_s")
    speedup = r["naive_over_batched"].get("two_stage", {}).get("wall_s")
    full_speedup = r["naive_over_batched"].get("stage2_full", {}).get("wall_s")
    return {
        "two_stage_le_1.5x_majority": None if two_maj is None else two_maj <= 1.5,
        "two_stage_pruned_le_1.5x_majority": None if pruned_maj is None else pruned_maj <= 1.5,
        "two_stage_full_le_1.5x_majority": None if full_maj is None else full_maj <= 1.5,
        "batched_two_stage_ge_3x_faster_than_naive": None if speedup is None else speedup >= 3,
        "batched_stage2_full_ge_3x_faster_than_naive": (
            None if full_speedup is None else full_speedup >= 3
        ),
        "vllm_stage1_ge_3x_batched_tokens_per_s": _at_least(vllm.get("stage1"), 3),
        "vllm_stage2_ge_3x_batched_tokens_per_s": _at_least(vllm.get("stage2"), 3),
        "vllm_stage2_full_ge_3x_batched_tokens_per_s": _at_least(vllm.get("stage2_full"), 3),
        "vllm_two_stage_le_1.5x_majority": None if vllm_two_maj is None else vllm_two_maj <= 1.5,
        "vllm_two_stage_full_le_1.5x_majority": (
            None if vllm_full_maj is None else vllm_full_maj <= 1.5
        ),
    }


def _at_least(value: float | None, bound: float) -> bool | None:
    return None if value is None else value >= bound


# ---------------------------------------------------------------- decode throughput


FILLER = "The committee compared the quarterly figures with the forecast and noted the changes. "


def generation_throughput(
    model: Any,
    tok: Any,
    *,
    batch_sizes: Sequence[int] = (1, 8, 64),
    prompt_tokens: int = 512,
    new_tokens: int = 128,
    paths: Sequence[str] = ("plain", "fast"),
) -> list[dict[str, Any]]:
    """Generated tokens/s of HFBackend: one prompt of about prompt_tokens tokens, `batch` samples
    of new_tokens each, per batch size; "plain" (dynamic cache) against "fast" (static cache,
    decode compiled with CUDA graphs on a GPU; the static path alone on a CPU). Random weights
    rarely stop early, so every sample runs to new_tokens. For the GPU check script."""
    import torch

    from rmlib.generation.base import SamplingParams
    from rmlib.generation.hf import HFBackend

    ids = tok(FILLER * (prompt_tokens // 8 + 1), add_special_tokens=False)["input_ids"]
    text = tok.decode(ids[:prompt_tokens])
    cuda = torch.cuda.is_available()
    rows = []
    for path in paths:
        fast = {"decode_cache": "static", "compile_decode": True} if path == "fast" else {}
        hf = HFBackend(
            model,
            tok,
            identity="throughput",
            max_batch_size=max(batch_sizes),
            max_batch_tokens=1 << 40,
            min_shared_prefix=0,
            progress=False,
            **fast,
        )
        for batch in batch_sizes:
            # untimed warm-up at this shape: compiling (fast path) must not count
            hf.generate([text], SamplingParams(max_new_tokens=8, seed=0), n=batch)
            hf.reset_stats()
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            hf.generate([text], SamplingParams(max_new_tokens=new_tokens, seed=1), n=batch)
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            rows.append(
                {
                    "path": path,
                    "batch": batch,
                    "prompt_tokens": prompt_tokens,
                    "generated_tokens": hf.stats.generated_tokens,
                    "seconds": round(seconds, 3),
                    "tokens_per_s": round(hf.stats.generated_tokens / seconds, 2),
                }
            )
            _log(f"throughput {rows[-1]}")
    return rows


# ---------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    from rmlib.generation.models import load_backbone, model_identity

    torch.set_num_threads(cpu_threads(args.threads))
    if args.throughput:
        return throughput_main(args, torch, transformers)
    methods = [m for m in args.methods.split(",") if m]
    paths = [p for p in args.paths.split(",") if p]
    if args.warmup:
        args.adapter = warmup_adapter(args)
    model, tok = load_backbone(args.model, precision=args.precision, adapter=args.adapter)
    room = 2 * args.max_new_tokens + REFLECTION_EXTRA_TOKENS
    pairs, data_info = load_pairs(
        args.data, args.pairs, args.seed, tok, args.max_prompt_tokens, room
    )
    warm_up_kernels(model, tok)
    load_start = os.getloadavg()
    ctx = {
        "args": args,
        "pairs": pairs,
        "model": model,
        "tok": tok,
        "identity": model_identity(args.model, precision=args.precision, adapter=args.adapter),
        "budget": one_budget(args.max_prompt_tokens),
    }
    results: dict[str, dict[str, Any]] = {p: {} for p in paths}
    tables: dict[str, dict[str, Any]] = {p: {} for p in paths}
    with tempfile.TemporaryDirectory(prefix="bench-inference-") as tmp:
        ctx["store_dir"] = Path(tmp)
        for method in methods:
            if method == "majority" and "two_stage" in methods and not args.separate_majority:
                continue  # taken from stage 1 of the two-stage run below
            for path in paths:  # interleaved: drift in machine load hits both paths alike
                if method == "stage2_full" and path == "naive" and not args.naive_stage2_full:
                    continue
                if method == "two_stage_pruned" and path == "naive" and not args.naive_pruned:
                    continue
                _log(f"{path} {method} …")
                run = run_method(method, path, ctx)
                results[path][method] = run["cost"]
                tables[path][method] = run
                if method in ("two_stage", "majority") and "stage1_rollouts" not in ctx:
                    ctx["stage1_rollouts"] = run["rollouts"]  # both paths reflect on these
                _log(f"{path} {method}: {json.dumps(run['cost'])}")
        if "majority" in methods and "majority" not in results[paths[0]]:
            for path in paths:
                stage1 = dict(results[path]["two_stage"]["stage1"])
                stage1["measured_as"] = "stage 1 of the two_stage run (the same judge_pairs call)"
                results[path]["majority"] = stage1
    out = report(args, data_info, results, tables, load_start, torch, transformers)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return out


def throughput_main(args: argparse.Namespace, torch: Any, transformers: Any) -> dict[str, Any]:
    from rmlib.generation.models import load_backbone

    model, tok = load_backbone(args.model, precision=args.precision, adapter=args.adapter)
    batches = (1, 2) if args.quick else (1, 8, 64)
    rows = generation_throughput(
        model,
        tok,
        batch_sizes=batches,
        prompt_tokens=args.max_prompt_tokens,
        new_tokens=args.max_new_tokens,
    )
    out = {
        "benchmark": "generation_throughput",
        "model": args.model,
        "precision": args.precision,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "rows": rows,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return out


def report(
    args: argparse.Namespace,
    data_info: dict[str, Any],
    results: dict[str, Any],
    tables: dict[str, Any],
    load_start: tuple[float, ...],
    torch: Any,
    transformers: Any,
) -> dict[str, Any]:
    warmed = args.adapter is not None or not args.model.startswith("embedded:")
    r = ratios(results)
    main_path = "batched" if "batched" in tables else next(iter(tables), None)
    two = tables.get(main_path, {}).get("two_stage") if main_path else None
    same = {
        m: agreement(
            tables.get("naive", {}).get(m, {}).get("rollouts"),
            tables.get("batched", {}).get(m, {}).get("rollouts"),
        )
        for m in ("greedy", "majority", "two_stage", "two_stage_pruned", "stage2_full")
        if m in tables.get("naive", {})
    }
    return {
        "benchmark": "bench_inference",
        "command": " ".join([Path(sys.argv[0]).name, *(sys.argv[1:])]),
        "model": args.model,
        "adapter": args.adapter,
        "precision": args.precision,
        "warmed": warmed,
        "note": None
        if warmed
        else (
            "un-warmed embedded model: no verdict parses, so stage 2 makes no reflection call "
            "and two-stage costs what majority vote does; pass --adapter with a format-warmed "
            "adapter for a meaningful two-stage ratio"
        ),
        "data": data_info,
        "settings": {
            "n": args.n,
            "max_new_tokens": args.max_new_tokens,
            "max_prompt_tokens": args.max_prompt_tokens,
            "seed": args.seed,
            "quick": args.quick,
            "separate_majority": args.separate_majority,
            "naive": {
                "mode": args.naive,
                "max_batch_size": 1 if args.naive == "sequential" else args.max_batch_size,
                "share_prompt_prefill": False,
                "min_shared_prefix": 0,
                "chunk_prompts": 1,
            },
            "batched": {
                "max_batch_tokens": args.max_batch_tokens,
                "max_batch_size": args.max_batch_size,
                "chunk_prompts": args.chunk_prompts,
                "min_shared_prefix": _default_min_shared_prefix(),
                "max_padding": args.max_padding
                if args.max_padding is not None
                else _default_max_padding(),
            },
        },
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.is_available(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
        "results": results,
        "ratios": r,
        "targets": targets(r),
        "outcomes": outcomes(two["result"], args.n) if two else None,
        "same_text_naive_vs_batched": same,
        "pruning": pruning(two, tables.get(main_path, {}).get("two_stage_pruned")),
    }


def pruning(full: Any, pruned: Any) -> dict[str, Any] | None:
    """Calls saved by exact pruning, and whether its verdicts equal the full method's."""
    if not full or not pruned:
        return None
    import pandas as pd

    a, b = full["result"], pruned["result"]

    def verdicts(result: Any) -> pd.Series:
        p = result.predictions
        return p[p["method"] == "reflectrm"].set_index("key")["verdict"]

    va, vb = verdicts(a), verdicts(b).reindex(verdicts(a).index)
    same = (va == vb) | (va.isna() & vb.isna())
    n_full = int(len(a.reflections))
    return {
        "pairs": int(len(va)),
        "pairs_unanimous": int(b.counts["pairs_unanimous"]),
        "reflection_calls_full": n_full,
        "reflection_calls_pruned_run": int(len(b.reflections)),
        "reflection_calls_saved": int(b.counts["reflection_calls_pruned"]["reflectrm"]),
        "saved_share": round(1 - len(b.reflections) / n_full, 4) if n_full else None,
        "same_stage1_text": agreement(a.rollouts, b.rollouts),
        "same_final_verdict_share": round(float(same.mean()), 4) if len(same) else None,
    }


def cpu_threads(setting: str) -> int:
    if setting != "auto":
        return max(1, int(setting))
    busy = round(os.getloadavg()[0])
    return max(1, (os.cpu_count() or 1) - busy)


def _default_max_padding() -> float:
    from rmlib.generation.batching import MAX_PADDING

    return MAX_PADDING


def _default_min_shared_prefix() -> int:
    from rmlib.generation.batching import MIN_SHARED_PREFIX

    return MIN_SHARED_PREFIX


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    from rmlib.cli import run_script

    raise SystemExit(run_script(main))
