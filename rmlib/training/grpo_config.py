"""The `grpo` section (`GRPOSettings`: the paper's hyperparameters where they fit one GPU, the
rest marked choices) and how it becomes TRL's `GRPOConfig` (transformers' HfArgumentParser; `trl`
for any other field) and PEFT's `LoraConfig` (the project's one LoRA recipe).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from rmlib.config import (
    PARAMS,
    Count,
    CountOrOff,
    Dropout,
    Finite,
    NonNegative,
    OpenShare,
    Positive,
    Scheduler,
    Seed,
    Share,
    doc,
)
from rmlib.generation.vllm import VLLM_LORA_RANKS
from rmlib.training.reward import DEFAULT_UNPARSEABLE_PENALTY

# a group needs two completions: GRPO's advantage is a completion's reward against its group's
GroupSize = Annotated[int, Field(ge=2)]


def _steps_or_epochs(steps: int) -> int:
    # -1 = run the epochs (transformers' convention); 0 steps would train nothing
    if steps == 0:
        raise ValueError("must be -1 (run the epochs) or >= 1, got 0")
    return steps


MaxSteps = Annotated[int, Field(ge=-1), AfterValidator(_steps_or_epochs)]
# [0, 1): a warm-up over every step would never reach the peak learning rate
WarmupRatio = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]


@dataclass
class GRPOSettings:
    __pydantic_config__ = PARAMS

    """GRPO + QLoRA settings; the `grpo` section of a params file.

    Defaults are the paper's (method.md §3) where they fit one GPU; the rest are marked choices.
    """

    num_generations: GroupSize = doc("Group size: completions per prompt (ConsistRM: 8).", 8)
    learning_rate: Positive = doc(
        "Peak learning rate (paper: 1e-6, for full fine-tuning; LoRA often wants 1e-5–1e-4).",
        1e-6,
    )
    beta: NonNegative = doc("KL coefficient (ConsistRM: 1e-3; TRL's default is 0 = no KL).", 1e-3)
    max_completion_length: Count = doc("Cap on a completion's tokens (paper: 1024).", 1024)
    num_train_epochs: Positive = doc("Passes over the mix (paper: 3).", 3.0)
    max_steps: MaxSteps = doc("Stop after this many optimizer steps; -1 = run the epochs.", -1)
    per_device_train_batch_size: Count = doc(
        "Completions (not prompts) per device micro-batch (24 GB / Qwen3-4B: 4).", 4
    )
    gradient_accumulation_steps: Count = doc(
        "Micro-batches per optimizer step (4 x 16 = 64 completions = 8 prompts of 8): the "
        "recipe's step, divided over run.gpus processes while keep_step_on_gpus holds.",
        16,
    )
    keep_step_on_gpus: bool = doc(
        "On run.gpus > 1, divide gradient_accumulation_steps by the GPU count, so an optimizer "
        "step takes the same completions on any number of GPUs (the profile is the recipe). "
        "False: TRL's meaning, accumulation per process, a step run.gpus times larger.",
        True,
    )
    generation_batch_size: Count | None = doc(
        "Completions generated at once, all processes together (a multiple of the group size "
        "and of micro-batch x run.gpus); None = micro-batch x run.gpus x accumulation. Bounds "
        "the KV cache (each process's engine holds its 1/run.gpus share).",
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
    epsilon: Positive = doc("PPO clip range of the importance ratio (TRL/GRPO default 0.2).", 0.2)
    # > 0: TRL divides the logits by it
    temperature: Positive = doc("Sampling temperature of the GRPO rollouts (paper: 1.0).", 1.0)
    top_p: OpenShare = doc("Nucleus sampling of the rollouts; 1.0 = off.", 1.0)
    top_k: CountOrOff = doc("Top-k sampling of the rollouts; 0 = off.", 0)
    warmup_ratio: WarmupRatio = doc(
        "Learning-rate warm-up share of the steps (ConsistRM: 10 %).", 0.1
    )
    lr_scheduler_type: Scheduler = doc(
        "Schedule after warm-up (choice: 'constant_with_warmup', verl's default).",
        "constant_with_warmup",
    )
    weight_decay: NonNegative = doc("AdamW weight decay.", 0.0)
    max_grad_norm: NonNegative = doc("Gradient clipping norm; 0 = no clipping.", 1.0)
    # vLLM's largest max_lora_rank (VLLM_LORA_RANKS); ranks in between are served under the next
    lora_r: Annotated[int, Field(ge=1, le=VLLM_LORA_RANKS[-1])] = doc(
        "LoRA rank, 1 to 512 (vLLM serves adapters up to rank 512; its max_lora_rank is the "
        "next of 1, 8, 16, 32, 64, 128, 256, 320, 512 up).",
        16,
    )
    lora_alpha: Count = doc("LoRA alpha (scale alpha / r).", 32)
    lora_dropout: Dropout = doc(
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
    unparseable_penalty: Finite = doc(
        "Reward of an unparseable or truncated judgment (correct 1, wrong 0; choice).",
        DEFAULT_UNPARSEABLE_PENALTY,
    )
    mask_truncated_completions: bool = doc(
        "Drop completions cut at the cap from the loss (off: they get the penalty instead).",
        False,
    )
    importance_sampling_faint_weight: Share = doc(
        "use_vllm: a sequence whose importance weight after TRL's correction (the mean of its "
        "tokens' in the token modes) is below this counts as faint in progress.csv "
        "(sampling/is_faint_sequences): it barely trains (choice: 0.1).",
        0.1,
    )
    importance_sampling_warn_share: Share = doc(
        "use_vllm: 03 warns in one line when TRL's importance sampling left faint, zeroed or "
        "clipped more than this share of a step's sequences, or weighted more than this share "
        "of its tokens below 1 / clip_max (sampling/is_low_tokens), on average over the steps "
        "(choice: 0.2).",
        0.2,
    )
    save_steps: Count = doc("Checkpoint every this many optimizer steps.", 50)
    save_total_limit: Count | None = doc("Keep this many newest checkpoints (None = all).", 2)
    logging_steps: Count = doc("Log (and write progress.csv) every this many steps.", 1)
    seed: Seed | None = doc(
        "Training seed: LoRA init (TRL seeds before wrapping the policy), data order, and the "
        "groups' sampling: when transformers generates them (use_vllm off), and with use_vllm "
        "the colocated engine's seed is this seed + the process index (TRL's own). "
        "None = run seed.",
        None,
    )
    bf16: bool | None = doc("bf16 autocast; None = on when CUDA is available.", None)
    torch_threads: Count | None = doc("CPU threads for torch; None = torch's default.", None)
    use_vllm: bool = doc(
        "Generate GRPO's groups on a vLLM engine in the trainer's process (TRL's colocate "
        "mode; rmlib.training.colocate makes it run on CPU too). The policy goes into the "
        "engine after each optimizer step: a bf16/fp32 base's weights with LoRA merged; with "
        "an nf4 base (QLoRA) the engine holds the checkpoint unquantized and gets the policy "
        "as a LoRA adapter (LoRARequest), as merging into 4-bit layers would be lossy.",
        False,
    )
    vllm_gpu_memory_utilization: OpenShare = doc(
        "use_vllm on CUDA: share of the card the colocated engine takes (weights + KV cache); "
        "the trainer needs the rest.",
        0.3,
    )
    vllm_cpu_kv_cache_gib: Positive = doc(
        "use_vllm on CPU: the colocated engine's KV cache in GiB.", 0.5
    )
    vllm_enable_sleep_mode: bool = doc(
        "use_vllm: free the engine's memory while the trainer steps (TRL issue #5312 reports "
        "stale weights with it in colocate mode; untested here: the CPU engine has no sleep).",
        False,
    )
    vllm_max_model_length: Count | None = doc(
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
        gen = self.generation_batch_size
        # what holds on any number of processes; batch_plan checks the rest for a world size
        if gen is not None and gen % self.num_generations:
            raise ValueError(_groups_error(gen, self.num_generations))
        if gen is not None and gen % self.per_device_train_batch_size:
            raise ValueError("generation_batch_size must be a multiple of the micro-batch")


def _groups_error(gen: int, group: int) -> str:
    return (
        f"generation_batch_size ({gen}; None = micro-batch x processes x accumulation) must be "
        f"a multiple of num_generations ({group}): whole groups are generated"
    )


@dataclass(frozen=True)
class BatchPlan:
    """TRL's batch arithmetic on `processes` data-parallel processes (GRPOConfig.__post_init__):
    the generation batch is global, each process trains on its share in micro-batches."""

    processes: int
    generation_batch: int  # completions generated at once, all processes together
    steps_per_generation: int  # micro-batches each process takes from one generation batch
    step_completions: int  # per optimizer step: micro-batch x processes x accumulation
    step_prompts: int  # step_completions / num_generations

    def line(self, cfg: GRPOSettings) -> str:
        """One line saying how a step is made, for the launcher's log."""
        return (
            f"{cfg.per_device_train_batch_size} completions x {self.processes} processes x "
            f"{cfg.gradient_accumulation_steps} accumulation = {self.step_completions} completions "
            f"({self.step_prompts} prompts of {cfg.num_generations}) per optimizer step; "
            f"{self.generation_batch} generated at once"
        )


