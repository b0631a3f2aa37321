"""Helpers for tests that run the project's scripts: load a script of benchmarks/ or tools/ as a
module (the scripts are not a package: they run as `python benchmarks/x.py`), and the environment
of a child run with vLLM unimportable."""

from __future__ import annotations

import importlib.util
import os
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


def without_vllm(log: Path) -> dict[str, str]:
    """This environment with vLLM unimportable in a child and every process it starts, as on an
    install without it (tests/no_vllm/sitecustomize.py); each attempt to import it is appended
    to `log`, so a test fails on an import some caller swallowed."""
    blocker = ROOT / "tests" / "no_vllm"
    path = os.pathsep.join([str(blocker), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "RMLIB_NO_VLLM_LOG": str(log)}


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, theirs, ...), from /proc (Linux)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in found]
        found.update(children)
        todo.extend(children)
    return found


def alive(pid: int) -> bool:
    """The process runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
