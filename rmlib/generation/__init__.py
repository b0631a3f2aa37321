"""Generation: the backend contract, the transformers backend, the on-disk store.

`HFBackend` is imported lazily so that code needing only the contract or the store (parsing,
scoring) does not pay for importing torch.
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
    raise AttributeError(f"module 'rmlib.generation' has no attribute {name!r}")
