"""GRPO with QLoRA on TRL 1.16: the unified judge (Pref. + Refl.) and its Pref.-only baselines.

`train_grpo(dataset, cfg, output_dir, backbone=...)` trains a LoRA adapter (all linear
projections, PEFT) on a 4-bit NF4 backbone with TRL's GRPOTrainer, on a training mix of
`rmlib.training.mix` (conversational prompts already fitted to our prompt budget; TRL 1.16's
GRPOConfig has no prompt cap). Pref. and Refl. items are shuffled together, so they share
batches; one reward rule scores both (`rmlib.training.reward`). The RFT baseline and the
same-volume baseline are the same call on the mix's other variants.

What it leaves in `output_dir`:
- `adapter_config.json`, `adapter_model.safetensors`: the final adapter (PEFT format);
- `README.md`: a model card (backbone, data counts, parameters, seed; an evaluation section
  that `fill_evaluation` fills: `rmlib.report` writes the model's main-table rows there);
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

Several GPUs (data parallel, one full copy of the 4-bit model per GPU; untested here, no GPUs):

    accelerate launch --multi_gpu --num_processes 4 -m rmlib.training.grpo \\
        --mix outputs/<run>/mix --output outputs/<run>/adapters/unified \\
        --backbone Qwen/Qwen3-4B --set gradient_accumulation_steps=4

Each process loads the backbone onto its own GPU (device_map by local rank); keep
per_device_train_batch_size × processes × accumulation a multiple of the group size, and divide
the accumulation by the number of processes to keep the same effective batch.

The CPU trap of bitsandbytes (environment.md) is guarded: every `Linear4bit` is set not to repack
its weight for CPU inference after loading and again after the trainer wraps the model.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from rmlib import status
from rmlib.config import PARAMS, Scheduler, doc
from rmlib.training.reward import DEFAULT_UNPARSEABLE_PENALTY, JudgmentReward

CHECKPOINT_PREFIX = "checkpoint-"
PROGRESS_CSV = "progress.csv"
PROGRESS_JSONL = "progress.jsonl"
SETTINGS_JSON = "training_settings.json"
EVAL_START = "<!-- rmlib:evaluation:start -->"
EVAL_END = "<!-- rmlib:evaluation:end -->"
PROGRESS_KEYS: tuple[str, ...] = (
    "reward",
    "reward_std",
    "parse_failure_rate",
    "accuracy/pref",
    "accuracy/refl",
    "kl",
    "loss",
    "learning_rate",
    "grad_norm",
    "entropy",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "step_time",
    "num_tokens",
)


@dataclass
class GRPOSettings:
    __pydantic_config__ = PARAMS

    """GRPO + QLoRA settings; the `grpo` section of a params file.

    Defaults are the paper's (method.md §3) where they fit one GPU; the rest are marked choices.
    """

    num_generations: int = doc("Group size: completions per prompt (ConsistRM: 8).", 8)
    learning_rate: float = doc(
        "Peak learning rate (paper: 1e-6, for full fine-tuning; LoRA often wants 1e-5–1e-4).",
        1e-6,
    )
    beta: float = doc("KL coefficient (ConsistRM: 1e-3; TRL's default is 0 = no KL).", 1e-3)
    max_completion_length: int = doc("Cap on a completion's tokens (paper: 1024).", 1024)
    num_train_epochs: float = doc("Passes over the mix (paper: 3).", 3.0)
    max_steps: int = doc("Stop after this many optimizer steps; -1 = run the epochs.", -1)
    per_device_train_batch_size: int = doc(
        "Completions (not prompts) per device micro-batch (24 GB / Qwen3-4B: 4).", 4
    )
    gradient_accumulation_steps: int = doc(
        "Micro-batches per optimizer step (4 x 16 = 64 completions = 8 prompts of 8).", 16
    )
    generation_batch_size: int | None = doc(
        "Completions generated at once (a multiple of the group size and of the micro-batch); "
        "None = micro-batch x accumulation. Bounds the KV cache.",
        16,
    )
    gradient_checkpointing: bool = doc("Activation checkpointing (needed for 24 GB).", True)
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"] = doc(
        "TRL loss: 'dapo' (token mean over the accumulated batch, verl's default aggregation; "
        "TRL's default), 'grpo' (per-sequence mean, the original), 'dr_grpo', 'bnpo'. "
        "The paper does not say (choice).",
        "dapo",
    )
    scale_rewards: Literal["group", "batch", "none"] = doc(
        "Advantage scaling: 'group' (divide by the group's std, original GRPO), 'batch', 'none'.",
        "group",
    )
    epsilon: float = doc("PPO clip range of the importance ratio (TRL/GRPO default 0.2).", 0.2)
    temperature: float = doc("Sampling temperature of the GRPO rollouts (paper: 1.0).", 1.0)
    top_p: float = doc("Nucleus sampling of the rollouts; 1.0 = off.", 1.0)
    top_k: int = doc("Top-k sampling of the rollouts; 0 = off.", 0)
    warmup_ratio: float = doc("Learning-rate warm-up share of the steps (ConsistRM: 10 %).", 0.1)
    lr_scheduler_type: Scheduler = doc(
        "Schedule after warm-up (choice: 'constant_with_warmup', verl's default).",
        "constant_with_warmup",
    )
    weight_decay: float = doc("AdamW weight decay.", 0.0)
    max_grad_norm: float = doc("Gradient clipping norm.", 1.0)
    lora_r: int = doc("LoRA rank.", 16)
    lora_alpha: int = doc("LoRA alpha (scale alpha / r).", 32)
    lora_dropout: float = doc(
        "LoRA dropout (0: GRPO's importance ratio compares two forward passes).", 0.0
    )
    lora_target_modules: str = doc(
        "LoRA targets: 'all-linear' = every linear projection.", "all-linear"
    )
    adapter_dtype: Literal["fp32", "bf16"] = doc(
        "dtype of the trainable LoRA weights: 'fp32' (default) or 'bf16'. TRL casts QLoRA "
        "adapters to bf16; at lr 1e-6 most bf16 updates round away, so we keep fp32.",
        "fp32",
    )
    unparseable_penalty: float = doc(
        "Reward of an unparseable or truncated judgment (correct 1, wrong 0; choice).",
        DEFAULT_UNPARSEABLE_PENALTY,
    )
    mask_truncated_completions: bool = doc(
        "Drop completions cut at the cap from the loss (off: they get the penalty instead).",
        False,
    )
    save_steps: int = doc("Checkpoint every this many optimizer steps.", 50)
    save_total_limit: int | None = doc("Keep this many newest checkpoints (None = all).", 2)
    logging_steps: int = doc("Log (and write progress.csv) every this many steps.", 1)
    seed: int | None = doc(
        "Training seed (sampling, data order, LoRA init); None = run seed.", None
    )
    bf16: bool | None = doc("bf16 autocast; None = on when CUDA is available.", None)
    torch_threads: int | None = doc("CPU threads for torch; None = torch's default.", None)
    use_vllm: bool = doc(
        "Generate GRPO's groups on a vLLM engine in the trainer's process (TRL's colocate "
        "mode; rmlib.training.colocate makes it run on CPU too). The policy's weights are "
        "pushed into the engine after each optimizer step (LoRA merged, copied, unmerged), so "
        "train on a bf16/fp32 base: merging into NF4 layers on every sync is lossy (refused).",
        False,
    )
    vllm_gpu_memory_utilization: float = doc(
        "use_vllm on CUDA: share of the card the colocated engine takes (weights + KV cache); "
        "the trainer needs the rest.",
        0.3,
    )
    vllm_cpu_kv_cache_gib: float = doc(
        "use_vllm on CPU: the colocated engine's KV cache in GiB.", 0.5
    )
    vllm_enable_sleep_mode: bool = doc(
        "use_vllm: free the engine's memory while the trainer steps (TRL issue #5312 reports "
        "stale weights with it in colocate mode; untested here: the CPU engine has no sleep).",
        False,
    )
    vllm_max_model_length: int | None = doc(
        "use_vllm: longest prompt + completion the engine accepts; None = the budget of the "
        "mix's longest prompts (prompts.max_reflection_prompt_tokens when it holds Refl. items, "
        "else prompts.max_prompt_tokens) + max_completion_length (the checkpoint's 40,960 "
        "would reserve KV for it).",
        None,
    )
    trl: dict = doc(
        "Any other trl.GRPOConfig field, by TRL's own name, e.g. {num_iterations: 2, "
        "top_entropy_quantile: 0.2}: parsed by transformers' HfArgumentParser (an unknown name "
        "or a bad value is refused when 03 starts; a field this section has is set there).",
        {},
    )

    def __post_init__(self) -> None:
        taken = set(self.trl) & {f.name for f in fields(self)}
        if taken:
            raise ValueError(f"grpo.trl sets {sorted(taken)}: set grpo.<name> instead")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.num_generations < 2:
            raise ValueError("num_generations (group size) must be >= 2")
        gen = self.generation_batch_size
        if gen is not None and gen % self.per_device_train_batch_size:
            raise ValueError("generation_batch_size must be a multiple of the micro-batch")
        steps_per_generation = (gen or 0) // self.per_device_train_batch_size
        if gen is not None and self.gradient_accumulation_steps % steps_per_generation:
            # a checkpoint must never fall inside a generation batch, or a resume regenerates it
            raise ValueError(
                "gradient_accumulation_steps must be a multiple of generation_batch_size / "
                "per_device_train_batch_size (a checkpoint must not split a generation batch)"
            )


GRPORecipe = GRPOSettings  # the name used in the issue


# ---------------------------------------------------------------- configuration


def grpo_args(
    cfg: GRPOSettings, output_dir: str | Path, *, seed: int = 0, enable_thinking: bool = False
) -> Any:
    """The trl.GRPOConfig of our settings, parsed by transformers' HfArgumentParser (TRL's own
    types and checks; no reporting).

    Every field of GRPOSettings that GRPOConfig has by the same name is passed under it; the few
    below are the project's (renamed, derived, or fixed for how rmlib runs), and `cfg.trl` adds
    any other GRPOConfig field. `enable_thinking` is the run's model.enable_thinking: TRL renders
    the mix's messages with it (chat_template_kwargs), as every other step renders its prompts."""
    import torch
    from transformers import HfArgumentParser
    from trl import GRPOConfig

    on_cuda = torch.cuda.is_available()
    bf16 = on_cuda and torch.cuda.is_bf16_supported() if cfg.bf16 is None else cfg.bf16
    seed = cfg.seed if cfg.seed is not None else seed
    trl_fields = {f.name for f in fields(GRPOConfig)}
    args = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name in trl_fields}
    args.update(
        output_dir=str(output_dir),
        gradient_checkpointing_kwargs={"use_reentrant": False},
        warmup_steps=cfg.warmup_ratio,  # a float < 1 is a ratio of the total steps
        chat_template_kwargs={"enable_thinking": enable_thinking},
        save_strategy="steps",
        seed=seed,
        data_seed=seed,
        bf16=bf16,
        vllm_mode="colocate",
        report_to="none",
        remove_unused_columns=False,  # the reward reads `label` and `task`
        shuffle_dataset=True,
        log_completions=False,
        disable_tqdm=False,
        dataloader_pin_memory=on_cuda,  # pinning needs an accelerator (else a warning a step)
    )
    unknown = sorted(set(cfg.trl) - trl_fields)
    if unknown:
        raise ValueError(f"grpo.trl: {unknown} are not trl.GRPOConfig fields")
    (config,) = HfArgumentParser(GRPOConfig).parse_dict({**args, **cfg.trl})
    return config


