"""The two judgment prompts (Pref., Refl.), their rendering, and the context-budget policy.

The paper's wording is unpublished (method.md §1); these prompts are ours, versioned by
`PROMPT_VERSION`. Both tasks use the same output format, parsed by `rmlib.judge.verdict`:
`<Analysis>…</Analysis>` then `<Result>Response 1 is better than Response 2</Result>` (or the
reverse; "Critique" for the reflection task), never a tie.

Layout, for speed: everything that depends only on the pair (task instructions, Context, the two
responses) comes first and the critiques after, so all reflection prompts of one pair share a long
token prefix whose KV cache a backend can reuse (method.md §4). The closing output-format
instructions are fixed text and come last.

Context budget (`PromptBudget`): a prompt is rendered through the chat template and counted in
tokens of the rendered text (`add_special_tokens=False`: the template already holds the special
tokens; backends must tokenize prompts the same way). Each task has its own limit: a Pref.
prompt `max_prompt_tokens`, a Refl. prompt, which holds the query, both responses and two
critiques, `max_reflection_prompt_tokens`. Over its limit, policy `"drop_turns_then_cut_end"`
(default) applies, in this order:

1. drop the oldest earlier conversation turns, one at a time, until it fits or none are left
   (a visible line says how many were omitted);
2. cut the responses from their END, each by a number of tokens proportional to its length,
   each cut marked with a visible `[… truncated …]`; every cut text keeps at least
   `min_keep_tokens` tokens (or all of it, if shorter);
3. reflection task only, when the responses are down to that floor and it still does not fit:
   cut the critiques from their START (same proportional rule and floor, the marker first), so
   each critique keeps its end, where its conclusion is;
4. the final user query and the instructions are never cut: if the prompt still cannot fit,
   `PromptTooLongError` is raised.

Texts cannot forge a block (`neutralise`): a response, critique, query or earlier turn that holds
one of the prompt's own boundaries (a block marker `[Response 1 ends]`, a heading `## Output
format`, a `<Result>` tag) is shown with that marker's opening character replaced by its full-width
twin, so each real boundary occurs exactly once in every prompt. Ordinary texts are unchanged.

Policy `"error"` never truncates and raises at once. `Prompt.truncated` and `Prompt.cut` record
what was done, so callers can count truncated prompts. Note: truncation depends on the critiques'
lengths, so truncated reflection prompts of one pair may not share their prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from math import ceil
from typing import Any, Literal

from rmlib.data.pair import Pair
from rmlib.judge.verdict import analysis_text, result_sentence

PROMPT_VERSION = "reflectrm-v1"
TRUNCATION_MARKER = "[… truncated …]"
POLICIES: dict[str, str] = {
    "drop_turns_then_cut_end": (
        "drop oldest earlier turns, then cut the responses from their end in proportion to their "
        "length (marked), then (reflection prompts) the critiques from their start, keeping their "
        "conclusions; never the final query or instructions; raise if still too long"
    ),
    "error": "never truncate; raise PromptTooLongError when over budget",
}
Task = Literal["pref", "refl"]
Messages = list[dict[str, str]]

_PREF_TASK = (
    "You are an impartial judge. Read the context and the two responses to the final user query, "
    "and decide which response is better: more correct, helpful, honest and harmless, and more "
    "faithful to the user's instructions. Ignore the order and the length of the responses."
)
_REFL_TASK = (
    "You are an impartial judge of evaluations. Read the context, the two responses to the final "
    "user query, and two critiques: independent evaluations of which response is better. Decide "
    "which critique is the more reliable evaluation: more accurate in its reasoning and more "
    "likely right about which response is better."
)
_ROLE_LABELS = {"user": "User", "assistant": "Assistant", "system": "System"}
# The prompt's section headings (each written once, by `_messages` and `_context_block`)
_HEADINGS: dict[str, str] = {
    "context": "## Context",
    "responses": "## Responses for Judgment",
    "critiques": "## Critiques for Judgment",
    "format": "## Output format",
    "earlier": "### Earlier conversation",
    "query": "### Final user query",
}


@dataclass(frozen=True)
class PromptBudget:
    """How long a rendered prompt may be, and what to cut when it is longer (module docstring).

    max_prompt_tokens: limit on a rendered Pref. prompt's tokens (paper/ConsistRM: 4096).
    max_reflection_prompt_tokens: limit on a rendered Refl. prompt's tokens (default 8192, ~8k:
        a 4,096-token pair plus two 1,024-token critiques fits whole).
    policy: a key of POLICIES; default "drop_turns_then_cut_end".
    min_keep_tokens: a cut response/critique keeps at least this many tokens (default 16), so a
        judged text never vanishes entirely.
    """

    max_prompt_tokens: int = 4096
    max_reflection_prompt_tokens: int = 8192
    policy: str = "drop_turns_then_cut_end"
    min_keep_tokens: int = 16

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(
                f"unknown prompt budget policy {self.policy!r}; one of {list(POLICIES)}"
            )
        if min(self.max_prompt_tokens, self.max_reflection_prompt_tokens) < 1:
            raise ValueError("max_prompt_tokens and max_reflection_prompt_tokens must be >= 1")
        if self.min_keep_tokens < 0:
            raise ValueError("min_keep_tokens must be >= 0")

    def limit(self, task: Task) -> int:
        """The token limit of a `task` prompt."""
        return self.max_reflection_prompt_tokens if task == "refl" else self.max_prompt_tokens

    def limit_name(self, task: Task) -> str:
        """The field holding that limit (for error messages)."""
        return "max_reflection_prompt_tokens" if task == "refl" else "max_prompt_tokens"


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt, its token count, and what the budget policy cut.

    `cut` is empty when nothing was cut; else it may hold `context_turns` (earlier turns dropped),
    `context_tokens` (tokens those turns took), and for each cut text (`response1`, `response2`,
    `critique1`, `critique2`) the number of its tokens removed.
    """

    text: str
    n_tokens: int
    truncated: bool
    cut: dict[str, int] = field(default_factory=dict)


