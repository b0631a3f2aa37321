"""The generation backends by name, and what building one takes.

A backend is registered once, with its maker (`register`): `generation.backend` accepts exactly
the registered names (rmlib.generation.settings), and `rmlib.generation.backends.build_backend`
is the one builder every caller uses (a run's models, `rmlib judge`, the reward functions,
`rmlib serve`). The makers live in `rmlib.generation.backends`, each importing its engine only
when called, so `import rmlib.generation` stays free of torch and vLLM. Adding a backend: its
module, and one `@register` maker there.

This module imports nothing of rmlib: the settings check it, the makers fill it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class Weights:
    """What a backend generates with: a checkpoint (hub id, local folder or `embedded:` name; its
    tokenizer renders the prompts), an optional PEFT adapter on it, and the precision.

    precision: resolved (nf4, bf16, fp32), or None where the weights are a server's and unknown
    here (the store then keys on the served name alone). served_name: the name
    OpenAI-compatible servers answer to (None: the checkpoint). merge_into: where the adapter is
    merged when the backend merges it (vLLM's 'merged' adapter mode; None: the model cache,
    keyed by base and adapter)."""

    checkpoint: str
    precision: str | None
    adapter: str | None = None
    served_name: str | None = None
    trust_remote_code: bool = False
    merge_into: Path | None = None

    @property
    def identity(self) -> str:
        """The store's key for these weights ('' when the precision is unknown)."""
        from rmlib.generation.models import model_identity

        if self.precision is None:
            return ""
        return model_identity(self.checkpoint, precision=self.precision, adapter=self.adapter)


@dataclass(frozen=True)
class Needs:
    """What the caller's generations need of a backend.

    context_tokens: longest prompt + longest generation (an engine's max_model_len; a server's
    window is checked against it; None: not checked). seed: the engine's. lora_rank: the vLLM
    engine serves LoRA adapters at this rank beside `Weights.adapter` (a run's engine shared by
    its trained models; None: only the weights' own adapter, at its rank). api_key: sent to
    servers (None: from generation.api_key_env). logprobs_kind, extra_body: the HTTP backend's
    (None: generation.http_logprobs_kind; nothing extra). servers: starts, or returns the running,
    servers for backend 'served' (a run's). source: names the params in error lines."""

    context_tokens: int | None = None
    seed: int = 0
    lora_rank: int | None = None
    api_key: str | None = None
    logprobs_kind: str | None = None
    extra_body: dict[str, Any] | None = None
    servers: Callable[[], Any] | None = None
    source: str = "params"


# (generation section, weights, needs) -> (backend, tokenizer that renders its prompts)
Maker = Callable[[Any, Weights, Needs], tuple[Any, Any]]


@dataclass(frozen=True)
class Entry:
    """A registered backend. who: who generates, in a run's facts line ("the transformers decode
    loop"). engine: what the run's generations cost, as the dry run counts them: 'vllm' (a vLLM
    engine on the run's GPUs, in process or behind servers the run starts: its start, its share
    of the card), 'transformers' (our decode loop: weights + a KV cache of max_batch_tokens) or
    'remote' (servers someone else runs: nothing here, and their precision is theirs). servers:
    it sends requests to servers (the API key applies). run_only: it needs a run (servers of the
    run's models)."""

    maker: Maker
    who: str
    engine: Literal["vllm", "transformers", "remote"] = "vllm"
    servers: bool = False
    run_only: bool = False

    @property
    def local_weights(self) -> bool:
        """Whether it generates with the weights the run loads (the run's precision applies)."""
        return self.engine != "remote"


BACKENDS: dict[str, Entry] = {}


def register(
    name: str,
    *,
    who: str,
    engine: Literal["vllm", "transformers", "remote"] = "vllm",
    servers: bool = False,
    run_only: bool = False,
) -> Callable[[Maker], Maker]:
    """Enter a backend's maker under `name` (a value of generation.backend)."""

    def add(maker: Maker) -> Maker:
        BACKENDS[name] = Entry(maker, who, engine, servers, run_only)
        return maker

    return add


def backend_names() -> tuple[str, ...]:
    """The registered names, in registration order."""
    return tuple(BACKENDS)
