"""The `data` section of a params file: the training source and the evaluation sets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rmlib.config import PARAMS, Count, Seed, doc


@dataclass
class DatasetSpec:
    __pydantic_config__ = PARAMS

    source: str = doc("A loader name (rmlib data stats --help lists them).", "demo")
    path: str | None = doc("Hub id (default) or local file/folder in the hub layout.", None)
    split: str | None = doc("Split; None = the source's evaluation/default split.", None)
    config: str | None = doc("Dataset config (HelpSteer3 'preference', HH-RLHF data_dir).", None)
    n: Count | None = doc("Subsample this many pairs (seeded); None = all.", None)
    on_error: Literal["raise", "skip"] = doc(
        "Bad rows: 'raise' (default) or 'skip' (counted).", "raise"
    )
    options: dict = doc("Extra loader options (e.g. drop_ties).", {})


@dataclass
class DataSection:
    __pydantic_config__ = PARAMS

    train: DatasetSpec = doc("Preference source for the training rollouts.", DatasetSpec())
    eval: list[DatasetSpec] = doc("Evaluation sets.", [])
    subsample_seed: Seed | None = doc("Seed for subsampling; None = run.seed.", None)
    pad_to_budget: bool = doc(
        "Lengthen both responses of every pair (their own text repeated) past the longest prompt "
        "budget, so every prompt is cut to its budget: a run at the profile's longest prompts, "
        "whose results mean nothing (`rmlib run --preflight` sets it). Off: the data as it is.",
        False,
    )