class PromptTooLongError(ValueError):
    """The prompt cannot fit the budget without cutting the query or the instructions."""


@dataclass(frozen=True)
class _Parts:
    """The variable pieces of a prompt, which the budget policy shrinks."""

    earlier: tuple[dict[str, str], ...]
    query: str
    texts: dict[str, str]  # response1, response2[, critique1, critique2]
    omitted_turns: int = 0
    critique_with_result: bool = False  # a critique ends with its own <Result> line (kept)


_Measure = Callable[[_Parts], tuple[str, int]]  # parts -> (rendered text, its token count)


# ---------------------------------------------------------------- message construction


def pref_messages(pair: Pair) -> Messages:
    """Chat messages of the response-preference (Pref.) task for `pair`."""
    return _messages("pref", _parts(pair))


def refl_messages(
    pair: Pair, critique1: str, critique2: str, *, critique_with_result: bool = False
) -> Messages:
    """Chat messages of the analysis-preference (Refl.) task: which critique of `pair` is better.

    critique_with_result (method.md §1 choice, default False): show each critique as its analysis
    text only (`verdict.analysis_text`); True shows the whole judgment, `<Result>` line included.
    """
    return _messages("refl", _parts(pair, critique1, critique2, critique_with_result))


def critique_text(judgment: str, *, with_result: bool = False) -> str:
    """How a judgment is shown as a critique in the reflection task."""
    return judgment.strip() if with_result else analysis_text(judgment)


def _parts(
    pair: Pair, c1: str | None = None, c2: str | None = None, with_result: bool = False
) -> _Parts:
    texts = {"response1": pair.response1, "response2": pair.response2}
    if c1 is not None and c2 is not None:
        texts["critique1"] = critique_text(c1, with_result=with_result)
        texts["critique2"] = critique_text(c2, with_result=with_result)
    return _Parts(tuple(pair.context[:-1]), pair.query, texts, critique_with_result=with_result)


