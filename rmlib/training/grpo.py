"""GRPO with LoRA on TRL 1.16: the unified judge (Pref. + Refl.) and its Pref.-only baselines.

`train_grpo(dataset, cfg, output_dir, backbone=...)` trains a LoRA adapter (all linear
projections, PEFT) with TRL's GRPOTrainer over a backbone in the precision it is given (a 4-bit
NF4 base, i.e. QLoRA, in the Qwen3-4B profiles; bf16 or fp32 elsewhere), on a training mix of
`rmlib.training.mix` (conversational prompts already fitted to our prompt budget; TRL 1.16's
GRPOConfig has no prompt cap). Pref. and Refl. items are shuffled together, so they share
batches; one reward rule scores both (`rmlib.training.reward`). The RFT baseline and the
same-volume baseline are the same call on the mix's other variants.

What it leaves in `output_dir`:
- `adapter_config.json`, `adapter_model.safetensors`: the final adapter (PEFT format);
- `README.md`: a model card (backbone, data counts, parameters, seed; an evaluation section
  that `fill_evaluation` fills: `rmlib.workbook.report` writes the model's main-table rows there);
- `checkpoint-<step>/`: every `save_steps` optimizer steps (the newest `save_total_limit`);
  a killed run called again resumes from the newest complete one and reaches the same final
  step and adapter weights as an uninterrupted run;
- `progress.csv` (+ `progress.jsonl`): one row per logged step: reward mean/std, parse-failure
  rate, per-task accuracy, KL, loss, learning rate, completion lengths;
- `training_settings.json`: the settings, backbone, seed and data provenance.

Sizes (per_device_train_batch_size counts completions, not prompts): group 8, micro-batch 4,
gradient accumulation 16 → 64 completions = 8 prompts per optimizer step; generation batch 16
(2 prompts × 8), so the KV cache of Qwen3-4B at 1,500 + 1,024 tokens stays near 6 GB;
activation checkpointing on. Sized to fit a 24 GB GPU for Qwen3-4B in NF4; the figures of
`benchmarks/gpu_check.py` are what to trust (it prints peak memory at these settings).

In a run, notebook 03 starts each model's training as `python -m rmlib.training.grpo --spec
<training dir>/launch.json` in a process of its own (rmlib.training.launch), so a colocated
engine's memory is released before the next model's starts.

Several GPUs of one node: `run.gpus: N` (or `rmlib run PARAMS --set run.gpus=N`) starts the same
`--spec` command under `accelerate launch --multi_gpu --num_processes N` (rmlib.training.launch):
data parallel, one full copy of the 4-bit model per GPU (device_map by local rank), with the
profile's own settings from the job file. TRL's sizes are per process (micro-batch and
accumulation; the generation batch is global); with grpo.keep_step_on_gpus (default) the job
file gets the profile's accumulation divided by N (`grpo_config.per_process`), so a step is
the profile's on any GPU count (the paper on 8 GPUs: 4 x 8 x 128/8 = 512 completions = 64
prompts of 8). The batch is checked for N processes when the params load
(`grpo_config.batch_plan`). With
grpo.use_vllm each process starts its own colocated engine on its GPU (TRL's colocate mode),
taking vllm_gpu_memory_utilization of that card and generating its share of each generation
batch, seeded by the run seed + its process index. The job's command line can also be run by
hand under `accelerate launch`; the `--mix/--output/--set` form starts from the grpo section's
defaults, not a profile's.

The CPU trap of bitsandbytes (environment.md) is guarded: every `Linear4bit` is set not to repack
its weight for CPU inference after loading and again after the trainer wraps the model.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from rmlib.config import MEMORY_SETTINGS, ConfigError, build_section, read_yaml
from rmlib.generation.vllm import MODEL_RUNNER_ENV
from rmlib.training.colocate import adapter_bases
from rmlib.training.grpo_config import GRPOSettings, batch_plan, per_process
from rmlib.training.grpo_trainer import build_trainer
from rmlib.training.model_card import write_model_card
from rmlib.writes import write_text

CHECKPOINT_PREFIX = "checkpoint-"


SETTINGS_JSON = "training_settings.json"


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint (trainer_state.json is the last file a save writes)."""
    root = Path(output_dir)
    found = []
    for path in root.glob(f"{CHECKPOINT_PREFIX}*"):
        step = path.name.removeprefix(CHECKPOINT_PREFIX)
        if step.isdigit() and (path / "trainer_state.json").is_file():
            found.append((int(step), path))
    return max(found)[1] if found else None