def lora_config(cfg: Any) -> Any:
    """LoRA on every linear projection (the lm_head excluded: TRL computes log-probs from it),
    from any settings with lora_r / lora_alpha / lora_dropout / lora_target_modules (GRPO's and
    the warm-up's): the one LoRA recipe of the project."""
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )


def load_policy(
    backbone: str, *, precision: str = "nf4", trust_remote_code: bool = False
) -> tuple[Any, Any]:
    """(model, tokenizer) for training: on this process's GPU when there is one, guarded on CPU."""
    import torch

    from rmlib.models import guard_bnb_cpu, load_backbone

    device_map = None
    if torch.cuda.is_available():
        device_map = {"": int(os.environ.get("LOCAL_RANK", "0"))}  # one copy per process
    model, tokenizer = load_backbone(
        backbone, precision=precision, trust_remote_code=trust_remote_code, device_map=device_map
    )
    guard_bnb_cpu(model)
    return model, tokenizer


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every id that ends a completion, as GRPOTrainer counts them (model eos ids, the
    tokenizer's eos, and pad, which TRL also accepts as a finished completion's last token)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    ids += [tokenizer.eos_token_id, tokenizer.pad_token_id]
    return sorted({int(i) for i in ids if i is not None})


# ---------------------------------------------------------------- the trainer