def per_process(cfg: GRPOSettings, processes: int) -> GRPOSettings:
    """The settings each of `processes` processes trains with (TRL's per-process sizes). With
    keep_step_on_gpus the accumulation is divided by the processes, so the step stays the
    profile's; the result has it off, so applying this twice divides once."""
    if processes == 1 or not cfg.keep_step_on_gpus:
        return cfg
    accumulation = cfg.gradient_accumulation_steps
    if accumulation % processes:
        raise ValueError(
            f"gradient_accumulation_steps ({accumulation}) must be a multiple of the processes "
            f"({processes}) for the step to stay the same on {processes} GPUs "
            "(grpo.keep_step_on_gpus); or set grpo.keep_step_on_gpus: false for a step "
            f"{processes} times larger"
        )
    return replace(
        cfg, gradient_accumulation_steps=accumulation // processes, keep_step_on_gpus=False
    )


def batch_plan(cfg: GRPOSettings, processes: int = 1) -> BatchPlan:
    """The batch of `cfg` on `processes` processes, or one ValueError line saying why TRL (or our
    checkpoint rule) would refuse it. TRL divides the generation batch by micro-batch x processes;
    `cfg` holds TRL's per-process sizes (`per_process` gives them from a profile's)."""
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    micro, accumulation = cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps
    world = micro * processes
    gen = cfg.generation_batch_size
    if gen is None:  # TRL: one generation batch per optimizer step
        gen = world * accumulation
    elif gen % world:
        raise ValueError(
            f"generation_batch_size ({gen}) must be a multiple of per_device_train_batch_size x "
            f"processes ({micro} x {processes} = {world}): TRL splits each generation batch "
            "evenly over the processes"
        )
    if gen % cfg.num_generations:
        raise ValueError(_groups_error(gen, cfg.num_generations))
    steps = gen // world
    if accumulation % steps:
        # a checkpoint must never fall inside a generation batch, or a resume regenerates it
        raise ValueError(
            f"gradient_accumulation_steps ({accumulation}) must be a multiple of "
            f"generation_batch_size / (per_device_train_batch_size x processes) = "
            f"{gen} / ({micro} x {processes}) = {steps}: a checkpoint must not split a "
            "generation batch"
        )
    completions = world * accumulation
    return BatchPlan(processes, gen, steps, completions, completions // cfg.num_generations)


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
        # every trainable parameter is a LoRA weight on a linear projection every forward runs,
        # so DDP (run.gpus > 1) need not search the graph for unused ones after each backward:
        # transformers turns that search on for any model that is no PreTrainedModel (a PEFT
        # model is not). One process: no DDP, no effect. grpo.trl can set it back.
        ddp_find_unused_parameters=False,
        shuffle_dataset=True,
        log_completions=False,
        disable_tqdm=False,
        dataloader_pin_memory=on_cuda,  # pinning needs an accelerator (else a warning a step)
        # without CUDA, accelerate joins the processes of `accelerate launch` over gloo only when
        # told the CPU is the device (else each process would train alone); one process: no-op
        use_cpu=not on_cuda,
    )
    check_trl_keys(cfg.trl)
    (config,) = HfArgumentParser(GRPOConfig).parse_dict({**args, **cfg.trl})
    return config


