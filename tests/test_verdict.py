"""verdict: the strict last-<Result> parser, table-driven over adversarial judge outputs."""

from __future__ import annotations

import dataclasses

import pytest

from rmlib.judge.verdict import (
    AMBIGUOUS,
    EMPTY,
    FAILURE_KINDS,
    MISSING,
    TIE,
    TRUNCATED,
    Verdict,
    analysis_text,
    parse_verdict,
    result_sentence,
)

R12 = "Response 1 is better than Response 2"
R21 = "Response 2 is better than Response 1"
C12 = "Critique 1 is better than Critique 2"
C21 = "Critique 2 is better than Critique 1"


def judged(result: str, analysis: str = "R1 is correct, R2 is not.") -> str:
    return f"<Analysis>{analysis}</Analysis>\n<Result>{result}</Result>"


# (name, text, task, finish_reason, expected choice, expected failure)
CASES = [
    ("plain 1", judged(R12), "pref", "stop", 1, None),
    ("plain 2", judged(R21), "pref", "stop", 2, None),
    ("trailing period", judged(R21 + "."), "pref", "stop", 2, None),
    ("markdown bold", judged(f"**{R12}**"), "pref", "stop", 1, None),
    ("bold with period inside", judged(f"**{R21}.**"), "pref", "stop", 2, None),
    ("backticks", judged(f"`{R12}`"), "pref", "stop", 1, None),
    ("quoted", judged(f'"{R21}"'), "pref", "stop", 2, None),
    (
        "case and spacing",
        judged("\n  response 1   IS better\nthan RESPONSE 2 \n"),
        "pref",
        "stop",
        1,
        None,
    ),
    ("lowercase tags", f"<analysis>x</analysis><result>{R21}</result>", "pref", "stop", 2, None),
    ("uppercase tags", f"<RESULT>{R12}</RESULT>", "pref", "stop", 1, None),
    ("spaced tags", f"< Result >{R12}</ Result >", "pref", "stop", 1, None),
    ("no analysis at all", f"<Result>{R21}</Result>", "pref", "stop", 2, None),
    ("prose after the block", judged(R12) + "\nI hope this helps!", "pref", "stop", 1, None),
    (
        "full-width digits and letters",
        judged("Ｒｅｓｐｏｎｓｅ　１ is better than Response ２"),
        "pref",
        "stop",
        1,
        None,
    ),
    # several blocks: the last one wins, whatever came before
    (
        "tag inside the analysis",
        judged(R12, f"I will answer <Result>{R21}</Result> later."),
        "pref",
        "stop",
        1,
        None,
    ),
    (
        "several blocks, last wins",
        judged(R12) + f"\nOn reflection:\n<Result>{R21}</Result>",
        "pref",
        "stop",
        2,
        None,
    ),
    (
        "earlier complete, last unclosed",
        judged(R12) + f"\n<Result>{R21}",
        "pref",
        "stop",
        None,
        MISSING,
    ),
    ("unclosed block", f"<Analysis>x</Analysis>\n<Result>{R12}", "pref", "stop", None, MISSING),
    ("no block", f"<Analysis>x</Analysis>\n{R12}", "pref", "stop", None, MISSING),
    ("closing tag only", f"{R12}</Result>", "pref", "stop", None, MISSING),
    (
        "full-width tag brackets are not tags",
        f"＜Result＞{R12}＜/Result＞",
        "pref",
        "stop",
        None,
        MISSING,
    ),
    ("empty string", "", "pref", "stop", None, EMPTY),
    ("whitespace only", " \n\t ", "pref", "stop", None, EMPTY),
    # strict reading: cut off at the token limit is a failure even after a complete block
    ("truncated after a block", judged(R12) + "\nAlso", "pref", "length", None, TRUNCATED),
    ("truncated mid-block", "<Result>Response 1 is bet", "pref", "length", None, TRUNCATED),
    ("truncated empty", "", "pref", "length", None, TRUNCATED),
    ("same index 1", judged("Response 1 is better than Response 1"), "pref", "stop", None, TIE),
    ("same index 2", judged("Response 2 is better than Response 2"), "pref", "stop", None, TIE),
    ("tie word", judged("Tie"), "pref", "stop", None, TIE),
    ("equally good", judged("Both responses are equally good"), "pref", "stop", None, TIE),
    ("neither", judged("Neither response is better"), "pref", "stop", None, TIE),
    ("equal", judged("Response 1 and Response 2 are equal"), "pref", "stop", None, TIE),
    ("both orders in one block", judged(f"{R12}. {R21}"), "pref", "stop", None, AMBIGUOUS),
    ("both orders joined", judged(f"{R12} or {R21}"), "pref", "stop", None, AMBIGUOUS),
    (
        "extra prose in the block",
        judged(f"{R12} because it is correct"),
        "pref",
        "stop",
        None,
        AMBIGUOUS,
    ),
    ("hedged choice", judged(f"Both are fine, but {R12}"), "pref", "stop", None, AMBIGUOUS),
    ("label prefix", judged(f"Result: {R12}"), "pref", "stop", None, AMBIGUOUS),
    ("half sentence", judged("Response 1 is better"), "pref", "stop", None, AMBIGUOUS),
    ("bare number", judged("1"), "pref", "stop", None, AMBIGUOUS),
    ("empty block", judged(""), "pref", "stop", None, AMBIGUOUS),
    ("other language", judged("回答1更好"), "pref", "stop", None, AMBIGUOUS),
    # task wording: each task accepts only its own noun
    ("refl 1", judged(C12), "refl", "stop", 1, None),
    ("refl 2", judged(f"**{C21}.**"), "refl", "stop", 2, None),
    ("pref wording on a refl prompt", judged(R12), "refl", "stop", None, AMBIGUOUS),
    ("refl wording on a pref prompt", judged(C21), "pref", "stop", None, AMBIGUOUS),
    (
        "mixed nouns",
        judged("Critique 1 is better than Response 2"),
        "refl",
        "stop",
        None,
        AMBIGUOUS,
    ),
    ("refl same index", judged("Critique 2 is better than Critique 2"), "refl", "stop", None, TIE),
    ("refl truncated", judged(C12), "refl", "length", None, TRUNCATED),
]


