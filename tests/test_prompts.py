"""prompts: the two judgment templates rendered through the REAL Qwen3 tokenizer, and the budget."""

from __future__ import annotations

import pytest

from rmlib.data.pair import Pair
from rmlib.judge.prompts import (
    POLICIES,
    PROMPT_VERSION,
    TRUNCATION_MARKER,
    PromptBudget,
    PromptTooLongError,
    build_pref_prompt,
    build_refl_prompt,
    count_tokens,
    format_judgment,
    pref_messages,
    refl_messages,
    render,
)
from rmlib.judge.verdict import analysis_text, parse_verdict

QUERY = "What is 17 + 25? Answer briefly."
R1 = "17 + 25 = 42."
R2 = "17 + 25 = 32."
CRIT_A = "<Analysis>Response 1 adds correctly; Response 2 drops a ten.</Analysis>\n<Result>Response 1 is better than Response 2</Result>"  # noqa: E501
CRIT_B = "<Analysis>Response 2 is shorter and fine.</Analysis>\n<Result>Response 2 is better than Response 1</Result>"  # noqa: E501
NON_THINKING_OPENING = "<|im_start|>assistant\n<think>\n\n</think>\n\n"


def make_pair(
    r1: str = R1, r2: str = R2, earlier: tuple[dict[str, str], ...] = (), query: str = QUERY
) -> Pair:
    context = (*earlier, {"role": "user", "content": query})
    return Pair("p1", "test", "s", context, r1, r2, label=1)


@pytest.fixture(scope="module")
def qwen():
    from transformers import AutoTokenizer

    from rmlib.generation.models import qwen3_tokenizer_dir

    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())


def user_text(messages: list[dict[str, str]]) -> str:
    assert [m["role"] for m in messages] == ["user"]
    return messages[0]["content"]


# ---------------------------------------------------------------- templates


def test_prompt_version():
    assert PROMPT_VERSION == "reflectrm-v1"


def test_pref_fields_in_order():
    text = user_text(pref_messages(make_pair()))
    marks = [
        "## Context",
        QUERY,
        "## Responses for Judgment",
        "[Response 1 begins]",
        R1,
        "[Response 2 begins]",
        R2,
        "<Analysis></Analysis>",
        "<Result>Response 1 is better than Response 2</Result>",
        "<Result>Response 2 is better than Response 1</Result>",
        "No ties",
    ]
    positions = [text.index(m) for m in marks]
    assert positions == sorted(positions)
    assert "Critique" not in text


def test_earlier_turns_are_a_labelled_transcript():
    earlier = (
        {"role": "user", "content": "Hi, I need maths help."},
        {"role": "assistant", "content": "Sure, what is the problem?"},
    )
    text = user_text(pref_messages(make_pair(earlier=earlier)))
    transcript = "User: Hi, I need maths help.\n\nAssistant: Sure, what is the problem?"
    assert transcript in text
    assert text.index("### Earlier conversation") < text.index(transcript)
    assert text.index(transcript) < text.index("### Final user query\n" + QUERY)


def test_single_turn_has_no_transcript():
    assert "Earlier conversation" not in user_text(pref_messages(make_pair()))


def test_refl_fields_in_order_and_critiques_last():
    text = user_text(refl_messages(make_pair(), CRIT_A, CRIT_B))
    marks = [
        "## Context",
        QUERY,
        "## Responses for Judgment",
        R1,
        R2,
        "## Critiques for Judgment",
        "[Critique 1 begins]",
        "Response 1 adds correctly",
        "[Critique 2 begins]",
        "Response 2 is shorter",
        "## Output format",
        "<Result>Critique 1 is better than Critique 2</Result>",
        "<Result>Critique 2 is better than Critique 1</Result>",
    ]
    positions = [text.index(m) for m in marks]
    assert positions == sorted(positions)


def test_critiques_show_analysis_only_by_default():
    default = user_text(refl_messages(make_pair(), CRIT_A, CRIT_B))
    assert analysis_text(CRIT_A) in default
    assert "<Result>Response 1 is better than Response 2</Result>" not in default
    assert "<Analysis>" not in default.split("## Critiques for Judgment")[1].split("## Output")[0]
    full = user_text(refl_messages(make_pair(), CRIT_A, CRIT_B, critique_with_result=True))
    assert CRIT_A in full and CRIT_B in full


