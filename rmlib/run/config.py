"""The run config: every section of a params file, assembled and validated whole.

A params file is a nested mapping whose top-level keys are the sections of `SECTIONS`. Each
section is the dataclass of the package it belongs to (generation, prompts, the training
sections, inference, ...), so its default lives in exactly one place; `rmlib.config` holds the
vocabulary they share (documented fields, ranges, `ConfigError`, the YAML reader).

The whole file is validated at load, before any work: it must be a non-empty mapping; pydantic
validates each section's dataclass (its `Literal` types carry the allowed values, every number's
type its range, `__pydantic_config__ = PARAMS` makes an unknown key an error), the sections' own
`__post_init__` checks run, then the checks that span sections (data sources in the registry,
the GRPO batch on run.gpus, every sweep point). A mistake is one `ConfigError` line naming the
file, the dotted key, the bad value and what is allowed: a typo never silently falls back to a
default, and never fails hours into a run.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rmlib.config import ConfigError, build_section, not_a_mapping, set_dotted
from rmlib.config.errors import cut, short
from rmlib.config.files import load_yaml, yaml_error_line
from rmlib.data import get_source
from rmlib.data.settings import DataSection
from rmlib.generation.settings import GenerationSection, ModelSection
from rmlib.judge.settings import PromptSection
from rmlib.reads import UnreadableInput, read_bytes
from rmlib.reflect.settings import ReflectConfig
from rmlib.run.sections import EvalSection, PlanSection, RolloutSection, RunSection
from rmlib.training.grpo_config import GRPOSettings, batch_plan, per_process
from rmlib.training.mix import TrainMixConfig
from rmlib.training.sft import WarmupConfig

# A sweep runs one whole run per point: more than this many is a mistake (a list pasted twice,
# one key too many), refused from the lists' lengths before the grid is built.
MAX_SWEEP_POINTS = 256

SECTIONS: dict[str, type] = {
    "run": RunSection,
    "model": ModelSection,
    "data": DataSection,
    "generation": GenerationSection,
    "prompts": PromptSection,
    "rollouts": RolloutSection,
    "warmup": WarmupConfig,
    "mix": TrainMixConfig,
    "grpo": GRPOSettings,
    "inference": ReflectConfig,
    "eval": EvalSection,
    "plan": PlanSection,
}


@dataclass
class RunConfig:
    """All sections of one run, plus where it came from."""

    sections: dict[str, Any]
    source: str = "<dict>"
    sweep: dict[str, list] = field(default_factory=dict)
    # where each dotted key is in the params file, and the keys `--set` gave (`error` says it)
    lines: dict[str, int] = field(default_factory=dict, repr=False)
    overridden: list[str] = field(default_factory=list, repr=False)

    def error(self, message: str) -> ConfigError:
        """A ConfigError for a check after load (`{source}: '{key}': ...`), located as a load
        error is: the key's line, or the `--set` that gave it."""
        if not self.lines and not self.overridden:  # built in Python: no file to locate in
            return ConfigError(message)
        return ConfigError(_located(message, self.source, self.lines, self.overridden))

    # One typed property per section of SECTIONS
    @property
    def run(self) -> RunSection:
        return self.sections["run"]

    @property
    def model(self) -> ModelSection:
        return self.sections["model"]

    @property
    def data(self) -> DataSection:
        return self.sections["data"]

    @property
    def generation(self) -> GenerationSection:
        return self.sections["generation"]

    @property
    def prompts(self) -> PromptSection:
        return self.sections["prompts"]

    @property
    def rollouts(self) -> RolloutSection:
        return self.sections["rollouts"]

    @property
    def warmup(self) -> WarmupConfig:
        return self.sections["warmup"]

    @property
    def mix(self) -> TrainMixConfig:
        return self.sections["mix"]

    @property
    def grpo(self) -> GRPOSettings:
        return self.sections["grpo"]

    @property
    def inference(self) -> ReflectConfig:
        return self.sections["inference"]

    @property
    def eval(self) -> EvalSection:
        return self.sections["eval"]

    @property
    def plan(self) -> PlanSection:
        return self.sections["plan"]

    def to_dict(self) -> dict[str, Any]:
        return {k: dataclasses.asdict(v) for k, v in self.sections.items()}


