"""The run folder's lock: one process at a time works in a run folder (`rmlib run`, or the kernel
of a notebook open on it), an flock on `<folder>/.lock` holding the holder's pid.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from rmlib.writes import refuse_link


class RunFolderBusy(RuntimeError):
    """Another `rmlib run` holds the run folder; names its pid."""


LOCK_FILE = ".lock"


@contextlib.contextmanager
def holding(folder: Path) -> Iterator[None]:
    """Hold the run folder's lock (an flock on `<folder>/.lock`, holding the pid) until the block
    ends; a folder another process holds raises RunFolderBusy naming its pid.

    Two runs on one folder would run the same notebooks at once over the same tables, store and
    adapters. The OS drops an flock when its process dies, so a killed run never blocks the next.
    """
    fd = _lock(folder)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


_HELD: dict[Path, int] = {}


def hold_until_exit(folder: Path) -> None:
    """Hold the run folder's lock for the rest of this process's life (a notebook's kernel run
    outside `rmlib run`: JupyterLab's, nbval's); a folder this process holds already is a no-op.

    A kernel has no end of run to release it at: the OS releases it when the kernel exits
    (shut down or restarted), so `rmlib run` and a second notebook wait for that, not for a cell.
    """
    key = folder.resolve()
    if key not in _HELD:
        _HELD[key] = _lock(folder)


def _forget_held() -> None:
    """In a child forked from a kernel that holds a folder (a DataLoader worker, a fork-started
    pool): close its copy of each lock's descriptor. An flock belongs to the open file, which
    the fork shares, so a child outliving the kernel would hold the folder after the kernel's
    exit; closing the child's copy leaves the kernel's lock as it is."""
    for fd in _HELD.values():
        os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_held)  # a no-op in processes that hold nothing


def _lock(folder: Path) -> int:
    """Take the folder's flock; returns its descriptor (closing it releases the lock)."""
    path = folder / LOCK_FILE
    refuse_link(path, "the run folder's lock")
    # no O_TRUNC: the holder's pid stays; no link followed (one planted after the check: ELOOP)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        refuse_link(path, "the run folder's lock")
        raise
    holder = _take(fd)
    if holder is not None:
        raise RunFolderBusy(
            f"run folder {folder} is in use by another rmlib run (pid {holder}; lock {path}; "
            "or by the kernel of a notebook open on it: Kernel > Shut Down Kernel in JupyterLab): "
            "wait for it to end, or stop it"
        )
    return fd


def _take(fd: int) -> str | None:
    """Take the exclusive flock of an open lock file and write this process's pid into it;
    when another process holds it, close `fd` and return the holder's pid (as it wrote it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        return holder
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return None


class FileBusy(RuntimeError):
    """Another process holds the lock beside a file (a generation store `rmlib judge` writes);
    names its pid."""


def lock_path(target: Path) -> Path:
    """The lock file beside `target`: `<target>.lock`."""
    return target.with_name(target.name + LOCK_FILE)


@contextlib.contextmanager
def holding_file(target: Path, what: str, advice: str) -> Iterator[None]:
    """Hold the lock beside `target` (an flock on `<target>.lock`, holding the pid, never
    opened through a link) until the block ends; a target another process holds raises
    FileBusy naming `what`, the holder's pid and `advice`. As the run folder's lock: the OS
    drops it when its process dies, so a killed call never blocks the next."""
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        if path.is_symlink():
            raise FileBusy(f"{path} (the lock of {what}) is a symbolic link: remove it") from None
        raise OSError(f"{path} (the lock of {what}): {err.strerror}") from None
    holder = _take(fd)
    if holder is not None:
        raise FileBusy(f"{what} is in use by another process (pid {holder}; lock {path}): {advice}")
    try:
        yield
    finally:
        os.close(fd)


def holder(folder: Path) -> str | None:
    """The pid holding the run folder's lock, or None when no process holds it (nothing is
    written: a command that refuses a busy folder before it starts, as `rmlib lab`, leaves it
    as it was)."""
    path = folder / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None  # no lock file (no process ever held it), or a link: not held by a run
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
    finally:
        os.close(fd)
    return None
