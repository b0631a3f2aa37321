"""The supervised format warm-up: teach a tiny model to write `<Analysis>…</Analysis><Result>…`.

Tiny backbones (the tiny Qwen3, SmolLM2-135M) never produce the verdict format zero-shot (0 %
parse), so GRPO on them gets the same reward on every completion and learns nothing. A short
LoRA SFT on well-formed judgments of demo pairs fixes the format first (method.md §3: "an
optional extra, needed only for tiny models"); rollouts and GRPO then start from the warmed-up
model. Qwen3-4B needs none (`WarmupConfig.enabled` is off by default).

Examples are prompt/completion pairs in plain text: the prompt is exactly what generation
feeds the model (`rmlib.judge.prompts` rendering with the run's model.enable_thinking and
prompts.critique_with_result, fitted to our prompt budget: a Refl. example to its reflection
limit), the completion a correct judgment (`reference_analysis` + `format_judgment`; TRL appends
the end-of-turn token).
Loss is on the completion only. A share of the examples are Refl. items (a correct and a wrong
critique of the pair), so the reflection's format and verdict nouns are learnt too. What their
targets decide is `refl_targets`: by default ('format') a seeded coin, independent of which
critique is right, so the warmed model, the run's *base*, was taught Pref. decisions and the
Refl. format but never to pick the right critique, as the paper's untrained backbone was not
(its Table 3 and Figure 4 compare such a backbone with one trained on Refl. items). 'correct'
teaches the right critique, re-judged from the pair's evidence: a base trained on Refl. decisions.

Measured here with these prompts (SmolLM2-135M, LoRA r=16 on all linear layers, 64 examples,
batch 4, 1,024-token prompt budget; rollouts sampled at temperature 1, 4 per pair on 16 demo
pairs): 1 epoch at lr 2e-4 left 1 of 64 rollouts parseable at a 96-token cap; 2 epochs at 5e-4
(the defaults) gave 62 of 64 at a 128-token cap (2 cut at the cap), accuracy 0.52. The targets
are 62–127 SmolLM2 tokens long (median 68): a rollout cap below ~130 tokens truncates some.
Format is not judgment: on the held-out demo pairs those defaults judge at chance (0.50), while
evidence-first targets (`analysis_style`), 3 epochs at 1e-3 and three families reach 0.60-0.65
(docs/demo-judge.md, benchmarks/demo_warmup.py).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator

from rmlib import status
from rmlib.config import PARAMS, Count, Dropout, Positive, Precision, Scheduler, Seed, Share, doc
from rmlib.data.demo import load_demo, reference_analysis
from rmlib.data.demo.analyses import AnalysisStyle
from rmlib.data.demo.loader import check_families
from rmlib.data.pair import Pair
from rmlib.judge import prompts

ReflTargets = Literal["format", "correct"]


@dataclass
class WarmupConfig:
    __pydantic_config__ = PARAMS

    """The format warm-up (LoRA SFT); the `warmup` section of a params file."""

    enabled: bool = doc("Run the warm-up (tiny models only; Qwen3-4B needs none).", False)
    n_examples: Count = doc("Demo pairs to learn from (64 taught SmolLM2 the format).", 64)
    families: Annotated[list[str], AfterValidator(check_families)] | None = doc(
        "Demo families to draw them from (rmlib.data.demo.FAMILIES); None = all. Keep them "
        "those the run evaluates (data.eval's options.families).",
        None,
    )
    refl_share: Share = doc("Share of examples that are Refl. items (both verdict nouns).", 0.25)
    refl_targets: ReflTargets = doc(
        "What a Refl. example's target decides: 'format' (the reflection's format only: the "
        "critique judged better is a seeded coin, independent of which critique is right, and "
        "the analysis only states what each critique concludes, so base is never taught Refl. "
        "decisions, as the paper's untrained backbone was not) or 'correct' (the right critique, "
        "re-judged from the pair's evidence: base is trained on Refl. decisions).",
        "format",
    )
    analysis_style: AnalysisStyle = doc(
        "The target analyses (rmlib.data.demo.analyses): 'verdict' states the better response "
        "first, then why; 'evidence' states each response's checkable fact in slot order, "
        "judges it, then concludes.",
        "verdict",
    )
    epochs: Positive = doc(
        "Passes over the examples (SmolLM2 here: 1 epoch at lr 2e-4 left ~2 % of sampled "
        "rollouts parseable, 2 epochs at 5e-4 97 %; module docstring).",
        2.0,
    )
    batch_size: Count = doc("Examples per device batch.", 4)
    train_sampling_strategy: Literal["random", "group_by_length"] = doc(
        "transformers' batch sampler: 'random', or 'group_by_length' (batches of examples of "
        "similar length, less padding: Refl. examples run ~1.5x a Pref. example's tokens).",
        "random",
    )
    gradient_accumulation_steps: Count = doc("Batches per optimizer step.", 1)
    learning_rate: Positive = doc("Peak learning rate of the LoRA SFT.", 5e-4)
    lr_scheduler_type: Scheduler = doc("Learning-rate schedule.", "linear")
    lora_r: Count = doc("LoRA rank.", 16)
    lora_alpha: Count = doc("LoRA alpha.", 32)
    lora_dropout: Dropout = doc("LoRA dropout.", 0.0)
    lora_target_modules: str = doc("LoRA targets ('all-linear').", "all-linear")
    max_length: Count = doc("Longest prompt + completion in tokens (longer are cut).", 1024)
    precision: Precision = doc(
        "Weights under the adapter: 'auto' (bf16 on a GPU and on CPUs with AMX / AVX-512 BF16, "
        "fp32 on others; rmlib.generation.models.resolve_precision), 'fp32', 'bf16' or 'nf4'.",
        "auto",
    )
    merged_dtype: Literal["bf16", "fp32"] = doc(
        "dtype of the merged checkpoint written for generation.", "bf16"
    )
    gradient_checkpointing: bool = doc("Activation checkpointing (off: ~26 % faster here).", False)
    data_seed: Seed | None = doc(
        "Seed of the demo pairs drawn; None = run seed + 1 (so they "
        "differ from the rollout pairs).",
        None,
    )
    seed: Seed | None = doc("Training seed; None = run seed.", None)
    torch_threads: Count | None = doc("CPU threads for torch; None = torch's default.", None)


@dataclass
class WarmupResult:
    adapter_dir: Path
    merged_dir: Path | None
    n_examples: int
    steps: int
    train_loss: float | None
    n_cut: int = 0  # examples longer than max_length: their targets cut or dropped (examples_cut)


# ---------------------------------------------------------------- examples


def refl_reference_analysis(pair: Pair, good_slot: int, style: AnalysisStyle = "verdict") -> str:
    """A correct Refl. analysis: the critique in `good_slot` is right about which response wins.
    'evidence' style: what each critique prefers first, then the pair's own evidence, then which
    critique is right (the conclusion last, as in its Pref. analyses)."""
    bad_slot = 3 - good_slot
    analysis = reference_analysis(pair, style)
    if style == "evidence":
        prefers = {good_slot: pair.label, bad_slot: 3 - pair.label}
        return (
            f"Critique 1 prefers Response {prefers[1]}. Critique 2 prefers Response {prefers[2]}. "
            f"{analysis} So Critique {good_slot} reaches the right conclusion."
        )
    return (
        f"Critique {good_slot} reaches the right conclusion. {analysis} "
        f"Critique {bad_slot} prefers Response {3 - pair.label}, which is wrong."
    )


def refl_format_analysis(pair: Pair, good_slot: int) -> str:
    """A Refl. analysis that decides nothing: what each critique concludes, in slot order, and
    no word on the pair itself (its evidence would tell which critique is right)."""
    prefers = {good_slot: pair.label, 3 - good_slot: 3 - pair.label}
    return (
        f"Critique 1 concludes that Response {prefers[1]} is better. "
        f"Critique 2 concludes that Response {prefers[2]} is better."
    )


def warmup_example(
    fmt: prompts.PromptFormat,
    pair: Pair,
    task: str,
    rng: random.Random,
    style: AnalysisStyle = "verdict",
    *,
    coin: int | None = None,
) -> dict[str, str]:
    """One prompt/completion example of `task` for a demo pair; a Pref. target is a correct
    judgment whose analysis has `style` (WarmupConfig.analysis_style). A Refl. target prefers
    the correct critique, or with `coin` (1 or 2, drawn where the pair cannot be seen:
    `refl_targets='format'`) the critique in that slot, with an analysis that judges nothing."""
    good = prompts.format_judgment(reference_analysis(pair, style), pair.label, "pref")
    if task == "pref":
        prompt = fmt.pref(pair).text
        return {"prompt": prompt, "completion": good, "task": "pref"}
    flipped = replace(pair, label=3 - pair.label)  # its reference analysis argues the wrong way
    bad = prompts.format_judgment(reference_analysis(flipped, style), flipped.label, "pref")
    slot = rng.choice((1, 2))
    c1, c2 = (good, bad) if slot == 1 else (bad, good)
    prompt = fmt.refl(pair, c1, c2).text
    if coin is None:
        analysis, choice = refl_reference_analysis(pair, slot, style), slot
    else:
        analysis, choice = refl_format_analysis(pair, slot), coin
    completion = prompts.format_judgment(analysis, choice, "refl")
    return {"prompt": prompt, "completion": completion, "task": "refl"}


def warmup_dataset(
    fmt: prompts.PromptFormat, pairs: Sequence[Pair], cfg: WarmupConfig, *, seed: int = 0
) -> Any:
    """The warm-up examples as a Dataset (prompt, completion, task); the Refl. share is seeded.

    `fmt` is the run's prompt format (`PromptFormat.of`), so the examples look like the prompts
    the model will be given. With `refl_targets='format'` each Refl. decision is the next draw
    of its own stream (`refl_coins`), which sees neither the pair nor where its correct critique
    sits: the decisions carry no label information."""
    from datasets import Dataset

    rng = random.Random(f"{seed}:warmup")
    order = list(range(len(pairs)))
    rng.shuffle(order)
    n_refl = round(cfg.refl_share * len(pairs))
    refl = set(order[:n_refl])
    coins = refl_coins(seed) if cfg.refl_targets == "format" else None
    rows = []
    for i, p in enumerate(pairs):
        task = "refl" if i in refl else "pref"
        coin = next(coins) if coins is not None and task == "refl" else None
        rows.append(warmup_example(fmt, p, task, rng, cfg.analysis_style, coin=coin))
    return Dataset.from_list(rows)


def refl_coins(seed: int) -> Iterator[int]:
    """The Refl. decisions of a 'format' warm-up, in example order: fair coins (1 or 2) of their
    own seeded stream, apart from the stream that places the critiques."""
    rng = random.Random(f"{seed}:warmup-refl-decisions")
    while True:
        yield rng.choice((1, 2))


def examples_cut(tokenizer: Any, dataset: Any, max_length: int) -> int:
    """How many examples are longer than `max_length` tokens (prompt + completion + end token).
    TRL's SFTTrainer keeps their start, so their target is cut, or dropped with the example when
    the prompt alone fills the limit (as a Refl. prompt can): the model never sees such a
    reflection end (the demo's reflections all ran to their cap while 15 of its 16 Refl. examples
    were over 448 tokens)."""
    return sum(
        len(tokenizer(row["prompt"] + row["completion"])["input_ids"]) + 1 > max_length
        for row in dataset
    )


def warmup_pairs(cfg: WarmupConfig, *, seed: int = 0) -> list[Pair]:
    """Demo training pairs for the warm-up, drawn with data_seed (default: seed + 1)."""
    data_seed = cfg.data_seed if cfg.data_seed is not None else seed + 1
    return load_demo(split="train", n=cfg.n_examples, seed=data_seed, families=cfg.families).pairs


# ---------------------------------------------------------------- training


def _precision(cfg: WarmupConfig) -> str:
    from rmlib.generation.models import resolve_precision

    return resolve_precision(cfg.precision)[0]


def sft_args(cfg: WarmupConfig, output_dir: str | Path, *, seed: int = 0) -> Any:
    import torch
    from trl import SFTConfig

    seed = cfg.seed if cfg.seed is not None else seed
    return SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        train_sampling_strategy=cfg.train_sampling_strategy,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        max_length=cfg.max_length,
        completion_only_loss=True,
        packing=False,
        gradient_checkpointing=cfg.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        data_seed=seed,
        disable_tqdm=False,  # a bar with an ETA (BarOnly keeps the per-step dicts out of it)
        dataloader_pin_memory=torch.cuda.is_available(),  # pinning needs an accelerator
    )


def build_sft_trainer(
    dataset: Any,
    cfg: WarmupConfig,
    output_dir: str | Path,
    *,
    backbone: str,
    seed: int = 0,
    trust_remote_code: bool = False,
) -> Any:
    """An SFTTrainer: backbone + fresh LoRA on all linear layers, completion-only loss."""
    import torch
    from transformers.trainer_callback import ProgressCallback
    from trl import SFTTrainer

    from rmlib.training.grpo_config import lora_config
    from rmlib.training.grpo_trainer import load_policy

    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    model, tokenizer = load_policy(
        backbone, precision=_precision(cfg), trust_remote_code=trust_remote_code
    )
    lora = lora_config(cfg)
    trainer = SFTTrainer(
        model=model,
        args=sft_args(cfg, output_dir, seed=seed),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
    )
    # the steps' logs stay in trainer.state.log_history; the bar
    # shows progress and time left instead of printing one dict per step
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(_bar_only_callback())
    return trainer


def _bar_only_callback() -> Any:
    from transformers.trainer_callback import ProgressCallback

    class BarOnly(ProgressCallback):
        """transformers' progress bar (steps, elapsed, ETA) without its per-step log lines."""

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            return None

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            super().on_step_end(args, state, control, **kw)
            status.report("warm-up steps", state.global_step, state.max_steps)

    return BarOnly()


