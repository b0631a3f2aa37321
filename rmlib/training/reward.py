"""The one reward rule of both judgment tasks (method.md §3), as a TRL reward function.

A completion is parsed with `rmlib.judge.verdict.parse_verdict` for its item's task ("pref" or
"refl"):

- a parsed verdict equal to the item's label → 1.0;
- a parsed wrong verdict → 0.0;
- a parse failure (no/unclosed `<Result>`, a tie, both answers, empty, or a completion cut at the
  token cap) → `unparseable_penalty`, default **-0.5** (choice; the paper states no reward).

Why -0.5: it must be below a wrong verdict, else writing no verdict costs nothing on pairs the
model gets wrong anyway and the format can decay; a penalty much larger than the 0–1 range of
correctness would let format dominate the group-normalised advantage once the format is learnt
by most samples. -0.5 keeps "unparseable < wrong < correct" with even steps of 0.5 to 1.

TRL 1.16 calls reward functions as `f(prompts=..., completions=..., completion_ids=...,
**dataset_columns, trainer_state=..., log_extra=..., log_metric=...)`; for conversational
prompts each completion is a list of messages (`[{"role": "assistant", "content": ...}]`).
`JudgmentReward` is that callable: it tells truncated completions (no end-of-sequence token at
the end) from finished ones and logs the parse-failure rate and per-task accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rmlib.judge.verdict import parse_verdict

DEFAULT_UNPARSEABLE_PENALTY = -0.5
CORRECT_REWARD = 1.0
WRONG_REWARD = 0.0


def completion_text(completion: Any) -> str:
    """The generated text of one completion: a string, or the last message's content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list | tuple) and completion:
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # content blocks
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return content or ""
    if isinstance(completion, dict):
        return completion.get("content", "") or ""
    return ""


def outcome(text: str, label: int, task: str, finish_reason: str = "stop") -> str:
    """'correct', 'wrong' (a parsed wrong verdict) or 'failed' (unparseable) for one judgment."""
    verdict = parse_verdict(text, task=task, finish_reason=finish_reason)
    if verdict.failure is not None:
        return "failed"
    return "correct" if verdict.choice == int(label) else "wrong"


def score(text: str, label: int, task: str, finish_reason: str, penalty: float) -> float:
    """The reward of one judgment text (see the module docstring)."""
    return _REWARD.get(outcome(text, label, task, finish_reason), float(penalty))


_REWARD = {"correct": CORRECT_REWARD, "wrong": WRONG_REWARD}


def judgment_reward(
    completions: Sequence[Any],
    label: Sequence[int],
    task: Sequence[str],
    *,
    finish_reason: Sequence[str] | None = None,
    unparseable_penalty: float = DEFAULT_UNPARSEABLE_PENALTY,
    log_metric: Callable[[str, float], None] | None = None,
    **kwargs: Any,
) -> list[float]:
    """Rewards of a batch of completions; TRL reward-function signature (extra kwargs ignored).

    `finish_reason` ("stop"/"length" per completion; default all "stop") marks completions cut
    at the token cap, which count as unparseable. `log_metric`, when TRL passes it, receives the
    batch's parse-failure rate and per-task accuracy.
    """
    n = len(completions)
    if len(label) != n or len(task) != n:
        raise ValueError(f"{n} completions but {len(label)} labels and {len(task)} tasks")
    reasons = list(finish_reason) if finish_reason is not None else ["stop"] * n
    outcomes = [
        outcome(completion_text(c), lab, tk, fr)
        for c, lab, tk, fr in zip(completions, label, task, reasons, strict=True)
    ]
    if log_metric is not None and outcomes:
        _log(log_metric, outcomes, task)
    return [_REWARD.get(o, float(unparseable_penalty)) for o in outcomes]


def _log(
    log_metric: Callable[[str, float], None], outcomes: list[str], tasks: Sequence[str]
) -> None:
    log_metric("parse_failure_rate", outcomes.count("failed") / len(outcomes))
    for name in ("pref", "refl"):
        mine = [o for o, t in zip(outcomes, tasks, strict=True) if t == name]
        if mine:
            log_metric(f"accuracy/{name}", mine.count("correct") / len(mine))


def finish_reasons(
    completion_ids: Iterable[Sequence[int]], eos_token_ids: Iterable[int]
) -> list[str]:
    """'stop' for a completion ending in an end-of-sequence token, else 'length' (cut at the cap).

    TRL keeps the EOS token as the last completion id of a finished completion.
    """
    eos = set(eos_token_ids)
    return ["stop" if ids and ids[-1] in eos else "length" for ids in completion_ids]


class JudgmentReward:
    """The judgment reward bound to a tokenizer's end-of-sequence ids, for GRPOTrainer.

    Pass the trainer's `eos_token_ids` (every id that ends a completion: for Qwen3 `<|im_end|>`
    and `<|endoftext|>`). Without `completion_ids`, completions count as finished.
    """

    __name__ = "judgment"

    def __init__(
        self, eos_token_ids: Iterable[int], unparseable_penalty: float = DEFAULT_UNPARSEABLE_PENALTY
    ) -> None:
        self.eos_token_ids = sorted(set(eos_token_ids))
        if not self.eos_token_ids:
            raise ValueError("JudgmentReward needs at least one end-of-sequence token id")
        self.unparseable_penalty = float(unparseable_penalty)

    def __call__(
        self,
        prompts: Any = None,
        completions: Sequence[Any] = (),
        completion_ids: Sequence[Sequence[int]] | None = None,
        label: Sequence[int] = (),
        task: Sequence[str] = (),
        log_metric: Callable[[str, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        reasons = None
        if completion_ids is not None:
            reasons = finish_reasons(completion_ids, self.eos_token_ids)
        return judgment_reward(
            completions,
            label,
            task,
            finish_reason=reasons,
            unparseable_penalty=self.unparseable_penalty,
            log_metric=log_metric,
        )