def _messages(task: Task, parts: _Parts) -> Messages:
    sections = [
        _PREF_TASK if task == "pref" else _REFL_TASK,
        _HEADINGS["context"] + "\n\n" + _context_block(parts),
        _HEADINGS["responses"] + "\n\n" + _candidates("Response", parts, "response"),
    ]
    if task == "refl":
        sections.append(
            _HEADINGS["critiques"] + "\n\n" + _candidates("Critique", parts, "critique")
        )
    sections.append(_format_instructions(task))
    return [{"role": "user", "content": "\n\n".join(sections)}]


def _context_block(parts: _Parts) -> str:
    lines: list[str] = []
    if parts.earlier or parts.omitted_turns:
        lines.append(_HEADINGS["earlier"])
        if parts.omitted_turns:
            lines.append(f"[… {parts.omitted_turns} earlier turn(s) omitted …]")
        for turn in parts.earlier:
            label = _ROLE_LABELS.get(turn["role"], turn["role"].capitalize())
            lines.append(f"{label}: {neutralise(turn['content'].strip())}")
    lines.append(_HEADINGS["query"] + "\n" + neutralise(parts.query.strip()))
    return "\n\n".join(lines)


def _candidates(noun: str, parts: _Parts, key: str) -> str:
    blocks = []
    keep_verdict = key == "critique" and parts.critique_with_result
    for i in (1, 2):
        body = neutralise(parts.texts[f"{key}{i}"].strip(), keep_verdict=keep_verdict) or "(empty)"
        blocks.append(f"[{noun} {i} begins]\n{body}\n[{noun} {i} ends]")
    return "\n\n".join(blocks)


def _format_instructions(task: Task) -> str:
    noun = "response" if task == "pref" else "critique"
    return (
        _HEADINGS["format"] + "\n\n"
        "Write your evaluation inside <Analysis></Analysis>, then your verdict inside "
        "<Result></Result> as exactly one of:\n"
        f"<Result>{result_sentence(1, task)}</Result>\n"
        f"<Result>{result_sentence(2, task)}</Result>\n"
        f"No ties: choose one {noun}."
    )


# ---------------------------------------------------------------- texts that cannot forge a block

# A text placed in a block (a response, a critique, the query, an earlier turn) is what the judge
# reads, never the prompt's structure: it must not close its block or open another. The prompt's
# boundaries are its block markers ("[Response 1 ends]"), its headings ("## Output format") and the
# <Result> lines of its output format. Inside a text, each marker has its opening ASCII character
# ("[", "<", every "#" of a heading) replaced by the full-width twin ("［", "＜", "＃"). Why this:
# - visible: the model gets other tokens than the real marker's, and a person reading a prompt
#   sees that the text held a marker (a zero-width character would hide the change from people;
#   deleting or rewording the marker would hide that the text held one, and could itself form one);
# - minimal: one character per marker, the words stay as written;
# - exact: each real boundary then occurs once in every prompt, whatever the texts hold, so a
#   policy rewarded by this judge (rmlib.tools.reward) cannot gain by writing delimiters;
# - neutral for ordinary texts: a text holding no marker is returned as it is (the same str), so
#   the prompts of ordinary pairs render byte for byte as before and PROMPT_VERSION stands (none
#   of the ~46k texts of the real benchmark copies holds one; tests/test_prompt_forgery.py).
# Markers are matched as a model would read them: any case, spacing, number or heading level, a
# heading mid-line or with more after its title. A lookalike the text itself already writes
# (full-width brackets) is not a real boundary and stays.
_HEADING_TITLES = "|".join(re.escape(h.lstrip("# ")) for h in _HEADINGS.values())
_FORGERIES = (
    # "[Response 1 ends]", "[critique 2 begins]", ...: the "["
    (re.compile(r"\[(?=\s*(?:response|critique)\s*\d+\s*(?:begins?|ends?)\s*\])", re.I), "［"),
    # "## Output format", "#### context:", "## Output format[", "# Context" ...: every "#" of a
    # heading that begins with one of the titles, wherever it stands and whatever follows (a
    # hashtag, "#context", is no heading and stays)
    (
        re.compile(
            rf"(?<!#)(?:#{{2,}}(?=[^\S\n]*(?:{_HEADING_TITLES}))|#(?=[^\S\n]+(?:{_HEADING_TITLES})))",
            re.I,
        ),
        None,
    ),
    # "<Result>", "</ result >": the "<"
    (re.compile(r"<(?=\s*/?\s*result\s*>)", re.I), "＜"),
)
_OPEN_RESULT = re.compile(r"<\s*result\s*>", re.I)
_CLOSE_RESULT = re.compile(r"<\s*/\s*result\s*>", re.I)