def _epoch_seeded_sampler_class() -> type:
    from trl.trainer.utils import RepeatSampler

    class EpochSeededRepeatSampler(RepeatSampler):
        """TRL's RepeatSampler with a permutation seeded by (seed, epoch).

        TRL's draws each epoch's order from one generator that a resumed run re-creates, so a run
        resumed in epoch 2 would replay epoch 1's order; seeding per epoch makes it exact.
        """

        def set_epoch(self, epoch: int) -> None:
            if self.shuffle:
                self.generator.manual_seed((self.seed or 0) + 1_000_003 * int(epoch))

    return EpochSeededRepeatSampler


def completion_logps(
    model: Any,
    input_ids: Any,
    attention_mask: Any,
    logits_to_keep: int,
    *,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    temperature: float = 1.0,
) -> tuple[Any, Any]:
    """Per-token log-probs (and entropies) of the last `logits_to_keep` tokens: a plain forward
    that projects only those positions through the LM head, then log-softmax and gather.

    Why: TRL 1.16 scores through its fused LM head kernel; without Triton (CPUs) that kernel
    scores every position, the prompt included, in torch tiles over the whole vocabulary, which
    made one SmolLM2 GRPO step of the demo take over 20 minutes here.
    """
    import torch
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    batch_size = batch_size or input_ids.size(0)
    logps, entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        ids = input_ids[start : start + batch_size]
        mask = attention_mask[start : start + batch_size]
        # logits_to_keep + 1 positions predict the last logits_to_keep tokens
        out = model(input_ids=ids, attention_mask=mask, logits_to_keep=logits_to_keep + 1)
        logits = out.logits[:, :-1, :] / temperature
        logps.append(selective_log_softmax(logits, ids[:, -logits_to_keep:]))
        if compute_entropy:
            entropies.append(entropy_from_logits(logits))
    return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None)


