"""The `data` section of a params file (the training source and the evaluation sets), and one
dataset spec loaded (`load_split`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rmlib.config import PARAMS, Count, Seed, doc
from rmlib.data import load
from rmlib.data.demo.loader import check_families
from rmlib.data.pair import LoadResult, subsample


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

    def __post_init__(self) -> None:
        # A local path is read where the user typed it: notebooks execute in notebooks/, where
        # `../shared/data/x` given from the project root would name another folder. So a path
        # that exists from here is made absolute, and the run's params.yaml records that.
        if self.path is not None and not Path(self.path).is_absolute():
            here = Path(self.path).expanduser()
            if here.exists():
                self.path = str(here.resolve())
        # the demo's families are refused when the params load, not when notebook 01 loads them
        if self.source == "demo" and "families" in self.options:
            families = self.options["families"]
            if not isinstance(families, list) or not all(isinstance(f, str) for f in families):
                raise ValueError(f"options.families: expected a list of names, got {families!r}")
            check_families(families)


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


def load_split(spec: DatasetSpec, seed: int) -> LoadResult:
    """Load one dataset spec and subsample it (seeded, whole groups kept together).

    The demo generator makes exactly `n` pairs itself, balanced over families and slots, so it
    is asked for n pairs rather than subsampled.
    """
    options = dict(spec.options)
    if spec.source == "demo" and spec.n is not None:
        options.setdefault("n", spec.n)
    result = load(
        spec.source,
        spec.path,
        split=spec.split,
        config=spec.config,
        seed=seed,
        on_error=spec.on_error,
        **options,
    )
    if spec.n is not None and spec.n < len(result.pairs):
        result.pairs = subsample(result.pairs, spec.n, seed)
    return result