@pytest.mark.parametrize(
    ("text", "task", "finish", "choice", "failure"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_parse_verdict(text, task, finish, choice, failure):
    v = parse_verdict(text, task=task, finish_reason=finish)
    assert (v.choice, v.failure) == (choice, failure)
    assert v.ok is (choice is not None)


def test_every_failure_kind_is_exercised():
    assert {c[5] for c in CASES if c[5]} == set(FAILURE_KINDS)


def test_default_task_and_finish_reason():
    assert parse_verdict(judged(R21)) == Verdict(2, None)


def test_unknown_task_raises():
    with pytest.raises(ValueError, match="task"):
        parse_verdict(judged(R12), task="reward")


@pytest.mark.parametrize(
    ("choice", "failure"), [(None, None), (1, TIE), (3, None), (None, "weird")]
)
def test_verdict_rejects_inconsistent_fields(choice, failure):
    with pytest.raises(ValueError):
        Verdict(choice, failure)


def test_verdict_is_frozen():
    v = Verdict(1, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.choice = 2  # type: ignore[misc]


def test_result_sentence_round_trips():
    for task in ("pref", "refl"):
        for choice in (1, 2):
            sentence = result_sentence(choice, task)
            assert parse_verdict(f"<Result>{sentence}</Result>", task=task).choice == choice
    assert result_sentence(2, "refl") == C21
    with pytest.raises(ValueError):
        result_sentence(0)


ANALYSIS_CASES = [
    ("tagged", f"<Analysis>\n  R1 is right.\n</Analysis>\n<Result>{R12}</Result>", "R1 is right."),
    (
        "untagged: text before the last Result",
        f"R2 is wrong.\n<Result>{R21}</Result>\n<Result>{R12}</Result>",
        f"R2 is wrong.\n<Result>{R21}</Result>",
    ),
    ("last Analysis block wins", "<Analysis>first</Analysis><Analysis>second</Analysis>", "second"),
    (
        "unclosed Analysis runs to Result",
        f"<Analysis> open analysis <Result>{R12}</Result>",
        "open analysis",
    ),
    ("unclosed Analysis runs to the end", "<analysis> cut off here", "cut off here"),
    ("no tags at all", "  just prose  ", "just prose"),
    ("empty", "", ""),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in ANALYSIS_CASES], ids=[c[0] for c in ANALYSIS_CASES]
)
def test_analysis_text(text, expected):
    assert analysis_text(text) == expected