# grpo.trl fields TRL takes as a plain string and never checks (a misspelt mode would reach the
# trainer, inside notebook 03): their values, from TRL's own field help (tests/test_grpo_config
# checks each is named there).
TRL_CHOICES: dict[str, tuple[str, ...]] = {
    "vllm_importance_sampling_mode": (
        "token_truncate",
        "token_mask",
        "sequence_truncate",
        "sequence_mask",
    ),
    "importance_sampling_level": ("token", "sequence"),
}


def check_trl_keys(trl: dict[str, Any]) -> None:
    """Refuse a grpo.trl key that trl.GRPOConfig does not have (`rmlib run` and its dry run call
    this before any work; torch-free, see trl_config_fields)."""
    if not trl:
        return
    unknown = sorted(set(trl) - trl_config_fields())
    if unknown:
        raise ValueError(f"'grpo.trl': {unknown} are not trl.GRPOConfig fields")
    for key, allowed in TRL_CHOICES.items():
        if key in trl and trl[key] not in allowed:
            raise ValueError(
                f"'grpo.trl.{key}': {trl[key]!r} is not one of TRL's modes {list(allowed)}"
            )


def trl_config_fields() -> frozenset[str]:
    """trl.GRPOConfig's field names, read from the source of its dataclass and of its bases (TRL's
    and transformers'). Importing TRL would import torch, which the dry run must not; a test
    checks this set against dataclasses.fields(GRPOConfig)."""
    return frozenset(_dataclass_fields("trl.trainer.grpo_config", "GRPOConfig"))


