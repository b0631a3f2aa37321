"""The reference analysis of a demo pair: a short correct critique that says why the better
response is better (the format warm-up's targets).
"""

from __future__ import annotations

from collections.abc import Callable

from rmlib.data.demo.items import KINDS
from rmlib.data.demo.loader import SOURCE
from rmlib.data.pair import Pair


def reference_analysis(pair: Pair) -> str:
    """A short, correct analysis of a demo pair that explains why the better response wins.

    Slot numbers follow `pair.label`, so it stays right for a swapped pair.
    """
    kind = pair.meta.get("kind")
    if pair.source != SOURCE or kind not in _ANALYSES:
        raise ValueError(
            f"pair {pair.key}: not a demo pair (source {pair.source!r}, kind {kind!r})"
        )
    good, bad = pair.label, 3 - pair.label
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


_ANALYSES: dict[str, Callable[[dict, str, str], str]] = {
    **dict.fromkeys(("add", "sub", "mul"), _analysis_arith),
    "word_count": _analysis_words,
    "case": _analysis_case,
    "required_word": _analysis_word,
    "list": _analysis_list,
    **dict.fromkeys(KINDS["passage"], _analysis_passage),
    **dict.fromkeys(KINDS["refusal"], _analysis_refusal),
}
