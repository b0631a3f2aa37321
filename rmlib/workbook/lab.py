"""`rmlib lab` (`make lab`): JupyterLab on the workbook's notebooks, over one run folder.

The lab's kernels inherit $RMLIB_RUN_DIR (and $RMLIB_PARAMS, for a folder no run has written
yet), which every notebook's first cell reads through `open_run` when papermill injected no
`run_dir`: a notebook run there reads that run's tables and writes its tables, generation store,
metrics and figures where `rmlib run` would, and its kernel holds the folder's lock until it
exits. It does not update state.json (the runner's record of completed notebooks), and writes no
executed copy under <run>/notebooks/: those stay what `rmlib run` last did.

Saving a notebook in the lab keeps its code and markdown but not its outputs (`strip_outputs`):
the sources stay output-free, as the repository keeps them, and `rmlib run` (which re-runs a
notebook whose source changed) does not mistake a run's outputs for an edit.

The lab's own settings defaults are `lab_settings/overrides.json` (JupyterLab's application
settings folder, `--LabApp.app_settings_dir`): it never asks "Would you like to get notified about
official Jupyter news?" and fetches neither news nor update checks. They are defaults, not the
user's settings: a choice saved in the lab (~/.jupyter/lab/user-settings) still wins.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmlib.config import project_root
from rmlib.run.folder import ENV_PARAMS, ENV_RUN_DIR

DEFAULT_PARAMS = project_root() / "params" / "demo.yaml"  # its run folder is `make demo`'s
# JupyterLab's application settings folder for the lab: overrides.json there sets the defaults of
# its settings (the only file of that folder JupyterLab reads here: no page_config.json)
LAB_SETTINGS = Path(__file__).parent / "lab_settings"


def run_folder_of(params_file: Path) -> Path:
    """Where `rmlib run PARAMS` writes: run.output_root / run.name (relative to the cwd)."""
    from rmlib.run.config import load_config

    cfg = load_config(params_file)
    return Path(cfg.run.output_root) / cfg.run.name


def lab_environment(run_dir: Path, params_file: Path) -> dict[str, str]:
    """This process's environment plus what points the lab's kernels at `run_dir` (absolute:
    the kernels start in notebooks/)."""
    return {
        **os.environ,
        ENV_RUN_DIR: str(run_dir.resolve()),
        ENV_PARAMS: str(params_file.resolve()),
    }


def lab_command(jupyter_args: Sequence[str] = ()) -> list[str]:
    """JupyterLab with the notebooks folder as its root, in this interpreter's environment,
    saving notebooks without their outputs, with its settings defaults from LAB_SETTINGS and
    its kernels' connection files in a private folder (rmlib.workbook.lab_kernels)."""
    # Jupyter refuses to start as root without --allow-root; containers and these 2-core
    # machines run as root, where `make lab` must work as the README says
    root = ["--allow-root"] if os.geteuid() == 0 and "--allow-root" not in jupyter_args else []
    return [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={project_root() / 'notebooks'}",
        f"--FileContentsManager.pre_save_hook={__name__}.strip_outputs",
        f"--LabApp.app_settings_dir={LAB_SETTINGS}",
        "--ServerApp.kernel_manager_class=rmlib.workbook.lab_kernels.LabKernelManager",
        *root,
        *jupyter_args,
    ]


def strip_outputs(model: dict[str, Any], **_: Any) -> None:
    """Jupyter's pre-save hook: a notebook is saved with no outputs or execution counts."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    for cell in model["content"].get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None


def add_lab_parser(sub: argparse._SubParsersAction) -> None:
    lab = sub.add_parser(
        "lab",
        help="open JupyterLab on the notebooks, over one run folder",
        description="Start JupyterLab on notebooks/ with its kernels pointed at a run folder: a "
        "notebook run there reads and writes that folder as `rmlib run` would (tables, store, "
        "figures) and holds its lock while its kernel lives; state.json is not updated.",
    )
    lab.add_argument(
        "--run",
        metavar="DIR",
        type=Path,
        help="the run folder (default: the --params file's, outputs/demo for the demo)",
    )
    lab.add_argument(
        "--params",
        metavar="PARAMS.yaml",
        type=Path,
        default=DEFAULT_PARAMS,
        help="the profile a folder without params.yaml starts from (default: %(default)s)",
    )
    lab.add_argument(
        "jupyter_args",
        nargs=argparse.REMAINDER,
        help="after --: passed to JupyterLab (e.g. -- --no-browser --port 8890)",
    )
    lab.set_defaults(func=_lab)


def check_lab(run_dir: Path, params_file: Path) -> None:
    """Before JupyterLab starts (its kernels would fail only when a notebook runs): the params
    file exists, and no process holds the run folder (a running `rmlib run`, or a kernel of
    another lab): RunFolderBusy naming its pid. Nothing is written."""
    from rmlib.run.lock import LOCK_FILE, RunFolderBusy, holder

    if not params_file.is_file():
        raise FileNotFoundError(
            f"params file {params_file} does not exist (--params: the profile the lab's "
            "notebooks start from)"
        )
    pid = holder(run_dir)
    if pid is not None:
        raise RunFolderBusy(
            f"run folder {run_dir} is in use (pid {pid}; lock {run_dir / LOCK_FILE}): a running "
            "rmlib run, or the kernel of a notebook open on it; wait for it to end, or stop it, "
            "before opening the lab on it"
        )


def _lab(args: argparse.Namespace) -> int:
    if not args.params.is_file():  # before run_folder_of reads it
        check_lab(Path(), args.params)
    run_dir = args.run or run_folder_of(args.params)
    extra = args.jupyter_args
    extra = extra[1:] if extra[:1] == ["--"] else extra
    check_lab(run_dir, args.params)
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"JupyterLab on {project_root() / 'notebooks'}, run folder {run_dir.resolve()}")
    sys.stdout.flush()
    cmd = lab_command(extra)
    # JupyterLab replaces this process, so a stop signal reaches it (and it shuts its kernels
    # down); as a child it would outlive an `rmlib lab` that was sent SIGTERM
    os.execve(cmd[0], cmd, lab_environment(run_dir, args.params))
