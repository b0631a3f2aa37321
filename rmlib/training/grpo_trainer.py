"""A ready TRL `GRPOTrainer`: the policy loaded (NF4 / bf16 / fp32) and guarded, LoRA attached, the
judgment reward bound, epochs seeded by their number, log-probs computed the same way on CPU and
GPU, the colocated vLLM engine when `use_vllm`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rmlib.training.grpo_config import GRPOSettings, grpo_args, lora_config
from rmlib.training.importance import cut_counts, cut_shares
from rmlib.training.progress import progress_callback
from rmlib.training.reward import JudgmentReward


def load_policy(
    backbone: str, *, precision: str = "nf4", trust_remote_code: bool = False
) -> tuple[Any, Any]:
    """(model, tokenizer) for training: on this process's GPU when there is one, guarded on CPU."""
    import torch

    from rmlib.generation.models import guard_bnb_cpu, load_backbone

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
        """GRPOTrainer whose data order is a function of (seed, epoch) only (exact resumes),
        whose log-probs on devices without Triton come from `completion_logps`, and which logs
        the share of sequences importance sampling cut (rmlib.training.importance)."""

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

        def __init__(self, *args: Any, faint_weight: float, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.faint_weight = faint_weight  # grpo.importance_sampling_faint_weight

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            output = super()._generate_and_score_completions(inputs)
            if "importance_sampling_ratio" in output:  # use_vllm with TRL's correction on
                self._log_cut_shares(output)
            return output

        def _log_cut_shares(self, output: dict[str, Any]) -> None:
            """The shares of sequences (and tokens) whose importance weight TRL zeroed or
            clipped or left faint, summed over processes, beside TRL's own sampling/* metrics."""
            counts = cut_counts(
                output["old_per_token_logps"],
                output["sampling_per_token_logps"],
                output["completion_mask"],
                mode=self.vllm_importance_sampling_mode,
                clip_min=self.vllm_importance_sampling_clip_min,
                clip_max=self.vllm_importance_sampling_clip_max,
                faint=self.faint_weight,
            )
            total = self.accelerator.gather(counts[None]).sum(dim=0)
            metrics = self._metrics["train" if self.model.training else "eval"]
            for key, share in cut_shares(total).items():
                metrics[key].append(share)

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

    from rmlib.generation.models import guard_bnb_cpu
    from rmlib.training.colocate import colocated_generation

    check_dataset(dataset)
    if cfg.use_vllm and precision == "nf4" and cfg.vllm_enable_sleep_mode:
        # QLoRA colocate serves the policy as an adapter on the engine's own unquantized base:
        # TRL's sleep (level 2) discards that base, and its wake-up re-pushes weights from the
        # trainer, whose base is 4-bit
        raise ValueError(
            "grpo.vllm_enable_sleep_mode with an nf4 training base and use_vllm: the engine's "
            "unquantized base would be discarded at each sleep; turn sleep mode off"
        )
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    model, tokenizer = load_policy(
        backbone, precision=precision, trust_remote_code=trust_remote_code
    )
    if reward_funcs is None:
        reward_funcs = [JudgmentReward(eos_ids(model, tokenizer), cfg.unparseable_penalty)]
    args = grpo_args(cfg, output_dir, seed=seed, enable_thinking=enable_thinking)
    # nf4 + use_vllm (QLoRA): the engine serves the checkpoint unquantized and the policy as a
    # LoRA adapter of this rank, pushed after each optimizer step (rmlib.training.colocate)
    with colocated_generation(
        precision, cfg.vllm_cpu_kv_cache_gib, seed=args.seed, lora_rank=cfg.lora_r
    ):
        trainer = _trainer_class()(
            model=model,
            reward_funcs=list(reward_funcs),
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=lora_config(cfg),
            callbacks=[progress_callback(output_dir, verbose=verbose), *callbacks],
            faint_weight=cfg.importance_sampling_faint_weight,
        )
    quiet_trainer(trainer)
    set_adapter_dtype(trainer.model, cfg.adapter_dtype)
    guard_bnb_cpu(trainer.model)
    return trainer


def quiet_trainer(trainer: Any) -> Any:
    """Take transformers' console callbacks off a trainer: its text progress bar and the raw
    metric dictionary (about 40 of TRL's keys) it prints at every logged step, which notebook 03
    relayed from the training process as text (tests/test_workbook.py fails an executed notebook
    on either). The progress table's callback keeps one line per logged step (`verbose`) and the
    run's status line (`rmlib.status`); the metrics are in progress.csv and 03's curves."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    # the notebook's own bar by name: importing transformers.utils.notebook imports IPython
    for cb in list(trainer.callback_handler.callbacks):
        if isinstance(cb, (ProgressCallback, PrinterCallback)) or (
            type(cb).__name__ == "NotebookProgressCallback"
        ):
            trainer.remove_callback(cb)
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
