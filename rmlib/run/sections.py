"""The run's own sections of a params file: `run` (name, seed, notebooks, GPUs), `rollouts` (the
untrained judge's samples per training pair), `eval` (which models, bootstrap, failure credit)
and `plan` (the dry run's assumptions: nothing there changes what a run does, and the run's
params hash leaves it out, so editing it never re-runs a finished notebook)."""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator

from rmlib.config import PARAMS, Count, OpenShare, Positive, Seed, Share, doc, project_root

# The models a profile can evaluate (and so train), in the paper's order: the backbone; GRPO on
# Pref. only (the RFT baseline); Pref. only at the mix's full volume (Table 3); unified
# Pref. + Refl. (ReflectRM); a judge trained on Refl. only (Figure 4), whose stage 2 reflects on
# another model's stage-1 judgments (eval.refl_only_stage1). Their mixes: run_models.MIX_VARIANT.
Model = Literal["base", "rft", "same_volume", "unified", "refl_only"]


# the longest folder name Linux file systems take (NAME_MAX), in bytes
MAX_NAME_BYTES = 255


def check_run_name(name: str) -> str:
    """A run name is one plain folder name: the run folder is output_root/name, and a name with
    a separator, '..' or an absolute path would put a run's files (executed notebooks, tables)
    outside output_root, over the project's own files."""
    # no separator: so no absolute name either
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(
            f"run name {name!r} is not one folder name: not '', '.' or '..', no '/', '\\' or "
            "NUL, not absolute (run.output_root says where run folders go)"
        )
    if len(name.encode()) > MAX_NAME_BYTES:
        raise ValueError(
            f"run name {name[:40]!r}... is {len(name.encode())} bytes, over the {MAX_NAME_BYTES} a "
            "folder name holds (NAME_MAX): shorten it"
        )
    # a name is printed in logs, tables and terminals: no newline, terminal escape (control
    # characters), bidi override or other invisible format character that would forge them
    for c in name:
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            what = unicodedata.name(c, "a control character")
            raise ValueError(
                f"run name {name[:80]!r} holds U+{ord(c):04X} ({what}): a run name is printed in "
                "logs and terminals; use letters, digits, '-', '_' and '.'"
            )
    return name


def check_notebooks(stems: list[str]) -> list[str]:
    """A run runs something: an empty notebook list would run nothing and report success."""
    if not stems:
        raise ValueError(
            "no notebooks: a run runs at least one (stems of notebooks/*.ipynb, e.g. 01_data); "
            "leave run.notebooks out for all of them"
        )
    return stems


def notebook_stems() -> list[str]:
    """The workbook's notebooks: the stems of notebooks/*.ipynb in the project."""
    return sorted(p.stem for p in (project_root() / "notebooks").glob("*.ipynb"))


def expand_home(folder: str) -> str:
    """`~` or `~user` at the start of output_root is the home folder, as a shell would expand it
    (a folder literally named `~` is never what was meant); an unknown user's is refused."""
    expanded = os.path.expanduser(folder)
    if expanded.startswith("~"):
        raise ValueError(
            f"{folder!r} starts with '~' but names no home folder of this machine: give the "
            "path in full"
        )
    return expanded


def check_notebook(stem: str) -> str:
    """Only the workbook's own notebooks run: a path would let a params file execute any code."""
    allowed = notebook_stems()
    if stem not in allowed:
        raise ValueError(
            f"{stem!r} is not one of the workbook's notebooks (stems of notebooks/*.ipynb): "
            f"{', '.join(allowed)}"
        )
    return stem


@dataclass
class RunSection:
    __pydantic_config__ = PARAMS

    name: Annotated[str, AfterValidator(check_run_name)] = doc(
        "Run name: the folder under output_root (one plain folder name).", "run"
    )
    seed: Seed = doc("Master seed; every random choice of the run derives from it.", 0)
    output_root: Annotated[str, AfterValidator(expand_home)] = doc(
        "Where run folders go (any folder; a leading ~ is the home folder).", "outputs"
    )
    notebooks: Annotated[
        list[Annotated[str, AfterValidator(check_notebook)]], AfterValidator(check_notebooks)
    ] = doc(
        "Notebooks to execute, in order (stems of notebooks/*.ipynb, e.g. 01_data).",
        [
            "01_data",
            "02_rollouts",
            "03_training",
            "04_inference",
            "05_results",
            "06_analysis_quality",
            "07_position_bias",
        ],
    )
    description: str = doc("One line saying what this profile is for.", "")
    gpus: Count = doc(
        "GPUs the run uses on one node: GRPO trains with one process per GPU (accelerate), its "
        "step staying the profile's (grpo.keep_step_on_gpus); rollouts and evaluation use one "
        "engine per GPU with generation.backend 'served' (one in-process engine otherwise). "
        "1 = a single GPU (or the CPU).",
        1,
    )
    gpu_class: str | None = doc(
        "The GPU class this profile is sized for (`rmlib run --dry-run --gpu` names them, e.g. "
        "h100-80gb); the run checks it against the card at start. None: not checked.",
        None,
    )