def test_empty_response_is_visible():
    assert "[Response 2 begins]\n(empty)\n[Response 2 ends]" in user_text(
        pref_messages(make_pair(r2="   "))
    )


@pytest.mark.parametrize("task", ["pref", "refl"])
@pytest.mark.parametrize("choice", [1, 2])
def test_format_judgment_parses_back(task, choice):
    text = format_judgment("  Some reasoning.\n", choice, task)
    assert text.startswith("<Analysis>\nSome reasoning.\n</Analysis>\n<Result>")
    assert parse_verdict(text, task=task).choice == choice
    assert analysis_text(text) == "Some reasoning."
    other = "refl" if task == "pref" else "pref"
    assert not parse_verdict(text, task=other).ok


# ---------------------------------------------------------------- rendering (real tokenizers)


def test_render_qwen3_non_thinking(qwen):
    text = render(qwen, pref_messages(make_pair()))
    # Qwen3's template marks non-thinking mode by an empty think block opening the answer.
    assert text.startswith("<|im_start|>user\n")
    assert text.endswith(NON_THINKING_OPENING)
    assert text.count("<think>") == 1
    user = pref_messages(make_pair())[0]["content"]
    assert "/think" not in user and "/no_think" not in user  # no soft switch in the prompt
    thinking = render(qwen, pref_messages(make_pair()), enable_thinking=True)
    assert thinking.endswith("<|im_start|>assistant\n") and "<think>" not in thinking


def test_render_without_chat_template_raises(qwen):
    class NoTemplate:
        chat_template = None

    with pytest.raises(ValueError, match="no chat template"):
        render(NoTemplate(), pref_messages(make_pair()))


@pytest.mark.slow
def test_render_smollm2_ignores_enable_thinking():
    from transformers import AutoTokenizer

    from rmlib.generation.models import SMOLLM2_GGUF, smollm2_gguf

    try:
        gguf = smollm2_gguf()
    except OSError as exc:
        pytest.skip(f"SmolLM2 GGUF not installed: {exc}")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=SMOLLM2_GGUF)
    messages = pref_messages(make_pair())
    text = render(tok, messages, enable_thinking=False)
    assert text == render(tok, messages, enable_thinking=True)
    assert text.endswith("<|im_start|>assistant\n") and "<think>" not in text
    assert messages[0]["content"] in text
    prompt = build_pref_prompt(tok, make_pair())
    assert prompt.text == text and prompt.n_tokens == count_tokens(tok, text)


def test_prompt_counts_its_own_tokens(qwen):
    p = build_pref_prompt(qwen, make_pair())
    assert not p.truncated and p.cut == {}
    assert p.text == render(qwen, pref_messages(make_pair()))
    assert p.n_tokens == len(qwen(p.text, add_special_tokens=False)["input_ids"])
    assert p.text.endswith(NON_THINKING_OPENING)


def test_refl_prompts_of_a_pair_share_a_long_prefix(qwen):
    pair = make_pair(r1="A fairly long first response. " * 30, r2="Another response. " * 30)
    a = build_refl_prompt(qwen, pair, CRIT_A, CRIT_B)
    b = build_refl_prompt(qwen, pair, CRIT_B, "<Analysis>Totally different.</Analysis>")
    ids_a = qwen(a.text, add_special_tokens=False)["input_ids"]
    ids_b = qwen(b.text, add_special_tokens=False)["input_ids"]
    common = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y)
    pair_part = a.text[
        : a.text.index("## Critiques for Judgment") + len("## Critiques for Judgment")
    ]
    assert common >= count_tokens(qwen, pair_part)
    assert "[Critique 1 begins]\n" in qwen.decode(ids_a[:common])


# ---------------------------------------------------------------- budget policy


def test_over_budget_response_is_cut_from_its_end(qwen):
    long_r1 = " ".join(f"word{i}" for i in range(3000))
    pair = make_pair(r1=long_r1)
    p = build_pref_prompt(qwen, pair, PromptBudget(max_prompt_tokens=512))
    assert p.truncated and p.n_tokens <= 512
    assert p.n_tokens == count_tokens(qwen, p.text)
    assert p.cut["response1"] > 1000 and "response2" not in p.cut  # R2 is shorter than the floor
    body1 = p.text.split("[Response 1 begins]\n")[1].split("\n[Response 1 ends]")[0]
    assert body1.startswith("word0 word1 word2") and body1.endswith("\n" + TRUNCATION_MARKER)
    assert "word2999" not in p.text
    assert QUERY in p.text and f"[Response 2 begins]\n{R2}\n[Response 2 ends]" in p.text
    assert "<Result>Response 2 is better than Response 1</Result>\nNo ties" in p.text
    assert p.text.endswith(NON_THINKING_OPENING)