def config_from_dict(data: dict[str, Any], source: str = "<dict>") -> RunConfig:
    """Validate a whole params mapping: every section, the checks across sections, and every
    point of its sweep (a bad sweep value is refused before the first point runs)."""
    data = {} if data is None else data  # in Python, no sections = every default
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {not_a_mapping(data)}")
    data = copy.deepcopy(data)
    sweep = data.pop("sweep", {}) or {}
    cfg = _sections(data, source)
    if not isinstance(sweep, dict):
        raise ConfigError(f"{source}: 'sweep' must map dotted keys to lists of values")
    cfg.sweep = sweep
    for point in sweep_points(cfg):
        where = ", ".join(f"{k}={short(v, 60)}" for k, v in point.items())
        point_data = copy.deepcopy(data)
        for key, value in point.items():
            set_dotted(point_data, key, value)
        _sections(point_data, f"{source} (sweep point {where})")
    return cfg


def _sections(data: dict[str, Any], source: str) -> RunConfig:
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], SECTIONS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(
            f"{source}: unknown section '{unknown[0]}' ({hint}known: {', '.join(SECTIONS)}, sweep)"
        )
    for name in SECTIONS:  # `model:` left empty, or `--set model=3`: never its defaults silently
        if name in data and not isinstance(data[name], dict):
            value = data[name]
            what = "empty (null)" if value is None else f"{type(value).__name__} {short(value, 60)}"
            raise ConfigError(
                f"{source}: section '{name}' is {what}: a section maps its keys to values; "
                f"remove the '{name}' line to keep its defaults"
            )
    # One master seed: the inference seed is the run's unless the file sets it.
    run = data.get("run")
    seed = run.get("seed", RunSection.seed) if isinstance(run, dict) else RunSection.seed
    inference = data.setdefault("inference", {})
    if isinstance(inference, dict) and inference.get("seed") is None:
        inference["seed"] = seed
    sections = {
        name: build_section(cls, data.get(name), name, source) for name, cls in SECTIONS.items()
    }
    cfg = RunConfig(sections=sections, source=source)
    _check_sources(cfg)
    _check_batch(cfg)
    return cfg


def _check_batch(cfg: RunConfig) -> None:
    """The GRPO batch is valid on run.gpus processes, as TRL divides it (grpo_config.batch_plan)."""
    try:
        batch_plan(per_process(cfg.grpo, cfg.run.gpus), cfg.run.gpus)
    except ValueError as e:
        raise ConfigError(f"{cfg.source}: 'grpo' on run.gpus = {cfg.run.gpus}: {e}") from None


