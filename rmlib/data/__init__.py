"""Data sources: the `SOURCES` registry and `load(source, path=None, ...) -> LoadResult`.

Each source's loader reads the hub by its id (users' machines) or a local file/folder of the
hub's layout (`path`), and returns `Pair`s plus counts of skipped and dropped rows. Loaders are
imported lazily, so `import rmlib.data` stays cheap and a source whose module is missing breaks
only itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmlib.data._io import HubUnavailable
from rmlib.data.pair import DataError, LoadResult, OnError, Pair

__all__ = ["SOURCES", "SourceSpec", "load", "get_source", "find_source", "label_of", "unit_of",
           "PAPER_ACCURACY", "Pair", "LoadResult", "DataError", "HubUnavailable"]


@dataclass(frozen=True)
class SourceSpec:
    """One source and its facts, in one place: how to load it (loader "module:function", hub
    id, defaults) and, for a benchmark, its display name, published size, official scoring rule
    (`rmlib.scoring`), what that rule's n counts, and whether it is one of the paper's four
    accuracy benchmarks (its Table 1). Adding a benchmark: a loader, its rule, this entry."""

    name: str
    loader: str
    hub_id: str | None
    default_split: str | None
    default_config: str | None = None
    path_required: bool = False
    splits: tuple[str, ...] = ()
    doc: str = ""
    title: str = ""  # display name ("" = the source name); the paper's spelling for its own
    published_pairs: int | None = None  # benchmarks.md: the size when the data is not here
    scoring: str = "accuracy"  # the official rule's name in rmlib.scoring
    unit: str = "pairs"  # what the rule's n counts
    paper_accuracy: bool = False  # one of the paper's accuracy benchmarks (Table 1)
    config_is_data_dir: bool = False  # the hub's config is a folder (load_dataset's data_dir)

    @property
    def label(self) -> str:
        return self.title or self.name

    def load_fn(self) -> Callable[..., LoadResult]:
        module, func = self.loader.split(":")
        return getattr(importlib.import_module(module), func)


_SPECS: tuple[SourceSpec, ...] = (
    SourceSpec("helpsteer3", "rmlib.data.helpsteer3:load_helpsteer3", "nvidia/HelpSteer3",
               "train", "preference", splits=("train", "validation"),
               doc="training source; ties dropped and counted", published_pairs=38_459),
    SourceSpec("rewardbench", "rmlib.data.rewardbench:load_rewardbench", "allenai/reward-bench",
               "filtered", splits=("filtered", "raw"), doc="2,985 pairs, 23 subsets",
               title="RewardBench", published_pairs=2_985, scoring="rewardbench",
               paper_accuracy=True),
    SourceSpec("rm-bench", "rmlib.data.rmbench:load_rmbench", "THU-KEG/RM-Bench", "train",
               splits=("train",), doc="9 style pairs per prompt", title="RM-Bench",
               published_pairs=1_327 * 9, scoring="rmbench", unit="prompts (9 pairs each)",
               paper_accuracy=True),
    SourceSpec("rmb", "rmlib.data.rmb:load_rmb", None, "both", path_required=True,
               splits=("both", "pairwise", "bon"), doc="GitHub RMB_dataset/ folder",
               title="RMB", published_pairs=17_131, scoring="rmb", unit="items",
               paper_accuracy=True),
    SourceSpec("ppe", "rmlib.data.ppe:load_ppe", "lmarena-ai/PPE-Human-Preference-V1", "test",
               splits=("test",), doc="human preference; ties dropped and counted",
               title="PPE-Pref", published_pairs=16_038, scoring="ppe", paper_accuracy=True),
    SourceSpec("judgebench", "rmlib.data.judgebench:load_judgebench", "ScalerLab/JudgeBench",
               "gpt", splits=("gpt", "claude"), title="JudgeBench", published_pairs=350,
               scoring="judgebench", unit="pairs (both orders)"),
    SourceSpec("llmbar", "rmlib.data.llmbar:load_llmbar", None, None, path_required=True,
               doc="GitHub Dataset/ folder or a dataset.json", published_pairs=419),
    SourceSpec("hh-rlhf", "rmlib.data.hh_rlhf:load_hh_rlhf", "Anthropic/hh-rlhf", "test",
               "harmless-base", splits=("train", "test"), doc="config = the data_dir",
               published_pairs=2_312, config_is_data_dir=True),
    SourceSpec("skywork", "rmlib.data.skywork:load_skywork",
               "Skywork/Skywork-Reward-Preference-80K-v0.2", "train", splits=("train",),
               published_pairs=77_016),
    SourceSpec("demo", "rmlib.data.demo:load_demo", None, "train", splits=("train", "eval"),
               doc="generated verifiable pairs (offline demo)"),
)
SOURCES: dict[str, SourceSpec] = {s.name: s for s in _SPECS}

# Other spellings people use for the same sources.
ALIASES: dict[str, str] = {
    "reward-bench": "rewardbench", "rmbench": "rm-bench", "hh": "hh-rlhf",
    "helpsteer": "helpsteer3", "helpsteer3-preference": "helpsteer3",
    "ppe-preference": "ppe", "ppe-human-preference": "ppe", "skywork-preference": "skywork",
}


def find_source(name: str) -> SourceSpec | None:
    """`get_source`, or None for a name that is no source (a user's own benchmark name)."""
    try:
        return get_source(name)
    except ValueError:
        return None


def label_of(name: str) -> str:
    """A benchmark's display name (the paper's spelling for its own), else the name as given."""
    spec = find_source(name)
    return spec.label if spec else name


def unit_of(name: str) -> str:
    """What the n of a benchmark's official score counts ('pairs' for any other name)."""
    spec = find_source(name)
    return spec.unit if spec else "pairs"


# The paper's four accuracy benchmarks (Table 1), by scoring rule, in the registry's order.
PAPER_ACCURACY: tuple[str, ...] = tuple(s.scoring for s in _SPECS if s.paper_accuracy)


def get_source(name: str) -> SourceSpec:
    """The spec of a source name (case, "_" for "-" and the aliases accepted)."""
    key = name.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key not in SOURCES:
        raise ValueError(f"unknown data source {name!r}; valid sources: {', '.join(SOURCES)}")
    return SOURCES[key]


def load(
    source: str,
    path: str | None = None,
    *,
    split: str | None = None,
    config: str | None = None,
    seed: int = 0,
    on_error: OnError = "raise",
    **options: Any,
) -> LoadResult:
    """Load a source's pairs. path: a local file/folder of the hub's layout, or None for the hub
    id (sources without a hub copy need a path). split/config: None = the source's default.
    seed: placement seed where a source has no given order. on_error: "raise" on the first bad
    row, or "skip" and count it. options: the loader's own (e.g. drop_ties for helpsteer3/ppe)."""
    spec = get_source(source)
    if path is None and spec.path_required:
        raise ValueError(f"{spec.name} has no hub copy: pass a local copy with --path "
                         "FILE_OR_DIR (path=... in Python)")
    kwargs: dict[str, Any] = {"seed": seed, "on_error": on_error, **options}
    # only passed when set: the generated demo source takes no config
    if split is not None or spec.default_split is not None:
        kwargs["split"] = split or spec.default_split
    if config is not None:
        kwargs["config"] = config
    return spec.load_fn()(path, **kwargs)
