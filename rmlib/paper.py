"""The paper's published numbers (ReflectRM, arXiv 2604.07506; method.md §5), as constants.

Accuracies are in percent, exactly as printed in the paper. Keys of the benchmark tables are the
scoring rules of `rmlib.scoring` (`rewardbench`, `rmbench`, `rmb`, `ppe`, `judgebench`), so a
run's scores line up with them through `scoring.scoring_of(source)`; display names and sizes
are on the data registry's entries (`rmlib.data.SOURCES`). Systems are keyed by
(model, method) as this project names them: `base` (the backbone), `rft` (GRPO on Pref. only),
`unified` (GRPO on Pref. + Refl.), `same_volume` (Pref. only at the mix's volume), `refl_only`
(a reflection-only judge); methods of `rmlib.reflect.METHODS`.
"""

from __future__ import annotations

from typing import Any

# The configuration every number below comes from (method.md §2–§5).
CONFIGURATION: dict[str, Any] = {
    "backbone": "Qwen3-4B",
    "thinking": "non-thinking mode everywhere",
    "training": "GRPO only (no SFT), full fine-tuning, 16 GPUs",
    "epochs": 3,
    "batch_size": 64,
    "learning_rate": 1e-6,
    "max_completion_tokens": 1024,
    "training_source": "helpsteer3",
    "training_source_pairs": 40_000,  # about 40k HelpSteer3-Preference pairs, ties dropped
    "rollouts_per_pair": 8,
    "rollout_temperature": 1.0,
    "pref_items": 13_692,
    "refl_items": 3_420,
    "mix_ratio": "4:1",
    "n_samples": 8,  # stage-1 judgments per pair (N)
    "temperature": 1.0,
    "confidence_fraction": 0.10,
    "benchmarks": ("rewardbench", "rmbench", "rmb", "ppe"),
    "consistency_sets": "the whole of JudgeBench plus 1,000 random pairs of each other benchmark",
    "prompts": "not published (an image in the paper): this project writes its own",
}

# The paper's system names, keyed by this project's (model, method).
SYSTEMS: dict[tuple[str, str], str] = {
    ("base", "greedy"): "base model, greedy",
    ("rft", "greedy"): "+ GRPO on Pref. only, greedy",
    ("unified", "greedy"): "+ unified training (Pref. + Refl.), greedy",
    ("unified", "reflectrm"): "+ two-stage inference (ReflectRM)",
    ("unified", "random_anchor"): "ReflectRM with a random anchor (ablation)",
    ("unified", "random_winners"): "ReflectRM with random winners (ablation)",
    ("same_volume", "greedy"): "Pref. only at the mix's volume, greedy (data-volume ablation)",
    ("refl_only", "reflectrm"): "stage 2 by a separate reflection-only judge (Figure 4)",
}

# Main table, Qwen3-4B, accuracy %.
MAIN_TABLE: dict[tuple[str, str], dict[str, float]] = {
    ("base", "greedy"): {
        "rewardbench": 84.8,
        "rmbench": 75.4,
        "rmb": 70.4,
        "ppe": 60.1,
        "avg": 72.7,
    },
    ("rft", "greedy"): {
        "rewardbench": 84.0,
        "rmbench": 76.5,
        "rmb": 71.2,
        "ppe": 62.5,
        "avg": 73.5,
    },
    ("unified", "greedy"): {
        "rewardbench": 85.3,
        "rmbench": 76.5,
        "rmb": 75.3,
        "ppe": 63.9,
        "avg": 75.2,
    },
    ("unified", "reflectrm"): {
        "rewardbench": 86.7,
        "rmbench": 77.7,
        "rmb": 77.1,
        "ppe": 64.2,
        "avg": 76.4,
    },
}

# Inference ablation (the unified model), RewardBench / RMB, accuracy %.
INFERENCE_ABLATION: dict[tuple[str, str], dict[str, float]] = {
    ("unified", "reflectrm"): {"rewardbench": 86.7, "rmb": 77.1},
    ("unified", "random_anchor"): {"rewardbench": 86.0, "rmb": 76.8},
    ("unified", "random_winners"): {"rewardbench": 85.7, "rmb": 76.0},
}

# Same data volume: the mean of RewardBench and RMB, %, by training set, each judged greedy
# (77.6 = the mean of rft's 84.0 and 71.2; 80.3 = unified's 85.3 and 75.3); `model` is the
# project's model trained on that set.
DATA_VOLUME_ABLATION: list[dict[str, Any]] = [
    {
        "model": "rft",
        "training_set": "Pref. 13.7k",
        "pref": 13_700,
        "refl": 0,
        "avg_rewardbench_rmb": 77.6,
    },
    {
        "model": "same_volume",
        "training_set": "Pref. 17.1k",
        "pref": 17_100,
        "refl": 0,
        "avg_rewardbench_rmb": 79.1,
    },
    {
        "model": "unified",
        "training_set": "Pref. 13.7k + Refl. 3.4k",
        "pref": 13_700,
        "refl": 3_400,
        "avg_rewardbench_rmb": 80.3,
    },
]

# The training sets' sizes for Qwen3-4B (method.md §2), keyed by rmlib.training.mix's variants:
# Pref. and Refl. items. The mix is a draw of 13,692 Pref. + 3,420 Refl. (4.004:1); "+ GRPO on
# Pref. only" trains on its Pref. draw alone; the same-volume set is "Pref. 17.1k" in the paper,
# the mix's 17,112 by this project's definition; a reflection-only judge's set is not stated
# (None). The mix's counts table prints them beside a run's (rmlib.training.mix.counts_table).
MIX_COUNTS: dict[str, dict[str, int | None]] = {
    "mix": {"pref": 13_692, "refl": 3_420},
    "pref_only": {"pref": 13_692, "refl": 0},
    "pref_same_volume": {"pref": 13_692 + 3_420, "refl": 0},
    "refl_only": {"pref": None, "refl": None},
}

# Positional consistency (correct in both orders, %), Qwen3-4B: the average over the five sets
# and, where the paper states it, JudgeBench alone.
CONSISTENCY: dict[tuple[str, str], dict[str, float]] = {
    ("base", "greedy"): {"avg": 54.3, "judgebench": 49.3},
    ("rft", "greedy"): {"avg": 59.7},
    ("unified", "greedy"): {"avg": 61.7},
    ("unified", "reflectrm"): {"avg": 64.5, "judgebench": 54.9},
}


def paper_accuracy(model: str, method: str, scoring: str) -> float | None:
    """The paper's accuracy (%) for a system on a benchmark (a scoring rule), or None.

    Looks in the main table first, then the inference ablation.
    """
    for table in (MAIN_TABLE, INFERENCE_ABLATION):
        value = table.get((model, method), {}).get(scoring)
        if value is not None:
            return value
    return None


# The benchmarks the data-volume ablation averages (its `avg_rewardbench_rmb`), by scoring rule.
DATA_VOLUME_BENCHMARKS: tuple[str, ...] = ("rewardbench", "rmb")

# The benchmarks whose positional consistency the paper states alone, by scoring rule.
CONSISTENCY_BENCHMARKS: frozenset[str] = frozenset(
    k for v in CONSISTENCY.values() for k in v if k != "avg"
)


def paper_consistency(model: str, method: str, key: str) -> float | None:
    """The paper's positional consistency (%) for a system: key 'avg' or a benchmark."""
    return CONSISTENCY.get((model, method), {}).get(key)
