"""The workbook's figures in one place: stem (the file under figures/) → the `rmlib.plots`
function that draws it → its caption, in reading order (the report lists them so)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureSpec:
    draw: str  # the rmlib.plots function that saves this stem
    caption: str


FIGURES: dict[str, FigureSpec] = {
    "data_overview": FigureSpec(
        "data_overview",
        "Pairs per subset and the share of pairs whose better response is in slot 1",
    ),
    "length_distributions": FigureSpec(
        "length_distributions", "Lengths of the better and the worse responses"
    ),
    "correct_per_pair": FigureSpec(
        "correct_per_pair", "Correct verdicts per training pair (easy / mixed / all wrong)"
    ),
    "training_curves": FigureSpec(
        "training_curves", "GRPO reward, parse failures and KL over steps"
    ),
    "parse_failures": FigureSpec("parse_failures", "Parse failures by model, stage and kind"),
    "accuracy_by_benchmark": FigureSpec(
        "accuracy_by_benchmark",
        "Official score per benchmark, model and method, paper beside ours",
    ),
    "accuracy_by_subset": FigureSpec(
        "accuracy_by_subset", "Score per subset, section, domain or level"
    ),
    "calibration": FigureSpec("calibration_curve", "Accuracy of stage-1 judgments by confidence"),
    "confidence": FigureSpec(
        "confidence_distributions", "Confidence of right and wrong stage-1 judgments"
    ),
    "reflection_accuracy": FigureSpec(
        "reflection_accuracy", "How often stage 2 prefers the correct critique"
    ),
    "method_accuracy": FigureSpec("method_accuracies", "Accuracy of each stage and baseline"),
    "accuracy_vs_n": FigureSpec(
        "accuracy_vs_n", "Majority of k samples as k grows, ReflectRM at N"
    ),
    "reflection_map": FigureSpec(
        "reflection_map_figure",
        "When reflection pays in a model of the method (not a result): ReflectRM minus majority "
        "over confidence AUC and reflection accuracy, the run placed on it",
    ),
    "consistency": FigureSpec(
        "consistency_figure", "Right in both orders (positional consistency)"
    ),
    "flip_rate": FigureSpec(
        "flip_rates", "Verdicts that follow the slot when the order is swapped"
    ),
    "first_slot": FigureSpec("first_slot_win_rate", "Share of verdicts that choose Response 1"),
    "accuracy_by_length": FigureSpec(
        "accuracy_by_length", "Accuracy by length difference of the two responses"
    ),
}


def caption(stem: str) -> str:
    """A figure's caption; a stem outside the registry (a user's own figure) reads as words."""
    spec = FIGURES.get(stem)
    return spec.caption if spec else stem.replace("_", " ")
