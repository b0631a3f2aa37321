"""rmlib.training.reward: one rule for both tasks, on known completions, in TRL's calling form."""

from __future__ import annotations

import pytest

from rmlib.training.reward import (
    DEFAULT_UNPARSEABLE_PENALTY,
    JudgmentReward,
    completion_text,
    finish_reasons,
    judgment_reward,
)

PREF_1 = (
    "<Analysis>Response 1 adds correctly.</Analysis>\n"
    "<Result>Response 1 is better than Response 2</Result>"
)
PREF_2 = "<Analysis>r2</Analysis><Result>Response 2 is better than Response 1.</Result>"
REFL_2 = (
    "<Analysis>Critique 2 checks the sum.</Analysis>"
    "<Result>Critique 2 is better than Critique 1</Result>"
)
REFL_1 = "<Analysis>c1</Analysis><Result>**Critique 1 is better than Critique 2**</Result>"
TIE = "<Analysis>same</Analysis><Result>Both are equally good</Result>"
NO_RESULT = "<Analysis>I think Response 1 is better than Response 2.</Analysis>"


def conv(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize(
    ("text", "label", "task", "want"),
    [
        (PREF_1, 1, "pref", 1.0),
        (PREF_1, 2, "pref", 0.0),
        (PREF_2, 2, "pref", 1.0),
        (REFL_2, 2, "refl", 1.0),
        (REFL_2, 1, "refl", 0.0),
        (REFL_1, 1, "refl", 1.0),
        (PREF_1, 1, "refl", DEFAULT_UNPARSEABLE_PENALTY),  # the other task's noun
        (REFL_2, 2, "pref", DEFAULT_UNPARSEABLE_PENALTY),
        (TIE, 1, "pref", DEFAULT_UNPARSEABLE_PENALTY),
        (NO_RESULT, 1, "pref", DEFAULT_UNPARSEABLE_PENALTY),
        ("", 1, "refl", DEFAULT_UNPARSEABLE_PENALTY),
    ],
)
def test_known_completions(text, label, task, want):
    assert judgment_reward([text], [label], [task]) == [want]
    assert judgment_reward([conv(text)], [label], [task]) == [want]  # conversational form


def test_truncated_completion_is_unparseable_and_penalty_is_a_parameter():
    got = judgment_reward(
        [PREF_1, PREF_1],
        [1, 1],
        ["pref", "pref"],
        finish_reason=["stop", "length"],
        unparseable_penalty=-1.0,
    )
    assert got == [1.0, -1.0]
    assert DEFAULT_UNPARSEABLE_PENALTY < 0.0  # below a wrong verdict


def test_trl_calling_convention_with_eos_ids_and_metrics():
    eos = [151645, 151643]
    reward = JudgmentReward(eos_token_ids=eos)
    logged: dict[str, list[float]] = {}
    # what GRPOTrainer._calculate_rewards passes: prompts, completions, completion_ids, every
    # dataset column, trainer_state, log_extra, log_metric
    out = reward(
        prompts=[[{"role": "user", "content": "p"}]] * 4,
        completions=[conv(PREF_1), conv(PREF_1), conv(REFL_2), conv(TIE)],
        completion_ids=[[1, 2, 151645], [1, 2, 3], [4, 151643], [5, 151645]],
        label=[1, 1, 1, 2],
        task=["pref", "pref", "refl", "pref"],
        pair_key=["a", "a", "b", "c"],
        trainer_state=None,
        log_extra=lambda *a: None,
        log_metric=lambda name, value: logged.setdefault(name, []).append(value),
    )
    assert out == [1.0, DEFAULT_UNPARSEABLE_PENALTY, 0.0, DEFAULT_UNPARSEABLE_PENALTY]
    assert logged == {"parse_failure_rate": [0.5], "accuracy/pref": [1 / 3], "accuracy/refl": [0.0]}
    assert reward.__name__ == "judgment"


def test_helpers():
    assert finish_reasons([[1, 9], [9, 1], []], [9]) == ["stop", "length", "length"]
    assert completion_text("x") == "x" and completion_text(conv("y")) == "y"
    blocks = [{"role": "assistant", "content": [{"type": "text", "text": "z"}]}]
    assert completion_text(blocks) == "z"
    with pytest.raises(ValueError):
        judgment_reward([PREF_1], [1, 2], ["pref"])
    with pytest.raises(ValueError):
        JudgmentReward(eos_token_ids=[])