def _trainer_class() -> type:
    from trl import GRPOTrainer
    from trl.kernels.chunked_logprob import _use_triton

    sampler_class = _epoch_seeded_sampler_class()

    class ResumableGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose data order is a function of (seed, epoch) only (exact resumes), and
        whose log-probs on devices without Triton come from `completion_logps`."""

        def _get_per_token_logps_and_entropies(
            self,
            model: Any,
            input_ids: Any,
            attention_mask: Any,
            logits_to_keep: int,
            batch_size: int | None = None,
            compute_entropy: bool = False,
            compute_aux_loss: bool = False,
            **multimodal: Any,
        ) -> Any:
            plain = not _use_triton(input_ids.device) and not compute_aux_loss
            if not plain or any(v is not None for v in multimodal.values()):
                return super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size,
                    compute_entropy,
                    compute_aux_loss,
                    **multimodal,
                )
            with self.accelerator.autocast():
                logps, entropies = completion_logps(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size=batch_size,
                    compute_entropy=compute_entropy,
                    temperature=self.temperature,
                )
            return logps, entropies, None

        def _get_train_sampler(self, dataset: Any = None) -> Any:
            return sampler_class(
                data_source=dataset if dataset is not None else self.train_dataset,
                mini_repeat_count=self.num_generations,
                batch_size=self.args.generation_batch_size // self.num_generations,
                repeat_count=self.num_iterations * self.args.steps_per_generation,
                shuffle=self.shuffle_dataset,
                seed=self.args.seed,
            )

    return ResumableGRPOTrainer


def build_trainer(
    dataset: Any,
    cfg: GRPOSettings,
    output_dir: str | Path,
    *,
    backbone: str,
    precision: str = "nf4",
    trust_remote_code: bool = False,
    seed: int = 0,
    reward_funcs: Sequence[Callable[..., list[float]]] | None = None,
    callbacks: Sequence[Any] = (),
    verbose: bool = True,
    enable_thinking: bool = False,
) -> Any:
    """A ready GRPOTrainer: policy loaded and guarded, LoRA attached, the judgment reward bound.

    `reward_funcs` replaces the judgment reward (tests use one that varies within a group).
    `enable_thinking`: the chat template switch the mix was built with (`grpo_args`).
    """
    import torch

    from rmlib.models import guard_bnb_cpu
    from rmlib.training.colocate import colocated_generation

    check_dataset(dataset)
    if cfg.use_vllm and precision == "nf4":
        raise ValueError(
            "grpo.use_vllm with an nf4 training base: every weight sync would merge LoRA into "
            "4-bit layers (lossy); set model.train_precision to bf16 (or fp32), or use_vllm off"
        )
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    model, tokenizer = load_policy(
        backbone, precision=precision, trust_remote_code=trust_remote_code
    )
    if reward_funcs is None:
        reward_funcs = [JudgmentReward(eos_ids(model, tokenizer), cfg.unparseable_penalty)]
    with colocated_generation(cfg.vllm_cpu_kv_cache_gib):
        trainer = _trainer_class()(
            model=model,
            reward_funcs=list(reward_funcs),
            args=grpo_args(cfg, output_dir, seed=seed, enable_thinking=enable_thinking),
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=lora_config(cfg),
            callbacks=[progress_callback(output_dir, verbose=verbose), *callbacks],
        )
    set_adapter_dtype(trainer.model, cfg.adapter_dtype)
    guard_bnb_cpu(trainer.model)
    return trainer


def set_adapter_dtype(model: Any, dtype: str) -> int:
    """Cast the trainable (LoRA) weights to fp32 or bf16; returns how many tensors were cast."""
    import torch

    target = torch.float32 if dtype == "fp32" else torch.bfloat16
    count = 0
    for param in model.parameters():
        if param.requires_grad and param.dtype != target:
            param.data = param.data.to(target)
            count += 1
    return count


def check_dataset(dataset: Any) -> None:
    """A training mix must carry prompt, task and label columns with valid values."""
    missing = [c for c in ("prompt", "task", "label") if c not in dataset.column_names]
    if missing:
        raise ValueError(f"training dataset lacks column(s) {missing}: build it with build_mix")
    if len(dataset) == 0:
        raise ValueError("training dataset is empty: the mix selected no items")
    for row, (task, label) in enumerate(zip(dataset["task"], dataset["label"], strict=True)):
        if task not in ("pref", "refl") or label not in (1, 2):
            raise ValueError(f"training dataset row {row}: task {task!r} / label {label!r}")


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
            "seed": trainer.args.seed,
            "settings": asdict(cfg),
            "enable_thinking": enable_thinking,
            "provenance": provenance or {},
            "global_step": trainer.state.global_step,
            "n_items": len(dataset),
            "completed": True,
        }
        (out / SETTINGS_JSON).write_text(json.dumps(meta, indent=2, default=str))
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
    same = json.loads(json.dumps(asdict(cfg), default=str)) == meta.get("settings")
    return (
        bool(meta.get("completed"))
        and same
        and meta.get("backbone") == backbone
        and meta.get("precision") == precision
        and meta.get("n_items") == n_items
        and meta.get("enable_thinking") == thinking
    )


# ---------------------------------------------------------------- progress table


class ProgressTable:
    """Logs each training log as a row of progress.csv (and progress.jsonl) in the run folder.

    On a resumed run, rows past the checkpoint's step (written by the killed run) are dropped
    first, so the table has one row per step as if the run had never stopped. Use
    `progress_callback` to get it as a transformers TrainerCallback.
    """

    def __init__(self, output_dir: Path, verbose: bool = True) -> None:
        self.output_dir = Path(output_dir)
        self.verbose = verbose

    @property
    def jsonl(self) -> Path:
        return self.output_dir / PROGRESS_JSONL

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not self.jsonl.exists():
            return
        rows = [r for r in _read_jsonl(self.jsonl) if r["step"] <= state.global_step]
        self.jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
        self._write_csv(rows)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        status.report(f"GRPO {self.output_dir.name} steps", state.global_step, state.max_steps)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return  # only training-step logs carry a reward (the final summary does not)
        row = {"step": state.global_step, "epoch": logs.get("epoch", state.epoch)}
        row.update({k: _number(logs.get(k)) for k in PROGRESS_KEYS})
        with self.jsonl.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        self._write_csv(_read_jsonl(self.jsonl))
        if self.verbose:
            print(progress_line(row, state.max_steps), flush=True)

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        pd.DataFrame(rows, columns=["step", "epoch", *PROGRESS_KEYS]).to_csv(
            self.output_dir / PROGRESS_CSV, index=False
        )


def progress_callback(output_dir: str | Path, verbose: bool = True) -> Any:
    """A TrainerCallback writing the progress table (transformers imported only when needed)."""
    from transformers import TrainerCallback

    class ProgressTableCallback(ProgressTable, TrainerCallback):
        pass

    return ProgressTableCallback(Path(output_dir), verbose=verbose)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The progress records; a line cut by a kill is dropped (the next log step rewrites it)."""
    from rmlib.data._io import jsonl_rows

    return [r.data for r in jsonl_rows(path) if r.error is None and isinstance(r.data, dict)]


