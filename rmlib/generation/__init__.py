"""Generation: the backend contract, the transformers and HTTP backends, the on-disk store.

`HFBackend` and `HTTPBackend` are imported lazily so that code needing only the contract or the
store (parsing, scoring) does not pay for importing torch.
"""

from typing import Any

from rmlib.generation.base import (
    Backend,
    FinishReason,
    Generation,
    SamplingParams,
    generation_key,
)
from rmlib.generation.store import CachedBackend, CacheStats, GenerationStore, prompt_sha

__all__ = [
    "Backend",
    "CacheStats",
    "CachedBackend",
    "FinishReason",
    "Generation",
    "GenerationStore",
    "HFBackend",
    "HTTPBackend",
    "SamplingParams",
    "generation_key",
    "prompt_sha",
    "sample_seed",
    "stop_token_ids",
]

_LAZY = {"HFBackend", "sample_seed", "stop_token_ids"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from rmlib.generation import hf

        return getattr(hf, name)
    if name == "HTTPBackend":
        from rmlib.generation.http import HTTPBackend

        return HTTPBackend
    raise AttributeError(f"module 'rmlib.generation' has no attribute {name!r}")
