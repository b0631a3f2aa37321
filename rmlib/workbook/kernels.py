"""Each `rmlib run`'s notebook kernels get a private folder for their connection files and IPC
sockets, removed when the run ends.

jupyter_client names a kernel's IPC sockets `kernel-ipc-<n>` in the working directory (the source
`notebooks/` folder) and takes the first free numbers: two runs started together pick the same
names and connect to each other's kernels ("Invalid Signature"), and a killed run leaves its
sockets there. Here every run's connection file, and so its sockets (jupyter_client derives the
socket names from it), live in a folder of its own: `<tmp>/rmlib-kernels-<pid>-XXXXXXXX`, made
by `mkdtemp` (mode 0700, a fresh name). A Unix socket's path is limited to about 107 bytes, so
the folder is under the temporary directory, not the run folder. A folder whose run was killed
(its pid gone) is removed by the next run of the same user (`sweep`).

`rmlib lab`'s kernels get one too (`lab_folder`, through rmlib.workbook.lab_kernels), in place of
Jupyter's shared runtime folder, where a killed lab's connection files (each holding its kernel's
signing key) stayed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "rmlib-kernels-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def sweep(root: str | Path | None = None) -> list[Path]:
    """Remove the kernel folders of runs that were killed (their pid is gone), of this user
    only; returns what was removed."""
    root = Path(root or tempfile.gettempdir())
    gone = []
    for entry in root.glob(f"{PREFIX}*"):
        pid = entry.name.removeprefix(PREFIX).split("-", 1)[0]
        try:
            mine = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            gone.append(entry)
    return gone


@contextlib.contextmanager
def private_folder(root: str | Path | None = None) -> Iterator[Path]:
    """A fresh folder for this run's kernel connection files and sockets, removed at the end
    (after a stale sweep of killed runs' folders)."""
    folder = _fresh_folder(root)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def connection_file(folder: Path) -> str:
    """A new kernel's connection file in `folder` (its IPC sockets are named after it)."""
    fd, name = tempfile.mkstemp(prefix="kernel-", suffix=".json", dir=folder)
    os.close(fd)
    os.unlink(name)  # jupyter_client writes it; only the fresh name is wanted
    return name


def lab_folder(root: str | Path | None = None) -> Path:
    """A fresh folder for this process's kernels, as `private_folder` names it (so a killed
    process's is swept by the next run or lab), removed when the process exits: for a server
    that outlives any `with` block of ours (JupyterLab, which `rmlib lab` becomes by exec)."""
    folder = _fresh_folder(root)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _fresh_folder(root: str | Path | None) -> Path:
    """`<root>/rmlib-kernels-<pid>-XXXXXXXX` (mode 0700, a fresh name), after a sweep of killed
    processes' folders."""
    sweep(root)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))
