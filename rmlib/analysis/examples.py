"""Worked examples (notebook 06): a pair where the reflection overruled a wrong anchor and one
where it failed, with every stage-2 call.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rmlib.data.pair import Pair
from rmlib.run.folder import RunFolder


def worked_examples(run: RunFolder, model: str, k: int = 1) -> dict[str, list[dict[str, Any]]]:
    """Up to k pairs where ReflectRM's reflection overruled a wrong anchor (`overrule`), and up
    to k where it failed (`failure`): it overruled a right anchor, or kept a wrong one although a
    correct critique was offered. Each example holds the pair's texts, the anchor's critique, and
    every stage-2 call (the other critique, the reflection's output, who won).
    """
    t = {n: run.read_table(f"{n}_{model}") for n in ("rollouts", "reflections", "predictions")}
    pairs = {p.key: p for p in run.pairs("pairs_eval")}
    final = t["predictions"][t["predictions"]["method"] == "reflectrm"]
    refl = t["reflections"]
    refl = refl[refl["method"] == "reflectrm"] if len(refl) else refl
    out: dict[str, list[dict[str, Any]]] = {"overrule": [], "failure": []}
    for row in final.itertuples(index=False):
        case = _case(row, refl)
        if case and len(out[case[0]]) < k:
            out[case[0]].append(_example(row, case[1], t["rollouts"], refl, pairs))
    return out


def _case(row: Any, refl: pd.DataFrame) -> tuple[str, str] | None:
    if pd.isna(row.anchor) or pd.isna(row.verdict) or refl.empty:
        return None
    mine = refl[refl["key"] == row.key]
    anchor_right = bool(mine["anchor_correct"].iloc[0]) if len(mine) else None
    if anchor_right is None:
        return None
    if not anchor_right and row.correct:
        return "overrule", "the reflection overruled a wrong anchor"
    if anchor_right and not row.correct:
        return "failure", "the reflection overruled a right anchor"
    if not anchor_right and not row.correct and mine["i_correct"].astype(bool).any():
        return "failure", "a wrong anchor stood although a correct critique was offered"
    return None


def _example(
    row: Any,
    what: str,
    rollouts: pd.DataFrame,
    refl: pd.DataFrame,
    pairs: dict[str, Pair],
) -> dict[str, Any]:
    roll = rollouts[rollouts["key"] == row.key].set_index("sample")
    anchor = int(row.anchor)
    given_key = row.key.rsplit(":", 1)[0] + ":given"
    pair = pairs.get(row.key) or pairs.get(given_key)
    if pair is not None and pair.key != row.key:
        pair = pair.swapped()
    calls = [
        {
            "i": int(c.i),
            "i_verdict": _int(c.i_choice),
            "i_correct": bool(c.i_correct),
            "anchor_slot": int(c.anchor_slot),
            "critique": roll.loc[int(c.i), "text"],
            "reflection": c.text,
            "other_wins": bool(c.other_wins),
            "failure": None if pd.isna(c.failure) else str(c.failure),
        }
        for c in refl[refl["key"] == row.key].itertuples(index=False)
    ]
    return {
        "what": what,
        "key": row.key,
        "label": int(row.label),
        "query": pair.query if pair else "",
        "response1": pair.response1 if pair else "",
        "response2": pair.response2 if pair else "",
        "anchor": anchor,
        "anchor_verdict": _int(roll.loc[anchor, "choice"]),
        "anchor_confidence": float(roll.loc[anchor, "confidence"]),
        "anchor_critique": roll.loc[anchor, "text"],
        "calls": calls,
        "winners": [c["i"] for c in calls if c["other_wins"]],
        "final_verdict": _int(row.verdict),
        "final_correct": bool(row.correct),
    }


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def examples_markdown(examples: dict[str, list[dict[str, Any]]], max_chars: int = 600) -> str:
    """The worked examples as Markdown (texts shortened to `max_chars`)."""
    titles = {
        "overrule": "A reflection overruling a wrong anchor",
        "failure": "A reflection failing",
    }
    parts = []
    for case, title in titles.items():
        parts.append(f"### {title}")
        if not examples.get(case):
            parts.append("_No such pair in this run._")
        for ex in examples.get(case, []):
            parts.append(_example_md(ex, max_chars))
    return "\n\n".join(parts)


def _example_md(ex: dict[str, Any], n: int) -> str:
    lines = [
        f"**{ex['key']}**: {ex['what']}. Label: Response {ex['label']} is better; anchor "
        f"(sample {ex['anchor']}, confidence {ex['anchor_confidence']:.3f}) says Response "
        f"{ex['anchor_verdict']}; winners {ex['winners'] or 'none'}; final verdict: Response "
        f"{ex['final_verdict']} ({'right' if ex['final_correct'] else 'wrong'}).",
        f"> **Query:** {_quote(ex['query'], n)}",
        f"> **Response 1:** {_quote(ex['response1'], n)}",
        f"> **Response 2:** {_quote(ex['response2'], n)}",
        f"**Anchor's critique** (sample {ex['anchor']}):",
        f"```\n{_short(ex['anchor_critique'], n)}\n```",
    ]
    for c in ex["calls"]:
        verdict = "beats the anchor" if c["other_wins"] else "loses to the anchor"
        fail = f" (reflection unparseable: {c['failure']})" if c["failure"] else ""
        lines.append(
            f"**Sample {c['i']}** (says Response {c['i_verdict']}, "
            f"{'right' if c['i_correct'] else 'wrong'}) {verdict}{fail}:\n\n"
            f"```\n{_short(c['critique'], n)}\n```\nReflection (anchor in slot "
            f"{c['anchor_slot']}):\n\n```\n{_short(c['reflection'], n)}\n```"
        )
    return "\n\n".join(lines)


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _quote(text: str, n: int) -> str:
    return _short(text, n).replace("\n", "\n> ")


def show_examples(examples: dict[str, list[dict[str, Any]]], max_chars: int = 600) -> Any:
    """The worked examples rendered for a notebook (IPython Markdown)."""
    from IPython.display import Markdown

    return Markdown(examples_markdown(examples, max_chars))
