"""Where the project's own files are: notebooks/ and params/ beside the rmlib package."""

from __future__ import annotations

from pathlib import Path


def project_root() -> Path:
    """The folder holding notebooks/, params/ and rmlib/."""
    return Path(__file__).resolve().parents[2]
