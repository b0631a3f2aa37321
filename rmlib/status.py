"""What a run is doing now, shown in the terminal that started it.

`rmlib run` executes each notebook in a Jupyter kernel, so the progress bars of its long steps
land in the notebook, not in the terminal. The kernel's long steps call `report(step, done,
total)`; when the runner has set `RMLIB_STATUS` to a file path, the latest report is written there
(atomically, at most once a second, so reporting costs nothing next to a generation), and the
runner's `Watcher` shows it with the notebook's elapsed time and an ETA. Without the variable (a
notebook opened in JupyterLab) `report` does nothing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from rmlib.writes import write_text

ENV = "RMLIB_STATUS"
_state: dict[str, Any] = {"written": 0.0, "step": None}


def report(step: str, done: int, total: int | None) -> None:
    """Record that `step` has done `done` of `total` units (a new step or total restarts its
    clock, so the ETA reads the current step's own rate)."""
    path = os.environ.get(ENV)
    if not path:
        return
    now = time.time()
    if _state["step"] != (step, total) or done < _state.get("done", 0):
        _state.update(step=(step, total), since=now, first=done)
    _state["done"] = done
    finished = total is not None and done >= total
    if not finished and now - _state["written"] < 1.0:
        return
    _state["written"] = now
    row = {"step": step, "done": done, "total": total, "since": _state["since"], "at": now}
    row["first"] = _state["first"]
    write_text(path, json.dumps(row))


def line(notebook: str, started: float, row: dict[str, Any] | None, now: float) -> str:
    """`02_rollouts  3:12 · warm-up steps 40/64 (62%) · ETA 1:05`."""
    text = f"{notebook}  {_clock(now - started)}"
    if not row:
        return text
    done, total = row["done"], row["total"]
    text += f" · {row['step']} {done}" + (f"/{total} ({done / total:.0%})" if total else "")
    rate_done, spent = done - row["first"], row["at"] - row["since"]
    if total and rate_done > 0 and spent > 0 and done < total:
        text += f" · ETA {_clock((total - done) * spent / rate_done)}"
    return text


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Watcher(threading.Thread):
    """Shows a notebook's status line while it runs: redrawn in place on a terminal, one line a
    minute otherwise (a log file or CI)."""

    def __init__(
        self, path: Path, notebook: str, stream: IO[str] = sys.stderr, every: float | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.path, self.notebook, self.stream = path, notebook, stream
        self.started = time.time()
        self.tty = stream.isatty()
        self.every = every or (1.0 if self.tty else 60.0)
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every):
            text = line(self.notebook, self.started, self._read(), time.time())
            self.stream.write(f"\r\033[K{text}" if self.tty else f"{text}\n")
            self.stream.flush()

    def stop(self) -> None:
        self._halt.set()
        self.join()
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _read(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
