"""A params mistake as one line: `ConfigError`, and a section's mapping validated into its
dataclass with pydantic's first error turned into that line (file, dotted key, bad value, what is
allowed; a moved key names its new home)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import reprlib
import typing
from contextvars import ContextVar
from typing import Any

from pydantic import TypeAdapter, ValidationError


class ConfigError(ValueError):
    """A params file with a wrong key or value; names the file and the dotted key."""


# Keys that moved: a value every step must agree on has one home. A file still setting an old key
# is told where it went (one line), not only that the key is unknown.
MOVED_KEYS: dict[str, str] = {
    "grpo.enable_thinking": "model.enable_thinking",
    "warmup.critique_with_result": "prompts.critique_with_result",
    "mix.critique_with_result": "prompts.critique_with_result",
    "inference.critique_with_result": "prompts.critique_with_result",
}


def short(value: Any, limit: int = 200) -> str:
    """A value's repr for an error line, cut to about `limit` characters: never the expansion of
    a huge (or aliased) value, whatever its size."""
    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother = 3, limit, limit
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = 8
    return cut(r.repr(value), limit)


def cut(text: str, limit: int = 300) -> str:
    """`text` cut to `limit` characters (an error line stays a short line)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def printable(text: str) -> str:
    """`text` with each unprintable character (a newline, a control or format character)
    written as its escape, so that a line quoting it stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@functools.cache
def _validator(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def build_section(cls: type, data: Any, where: str, source: str) -> Any:
    """Validate a section's mapping into its dataclass (defaults filled, sections' checks run)."""
    try:
        return _validator(cls).validate_python({} if data is None else data)
    except ValidationError as e:
        raise ConfigError(cut(_first_error(e, cls, where, source), 1000)) from None


_CHECKING: ContextVar[bool] = ContextVar("rmlib_check_built", default=False)


def check_built(section: Any, where: str, source: str) -> None:
    """A section's dataclass built in Python (not read from a file) validated as a params file's
    is (`build_section`): the same ranges, types and checks, the same one-line ConfigError.

    Meant for a `__post_init__`: the copy pydantic builds to validate runs that `__post_init__`
    again, and that nested call returns at once.
    """
    if _CHECKING.get():
        return
    token = _CHECKING.set(True)
    try:
        build_section(type(section), dataclasses.asdict(section), where, source)
    finally:
        _CHECKING.reset(token)


def _first_error(e: ValidationError, cls: type, where: str, source: str) -> str:
    """One line for pydantic's first error: file, dotted key, bad value, what is allowed.

    A moved key (MOVED_KEYS) is reported before any other error: its line names the new key."""
    errors = e.errors()
    moved = [x for x in errors if _dotted(where, x["loc"]) in MOVED_KEYS]
    err = moved[0] if moved else errors[0]
    loc = err["loc"]
    key = printable(_dotted(where, loc))  # a key is user text: a newline in it stays one line
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    if key in MOVED_KEYS:
        return f"{source}: '{key}' moved to '{MOVED_KEYS[key]}': set it there instead{more}"
    if err["type"] == "unexpected_keyword_argument":
        known = sorted(f.name for f in dataclasses.fields(_class_at(cls, loc[:-1])))
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{source}: unknown key '{key}' ({hint}known: {', '.join(known)}){more}"
    if err["type"] == "value_error":  # a section's own check (__post_init__)
        return f"{source}: '{key}': {cut(str(err['ctx']['error']))}{more}"
    return f"{source}: '{key}': {cut(err['msg'])}, got {short(err['input'])}{more}"


def _dotted(where: str, loc: tuple) -> str:
    return where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _class_at(cls: type, loc: tuple) -> type:
    """The dataclass at a pydantic error location below `cls` (list indices skipped)."""
    for part in loc:
        if isinstance(part, int):
            continue
        tp = typing.get_type_hints(cls)[part]
        while not dataclasses.is_dataclass(tp):
            tp = next(a for a in typing.get_args(tp) if a is not type(None))
        cls = tp
    return cls
