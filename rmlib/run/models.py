"""Which models a run has, in one place: the evaluable models in the paper's order (`MODELS`),
which of them a profile trains and on which training set (`MIX_VARIANT`), whose stage-1 judgments
each reflects on (`stage1_model`), which one the headline reports, and which are ready or done.

`base` is the backbone (after the format warm-up when the profile has one, saved to
models/base); `rft` is base + a GRPO adapter on the mix's Pref. items (the paper's baseline);
`same_volume` the same at the mix's full volume; `unified` base + an adapter on the Pref.+Refl.
mix (ReflectRM); `refl_only` an adapter on the mix's Refl. items, reflecting on another model's
stage 1.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rmlib.reflect.registry import METHODS
from rmlib.run.config import RunConfig
from rmlib.run.folder import RunFolder
from rmlib.run.sections import Model

MODELS: tuple[str, ...] = typing.get_args(Model)  # in the paper's order


def trained_models(cfg: RunConfig) -> list[str]:
    """The models this profile trains (every evaluated model but base)."""
    return [m for m in cfg.eval.models if m != "base"]


# Each trained model's training set (rmlib.training.mix variants, all from the same seeded draws)
MIX_VARIANT = {
    "rft": "pref_only",
    "same_volume": "pref_same_volume",
    "unified": "mix",
    "refl_only": "refl_only",
}


def headline_model(models: Sequence[str]) -> str:
    """The model a run's headline reports: the last of `models` in MODELS order that makes its
    own judgments (the reflection-only judge is an ablation of another model's)."""
    own = [m for m in MODELS if m in models and m != "refl_only"]
    return own[-1] if own else list(models)[-1]


def stage1_model(cfg: RunConfig, model: str) -> str:
    """Whose stage-1 judgments `model`'s two-stage inference reflects on: its own, except the
    reflection-only judge's (eval.refl_only_stage1)."""
    return cfg.eval.refl_only_stage1 if model == "refl_only" else model


def evaluated_models(cfg: RunConfig, run: RunFolder) -> list[str]:
    """The profile's models with predictions in this run, in the paper's order (MODELS)."""
    return [m for m in MODELS if m in cfg.eval.models and run.has_table(f"predictions_{m}")]


def adapter_exists(run: RunFolder, name: str) -> bool:
    return (Path(run.adapter_dir(name)) / "adapter_config.json").exists()


def runnable_models(cfg: RunConfig, run: RunFolder) -> list[str]:
    """The profile's evaluation models whose weights exist in this run (an adapter not trained is
    reported, not silently skipped: the caller prints what was left out)."""
    # in MODELS order: a model's stage 1 is stored before the refl_only judge reflects on it
    ready = [m for m in MODELS if m in cfg.eval.models and (m == "base" or adapter_exists(run, m))]
    missing = [m for m in cfg.eval.models if m not in ready]
    if missing:
        print(f"not evaluated (no trained adapter in {run.path / 'adapters'}): {missing}")
    return ready


def sort_rows(df: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Rows by `by` (in order of first appearance), then model and method in the paper's order."""
    if df.empty:
        return df
    model_rank = {m: i for i, m in enumerate(MODELS)}
    method_rank = {m: i for i, m in enumerate(METHODS)}
    first = {v: i for i, v in enumerate(dict.fromkeys(df[by]))} if by else {}
    key = df.assign(
        _b=df[by].map(first) if by else 0,
        _m=df["model"].map(model_rank).fillna(99),
        _k=df["method"].map(method_rank).fillna(99),
    )
    return (
        key.sort_values(["_b", "_m", "_k"], kind="stable")
        .drop(columns=["_b", "_m", "_k"])
        .reset_index(drop=True)
    )