def neutralise(text: str, *, keep_verdict: bool = False) -> str:
    """`text` unable to open or close a block of a judgment prompt (the comment above): the
    prompt's markers inside it get their opening character full-width; a text with none is
    returned unchanged.

    keep_verdict: leave the tags of the text's last complete `<Result>` block (a critique shown
    with its own verdict line, `critique_with_result`); every other marker is neutralised.
    """
    if keep_verdict:
        opens = list(_OPEN_RESULT.finditer(text))
        close = _CLOSE_RESULT.search(text, opens[-1].end()) if opens else None
        if close is not None:
            start = opens[-1]
            return (
                neutralise(text[: start.start()])
                + start.group(0)
                + neutralise(text[start.end() : close.start()])
                + close.group(0)
                + neutralise(text[close.end() :])
            )
    for pattern, twin in _FORGERIES:
        if twin is None:
            text = pattern.sub(lambda m: "＃" * len(m.group(0)), text)
        else:
            text = pattern.sub(twin, text)
    return text


def format_judgment(analysis: str, choice: int, task: Task = "pref") -> str:
    """The exact text of a well-formed judgment (the target of the format warm-up SFT)."""
    verdict = result_sentence(choice, task)
    return f"<Analysis>\n{analysis.strip()}\n</Analysis>\n<Result>{verdict}</Result>"


# ---------------------------------------------------------------- rendering and counting