def test_cuts_are_proportional_to_length(qwen):
    r1 = " ".join(f"alpha{i}" for i in range(1200))
    r2 = " ".join(f"beta{i}" for i in range(600))
    p = build_pref_prompt(qwen, make_pair(r1=r1, r2=r2), PromptBudget(max_prompt_tokens=1200))
    n1 = count_tokens(qwen, r1)
    n2 = count_tokens(qwen, r2)
    assert p.n_tokens <= 1200
    assert p.cut["response1"] / n1 == pytest.approx(p.cut["response2"] / n2, abs=0.02)
    assert p.text.count(TRUNCATION_MARKER) == 2


def test_oldest_turns_are_dropped_first(qwen):
    filler = "This is an old remark about something else. " * 40
    earlier = (
        {"role": "user", "content": "OLDEST " + filler},
        {"role": "assistant", "content": "OLDER " + filler},
        {"role": "user", "content": "RECENT question about the sum."},
        {"role": "assistant", "content": "RECENT answer: ask me."},
    )
    pair = make_pair(earlier=earlier)
    full = build_pref_prompt(qwen, pair, PromptBudget(max_prompt_tokens=100_000))
    budget = PromptBudget(max_prompt_tokens=full.n_tokens - 500)  # one old turn is ~370
    p = build_pref_prompt(qwen, pair, budget)
    assert p.truncated and p.n_tokens <= budget.max_prompt_tokens
    assert p.cut["context_turns"] == 2 and p.cut["context_tokens"] > 500
    assert set(p.cut) == {"context_turns", "context_tokens"}  # responses untouched
    assert "OLDEST" not in p.text and "OLDER" not in p.text
    assert "[… 2 earlier turn(s) omitted …]" in p.text
    assert "RECENT question" in p.text and "RECENT answer" in p.text and R1 in p.text


def test_turns_then_responses(qwen):
    earlier = ({"role": "user", "content": "old " * 300}, {"role": "assistant", "content": "ok"})
    pair = make_pair(earlier=earlier, r1="long " * 2000, r2="also long " * 1000)
    p = build_pref_prompt(qwen, pair, PromptBudget(max_prompt_tokens=800))
    assert p.n_tokens <= 800
    assert p.cut["context_turns"] == 2
    assert p.cut["response1"] > 0 and p.cut["response2"] > 0


def test_each_task_has_its_own_budget(qwen):
    pair = make_pair(r1=" ".join(f"word{i}" for i in range(600)))
    tight_pref = PromptBudget(max_prompt_tokens=400, max_reflection_prompt_tokens=100_000)
    assert tight_pref.limit("pref") == 400 and tight_pref.limit("refl") == 100_000
    pref = build_pref_prompt(qwen, pair, tight_pref)
    assert pref.truncated and pref.n_tokens <= 400
    assert not build_refl_prompt(qwen, pair, CRIT_A, CRIT_B, tight_pref).truncated
    tight_refl = PromptBudget(max_prompt_tokens=100_000, max_reflection_prompt_tokens=500)
    assert not build_pref_prompt(qwen, pair, tight_refl).truncated
    refl = build_refl_prompt(qwen, pair, CRIT_A, CRIT_B, tight_refl)
    assert refl.truncated and refl.n_tokens <= 500


def test_refl_prompt_cuts_the_responses_before_the_critiques(qwen):
    pair = make_pair(r1="first " * 400, r2="second " * 400)
    c1 = (
        "<Analysis>" + "reason " * 300 + "Hence Response 1 wins.</Analysis>"
        "<Result>Response 1 is better than Response 2</Result>"
    )
    full = build_refl_prompt(qwen, pair, c1, CRIT_B)
    budget = PromptBudget(max_reflection_prompt_tokens=full.n_tokens - 300)
    p = build_refl_prompt(qwen, pair, c1, CRIT_B, budget)
    assert p.truncated and p.n_tokens <= budget.max_reflection_prompt_tokens
    assert set(p.cut) == {"response1", "response2"}  # the responses had room enough
    assert analysis_text(c1) in p.text and "Response 2 is shorter and fine." in p.text


