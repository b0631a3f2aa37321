"""The `prompts` section of a params file: the prompt budgets and what a reflection prompt shows,
one value for every step that renders a prompt (`rmlib.judge.prompts.PromptFormat`)."""

from __future__ import annotations

from dataclasses import dataclass

from rmlib.config import PARAMS, Count, doc


@dataclass
class PromptSection:
    __pydantic_config__ = PARAMS

    max_prompt_tokens: Count = doc(
        "Context budget of a judgment (Pref.) prompt: rollouts, stage 1 and greedy judgments, "
        "Pref. training items (paper/ConsistRM: 4,096). Over it (rmlib.judge.prompts): the oldest "
        "earlier turns are dropped first, then the responses cut from their end.",
        4096,
    )
    max_reflection_prompt_tokens: Count = doc(
        "Context budget of a reflection (Refl.) prompt, which holds the query, both responses and "
        "two critiques: Refl. items of the mix and the warm-up, stage 2 of inference (~8k as the "
        "sibling paper notes: a 4,096-token pair and two 1,024-token critiques fit whole). Over "
        "it: the oldest earlier turns are dropped first, then the responses cut from their end, "
        "and only then the critiques, from their start, so each keeps its conclusion.",
        8192,
    )
    critique_with_result: bool = doc(
        "Show a critique's <Result> line in reflection prompts (method.md §1 choice; default: "
        "analysis text only). One value for the warm-up, the training mix and inference.",
        False,
    )

    def __post_init__(self) -> None:
        if self.max_reflection_prompt_tokens < self.max_prompt_tokens:
            # a reflection prompt holds everything a judgment prompt holds, and two critiques
            raise ValueError(
                f"max_reflection_prompt_tokens ({self.max_reflection_prompt_tokens}) must be >= "
                f"max_prompt_tokens ({self.max_prompt_tokens}): a reflection prompt holds the "
                "judgment prompt's pair and two critiques"
            )

    def longest_prompt_tokens(self) -> int:
        """The longest prompt of a run (either task): what an engine's context must hold."""
        return max(self.max_prompt_tokens, self.max_reflection_prompt_tokens)