def progress_line(row: dict[str, Any], max_steps: int) -> str:
    """One human line per logged step: step, reward, parse failures, KL."""

    def f(key: str, fmt: str = ".3f") -> str:
        v = row.get(key)
        return "—" if v is None else format(v, fmt)

    return (
        f"step {row['step']}/{max_steps}  reward {f('reward')} ± {f('reward_std')}  "
        f"parse-fail {f('parse_failure_rate', '.2f')}  kl {f('kl', '.2e')}  "
        f"loss {f('loss', '.4f')}"
    )


def progress_table(output_dir: str | Path) -> pd.DataFrame:
    """The progress table of a training run folder (for the notebooks' plots)."""
    path = Path(output_dir) / PROGRESS_CSV
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run has not logged a step yet")
    return pd.read_csv(path)


# ---------------------------------------------------------------- model card


def write_model_card(out: Path, meta: dict[str, Any]) -> Path:
    """README.md of the adapter: backbone, data counts, parameters, seed, evaluation placeholder.

    An existing evaluation section (filled by `fill_evaluation`) is kept.
    """
    path = out / "README.md"
    evaluation = _evaluation_block(path.read_text()) if path.exists() else None
    counts = (meta.get("provenance") or {}).get("counts", {})
    settings = meta["settings"]
    lines = [
        "---",
        "library_name: peft",
        f"base_model: {meta['backbone']}",
        "tags: [rmlib, reflectrm, grpo, qlora, lora, generative-reward-model]",
        "---",
        "",
        f"# ReflectRM judge adapter ({counts.get('variant', 'mix')})",
        "",
        "LoRA adapter trained with GRPO (TRL) on the unified judgment tasks of ReflectRM: "
        "response preference (Pref.) and analysis preference (Refl.). Built with `rmlib`.",
        "",
        "## Backbone",
        "",
        f"- model: `{meta['backbone']}` (weights under the adapter: {meta['precision']})",
        f"- thinking mode: {'on' if meta.get('enable_thinking') else 'off'}",
        f"- optimizer steps: {meta['global_step']}",
        f"- seed: {meta['seed']}",
        "",
        "## Training data",
        "",
        *_data_lines(meta.get("provenance") or {}, meta["n_items"]),
        "",
        "## Parameters",
        "",
        "| parameter | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in settings.items()],
        "",
        "## Evaluation",
        "",
        evaluation or _EMPTY_EVALUATION,
        "",
    ]
    path.write_text("\n".join(lines))
    return path


