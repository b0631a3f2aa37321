"""GPU memory and speed check of GRPO + QLoRA at the default settings, on a Qwen3-4B-shaped model.

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

    python benchmarks/gpu_check.py            # GPU: Qwen3-4B shape (minutes; ~8 GB temp disk)
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    import bitsandbytes
    import torch
    import transformers
    import trl

    from rmlib.models import load_tokenizer
    from rmlib.training.grpo import GRPOSettings, build_trainer

    on_cuda = torch.cuda.is_available()
    accumulation = args.generation_batch // args.micro_batch
    settings = GRPOSettings(
        num_generations=args.group,
        per_device_train_batch_size=args.micro_batch,
        generation_batch_size=args.generation_batch,
        gradient_accumulation_steps=accumulation,
        max_completion_length=args.completion_tokens,
        max_steps=args.steps,
        warmup_ratio=0.0,
        save_steps=10**6,
        torch_threads=None if on_cuda else 2,
    )
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        ckpt = build_random_checkpoint(Path(tmp) / "model", args.tiny)
        tokenizer = load_tokenizer(str(ckpt))
        prompts_per_step = args.generation_batch // args.group
        dataset, prompt_len = long_prompt_dataset(
            tokenizer, args.prompt_tokens, prompts_per_step * args.steps
        )
        trainer = build_trainer(
            dataset, settings, Path(tmp) / "run", backbone=str(ckpt), precision="nf4", verbose=False
        )
        timer = Timer(trainer)
        if on_cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        trainer.train()
        if on_cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - start
        tokens_seen = int(trainer.state.num_input_tokens_seen)
    train_seconds = max(total - timer.seconds, 1e-9)
    peak = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()) if on_cuda else ()
    gib = 1024**3
    return {
        "check": "gpu_check" + (" --tiny" if args.tiny else ""),
        "device": torch.cuda.get_device_name(0) if on_cuda else "cpu",
        "model": "Qwen3 tiny shape" if args.tiny else "Qwen3-4B shape, random weights",
        "precision": "nf4 (double quant) + LoRA",
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
        },
        "peak_allocated_gib": round(peak[0] / gib, 3) if on_cuda else None,
        "peak_reserved_gib": round(peak[1] / gib, 3) if on_cuda else None,
        "fits_24gb": (peak[1] < 24 * gib) if on_cuda else None,
        "generated_tokens": timer.tokens,
        "generation_s": round(timer.seconds, 3),
        "generated_tokens_per_s": round(timer.tokens / max(timer.seconds, 1e-9), 2),
        "train_tokens": tokens_seen,
        "train_s": round(train_seconds, 3),
        "train_tokens_per_s": round(tokens_seen / train_seconds, 2),
        "total_s": round(total, 3),
        "global_step": trainer.state.global_step,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "bitsandbytes": bitsandbytes.__version__,
        },
    }


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    args = parse_args(argv)
    import torch

    if not args.tiny and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --tiny for the CPU check", file=sys.stderr)
        return 2
    result = run(args)
    text = json.dumps(result, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
