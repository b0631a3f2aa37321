"""The one way rmlib reads a file a user names (pairs, predictions, params, constants, lengths,
model configs): a regular file under a size limit, or one line refusing it.

A device (`/dev/zero`, `/dev/urandom`), a pipe, or a link to one has no end: read whole, it ends
in a MemoryError traceback (or never). So the file is opened (without blocking: a pipe with no
writer would hang the open), its kind and size read from the open descriptor (a link is followed
to what it names, so a link to a device is a device), and at most `limit` bytes are read; a file
that grows past the limit while it is read is refused too. Python's `open` and pathlib have no
such bound, hence this module.
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path

# Pairs and predictions files: the largest benchmark file on this project's machines is a few
# MB; a full RewardBench-sized export with long responses stays far below this.
DATA_LIMIT = 2 << 30  # 2 GiB
# Params, constants, lengths files and model configs: a few kB each.
SMALL_LIMIT = 16 << 20  # 16 MiB

_KINDS = {
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISFIFO: "a pipe",
    stat.S_ISSOCK: "a socket",
    stat.S_ISDIR: "a folder",
}


class UnreadableInput(ValueError):
    """A file rmlib reads is not a regular file or is over its size limit; `reason` says which
    (the message is `<path>: <reason>`)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


def _size(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):g} GiB"
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def read_bytes(path: str | Path, what: str, limit: int = SMALL_LIMIT) -> bytes:
    """The whole of `path` (`what` names it in the refusal), a regular file of at most `limit`
    bytes; a `.gz` file is decompressed, its content bounded by `limit` as well. Raises
    UnreadableInput (one line) for anything else; OSError as `open` does (missing file, ...)."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            kind = next((k for test, k in _KINDS.items() if test(mode.st_mode)), "no file")
            link = " (through a symbolic link)" if path.is_symlink() else ""
            raise UnreadableInput(
                path, f"the {what} is {kind}{link}, not a regular file: give a file"
            )
        if mode.st_size > limit:
            raise UnreadableInput(path, f"the {what} is over its size limit ({_size(limit)})")
        if path.name.endswith(".gz"):
            try:
                data = gzip.GzipFile(fileobj=fh).read(limit + 1)
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                raise UnreadableInput(path, f"unreadable file ({e})") from None
        else:
            data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnreadableInput(path, f"the {what} is over its size limit ({_size(limit)})")
    return data


def read_text(
    path: str | Path, what: str, limit: int = SMALL_LIMIT, encoding: str = "utf-8"
) -> str:
    """`read_bytes` decoded; a file that is not `encoding` text is one UnreadableInput line."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise UnreadableInput(
            path, f"the {what} is not {encoding} text (byte 0x{data[e.start]:02x} at {e.start})"
        ) from None
