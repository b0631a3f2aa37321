"""The one way rmlib writes a file it owns (a run folder's params, tables, metrics, state, logs,
figures, adapters' cards...): never through a symbolic link.

A link planted where a run writes (by mistake, or by another user of a shared folder) would make
the run overwrite, truncate or append to a file elsewhere. So a whole file is written to a fresh
temporary file in the same folder (created with O_EXCL: never an existing name, never a link)
and renamed over its name: `os.replace` replaces a link rather than writing through it, and a
killed process leaves the old file, never half a file. A file appended to is opened with
O_NOFOLLOW. A link in place of a file that must not be replaced (the run folder's lock, its
params) is refused with `LinkedFile`, one line naming it. The folders themselves may be links
(a run folder or `run.output_root` on a data disk): only the last component is never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    """This process's umask: read where Linux shows it (setting it to read it back would race
    with another thread creating a file), else set and restored."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# the mode a plain open() would give a new file: mkstemp's files are 0600
_UMASK = _umask()
FILE_MODE = 0o666 & ~_UMASK


class LinkedFile(OSError):
    """A file rmlib writes is a symbolic link where it refuses to replace one; names it."""


def refuse_link(path: str | Path, what: str) -> None:
    """Raise LinkedFile when `path` is a symbolic link (`what` says which file it is)."""
    path = Path(path)
    if path.is_symlink():
        raise LinkedFile(
            f"{path} ({what}) is a symbolic link (to {os.readlink(path)}): rmlib never writes "
            "through a link; remove it and run again"
        )


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary path beside `path` (`.NAME.XXXXXXXX.tmp`); when the block ends
    without error it is renamed over `path` (a link there is replaced, its target untouched),
    else removed. For writers that take a path (pandas; matplotlib, given its `format`)."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` as the whole of `path` (atomically, never through a link)."""
    path = Path(path)
    with replacing(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    return path


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write `text` as the whole of `path` (atomically, never through a link)."""
    return write_bytes(path, text.encode(encoding))


def open_append(path: str | Path, encoding: str = "utf-8"):
    """Open `path` for appending text without following a link: a link in its place is removed
    (its target untouched) and a fresh file started."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        path.unlink()  # the link itself
        fd = os.open(path, flags | os.O_EXCL, 0o666)
    return os.fdopen(fd, "a", encoding=encoding)


def open_fresh(path: str | Path):
    """Open `path` for writing from empty, in binary (a log a child process writes into): a
    link in its place is removed first (its target untouched), and none is followed."""
    path = Path(path)
    unlink_link(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o666), "wb")


def own_text(path: str | Path, encoding: str = "utf-8") -> str | None:
    """The text of a file rmlib writes and reads back (metrics, state): None when it is absent
    or a symbolic link (not the run's own: it is replaced at the next write)."""
    path = Path(path)
    if path.is_symlink() or not path.exists():
        return None
    return path.read_text(encoding=encoding)


def unlink_link(path: str | Path) -> None:
    """Remove `path` when it is a symbolic link (for a writer that opens its own file by name,
    papermill's executed notebook): it then writes a file of its own there."""
    path = Path(path)
    if path.is_symlink():
        path.unlink()


def unlink_links(folder: str | Path) -> None:
    """Remove every symbolic link inside `folder` (files and folders, at any depth; links are
    not followed, their targets untouched): before a library that writes files by name of its
    own (Trainer's checkpoints, `datasets`' save_to_disk) writes into the folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(root) / name
            if path.is_symlink():
                path.unlink()