def render(tokenizer: Any, messages: Messages, *, enable_thinking: bool = False) -> str:
    """The prompt text through the tokenizer's chat template, ready for generation.

    `enable_thinking=False` is Qwen3's non-thinking mode (its template then opens the assistant
    turn with an empty think block); templates without that switch (e.g. SmolLM2's) ignore it.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no chat template")
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
    )


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of a rendered prompt (special tokens come from the template, none are added)."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


# ---------------------------------------------------------------- budgeted prompts


def build_pref_prompt(
    tokenizer: Any, pair: Pair, budget: PromptBudget | None = None, *, enable_thinking: bool = False
) -> Prompt:
    """The Pref. prompt for `pair`, rendered and fitted to `budget` (default PromptBudget())."""
    return _build(tokenizer, "pref", _parts(pair), budget or PromptBudget(), enable_thinking, pair)


def build_refl_prompt(
    tokenizer: Any,
    pair: Pair,
    critique1: str,
    critique2: str,
    budget: PromptBudget | None = None,
    critique_with_result: bool = False,
    *,
    enable_thinking: bool = False,
) -> Prompt:
    """The Refl. prompt comparing two judgments of `pair`, rendered and fitted to `budget`."""
    parts = _parts(pair, critique1, critique2, critique_with_result)
    return _build(tokenizer, "refl", parts, budget or PromptBudget(), enable_thinking, pair)


@dataclass(frozen=True)
class PromptFormat:
    """How the judge is shown its prompts, built once and passed down to everything that renders
    one (judging, stage 2, training examples, the GRPO reward): the tokenizer that renders and
    counts them, the budget, Qwen3's thinking switch (`enable_thinking`, a run's
    model.enable_thinking) and whether a critique shows its <Result> line
    (`critique_with_result`, prompts.critique_with_result). A judge must be shown its prompts
    as it was trained: one object keeps the settings together.
    """

    tokenizer: Any
    budget: PromptBudget = field(default_factory=PromptBudget)
    enable_thinking: bool = False
    critique_with_result: bool = False

    @classmethod
    def of(cls, tokenizer: Any, cfg: Any) -> PromptFormat:
        """The format a params file's `prompts` and `model` sections give (a run's RunConfig or
        `rmlib judge`'s JudgeConfig): one home for reading them."""
        p = cfg.prompts
        budget = PromptBudget(
            max_prompt_tokens=p.max_prompt_tokens,
            max_reflection_prompt_tokens=p.max_reflection_prompt_tokens,
        )
        return cls(tokenizer, budget, cfg.model.enable_thinking, p.critique_with_result)

    def pref(self, pair: Pair) -> Prompt:
        """The Pref. prompt for `pair`, rendered and fitted to the budget."""
        return build_pref_prompt(
            self.tokenizer, pair, self.budget, enable_thinking=self.enable_thinking
        )

    def refl(self, pair: Pair, critique1: str, critique2: str) -> Prompt:
        """The Refl. prompt comparing two judgments of `pair`, rendered and fitted."""
        return build_refl_prompt(
            self.tokenizer,
            pair,
            critique1,
            critique2,
            self.budget,
            self.critique_with_result,
            enable_thinking=self.enable_thinking,
        )

    def refl_messages(self, pair: Pair, critique1: str, critique2: str) -> Messages:
        """The Refl. chat messages, before rendering or fitting (critiques shown as set here)."""
        return refl_messages(
            pair, critique1, critique2, critique_with_result=self.critique_with_result
        )

    def render(self, messages: Messages) -> str:
        """`messages` through the chat template with this format's thinking switch."""
        return render(self.tokenizer, messages, enable_thinking=self.enable_thinking)

    def shown(self) -> dict[str, bool]:
        """The two display settings, as provenance records them."""
        return {
            "enable_thinking": self.enable_thinking,
            "critique_with_result": self.critique_with_result,
        }


# The texts the budget policy may cut, in the order they give way (module docstring).
_RESPONSES = ("response1", "response2")
_CRITIQUES = ("critique1", "critique2")


def _build(
    tokenizer: Any, task: Task, parts: _Parts, budget: PromptBudget, thinking: bool, pair: Pair
) -> Prompt:
    def measure(p: _Parts) -> tuple[str, int]:
        text = render(tokenizer, _messages(task, p), enable_thinking=thinking)
        return text, count_tokens(tokenizer, text)

    text, n = measure(parts)
    limit = budget.limit(task)
    if n <= limit:
        return Prompt(text, n, False, {})
    where = f"pair {pair.key}: {task}"
    if budget.policy == "error":
        raise PromptTooLongError(f"{where} prompt has {n} tokens > {limit}")
    cut: dict[str, int] = {}
    parts, text, n = _drop_turns(parts, measure, limit, n, cut)
    # Responses before critiques: the reflection task judges the critiques, and a critique's
    # conclusion (which response it prefers) comes at its end; cut there, it no longer says what
    # it argues and the question cannot be answered. The responses are the evidence the
    # critiques argue over, and their openings still show it. So the responses give way first
    # (down to their floor), and a critique that must be cut loses its start, not its end.
    for group, keep_end in ((_RESPONSES, False), (_CRITIQUES, True)):
        present = tuple(k for k in group if k in parts.texts)
        if n > limit and present:
            parts, text, n = _cut_texts(
                tokenizer,
                parts,
                measure,
                n,
                cut,
                present,
                keep_end=keep_end,
                limit=limit,
                min_keep=budget.min_keep_tokens,
                where=where,
            )
    if n > limit:
        raise PromptTooLongError(
            f"{where} prompt has {n} tokens > {limit} even after dropping earlier turns and "
            f"cutting responses and critiques to {budget.min_keep_tokens} tokens; the final "
            f"query and instructions are never cut: raise {budget.limit_name(task)}"
        )
    assert text is not None  # n > limit at first, so some step above measured the prompt
    return Prompt(text, n, True, cut)