@contextlib.contextmanager
def label_positions_only() -> Iterator[None]:
    """TRL's fused LM head scores only the positions with a label on every device.

    TRL 1.16's `_fused_forward` (trl/trainer/utils.py) compacts the hidden states to the labelled
    positions only where Triton runs (CUDA, XPU); elsewhere it scores every position, to keep tile
    shapes fixed for compilers such as Neuron's. On CPU, in eager mode, nothing recompiles, and the
    warm-up's loss is on the completion alone (about a fifth of each example): scoring the prompt
    too made the fp32 LM head 37 % of a step. The rows kept are scored by the same fp32 tiles, so
    the loss and gradients are the same up to summation order. The patch is the module's own name
    `_use_triton`, which only that line reads there (the kernels read their module's own)."""
    from trl.trainer import utils as trl_utils

    original = trl_utils._use_triton
    trl_utils._use_triton = lambda device: True
    try:
        yield
    finally:
        trl_utils._use_triton = original


def run_warmup(
    pairs: Sequence[Pair],
    cfg: WarmupConfig,
    output_dir: str | Path,
    *,
    backbone: str,
    fmt: prompts.PromptFormat,
    seed: int = 0,
    merged_dir: str | Path | None = None,
    trust_remote_code: bool = False,
) -> WarmupResult:
    """Train the warm-up adapter into output_dir; with merged_dir, also write backbone + adapter
    merged into a plain checkpoint there (what rollouts, GRPO and evaluation then load). `fmt`:
    the run's prompt format, over the backbone's tokenizer."""
    dataset = warmup_dataset(fmt, pairs, cfg, seed=seed)
    trainer = build_sft_trainer(
        dataset, cfg, output_dir, backbone=backbone, seed=seed, trust_remote_code=trust_remote_code
    )
    with label_positions_only():
        result = trainer.train()
    trainer.save_model(str(output_dir))
    merged = None
    if merged_dir is not None:
        from rmlib.generation.models import merge_adapter  # torch: not at import

        merged = merge_adapter(
            backbone,
            output_dir,
            merged_dir,
            dtype=cfg.merged_dtype,
            trust_remote_code=trust_remote_code,
        )
    loss = getattr(result, "training_loss", None)
    cut = examples_cut(fmt.tokenizer, dataset, cfg.max_length)
    steps = trainer.state.global_step
    return WarmupResult(Path(output_dir), merged, len(dataset), steps, loss, cut)
