"""Reading params: YAML text (a params file or a `--set` value) and dotted keys."""

from __future__ import annotations

from typing import Any

import yaml

from rmlib.config.errors import ConfigError


def not_a_mapping(data: Any) -> str:
    """Why a params document is not a params file: it must map section names to sections."""
    if data is None or data == {}:  # a file of nothing (or comments) is a mistake, not defaults
        what = "it is empty"
    elif isinstance(data, list):
        what = "got a list"
    else:
        what = f"got {type(data).__name__} {data!r:.40}"
    return f"a params file maps sections (run, model, ...) to their settings; {what}"


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader without YAML 1.1's base-60 numbers: `4:1` (a ratio) stays the
    string '4:1' instead of becoming the int 241 (and `1:30.5` stays text, not 90.5)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        tag = super().resolve(kind, value, implicit)
        numeric = tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
        if kind is yaml.ScalarNode and implicit[0] and numeric and ":" in value:
            return "tag:yaml.org,2002:str"
        return tag


def read_yaml(text: str) -> Any:
    """A params file or a `--set` value, read as YAML (safe; base-60 numbers stay text)."""
    return yaml.load(text, Loader=_ParamsLoader)  # noqa: S506 - a SafeLoader subclass


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"cannot set '{key}': '{p}' is not a mapping")
    node[last] = value