def _drop_turns(
    parts: _Parts, measure: _Measure, limit: int, n: int, cut: dict[str, int]
) -> tuple[_Parts, str | None, int]:
    """Policy step 1: drop the oldest earlier turns until the prompt fits or none are left."""
    start, text = n, None
    while n > limit and parts.earlier:
        parts = replace(parts, earlier=parts.earlier[1:], omitted_turns=parts.omitted_turns + 1)
        text, n = measure(parts)
    if parts.omitted_turns:
        cut["context_turns"] = parts.omitted_turns
        cut["context_tokens"] = start - n
    return parts, text, n


def _cut_texts(
    tokenizer: Any,
    parts: _Parts,
    measure: _Measure,
    n: int,
    cut: dict[str, int],
    keys: tuple[str, ...],
    *,
    keep_end: bool,
    limit: int,
    min_keep: int,
    where: str,
) -> tuple[_Parts, str, int]:
    """Policy steps 2 and 3: cut the texts `keys` proportionally to their length, from their end
    (or, with `keep_end`, from their start) until the prompt fits; when they cannot make it fit,
    every one of them is cut to its floor and the caller goes on (or gives up).

    Re-tokenising a cut text need not give exactly the tokens kept, so the cut is re-planned with
    the remaining excess until the rendered prompt fits (a few rounds at most).
    """
    ids = {k: tokenizer.encode(parts.texts[k], add_special_tokens=False) for k in keys}
    lengths = {k: len(v) for k, v in ids.items()}
    floor = {k: max(0, n_k - min_keep) for k, n_k in lengths.items()}  # all each can give
    marker_cost = len(tokenizer.encode("\n" + TRUNCATION_MARKER, add_special_tokens=False))
    needed = n - limit + marker_cost * len(keys)
    for _ in range(8):
        plan = _proportional_cuts(lengths, needed, min_keep) or floor
        texts = {k: _cut(tokenizer, parts.texts[k], ids[k], c, keep_end) for k, c in plan.items()}
        cut_parts = replace(parts, texts={**parts.texts, **texts})
        text, n_new = measure(cut_parts)
        if n_new <= limit or plan == floor:
            cut.update({k: c for k, c in plan.items() if c})
            return cut_parts, text, n_new
        needed += n_new - limit
    raise PromptTooLongError(f"{where} prompt: truncation did not converge under {limit} tokens")


def _proportional_cuts(
    lengths: dict[str, int], needed: int, min_keep: int
) -> dict[str, int] | None:
    """Tokens to cut from each text: the same fraction r of each length (rounded up), capped so
    each keeps min_keep tokens; the smallest r whose cuts total >= needed. None if impossible."""
    room = {k: max(0, n - min_keep) for k, n in lengths.items()}
    if sum(room.values()) < needed:
        return None

    def cuts(r: float) -> dict[str, int]:
        return {k: min(ceil(r * n), room[k]) for k, n in lengths.items()}

    lo, hi = 0.0, 1.0
    for _ in range(50):  # bisection on r: the totals grow with r and reach sum(room) at r = 1
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if sum(cuts(mid).values()) >= needed else (mid, hi)
    return cuts(hi)


def _cut(tokenizer: Any, text: str, ids: list[int], n_cut: int, keep_end: bool) -> str:
    """`text` less `n_cut` tokens from its end (or its start, with `keep_end`), marked."""
    if n_cut <= 0:
        return text
    kept_ids = ids[n_cut:] if keep_end else ids[: len(ids) - n_cut]
    kept = tokenizer.decode(kept_ids, clean_up_tokenization_spaces=False)
    # A cut inside a multi-byte character decodes to U+FFFD: drop that debris.
    if keep_end:
        return TRUNCATION_MARKER + "\n" + kept.lstrip("\ufffd").lstrip()
    return kept.rstrip("\ufffd").rstrip() + "\n" + TRUNCATION_MARKER
