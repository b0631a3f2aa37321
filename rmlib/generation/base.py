"""The generation interface every backend implements.

Prompts (already rendered through the chat template) and sampling settings go in; for each prompt,
n generations come out, each with its text, the generated token ids, the model's own log-probability
of every generated token, and why it stopped.

Log-probabilities are always those of the raw model distribution at temperature 1 (log-softmax of
the logits before temperature, top-k or top-p), of the tokens actually generated: the quantity
method.md §4 defines confidence on, whatever sampling settings produced the tokens.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """Every generation setting, explicit, so a checkpoint's generation_config never applies.

    `do_sample=False` is greedy decoding (temperature/top_k/top_p ignored). `seed` with the prompt
    and the sample index identifies a sample: the same (seed, prompt, params, index) gives the same
    tokens whatever else shares its batch.
    """

    max_new_tokens: int = 512
    do_sample: bool = True
    temperature: float = 1.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if self.do_sample and self.temperature <= 0:
            raise ValueError("temperature must be > 0 when sampling (use do_sample=False)")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")

    @classmethod
    def greedy(cls, max_new_tokens: int = 512) -> SamplingParams:
        return cls(max_new_tokens=max_new_tokens, do_sample=False, temperature=1.0, seed=0)

    def key(self) -> str:
        """Canonical string of the settings, part of the generation store key."""
        d = asdict(self)
        if not self.do_sample:  # greedy: sampling knobs and seed cannot change the output
            d.update(temperature=None, top_k=None, top_p=None, seed=None)
        return json.dumps(d, sort_keys=True)


@dataclass
class Generation:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    prompt_tokens: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)

    def copy(self) -> Generation:
        """An independent copy (a greedy prompt's one decode is handed to each sample index)."""
        return Generation(
            self.text,
            list(self.token_ids),
            list(self.logprobs),
            self.finish_reason,
            self.prompt_tokens,
            dict(self.meta),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, s: str) -> Generation:
        return cls(**json.loads(s))


@runtime_checkable
class Backend(Protocol):
    """A text generator. `identity` names model + adapter + precision: the store keys on it."""

    identity: str

    def generate(
        self, prompts: list[str], params: SamplingParams, n: int = 1, offset: int = 0
    ) -> list[list[Generation]]:
        """Samples offset … offset+n-1 of each prompt, in prompt order.

        Sample i of a prompt depends only on (model, prompt, params, i): asking for samples 4..7
        later gives the same tokens as asking for 0..7 at once (up to batch numerics).
        """
        ...


def generation_key(identity: str, prompt: str, params: SamplingParams, index: int) -> str:
    """Content key of one sample: (model identity, prompt, settings, sample index)."""
    h = hashlib.sha256()
    for part in (identity, prompt, params.key(), str(index)):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def sample_seed(seed: int, prompt: str, index: int) -> int:
    """The RNG seed of sample `index` of `prompt`: a 63-bit hash of (seed, prompt, index).

    Every backend seeds sample i from it (one generator per sample), so a sample does not depend
    on what shares its batch, and a regenerated sample is the same sample.
    """
    h = hashlib.sha256(f"{seed}\x00{index}\x00".encode() + prompt.encode("utf-8"))
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)


def encode_prompt(tokenizer: Any, prompt: str) -> list[int]:
    """A rendered prompt's token ids: no special tokens added (the chat template has them)."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError("empty prompt: nothing to condition on")
    return list(ids)