def train_grpo(
    dataset: Any,
    cfg: GRPOSettings,
    output_dir: str | Path,
    *,
    backbone: str,
    precision: str = "nf4",
    trust_remote_code: bool = False,
    seed: int = 0,
    provenance: dict[str, Any] | None = None,
    resume: bool = True,
    reward_funcs: Sequence[Callable[..., list[float]]] | None = None,
    callbacks: Sequence[Any] = (),
    verbose: bool = True,
    enable_thinking: bool = False,
) -> Path:
    """Train (or resume) and save the final adapter with its model card; returns output_dir.

    `provenance` is the mix's provenance (counts, source, N, ratio) for the model card.
    With `resume`, a run finds its newest complete checkpoint in output_dir and continues; a run
    that already finished with the same settings, backbone, thinking mode and data size is not
    redone. `enable_thinking` is the run's model.enable_thinking (`grpo_args`).
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if resume and _finished(out, cfg, backbone, precision, len(dataset), enable_thinking):
        return out
    trainer = build_trainer(
        dataset,
        cfg,
        out,
        backbone=backbone,
        precision=precision,
        trust_remote_code=trust_remote_code,
        seed=seed,
        reward_funcs=reward_funcs,
        callbacks=callbacks,
        verbose=verbose,
        enable_thinking=enable_thinking,
    )
    checkpoint = last_checkpoint(out) if resume else None
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    trainer.save_model(str(out))  # every process calls it; only the main one writes
    if trainer.accelerator.is_main_process:
        meta = {
            "backbone": backbone,
            "precision": precision,
            # QLoRA on vLLM trains on NF4 and samples from the unquantized base: say which
            "base": adapter_bases(precision, cfg.use_vllm),
            "seed": trainer.args.seed,
            "settings": asdict(cfg),
            "enable_thinking": enable_thinking,
            "provenance": provenance or {},
            "global_step": trainer.state.global_step,
            "n_items": len(dataset),
            "completed": True,
            "pid": os.getpid(),  # which process trained (rmlib.training.launch: one per model)
            "processes": trainer.accelerator.num_processes,  # data parallel (run.gpus)
            # as this process read it (generation.model_runner; None: vLLM's own choice)
            "vllm_model_runner_env": os.environ.get(MODEL_RUNNER_ENV),
            # as DDP ran it (None: one process, no DDP): grpo_args turns the search off
            "ddp_find_unused_parameters": getattr(
                trainer.model_wrapped, "find_unused_parameters", None
            ),
        }
        write_text(out / SETTINGS_JSON, json.dumps(meta, indent=2, default=str))
        write_model_card(out, meta)
    return out


def _finished(
    out: Path, cfg: GRPOSettings, backbone: str, precision: str, n_items: int, thinking: bool
) -> bool:
    """Did a run with these settings already finish in `out` (final adapter saved)?"""
    path = out / SETTINGS_JSON
    if not path.exists() or not (out / "adapter_config.json").exists():
        return False
    meta = json.loads(path.read_text())
    now = json.loads(json.dumps(asdict(cfg), default=str))
    same = _results_settings(now) == _results_settings(meta.get("settings") or {})
    return (
        bool(meta.get("completed"))
        and same
        and meta.get("backbone") == backbone
        and meta.get("precision") == precision
        and meta.get("n_items") == n_items
        and meta.get("enable_thinking") == thinking
    )


def _results_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """GRPO settings less the memory ones (rmlib.config.MEMORY_SETTINGS), with the completions
    per optimizer step they may not change: a finished training stays finished when only memory
    settings changed after it."""
    out = {k: v for k, v in settings.items() if f"grpo.{k}" not in MEMORY_SETTINGS}
    micro = settings.get("per_device_train_batch_size")
    accumulation = settings.get("gradient_accumulation_steps")
    out["completions_per_step"] = micro * accumulation if micro and accumulation else None
    return out


def _parse_set(items: Sequence[str]) -> dict[str, Any]:
    """`--set key=value` overrides of GRPOSettings, values read as a params file's YAML."""
    known = {f.name for f in fields(GRPOSettings)}
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in known:
            raise SystemExit(f"--set {item!r}: expected key=value with key one of {sorted(known)}")
        out[key] = read_yaml(value)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m rmlib.training.grpo` (or `accelerate launch -m rmlib.training.grpo`)."""
    from rmlib.training.mix import load_mix

    parser = argparse.ArgumentParser(prog="rmlib.training.grpo", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--spec", help="a job file of rmlib.training.launch (replaces every other option)"
    )
    parser.add_argument("--mix", help="a training mix folder (TrainMix.save)")
    parser.add_argument("--output", help="run folder for checkpoints and adapter")
    parser.add_argument("--backbone", help="hub id, local dir or embedded:… name")
    parser.add_argument("--precision", default="nf4", choices=["nf4", "bf16", "fp32"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    args = parser.parse_args(argv)
    if args.spec:
        return _run_spec(args.spec)
    missing = [f"--{k}" for k in ("mix", "output", "backbone") if getattr(args, k) is None]
    if missing:
        parser.error(f"{', '.join(missing)} required (or --spec)")
    dataset, provenance = load_mix(args.mix)
    # validated as a params file's grpo section is (ranges, types, the batch on the processes
    # accelerate launch started: WORLD_SIZE), before any model loads
    gpus = int(os.environ.get("WORLD_SIZE", 1))
    try:
        settings = build_section(GRPOSettings, _parse_set(args.set), "grpo", "--set")
        # the step stays --set's on WORLD_SIZE processes (grpo.keep_step_on_gpus)
        cfg = per_process(settings, gpus)
        batch_plan(cfg, gpus)
    except ConfigError as e:
        raise SystemExit(str(e)) from None
    except ValueError as e:  # as rmlib.run.config words a batch the processes cannot divide
        raise SystemExit(f"--set: 'grpo' on run.gpus = {gpus}: {e}") from None
    out = train_grpo(
        dataset,
        cfg,
        args.output,
        backbone=args.backbone,
        precision=args.precision,
        seed=args.seed,
        provenance=provenance,
        resume=not args.no_resume,
        # the mix's prompts were fitted with this switch: TRL must render them with it too
        enable_thinking=bool(provenance.get("enable_thinking", False)),
    )
    print(f"adapter saved in {out}")
    return 0


def _run_spec(path: str) -> int:
    """A job written by rmlib.training.launch, in this (child) process."""
    from rmlib.training.launch import TrainJob, follow_launcher
    from rmlib.training.mix import load_mix

    follow_launcher()
    job = TrainJob.load(path)
    try:  # on the processes this launch started (a hand `accelerate launch` may differ from
        # run.gpus), before any model loads
        batch_plan(job.grpo_settings(), int(os.environ.get("WORLD_SIZE", 1)))
    except ValueError as e:
        raise SystemExit(f"{path}: grpo: {e}") from None
    dataset, provenance = load_mix(job.mix)
    train_grpo(
        dataset,
        job.grpo_settings(),
        job.output,
        backbone=job.backbone,
        precision=job.precision,
        trust_remote_code=job.trust_remote_code,
        seed=job.seed,
        provenance=provenance,
        enable_thinking=job.enable_thinking,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
