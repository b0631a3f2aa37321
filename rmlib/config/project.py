"""Where the project's own files are (notebooks/ and params/ beside the rmlib package), and
what its constraints files pin."""

from __future__ import annotations

import re
from pathlib import Path


def project_root() -> Path:
    """The folder holding notebooks/, params/ and rmlib/."""
    return Path(__file__).resolve().parents[2]


def norm(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path, include: bool = True) -> dict[str, str]:
    """name -> version of a constraints file (`name==version` lines) and, with `include`, of
    the files it includes with `-c`; {} when it does not exist."""
    found: dict[str, str] = {}
    if not path.is_file():
        return found
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-c "):
            if include:
                found.update(pins(path.parent / line[3:].strip()))
        elif "==" in line:
            name, _, version = line.partition("==")
            found[norm(name)] = version.strip()
    return found