def _check_sources(cfg: RunConfig) -> None:
    """Every dataset names a registered source (the registry lives with the loaders), and a
    source with no hub copy has a path (else 01 would fail on it, after nothing useful)."""
    specs = {"data.train": cfg.data.train}
    specs.update({f"data.eval[{i}]": s for i, s in enumerate(cfg.data.eval)})
    for where, spec in specs.items():
        try:
            source = get_source(spec.source)
        except ValueError as e:
            raise ConfigError(f"{cfg.source}: '{where}.source': {e}") from None
        if source.path_required and spec.path is None:
            raise ConfigError(
                f"{cfg.source}: '{where}.path': source {source.name!r} has no hub copy; set "
                "path to a local copy (file or folder)"
            )


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a params file; `overrides` maps dotted keys ('mix.ratio') to values.

    Every mistake is one ConfigError line naming the file and the line (`file:line: ...`), or the
    `--set` override it came from."""
    path = Path(path)
    try:
        raw = read_bytes(path, "params file")
    except FileNotFoundError:
        raise ConfigError(f"params file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a params file") from None
    except UnreadableInput as e:
        raise ConfigError(str(e)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {column}): "
            "save the params file as UTF-8"
        ) from None
    try:
        data, lines = load_yaml(text)
    except yaml.YAMLError as e:
        line, what = yaml_error_line(e)
        raise ConfigError(f"{path}:{line or 1}: not a valid params file: {what}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}:1: {not_a_mapping(data)}")
    overridden = list(overrides or {})
    try:
        for key, value in (overrides or {}).items():
            try:
                set_dotted(data, key, value)
            except ConfigError as e:
                raise ConfigError(f"{path} (--set {key}): {e}") from None
        cfg = config_from_dict(data, source=str(path))
    except ConfigError as e:
        raise ConfigError(_located(str(e), str(path), lines, overridden)) from None
    cfg.lines, cfg.overridden = lines, overridden
    return cfg


_KEY = re.compile(r"'([A-Za-z_][\w.\[\]-]*)'")


def _located(message: str, source: str, lines: dict[str, int], overridden: list[str]) -> str:
    """A ConfigError of a params file, its file followed by the line of the key it names (the
    first quoted dotted key: `params.yaml:12: 'mix.ratio': ...`), or by the `--set` override it
    came from; a sweep point's key is the sweep's line."""
    message = cut(message, 1000)
    if not message.startswith(source) or message.startswith(f"{source} (--set "):
        return message
    rest = message[len(source) :]
    if rest.startswith(" (sweep point "):  # the point's values, then the error: the sweep's line
        error = rest.split("): ", 1)[-1]
        named = _KEY.findall(error)
        swept = [
            k for k in lines if k.startswith("sweep.") and any(_related(k[6:], n) for n in named)
        ]
        return f"{source}:{_line_of(swept[0] if swept else 'sweep', lines)}{rest}"
    match = _KEY.search(rest)
    key = match.group(1) if match else ""
    override = next((k for k in overridden if _related(key, k)), None)
    if override is not None:
        given = "--name or --set run.name" if override == "run.name" else f"--set {override}"
        return f"{source} ({given}){rest}"
    return f"{source}:{_line_of(key, lines)}{rest}"


def _related(key: str, other: str) -> bool:
    """Whether one dotted key is the other or holds it (`mix` and `mix.ratio`)."""
    a, b = sorted((key, other), key=len)
    return a == b or b.startswith((f"{a}.", f"{a}["))


def _line_of(key: str, lines: dict[str, int]) -> int:
    """The line of `key`, else of the nearest key above it that the file has (a missing key's
    section); 1 when the file has none of them."""
    while key:
        if key in lines:
            return lines[key]
        key = re.sub(r"(\.[^.\[\]]*|\[\d+\])$", "", key) if re.search(r"[.\[]", key) else ""
    return 1


def sweep_points(cfg: RunConfig) -> list[dict[str, Any]]:
    """The grid of a params file's `sweep:` mapping (dotted key → list of values), expanded."""
    for key, values in cfg.sweep.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{cfg.source}: 'sweep.{key}' must be a non-empty list of values")
    size = math.prod(len(values) for values in cfg.sweep.values())  # before building the grid
    if size > MAX_SWEEP_POINTS:
        counts = " x ".join(f"{len(v)} ({k})" for k, v in cfg.sweep.items())
        raise ConfigError(
            f"{cfg.source}: 'sweep' has {size:,} points ({cut(counts, 200)}), over the limit of "
            f"{MAX_SWEEP_POINTS} (each point is a whole run): sweep fewer values"
        )
    keys = list(cfg.sweep)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*cfg.sweep.values())]


def describe(cfg: RunConfig) -> list[dict[str, Any]]:
    """Every parameter with its value and doc (for the manifest and `--dry-run`)."""
    rows: list[dict[str, Any]] = []

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
            else:
                rows.append(
                    {"key": prefix + f.name, "value": value, "doc": f.metadata.get("doc", "")}
                )

    for name, section in cfg.sections.items():
        walk(section, f"{name}.")
    return rows
