"""Generation: the backend contract, the vLLM, transformers and HTTP backends, the store, the
one builder of a backend (`rmlib.generation.backends.build_backend`) and its registry.

`VLLMBackend`, `HFBackend` and `HTTPBackend` are imported lazily so that code needing only the
contract or the store (parsing, scoring) does not pay for importing torch.
"""

from typing import Any

# the registered backends' makers (each imports its engine only when called)
from rmlib.generation import backends as _backends  # noqa: F401
from rmlib.generation.base import (
    Backend,
    FinishReason,
    Generation,
    SamplingParams,
    generation_key,
    sample_seed,
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
    "VLLMBackend",
    "generation_key",
    "prompt_sha",
    "sample_seed",
    "stop_token_ids",
]

_LAZY = {"HFBackend", "stop_token_ids"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from rmlib.generation import hf

        return getattr(hf, name)
    if name == "VLLMBackend":
        from rmlib.generation.vllm import VLLMBackend

        return VLLMBackend
    if name == "HTTPBackend":
        from rmlib.generation.http import HTTPBackend

        return HTTPBackend
    raise AttributeError(f"module 'rmlib.generation' has no attribute {name!r}")
