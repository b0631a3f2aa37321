"""The machine a run needs, checked before any work (`rmlib run`, and so `--preflight`): a CUDA
device for a real backbone, a driver new enough for this torch's CUDA, cards that compute in
bf16 where the run does, the toolchain Triton compiles its kernels with, and the card class the
profile is sized for. Each refusal is one line naming what to install or change, in minutes
rather than at the first engine start or training step of a night.

The runner's process opens no CUDA context (the notebooks' kernels and training processes own
the GPUs): the cards, their driver and compute capability come from nvidia-smi (or NVML); torch
is asked only whether it sees a device and which CUDA it was built for.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmlib.config import ConfigError
from rmlib.generation.registry import BACKENDS
from rmlib.generation.vllm import vllm_installed
from rmlib.run.config import RunConfig
from rmlib.run.models import trained_models

log = logging.getLogger("rmlib.workbook.execute")

# The oldest Linux driver of each CUDA major version torch may be built for (NVIDIA's CUDA
# toolkit release notes, "minimum required driver version" for minor-version compatibility):
# PyPI's torch 2.13 is built for CUDA 13, so a driver older than 580 leaves it no device.
DRIVER_FLOOR: dict[int, str] = {12: "525.60.13", 13: "580.65.06"}
# bf16 matrix instructions (and so bf16 weights, and QLoRA's bf16 compute over nf4) start with
# Ampere; a V100 (7.0) or a T4 (7.5) is refused by the engine after the run has started.
BF16_CAPABILITY: tuple[int, int] = (8, 0)


@dataclass(frozen=True)
class Machine:
    """What the checks read of this machine (tests fake it). cuda: torch sees a CUDA device.
    torch_cuda: the CUDA torch was built for (None: a CPU build). driver: the NVIDIA driver
    (None: no nvidia-smi or NVML answers). capabilities: each visible GPU's compute capability.
    toolchain: what Triton compiles with (`toolchain()`)."""

    cuda: bool
    torch_cuda: str | None
    driver: str | None
    capabilities: tuple[tuple[int, int], ...] = ()
    toolchain: dict[str, Any] = field(default_factory=dict)


def without_vllm(cfg: RunConfig) -> tuple[dict[str, Any], str | None]:
    """Where vLLM is not installed (`make ENGINE=none`, the default on macOS, where vLLM has no
    wheel): the `--set` overrides that move a run's vLLM work to transformers, and the one line
    that says so; nothing where vLLM is installed or the run does not use it.

    generation.backend 'vllm' becomes 'hf' (the transformers loop: same judgments, slower) and
    grpo.use_vllm false (TRL generates GRPO's groups with transformers); 'served' starts vLLM
    servers, which need vLLM: a ConfigError naming the backends that work here."""
    if vllm_installed():
        return {}, None
    if cfg.generation.backend == "served":
        raise ConfigError(
            f"{cfg.source}: generation.backend 'served' starts vLLM servers, and vLLM is not "
            "installed here (make ENGINE=none): use 'hf', or 'http' with servers elsewhere"
        )
    swap: dict[str, Any] = {}
    if cfg.generation.backend == "vllm":
        swap["generation.backend"] = "hf"
    if cfg.grpo.use_vllm:
        swap["grpo.use_vllm"] = False
    if not swap:
        return {}, None
    said = ", ".join(f"{k}: {str(v).lower()}" for k, v in swap.items())
    return swap, f"vLLM is not installed here: running with {said} (transformers generates)"


def probe(cuda: bool | None = None) -> Machine:
    """This machine, without a CUDA context. cuda: whether torch sees a device (None: ask it)."""
    import torch

    if cuda is None:
        cuda = torch.cuda.is_available()
    capabilities = []
    for line in nvidia_smi("compute_cap", *_visible_ids()):
        major, _, minor = line.partition(".")
        if major.isdigit() and minor.isdigit():
            capabilities.append((int(major), int(minor)))
    return Machine(cuda, torch.version.cuda, cuda_driver(), tuple(capabilities), toolchain())


def toolchain() -> dict[str, Any]:
    """What Triton needs to compile its kernels (vLLM's CUDA engine and model runner, TRL's
    fused log-prob head): a C compiler and the Python headers."""
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    return {
        "c_compiler": compiler,
        "python_h": include.is_file(),
        "ok": bool(compiler) and include.is_file(),
    }


def check_device(
    cfg: RunConfig, cuda: bool | None = None, *, machine: Machine | None = None
) -> None:
    """Refuse, before any work, a machine the run cannot use (module docstring).

    A real backbone needs a CUDA device: without this a Qwen3-4B profile on a laptop silently
    starts a weeks-long CPU run. The embedded models are made for the CPU; `model.allow_cpu:
    true` lets any other run there. Where torch sees no device but nvidia-smi answers, the line
    says why (a CPU build of torch, a driver older than torch's CUDA needs). On CUDA: bf16 cards
    for bf16 and nf4, and Triton's toolchain where vLLM or TRL will compile."""
    m = machine or probe(cuda)
    cpu_ok = cfg.model.backbone.startswith("embedded:") or cfg.model.allow_cpu
    if not m.cuda:
        if m.driver is not None:  # a GPU this torch cannot use: say why, whatever the backbone
            _why_no_device(cfg, m, fatal=not cpu_ok)
        if not cpu_ok:
            raise ConfigError(
                f"{cfg.source}: model.backbone {cfg.model.backbone!r} needs a CUDA device and "
                "none is visible; set model.allow_cpu: true to run it on the CPU anyway (slow)"
            )
        return
    _check_capability(cfg, m)
    _check_toolchain(cfg, m)


def _why_no_device(cfg: RunConfig, m: Machine, *, fatal: bool) -> None:
    """nvidia-smi answers (driver m.driver) while torch sees no device: the reason, as an error
    for a run that needs the GPU, as a warning for one that may run on the CPU."""
    import torch

    floor = driver_floor(m.torch_cuda)
    if m.torch_cuda is None:
        why = (
            f"torch {torch.__version__} is a CPU build, though nvidia-smi sees a GPU (driver "
            f"{m.driver}): install the CUDA build (`make venv` on this machine picks it)"
        )
    elif driver_ok(m.driver, m.torch_cuda) is False:
        assert floor is not None
        why = (
            f"the NVIDIA driver {m.driver} is older than {floor.split('.')[0]}, the oldest that "
            f"runs torch {torch.__version__}'s CUDA {m.torch_cuda}: update the driver to {floor} "
            "or newer"
        )
    else:
        why = (
            f"nvidia-smi sees a GPU (driver {m.driver}) but torch {torch.__version__} (CUDA "
            f"{m.torch_cuda}) sees none: check CUDA_VISIBLE_DEVICES and `nvidia-smi`'s own errors"
        )
    if fatal:
        raise ConfigError(f"{cfg.source}: model.backbone {cfg.model.backbone!r}: {why}")
    log.warning("%s; running on the CPU", why)


def _check_capability(cfg: RunConfig, m: Machine) -> None:
    """bf16 and nf4 ('auto' is bf16 on CUDA) need Ampere or newer on every card the run uses."""
    precisions = {cfg.model.precision, cfg.model.train_precision}
    if not precisions & {"auto", "bf16", "nf4"}:
        return
    for index, cap in enumerate(m.capabilities[: cfg.run.gpus]):
        if cap < BF16_CAPABILITY:
            need = ".".join(map(str, BF16_CAPABILITY))
            raise ConfigError(
                f"{cfg.source}: GPU {index} has compute capability {cap[0]}.{cap[1]}, and bf16 "
                f"and nf4 (model.precision {cfg.model.precision}, model.train_precision "
                f"{cfg.model.train_precision}) need {need} (Ampere) or newer: set both to fp32 "
                "(slower, twice the memory) or use a newer card"
            )


def _check_toolchain(cfg: RunConfig, m: Machine) -> None:
    """Triton compiles where the run starts a vLLM engine on CUDA (vLLM's compiled graphs and
    model runner) or trains with TRL (its fused log-prob head; the colocated engine too)."""
    reasons = []
    if BACKENDS[cfg.generation.backend].engine == "vllm":
        reasons.append(f"generation.backend {cfg.generation.backend}")
    if trained_models(cfg) and "03_training" in cfg.run.notebooks:
        reasons.append("GRPO's fused log-prob kernel" + (" and grpo.use_vllm" * cfg.grpo.use_vllm))
    if not reasons or (m.toolchain.get("c_compiler") and m.toolchain.get("python_h")):
        return
    missing = []
    if not m.toolchain.get("c_compiler"):
        missing.append("a C compiler (cc, gcc or clang)")
    if not m.toolchain.get("python_h"):
        missing.append(f"Python's headers ({sysconfig.get_paths()['include']}/Python.h)")
    raise ConfigError(
        f"{cfg.source}: Triton compiles kernels here ({', '.join(reasons)}) and needs "
        f"{' and '.join(missing)}: install them (Debian/Ubuntu: apt-get install build-essential "
        "python3-dev) before the run"
    )


def driver_floor(torch_cuda: str | None) -> str | None:
    """The oldest driver that runs a torch built for CUDA `torch_cuda` (None: a CPU build, or a
    CUDA major version without a known floor)."""
    return DRIVER_FLOOR.get(int(torch_cuda.split(".")[0])) if torch_cuda else None


def driver_ok(driver: str | None, torch_cuda: str | None) -> bool | None:
    """Whether `driver` is at least the floor of torch's CUDA; None when either is unknown."""
    floor = driver_floor(torch_cuda)
    if driver is None or floor is None:
        return None
    return _version(driver) >= _version(floor)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _visible_ids() -> list[str]:
    """nvidia-smi's --id for the GPUs CUDA_VISIBLE_DEVICES leaves this process (all: none)."""
    ids = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [f"--id={ids.strip()}"] if ids and ids.strip() else []


# A card may report a little less than its class's usable memory (driver, ECC): 2 % leeway.
GPU_MEMORY_LEEWAY = 0.98


def check_gpu_class(cfg: RunConfig, cards: list[tuple[str, float]] | None = None) -> None:
    """Refuse, before any work, fewer visible GPUs than run.gpus, or a card smaller than the
    profile's run.gpu_class: its memory
    settings were sized for that class and would run out of memory hours in. A larger card or
    another class of the same memory runs, with one warning line. Skipped when run.gpu_class is
    None or no GPU is visible (check_device rules the CPU). `cards`: (name, GiB) per GPU the run
    uses; None asks nvidia-smi (the runner never opens a CUDA context)."""
    from rmlib.workbook.plan.facts import class_of_device, gpu_class

    cards = visible_gpus() if cards is None else cards
    if cards and len(cards) < cfg.run.gpus:  # 03's accelerate launch would fail hours in
        raise ConfigError(
            f"{cfg.source}: run.gpus is {cfg.run.gpus} but {len(cards)} GPU(s) are visible "
            f"({', '.join(name for name, _ in cards)}): set run.gpus to {len(cards)} or less"
        )
    if cfg.run.gpu_class is None:
        return
    want = gpu_class(cfg.run.gpu_class)
    for index, (name, gib) in enumerate(cards[: cfg.run.gpus]):
        found = class_of_device(name) or "no known class"
        if gib < want.memory_gib * GPU_MEMORY_LEEWAY:
            raise ConfigError(
                f"{cfg.source}: run.gpu_class is {want.name} ({want.memory_gib:g} GiB) but GPU "
                f"{index} is {name} ({gib:.1f} GiB, {found}): the profile's memory settings "
                "would run out of memory; lower them and set run.gpu_class to this card's class "
                "(--set run.gpu_class=null skips this check)"
            )
        if found != want.name:
            log.warning(
                "run.gpu_class is %s but GPU %d is %s (%.1f GiB, %s): it has the memory; the "
                "dry run's hours were for %s",
                want.name,
                index,
                name,
                gib,
                found,
                want.name,
            )


def visible_gpus() -> list[tuple[str, float]]:
    """(name, memory in GiB) of each GPU this process may use, by nvidia-smi (CUDA_VISIBLE_DEVICES
    honoured); [] without a GPU."""
    ids = os.environ.get("CUDA_VISIBLE_DEVICES")
    if ids is not None and not ids.strip():
        return []  # an empty CUDA_VISIBLE_DEVICES hides every GPU
    out = []
    for line in nvidia_smi("name,memory.total", *_visible_ids()):
        name, _, mib = line.rpartition(",")
        try:
            out.append((name.strip(), float(mib.split()[0]) / 1024))
        except (ValueError, IndexError):
            continue  # "[N/A]" or an odd line: not a card we can size
    return out


def cuda_driver() -> str | None:
    """The NVIDIA driver's version: from NVML (pynvml) if installed, else `nvidia-smi`; None
    when neither answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # not installed, or no driver it can load: ask nvidia-smi
        pass
    versions = nvidia_smi("driver_version")
    return versions[0] if versions else None


# nvidia-smi answers in well under a second on a healthy node; a hung driver (a GPU fallen off
# the bus, a stuck persistence daemon) never answers. One call waits this long, and after one
# hang the process asks no more (each later call would wait again, minutes in all, silently).
SMI_TIMEOUT_S = 10.0
_SMI_HUNG: list[str] = []


def nvidia_smi(field: str, *extra: str) -> list[str]:
    """One `nvidia-smi --query-gpu` field (or several, comma-separated), a line a GPU ([] without
    nvidia-smi or a driver); `extra`: more arguments (--id=...). A call that does not answer in
    SMI_TIMEOUT_S is said once on stderr and counts as no GPU, for this call and every later one."""
    smi = shutil.which("nvidia-smi")
    if smi is None or _SMI_HUNG:
        return []
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={field}", "--format=csv,noheader", *extra],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT_S,
            check=True,
        ).stdout
    except subprocess.TimeoutExpired:
        _SMI_HUNG.append(smi)
        log.warning(
            "%s did not answer in %g s (a hung driver?): this machine's GPUs are taken as none",
            smi,
            SMI_TIMEOUT_S,
        )
        return []
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.strip().splitlines() if line.strip()]
