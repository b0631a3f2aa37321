"""Load a script of benchmarks/ or tools/ as a module, for the tests that call its functions (the
scripts are not a package: they run as `python benchmarks/x.py`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """The script at `relative` to the repository root (e.g. 'benchmarks/gpu_check.py'), run."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