@dataclass
class RolloutSection:
    __pydantic_config__ = PARAMS

    n_samples: Count = doc("Judgments per training pair from the untrained backbone (paper: 8).", 8)
    # > 0: rollouts are sampled (SamplingParams refuses 0 when sampling)
    temperature: Positive = doc("Sampling temperature of the rollouts (paper: 1.0).", 1.0)
    max_new_tokens: Count = doc("Cap on a rollout judgment's length.", 1024)


@dataclass
class EvalSection:
    __pydantic_config__ = PARAMS

    models: list[Model] = doc(
        "Which models to evaluate (and so train): base, rft (GRPO on the mix's Pref. items "
        "only), same_volume (Pref. only, as many items as the mix: the paper's Table 3), "
        "unified (Pref.+Refl.), refl_only (Refl. items only; its stage 2 reflects on "
        "refl_only_stage1's judgments: the paper's Figure 4).",
        ["base", "unified"],
    )
    refl_only_stage1: Model = doc(
        "Whose stage-1 judgments the refl_only judge reflects on (the same rollouts as that "
        "model's own two-stage inference, taken from the store). Must be evaluated too.",
        "unified",
    )
    n_bootstrap: Count = doc("Bootstrap resamples for confidence intervals.", 1000)
    failure_credit: Share = doc(
        "Credit for a pair whose prediction is a parse failure (upstream RewardBench uses 0.5).",
        0.0,
    )
    n_grid: list[Count] = doc("Sample counts for the accuracy-vs-N curve.", [1, 2, 4, 8])

    def __post_init__(self) -> None:
        if "refl_only" in self.models:
            stage1 = self.refl_only_stage1
            if stage1 == "refl_only" or stage1 not in self.models:
                raise ValueError(
                    f"refl_only reflects on refl_only_stage1's judgments: list "
                    f"'{stage1}' in eval.models too, or set refl_only_stage1 to one of "
                    f"{[m for m in self.models if m != 'refl_only']}"
                )


@dataclass
class PlanSection:
    __pydantic_config__ = PARAMS

    lengths: str | None = doc(
        "A JSON file of measured length statistics (`rmlib data stats SOURCE --lengths FILE` "
        "adds one source per call): its per-source prompt lengths replace the built-in ones "
        "(rmlib.workbook.plan.lengths.BUILT_IN). `rmlib run --dry-run --lengths FILE` sets it "
        "too. None: "
        "the built-in figures.",
        None,
    )
    judgment_tokens: Count = doc(
        "Expected tokens of a judgment (rollouts, GRPO's Pref. completions, stage-1 samples), "
        "before each cap; assumed, unmeasured: a non-thinking critique of both responses and a "
        "verdict line (the paper states no mean).",
        450,
    )
    reflection_tokens: Count = doc(
        "Expected tokens of a reflection (GRPO's Refl. completions, stage-2 calls), before each "
        "cap; assumed, unmeasured: a comparison of two critiques and a verdict line.",
        350,
    )
    easy_share: Share = doc(
        "Expected share of training pairs that are easy (all rollouts right) and so dropped "
        "before the mix; assumed, unmeasured (the upper bound takes 0). The rest is taken as "
        "both pools, Pref. and Refl. (mixed pairs; all-wrong pairs assumed rare).",
        0.35,
    )
    discordance: OpenShare = doc(
        "For the smallest detectable difference: the assumed share of evaluation pairs two "
        "compared models judge differently (one right, one wrong); McNemar's variance of a paired "
        "accuracy difference is about discordance / pairs. Assumed, unmeasured: two judges of "
        "~75-85 % accuracy that share most of their errors.",
        0.15,
    )
    power: OpenShare = doc("Power of the smallest detectable difference.", 0.8)
    alpha: OpenShare = doc(
        "Two-sided significance level of the smallest detectable difference.", 0.05
    )