_EMPTY_EVALUATION = (
    f"{EVAL_START}\nNot evaluated yet: the run's evaluation step writes its figures here.\n"
    f"{EVAL_END}"
)


def _data_lines(prov: dict[str, Any], n_items: int) -> list[str]:
    c = prov.get("counts", {})
    if not c:
        return [f"- items: {n_items} (no provenance recorded)"]
    return [
        f"- source: {', '.join(prov.get('sources', [])) or '?'}; rollouts: N = "
        f"{prov.get('n_samples')} per pair from `{prov.get('backbone') or '?'}`",
        f"- mix: variant {c.get('variant')}, ratio {c.get('ratio')}, seed {prov.get('seed')}",
        "",
        "| Pref. | Refl. | Sum | pairs | easy | mixed | all-wrong | correct+failed |",
        "|---|---|---|---|---|---|---|---|",
        f"| {c.get('pref')} | {c.get('refl')} | {c.get('total')} | {c.get('n_pairs')} | "
        f"{c.get('easy')} | {c.get('mixed')} | {c.get('all_wrong')} | "
        f"{c.get('correct_or_failed')} |",
    ]


def _evaluation_block(text: str) -> str | None:
    if EVAL_START in text and EVAL_END in text:
        start = text.index(EVAL_START)
        return text[start : text.index(EVAL_END, start) + len(EVAL_END)]
    return None


