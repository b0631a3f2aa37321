"""The vocabulary of a params file's fields: a documented field, the pydantic config of every
section, and the types that carry each number's range.

Every section is a dataclass; each field carries its documentation in `metadata["doc"]`, so the
run manifest and `rmlib run --dry-run` can print what each value means. Ranges are checked by
pydantic at load only: a section built directly in Python (`ReflectConfig(n_samples=0)`) is not
range-checked, unless its `__post_init__` calls `errors.check_built` (as the reward's
`RewardJudgeConfig` does).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field


def doc(text: str, default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A dataclass field with its documentation attached."""
    if isinstance(default, list | dict) or dataclasses.is_dataclass(default):
        value = default
        return field(default_factory=lambda: copy.deepcopy(value), metadata={"doc": text}, **kw)
    return field(default=default, metadata={"doc": text}, **kw)


# The pydantic config of every params dataclass (`__pydantic_config__ = PARAMS` in its body):
# unknown keys are errors. Lax mode on purpose: YAML already types its scalars, and lax parsing
# accepts `1e-6`, which YAML 1.1 reads as a string, for a float.
PARAMS = ConfigDict(extra="forbid")

# The ranges of the params' numbers, checked at load like any other type (a bad one is the same
# one line: file, dotted key, value, what is allowed). Floats are finite: YAML's .nan and .inf
# parse, and nan would pass every range check.
Count = Annotated[int, Field(ge=1)]  # a number of things, steps or tokens: at least one
CountOrOff = Annotated[int, Field(ge=0)]  # 0 means "off" / "none" (the field's doc says which)
Seed = Annotated[int, Field(ge=0)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # learning rates, temperatures
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # a fraction in [0, 1]
OpenShare = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]  # (0, 1]: top_p, memory
Dropout = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]  # 1 would drop everything
Finite = Annotated[float, Field(allow_inf_nan=False)]

Precision = Literal["auto", "nf4", "bf16", "fp32"]

# transformers' SchedulerType values (tests/test_config.py checks they agree).
Scheduler = Literal[
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
    "reduce_lr_on_plateau",
    "cosine_with_min_lr",
    "cosine_warmup_with_min_lr",
    "warmup_stable_decay",
    "greedy",
]
