"""The reference analysis of a demo pair: a short correct critique that says why the better
response is better (the format warm-up's targets), in one of two styles (`STYLES`):

- `verdict`: the conclusion first ("Response 2 gets every step right…"), then why; the model
  must pick the better slot before it has written anything about either response.
- `evidence`: each response's checkable fact in slot order (Response 1, then Response 2: what it
  answers, its last step, its opening words), each judged on the spot, then the conclusion.
  Every decision is local to text just copied, which a 135M model can learn from a few dozen
  examples (docs/demo-judge.md has the measurements that chose it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar, get_args

from rmlib.data.demo.items import KINDS
from rmlib.data.demo.loader import SOURCE
from rmlib.data.pair import Pair

AnalysisStyle = Literal["verdict", "evidence"]
STYLES: tuple[str, ...] = get_args(AnalysisStyle)


def reference_analysis(pair: Pair, style: AnalysisStyle = "verdict") -> str:
    """A short, correct analysis of a demo pair that explains why the better response wins.

    Slot numbers follow `pair.label`, so it stays right for a swapped pair.
    """
    kind = pair.meta.get("kind")
    if pair.source != SOURCE or kind not in _ANALYSES:
        raise ValueError(
            f"pair {pair.key}: not a demo pair (source {pair.source!r}, kind {kind!r})"
        )
    if style not in STYLES:
        raise ValueError(f"unknown analysis style {style!r}; one of {STYLES}")
    good, bad = pair.label, 3 - pair.label
    if style == "evidence":
        body = _EVIDENCE[kind](pair)
    else:
        body = _ANALYSES[kind](pair.meta, f"Response {good}", f"Response {bad}")
    return f"{body} Therefore Response {good} is better."


def _analysis_arith(m: dict, g: str, b: str) -> str:
    return (
        f"{m['expr']} = {m['answer']}. {g} gets every step right and reaches {m['answer']}. "
        f"{b} slips in one step ({m['bad_step']}; it should be {m['good_step']}), so its "
        f"answer {m['wrong']} is wrong."
    )


def _analysis_words(m: dict, g: str, b: str) -> str:
    return (
        f"The user asked for exactly {m['k']} words. {g} has {m['k']} words, as required. "
        f"{b} has {m['bad_k']} words, so it breaks the instruction."
    )


def _analysis_case(m: dict, g: str, b: str) -> str:
    return (
        f"The user asked for the sentence in {m['case_name']}. {g} is written entirely in "
        f"{m['case_short']}. {b} is not: it still mixes upper and lower case."
    )


def _analysis_word(m: dict, g: str, b: str) -> str:
    return (
        f"The user required the word '{m['word']}'. {g} is about {m['topic']} and uses "
        f"'{m['word']}'. {b} never uses '{m['word']}', so it ignores the requirement."
    )


def _analysis_list(m: dict, g: str, b: str) -> str:
    return (
        f"The user asked for exactly {m['k']} {m['category']}. {g} lists {m['k']} items. "
        f"{b} lists {m['bad_k']} items, so it does not follow the instruction."
    )


def _analysis_passage(m: dict, g: str, b: str) -> str:
    fact = m["fact"] if m["fact"].endswith(".") else m["fact"] + "."
    return (
        f"The passage says {fact} {g} answers {m['answer']}, which matches the "
        f"passage. {b} answers {m['wrong']}, which contradicts the passage."
    )


def _analysis_refusal(m: dict, g: str, b: str) -> str:
    return (
        f"The request ({m['topic']}) is harmless. {g} answers it helpfully and correctly. "
        f"{b} refuses without a good reason, which is unhelpful."
    )


W = TypeVar("W")


def _by_kind(
    arith: W, words: W, case: W, word: W, lists: W, passage: W, refusal: W
) -> dict[str, W]:
    """One writer per demo kind: the arithmetic kinds share one, as do the passage and refusal
    kinds (one table of kinds for both styles)."""
    return {
        **dict.fromkeys(KINDS["arithmetic"], arith),
        "word_count": words,
        "case": case,
        "required_word": word,
        "list": lists,
        **dict.fromkeys(KINDS["passage"], passage),
        **dict.fromkeys(KINDS["refusal"], refusal),
    }


_ANALYSES: dict[str, Callable[[dict, str, str], str]] = _by_kind(
    _analysis_arith,
    _analysis_words,
    _analysis_case,
    _analysis_word,
    _analysis_list,
    _analysis_passage,
    _analysis_refusal,
)


# ---------------------------------------------------------------- evidence first, slot by slot


def _slots(pair: Pair, say: Callable[[str, bool], str]) -> str:
    """`say(response text, is_better)` for Response 1, then Response 2."""
    texts = (pair.response1, pair.response2)
    return " ".join(f"Response {s} {say(texts[s - 1], s == pair.label)}" for s in (1, 2))


def _opening(text: str, n: int = 4) -> str:
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


def _evidence_arith(p: Pair) -> str:
    m = p.meta

    def say(_: str, ok: bool) -> str:
        if ok:
            return f"writes {m['good_step']}, which is right, and answers {m['answer']}."
        return (
            f"writes {m['bad_step']}, which is wrong ({m['good_step']}), and answers {m['wrong']}."
        )

    return _slots(p, say) + f" {m['expr']} = {m['answer']}."


def _evidence_words(p: Pair) -> str:
    m = p.meta
    body = _slots(p, lambda _, ok: f"has {m['k'] if ok else m['bad_k']} words.")
    return f"The user asked for exactly {m['k']} words. {body}"


def _evidence_case(p: Pair) -> str:
    m = p.meta

    def say(text: str, ok: bool) -> str:
        how = f"entirely in {m['case_short']}" if ok else "in mixed upper and lower case"
        return f"begins '{_opening(text)}', {how}."

    return f"The user asked for {m['case_name']}. {_slots(p, say)}"


def _evidence_word(p: Pair) -> str:
    w = p.meta["word"]
    body = _slots(p, lambda _, ok: f"uses '{w}'." if ok else f"never uses '{w}'.")
    return f"The user required the word '{w}'. {body}"


def _evidence_list(p: Pair) -> str:
    m = p.meta
    body = _slots(p, lambda _, ok: f"lists {m['k'] if ok else m['bad_k']} items.")
    return f"The user asked for exactly {m['k']} {m['category']}. {body}"


def _evidence_passage(p: Pair) -> str:
    m = p.meta
    fact = m["fact"] if m["fact"].endswith(".") else m["fact"] + "."

    def say(_: str, ok: bool) -> str:
        if ok:
            return f"answers {m['answer']}, which matches the passage."
        return f"answers {m['wrong']}, which contradicts the passage."

    return f"The passage says {fact} {_slots(p, say)}"


def _evidence_refusal(p: Pair) -> str:
    def say(text: str, ok: bool) -> str:
        return f"begins '{_opening(text)}': " + ("it answers the request." if ok else "it refuses.")

    return (
        f"{_slots(p, say)} The request ({p.meta['topic']}) is harmless, so refusing it is "
        "unhelpful."
    )


_EVIDENCE: dict[str, Callable[[Pair], str]] = _by_kind(
    _evidence_arith,
    _evidence_words,
    _evidence_case,
    _evidence_word,
    _evidence_list,
    _evidence_passage,
    _evidence_refusal,
)