def fill_evaluation(adapter_dir: str | Path, markdown: str) -> Path:
    """Put evaluation figures (markdown, e.g. a table) into the model card's evaluation section."""
    path = Path(adapter_dir) / "README.md"
    text = path.read_text()
    block = _evaluation_block(text)
    if block is None:
        raise ValueError(f"{path}: no evaluation section markers: not an rmlib model card")
    return _write(path, text.replace(block, f"{EVAL_START}\n{markdown.strip()}\n{EVAL_END}"))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---------------------------------------------------------------- command line


def _parse_set(items: Sequence[str]) -> dict[str, Any]:
    """`--set key=value` overrides of GRPOSettings, values read as YAML scalars."""
    import yaml

    known = {f.name for f in fields(GRPOSettings)}
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in known:
            raise SystemExit(f"--set {item!r}: expected key=value with key one of {sorted(known)}")
        out[key] = yaml.safe_load(value)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m rmlib.training.grpo` (or `accelerate launch -m rmlib.training.grpo`)."""
    from rmlib.training.mix import load_mix

    parser = argparse.ArgumentParser(prog="rmlib.training.grpo", description=__doc__.split("\n")[0])
    parser.add_argument("--mix", required=True, help="a training mix folder (TrainMix.save)")
    parser.add_argument("--output", required=True, help="run folder for checkpoints and adapter")
    parser.add_argument("--backbone", required=True, help="hub id, local dir or embedded:… name")
    parser.add_argument("--precision", default="nf4", choices=["nf4", "bf16", "fp32"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    args = parser.parse_args(argv)
    dataset, provenance = load_mix(args.mix)
    cfg = GRPOSettings(**_parse_set(args.set))
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


if __name__ == "__main__":
    raise SystemExit(main())
