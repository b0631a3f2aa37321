"""The data-source registry: `SOURCES` (one `SourceSpec` per source), its lookups and `load`.

Each entry is the one home of its source's facts (hub id, default split and config, splits,
display name, size, scoring rule). The entries hold the loader functions themselves, imported
plainly here; a loader module never imports this registry or the `rmlib.data` package: `load`
passes it what it needs from the entry (hub_id, split, config, config_is_data_dir).
"""

from __future__ import annotations

from typing import Any

from rmlib.data.demo import load_demo
from rmlib.data.helpsteer3 import load_helpsteer3
from rmlib.data.hh_rlhf import load_hh_rlhf
from rmlib.data.judgebench import load_judgebench
from rmlib.data.llmbar import load_llmbar
from rmlib.data.pair import LoadResult, OnError
from rmlib.data.ppe import load_ppe
from rmlib.data.rewardbench import load_rewardbench
from rmlib.data.rewardbench2 import SPEC as REWARDBENCH2
from rmlib.data.rmb import SETS as RMB_SETS
from rmlib.data.rmb import load_rmb
from rmlib.data.rmbench import load_rmbench
from rmlib.data.skywork import load_skywork
from rmlib.data.spec import SourceSpec

_SPECS: tuple[SourceSpec, ...] = (
    SourceSpec(
        "helpsteer3",
        load_helpsteer3,
        "nvidia/HelpSteer3",
        "train",
        "preference",
        splits=("train", "validation"),
        doc="training source; ties dropped and counted",
        published_pairs=38_459,
    ),
    SourceSpec(
        "rewardbench",
        load_rewardbench,
        "allenai/reward-bench",
        "filtered",
        splits=("filtered", "raw"),
        doc="2,985 pairs, 23 subsets",
        title="RewardBench",
        published_pairs=2_985,
        scoring="rewardbench",
        paper_accuracy=True,
    ),
    SourceSpec(
        "rm-bench",
        load_rmbench,
        "THU-KEG/RM-Bench",
        "train",
        splits=("train",),
        doc="9 style pairs per prompt",
        title="RM-Bench",
        published_pairs=1_327 * 9,
        scoring="rmbench",
        unit="prompts (9 pairs each)",
        paper_accuracy=True,
    ),
    SourceSpec(
        "rmb",
        load_rmb,
        None,
        "both",
        path_required=True,
        splits=("both", *RMB_SETS),
        doc="GitHub RMB_dataset/ folder",
        title="RMB",
        published_pairs=17_131,
        scoring="rmb",
        unit="items",
        paper_accuracy=True,
    ),
    SourceSpec(
        "ppe",
        load_ppe,
        "lmarena-ai/PPE-Human-Preference-V1",
        "test",
        splits=("test",),
        doc="human preference; ties dropped and counted",
        title="PPE-Pref",
        published_pairs=16_038,
        scoring="ppe",
        paper_accuracy=True,
    ),
    SourceSpec(
        "judgebench",
        load_judgebench,
        "ScalerLab/JudgeBench",
        "gpt",
        splits=("gpt", "claude"),
        title="JudgeBench",
        published_pairs=350,
        scoring="judgebench",
        unit="pairs (both orders)",
    ),
    REWARDBENCH2,
    SourceSpec(
        "llmbar",
        load_llmbar,
        None,
        None,
        path_required=True,
        doc="GitHub Dataset/ folder or a dataset.json",
        published_pairs=419,
    ),
    SourceSpec(
        "hh-rlhf",
        load_hh_rlhf,
        "Anthropic/hh-rlhf",
        "test",
        "harmless-base",
        splits=("train", "test"),
        doc="config = the data_dir",
        published_pairs=2_312,
        config_is_data_dir=True,
    ),
    SourceSpec(
        "skywork",
        load_skywork,
        "Skywork/Skywork-Reward-Preference-80K-v0.2",
        "train",
        splits=("train",),
        published_pairs=77_016,
    ),
    SourceSpec(
        "demo",
        load_demo,
        None,
        "train",
        splits=("train", "eval"),
        doc="generated verifiable pairs (offline demo)",
    ),
)
SOURCES: dict[str, SourceSpec] = {s.name: s for s in _SPECS}

# Other spellings people use for the same sources.
ALIASES: dict[str, str] = {
    "reward-bench": "rewardbench",
    "rmbench": "rm-bench",
    "hh": "hh-rlhf",
    "helpsteer": "helpsteer3",
    "helpsteer3-preference": "helpsteer3",
    "ppe-preference": "ppe",
    "ppe-human-preference": "ppe",
    "skywork-preference": "skywork",
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
    row, or "skip" and count it. options: the loader's own (e.g. drop_ties for helpsteer3/ppe).

    The loader gets the entry's facts as arguments: hub_id (a source on the hub), split and
    config (the defaults filled in), config_is_data_dir (where the hub's config is a folder)."""
    spec = get_source(source)
    if path is None and spec.path_required:
        raise ValueError(
            f"{spec.name} has no hub copy: pass a local copy with --path "
            "FILE_OR_DIR (path=... in Python)"
        )
    facts: dict[str, Any] = {}
    if spec.hub_id is not None:
        facts["hub_id"] = spec.hub_id
    if spec.config_is_data_dir:
        facts["config_is_data_dir"] = True
    if clash := sorted(facts.keys() & options.keys()):  # the entry's facts are no options
        raise ValueError(f"{spec.name}: unknown options {clash}")
    kwargs: dict[str, Any] = {"seed": seed, "on_error": on_error, **facts, **options}
    # split and config are only passed when set or defaulted: the generated demo source takes
    # no config
    if split is not None or spec.default_split is not None:
        kwargs["split"] = split or spec.default_split
    if spec.default_config is not None and not config:
        config = spec.default_config
    if config is not None:
        kwargs["config"] = config
    return spec.loader(path, **kwargs)
