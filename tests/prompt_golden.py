"""The renderings of real pairs' prompts, as sha256 digests: `tests/fixtures/prompts/<version>.json`
was written by this module from the code BEFORE the block markers were neutralised (#29), and
tests/test_prompt_forgery.py checks today's code renders every one of them byte for byte (stored
generations and trained adapters stay valid).

    PYTHONPATH=. python tests/prompt_golden.py   # rewrite the fixture (only for a new version)

Sources: the bundled fixtures (always there), the demo generator, and the real benchmark copies
in ../shared/data when present. Per pair: the Pref. messages, the Refl. messages with the
critiques shown as analyses and with their <Result> lines, and for some pairs the whole prompt
through Qwen3's chat template under a budget small enough that the truncation policy cuts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "prompts" / "reflectrm-v1.json"
SHARED = Path("/work/shared/data")
PER_SOURCE = 40  # pairs whose messages are digested
BUDGETED = 6  # of those, pairs rendered through the tokenizer under a cutting budget

LOCAL = {
    "helpsteer3": HERE / "fixtures" / "helpsteer3",
    "ppe": HERE / "fixtures" / "ppe",
    "skywork": HERE / "fixtures" / "skywork",
    "rmb": HERE / "fixtures" / "rmb",
}
REAL = {
    "rewardbench": SHARED / "rewardbench",
    "rm-bench": SHARED / "rm-bench",
    "judgebench": SHARED / "judgebench",
    "hh-rlhf": SHARED / "hh-rlhf",
    "llmbar": SHARED / "llmbar",
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def critiques(pair) -> tuple[str, str]:
    """Two ordinary judgments of `pair` (markdown, quotes, the verdict line)."""
    from rmlib.judge.prompts import format_judgment

    a = (
        f"Response 1 answers the query ({pair.id}) directly.\n\n- **correct**: yes\n"
        '- `style`: concise\n\nResponse 2 misses a step: it says "about 40".'
    )
    b = (
        "## Comparison\n\nBoth are fluent; Response 2 is more detailed [1], "
        "but Response 1 is right."
    )
    return format_judgment(a, 1), format_judgment(b, 2)


def sample(pairs: list) -> list:
    step = max(1, len(pairs) // PER_SOURCE)
    return pairs[::step][:PER_SOURCE]


def sources(real: bool = True) -> Iterator[tuple[str, list]]:
    """(name, sampled pairs) of every source present here."""
    from rmlib import data
    from rmlib.data.demo.loader import load_demo

    for name, path in LOCAL.items():
        yield name, sample(data.load(name, str(path)).pairs)
    yield "demo", sample(load_demo(split="eval", n=32).pairs)
    for name, path in REAL.items() if real else ():
        if path.exists():
            yield name, sample(data.load(name, str(path)).pairs)


def renderings(name: str, pairs: list, tokenizer) -> dict[str, str]:
    """Digest of each rendering of `pairs`, keyed `<source>|<pair key>|<form>`."""
    from rmlib.judge.prompts import (
        PromptBudget,
        PromptTooLongError,
        build_pref_prompt,
        build_refl_prompt,
        pref_messages,
        refl_messages,
    )

    out: dict[str, str] = {}
    small = PromptBudget(max_prompt_tokens=360, max_reflection_prompt_tokens=520)
    for i, pair in enumerate(pairs):
        c1, c2 = critiques(pair)
        key = f"{name}|{pair.key}"
        out[f"{key}|pref"] = _digest(json.dumps(pref_messages(pair)))
        out[f"{key}|refl"] = _digest(json.dumps(refl_messages(pair, c1, c2)))
        with_result = refl_messages(pair, c1, c2, critique_with_result=True)
        out[f"{key}|refl+result"] = _digest(json.dumps(with_result))
        if i >= BUDGETED:
            continue
        for form, build in (
            ("pref@360", lambda: build_pref_prompt(tokenizer, pair, small)),  # noqa: B023
            ("refl@520", lambda: build_refl_prompt(tokenizer, pair, c1, c2, small, True)),  # noqa: B023
        ):
            try:
                prompt = build()
                out[f"{key}|{form}"] = _digest(f"{prompt.text}|{prompt.n_tokens}|{prompt.cut}")
            except PromptTooLongError:
                out[f"{key}|{form}"] = "PromptTooLongError"
    return out


def qwen_tokenizer():
    from transformers import AutoTokenizer

    from rmlib.generation.models import qwen3_tokenizer_dir

    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())


def all_renderings(real: bool = True) -> dict[str, str]:
    tok = qwen_tokenizer()
    out: dict[str, str] = {}
    for name, pairs in sources(real):
        out.update(renderings(name, pairs, tok))
    return out


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(all_renderings(), indent=0, sort_keys=True) + "\n")
    print(FIXTURE, len(json.loads(FIXTURE.read_text())))