@functools.cache
def _dataclass_fields(module: str, name: str) -> set[str]:
    """The annotated names of class `name` of `module` and of its bases, followed through the
    `from ... import` lines of the file defining it (no module is imported)."""
    path, package = _source_of(module, name)
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    names = {
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and "ClassVar" not in ast.unparse(s.annotation)
    }
    imported = _imports(tree, package)
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in imported:
            names |= _dataclass_fields(imported[base.id], base.id)
    return names


def _imports(tree: ast.Module, package: str) -> dict[str, str]:
    """Name -> absolute module of a file's top-level `from X import name` lines."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            parent = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(p for p in (parent, node.module) if p)
            out.update({a.asname or a.name: source for a in node.names})
    return out


def _source_of(module: str, name: str) -> tuple[Path, str]:
    """(file defining class `name` of `module`, that file's package): the module's own file, else
    (a package re-exporting it lazily, as transformers does) the one file beside it that does."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)  # a top-level find_spec imports nothing
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"cannot check grpo.trl: package {top!r} is not installed")
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    if base.with_suffix(".py").is_file():
        path, package = base.with_suffix(".py"), module.rpartition(".")[0]
    else:
        path, package = base / "__init__.py", module
    if not _defines(path, name):
        hits = [f for f in sorted(path.parent.glob("*.py")) if _defines(f, name)]
        if len(hits) != 1:
            raise ValueError(
                f"cannot check grpo.trl: no one file under {path.parent} defines {name}"
            )
        path = hits[0]
    return path, package


def _defines(path: Path, name: str) -> bool:
    return re.search(rf"^class {name}\b", path.read_text(), re.MULTILINE) is not None


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
