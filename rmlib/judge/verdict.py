"""Parse a judgment: the verdict in its LAST `<Result>` block, or a named failure.

The output format (method.md §1) is `<Analysis>…</Analysis>` then `<Result>…</Result>`, the result
one of two sentences: "Response 1 is better than Response 2" / "Response 2 is better than
Response 1" (task "pref"), or the same with "Critique" (task "refl"). Anything else is a parse
failure, one of the kinds below, counted by callers and never guessed.

Rules, in the order they are applied:

1. `finish_reason == "length"` -> `truncated`, whatever the text holds (strict reading: an output
   cut off at the token limit is not a finished judgment, even if a Result block came before the
   cut; the model may have meant to revise it).
2. Empty or whitespace-only text -> `empty`.
3. Only the last `<Result>` opening tag counts (tags are case-insensitive, `< result >` spacing is
   tolerated). No such tag, or no `</Result>` after it (unclosed) -> `missing`. An earlier
   complete block does not rescue an unclosed last one.
4. The block's content is normalised: Unicode NFKC (so full-width "Ｒｅｓｐｏｎｓｅ １" reads as
   "Response 1": the meaning is unambiguous), markdown emphasis/backticks/quotes removed,
   whitespace collapsed, case folded, trailing `.`/`!` dropped. It must then be exactly
   "<noun> i is better than <noun> j" with i != j in {1, 2} and <noun> the task's noun
   ("response" for pref, "critique" for refl) -> a verdict (choice = i).
5. Otherwise: the same index on both sides ("Response 1 is better than Response 1"), or tie
   wording (tie, equal(ly), neither, both, same) with no sentence naming two different
   candidates -> `tie`.
6. Anything else -> `ambiguous`: both orders in one block, extra prose around the sentence (a
   "Result:" label included), an empty block, the other task's noun (a pref-style
   "Response 1 is better…" answer to a refl prompt, or the reverse), mixed nouns, other
   languages.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Task = Literal["pref", "refl"]

EMPTY = "empty"
TRUNCATED = "truncated"
MISSING = "missing"
AMBIGUOUS = "ambiguous"
TIE = "tie"
FAILURE_KINDS: tuple[str, ...] = (EMPTY, TRUNCATED, MISSING, AMBIGUOUS, TIE)

NOUNS: dict[str, str] = {"pref": "Response", "refl": "Critique"}

_OPEN_RESULT = re.compile(r"<\s*result\s*>", re.IGNORECASE)
_CLOSE_RESULT = re.compile(r"<\s*/\s*result\s*>", re.IGNORECASE)
_OPEN_ANALYSIS = re.compile(r"<\s*analysis\s*>", re.IGNORECASE)
_CLOSE_ANALYSIS = re.compile(r"<\s*/\s*analysis\s*>", re.IGNORECASE)
# Markdown emphasis, code ticks and quotes carry no meaning inside a verdict sentence.
_DECORATION = re.compile(r"[*_`\"'“”‘’]")
_TIE_WORDS = re.compile(r"\b(tie|tied|equal|equally|neither|both|same)\b")


@dataclass(frozen=True)
class Verdict:
    """A parsed judgment: `choice` 1 or 2 (the candidate judged better), or a `failure` kind."""

    choice: int | None
    failure: str | None

    def __post_init__(self) -> None:
        if (self.choice is None) == (self.failure is None):
            raise ValueError("a Verdict has exactly one of choice and failure")
        if self.choice is not None and self.choice not in (1, 2):
            raise ValueError(f"choice must be 1 or 2, got {self.choice!r}")
        if self.failure is not None and self.failure not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {self.failure!r}")

    @property
    def ok(self) -> bool:
        return self.choice is not None


def result_sentence(choice: int, task: Task = "pref") -> str:
    """The exact verdict sentence for `choice` (1 or 2) in `task`."""
    if choice not in (1, 2):
        raise ValueError(f"choice must be 1 or 2, got {choice!r}")
    noun = _noun(task)
    return f"{noun} {choice} is better than {noun} {3 - choice}"


def parse_verdict(text: str, task: Task = "pref", finish_reason: str = "stop") -> Verdict:
    """The verdict of one judgment output; see the module docstring for the exact rules."""
    noun = _noun(task).lower()
    if finish_reason == "length":
        return Verdict(None, TRUNCATED)
    if not text or not text.strip():
        return Verdict(None, EMPTY)
    content = last_result_content(text)
    if content is None:
        return Verdict(None, MISSING)
    return _read_sentence(_normalise(content), noun)


def last_result_content(text: str) -> str | None:
    """The raw content of the last `<Result>` block, or None if absent or unclosed."""
    opens = list(_OPEN_RESULT.finditer(text))
    if not opens:
        return None
    start = opens[-1].end()
    close = _CLOSE_RESULT.search(text, start)
    return None if close is None else text[start : close.start()]


def verdict_position(text: str, task: Task = "pref") -> int | None:
    """The character index, in `text`, of the digit that decides its verdict (the first index of
    "<noun> i is better than …" in the last `<Result>` block), or None when it has no verdict.

    After that digit the sentence is forced ("is better than <noun> j"), so the probability the
    judge gave its verdict is the probability of the token holding this digit.
    """
    if not parse_verdict(text, task).ok:
        return None
    start = list(_OPEN_RESULT.finditer(text))[-1].end()
    found = re.search(rf"{_noun(task)}\W*([12])", text[start:], re.IGNORECASE)
    return None if found is None else start + found.start(1)


def verdict_token(
    text: str, token_ids: Sequence[int], decode: Callable[[list[int]], str], task: Task = "pref"
) -> int | None:
    """The index of the generated token holding the verdict's deciding digit, or None (no
    verdict, or token ids unknown: -1). `decode(ids)` is the tokenizer's decode; prefixes are
    decoded (a binary search: about log2(T) decodes), so multi-character and multi-byte tokens
    are placed where the text has them."""
    pos = verdict_position(text, task)
    if pos is None or not token_ids or min(token_ids) < 0:
        return None
    ids = list(token_ids)
    lo, hi = 1, len(ids)  # the smallest k whose decoded prefix reaches past `pos`
    if len(decode(ids)) <= pos:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if len(decode(ids[:mid])) > pos else (mid + 1, hi)
    return lo - 1


def analysis_text(text: str) -> str:
    """The critique shown to the reflection task: the judgment's analysis, without its verdict.

    The content of the last `<Analysis>` block if there is one (an unclosed block runs to the next
    `<Result>` tag or the end); otherwise everything before the last `<Result>` tag; stripped.
    """
    opens = list(_OPEN_ANALYSIS.finditer(text))
    if opens:
        start = opens[-1].end()
        end = _first_end(text, start, (_CLOSE_ANALYSIS, _OPEN_RESULT))
        return text[start:end].strip()
    results = list(_OPEN_RESULT.finditer(text))
    end = results[-1].start() if results else len(text)
    return text[:end].strip()


def _first_end(text: str, start: int, patterns: tuple[re.Pattern[str], ...]) -> int:
    found = [m.start() for p in patterns if (m := p.search(text, start))]
    return min(found) if found else len(text)


def _noun(task: str) -> str:
    if task not in NOUNS:
        raise ValueError(f"task must be one of {sorted(NOUNS)}, got {task!r}")
    return NOUNS[task]


def _normalise(content: str) -> str:
    s = unicodedata.normalize("NFKC", content)
    s = _DECORATION.sub("", s)
    s = " ".join(s.split()).casefold()
    return s.rstrip(".! ").strip()


def _read_sentence(s: str, noun: str) -> Verdict:
    exact = re.fullmatch(rf"{noun} ([12]) is better than {noun} ([12])", s)
    if exact and exact[1] != exact[2]:
        return Verdict(int(exact[1]), None)
    # Any "X i is better than Y j" inside the block, whatever the nouns, to tell ties from noise.
    claims = re.findall(r"(\w+) ([12]) is better than (\w+) ([12])", s)
    distinct = [c for c in claims if c[1] != c[3]]
    if exact or (claims and not distinct):
        return Verdict(None, TIE)  # "Response 1 is better than Response 1"
    if not distinct and _TIE_WORDS.search(s):
        return Verdict(None, TIE)
    return Verdict(None, AMBIGUOUS)
