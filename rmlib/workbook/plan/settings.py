"""The `plan:` section of a params file: the dry run's assumptions about what a run will meet.

Nothing here changes what a run does: these are what the dry run's EXPECTED figures assume
(the upper bounds assume every prompt at its budget and every generation at its cap). The run's
params hash leaves this section out (`rmlib.workbook.execute.params_hash`), so editing it never re-runs a
finished notebook.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmlib.run.config import PARAMS, Count, OpenShare, Share, doc


@dataclass
class PlanSection:
    __pydantic_config__ = PARAMS

    lengths: str | None = doc(
        "A JSON file of measured length statistics (`rmlib data stats SOURCE --lengths FILE` "
        "adds one source per call): its per-source prompt lengths replace the built-in ones "
        "(rmlib.workbook.plan.lengths.BUILT_IN). `rmlib run --dry-run --lengths FILE` sets it too. None: "
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
