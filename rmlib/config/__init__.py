"""The vocabulary every params section is written in, at the ground floor of rmlib.

- `fields`: a documented field (`doc`), the pydantic config of every section (`PARAMS`: unknown
  keys are errors), the types that carry each number's range (`Count`, `Share`, ...);
- `errors`: `ConfigError` (one line: file, dotted key, value, what is allowed), `build_section`
  (a mapping validated into a section's dataclass), `check_built` (a section built in Python,
  validated as a file's), `MOVED_KEYS`;
- `files`: the params YAML reader (`read_yaml`: base-60 numbers stay text), dotted keys;
- `memory`: the settings that size memory, not results (`MEMORY_SETTINGS`);
- `project`: where notebooks/ and params/ are.

The sections themselves live with the package they configure (`rmlib.generation.settings`,
`rmlib.training.grpo_config`, `rmlib.reflect.settings`, ...); `rmlib.run.config` assembles them
into a `RunConfig`.
"""

from rmlib.config.errors import MOVED_KEYS, ConfigError, build_section, check_built
from rmlib.config.fields import (
    PARAMS,
    Count,
    CountOrOff,
    Dropout,
    Finite,
    NonNegative,
    OpenShare,
    Positive,
    Precision,
    Scheduler,
    Seed,
    Share,
    doc,
)
from rmlib.config.files import not_a_mapping, read_yaml, set_dotted
from rmlib.config.memory import MEMORY_SETTINGS, NOT_RESULTS
from rmlib.config.project import project_root

__all__ = [
    "MEMORY_SETTINGS",
    "MOVED_KEYS",
    "NOT_RESULTS",
    "PARAMS",
    "ConfigError",
    "Count",
    "CountOrOff",
    "Dropout",
    "Finite",
    "NonNegative",
    "OpenShare",
    "Positive",
    "Precision",
    "Scheduler",
    "Seed",
    "Share",
    "build_section",
    "check_built",
    "doc",
    "not_a_mapping",
    "project_root",
    "read_yaml",
    "set_dotted",
]

# What rmlib.config held before the sections moved to their packages (2026-12): the old import
# says where each name went.
_MOVED_NAMES: dict[str, str] = {
    **dict.fromkeys(
        ("RunConfig", "SECTIONS", "config_from_dict", "load_config", "sweep_points", "describe"),
        "rmlib.run.config",
    ),
    **dict.fromkeys(("GenerationSection", "ModelSection", "Backend"), "rmlib.generation.settings"),
    **dict.fromkeys(("DatasetSpec", "DataSection"), "rmlib.data.settings"),
    "PromptSection": "rmlib.judge.settings",
    **dict.fromkeys(
        ("RunSection", "RolloutSection", "EvalSection", "PlanSection", "Model"),
        "rmlib.run.sections",
    ),
}


def __getattr__(name: str) -> object:
    if name in _MOVED_NAMES:
        raise ImportError(f"rmlib.config.{name} moved: import it from {_MOVED_NAMES[name]}")
    raise AttributeError(f"module 'rmlib.config' has no attribute {name!r}")