def test_long_reflection_prompt_keeps_both_critiques_conclusions(qwen):
    r1, r2 = "first " * 400, "second " * 400
    pair = make_pair(r1=r1, r2=r2)
    end1 = "CONCLUSION ONE: Response 1 is better."
    end2 = "CONCLUSION TWO: Response 2 is better."
    c1 = (
        "<Analysis>" + " ".join(f"step{i}" for i in range(800)) + f" {end1}</Analysis>"
        "<Result>Response 1 is better than Response 2</Result>"
    )
    c2 = (
        "<Analysis>" + " ".join(f"point{i}" for i in range(500)) + f" {end2}</Analysis>"
        "<Result>Response 2 is better than Response 1</Result>"
    )
    budget = PromptBudget(max_reflection_prompt_tokens=900)
    p = build_refl_prompt(qwen, pair, c1, c2, budget)
    assert p.truncated and p.n_tokens <= 900 and p.n_tokens == count_tokens(qwen, p.text)
    # the responses gave all they could (down to the floor) before any critique was cut
    for key, text in (("response1", r1), ("response2", r2)):
        assert p.cut[key] == count_tokens(qwen, text) - budget.min_keep_tokens
    assert p.cut["critique1"] > 0 and p.cut["critique2"] > 0
    # each critique lost its start, never its end: both conclusions are in the prompt
    for i, end, first in ((1, end1, "step0 "), (2, end2, "point0 ")):
        body = p.text.split(f"[Critique {i} begins]\n")[1].split(f"\n[Critique {i} ends]")[0]
        assert body.startswith(TRUNCATION_MARKER + "\n") and body.endswith(end)
        assert first not in body
    # responses are cut from their end, as in the Pref. task
    body1 = p.text.split("[Response 1 begins]\n")[1].split("\n[Response 1 ends]")[0]
    assert body1.startswith("first first") and body1.endswith("\n" + TRUNCATION_MARKER)
    assert QUERY in p.text and p.text.endswith(NON_THINKING_OPENING)


def test_refl_prompt_renders_the_thinking_switch(qwen):
    pair = make_pair(r1="first " * 400)
    budget = PromptBudget(max_reflection_prompt_tokens=300)
    thinking = build_refl_prompt(qwen, pair, CRIT_A, CRIT_B, budget, enable_thinking=True)
    assert thinking.truncated and thinking.n_tokens <= 300
    assert thinking.text.endswith("<|im_start|>assistant\n") and "<think>" not in thinking.text
    assert build_refl_prompt(qwen, pair, CRIT_A, CRIT_B, budget).text.endswith(NON_THINKING_OPENING)


def test_too_small_budget_raises(qwen):
    pair = make_pair(r1="long " * 500)
    with pytest.raises(PromptTooLongError, match="final query and instructions are never cut"):
        build_pref_prompt(qwen, pair, PromptBudget(max_prompt_tokens=60))
    huge_query = make_pair(query="Why? " * 2000)
    with pytest.raises(PromptTooLongError, match="p1"):
        build_pref_prompt(qwen, huge_query, PromptBudget(max_prompt_tokens=1000))
    with pytest.raises(PromptTooLongError, match="raise max_reflection_prompt_tokens"):
        build_refl_prompt(qwen, pair, CRIT_A, CRIT_B, PromptBudget(max_reflection_prompt_tokens=60))


def test_error_policy_never_truncates(qwen):
    budget = PromptBudget(max_prompt_tokens=300, policy="error")
    assert not build_pref_prompt(qwen, make_pair(), budget).truncated
    with pytest.raises(PromptTooLongError):
        build_pref_prompt(qwen, make_pair(r1="long " * 500), budget)


def test_budget_validates():
    assert PromptBudget().max_prompt_tokens == 4096
    assert PromptBudget().max_reflection_prompt_tokens == 8192
    assert PromptBudget().policy in POLICIES
    with pytest.raises(ValueError, match="policy"):
        PromptBudget(policy="cut_the_middle")
    with pytest.raises(ValueError):
        PromptBudget(max_prompt_tokens=0)
    with pytest.raises(ValueError):
        PromptBudget(max_reflection_prompt_tokens=0)
